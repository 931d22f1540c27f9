//! The commit fence (cryo-core's `govern::CommitFence`): Cryo's commits and cooperating writers'
//! operations never overlap on one table.
//!
//! Cryo's side is an option (`commitFence: fence` on `compact`, `rewritePositionDeletes`,
//! `rewriteManifests`, `expireSnapshots`, `run`, `runFleet`); `index.js` passes a
//! [`CommitFence`] as the plain `{ dir, wait_ms }` the core option reads ([`CommitFence::to_option`]).
//! A writer's side is [`CommitFence::writer`]: hold the [`WriterFence`] it resolves to from before
//! the operation reads the table until after it committed, then `release()` it.

use std::collections::HashMap;
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
    /// A location on object storage (`s3://bucket/cryo/fence`, `abfss://…`, `gs://…`): the
    /// fence is lease objects there, for writers and maintainers that share only the bucket;
    /// `dir` is then unused (give `""`).
    pub location: Option<String>,
    /// Storage properties for `location`, PyIceberg's names (the catalog's `s3.*`, say).
    /// Without them Cryo's commits use the table's storage, writers their environment's.
    pub properties: Option<HashMap<String, String>>,
    /// How long a killed holder of a fence object keeps the others out, in milliseconds
    /// (default 60 s).
    pub lease_ms: Option<i64>,
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
        let options = options.unwrap_or(CommitFenceOptions {
            wait_ms: None,
            database: None,
            location: None,
            properties: None,
            lease_ms: None,
        });
        inner.database = options.database;
        inner.location = options.location;
        inner.properties = options.properties.unwrap_or_default().into_iter().collect();
        let ms = |name: &str, v: i64| {
            u64::try_from(v).map_err(|_| {
                errors::validation(format!(
                    "commit fence: {name} must not be negative, got {v}"
                ))
            })
        };
        if let Some(wait_ms) = options.wait_ms {
            inner.wait_ms = ms("waitMs", wait_ms)?;
        }
        if let Some(lease_ms) = options.lease_ms {
            inner.lease_ms = ms("leaseMs", lease_ms)?;
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
    #[napi(
        ts_return_type = "{ dir: string; wait_ms: number; database?: string; location?: string; properties?: Record<string, string>; lease_ms?: number }"
    )]
    pub fn to_option(&self) -> Value {
        let mut option = json!({ "dir": self.dir(), "wait_ms": self.inner.wait_ms });
        if let Some(db) = &self.inner.database {
            option["database"] = json!(db);
        }
        if let Some(location) = &self.inner.location {
            option["location"] = json!(location);
            option["properties"] = json!(self.inner.properties);
            option["lease_ms"] = json!(self.inner.lease_ms);
        }
        option
    }

    /// `CommitFence(/var/lib/cryo/fence, waitMs=60000)`.
    #[napi]
    #[allow(
        clippy::inherent_to_string,
        reason = "JS calls toString(); Display is not visible from JS"
    )]
    pub fn to_string(&self) -> String {
        if self.inner.database.is_some() {
            return format!("CommitFence(database=<set>, waitMs={})", self.inner.wait_ms);
        }
        if let Some(location) = &self.inner.location {
            return format!(
                "CommitFence(location={location}, waitMs={}, leaseMs={})",
                self.inner.wait_ms, self.inner.lease_ms
            );
        }
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
