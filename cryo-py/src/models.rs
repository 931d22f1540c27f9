//! Small results as frozen Python classes: the key figures as attributes, a readable `repr`,
//! and `to_dict()` with everything cryo-core's serde form carries.

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
use cryo_core::receipt::{self, ReceiptStatus};
use cryo_core::render::{SparkDialect, SparkOptions, TrinoDialect, TrinoOptions, render_plan};
use cryo_core::scan::{self, FleetScan as CoreFleet, TableScan as CoreScan};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::arrow::ArrowResult;
use crate::convert::{options, to_python};
use crate::errors::{self, check};
use crate::runtime::blocking;

/// HTML for notebooks (`_repr_html_`): laid out in Python by `cryo._html.<renderer>(obj)` from the
/// figures the object exposes.
fn html(obj: &Bound<'_, PyAny>, renderer: &str) -> PyResult<String> {
    obj.py()
        .import("cryo._html")?
        .call_method1(renderer, (obj,))?
        .extract()
}

/// `12.3 MB`-style sizes for `repr`s.
pub(crate) fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Files and bytes an operation concerns.
#[pyclass(frozen, module = "cryo._cryo", name = "Footprint", eq)]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Footprint {
    /// Number of files.
    #[pyo3(get)]
    files: u64,
    /// Total size in bytes.
    #[pyo3(get)]
    bytes: u64,
}

impl From<receipt::Footprint> for Footprint {
    fn from(f: receipt::Footprint) -> Self {
        Self {
            files: f.files,
            bytes: f.bytes,
        }
    }
}

#[pymethods]
impl Footprint {
    fn __repr__(&self) -> String {
        format!("Footprint(files={}, bytes={})", self.files, self.bytes)
    }
}

// ---- scans ---------------------------------------------------------------------------------

/// What a metadata-only scan of one table found.
#[pyclass(frozen, module = "cryo._cryo", name = "TableScan")]
pub struct TableScan {
    pub(crate) inner: Arc<CoreScan>,
}

impl TableScan {
    /// cryo-core's scans, for a call that takes them by value.
    pub(crate) fn core_all(scans: Vec<Bound<'_, TableScan>>) -> Vec<CoreScan> {
        scans
            .into_iter()
            .map(|s| s.get().inner.as_ref().clone())
            .collect()
    }
}

#[pymethods]
impl TableScan {
    /// Table identifier (`namespace.table`).
    #[getter]
    fn table(&self) -> String {
        self.inner.table.to_string()
    }
    /// Catalog name.
    #[getter]
    fn catalog(&self) -> &str {
        &self.inner.catalog
    }
    /// Iceberg format version.
    #[getter]
    fn format_version(&self) -> u8 {
        self.inner.format_version
    }
    /// Current snapshot id (None for an empty table).
    #[getter]
    fn current_snapshot_id(&self) -> Option<i64> {
        self.inner.current_snapshot_id
    }
    /// Live data files.
    #[getter]
    fn data_files(&self) -> u64 {
        self.inner.data_files.count
    }
    /// Bytes of live data files.
    #[getter]
    fn data_bytes(&self) -> u64 {
        self.inner.data_files.bytes
    }
    /// Live records.
    #[getter]
    fn records(&self) -> u64 {
        self.inner.data_files.records
    }
    /// Snapshots in the metadata.
    #[getter]
    fn snapshots(&self) -> usize {
        self.inner.snapshots.count
    }
    /// Manifests of the current snapshot.
    #[getter]
    fn manifests(&self) -> u64 {
        self.inner.manifests.count
    }
    /// Live delete files (position, equality and deletion vectors).
    #[getter]
    fn delete_files(&self) -> u64 {
        self.inner.delete_files.files()
    }
    /// When the scan read the metadata (epoch milliseconds).
    #[getter]
    fn scanned_at_ms(&self) -> i64 {
        self.inner.scanned_at_ms
    }
    /// Per-partition statistics, one row per partition (Arrow).
    fn partitions(&self, py: Python<'_>) -> PyResult<ArrowResult> {
        let scans = std::slice::from_ref(self.inner.as_ref());
        let batch = blocking(py, || scan::arrow::partitions_batch(scans))?;
        Ok(ArrowResult::new("partitions", batch))
    }
    /// Everything the scan measured, as plain Python values.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self.inner.as_ref())
    }
    fn __repr__(&self) -> String {
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

/// A scan of every table of a catalog.
#[pyclass(frozen, module = "cryo._cryo", name = "FleetScan")]
pub struct FleetScan {
    pub(crate) inner: Arc<CoreFleet>,
}

#[pymethods]
impl FleetScan {
    /// Catalog name.
    #[getter]
    fn catalog(&self) -> &str {
        &self.inner.catalog
    }
    /// The scanned tables.
    #[getter]
    fn tables(&self) -> Vec<TableScan> {
        self.inner
            .tables
            .iter()
            .map(|t| TableScan {
                inner: Arc::new(t.clone()),
            })
            .collect()
    }
    /// Tables (or namespaces) that could not be scanned: dicts with `target`, `code`, `message`.
    #[getter]
    fn errors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner.errors)
    }
    /// When the scan started (epoch milliseconds).
    #[getter]
    fn scanned_at_ms(&self) -> i64 {
        self.inner.scanned_at_ms
    }
    /// Wall time of the scan.
    #[getter]
    fn duration_ms(&self) -> u64 {
        self.inner.duration_ms
    }
    /// Per-partition statistics of every table (Arrow).
    fn partitions(&self, py: Python<'_>) -> PyResult<ArrowResult> {
        let scans = self.inner.tables.as_slice();
        let batch = blocking(py, || scan::arrow::partitions_batch(scans))?;
        Ok(ArrowResult::new("partitions", batch))
    }
    /// Everything the scan measured, as plain Python values.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self.inner.as_ref())
    }
    fn __len__(&self) -> usize {
        self.inner.tables.len()
    }
    /// Notebook view: every table graded (cryo-core's default options), worst first.
    fn _repr_html_(slf: &Bound<'_, Self>) -> PyResult<String> {
        html(slf.as_any(), "fleet_scan")
    }
    fn __repr__(&self) -> String {
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
#[pyclass(frozen, module = "cryo._cryo", name = "Finding")]
pub struct Finding {
    /// Stable check code (key alerts on this, never on the message).
    #[pyo3(get)]
    code: String,
    /// `warn` or `crit`.
    #[pyo3(get)]
    severity: String,
    /// Points deducted.
    #[pyo3(get)]
    points: u32,
    /// What was measured, in `unit`.
    #[pyo3(get)]
    measured: f64,
    /// The threshold the measurement crossed.
    #[pyo3(get)]
    threshold: f64,
    /// Unit of `measured` and `threshold`.
    #[pyo3(get)]
    unit: String,
    /// Why it matters, for people.
    #[pyo3(get)]
    reason: String,
    /// The fix, for people.
    #[pyo3(get)]
    remedy: String,
    /// The maintenance operation that fixes it, if one does.
    #[pyo3(get)]
    operation: Option<String>,
    /// Estimated monthly saving (USD) of that operation on this table, if estimated.
    #[pyo3(get)]
    saving_usd_month: Option<f64>,
}

#[pymethods]
impl Finding {
    fn __repr__(&self) -> String {
        format!(
            "Finding({} [{}] -{}: {}{})",
            self.code,
            self.severity,
            self.points,
            self.reason,
            self.operation
                .as_ref()
                .map_or_else(String::new, |op| format!(" -> {op}"))
        )
    }
}

/// A table's grade (A–F), score and the findings behind it.
#[pyclass(frozen, module = "cryo._cryo", name = "HealthReport")]
pub struct HealthReport {
    pub(crate) inner: Arc<CoreReport>,
}

#[pymethods]
impl HealthReport {
    /// Letter grade, `A` (healthy) to `F`.
    #[getter]
    fn grade(&self) -> String {
        self.inner.grade.to_string()
    }
    /// Score out of 100.
    #[getter]
    fn score(&self) -> u32 {
        self.inner.score
    }
    /// Table identifier.
    #[getter]
    fn table(&self) -> String {
        self.inner.table.to_string()
    }
    /// Catalog name.
    #[getter]
    fn catalog(&self) -> &str {
        &self.inner.catalog
    }
    /// The deductions, worst first as cryo-core orders them.
    #[getter]
    fn findings(&self) -> PyResult<Vec<Finding>> {
        let savings = &self.inner.cost.savings;
        self.inner
            .findings
            .iter()
            .map(|f| {
                let severity = match serde_json::to_value(f.severity).map_err(errors::internal)? {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                };
                let op = f.remedy.operation();
                Ok(Finding {
                    code: f.code.clone(),
                    severity,
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
    #[getter]
    fn passed(&self) -> Vec<String> {
        self.inner.passed.clone()
    }
    /// The operations the findings call for.
    #[getter]
    fn operations(&self) -> Vec<String> {
        self.inner
            .operations()
            .into_iter()
            .map(|o| o.as_str().to_string())
            .collect()
    }
    /// Estimated monthly cost and savings (a dict).
    #[getter]
    fn cost<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner.cost)
    }
    /// The whole report, as plain Python values.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self.inner.as_ref())
    }
    /// Notebook view: grade, a bar per deduction, the fixes and the cost.
    fn _repr_html_(slf: &Bound<'_, Self>) -> PyResult<String> {
        html(slf.as_any(), "health_report")
    }
    fn __repr__(&self) -> String {
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

/// A maintenance plan: a value that can be stored (`to_json`), reviewed, rendered as SQL and run.
#[pyclass(frozen, module = "cryo._cryo", name = "Plan")]
pub struct Plan {
    pub(crate) inner: Arc<MaintenancePlan>,
}

#[pymethods]
impl Plan {
    /// Read a plan written by `to_json()` (its fingerprint is verified).
    #[staticmethod]
    fn from_json(py: Python<'_>, json: &str) -> PyResult<Plan> {
        let plan = blocking(py, || MaintenancePlan::from_json(json))?;
        Ok(Plan {
            inner: Arc::new(plan),
        })
    }
    /// The plan as JSON (stable, fingerprinted).
    fn to_json(&self) -> PyResult<String> {
        check(self.inner.to_json())
    }
    /// Content fingerprint: compare it between review and run.
    #[getter]
    fn fingerprint(&self) -> &str {
        &self.inner.fingerprint
    }
    /// Catalog name.
    #[getter]
    fn catalog(&self) -> &str {
        &self.inner.catalog
    }
    /// When the plan was made (epoch milliseconds).
    #[getter]
    fn created_at_ms(&self) -> i64 {
        self.inner.created_at_ms
    }
    /// Tables with planned steps.
    #[getter]
    fn tables(&self) -> Vec<String> {
        self.inner
            .tables
            .iter()
            .map(|t| t.table.to_string())
            .collect()
    }
    /// Planned steps, all tables.
    #[getter]
    fn step_count(&self) -> usize {
        self.inner.tables.iter().map(|t| t.steps.len()).sum()
    }
    /// Raise `ValidationError` unless the plan is intact and, when given, carries the fingerprint
    /// a reviewer approved.
    #[pyo3(signature = (reviewed_fingerprint = None))]
    fn verify(&self, reviewed_fingerprint: Option<&str>) -> PyResult<()> {
        check(match reviewed_fingerprint {
            Some(fp) => self.inner.verify_reviewed(fp),
            None => self.inner.verify(),
        })
    }
    /// The plan as a SQL script for `trino` or `spark`; `options` are the dialect's options
    /// (Trino: `catalog`, `version`; Spark: `catalog`, `spark_version`, `iceberg_version`, …).
    #[pyo3(signature = (dialect, **options))]
    fn render(&self, dialect: &str, options: Option<&Bound<'_, PyDict>>) -> PyResult<String> {
        let rendered = match dialect {
            "trino" => {
                let dialect = check(TrinoDialect::new(self::options::<TrinoOptions>(
                    "trino options",
                    options,
                )?))?;
                check(render_plan(&self.inner, &dialect))?
            }
            "spark" => {
                let dialect = check(SparkDialect::new(self::options::<SparkOptions>(
                    "spark options",
                    options,
                )?))?;
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
    /// The whole plan, as plain Python values.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self.inner.as_ref())
    }
    /// Notebook view: tables, their steps in order, chunks and bytes.
    fn _repr_html_(slf: &Bound<'_, Self>) -> PyResult<String> {
        html(slf.as_any(), "plan")
    }
    fn __eq__(&self, other: &Plan) -> bool {
        self.inner.fingerprint == other.inner.fingerprint
    }
    fn __repr__(&self) -> String {
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

// ---- outcomes of the operations ------------------------------------------------------------

/// Frozen outcome classes share: `table`, `dry_run`, `snapshot_before`, `snapshot_ids`,
/// `before`/`after` footprints, `duration_ms`, `to_dict()`, `__repr__`.
macro_rules! outcome {
    (
        $(#[$doc:meta])* $py:ident, $name:literal, $core:ty,
        dry_run: |$o0:ident| $dry_run:expr,
        snapshot_before: |$o1:ident| $before_snapshot:expr,
        snapshot_ids: |$o4:ident| $snapshot_ids:expr,
        before: |$o2:ident| $before:expr,
        after: |$o3:ident| $after:expr,
        { $($extra:tt)* }
    ) => {
        $(#[$doc])*
        #[pyclass(frozen, module = "cryo._cryo", name = $name)]
        pub struct $py {
            pub(crate) inner: Arc<$core>,
        }

        #[pymethods]
        impl $py {
            /// Table identifier.
            #[getter]
            fn table(&self) -> String {
                self.inner.table.to_string()
            }
            /// True when nothing was changed (the figures say what a real run would do).
            #[getter]
            fn dry_run(&self) -> bool {
                let $o0 = self.inner.as_ref();
                $dry_run
            }
            /// Current snapshot before the operation.
            #[getter]
            fn snapshot_before(&self) -> Option<i64> {
                let $o1 = self.inner.as_ref();
                $before_snapshot
            }
            /// Snapshots the operation committed, in order.
            #[getter]
            fn snapshot_ids(&self) -> Vec<i64> {
                let $o4 = self.inner.as_ref();
                $snapshot_ids
            }
            /// Files and bytes the operation concerns, before.
            #[getter]
            fn before(&self) -> Footprint {
                let $o2 = self.inner.as_ref();
                Footprint::from($before)
            }
            /// Files and bytes the operation concerns, after (or after a real run, for a dry run).
            #[getter]
            fn after(&self) -> Footprint {
                let $o3 = self.inner.as_ref();
                Footprint::from($after)
            }
            /// Wall time.
            #[getter]
            fn duration_ms(&self) -> u64 {
                self.inner.duration_ms
            }
            /// Everything cryo-core reports, as plain Python values.
            fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                to_python(py, self.inner.as_ref())
            }
            fn __repr__(&self) -> String {
                let (b, a) = (self.before(), self.after());
                format!(
                    "{}({}{}: {} files, {} -> {} files, {}; {} snapshot(s) committed)",
                    $name,
                    self.inner.table,
                    if self.dry_run() { ", dry run" } else { "" },
                    b.files,
                    human_bytes(b.bytes),
                    a.files,
                    human_bytes(a.bytes),
                    self.snapshot_ids().len()
                )
            }
            $($extra)*
        }
    };
}

fn footprint(files: u64, bytes: u64) -> receipt::Footprint {
    receipt::Footprint { files, bytes }
}

outcome!(
    /// What `compact` did (or, in a dry run, would do).
    CompactionOutcome, "CompactionOutcome", CoreCompaction,
    dry_run: |o| o.dry_run,
    snapshot_before: |o| o.base_snapshot_id,
    snapshot_ids: |o| o.snapshot_ids.clone(),
    before: |o| footprint(o.files_in(), o.bytes_in()),
    after: |o| footprint(o.files_out(), o.bytes_out()),
    {
        /// File groups committed.
        #[getter]
        fn committed_groups(&self) -> usize { self.inner.committed_groups() }
        /// File groups dropped because a concurrent writer changed their files.
        #[getter]
        fn conflicted_groups(&self) -> usize { self.inner.conflicted_groups() }
        /// File groups that failed (their output was cleaned up).
        #[getter]
        fn failed_groups(&self) -> usize { self.inner.failed_groups() }
        /// Rows removed by applying delete files.
        #[getter]
        fn rows_deleted(&self) -> u64 { self.inner.rows_deleted() }
    }
);

outcome!(
    /// What `expire_snapshots` did (or, in a dry run, would do).
    ExpireOutcome, "ExpireOutcome", CoreExpire,
    dry_run: |o| o.dry_run,
    snapshot_before: |o| o.base_snapshot_id,
    snapshot_ids: |o| o.snapshot_ids.clone(),
    before: |o| o.before(),
    after: |o| o.after(),
    {
        /// Snapshots expired (or to expire).
        #[getter]
        fn expired_snapshot_ids(&self) -> Vec<i64> { self.inner.expired_snapshot_ids.clone() }
        /// Snapshots kept.
        #[getter]
        fn retained_snapshot_ids(&self) -> Vec<i64> { self.inner.retained_snapshot_ids.clone() }
        /// Branches and tags removed by their max age.
        #[getter]
        fn removed_refs(&self) -> Vec<String> { self.inner.removed_refs.clone() }
        /// Files no longer reachable (deleted unless this is a dry run), as Arrow.
        fn files(&self, py: Python<'_>) -> PyResult<ArrowResult> {
            let batch = py.detach(|| self.inner.files_batch());
            Ok(ArrowResult::new("expired_files", errors::check(batch)?))
        }
    }
);

outcome!(
    /// What `rewrite_manifests` did (or, in a dry run, would do).
    RewriteManifestsOutcome, "RewriteManifestsOutcome", CoreManifests,
    dry_run: |o| o.dry_run,
    snapshot_before: |o| o.base_snapshot_id,
    snapshot_ids: |o| o.snapshot_ids.clone(),
    before: |o| o.before(),
    after: |o| o.after(),
    {
        /// Manifests replaced.
        #[getter]
        fn manifests_replaced(&self) -> usize { self.inner.manifests_replaced }
        /// Manifests written.
        #[getter]
        fn manifests_created(&self) -> usize { self.inner.manifests_created }
    }
);

outcome!(
    /// What `compute_statistics` did (or, in a dry run, would read).
    ComputeStatisticsOutcome, "ComputeStatisticsOutcome", CoreStatistics,
    dry_run: |o| o.dry_run,
    snapshot_before: |o| o.snapshot_id,
    // Statistics are registered on the snapshot they describe: no snapshot is committed.
    snapshot_ids: |_o| Vec::new(),
    before: |o| o.before(),
    after: |o| o.after(),
    {
        /// The snapshot the statistics describe.
        #[getter]
        fn snapshot_id(&self) -> Option<i64> { self.inner.snapshot_id }
        /// Distinct non-null values per column (`None` in a dry run), in schema order.
        #[getter]
        fn ndv(&self) -> Vec<(String, Option<u64>)> {
            self.inner.columns.iter().map(|c| (c.name.clone(), c.ndv)).collect()
        }
        /// The Puffin file written and registered on the snapshot.
        #[getter]
        fn statistics_path(&self) -> Option<String> { self.inner.statistics_path.clone() }
        /// Live rows read (deletes applied).
        #[getter]
        fn rows(&self) -> u64 { self.inner.rows }
    }
);

outcome!(
    /// What `convert_equality_deletes` did (or, in a dry run, would do).
    ConvertEqualityDeletesOutcome, "ConvertEqualityDeletesOutcome", CoreConvertEquality,
    dry_run: |o| o.dry_run,
    snapshot_before: |o| o.base_snapshot_id,
    snapshot_ids: |o| o.snapshot_ids.clone(),
    before: |o| o.before(),
    after: |o| o.after(),
    {
        /// `committed`, `dry_run`, `nothing` or `conflicted`.
        #[getter]
        fn status(&self) -> &'static str {
            match self.inner.status {
                ConvertEqualityDeletesStatus::Committed { .. } => "committed",
                ConvertEqualityDeletesStatus::DryRun => "dry_run",
                ConvertEqualityDeletesStatus::Conflicted { .. } => "conflicted",
                ConvertEqualityDeletesStatus::Nothing => "nothing",
            }
        }
        /// Equality-delete files converted (they leave the table).
        #[getter]
        fn files_converted(&self) -> u64 { self.inner.files_converted }
        /// Rows the converted deletes delete, now by position.
        #[getter]
        fn positions(&self) -> u64 { self.inner.positions }
        /// Data files whose key columns were read.
        #[getter]
        fn data_files_read(&self) -> u64 { self.inner.data_files_read }
        /// True when the new deletes are deletion vectors (format v3).
        #[getter]
        fn deletion_vectors(&self) -> bool { self.inner.deletion_vectors }
        /// Partitions whose equality deletes stay, with the reason: `[(path, reason)]`.
        #[getter]
        fn left(&self) -> Vec<(String, String)> {
            self.inner.left.iter().map(|l| (l.partition.path.clone(), l.reason.clone())).collect()
        }
    }
);

outcome!(
    /// What `rewrite_position_deletes` did (or, in a dry run, would do).
    RewritePositionDeletesOutcome, "RewritePositionDeletesOutcome", CorePositionDeletes,
    dry_run: |o| o.dry_run,
    snapshot_before: |o| o.base_snapshot_id,
    snapshot_ids: |o| o.snapshot_ids.clone(),
    before: |o| o.before(),
    after: |o| o.after(),
    {
        /// Position-delete files combined into fewer.
        #[getter]
        fn files_combined(&self) -> u64 { self.inner.files_combined() }
        /// Dangling position-delete files removed.
        #[getter]
        fn files_dangling(&self) -> u64 { self.inner.files_dangling() }
        /// Position-delete files written.
        #[getter]
        fn files_added(&self) -> u64 { self.inner.files_added() }
    }
);

outcome!(
    /// What `remove_orphan_files` found and deleted (nothing in a dry run).
    RemoveOrphanFilesOutcome, "RemoveOrphanFilesOutcome", CoreOrphans,
    dry_run: |o| o.dry_run,
    snapshot_before: |o| o.snapshot_id_before,
    snapshot_ids: |o| o.snapshot_ids.clone(),
    before: |o| o.before(),
    after: |o| o.after(),
    {
        /// Orphan files found.
        #[getter]
        fn orphan_count(&self) -> usize { self.inner.orphans.len() }
        /// Bytes of the orphan files.
        #[getter]
        fn orphan_bytes(&self) -> u64 { self.inner.orphan_bytes }
        /// Files deleted (0 in a dry run).
        #[getter]
        fn deleted_files(&self) -> u64 { self.inner.deleted_files }
        /// The orphan files (`path`, `size`, `last_modified`), as Arrow.
        fn orphans(&self, py: Python<'_>) -> PyResult<ArrowResult> {
            let batch = py.detach(|| self.inner.orphans_batch());
            Ok(ArrowResult::new("orphan_files", errors::check(batch)?))
        }
    }
);

outcome!(
    /// Files the table references that storage lacks (read only).
    MissingFilesOutcome, "MissingFilesOutcome", CoreMissing,
    dry_run: |_o| false,
    snapshot_before: |o| o.snapshot_id_before,
    snapshot_ids: |o| o.snapshot_ids.clone(),
    before: |o| o.before(),
    after: |o| o.after(),
    {
        /// True when every referenced file exists.
        #[getter]
        fn is_clean(&self) -> bool { self.inner.is_clean() }
        /// Files checked.
        #[getter]
        fn checked_files(&self) -> u64 { self.inner.checked_files }
        /// Missing files.
        #[getter]
        fn missing_count(&self) -> usize { self.inner.missing.len() }
        /// Rows in missing data files.
        #[getter]
        fn rows_at_risk(&self) -> u64 { self.inner.rows_at_risk }
        /// The missing files (`path`, `kind`, `records`, `bytes`, `snapshots`), as Arrow.
        fn missing(&self, py: Python<'_>) -> PyResult<ArrowResult> {
            let batch = py.detach(|| self.inner.missing_batch());
            Ok(ArrowResult::new("missing_files", errors::check(batch)?))
        }
    }
);

/// What a maintenance run did: a receipt per decision.
#[pyclass(frozen, module = "cryo._cryo", name = "RunOutcome")]
pub struct RunOutcome {
    pub(crate) inner: Arc<MaintenanceOutcome>,
}

#[pymethods]
impl RunOutcome {
    /// Fingerprint of the plan that ran.
    #[getter]
    fn plan_fingerprint(&self) -> &str {
        &self.inner.plan_fingerprint
    }
    /// True when nothing was changed.
    #[getter]
    fn dry_run(&self) -> bool {
        self.inner.dry_run
    }
    /// Wall time.
    #[getter]
    fn duration_ms(&self) -> u64 {
        self.inner.duration_ms
    }
    /// Receipts by status: `succeeded`, `dry_run`, `skipped`, `deferred`, `failed`, ….
    #[getter]
    fn counts(&self) -> std::collections::BTreeMap<&'static str, usize> {
        cryo_core::receipt::status_counts(&self.inner.receipts)
    }
    /// Tables where a step failed.
    #[getter]
    fn failed_tables(&self) -> Vec<String> {
        self.inner
            .failed_tables()
            .into_iter()
            .map(ToString::to_string)
            .collect()
    }
    /// The receipts, as Arrow (`pyarrow.table(outcome.receipts())`).
    fn receipts(&self, py: Python<'_>) -> PyResult<ArrowResult> {
        let receipts = self.inner.receipts.as_slice();
        let batch = blocking(py, || receipt::receipts_batch(receipts))?;
        Ok(ArrowResult::new("receipts", batch))
    }
    /// Everything cryo-core reports, as plain Python values.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self.inner.as_ref())
    }
    /// Notebook view: counts by status and the receipts, coloured by status.
    fn _repr_html_(slf: &Bound<'_, Self>) -> PyResult<String> {
        html(slf.as_any(), "run_outcome")
    }
    fn __repr__(&self) -> String {
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

/// What a fleet run did: receipts for every decision and a report per table.
#[pyclass(frozen, module = "cryo._cryo", name = "FleetOutcome")]
pub struct FleetOutcome {
    pub(crate) inner: Arc<cryo_core::exec::FleetOutcome>,
}

#[pymethods]
impl FleetOutcome {
    /// Fingerprint of the plan that ran.
    #[getter]
    fn plan_fingerprint(&self) -> &str {
        &self.inner.plan_fingerprint
    }
    /// True when nothing was changed.
    #[getter]
    fn dry_run(&self) -> bool {
        self.inner.dry_run
    }
    /// Wall time.
    #[getter]
    fn duration_ms(&self) -> u64 {
        self.inner.duration_ms
    }
    /// Receipts by status: `admitted`, `succeeded`, `deferred`, `failed`, ….
    #[getter]
    fn counts(&self) -> std::collections::BTreeMap<&'static str, usize> {
        cryo_core::receipt::status_counts(&self.inner.receipts)
    }
    /// Per table: destination, status (`done`, `failed`, `deferred`, `skipped`) and step counts.
    fn tables<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner.tables)
    }
    /// The receipts, as Arrow (`pyarrow.table(outcome.receipts())`).
    fn receipts(&self, py: Python<'_>) -> PyResult<ArrowResult> {
        let receipts = self.inner.receipts.as_slice();
        let batch = blocking(py, || receipt::receipts_batch(receipts))?;
        Ok(ArrowResult::new("receipts", batch))
    }
    /// Everything cryo-core reports, as plain Python values.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self.inner.as_ref())
    }
    /// Notebook view: counts by status and the receipts, coloured by status.
    fn _repr_html_(slf: &Bound<'_, Self>) -> PyResult<String> {
        html(slf.as_any(), "run_outcome")
    }
    fn __repr__(&self) -> String {
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
