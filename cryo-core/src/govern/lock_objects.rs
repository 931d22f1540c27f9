//! Table locks on object storage: one lock object per table, held under a lease.
//!
//! ```text
//! acquire:  create <root>/<table>.lock if absent ──────────────── held
//!           exists, lease live ────────────────────────────────── Err(its holder)
//!           exists, lease expired: replace it if still that version ─ held (taken over)
//!                                  someone else replaced it first ── Err(the new holder)
//! held:     every lease/3, replace it if still the version we wrote (expiry moves on)
//! release:  stop renewing, delete it
//! ```
//!
//! Every write is conditional (create-if-absent, replace-if-version), so two maintainers never
//! both hold a table: the store decides. A holder killed while holding stops renewing; once its
//! lease has run out the next maintainer takes the lock over. Expiry is judged by the clocks
//! of the maintainers, which must agree to well within the lease (a minute by default).
//! Stores that cannot replace conditionally (local files) are refused: on one machine,
//! [`super::LocalLocks`] serves.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;

use super::lease::{LeaseRecord, Leases};
use super::lock::{LockGuard, LockHolder, TableLocks, table_file_stem};
use crate::catalog::TableId;
use crate::error::{Error, Result};
use crate::io::ObjectStorage;

/// Default lease: how long a crashed holder keeps others out.
pub const DEFAULT_LEASE_MS: u64 = 60_000;

/// Per-table locks as lease-held objects under a location on object storage.
#[derive(Clone)]
pub struct ObjectLocks {
    storage: ObjectStorage,
    root: String,
    lease_ms: u64,
}

impl fmt::Debug for ObjectLocks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectLocks")
            .field("root", &self.root)
            .field("lease_ms", &self.lease_ms)
            .finish_non_exhaustive()
    }
}

impl ObjectLocks {
    /// Locks under `root` (`s3://bucket/cryo/locks`, `abfss://…`, `gs://…`, `memory://…`),
    /// reached through `storage` (the catalog's, with its credentials).
    pub fn new(storage: ObjectStorage, root: &str) -> Result<Self> {
        let root = crate::io::normalize_location(root)?;
        if root.starts_with("file:") {
            return Err(Error::config(format!(
                "`{root}`: lock objects need a store that replaces an object only if unchanged; \
                 local files cannot, so give the directory as a lock directory instead"
            )));
        }
        Ok(Self {
            storage,
            root,
            lease_ms: DEFAULT_LEASE_MS,
        })
    }

    /// The lease (at least a second): how long a crashed holder keeps others out; a live
    /// holder renews it every third of it.
    #[must_use]
    pub fn with_lease_ms(mut self, lease_ms: u64) -> Self {
        self.lease_ms = lease_ms.max(1_000);
        self
    }

    fn location(&self, catalog: &str, table: &TableId) -> String {
        format!("{}/{}.lock", self.root, table_file_stem(catalog, table))
    }

    fn leases(&self) -> Leases {
        Leases {
            lease_ms: self.lease_ms,
            what: "table lock",
        }
    }

    fn record(&self, holder: &LockHolder, table: &TableId) -> Result<Bytes> {
        self.leases().record(holder, &table.to_string())
    }

    /// The guard of a lock just taken at `version`: renews the lease until dropped, then
    /// deletes the lock object.
    fn guard(
        &self,
        me: LockHolder,
        table: &TableId,
        location: String,
        version: object_store::UpdateVersion,
    ) -> LockGuard {
        let lost = Arc::new(AtomicBool::new(false));
        let renew = {
            let (locks, me, table, location, lost) = (
                self.clone(),
                me.clone(),
                table.clone(),
                location.clone(),
                Arc::clone(&lost),
            );
            tokio::spawn(async move {
                let table = table.to_string();
                let forever = std::future::pending::<()>();
                let taken_over = locks
                    .leases()
                    .renew(&locks.storage, &location, version, &me, &table, forever)
                    .await;
                lost.store(taken_over, Ordering::SeqCst);
            })
        };
        let storage = self.storage.clone();
        LockGuard::new(me, move || {
            renew.abort();
            if lost.load(Ordering::SeqCst) {
                return; // the lock object is someone else's now
            }
            // Deleting needs the runtime; without one, the lease runs out instead.
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    if let Err(e) = storage.delete(&location).await {
                        tracing::warn!(lock = %location, error = %e, "releasing the table lock failed; its lease will run out");
                    }
                });
            }
        })
    }
}

#[async_trait::async_trait]
impl TableLocks for ObjectLocks {
    async fn try_acquire(
        &self,
        catalog: &str,
        table: &TableId,
        holder: &str,
        now: i64,
    ) -> Result<std::result::Result<LockGuard, LockHolder>> {
        let location = self.location(catalog, table);
        let me = LockHolder::this_process(holder, now);
        // Twice at most: a lock released between our create and our read is created again.
        for _ in 0..2 {
            if let Some(v) = self
                .storage
                .create_versioned(&location, self.record(&me, table)?)
                .await?
            {
                return Ok(Ok(self.guard(me, table, location, v)));
            }
            let Some(current) = self.storage.read_versioned(&location).await? else {
                continue;
            };
            let (record, live) = self.leases().read(&current.bytes, current.last_modified_ms);
            let their = record.map_or_else(LockHolder::unknown, |r| r.holder);
            if live {
                return Ok(Err(their));
            }
            let taken = self
                .storage
                .replace_if(&location, self.record(&me, table)?, current.version)
                .await?;
            if let Some(v) = taken {
                tracing::warn!(table = %table, previous = %their.holder, previous_host = %their.host, "took over a table lock whose lease had run out");
                return Ok(Ok(self.guard(me, table, location, v)));
            }
            // Someone else took it over first.
            let now_held = self.storage.read_versioned(&location).await?;
            return Ok(Err(now_held
                .and_then(|v| serde_json::from_slice::<LeaseRecord>(&v.bytes).ok())
                .map_or_else(LockHolder::unknown, |r| r.holder)));
        }
        Ok(Err(LockHolder::unknown()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::govern::lock::now_ms;
    use crate::io::ObjectStorageFactory;
    use std::collections::HashMap;
    use std::time::Duration;

    fn locks(root: &str, lease_ms: u64) -> ObjectLocks {
        let storage = ObjectStorageFactory::new().storage(HashMap::new());
        ObjectLocks::new(storage, root)
            .unwrap()
            .with_lease_ms(lease_ms)
    }

    #[tokio::test]
    async fn one_holder_a_lease_renewed_and_a_dead_holder_taken_over() {
        let root = format!("memory://locks-{}/cryo", uuid::Uuid::new_v4().simple());
        let a = locks(&root, 1_000);
        let t = TableId::parse("db.t").unwrap();
        let held = a.try_acquire("c", &t, "a", 1).await.unwrap().unwrap();
        let b = locks(&root, 1_000);
        let busy = b.try_acquire("c", &t, "b", 2).await.unwrap().unwrap_err();
        assert_eq!((busy.holder.as_str(), busy.pid), ("a", std::process::id()));
        // Renewed while held: still busy after two leases.
        tokio::time::sleep(Duration::from_millis(2_100)).await;
        assert!(b.try_acquire("c", &t, "b", 3).await.unwrap().is_err());
        // Other tables and catalogs are free.
        assert!(b.try_acquire("c2", &t, "b", 3).await.unwrap().is_ok());
        // Released: free at once.
        drop(held);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let again = b.try_acquire("c", &t, "b", 4).await.unwrap().unwrap();
        // A holder that stops renewing (its process died) is taken over after its lease.
        let stale = LeaseRecord {
            holder: LockHolder::this_process("dead", 0),
            expires_ms: now_ms() - 1,
            table: t.to_string(),
        };
        drop(again);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let loc = b.location("c", &t);
        b.storage
            .write_all(&loc, Bytes::from(serde_json::to_vec(&stale).unwrap()))
            .await
            .unwrap();
        let taken = a.try_acquire("c", &t, "a2", 5).await.unwrap().unwrap();
        assert_eq!(taken.holder.holder, "a2");
        assert_eq!(
            b.try_acquire("c", &t, "b", 6)
                .await
                .unwrap()
                .unwrap_err()
                .holder,
            "a2"
        );
    }

    #[test]
    fn local_files_are_refused() {
        let storage = ObjectStorageFactory::new().storage(HashMap::new());
        let e = ObjectLocks::new(storage, "file:///tmp/locks").unwrap_err();
        assert!(e.to_string().contains("lock directory"), "{e}");
    }
}
