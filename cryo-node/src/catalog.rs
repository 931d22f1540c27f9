//! The `Catalog` class: a connected cryo-core catalog and every operation on its tables.
//!
//! Each method translates its arguments (a table name, an options object overlaid on the core
//! options' `Default`), runs the core function off the JS thread and returns a Promise of the
//! wrapped result. Orchestration and defaults are cryo-core's.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use cryo_core::clock::SystemClock;
use cryo_core::compact::{CompactOptions, Compaction, RunOptions};
use cryo_core::exec::trino::{TrinoConfig, TrinoEngine};
use cryo_core::exec::{
    ControlSources, FleetOptions, FleetRun, MaintenanceOptions, MaintenanceRun, SqlEngine,
};
use cryo_core::govern::{Bandit, BanditConfig, Governor, Limits, open_locks};
use cryo_core::grade::GradeOptions;
use cryo_core::maintain::{
    ComputeStatisticsOptions, ConvertEqualityDeletesOptions, ExpireOptions,
    FindMissingFilesOptions, RemoveOrphanFilesOptions, RewriteManifestsOptions,
    RewritePositionDeletesOptions, compute_statistics, convert_equality_deletes, expire_snapshots,
    find_missing_files, remove_orphan_files, rewrite_manifests, rewrite_position_deletes,
};
use cryo_core::plan::{PlanOptions, TableControl, plan_scans};
use cryo_core::progress::ProgressSink;
use cryo_core::receipt::ReceiptLog;
use cryo_core::render::{TrinoDialect, TrinoOptions};
use cryo_core::scan::arrow::files_schema;
use cryo_core::scan::{
    FleetScanOptions, ScanOptions, file_batches, scan_fleet_with_progress, scan_table,
};
use cryo_core::{Catalog as CoreCatalog, CatalogConfig, TableId};
use napi::Either;
use napi::bindgen_prelude::{Buffer, Either3};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use serde_json::{Map, Value};

use crate::arrow::ipc_batches;
use crate::convert::{options, options_pair, serde_name, take_string, to_value};
use crate::errors::{self, to_napi};
use crate::models::{
    CompactionOutcome, ComputeStatisticsOutcome, ConvertEqualityDeletesOutcome, ExpireOutcome,
    FleetOutcome, FleetScan, MissingFilesOutcome, Plan, RemoveOrphanFilesOutcome,
    RewriteManifestsOutcome, RewritePositionDeletesOutcome, RunOutcome, TableScan,
};
use crate::policy::{Advice, Policy, core_scans};
use crate::runtime::run;

/// One step forward of a long operation (`scanFleet`, `compact`, `run`, `runFleet`).
#[napi(object, object_from_js = false)]
pub struct ProgressEvent {
    /// `scan` (tables of a fleet scan), `plan` (a compaction planned), `rewrite` (file groups
    /// of a compaction), `run` (tables of a maintenance run).
    pub stage: String,
    /// Units finished so far in this stage.
    pub done: i64,
    /// Units in this stage.
    pub total: i64,
    /// The table the unit belonged to, when there is one.
    pub table: Option<String>,
}

/// A JS progress callback, called on the JS thread (never blocking the operation).
pub type ProgressCallback =
    ThreadsafeFunction<ProgressEvent, (), ProgressEvent, napi::Status, false>;

/// The core progress sink that forwards to a JS callback.
fn sink(callback: Option<ProgressCallback>) -> Option<ProgressSink> {
    let callback = Arc::new(callback?);
    Some(ProgressSink::new(move |p| {
        // Non-blocking: a slow callback must not stall the operation; the status only says
        // whether the call was queued (it is not while the environment shuts down).
        let _ = callback.call(
            ProgressEvent {
                stage: p.stage.to_string(),
                done: p.done as i64,
                total: p.total as i64,
                table: p.table.clone(),
            },
            ThreadsafeFunctionCallMode::NonBlocking,
        );
    }))
}

/// A catalog property value: strings as they are, numbers and booleans as PyIceberg writes them.
fn property(value: Either3<String, f64, bool>) -> String {
    match value {
        Either3::A(s) => s,
        Either3::B(n) if n.fract() == 0.0 && n.abs() < 9.0e15 => format!("{}", n as i64),
        Either3::B(n) => n.to_string(),
        Either3::C(b) => if b { "true" } else { "false" }.to_string(),
    }
}

/// A connected Iceberg catalog (sql, glue, hive, rest, hadoop or a single static table),
/// configured with PyIceberg's property names (`type`, `uri`, `warehouse`, `s3.endpoint`, `token`,
/// …).
#[napi]
pub struct Catalog {
    inner: Arc<CoreCatalog>,
}

impl Catalog {
    /// The catalog PyIceberg's configuration names (see `load_catalog` in lib.rs).
    pub(crate) async fn load(
        name: Option<String>,
        properties: HashMap<String, Either3<String, f64, bool>>,
    ) -> napi::Result<Catalog> {
        let overrides: BTreeMap<String, String> = properties
            .into_iter()
            .map(|(k, v)| (k, property(v)))
            .collect();
        let config = cryo_core::catalog::PyIcebergConfig::from_env()
            .and_then(|c| c.catalog(name.as_deref(), overrides))
            .map_err(|e| to_napi(&e, None))?;
        let redact = config.clone();
        let inner = run(Some(redact), move || async move {
            CoreCatalog::connect(config).await
        })
        .await?;
        Ok(Self::from_core(inner))
    }

    pub(crate) fn from_core(catalog: CoreCatalog) -> Self {
        Self {
            inner: Arc::new(catalog),
        }
    }

    fn config(&self) -> CatalogConfig {
        self.inner.config().clone()
    }

    fn table(&self, table: &str) -> napi::Result<TableId> {
        TableId::parse(table).map_err(|e| to_napi(&e, Some(self.inner.config())))
    }
}

#[napi]
impl Catalog {
    /// Connect to a catalog: `await Catalog.connect("prod", { type: "rest", uri, warehouse })`.
    // Writable and configurable (napi-rs makes statics neither) so that `index.js` can wrap it.
    #[napi(writable = true, configurable = true)]
    pub async fn connect(
        name: String,
        properties: HashMap<String, Either3<String, f64, bool>>,
    ) -> napi::Result<Catalog> {
        let config = CatalogConfig::new(
            name,
            properties
                .into_iter()
                .map(|(k, v)| (k, property(v)))
                .collect::<BTreeMap<_, _>>(),
        );
        let redact = config.clone();
        let inner = run(Some(redact), move || async move {
            CoreCatalog::connect(config).await
        })
        .await?;
        Ok(Self::from_core(inner))
    }

    /// Catalog name.
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_string()
    }

    /// `sql`, `glue`, `hive`, `rest`, `hadoop` or `static`.
    #[napi(getter)]
    pub fn kind(&self) -> napi::Result<String> {
        serde_name(&self.inner.kind())
    }

    /// Every table, as `namespace.table` identifiers.
    #[napi]
    pub async fn list_tables(&self) -> napi::Result<Vec<String>> {
        let cat = Arc::clone(&self.inner);
        let ids = run(Some(self.config()), move || async move {
            cat.list_all_tables().await
        })
        .await?;
        Ok(ids.iter().map(ToString::to_string).collect())
    }

    /// Scan one table's metadata (no data file is read). Options: cryo-core's `ScanOptions`.
    #[napi]
    pub async fn scan(
        &self,
        table: String,
        #[napi(ts_arg_type = "ScanOptions")] options: Option<Value>,
    ) -> napi::Result<TableScan> {
        let id = self.table(&table)?;
        let opts: ScanOptions = self::options("scan options", options)?;
        let cat = Arc::clone(&self.inner);
        let scan = run(Some(self.config()), move || async move {
            scan_table(&cat, &id, &opts, &SystemClock).await
        })
        .await?;
        Ok(TableScan {
            inner: Arc::new(scan),
        })
    }

    /// Every live file of the table's current snapshot (data and delete files) as an Arrow IPC
    /// stream: `path`, `content`, `partition`, `records`, `size_bytes`, … (metadata only).
    #[napi]
    pub async fn files(
        &self,
        table: String,
        #[napi(ts_arg_type = "ScanOptions")] options: Option<Value>,
    ) -> napi::Result<Buffer> {
        let id = self.table(&table)?;
        let opts: ScanOptions = self::options("scan options", options)?;
        let cat = Arc::clone(&self.inner);
        // One batch per manifest, built as the manifests stream past.
        let batches: Vec<_> = run(Some(self.config()), move || async move {
            let loaded = cat.load_table(&id).await?;
            futures::TryStreamExt::try_collect(file_batches(&loaded, &opts).await?).await
        })
        .await?;
        ipc_batches(&files_schema(), &batches)
    }

    /// Scan every table of the catalog (`namespaces: [["ns"]]` to limit), calling `progress`
    /// (if given) as each table is done. Options: cryo-core's `FleetScanOptions`.
    #[napi]
    pub async fn scan_fleet(
        &self,
        #[napi(ts_arg_type = "FleetScanOptions")] options: Option<Value>,
        #[napi(ts_arg_type = "(event: ProgressEvent) => void")] progress: Option<ProgressCallback>,
    ) -> napi::Result<FleetScan> {
        let opts: FleetScanOptions = self::options("fleet scan options", options)?;
        let cat = Arc::clone(&self.inner);
        let progress = sink(progress);
        let fleet = run(Some(self.config()), move || async move {
            scan_fleet_with_progress(&cat, &opts, &SystemClock, progress.as_ref()).await
        })
        .await?;
        Ok(FleetScan {
            inner: Arc::new(fleet),
        })
    }

    /// Grade the scans and plan their maintenance, worst tables first (pure: reads nothing).
    /// `scans`: a fleet scan or table scans. Options: cryo-core's `PlanOptions` (`operations`,
    /// budgets, `expire`, `orphans`, …); `gradeOptions`: `GradeOptions`. Under a `policy`, each
    /// table is planned with its preset and the plan records the policy (the policy gives the
    /// prices and options: `options` and `gradeOptions` must then be left out).
    #[napi(catch_unwind)]
    pub fn plan(
        &self,
        scans: Either<&FleetScan, Vec<&TableScan>>,
        #[napi(ts_arg_type = "PlanOptions")] options: Option<Value>,
        #[napi(ts_arg_type = "GradeOptions")] grade_options: Option<Value>,
        #[napi(ts_arg_type = "ControlSources")] controls: Option<Value>,
        policy: Option<&Policy>,
    ) -> napi::Result<Plan> {
        if policy.is_some() && (options.is_some() || grade_options.is_some()) {
            return Err(errors::validation(
                "under a policy the policy gives the prices and the planning options: leave out options and gradeOptions",
            ));
        }
        let grading: GradeOptions = self::options("grade options", grade_options)?;
        let planning: PlanOptions = self::options("plan options", options)?;
        let controls = errors::check(control_sources(controls)?.load())?;
        let scans = core_scans(scans);
        let plan = match policy {
            Some(p) => errors::check(p.inner.plan_scans(self.inner.name(), &scans, &controls))?,
            None => errors::check(plan_scans(
                self.inner.name(),
                &scans,
                &grading,
                &planning,
                &controls,
            ))?,
        };
        Ok(Plan {
            inner: Arc::new(plan),
        })
    }

    /// Each table under `policy`: its preset and why, and per operation of the preset whether a
    /// run now plans it, or when it may run next and what holds it back (cryo-core's
    /// `TableExplanation`s, `snake_case`).
    #[napi(catch_unwind, ts_return_type = "Array<Record<string, unknown>>")]
    pub fn explain(
        &self,
        scans: Either<&FleetScan, Vec<&TableScan>>,
        policy: &Policy,
        #[napi(ts_arg_type = "ControlSources")] controls: Option<Value>,
    ) -> napi::Result<Value> {
        let controls = errors::check(control_sources(controls)?.load())?;
        let scans = core_scans(scans);
        let explained = errors::check(policy.inner.explain_scans(
            self.inner.name(),
            &scans,
            &controls,
        ))?;
        to_value(&explained)
    }

    /// The table property changes the scans' grades recommend, as advice to approve (pure).
    #[napi(catch_unwind)]
    pub fn advise(&self, scans: Either<&FleetScan, Vec<&TableScan>>) -> napi::Result<Advice> {
        let scans = core_scans(scans);
        let advice = errors::check(cryo_core::policy::advise_scans(self.inner.name(), &scans))?;
        Ok(Advice {
            inner: Arc::new(advice),
        })
    }

    /// Commit exactly the approved advice (nothing unless `approved` is its fingerprint), one
    /// commit per table, refusing a table whose properties moved since; `receiptLog` gets a
    /// receipt per table. Resolves to cryo-core's `ApplyOutcome` (`snake_case`).
    #[napi(ts_return_type = "Promise<Record<string, unknown>>")]
    pub async fn apply_advice(
        &self,
        advice: &Advice,
        approved: String,
        receipt_log: Option<String>,
        actor: Option<String>,
    ) -> napi::Result<Value> {
        let advice = Arc::clone(&advice.inner);
        let cat = Arc::clone(&self.inner);
        let actor = actor.unwrap_or_else(|| "node".to_string());
        let outcome = run(Some(self.config()), move || async move {
            let outcome = cryo_core::policy::apply_advice(&cat, &advice, &approved, &actor).await?;
            if let Some(spec) = receipt_log {
                ReceiptLog::open(&cat, &spec)?
                    .append(&outcome.receipts)
                    .await?;
            }
            Ok(outcome)
        })
        .await?;
        to_value(&outcome)
    }

    /// What is due under `policy`: the tables and operations whose cadence has come, inside
    /// their windows, not paused, and those backing off after failures in a row, counted from
    /// the receipt log of `controls` (cryo-core's `Due`, `snake_case`).
    #[napi(ts_return_type = "Record<string, unknown>")]
    pub async fn due(
        &self,
        scans: Either<&FleetScan, Vec<&TableScan>>,
        policy: &Policy,
        #[napi(ts_arg_type = "ControlSources")] controls: Option<Value>,
    ) -> napi::Result<Value> {
        let sources = control_sources(controls)?;
        let scans = core_scans(scans);
        let policy = Arc::clone(&policy.inner);
        let cat = Arc::clone(&self.inner);
        let due = run(Some(self.config()), move || async move {
            let receipts = sources.receipts_from(&cat).await?;
            policy.due_scans(&scans, &receipts)
        })
        .await?;
        to_value(&due)
    }

    /// Rewrite small (or delete-laden) data files, calling `progress` (if given) as groups are
    /// rewritten. Options: cryo-core's `CompactOptions` and `RunOptions` (`targetFileSizeBytes`,
    /// `strategy`, `partitions`, `dryRun`, …).
    #[napi]
    pub async fn compact(
        &self,
        table: String,
        #[napi(ts_arg_type = "CompactOptions")] options: Option<Value>,
        #[napi(ts_arg_type = "(event: ProgressEvent) => void")] progress: Option<ProgressCallback>,
    ) -> napi::Result<CompactionOutcome> {
        let id = self.table(&table)?;
        let (what, how): (CompactOptions, RunOptions) = options_pair("compact options", options)?;
        let cat = Arc::clone(&self.inner);
        let progress = sink(progress);
        let outcome = run(Some(self.config()), move || async move {
            let mut compaction = Compaction::new(&cat, id)
                .with_options(what)
                .with_run_options(how);
            if let Some(p) = progress {
                compaction = compaction.with_progress(p);
            }
            compaction.execute().await
        })
        .await?;
        CompactionOutcome::from_core(&outcome)
    }

    /// Expire snapshots older than `olderThanMs` (keeping `retainLast`), then delete the files
    /// only they referenced. A dry run unless `dryRun: false` (cryo-core's default). Defaults
    /// follow the table's `history.expire.*` properties.
    #[napi]
    pub async fn expire_snapshots(
        &self,
        table: String,
        #[napi(ts_arg_type = "ExpireOptions")] options: Option<Value>,
    ) -> napi::Result<ExpireOutcome> {
        let id = self.table(&table)?;
        let opts: ExpireOptions = self::options("expire options", options)?;
        let cat = Arc::clone(&self.inner);
        let outcome = run(Some(self.config()), move || async move {
            expire_snapshots(&cat, &id, &opts).await
        })
        .await?;
        ExpireOutcome::from_core(&outcome)
    }

    /// Rewrite the current snapshot's manifests into fewer, well-clustered ones.
    #[napi]
    pub async fn rewrite_manifests(
        &self,
        table: String,
        #[napi(ts_arg_type = "Options")] options: Option<Value>,
    ) -> napi::Result<RewriteManifestsOutcome> {
        let id = self.table(&table)?;
        let opts: RewriteManifestsOptions = self::options("rewriteManifests options", options)?;
        let cat = Arc::clone(&self.inner);
        let outcome = run(Some(self.config()), move || async move {
            rewrite_manifests(&cat, &id, &opts).await
        })
        .await?;
        RewriteManifestsOutcome::from_core(&outcome)
    }

    /// Compute the current snapshot's distinct-value statistics (Apache `DataSketches` theta
    /// sketches in a Puffin file, registered on the snapshot), as Spark's `compute_table_stats`
    /// does. `columns`: top-level columns by name (default: every primitive one).
    #[napi]
    pub async fn compute_statistics(
        &self,
        table: String,
        #[napi(ts_arg_type = "Options")] options: Option<Value>,
    ) -> napi::Result<ComputeStatisticsOutcome> {
        let id = self.table(&table)?;
        let opts: ComputeStatisticsOptions = self::options("computeStatistics options", options)?;
        let cat = Arc::clone(&self.inner);
        let outcome = run(Some(self.config()), move || async move {
            compute_statistics(&cat, &id, &opts).await
        })
        .await?;
        ComputeStatisticsOutcome::from_core(&outcome)
    }

    /// Turn equality deletes into position deletes (v2) or deletion vectors (v3), reading only
    /// the key columns of the data files they apply to; the data files stay.
    #[napi]
    pub async fn convert_equality_deletes(
        &self,
        table: String,
        #[napi(ts_arg_type = "Options")] options: Option<Value>,
    ) -> napi::Result<ConvertEqualityDeletesOutcome> {
        let id = self.table(&table)?;
        let opts: ConvertEqualityDeletesOptions =
            self::options("convertEqualityDeletes options", options)?;
        let cat = Arc::clone(&self.inner);
        let outcome = run(Some(self.config()), move || async move {
            convert_equality_deletes(&cat, &id, &opts).await
        })
        .await?;
        ConvertEqualityDeletesOutcome::from_core(&outcome)
    }

    /// Combine small position-delete files per partition and drop dangling ones.
    #[napi]
    pub async fn rewrite_position_deletes(
        &self,
        table: String,
        #[napi(ts_arg_type = "Options")] options: Option<Value>,
    ) -> napi::Result<RewritePositionDeletesOutcome> {
        let id = self.table(&table)?;
        let opts: RewritePositionDeletesOptions =
            self::options("rewritePositionDeletes options", options)?;
        let cat = Arc::clone(&self.inner);
        let outcome = run(Some(self.config()), move || async move {
            rewrite_position_deletes(&cat, &id, &opts).await
        })
        .await?;
        RewritePositionDeletesOutcome::from_core(&outcome)
    }

    /// Find files under the table's location that no snapshot or metadata references and, unless
    /// a dry run (the default), delete those older than `olderThanMs`.
    #[napi]
    pub async fn remove_orphan_files(
        &self,
        table: String,
        #[napi(ts_arg_type = "OrphanOptions")] options: Option<Value>,
    ) -> napi::Result<RemoveOrphanFilesOutcome> {
        let id = self.table(&table)?;
        let opts: RemoveOrphanFilesOptions = self::options("removeOrphanFiles options", options)?;
        let cat = Arc::clone(&self.inner);
        let outcome = run(Some(self.config()), move || async move {
            remove_orphan_files(&cat, &id, &opts).await
        })
        .await?;
        RemoveOrphanFilesOutcome::from_core(&outcome)
    }

    /// Check that every file the table's snapshots reference exists (reads nothing else).
    #[napi]
    pub async fn missing_files(
        &self,
        table: String,
        #[napi(ts_arg_type = "Options")] options: Option<Value>,
    ) -> napi::Result<MissingFilesOutcome> {
        let id = self.table(&table)?;
        let opts: FindMissingFilesOptions = self::options("missingFiles options", options)?;
        let cat = Arc::clone(&self.inner);
        let outcome = run(Some(self.config()), move || async move {
            find_missing_files(&cat, &id, &opts).await
        })
        .await?;
        MissingFilesOutcome::from_core(&outcome)
    }

    /// The receipts of a receipt log (a JSON-lines file, or an object-store location read with
    /// this catalog's storage properties), oldest first, as an Arrow IPC stream.
    #[napi]
    pub async fn read_receipts(&self, location: String) -> napi::Result<Buffer> {
        let cat = Arc::clone(&self.inner);
        let batch = run(Some(self.config()), move || async move {
            let receipts = ReceiptLog::open(&cat, &location)?.read().await?;
            cryo_core::receipt::receipts_batch(&receipts)
        })
        .await?;
        crate::arrow::ipc(&batch)
    }

    /// Run a plan on Cryo's native engine: a dry run unless `dryRun: false` (cryo-core's
    /// default). `lockDir`: take a lock per table there (a directory of file locks, `"catalog"`
    /// for the SQL catalog's PostgreSQL database, or an object-store location); `receiptLog`:
    /// append a receipt per decision (a JSON-lines file, `readReceipts(path)`, or an
    /// object-store location). Other options: cryo-core's
    /// `MaintenanceOptions` (`actor`, `window`, `deadlineMs`, …).
    #[napi]
    pub async fn run(
        &self,
        plan: &Plan,
        #[napi(ts_arg_type = "RunOptions")] options: Option<Value>,
        #[napi(ts_arg_type = "(event: ProgressEvent) => void")] progress: Option<ProgressCallback>,
    ) -> napi::Result<RunOutcome> {
        let mut options = options;
        let lock_dir = take_string(&mut options, "lockDir", "lock_dir")?;
        let receipt_log = take_string(&mut options, "receiptLog", "receipt_log")?;
        let opts: MaintenanceOptions = self::options("run options", options)?;
        let cat = Arc::clone(&self.inner);
        let plan = Arc::clone(&plan.inner);
        let progress = sink(progress);
        let outcome = run(Some(self.config()), move || async move {
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
        })
        .await?;
        Ok(RunOutcome {
            inner: Arc::new(outcome),
        })
    }

    /// Run a plan as a fleet run on the native destination: each step when the (default)
    /// governor admits it, receipts for every decision. A dry run unless `dryRun: false`.
    /// `lockDir` and `receiptLog` as for `run`; other options: cryo-core's `FleetOptions`
    /// (`deadlineMs`, …). Trino and Spark destinations are reached from Python or Rust.
    #[napi]
    pub async fn run_fleet(
        &self,
        plan: &Plan,
        #[napi(ts_arg_type = "RunOptions")] options: Option<Value>,
        #[napi(ts_arg_type = "(event: ProgressEvent) => void")] progress: Option<ProgressCallback>,
    ) -> napi::Result<FleetOutcome> {
        let mut options = options;
        let lock_dir = take_string(&mut options, "lockDir", "lock_dir")?;
        let receipt_log = take_string(&mut options, "receiptLog", "receipt_log")?;
        let governor_state = take_string(&mut options, "governorState", "governor_state")?;
        let governor = take_object(&mut options, "governor")?;
        let trino = take_object(&mut options, "trino")?;
        let controls = control_sources(take_object(&mut options, "controls")?.map(Value::Object))?;
        let engines = trino_destinations(trino)?;
        let governor = Arc::new(std::sync::Mutex::new(build_governor(
            governor_state.as_deref(),
            governor,
        )?));
        let opts: FleetOptions = self::options("fleet options", options)?;
        let cat = Arc::clone(&self.inner);
        let plan = Arc::clone(&plan.inner);
        let progress = sink(progress);
        let shared = Arc::clone(&governor);
        let outcome = run(Some(self.config()), move || async move {
            let mut run = FleetRun::new(&cat, &plan)
                .with_options(opts)
                .with_governor(shared)
                .with_controls(controls.load_from(&cat).await?);
            for (name, engine) in engines {
                run = run.with_engine(name, engine);
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
        })
        .await?;
        let state = governor
            .lock()
            .map_err(|_| errors::internal("the governor's lock is poisoned"))
            .and_then(|g| serde_json::to_string(&*g).map_err(errors::internal))?;
        Ok(FleetOutcome {
            inner: Arc::new(outcome),
            governor_state: state,
        })
    }

    /// `Catalog("prod", type=rest)` (never a property value: they may be secrets).
    #[napi]
    #[allow(
        clippy::inherent_to_string,
        reason = "JS calls toString(); Display is not visible from JS"
    )]
    pub fn to_string(&self) -> String {
        format!(
            "Catalog({:?}, type={})",
            self.inner.name(),
            self.kind().unwrap_or_default()
        )
    }
}

/// Remove an object-valued option (`trino`, `governor`).
/// `{ tables: { "ns.table": { paused, pauseReason, deadlineMs, lastRuns } }, receiptLog }`:
/// cryo-core's `ControlSources`, each table's fields as `TableControl`'s.
fn control_sources(value: Option<Value>) -> napi::Result<ControlSources> {
    let mut value = value;
    let tables = take_object(&mut value, "tables")?;
    let mut sources: ControlSources = self::options("controls", value)?;
    for (name, control) in tables.unwrap_or_default() {
        let control: TableControl = self::options("table controls", Some(control))?;
        sources.tables.insert(name, control);
    }
    Ok(sources)
}

fn take_object(options: &mut Option<Value>, key: &str) -> napi::Result<Option<Map<String, Value>>> {
    let Some(Value::Object(map)) = options.as_mut() else {
        return Ok(None);
    };
    match map.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(_) => Err(errors::validation(format!("`{key}` must be an object"))),
    }
}

/// `trino: { name: { url | urls, user, password, accessToken, caCertPath, catalog, version, … } }`: Trino
/// destinations (connection options are cryo-core's `TrinoConfig`, `catalog`, `version` and the
/// retention floors its `TrinoOptions`).
fn trino_destinations(
    trino: Option<Map<String, Value>>,
) -> napi::Result<Vec<(String, Arc<dyn SqlEngine>)>> {
    // The rendering options are cryo-core's `TrinoOptions` fields (in either spelling); every
    // other key is the connection's.
    let dialect_keys: Vec<String> = match serde_json::to_value(TrinoOptions::default()) {
        Ok(Value::Object(fields)) => fields
            .keys()
            .flat_map(|k| [k.clone(), crate::convert::camel_case(k)])
            .collect(),
        _ => Vec::new(),
    };
    let mut out = Vec::new();
    for (name, cfg) in trino.unwrap_or_default() {
        let Value::Object(mut cfg) = cfg else {
            return Err(errors::validation(format!(
                "trino.{name} must be an object"
            )));
        };
        let urls: Vec<Value> = match (cfg.remove("url"), cfg.remove("urls")) {
            (Some(u @ Value::String(_)), None) => vec![u],
            (None, Some(Value::Array(us))) => us,
            _ => {
                return Err(errors::validation(format!(
                    "trino.{name}: give `url` (a string) or `urls` (an array of strings)"
                )));
            }
        };
        let mut dialect = Map::new();
        for k in &dialect_keys {
            if let Some(v) = cfg.remove(k) {
                dialect.insert(k.clone(), v);
            }
        }
        let dialect = TrinoDialect::new(options::<TrinoOptions>(
            "trino dialect",
            Some(Value::Object(dialect)),
        )?)
        .map_err(|e| to_napi(&e, None))?;
        let mut configs = Vec::with_capacity(urls.len());
        for url in urls {
            let mut c = cfg.clone();
            c.insert("url".into(), url);
            configs.push(options::<TrinoConfig>(
                "trino connection",
                Some(Value::Object(c)),
            )?);
        }
        let engine = TrinoEngine::new(dialect, configs).map_err(|e| to_napi(&e, None))?;
        out.push((name, Arc::new(engine) as Arc<dyn SqlEngine>));
    }
    Ok(out)
}

/// The governor: from a saved state (`governorState`, what `FleetOutcome.governorState` gave),
/// else from `governor: { limits: { dest: {…} }, defaults: {…}, bandit: { dest: {…} } }`.
fn build_governor(
    state: Option<&str>,
    config: Option<Map<String, Value>>,
) -> napi::Result<Governor> {
    if let Some(text) = state {
        return serde_json::from_str(text).map_err(|e| {
            errors::validation(format!("governorState is not a governor's state: {e}"))
        });
    }
    let mut config = config.unwrap_or_default();
    let defaults: Limits = options("governor defaults", config.remove("defaults"))?;
    let mut g = Governor::new(defaults).map_err(|e| to_napi(&e, None))?;
    let per = |v: Option<Value>, what: &str| -> napi::Result<Map<String, Value>> {
        match v {
            None | Some(Value::Null) => Ok(Map::new()),
            Some(Value::Object(m)) => Ok(m),
            Some(_) => Err(errors::validation(format!(
                "governor.{what} must be an object"
            ))),
        }
    };
    for (dest, l) in per(config.remove("limits"), "limits")? {
        let l: Limits = options("governor limits", Some(l))?;
        g.set_limits(&dest, l).map_err(|e| to_napi(&e, None))?;
    }
    for (dest, b) in per(config.remove("bandit"), "bandit")? {
        let b: BanditConfig = options("bandit config", Some(b))?;
        g.attach_bandit(&dest, Bandit::new(b).map_err(|e| to_napi(&e, None))?);
    }
    if let Some(k) = config.keys().next() {
        return Err(errors::validation(format!(
            "governor: unknown key `{k}` (limits, defaults, bandit)"
        )));
    }
    Ok(g)
}
