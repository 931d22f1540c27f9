//! The commit fence on object storage: lease objects, for writers and maintainers on machines
//! that share nothing but a bucket.
//!
//! ```text
//! <root>/<table>/gate               a commit of Cryo's: created if absent, one at a time
//! <root>/<table>/writers/<id>.json  one writer's operation
//!
//! writer:  write writers/<id> ── read gate: absent or its lease ran out ── in
//!                                           live ── delete writers/<id>, wait, again
//! Cryo:    create gate (or take over one whose lease ran out; another live one: wait)
//!          ── list writers/ until none is live ── in
//!             the deadline passes first ── delete the gate, give up
//! held:    the lease renewed every third of it; released: renewal stops, the object goes
//! ```
//!
//! No writer and no commit of Cryo's are ever in at once: a writer writes its object before it
//! reads the gate, Cryo creates the gate before it lists the writers, and S3, GCS and Azure
//! read and list their own writes at once. A writer that saw no gate wrote its object before
//! the gate was created, so Cryo's listing, later still, sees it. A holder killed while in
//! stops renewing and is ignored once its lease has run out; expiry is judged by the clocks of
//! the processes, which must agree to well within the lease.
//!
//! The leases are renewed on a small runtime of the fence's own, so a writer's fence (held
//! across the caller's own code, with no runtime of Cryo's running) keeps its lease alive.

use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use object_store::UpdateVersion;

use crate::catalog::TableId;
use crate::error::{Error, Result};
use crate::govern::LockHolder;
use crate::govern::lease::Leases;
use crate::govern::lock::now_ms;
use crate::io::ObjectStorage;

/// How often a waiting writer reads the gate again, and a waiting commit lists the writers.
const POLL: Duration = Duration::from_millis(100);

/// Where one table's fence objects live, and how to reach them.
#[derive(Clone)]
pub(super) struct ObjectFence {
    pub storage: ObjectStorage,
    /// `<root>/<table stem>`.
    pub prefix: String,
    pub table: TableId,
    pub lease_ms: u64,
}

impl ObjectFence {
    fn gate(&self) -> String {
        format!("{}/gate", self.prefix)
    }

    fn writers(&self) -> String {
        format!("{}/writers/", self.prefix)
    }

    fn leases(&self) -> Leases {
        Leases {
            lease_ms: self.lease_ms,
            what: "commit fence lease",
        }
    }

    fn record(&self, holder: &LockHolder) -> Result<Bytes> {
        self.leases().record(holder, &self.table.to_string())
    }

    /// Whether an object read as `bytes` (last modified at `modified_ms`) holds a live lease.
    fn live(&self, bytes: &[u8], modified_ms: i64) -> bool {
        self.leases().read(bytes, modified_ms).1
    }

    /// For a writer: wait while a commit of Cryo's holds the gate, then hold a writer object.
    async fn enter_writer(self) -> Result<Lease> {
        let me = LockHolder::this_process("writer", now_ms());
        let location = format!("{}{}.json", self.writers(), crate::random::uuid().simple());
        loop {
            let Some(version) = self
                .storage
                .create_versioned(&location, self.record(&me)?)
                .await?
            else {
                return Err(Error::Internal(format!(
                    "commit fence: writer object {location} exists already"
                )));
            };
            let gate = self.storage.read_versioned(&self.gate()).await?;
            if !gate.is_some_and(|g| self.live(&g.bytes, g.last_modified_ms)) {
                return Lease::keep(self, me, location, version);
            }
            // Cryo is committing: step out of its way, and wait for the gate to go.
            self.storage.delete(&location).await?;
            loop {
                tokio::time::sleep(POLL).await;
                match self.storage.read_versioned(&self.gate()).await? {
                    Some(g) if self.live(&g.bytes, g.last_modified_ms) => {}
                    _ => break,
                }
            }
        }
    }

    /// For Cryo's commit: take the gate, then wait until no writer is in. `None`: another
    /// commit held the gate, or writers were in, until `deadline`.
    async fn enter_commit(self, deadline: Instant) -> Result<Option<Lease>> {
        let me = LockHolder::this_process("cryo commit", now_ms());
        let gate = self.gate();
        let version = loop {
            if let Some(v) = self
                .storage
                .create_versioned(&gate, self.record(&me)?)
                .await?
            {
                break v;
            }
            if let Some(current) = self.storage.read_versioned(&gate).await?
                && !self.live(&current.bytes, current.last_modified_ms)
                && let Some(v) = self
                    .storage
                    .replace_if(&gate, self.record(&me)?, current.version)
                    .await?
            {
                tracing::warn!(table = %self.table, "took over a commit fence gate whose lease had run out");
                break v;
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(POLL).await;
        };
        // The gate is ours from here: renewed while the writers finish, released on give-up.
        let lease = Lease::keep(self.clone(), me, gate, version)?;
        let entered = loop {
            match self.any_writer_in().await {
                Ok(false) => break Ok(true),
                Ok(true) if Instant::now() >= deadline => break Ok(false),
                Ok(true) => tokio::time::sleep(POLL).await,
                Err(e) => break Err(e),
            }
        };
        if let Ok(true) = entered {
            return Ok(Some(lease));
        }
        // Released off this runtime's only worker (dropping waits for the deletion, which
        // runs on it).
        let _ = tokio::task::spawn_blocking(move || drop(lease)).await;
        entered.map(|_| None)
    }

    /// Whether any writer object holds a live lease (those whose lease ran out are deleted).
    async fn any_writer_in(&self) -> Result<bool> {
        for object in self.storage.list(&self.writers()).await? {
            let Some(current) = self.storage.read_versioned(&object.location).await? else {
                continue; // gone since it was listed
            };
            if self.live(&current.bytes, current.last_modified_ms) {
                return Ok(true);
            }
            tracing::warn!(table = %self.table, writer = %object.location, "a writer's commit fence lease ran out; ignoring it");
            self.storage.delete(&object.location).await?;
        }
        Ok(false)
    }
}

/// The fence's own runtime: renews leases whatever the caller runs on.
fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> =
        OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("cryo-commit-fence")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Error::Internal(format!("commit fence runtime: {e}")))
}

/// A held lease object: renewed every third of the lease until dropped, then deleted.
pub(super) struct Lease {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: mpsc::Receiver<()>,
    location: String,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

impl Lease {
    fn keep(
        fence: ObjectFence,
        me: LockHolder,
        location: String,
        version: UpdateVersion,
    ) -> Result<Self> {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (done_tx, done) = mpsc::channel();
        let at = location.clone();
        runtime()?.spawn(async move {
            let mut stopped = stopped;
            let table = fence.table.to_string();
            let stop = async {
                let _ = (&mut stopped).await;
            };
            let lost = fence
                .leases()
                .renew(&fence.storage, &at, version, &me, &table, stop)
                .await;
            if lost {
                // Someone else's now: left alone until the holder lets go.
                let _ = stopped.await;
            } else if let Err(e) = fence.storage.delete(&at).await {
                tracing::warn!(object = %at, error = %e, "releasing the commit fence failed; its lease will run out");
            }
            let _ = done_tx.send(());
        });
        Ok(Self {
            stop: Some(stop),
            done,
            location,
        })
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
            // Released once the object is gone: the next commit or writer need not wait for
            // the lease to run out. Bounded: a store that does not answer leaves the lease.
            let _ = self.done.recv_timeout(Duration::from_secs(10));
        }
    }
}

/// For a writer (blocking): see [`ObjectFence::enter_writer`].
pub(super) fn enter_writer(fence: ObjectFence) -> Result<Lease> {
    let rt = runtime()?;
    // On a thread of its own: the caller may be on a runtime's thread, where blocking on
    // another runtime is refused.
    std::thread::scope(|s| {
        s.spawn(|| rt.block_on(fence.enter_writer()))
            .join()
            .map_err(|_| Error::Internal("commit fence: the writer's thread panicked".into()))?
    })
}

/// For Cryo's commit: see [`ObjectFence::enter_commit`] (run on the fence's runtime).
pub(super) async fn enter_commit(fence: ObjectFence, deadline: Instant) -> Result<Option<Lease>> {
    runtime()?
        .spawn(fence.enter_commit(deadline))
        .await
        .map_err(|e| Error::Internal(format!("commit fence: {e}")))?
}
