//! The commit fence (cryo-core's `govern::CommitFence`): Cryo's commits and cooperating writers'
//! operations never overlap on one table.
//!
//! Cryo's side is an option (`commitFence: fence` on `compact`, `rewritePositionDeletes`,
//! `rewriteManifests`, `expireSnapshots`, `run`, `runFleet`); `index.js` passes a
//! [`CommitFence`] as the plain `{ dir, wait_ms }` the core option reads ([`CommitFence::to_option`]).
//! A writer's side is [`CommitFence::writer`]: hold the [`WriterFence`] it resolves to from before
//! the operation reads the table until after it committed, then `release()` it.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use cryo_core::catalog::TableId;
use cryo_core::govern::{CommitFence as CoreFence, FenceGuard};
use napi_derive::napi;
use serde_json::{Value, json};

use crate::errors::{self, check};
use crate::runtime::blocking;

/// Options of a fence: how long a commit of Cryo's waits for writers in flight.
#[napi(object)]
pub struct CommitFenceOptions {
    /// Longest a commit of Cryo's waits for writers' operations in flight, in milliseconds
    /// (cryo-core's default: 60 s). Writers holding it longer make the commit a conflict:
    /// nothing is committed and the files it wrote are deleted.
    pub wait_ms: Option<i64>,
    /// A PostgreSQL URI (the SQL catalog's own database, say): the fence is advisory locks
    /// there, for writers and maintainers on many machines; `dir` is then unused (give `""`).
    pub database: Option<String>,
}

/// A commit fence shared by writers and Cryo, through OS file locks in `dir` (every process on
/// one host, or on a filesystem with working `flock`, that uses the same directory).
#[napi]
pub struct CommitFence {
    inner: CoreFence,
}

#[napi]
impl CommitFence {
    /// `new CommitFence("/var/lib/cryo/fence", { waitMs: 30_000 })`.
    #[napi(constructor)]
    pub fn new(dir: String, options: Option<CommitFenceOptions>) -> napi::Result<Self> {
        let mut inner = CoreFence::new(PathBuf::from(dir));
        let (wait_ms, database) = options.map_or((None, None), |o| (o.wait_ms, o.database));
        inner.database = database;
        if let Some(wait_ms) = wait_ms {
            inner.wait_ms = u64::try_from(wait_ms).map_err(|_| {
                errors::validation(format!(
                    "commit fence: waitMs must not be negative, got {wait_ms}"
                ))
            })?;
        }
        check(inner.validate())?;
        Ok(Self { inner })
    }

    /// The directory of the fence files.
    #[napi(getter)]
    pub fn dir(&self) -> String {
        self.inner.dir.display().to_string()
    }

    /// Longest a commit of Cryo's waits for writers in flight (milliseconds).
    #[napi(getter)]
    pub fn wait_ms(&self) -> i64 {
        i64::try_from(self.inner.wait_ms).unwrap_or(i64::MAX)
    }

    /// Hold the fence for one writer operation on `catalog`.`table` (`catalog`: the name given
    /// to `Catalog.connect`). Resolves once no commit of Cryo's on the table is in progress
    /// (waiting off the JS thread); shared with other writers until `release()`.
    #[napi]
    pub async fn writer(&self, catalog: String, table: String) -> napi::Result<WriterFence> {
        let table = check(TableId::parse(&table))?;
        let fence = self.inner.clone();
        let name = format!("{catalog}.{table}");
        let guard = blocking(move || fence.enter_writer(&catalog, &table)).await?;
        Ok(WriterFence {
            name,
            guard: Mutex::new(Some(guard)),
        })
    }

    /// The option cryo-core reads (`{ dir, wait_ms }`); `index.js` passes a fence given as
    /// `commitFence` this way.
    #[napi(ts_return_type = "{ dir: string; wait_ms: number; database?: string }")]
    pub fn to_option(&self) -> Value {
        match &self.inner.database {
            Some(db) => json!({ "dir": self.dir(), "wait_ms": self.inner.wait_ms, "database": db }),
            None => json!({ "dir": self.dir(), "wait_ms": self.inner.wait_ms }),
        }
    }

    /// `CommitFence(/var/lib/cryo/fence, waitMs=60000)`.
    #[napi]
    #[allow(
        clippy::inherent_to_string,
        reason = "JS calls toString(); Display is not visible from JS"
    )]
    pub fn to_string(&self) -> String {
        format!(
            "CommitFence({}, waitMs={})",
            self.inner.dir.display(),
            self.inner.wait_ms
        )
    }
}

/// The fence held for one writer operation; `release()` it once the operation committed (or
/// failed). Released as well when garbage-collected or when the process exits.
#[napi]
pub struct WriterFence {
    name: String,
    guard: Mutex<Option<FenceGuard>>,
}

#[napi]
impl WriterFence {
    /// Let Cryo's commits in again (a no-op once released).
    #[napi]
    pub fn release(&self) {
        self.guard
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    /// Whether this writer still holds the fence.
    #[napi(getter)]
    pub fn held(&self) -> bool {
        self.guard
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// `WriterFence(lake.db.events, held)`.
    #[napi]
    #[allow(
        clippy::inherent_to_string,
        reason = "JS calls toString(); Display is not visible from JS"
    )]
    pub fn to_string(&self) -> String {
        let state = if self.held() { "held" } else { "released" };
        format!("WriterFence({}, {state})", self.name)
    }
}
