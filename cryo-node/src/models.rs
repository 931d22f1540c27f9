//! Results: classes for what goes back into Cryo (scans, reports, plans, run outcomes: getters,
//! `toObject()` with cryo-core's whole serde form, `toString()`), plain typed objects for the
//! rest (findings, footprints, operation outcomes), Arrow IPC buffers for rows.
//!
//! Numbers: counts and byte sizes are JS numbers (far below 2^53); snapshot ids are `bigint`s,
//! because Iceberg's ids use all 64 bits.

use std::collections::HashMap;
use std::sync::Arc;

use cryo_core::compact::CompactionOutcome as CoreCompaction;
use cryo_core::exec::MaintenanceOutcome;
use cryo_core::grade::HealthReport as CoreReport;
use cryo_core::maintain::{
    ComputeStatisticsOutcome as CoreStatistics,
    ConvertEqualityDeletesOutcome as CoreConvertEquality, ConvertEqualityDeletesStatus,
    ExpireOutcome as CoreExpire, MissingFilesOutcome as CoreMissing,
    RemoveOrphanFilesOutcome as CoreOrphans, RewriteManifestsOutcome as CoreManifests,
    RewritePositionDeletesOutcome as CorePositionDeletes,
};
use cryo_core::plan::MaintenancePlan;
use cryo_core::receipt::{self, Receipt, ReceiptStatus};
use cryo_core::render::{SparkDialect, SparkOptions, TrinoDialect, TrinoOptions, render_plan};
use cryo_core::scan::{self, FleetScan as CoreFleet, TableScan as CoreScan};
use napi::bindgen_prelude::{BigInt, Buffer};
use napi_derive::napi;
use serde_json::Value;

use crate::arrow::{ipc, ipc_result};
use crate::convert::{serde_name, to_value};
use crate::errors::{self, check};

/// A snapshot id as a `bigint`.
pub(crate) fn snapshot_id(id: i64) -> BigInt {
    BigInt::from(id)
}

/// `12.3 MB`-style sizes for `toString()`.
fn human_bytes(bytes: u64) -> String {
    cryo_core::report::bytes(bytes)
}

/// Files and bytes an operation concerns.
#[napi(object, object_from_js = false)]
#[derive(Clone, Copy)]
pub struct Footprint {
    /// Number of files.
    pub files: i64,
    /// Total size in bytes.
    pub bytes: i64,
}

impl From<receipt::Footprint> for Footprint {
    fn from(f: receipt::Footprint) -> Self {
        Self {
            files: f.files as i64,
            bytes: f.bytes as i64,
        }
    }
}

// ---- scans ---------------------------------------------------------------------------------

/// What a metadata-only scan of one table found.
#[napi]
pub struct TableScan {
    pub(crate) inner: Arc<CoreScan>,
}

#[napi]
impl TableScan {
    /// Table identifier (`namespace.table`).
    #[napi(getter)]
    pub fn table(&self) -> String {
        self.inner.table.to_string()
    }
    /// Catalog name.
    #[napi(getter)]
    pub fn catalog(&self) -> String {
        self.inner.catalog.clone()
    }
    /// Iceberg format version.
    #[napi(getter)]
    pub fn format_version(&self) -> u32 {
        u32::from(self.inner.format_version)
    }
    /// Current snapshot id (`null` for an empty table).
    #[napi(getter)]
    pub fn current_snapshot_id(&self) -> Option<BigInt> {
        self.inner.current_snapshot_id.map(snapshot_id)
    }
    /// Live data files.
    #[napi(getter)]
    pub fn data_files(&self) -> i64 {
        self.inner.data_files.count as i64
    }
    /// Bytes of live data files.
    #[napi(getter)]
    pub fn data_bytes(&self) -> i64 {
        self.inner.data_files.bytes as i64
    }
    /// Live records.
    #[napi(getter)]
    pub fn records(&self) -> i64 {
        self.inner.data_files.records as i64
    }
    /// Snapshots in the metadata.
    #[napi(getter)]
    pub fn snapshots(&self) -> i64 {
        self.inner.snapshots.count as i64
    }
    /// Manifests of the current snapshot.
    #[napi(getter)]
    pub fn manifests(&self) -> i64 {
        self.inner.manifests.count as i64
    }
    /// Live delete files (position, equality and deletion vectors).
    #[napi(getter)]
    pub fn delete_files(&self) -> i64 {
        self.inner.delete_files.files() as i64
    }
    /// When the scan read the metadata (epoch milliseconds).
    #[napi(getter)]
    pub fn scanned_at_ms(&self) -> i64 {
        self.inner.scanned_at_ms
    }
    /// Per-partition statistics, one row per partition (Arrow IPC stream).
    #[napi]
    pub fn partitions(&self) -> napi::Result<Buffer> {
        ipc_result(scan::arrow::partitions_batch(std::slice::from_ref(
            self.inner.as_ref(),
        )))
    }
    /// Everything the scan measured (cryo-core's serde form).
    #[napi(ts_return_type = "Record<string, any>")]
    pub fn to_object(&self) -> napi::Result<Value> {
        to_value(self.inner.as_ref())
    }
    /// `TableScan(ns.table: 12 data files, 3.4 MB, 5 snapshots, 4 manifests)`.
    #[napi]
    #[allow(
        clippy::inherent_to_string,
        reason = "JS calls toString(); Display is not visible from JS"
    )]
    pub fn to_string(&self) -> String {
        format!(
            "TableScan({}: {} data files, {}, {} snapshots, {} manifests)",
            self.inner.table,
            self.inner.data_files.count,
            human_bytes(self.inner.data_files.bytes),
            self.inner.snapshots.count,
            self.inner.manifests.count
        )
    }
}

/// A table (or namespace) a fleet scan could not read.
#[napi(object, object_from_js = false)]
pub struct ScanError {
    /// Table identifier, or the namespace whose listing failed.
    pub target: String,
    /// Stable error code (the `code` of the error it would have thrown).
    pub code: String,
    /// What went wrong.
    pub message: String,
}

/// A scan of every table of a catalog.
#[napi]
pub struct FleetScan {
    pub(crate) inner: Arc<CoreFleet>,
}

#[napi]
impl FleetScan {
    /// Catalog name.
    #[napi(getter)]
    pub fn catalog(&self) -> String {
        self.inner.catalog.clone()
    }
    /// The scanned tables, sorted by identifier.
    #[napi(getter)]
    pub fn tables(&self) -> Vec<TableScan> {
        self.inner
            .tables
            .iter()
            .map(|t| TableScan {
                inner: Arc::new(t.clone()),
            })
            .collect()
    }
    /// Tables (or namespaces) that could not be scanned.
    #[napi(getter)]
    pub fn errors(&self) -> Vec<ScanError> {
        self.inner
            .errors
            .iter()
            .map(|e| ScanError {
                target: e.target.clone(),
                code: e.code.clone(),
                message: e.message.clone(),
            })
            .collect()
    }
    /// Number of scanned tables.
    #[napi(getter)]
    pub fn length(&self) -> u32 {
        self.inner.tables.len() as u32
    }
    /// When the scan started (epoch milliseconds).
    #[napi(getter)]
    pub fn scanned_at_ms(&self) -> i64 {
        self.inner.scanned_at_ms
    }
    /// Wall time of the scan.
    #[napi(getter)]
    pub fn duration_ms(&self) -> i64 {
        self.inner.duration_ms as i64
    }
    /// Per-partition statistics of every table (Arrow IPC stream).
    #[napi]
    pub fn partitions(&self) -> napi::Result<Buffer> {
        ipc_result(scan::arrow::partitions_batch(&self.inner.tables))
    }
    /// Everything the scan measured (cryo-core's serde form).
    #[napi(ts_return_type = "Record<string, any>")]
    pub fn to_object(&self) -> napi::Result<Value> {
        to_value(self.inner.as_ref())
    }
    /// `FleetScan(catalog "demo": 6 tables, 0 errors, 120 ms)`.
    #[napi]
    #[allow(
        clippy::inherent_to_string,
        reason = "JS calls toString(); Display is not visible from JS"
    )]
    pub fn to_string(&self) -> String {
        format!(
            "FleetScan(catalog {:?}: {} tables, {} errors, {} ms)",
            self.inner.catalog,
            self.inner.tables.len(),
            self.inner.errors.len(),
            self.inner.duration_ms
        )
    }
}

// ---- grade ---------------------------------------------------------------------------------

/// One deduction of a health report.
#[napi(object, object_from_js = false)]
pub struct Finding {
    /// Stable check code (key alerts on this, never on the message).
    pub code: String,
    /// `warn` or `crit`.
    pub severity: String,
    /// Points deducted.
    pub points: u32,
    /// What was measured, in `unit`.
    pub measured: f64,
    /// The threshold the measurement crossed.
    pub threshold: f64,
    /// Unit of `measured` and `threshold`.
    pub unit: String,
    /// Why it matters, for people.
    pub reason: String,
    /// The fix, for people.
    pub remedy: String,
    /// The maintenance operation that fixes it, if one does.
    pub operation: Option<String>,
    /// Estimated monthly saving (USD) of that operation on this table, if estimated.
    pub saving_usd_month: Option<f64>,
}

/// A table's grade (A–F), score and the findings behind it.
#[napi]
pub struct HealthReport {
    pub(crate) inner: Arc<CoreReport>,
}

#[napi]
impl HealthReport {
    /// Letter grade, `A` (healthy) to `F`.
    #[napi(getter)]
    pub fn grade(&self) -> String {
        self.inner.grade.to_string()
    }
    /// Score out of 100.
    #[napi(getter)]
    pub fn score(&self) -> u32 {
        self.inner.score
    }
    /// Table identifier.
    #[napi(getter)]
    pub fn table(&self) -> String {
        self.inner.table.to_string()
    }
    /// Catalog name.
    #[napi(getter)]
    pub fn catalog(&self) -> String {
        self.inner.catalog.clone()
    }
    /// The `now` the report was computed for (epoch milliseconds).
    #[napi(getter)]
    pub fn graded_at_ms(&self) -> i64 {
        self.inner.graded_at_ms
    }
    /// The deductions, worst first as cryo-core orders them.
    #[napi(getter)]
    pub fn findings(&self) -> napi::Result<Vec<Finding>> {
        let savings = &self.inner.cost.savings;
        self.inner
            .findings
            .iter()
            .map(|f| {
                let op = f.remedy.operation();
                Ok(Finding {
                    code: f.code.clone(),
                    severity: serde_name(&f.severity)?,
                    points: f.points,
                    measured: f.measured,
                    threshold: f.threshold,
                    unit: f.unit.clone(),
                    reason: f.reason.clone(),
                    remedy: f.remedy.to_string(),
                    operation: op.map(|o| o.as_str().to_string()),
                    saving_usd_month: op.and_then(|o| {
                        savings
                            .iter()
                            .find(|s| s.operation == o)
                            .map(|s| s.usd_month)
                    }),
                })
            })
            .collect()
    }
    /// Codes of the checks that passed.
    #[napi(getter)]
    pub fn passed(&self) -> Vec<String> {
        self.inner.passed.clone()
    }
    /// The operations the findings call for, in execution order.
    #[napi(getter)]
    pub fn operations(&self) -> Vec<String> {
        self.inner
            .operations()
            .into_iter()
            .map(|o| o.as_str().to_string())
            .collect()
    }
    /// Estimated monthly cost and savings (cryo-core's `CostReport`).
    #[napi(getter, ts_return_type = "Record<string, any>")]
    pub fn cost(&self) -> napi::Result<Value> {
        to_value(&self.inner.cost)
    }
    /// The whole report (cryo-core's serde form).
    #[napi(ts_return_type = "Record<string, any>")]
    pub fn to_object(&self) -> napi::Result<Value> {
        to_value(self.inner.as_ref())
    }
    /// `HealthReport(lake.clickstream: grade F (31/100); findings: …)`.
    #[napi]
    #[allow(
        clippy::inherent_to_string,
        reason = "JS calls toString(); Display is not visible from JS"
    )]
    pub fn to_string(&self) -> String {
        let codes: Vec<&str> = self
            .inner
            .findings
            .iter()
            .map(|f| f.code.as_str())
            .collect();
        format!(
            "HealthReport({}: grade {} ({}/100){})",
            self.inner.table,
            self.inner.grade,
            self.inner.score,
            if codes.is_empty() {
                String::new()
            } else {
                format!("; findings: {}", codes.join(", "))
            }
        )
    }
}

// ---- plan ----------------------------------------------------------------------------------

/// A maintenance plan: a value that can be stored (`toJson()`), reviewed, rendered as SQL and run.
#[napi]
pub struct Plan {
    pub(crate) inner: Arc<MaintenancePlan>,
}

#[napi]
impl Plan {
    /// Read a plan written by `toJson()` (its fingerprint is verified: a changed plan is refused).
    // Writable and configurable (napi-rs makes statics neither) so that `index.js` can wrap it.
    #[napi(factory, catch_unwind, writable = true, configurable = true)]
    #[allow(
        clippy::needless_pass_by_value,
        reason = "napi-rs passes JS strings as owned Strings"
    )]
    pub fn from_json(json: String) -> napi::Result<Plan> {
        Ok(Plan {
            inner: Arc::new(check(MaintenancePlan::from_json(&json))?),
        })
    }
    /// The plan as JSON (stable, fingerprinted).
    #[napi]
    pub fn to_json(&self) -> napi::Result<String> {
        check(self.inner.to_json())
    }
    /// Content fingerprint (SHA-256): compare it between review and run.
    #[napi(getter)]
    pub fn fingerprint(&self) -> String {
        self.inner.fingerprint.clone()
    }
    /// Catalog name.
    #[napi(getter)]
    pub fn catalog(&self) -> String {
        self.inner.catalog.clone()
    }
    /// When the plan was made (epoch milliseconds).
    #[napi(getter)]
    pub fn created_at_ms(&self) -> i64 {
        self.inner.created_at_ms
    }
    /// Tables with planned steps, worst first.
    #[napi(getter)]
    pub fn tables(&self) -> Vec<String> {
        self.inner
            .tables
            .iter()
            .map(|t| t.table.to_string())
            .collect()
    }
    /// Planned steps, all tables.
    #[napi(getter)]
    pub fn step_count(&self) -> u32 {
        self.inner
            .tables
            .iter()
            .map(|t| t.steps.len())
            .sum::<usize>() as u32
    }
    /// Throw `ValidationError` unless the plan is intact and, when given, carries the fingerprint
    /// a reviewer approved.
    #[napi(catch_unwind)]
    pub fn verify(&self, reviewed_fingerprint: Option<String>) -> napi::Result<()> {
        check(match reviewed_fingerprint {
            Some(fp) => self.inner.verify_reviewed(&fp),
            None => self.inner.verify(),
        })
    }
    /// The plan as a SQL script for `trino` or `spark`; `options` are the dialect's options
    /// (Trino: `catalog`, `version`; Spark: `catalog`, `sparkVersion`, `icebergVersion`, …).
    #[napi(catch_unwind)]
    #[allow(
        clippy::needless_pass_by_value,
        reason = "napi-rs passes JS strings as owned Strings"
    )]
    pub fn render(
        &self,
        dialect: String,
        #[napi(ts_arg_type = "RenderOptions")] options: Option<Value>,
    ) -> napi::Result<String> {
        let rendered =
            match dialect.as_str() {
                "trino" => {
                    let dialect = check(TrinoDialect::new(
                        crate::convert::options::<TrinoOptions>("trino options", options)?,
                    ))?;
                    check(render_plan(&self.inner, &dialect))?
                }
                "spark" => {
                    let dialect = check(SparkDialect::new(
                        crate::convert::options::<SparkOptions>("spark options", options)?,
                    ))?;
                    check(render_plan(&self.inner, &dialect))?
                }
                other => {
                    return Err(errors::validation(format!(
                        "unknown dialect `{other}` (trino, spark)"
                    )));
                }
            };
        Ok(rendered.to_script())
    }
    /// True when both plans have the same fingerprint.
    #[napi]
    pub fn equals(&self, other: &Plan) -> bool {
        self.inner.fingerprint == other.inner.fingerprint
    }
    /// The whole plan (cryo-core's serde form).
    #[napi(ts_return_type = "Record<string, any>")]
    pub fn to_object(&self) -> napi::Result<Value> {
        to_value(self.inner.as_ref())
    }
    /// `Plan(catalog "demo": 14 steps on 5 tables, 1 skipped; fingerprint …)`.
    #[napi]
    #[allow(
        clippy::inherent_to_string,
        reason = "JS calls toString(); Display is not visible from JS"
    )]
    pub fn to_string(&self) -> String {
        format!(
            "Plan(catalog {:?}: {} steps on {} tables, {} skipped; fingerprint {})",
            self.inner.catalog,
            self.step_count(),
            self.inner.tables.len(),
            self.inner.skipped_tables.len(),
            self.inner.fingerprint
        )
    }
}

// ---- outcomes of the single operations -----------------------------------------------------

// Plain outcome objects share `table`, `dryRun`, `snapshotBefore`, `snapshotIds`, `before`/
// `after` footprints, `durationMs` and `details` (cryo-core's whole serde form).

/// What `compact` did (or, in a dry run, would do).
#[napi(object, object_from_js = false)]
pub struct CompactionOutcome {
    /// Table identifier.
    pub table: String,
    /// True when nothing was changed (the figures say what a real run would do).
    pub dry_run: bool,
    /// Current snapshot before the operation.
    pub snapshot_before: Option<BigInt>,
    /// Snapshots the operation committed, in order.
    pub snapshot_ids: Vec<BigInt>,
    /// Files and bytes the operation concerns, before.
    pub before: Footprint,
    /// Files and bytes the operation concerns, after (or after a real run, for a dry run).
    pub after: Footprint,
    /// Wall time.
    pub duration_ms: i64,
    /// File groups committed.
    pub committed_groups: u32,
    /// File groups dropped because a concurrent writer changed their files.
    pub conflicted_groups: u32,
    /// File groups that failed (their output was cleaned up).
    pub failed_groups: u32,
    /// Rows removed by applying delete files.
    pub rows_deleted: i64,
    /// Everything cryo-core reports (its serde form).
    #[napi(ts_type = "Record<string, any>")]
    pub details: Value,
}

/// What `expireSnapshots` did (or, in a dry run, would do).
#[napi(object, object_from_js = false)]
pub struct ExpireOutcome {
    /// Table identifier.
    pub table: String,
    /// True when nothing was changed (the figures say what a real run would do).
    pub dry_run: bool,
    /// Current snapshot before the operation.
    pub snapshot_before: Option<BigInt>,
    /// Snapshots the operation committed, in order.
    pub snapshot_ids: Vec<BigInt>,
    /// Files and bytes the operation concerns, before.
    pub before: Footprint,
    /// Files and bytes the operation concerns, after (or after a real run, for a dry run).
    pub after: Footprint,
    /// Wall time.
    pub duration_ms: i64,
    /// Snapshots expired (or to expire).
    pub expired_snapshot_ids: Vec<BigInt>,
    /// Snapshots kept.
    pub retained_snapshot_ids: Vec<BigInt>,
    /// Branches and tags removed by their max age.
    pub removed_refs: Vec<String>,
    /// Files no longer reachable (deleted unless this is a dry run): Arrow IPC stream of
    /// `path`, `size`, `last_modified`.
    pub files: Buffer,
    /// Everything cryo-core reports (its serde form).
    #[napi(ts_type = "Record<string, any>")]
    pub details: Value,
}

/// What `computeStatistics` did (or, in a dry run, would read).
#[napi(object, object_from_js = false)]
pub struct ComputeStatisticsOutcome {
    /// Table identifier.
    pub table: String,
    /// True when nothing was read or written (the figures say what a real run would read).
    pub dry_run: bool,
    /// Current snapshot before the operation (the one the statistics describe).
    pub snapshot_before: Option<BigInt>,
    /// Snapshots the operation committed: none (statistics are registered on their snapshot).
    pub snapshot_ids: Vec<BigInt>,
    /// Live data files and bytes read.
    pub before: Footprint,
    /// The statistics file written.
    pub after: Footprint,
    /// Wall time.
    pub duration_ms: i64,
    /// Distinct non-null values per column name (`null` in a dry run).
    #[napi(ts_type = "Record<string, number | null>")]
    pub ndv: Value,
    /// The Puffin file written and registered on the snapshot.
    pub statistics_path: Option<String>,
    /// Live rows read (deletes applied).
    pub rows: i64,
    /// Everything cryo-core reports (its serde form).
    #[napi(ts_type = "Record<string, any>")]
    pub details: Value,
}

/// What `rewriteManifests` did (or, in a dry run, would do).
#[napi(object, object_from_js = false)]
pub struct RewriteManifestsOutcome {
    /// Table identifier.
    pub table: String,
    /// True when nothing was changed (the figures say what a real run would do).
    pub dry_run: bool,
    /// Current snapshot before the operation.
    pub snapshot_before: Option<BigInt>,
    /// Snapshots the operation committed, in order.
    pub snapshot_ids: Vec<BigInt>,
    /// Files and bytes the operation concerns, before.
    pub before: Footprint,
    /// Files and bytes the operation concerns, after (or after a real run, for a dry run).
    pub after: Footprint,
    /// Wall time.
    pub duration_ms: i64,
    /// Manifests replaced.
    pub manifests_replaced: u32,
    /// Manifests written.
    pub manifests_created: u32,
    /// Everything cryo-core reports (its serde form).
    #[napi(ts_type = "Record<string, any>")]
    pub details: Value,
}

/// What `convertEqualityDeletes` did (or, in a dry run, would do).
#[napi(object, object_from_js = false)]
pub struct ConvertEqualityDeletesOutcome {
    /// Table identifier.
    pub table: String,
    /// True when nothing was changed (the figures say what a real run would do).
    pub dry_run: bool,
    /// Current snapshot before the operation.
    pub snapshot_before: Option<BigInt>,
    /// Snapshots the operation committed, in order.
    pub snapshot_ids: Vec<BigInt>,
    /// The table's equality-delete files before.
    pub before: Footprint,
    /// Its equality-delete files left and the new position deletes, after.
    pub after: Footprint,
    /// Wall time.
    pub duration_ms: i64,
    /// `committed`, `dry_run`, `nothing` or `conflicted`.
    #[napi(ts_type = "'committed' | 'dry_run' | 'nothing' | 'conflicted'")]
    pub status: String,
    /// Equality-delete files converted (they leave the table).
    pub files_converted: i64,
    /// Rows the converted deletes delete, now by position.
    pub positions: i64,
    /// Data files whose key columns were read.
    pub data_files_read: i64,
    /// True when the new deletes are deletion vectors (format v3).
    pub deletion_vectors: bool,
    /// Partitions whose equality deletes stay: partition path → reason.
    #[napi(ts_type = "Record<string, string>")]
    pub left: Value,
    /// Everything cryo-core reports (its serde form).
    #[napi(ts_type = "Record<string, any>")]
    pub details: Value,
}

/// What `rewritePositionDeletes` did (or, in a dry run, would do).
#[napi(object, object_from_js = false)]
pub struct RewritePositionDeletesOutcome {
    /// Table identifier.
    pub table: String,
    /// True when nothing was changed (the figures say what a real run would do).
    pub dry_run: bool,
    /// Current snapshot before the operation.
    pub snapshot_before: Option<BigInt>,
    /// Snapshots the operation committed, in order.
    pub snapshot_ids: Vec<BigInt>,
    /// Files and bytes the operation concerns, before.
    pub before: Footprint,
    /// Files and bytes the operation concerns, after (or after a real run, for a dry run).
    pub after: Footprint,
    /// Wall time.
    pub duration_ms: i64,
    /// Position-delete files combined into fewer.
    pub files_combined: i64,
    /// Dangling position-delete files removed.
    pub files_dangling: i64,
    /// Position-delete files written.
    pub files_added: i64,
    /// Everything cryo-core reports (its serde form).
    #[napi(ts_type = "Record<string, any>")]
    pub details: Value,
}

/// What `removeOrphanFiles` found and deleted (nothing in a dry run).
#[napi(object, object_from_js = false)]
pub struct RemoveOrphanFilesOutcome {
    /// Table identifier.
    pub table: String,
    /// True when nothing was changed (the figures say what a real run would do).
    pub dry_run: bool,
    /// Current snapshot before the operation.
    pub snapshot_before: Option<BigInt>,
    /// Snapshots the operation committed, in order.
    pub snapshot_ids: Vec<BigInt>,
    /// Files and bytes the operation concerns, before.
    pub before: Footprint,
    /// Files and bytes the operation concerns, after (or after a real run, for a dry run).
    pub after: Footprint,
    /// Wall time.
    pub duration_ms: i64,
    /// Orphan files found.
    pub orphan_count: u32,
    /// Bytes of the orphan files.
    pub orphan_bytes: i64,
    /// Files deleted (0 in a dry run).
    pub deleted_files: i64,
    /// The orphan files: Arrow IPC stream of `path`, `size`, `last_modified`.
    pub orphans: Buffer,
    /// Everything cryo-core reports (its serde form).
    #[napi(ts_type = "Record<string, any>")]
    pub details: Value,
}

/// Files the table references that storage lacks (read only: `dryRun` is always false).
#[napi(object, object_from_js = false)]
pub struct MissingFilesOutcome {
    /// Table identifier.
    pub table: String,
    /// True when nothing was changed (the figures say what a real run would do).
    pub dry_run: bool,
    /// Current snapshot before the operation.
    pub snapshot_before: Option<BigInt>,
    /// Snapshots the operation committed, in order.
    pub snapshot_ids: Vec<BigInt>,
    /// Files and bytes the operation concerns, before.
    pub before: Footprint,
    /// Files and bytes the operation concerns, after (or after a real run, for a dry run).
    pub after: Footprint,
    /// Wall time.
    pub duration_ms: i64,
    /// True when every referenced file exists.
    pub is_clean: bool,
    /// Files checked.
    pub checked_files: i64,
    /// Missing files.
    pub missing_count: u32,
    /// Rows in missing data files.
    pub rows_at_risk: i64,
    /// The missing files: Arrow IPC stream of `path`, `kind`, `records`, `bytes`, `snapshots`.
    pub missing: Buffer,
    /// Everything cryo-core reports (its serde form).
    #[napi(ts_type = "Record<string, any>")]
    pub details: Value,
}

fn footprint(files: u64, bytes: u64) -> Footprint {
    Footprint::from(receipt::Footprint { files, bytes })
}

fn ids(ids: &[i64]) -> Vec<BigInt> {
    ids.iter().copied().map(snapshot_id).collect()
}

impl CompactionOutcome {
    pub(crate) fn from_core(o: &CoreCompaction) -> napi::Result<Self> {
        Ok(Self {
            table: o.table.to_string(),
            dry_run: o.dry_run,
            snapshot_before: o.base_snapshot_id.map(snapshot_id),
            snapshot_ids: ids(&o.snapshot_ids),
            before: footprint(o.files_in(), o.bytes_in()),
            after: footprint(o.files_out(), o.bytes_out()),
            duration_ms: o.duration_ms as i64,
            committed_groups: o.committed_groups() as u32,
            conflicted_groups: o.conflicted_groups() as u32,
            failed_groups: o.failed_groups() as u32,
            rows_deleted: o.rows_deleted() as i64,
            details: to_value(o)?,
        })
    }
}

impl ExpireOutcome {
    pub(crate) fn from_core(o: &CoreExpire) -> napi::Result<Self> {
        Ok(Self {
            table: o.table.to_string(),
            dry_run: o.dry_run,
            snapshot_before: o.base_snapshot_id.map(snapshot_id),
            snapshot_ids: ids(&o.snapshot_ids),
            before: o.before().into(),
            after: o.after().into(),
            duration_ms: o.duration_ms as i64,
            expired_snapshot_ids: ids(&o.expired_snapshot_ids),
            retained_snapshot_ids: ids(&o.retained_snapshot_ids),
            removed_refs: o.removed_refs.clone(),
            files: ipc(&check(o.files_batch())?)?,
            details: to_value(o)?,
        })
    }
}

impl ComputeStatisticsOutcome {
    pub(crate) fn from_core(o: &CoreStatistics) -> napi::Result<Self> {
        Ok(Self {
            table: o.table.to_string(),
            dry_run: o.dry_run,
            snapshot_before: o.snapshot_id.map(snapshot_id),
            snapshot_ids: Vec::new(),
            before: o.before().into(),
            after: o.after().into(),
            duration_ms: o.duration_ms as i64,
            ndv: Value::Object(
                o.columns
                    .iter()
                    .map(|c| (c.name.clone(), c.ndv.into()))
                    .collect(),
            ),
            statistics_path: o.statistics_path.clone(),
            rows: o.rows as i64,
            details: to_value(o)?,
        })
    }
}

impl RewriteManifestsOutcome {
    pub(crate) fn from_core(o: &CoreManifests) -> napi::Result<Self> {
        Ok(Self {
            table: o.table.to_string(),
            dry_run: o.dry_run,
            snapshot_before: o.base_snapshot_id.map(snapshot_id),
            snapshot_ids: ids(&o.snapshot_ids),
            before: o.before().into(),
            after: o.after().into(),
            duration_ms: o.duration_ms as i64,
            manifests_replaced: o.manifests_replaced as u32,
            manifests_created: o.manifests_created as u32,
            details: to_value(o)?,
        })
    }
}

impl RewritePositionDeletesOutcome {
    pub(crate) fn from_core(o: &CorePositionDeletes) -> napi::Result<Self> {
        Ok(Self {
            table: o.table.to_string(),
            dry_run: o.dry_run,
            snapshot_before: o.base_snapshot_id.map(snapshot_id),
            snapshot_ids: ids(&o.snapshot_ids),
            before: o.before().into(),
            after: o.after().into(),
            duration_ms: o.duration_ms as i64,
            files_combined: o.files_combined() as i64,
            files_dangling: o.files_dangling() as i64,
            files_added: o.files_added() as i64,
            details: to_value(o)?,
        })
    }
}

impl ConvertEqualityDeletesOutcome {
    pub(crate) fn from_core(o: &CoreConvertEquality) -> napi::Result<Self> {
        Ok(Self {
            table: o.table.to_string(),
            dry_run: o.dry_run,
            snapshot_before: o.base_snapshot_id.map(snapshot_id),
            snapshot_ids: ids(&o.snapshot_ids),
            before: o.before().into(),
            after: o.after().into(),
            duration_ms: o.duration_ms as i64,
            status: match o.status {
                ConvertEqualityDeletesStatus::Committed { .. } => "committed",
                ConvertEqualityDeletesStatus::DryRun => "dry_run",
                ConvertEqualityDeletesStatus::Conflicted { .. } => "conflicted",
                ConvertEqualityDeletesStatus::Nothing => "nothing",
            }
            .to_string(),
            files_converted: o.files_converted as i64,
            positions: o.positions as i64,
            data_files_read: o.data_files_read as i64,
            deletion_vectors: o.deletion_vectors,
            left: Value::Object(
                o.left
                    .iter()
                    .map(|l| (l.partition.path.clone(), Value::from(l.reason.clone())))
                    .collect(),
            ),
            details: to_value(o)?,
        })
    }
}

impl RemoveOrphanFilesOutcome {
    pub(crate) fn from_core(o: &CoreOrphans) -> napi::Result<Self> {
        Ok(Self {
            table: o.table.to_string(),
            dry_run: o.dry_run,
            snapshot_before: o.snapshot_id_before.map(snapshot_id),
            snapshot_ids: ids(&o.snapshot_ids),
            before: o.before().into(),
            after: o.after().into(),
            duration_ms: o.duration_ms as i64,
            orphan_count: o.orphans.len() as u32,
            orphan_bytes: o.orphan_bytes as i64,
            deleted_files: o.deleted_files as i64,
            orphans: ipc(&check(o.orphans_batch())?)?,
            details: to_value(o)?,
        })
    }
}

impl MissingFilesOutcome {
    pub(crate) fn from_core(o: &CoreMissing) -> napi::Result<Self> {
        Ok(Self {
            table: o.table.to_string(),
            dry_run: false,
            snapshot_before: o.snapshot_id_before.map(snapshot_id),
            snapshot_ids: ids(&o.snapshot_ids),
            before: o.before().into(),
            after: o.after().into(),
            duration_ms: o.duration_ms as i64,
            is_clean: o.is_clean(),
            checked_files: o.checked_files as i64,
            missing_count: o.missing.len() as u32,
            rows_at_risk: o.rows_at_risk as i64,
            missing: ipc(&check(o.missing_batch())?)?,
            details: to_value(o)?,
        })
    }
}

// ---- runs ----------------------------------------------------------------------------------

fn counts(receipts: &[Receipt]) -> HashMap<String, u32> {
    cryo_core::receipt::status_counts(receipts)
        .into_iter()
        .map(|(status, n)| (status.to_string(), n as u32))
        .collect()
}

/// What a maintenance run did: a receipt per decision.
#[napi]
pub struct RunOutcome {
    pub(crate) inner: Arc<MaintenanceOutcome>,
}

#[napi]
impl RunOutcome {
    /// Fingerprint of the plan that ran.
    #[napi(getter)]
    pub fn plan_fingerprint(&self) -> String {
        self.inner.plan_fingerprint.clone()
    }
    /// True when nothing was changed.
    #[napi(getter)]
    pub fn dry_run(&self) -> bool {
        self.inner.dry_run
    }
    /// Wall time.
    #[napi(getter)]
    pub fn duration_ms(&self) -> i64 {
        self.inner.duration_ms as i64
    }
    /// Receipts by status: `succeeded`, `dry_run`, `skipped`, `deferred`, `failed`, ….
    #[napi(getter)]
    pub fn counts(&self) -> HashMap<String, u32> {
        counts(&self.inner.receipts)
    }
    /// Tables where a step failed.
    #[napi(getter)]
    pub fn failed_tables(&self) -> Vec<String> {
        self.inner
            .failed_tables()
            .into_iter()
            .map(ToString::to_string)
            .collect()
    }
    /// The receipts (Arrow IPC stream; `tableFromIPC(outcome.receipts())`).
    #[napi]
    pub fn receipts(&self) -> napi::Result<Buffer> {
        ipc_result(receipt::receipts_batch(&self.inner.receipts))
    }
    /// Everything cryo-core reports (its serde form).
    #[napi(ts_return_type = "Record<string, any>")]
    pub fn to_object(&self) -> napi::Result<Value> {
        to_value(self.inner.as_ref())
    }
    /// `RunOutcome(dry run, 14 receipts: 0 succeeded, 12 dry run, …)`.
    #[napi]
    #[allow(
        clippy::inherent_to_string,
        reason = "JS calls toString(); Display is not visible from JS"
    )]
    pub fn to_string(&self) -> String {
        format!(
            "RunOutcome({}{} receipts: {} succeeded, {} dry run, {} skipped, {} deferred, {} failed)",
            if self.inner.dry_run { "dry run, " } else { "" },
            self.inner.receipts.len(),
            self.inner.count(ReceiptStatus::Succeeded),
            self.inner.count(ReceiptStatus::DryRun),
            self.inner.count(ReceiptStatus::Skipped),
            self.inner.count(ReceiptStatus::Deferred),
            self.inner.count(ReceiptStatus::Failed),
        )
    }
}

/// One table of a fleet run.
#[napi(object, object_from_js = false)]
pub struct FleetTable {
    /// Table identifier.
    pub table: String,
    /// Destination its steps went to (`native`).
    pub destination: String,
    /// `done`, `failed`, `deferred` or `skipped`.
    pub status: String,
    /// Steps that ran and succeeded (or dry-ran).
    pub steps_done: u32,
    /// Steps that failed.
    pub steps_failed: u32,
    /// Steps that never started.
    pub steps_deferred: u32,
    /// Steps skipped.
    pub steps_skipped: u32,
    /// Times the governor deferred this table.
    pub deferrals: u32,
}

/// What a fleet run did: receipts for every decision and a report per table.
#[napi]
pub struct FleetOutcome {
    pub(crate) inner: Arc<cryo_core::exec::FleetOutcome>,
    pub(crate) governor_state: String,
}

#[napi]
impl FleetOutcome {
    /// The governor's state after the run (limits, slots, learned thresholds), as JSON: give it
    /// back as `runFleet`'s `governorState` to keep what it learned.
    #[napi(getter)]
    pub fn governor_state(&self) -> String {
        self.governor_state.clone()
    }

    /// Fingerprint of the plan that ran.
    #[napi(getter)]
    pub fn plan_fingerprint(&self) -> String {
        self.inner.plan_fingerprint.clone()
    }
    /// True when nothing was changed.
    #[napi(getter)]
    pub fn dry_run(&self) -> bool {
        self.inner.dry_run
    }
    /// Wall time.
    #[napi(getter)]
    pub fn duration_ms(&self) -> i64 {
        self.inner.duration_ms as i64
    }
    /// Receipts by status: `admitted`, `succeeded`, `dry_run`, `deferred`, `failed`, ….
    #[napi(getter)]
    pub fn counts(&self) -> HashMap<String, u32> {
        counts(&self.inner.receipts)
    }
    /// Per table: destination, status and step counts.
    #[napi]
    pub fn tables(&self) -> napi::Result<Vec<FleetTable>> {
        self.inner
            .tables
            .iter()
            .map(|t| {
                Ok(FleetTable {
                    table: t.table.to_string(),
                    destination: t.destination.clone(),
                    status: serde_name(&t.status)?,
                    steps_done: t.steps_done as u32,
                    steps_failed: t.steps_failed as u32,
                    steps_deferred: t.steps_deferred as u32,
                    steps_skipped: t.steps_skipped as u32,
                    deferrals: t.deferrals as u32,
                })
            })
            .collect()
    }
    /// The receipts (Arrow IPC stream).
    #[napi]
    pub fn receipts(&self) -> napi::Result<Buffer> {
        ipc_result(receipt::receipts_batch(&self.inner.receipts))
    }
    /// Everything cryo-core reports (its serde form).
    #[napi(ts_return_type = "Record<string, any>")]
    pub fn to_object(&self) -> napi::Result<Value> {
        to_value(self.inner.as_ref())
    }
    /// `FleetOutcome(dry run, 5 tables: 5 done; 30 receipts: …)`.
    #[napi]
    #[allow(
        clippy::inherent_to_string,
        reason = "JS calls toString(); Display is not visible from JS"
    )]
    pub fn to_string(&self) -> String {
        let done = self
            .inner
            .tables
            .iter()
            .filter(|t| t.status == cryo_core::exec::TableStatus::Done)
            .count();
        format!(
            "FleetOutcome({}{} tables: {done} done; {} receipts: {} admitted, {} succeeded, {} dry run, {} deferred, {} failed)",
            if self.inner.dry_run { "dry run, " } else { "" },
            self.inner.tables.len(),
            self.inner.receipts.len(),
            self.inner.count(ReceiptStatus::Admitted),
            self.inner.count(ReceiptStatus::Succeeded),
            self.inner.count(ReceiptStatus::DryRun),
            self.inner.count(ReceiptStatus::Deferred),
            self.inner.count(ReceiptStatus::Failed),
        )
    }
}
