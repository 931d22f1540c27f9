//! What a table's state costs per month, and what maintenance would save.
//!
//! Storage is priced per GB-month (S3 Standard list price by default); requests per thousand.
//! Small files cost requests: every scan issues at least [`CostModel::gets_per_file_read`] GETs
//! per file it opens, so files beyond the ideal count cost `excess × gets × scans × price`.
//! Snapshots cost storage for the files only they still reference, estimated from snapshot
//! summaries (`removed-files-size`) without reading old manifests.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::ops::Operation;
use crate::scan::TableScan;

const GB: f64 = 1e9;

/// Prices and usage assumptions. All configurable; defaults are S3 Standard list prices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CostModel {
    /// USD per GB-month of storage.
    pub storage_usd_per_gb_month: f64,
    /// USD per 1,000 GET requests.
    pub get_usd_per_1000: f64,
    /// USD per 1,000 PUT/LIST requests.
    pub put_usd_per_1000: f64,
    /// Full-table scans per month (queries that plan and open every file).
    pub scans_per_month: f64,
    /// GET requests per file opened (footer + at least one range).
    pub gets_per_file_read: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        Self {
            storage_usd_per_gb_month: 0.023,
            get_usd_per_1000: 0.0004,
            put_usd_per_1000: 0.005,
            scans_per_month: 720.0,
            gets_per_file_read: 2.0,
        }
    }
}

impl CostModel {
    /// Reject negative or non-finite prices.
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("storage_usd_per_gb_month", self.storage_usd_per_gb_month),
            ("get_usd_per_1000", self.get_usd_per_1000),
            ("put_usd_per_1000", self.put_usd_per_1000),
            ("scans_per_month", self.scans_per_month),
            ("gets_per_file_read", self.gets_per_file_read),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(Error::validation(format!(
                    "cost model: {name} must be a non-negative number"
                )));
            }
        }
        Ok(())
    }

    fn storage(&self, bytes: u64) -> f64 {
        bytes as f64 / GB * self.storage_usd_per_gb_month
    }

    fn reads(&self, files: f64) -> f64 {
        files * self.gets_per_file_read * self.scans_per_month / 1000.0 * self.get_usd_per_1000
    }
}

/// A table's monthly cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostReport {
    /// Bytes of live data and delete files.
    pub live_bytes: u64,
    /// Bytes of manifests and manifest lists across snapshots.
    pub metadata_bytes: u64,
    /// Bytes only old snapshots still reference (what expiry at the table's retention frees).
    pub retained_by_snapshots_bytes: u64,
    /// Monthly storage cost of all of the above.
    pub storage_usd_month: f64,
    /// Monthly request cost of reading the files a scan opens.
    pub request_usd_month: f64,
    /// Files beyond the ideal count.
    pub excess_files: u64,
    /// Monthly request cost of those excess files (and delete files readers merge).
    pub excess_request_usd_month: f64,
    /// Per operation: what running it would save per month.
    pub savings: Vec<OpSaving>,
}

/// The projected effect of one operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpSaving {
    /// Operation.
    pub operation: Operation,
    /// Bytes it frees (storage).
    pub bytes_freed: u64,
    /// Files fewer that readers open.
    pub files_fewer: u64,
    /// Monthly saving, storage plus requests.
    pub usd_month: f64,
}

fn round_usd(v: f64) -> f64 {
    (v * 10_000.0).round() / 10_000.0
}

/// Bytes that expiring snapshots older than `cutoff_ms` frees: files a snapshot removed stop being
/// referenced once every snapshot before it is gone.
pub(crate) fn expirable_bytes(scan: &TableScan, cutoff_ms: i64) -> u64 {
    let keep_last = scan.write.min_snapshots_to_keep.max(1) as usize;
    let snaps = &scan.snapshots.snapshots;
    let protected: std::collections::HashSet<i64> =
        scan.snapshots.refs.iter().map(|r| r.snapshot_id).collect();
    let expired: std::collections::HashSet<i64> = snaps
        .iter()
        .rev()
        .skip(keep_last)
        .filter(|s| s.timestamp_ms < cutoff_ms && !protected.contains(&s.snapshot_id))
        .map(|s| s.snapshot_id)
        .collect();
    scan.snapshots
        .snapshots
        .iter()
        .filter(|s| s.parent_id.is_some_and(|p| expired.contains(&p)))
        .filter_map(|s| s.removed_files_bytes)
        .fold(0, u64::saturating_add)
}

/// Estimate the cost report of a table.
pub fn estimate(scan: &TableScan, model: &CostModel, now_ms: i64) -> CostReport {
    let live_bytes = scan
        .data_files
        .bytes
        .saturating_add(scan.delete_files.bytes());
    let metadata_bytes = (scan.manifests.distinct_bytes_across_snapshots)
        .saturating_add(scan.manifests.manifest_list_bytes);
    let retained = expirable_bytes(scan, now_ms.saturating_sub(scan.write.max_snapshot_age_ms));
    let ideal = crate::grade::checks::ideal_files(scan);
    let excess_files = scan.data_files.count.saturating_sub(ideal);
    let delete_files = scan.delete_files.files();
    let files_opened = scan.data_files.count + delete_files + scan.manifests.count;

    let mut savings = Vec::new();
    if excess_files > 0 || delete_files > 0 {
        // Compaction removes excess files and applies (so drops) the delete files; the
        // replaced bytes are freed once expiry runs, which is counted there.
        let fewer = excess_files + delete_files;
        savings.push(OpSaving {
            operation: Operation::RewriteDataFiles,
            bytes_freed: 0,
            files_fewer: fewer,
            usd_month: round_usd(model.reads(fewer as f64)),
        });
    }
    let dangling =
        scan.delete_files.position.dangling + scan.delete_files.deletion_vectors.dangling;
    if dangling > 0 {
        savings.push(OpSaving {
            operation: Operation::RewritePositionDeletes,
            bytes_freed: 0,
            files_fewer: dangling,
            usd_month: round_usd(model.reads(dangling as f64)),
        });
    }
    let manifest_ideal = scan
        .manifests
        .total_bytes
        .div_ceil(scan.write.manifest_target_size_bytes.max(1))
        .max(u64::from(scan.manifests.count > 0));
    let fewer_manifests = scan.manifests.count.saturating_sub(manifest_ideal);
    if fewer_manifests > 0 {
        savings.push(OpSaving {
            operation: Operation::RewriteManifests,
            bytes_freed: 0,
            files_fewer: fewer_manifests,
            usd_month: round_usd(
                model.reads(fewer_manifests as f64 / model.gets_per_file_read.max(1.0)),
            ),
        });
    }
    if retained > 0 {
        savings.push(OpSaving {
            operation: Operation::ExpireSnapshots,
            bytes_freed: retained,
            files_fewer: 0,
            usd_month: round_usd(model.storage(retained)),
        });
    }

    CostReport {
        live_bytes,
        metadata_bytes,
        retained_by_snapshots_bytes: retained,
        storage_usd_month: round_usd(
            model.storage(
                live_bytes
                    .saturating_add(metadata_bytes)
                    .saturating_add(retained),
            ),
        ),
        request_usd_month: round_usd(model.reads(files_opened as f64)),
        excess_files,
        excess_request_usd_month: round_usd(model.reads((excess_files + delete_files) as f64)),
        savings,
    }
}
