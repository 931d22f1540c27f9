//! The native `Catalog`: a connected cryo-core catalog and every operation on its tables.
//!
//! Each method translates its arguments (a table name, keyword options overlaid on the core
//! options' `Default`), runs the core function on the shared runtime without the GIL, and wraps
//! the result. Orchestration and defaults are cryo-core's.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use cryo_core::clock::SystemClock;
use cryo_core::compact::{CompactOptions, Compaction, RunOptions};
use cryo_core::exec::{
    ControlSources, FleetOptions, FleetRun, MaintenanceOptions, MaintenanceRun, SqlEngine,
};
use cryo_core::govern::open_locks;
use cryo_core::grade::GradeOptions;
use cryo_core::maintain::{
    ComputeStatisticsOptions, ConvertEqualityDeletesOptions, ExpireOptions,
    FindMissingFilesOptions, RemoveOrphanFilesOptions, RewriteManifestsOptions,
    RewritePositionDeletesOptions, compute_statistics, convert_equality_deletes, expire_snapshots,
    find_missing_files, remove_orphan_files, rewrite_manifests, rewrite_position_deletes,
};
use cryo_core::plan::{PlanOptions, plan_scans};
use cryo_core::receipt::ReceiptLog;
use cryo_core::scan::arrow::files_schema;
use cryo_core::scan::{
    FleetScanOptions, ScanOptions, file_batches, scan_fleet_with_progress, scan_table,
};
use cryo_core::{Catalog as CoreCatalog, CatalogConfig, TableId};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::arrow::ArrowResult;
use crate::convert::{options, options_pair};
use crate::engines::{Engine, PyGovernor};
use crate::errors::check;
use crate::models::{
    CompactionOutcome, ComputeStatisticsOutcome, ConvertEqualityDeletesOutcome, ExpireOutcome,
    FleetOutcome, FleetScan, MissingFilesOutcome, Plan, RemoveOrphanFilesOutcome,
    RewriteManifestsOutcome, RewritePositionDeletesOutcome, RunOutcome, TableScan,
};
use crate::policy::{Advice, Policy};
use crate::progress::sink;
use crate::runtime::{finish_holding_gil, wait};

/// Longest a dropped catalog waits for its connections to close.
const CLOSE_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// A connected Iceberg catalog (sql, glue, hive, rest, hadoop or a single static table),
/// configured with PyIceberg's properties.
///
/// Connections do not survive `os.fork()` (their threads stay in the parent), so a catalog used
/// in a forked child (an Airflow worker) reconnects there from its configuration first.
#[pyclass(frozen, module = "cryo._cryo", name = "Catalog")]
pub struct Catalog {
    /// The process that connected, and the connection.
    connected: Mutex<(u32, Arc<CoreCatalog>)>,
}

impl Catalog {
    pub(crate) fn from_core(catalog: CoreCatalog) -> Self {
        Self {
            connected: Mutex::new((std::process::id(), Arc::new(catalog))),
        }
    }

    /// The connection for this process (reconnecting after a fork).
    fn core(&self, py: Python<'_>) -> PyResult<Arc<CoreCatalog>> {
        let pid = std::process::id();
        let config = {
            let guard = self
                .connected
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if guard.0 == pid {
                return Ok(Arc::clone(&guard.1));
            }
            guard.1.config().clone()
        };
        // Not under the lock: connecting releases the GIL, and another thread may want both.
        let fresh = Arc::new(wait(py, move || async move {
            CoreCatalog::connect(config).await
        })?);
        let mut guard = self
            .connected
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if guard.0 != pid {
            let stale = std::mem::replace(&mut *guard, (pid, Arc::clone(&fresh)));
            // Its pools belong to threads the parent kept: dropping them here could block.
            std::mem::forget(stale);
        }
        Ok(Arc::clone(&guard.1))
    }

    /// The connection for this process, without a possible reconnect (metadata only).
    fn current(&self) -> Arc<CoreCatalog> {
        Arc::clone(
            &self
                .connected
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .1,
        )
    }

    fn table(table: &str) -> PyResult<TableId> {
        check(TableId::parse(table))
    }
}

impl Drop for Catalog {
    /// Close this process's connections before they are dropped, while the caller holds the
    /// GIL: dropped, a pool closes its `SQLite` connections in the background, and an
    /// `os.fork()` right after (Airflow forks workers after parsing DAG files) could copy a
    /// lock `SQLite` holds while closing, leaving the child hung on its first `SQLite` call.
    fn drop(&mut self) {
        let (owner, core) = self
            .connected
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if *owner != std::process::id() {
            // Inherited through fork: its pools belong to threads the parent kept.
            std::mem::forget(Arc::clone(core));
        } else if Arc::strong_count(core) == 1 {
            // Nothing else uses it (calls in flight hold a clone): no connection is in use.
            let core = &**core;
            finish_holding_gil(async move {
                let _ = tokio::time::timeout(CLOSE_LIMIT, core.close()).await;
            });
        }
    }
}

#[pymethods]
impl Catalog {
    /// Connect to a catalog: `Catalog("prod", type="rest", uri=..., warehouse=...)`.
    #[new]
    #[pyo3(signature = (name, properties))]
    fn new(py: Python<'_>, name: String, properties: BTreeMap<String, String>) -> PyResult<Self> {
        let config = CatalogConfig::new(name, properties);
        let inner = wait(
            py,
            move || async move { CoreCatalog::connect(config).await },
        )?;
        Ok(Self::from_core(inner))
    }

    /// Catalog name.
    #[getter]
    fn name(&self) -> String {
        self.current().name().to_string()
    }

    /// `sql`, `glue`, `hive`, `rest`, `hadoop` or `static`.
    #[getter]
    fn kind(&self) -> PyResult<String> {
        match serde_json::to_value(self.current().kind()) {
            Ok(serde_json::Value::String(s)) => Ok(s),
            _ => Err(crate::errors::internal("catalog kind is not a string")),
        }
    }

    /// Every table, as `namespace.table` identifiers.
    fn list_tables(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let cat = self.core(py)?;
        let ids = wait(py, move || async move { cat.list_all_tables().await })?;
        Ok(ids.iter().map(ToString::to_string).collect())
    }

    /// Scan one table's metadata.
    #[pyo3(signature = (table, options = None))]
    fn scan(
        &self,
        py: Python<'_>,
        table: &str,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<TableScan> {
        let id = Self::table(table)?;
        let opts: ScanOptions = self::options("scan options", options)?;
        let cat = self.core(py)?;
        let scan = wait(py, move || async move {
            scan_table(&cat, &id, &opts, &SystemClock).await
        })?;
        Ok(TableScan {
            inner: Arc::new(scan),
        })
    }

    /// Every live file of the table's current snapshot (data and delete files), as Arrow.
    #[pyo3(signature = (table, options = None))]
    fn files(
        &self,
        py: Python<'_>,
        table: &str,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<ArrowResult> {
        let id = Self::table(table)?;
        let opts: ScanOptions = self::options("scan options", options)?;
        let cat = self.core(py)?;
        // One batch per manifest, built as the manifests stream past.
        let batches = wait(py, move || async move {
            let loaded = cat.load_table(&id).await?;
            futures::TryStreamExt::try_collect(file_batches(&loaded, &opts).await?).await
        })?;
        Ok(ArrowResult::from_batches("files", files_schema(), batches))
    }

    /// Scan every table of the catalog, calling `progress` (if given) as each table is done.
    #[pyo3(signature = (options = None, progress = None))]
    fn scan_fleet(
        &self,
        py: Python<'_>,
        options: Option<&Bound<'_, PyDict>>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<FleetScan> {
        let opts: FleetScanOptions = self::options("fleet scan options", options)?;
        let cat = self.core(py)?;
        let progress = sink(progress);
        let fleet = wait(py, move || async move {
            scan_fleet_with_progress(&cat, &opts, &SystemClock, progress.as_ref()).await
        })?;
        Ok(FleetScan {
            inner: Arc::new(fleet),
        })
    }

    /// Grade the scans and plan their maintenance, worst tables first, under the tables'
    /// controls (`ControlSources`: pauses, deadlines, last runs, a receipt log). Under a
    /// `policy`, each table is planned with its preset (the policy gives the prices and
    /// options: `grade_options` and `options` must then be left out).
    #[pyo3(signature = (scans, grade_options = None, options = None, controls = None, policy = None, only_due = false))]
    #[allow(
        clippy::too_many_arguments,
        reason = "the keyword arguments of Catalog.plan"
    )]
    fn plan(
        &self,
        py: Python<'_>,
        scans: Vec<Bound<'_, TableScan>>,
        grade_options: Option<&Bound<'_, PyDict>>,
        options: Option<&Bound<'_, PyDict>>,
        controls: Option<&Bound<'_, PyDict>>,
        policy: Option<Bound<'_, Policy>>,
        only_due: bool,
    ) -> PyResult<Plan> {
        let policy = policy.map(|p| Arc::clone(&p.get().inner));
        if only_due && policy.is_none() {
            return Err(crate::errors::validation(
                "only_due plans what a policy says is due: give the policy",
            ));
        }
        if policy.is_some() && (grade_options.is_some() || options.is_some()) {
            return Err(crate::errors::validation(
                "under a policy the policy gives the prices and the planning options: leave out grade_options and options",
            ));
        }
        let grading: GradeOptions = self::options("grade options", grade_options)?;
        let planning: PlanOptions = self::options("plan options", options)?;
        let sources: ControlSources = self::options("plan controls", controls)?;
        let scans = TableScan::core_all(scans);
        let cat = self.core(py)?;
        let plan = wait(py, move || async move {
            // A receipt log on object storage is read with the catalog's storage.
            let controls = sources.load_from(&cat).await?;
            match policy {
                Some(policy) if only_due => {
                    let receipts = sources.receipts_from(&cat).await?;
                    policy.plan_due_scans(cat.name(), &scans, &receipts, &controls)
                }
                Some(policy) => policy.plan_scans(cat.name(), &scans, &controls),
                None => plan_scans(cat.name(), &scans, &grading, &planning, &controls),
            }
        })?;
        Ok(Plan {
            inner: Arc::new(plan),
        })
    }

    /// The table property changes the scans' grades recommend, as advice to approve.
    fn advise(&self, py: Python<'_>, scans: Vec<Bound<'_, TableScan>>) -> PyResult<Advice> {
        let scans = TableScan::core_all(scans);
        let name = self.core(py)?.name().to_string();
        let advice =
            crate::runtime::blocking(py, move || cryo_core::policy::advise_scans(&name, &scans))?;
        Ok(Advice {
            inner: Arc::new(advice),
        })
    }

    /// Commit exactly the approved advice (nothing unless `approved` is its fingerprint), one
    /// commit per table, refusing a table whose properties moved since; the receipts go to
    /// `receipt_log` if given. Returns the outcome as plain Python values.
    #[pyo3(signature = (advice, approved, receipt_log = None, actor = None))]
    fn apply_advice<'py>(
        &self,
        py: Python<'py>,
        advice: &Bound<'py, Advice>,
        approved: String,
        receipt_log: Option<String>,
        actor: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let advice = Arc::clone(&advice.get().inner);
        let cat = self.core(py)?;
        let actor = actor.unwrap_or_else(|| "python".to_string());
        let outcome = wait(py, move || async move {
            let outcome = cryo_core::policy::apply_advice(&cat, &advice, &approved, &actor).await?;
            if let Some(spec) = receipt_log {
                ReceiptLog::open(&cat, &spec)?
                    .append(&outcome.receipts)
                    .await?;
            }
            Ok(outcome)
        })?;
        crate::convert::to_python(py, &outcome)
    }

    /// What is due under `policy` (at the time of the newest scan): the tables and operations
    /// whose cadence has come, inside their windows, not paused, and those backing off after
    /// failures in a row, counted from the receipt log of `controls`.
    #[pyo3(signature = (scans, policy, controls = None))]
    fn due<'py>(
        &self,
        py: Python<'py>,
        scans: Vec<Bound<'py, TableScan>>,
        policy: &Bound<'py, Policy>,
        controls: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let policy = Arc::clone(&policy.get().inner);
        let sources: ControlSources = self::options("plan controls", controls)?;
        let scans = TableScan::core_all(scans);
        let cat = self.core(py)?;
        let due = wait(py, move || async move {
            let receipts = sources.receipts_from(&cat).await?;
            policy.due_scans(&scans, &receipts)
        })?;
        crate::convert::to_python(py, &due)
    }

    /// Each table under `policy`: its preset and why, and for each operation of the preset
    /// whether a run now plans it, or when it may run next and what holds it back (as plain
    /// Python values, one dict per table, sorted by table).
    #[pyo3(signature = (scans, policy, controls = None))]
    fn explain<'py>(
        &self,
        py: Python<'py>,
        scans: Vec<Bound<'py, TableScan>>,
        policy: &Bound<'py, Policy>,
        controls: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let policy = Arc::clone(&policy.get().inner);
        let sources: ControlSources = self::options("plan controls", controls)?;
        let scans = TableScan::core_all(scans);
        let cat = self.core(py)?;
        let explained = wait(py, move || async move {
            let controls = sources.load_from(&cat).await?;
            policy.explain_scans(cat.name(), &scans, &controls)
        })?;
        crate::convert::to_python(py, &explained)
    }

    /// Compact one table's data files, calling `progress` (if given) as groups are rewritten.
    #[pyo3(signature = (table, options = None, progress = None))]
    fn compact(
        &self,
        py: Python<'_>,
        table: &str,
        options: Option<&Bound<'_, PyDict>>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<CompactionOutcome> {
        let id = Self::table(table)?;
        let (what, how): (CompactOptions, RunOptions) = options_pair("compact options", options)?;
        let cat = self.core(py)?;
        let progress = sink(progress);
        let outcome = wait(py, move || async move {
            let mut compaction = Compaction::new(&cat, id)
                .with_options(what)
                .with_run_options(how);
            if let Some(p) = progress {
                compaction = compaction.with_progress(p);
            }
            compaction.execute().await
        })?;
        Ok(CompactionOutcome {
            inner: Arc::new(outcome),
        })
    }

    /// Expire snapshots (a dry run unless `dry_run=False`: cryo-core's default).
    #[pyo3(signature = (table, options = None))]
    fn expire_snapshots(
        &self,
        py: Python<'_>,
        table: &str,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<ExpireOutcome> {
        let id = Self::table(table)?;
        let opts: ExpireOptions = self::options("expire options", options)?;
        let cat = self.core(py)?;
        let outcome = wait(py, move || async move {
            expire_snapshots(&cat, &id, &opts).await
        })?;
        Ok(ExpireOutcome {
            inner: Arc::new(outcome),
        })
    }

    /// Rewrite the current snapshot's manifests.
    #[pyo3(signature = (table, options = None))]
    fn rewrite_manifests(
        &self,
        py: Python<'_>,
        table: &str,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<RewriteManifestsOutcome> {
        let id = Self::table(table)?;
        let opts: RewriteManifestsOptions = self::options("rewrite_manifests options", options)?;
        let cat = self.core(py)?;
        let outcome = wait(py, move || async move {
            rewrite_manifests(&cat, &id, &opts).await
        })?;
        Ok(RewriteManifestsOutcome {
            inner: Arc::new(outcome),
        })
    }

    /// Compute the current snapshot's column statistics (theta sketches in a Puffin file).
    #[pyo3(signature = (table, options = None))]
    fn compute_statistics(
        &self,
        py: Python<'_>,
        table: &str,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<ComputeStatisticsOutcome> {
        let id = Self::table(table)?;
        let opts: ComputeStatisticsOptions = self::options("compute_statistics options", options)?;
        let cat = self.core(py)?;
        let outcome = wait(py, move || async move {
            compute_statistics(&cat, &id, &opts).await
        })?;
        Ok(ComputeStatisticsOutcome {
            inner: Arc::new(outcome),
        })
    }

    /// Turn equality deletes into position deletes (v2) or deletion vectors (v3), the data
    /// files untouched.
    #[pyo3(signature = (table, options = None))]
    fn convert_equality_deletes(
        &self,
        py: Python<'_>,
        table: &str,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<ConvertEqualityDeletesOutcome> {
        let id = Self::table(table)?;
        let opts: ConvertEqualityDeletesOptions =
            self::options("convert_equality_deletes options", options)?;
        let cat = self.core(py)?;
        let outcome = wait(py, move || async move {
            convert_equality_deletes(&cat, &id, &opts).await
        })?;
        Ok(ConvertEqualityDeletesOutcome {
            inner: Arc::new(outcome),
        })
    }

    /// Combine small position-delete files and drop dangling ones.
    #[pyo3(signature = (table, options = None))]
    fn rewrite_position_deletes(
        &self,
        py: Python<'_>,
        table: &str,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<RewritePositionDeletesOutcome> {
        let id = Self::table(table)?;
        let opts: RewritePositionDeletesOptions =
            self::options("rewrite_position_deletes options", options)?;
        let cat = self.core(py)?;
        let outcome = wait(py, move || async move {
            rewrite_position_deletes(&cat, &id, &opts).await
        })?;
        Ok(RewritePositionDeletesOutcome {
            inner: Arc::new(outcome),
        })
    }

    /// Find (and, unless a dry run, delete) files under the table's location no snapshot uses.
    #[pyo3(signature = (table, options = None))]
    fn remove_orphan_files(
        &self,
        py: Python<'_>,
        table: &str,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<RemoveOrphanFilesOutcome> {
        let id = Self::table(table)?;
        let opts: RemoveOrphanFilesOptions = self::options("remove_orphan_files options", options)?;
        let cat = self.core(py)?;
        let outcome = wait(py, move || async move {
            remove_orphan_files(&cat, &id, &opts).await
        })?;
        Ok(RemoveOrphanFilesOutcome {
            inner: Arc::new(outcome),
        })
    }

    /// Check that every file the table references exists.
    #[pyo3(signature = (table, options = None))]
    fn missing_files(
        &self,
        py: Python<'_>,
        table: &str,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<MissingFilesOutcome> {
        let id = Self::table(table)?;
        let opts: FindMissingFilesOptions = self::options("missing_files options", options)?;
        let cat = self.core(py)?;
        let outcome = wait(py, move || async move {
            find_missing_files(&cat, &id, &opts).await
        })?;
        Ok(MissingFilesOutcome {
            inner: Arc::new(outcome),
        })
    }

    /// The receipts of a receipt log (a JSON-lines file, or an object-store location read with
    /// this catalog's storage properties), oldest first, as Arrow.
    fn read_receipts(&self, py: Python<'_>, location: String) -> PyResult<ArrowResult> {
        let cat = self.core(py)?;
        let batch = wait(py, move || async move {
            let receipts = ReceiptLog::open(&cat, &location)?.read().await?;
            cryo_core::receipt::receipts_batch(&receipts)
        })?;
        Ok(ArrowResult::new("receipts", batch))
    }

    /// Run a plan on Cryo's native engine (a dry run unless `dry_run=False`: cryo-core's
    /// default), optionally under per-table locks (`lock_dir`: a directory of file locks,
    /// `"catalog"` for the SQL catalog's PostgreSQL database, or an object-store location) and
    /// appending receipts to `receipt_log` (a JSON-lines file, or an object-store location),
    /// calling `progress` (if given) as each table is done.
    #[pyo3(signature = (plan, lock_dir = None, receipt_log = None, options = None, progress = None))]
    fn run(
        &self,
        py: Python<'_>,
        plan: &Plan,
        lock_dir: Option<String>,
        receipt_log: Option<String>,
        options: Option<&Bound<'_, PyDict>>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<RunOutcome> {
        let opts: MaintenanceOptions = self::options("run options", options)?;
        let cat = self.core(py)?;
        let plan = Arc::clone(&plan.inner);
        let progress = sink(progress);
        let outcome = wait(py, move || async move {
            let mut run = MaintenanceRun::new(&cat, &plan).with_options(opts);
            if let Some(p) = progress {
                run = run.with_progress(p);
            }
            if let Some(spec) = lock_dir {
                run = run.with_locks(open_locks(&cat, &spec).await?);
            }
            if let Some(spec) = receipt_log {
                run = run.with_receipt_log(ReceiptLog::open(&cat, &spec)?);
            }
            run.execute().await
        })?;
        Ok(RunOutcome {
            inner: Arc::new(outcome),
        })
    }

    /// Run a plan over destinations (`native`, and the given engines), each step when the
    /// governor admits it; receipts for every decision.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (plan, destinations, governor = None, lock_dir = None, receipt_log = None, options = None, progress = None, controls = None))]
    fn run_fleet(
        &self,
        py: Python<'_>,
        plan: &Plan,
        destinations: BTreeMap<String, Py<Engine>>,
        governor: Option<&PyGovernor>,
        lock_dir: Option<String>,
        receipt_log: Option<String>,
        options: Option<&Bound<'_, PyDict>>,
        progress: Option<Py<PyAny>>,
        controls: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<FleetOutcome> {
        let opts: FleetOptions = self::options("fleet options", options)?;
        let controls: ControlSources = self::options("run controls", controls)?;
        let cat = self.core(py)?;
        let plan = Arc::clone(&plan.inner);
        let engines: Vec<(String, Arc<dyn SqlEngine>)> = destinations
            .into_iter()
            .map(|(name, e)| (name, Arc::clone(&e.get().inner)))
            .collect();
        let governor = governor.map(|g| Arc::clone(&g.inner));
        let progress = sink(progress);
        let outcome = wait(py, move || async move {
            let mut run = FleetRun::new(&cat, &plan)
                .with_options(opts)
                .with_controls(controls.load_from(&cat).await?);
            for (name, engine) in engines {
                run = run.with_engine(name, engine);
            }
            if let Some(g) = governor {
                run = run.with_governor(g);
            }
            if let Some(p) = progress {
                run = run.with_progress(p);
            }
            if let Some(spec) = lock_dir {
                run = run.with_locks(open_locks(&cat, &spec).await?);
            }
            if let Some(spec) = receipt_log {
                run = run.with_receipt_log(ReceiptLog::open(&cat, &spec)?);
            }
            run.execute().await
        })?;
        Ok(FleetOutcome {
            inner: Arc::new(outcome),
        })
    }

    fn __repr__(&self) -> String {
        let current = self.current();
        let config = current.config();
        format!(
            "Catalog({:?}, type={})",
            config.name,
            self.kind().unwrap_or_default()
        )
    }
}
