//! The one storage stack: `object_store` behind iceberg's public `Storage`/`StorageFactory` traits.
//!
//! Every byte Cryo reads or writes (metadata, manifests, data files, orphan listings) goes through
//! [`ObjectStorage`], configured with the same property names PyIceberg and Java use
//! (`s3.endpoint`, `s3.access-key-id`, …). Each storage carries [`IoCounters`] that count reads by
//! kind of path, which is how the tests prove the scanner reads metadata only.

mod counters;
mod storage;

pub use counters::{IoCounters, IoSnapshot, PathKind};
pub(crate) use storage::local_file_path;
pub use storage::{ObjectStorage, ObjectStorageFactory, StoreLocation, normalize_location};
#[cfg(feature = "fuzz")]
#[doc(hidden)]
pub use storage::{install_memory_store, uninstall_memory_store};

/// Metadata reads (manifest lists, manifests) a scan or an expiry keeps in flight by default.
///
/// Object stores answer each request after a round trip of tens of milliseconds: at 30 ms per
/// request a scan of a million-file table (4,000 reads) took 5x its local time with 16 reads in
/// flight and 2x with 64 (benches/scale/README.md). On a local disk 64 cost nothing over 16.
pub(crate) const READS_IN_FLIGHT: usize = 64;
