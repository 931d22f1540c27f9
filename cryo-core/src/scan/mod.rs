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

pub mod arrow;
mod fleet;
mod model;
pub(crate) mod partition;
mod scanner;

pub use fleet::{
    FleetScan, FleetScanOptions, TableScanError, scan_fleet, scan_fleet_with_progress,
};
pub use model::*;
pub use partition::days_from_epoch;
pub use scanner::{ScanOptions, list_files, scan_loaded, scan_table};
