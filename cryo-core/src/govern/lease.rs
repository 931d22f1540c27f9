//! Lease objects on object storage: what table locks ([`super::ObjectLocks`]) and the commit
//! fence's gate and writer objects hold, how they are judged live, and how a holder renews one.
//!
//! ```text
//! held:     every lease/3, replace it if still the version we wrote (its end moves on)
//!           the version changed: someone took it over (our lease had run out) ── lost
//!           a failed renewal is tried again (the lease outlives two of them)
//! ```
//!
//! Expiry is judged by the clocks of the holders, which must agree to well within the lease.

use std::time::Duration;

use bytes::Bytes;
use object_store::UpdateVersion;
use serde::{Deserialize, Serialize};

use super::lock::{LockHolder, now_ms};
use crate::error::{Error, Result};
use crate::io::ObjectStorage;

/// What a lease object holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct LeaseRecord {
    #[serde(flatten)]
    pub holder: LockHolder,
    /// The lease's end (ms since the epoch, the holder's clock).
    pub expires_ms: i64,
    /// The table, for whoever lists the objects.
    pub table: String,
}

/// One kind of lease object: its length, and what logs and errors call it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Leases {
    pub lease_ms: u64,
    /// "table lock", "commit fence lease".
    pub what: &'static str,
}

impl Leases {
    /// The body of a lease `holder` takes (or renews) now on `table`.
    pub fn record(&self, holder: &LockHolder, table: &str) -> Result<Bytes> {
        let record = LeaseRecord {
            holder: holder.clone(),
            expires_ms: now_ms() + self.lease_ms as i64,
            table: table.to_string(),
        };
        serde_json::to_vec(&record)
            .map(Bytes::from)
            .map_err(|e| Error::compute(self.what, e))
    }

    /// An object read as `bytes` (last modified at `modified_ms`): its record, and whether its
    /// lease is live. Not a record (torn, foreign): live until it is as old as a lease.
    pub fn read(&self, bytes: &[u8], modified_ms: i64) -> (Option<LeaseRecord>, bool) {
        match serde_json::from_slice::<LeaseRecord>(bytes) {
            Ok(r) => {
                let live = r.expires_ms >= now_ms();
                (Some(r), live)
            }
            Err(_) => (None, modified_ms + self.lease_ms as i64 >= now_ms()),
        }
    }

    /// Renew the lease object at `location` (written at `version` by `holder`) every third of
    /// the lease until `stop` completes (`false`) or the lease is lost to another holder
    /// (`true`, said in the log). Deleting the object is the caller's.
    pub async fn renew(
        &self,
        storage: &ObjectStorage,
        location: &str,
        mut version: UpdateVersion,
        holder: &LockHolder,
        table: &str,
        stop: impl Future<Output = ()>,
    ) -> bool {
        let period = Duration::from_millis((self.lease_ms / 3).max(100));
        let mut stop = std::pin::pin!(stop);
        loop {
            tokio::select! {
                biased;
                () = &mut stop => return false,
                () = tokio::time::sleep(period) => {}
            }
            let renewed = match self.record(holder, table) {
                Ok(body) => storage.replace_if(location, body, version.clone()).await,
                Err(e) => Err(e),
            };
            match renewed {
                Ok(Some(v)) => version = v,
                Ok(None) => {
                    tracing::error!(
                        table,
                        object = location,
                        "the {} was lost: it ran out before it was renewed",
                        self.what
                    );
                    return true;
                }
                Err(e) => {
                    tracing::warn!(table, error = %e, "renewing the {} failed", self.what);
                }
            }
        }
    }
}
