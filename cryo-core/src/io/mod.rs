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
