//! Scanning: a table's metadata (never its data files) into a [`TableScan`].
//!
//! ```text
//! metadata.json ──▶ snapshots, refs, specs, sort order, properties, metadata-log
//!      │
//!      └─▶ manifest lists (every snapshot) ──▶ manifests (current snapshot)
//!                                                  └─▶ per-file entries ──▶ per-partition figures
//! ```
//!
//! Reads are bounded in concurrency; a fleet scan ([`scan_fleet`]) turns one broken table into
//! an error entry instead of failing. Per-partition and per-file results are also available as
//! Arrow record batches ([`arrow`]).
//!
//! # Example
//!
//! Scan the demo lake: every figure comes from metadata, and no data file is read.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use cryo_core::clock::SystemClock;
//! use cryo_core::demo::{DemoOptions, create_demo_lake};
//! use cryo_core::io::PathKind;
//! use cryo_core::scan::{FleetScanOptions, scan_fleet};
//!
//! let dir = tempfile::tempdir()?;
//! let lake = create_demo_lake(dir.path(), &DemoOptions::default()).await?;
//! let fleet = scan_fleet(&lake.catalog, &FleetScanOptions::default(), &SystemClock).await?;
//! assert_eq!(fleet.tables.len(), 5);
//! assert!(fleet.errors.is_empty());
//!
//! // A streaming writer's table: hundreds of snapshots of tiny files, in day partitions.
//! let clicks = fleet.tables.iter().find(|s| s.table.to_string() == "lake.clickstream").unwrap();
//! let built = lake.table("lake.clickstream").unwrap(); // what the generator wrote
//! assert_eq!(clicks.snapshots.count as u64, built.snapshots);
//! assert_eq!(clicks.data_files.count, built.data_files);
//! assert_eq!(clicks.data_files.small_count, clicks.data_files.count);
//! assert!(clicks.partitions.len() >= 10);
//! // Metadata only: manifests were read, data files never.
//! assert!(clicks.io.reads_of(PathKind::Manifest) > 0);
//! assert_eq!(clicks.io.reads_of(PathKind::DataFile), 0);
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

pub mod arrow;
mod fleet;
mod memo;
mod model;
pub(crate) mod partition;
mod scanner;

pub use fleet::{
    FleetScan, FleetScanOptions, TableScanError, scan_fleet, scan_fleet_with_progress,
};
pub use model::{
    ColumnInfo, ColumnStatsCoverage, DeleteKindStats, DeleteStats, FileEntry, FileStats,
    ManifestStats, MetadataFileStats, PartitionFieldInfo, PartitionFieldValue, PartitionSpecInfo,
    PartitionStats, PartitionValue, PartitioningInfo, RefInfo, SchemaInfo, SizeHistogram,
    SnapshotInfo, SnapshotStats, SortFieldInfo, SortOrderInfo, TableScan, WriteSettings,
};
pub use partition::days_from_epoch;
pub use scanner::{ScanOptions, file_batches, list_files, scan_loaded, scan_table};
