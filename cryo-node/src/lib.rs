//! Node bindings (napi-rs): the native addon behind the `cryo-iceberg` package.
//!
//! Bindings translate types and nothing else; logic, defaults and validation live in cryo-core.
//! Options objects are overlaid on the core options' `Default` ([`convert::options`]); I/O runs on
//! a tokio runtime off the JS thread and returns Promises ([`runtime`]); errors carry cryo-core's
//! stable code and a redacted cause chain, and the package's `errors.js` turns them into
//! `CryoError` subclasses ([`errors`]); tabular results leave as Arrow IPC streams ([`arrow`]),
//! small results as classes and typed objects ([`models`]).
// Reason: a cdylib has no Rust users; these crate docs are for its maintainers and point at
// its private modules on purpose (`cargo doc --document-private-items` renders them).
#![allow(rustdoc::private_intra_doc_links)]

mod arrow;
mod catalog;
mod convert;
mod errors;
mod fence;
mod models;
mod policy;
mod runtime;

use std::path::PathBuf;
use std::sync::Arc;

use cryo_core::catalog::{Namespace, TableId};
use cryo_core::demo::{DemoOptions, create_demo_lake};
use cryo_core::grade::{GradeOptions, grade as grade_scan};
use cryo_core::receipt::{JsonLinesLog, receipts_batch};
use napi::bindgen_prelude::Buffer;
use napi_derive::napi;
use serde_json::Value;

pub use crate::catalog::{Catalog, ProgressEvent};
pub use crate::fence::{CommitFence, CommitFenceOptions, WriterFence};
pub use crate::models::{
    CompactionOutcome, ConvertEqualityDeletesOutcome, ExpireOutcome, Finding, FleetOutcome,
    FleetScan, FleetTable, Footprint, HealthReport, MissingFilesOutcome, Plan,
    RemoveOrphanFilesOutcome, RewriteManifestsOutcome, RewritePositionDeletesOutcome, RunOutcome,
    ScanError, TableScan,
};

/// The version of the native addon (the workspace version).
#[napi]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

/// Grade a table scan: a letter (A–F), a score out of 100 and the findings behind them (pure:
/// reads nothing). Options: cryo-core's `GradeOptions` (`skip: [codes]`, `cost: {...}`).
#[napi(catch_unwind)]
pub fn grade(
    scan: &TableScan,
    #[napi(ts_arg_type = "GradeOptions")] options: Option<Value>,
) -> napi::Result<HealthReport> {
    let opts: GradeOptions = convert::options("grade options", options)?;
    let report = errors::check(grade_scan(&scan.inner, &opts, scan.inner.scanned_at_ms))?;
    Ok(HealthReport {
        inner: Arc::new(report),
    })
}

/// Cryo's demo lake: a sqlite catalog and a local warehouse of tables in known states of decay.
#[napi(object, object_from_js = false)]
pub struct DemoLake {
    /// The lake's catalog.
    pub catalog: Catalog,
    /// Directory holding the catalog, the warehouse and `demo-lake.json`.
    pub root: String,
    /// True when this call built the lake (false: it reopened an existing one).
    pub built: bool,
    /// True when no table was committed to since the lake was built.
    pub pristine: bool,
    /// Table identifiers.
    pub tables: Vec<String>,
    /// The lake's manifest: what every table holds (cryo-core's serde form).
    #[napi(ts_type = "Record<string, any>")]
    pub manifest: Value,
}

/// Build Cryo's demo lake under `path` (a sqlite catalog and a local warehouse of decayed
/// tables), or reopen it if it is already there. Options: cryo-core's `DemoOptions`.
#[napi]
pub async fn demo_lake(
    path: String,
    #[napi(ts_arg_type = "Options")] options: Option<Value>,
) -> napi::Result<DemoLake> {
    let opts: DemoOptions = convert::options("demo options", options)?;
    let root = PathBuf::from(path);
    let lake = runtime::run(
        None,
        move || async move { create_demo_lake(&root, &opts).await },
    )
    .await?;
    Ok(DemoLake {
        root: lake.root.to_string_lossy().into_owned(),
        built: lake.built,
        pristine: lake.pristine,
        tables: lake
            .manifest
            .tables
            .iter()
            .map(|t| t.identifier.clone())
            .collect(),
        manifest: convert::to_value(&lake.manifest)?,
        catalog: Catalog::from_core(lake.catalog),
    })
}

/// Connect to the catalog PyIceberg's configuration names, as PyIceberg's `load_catalog` finds
/// it: the first `.pyiceberg.yaml` of `$PYICEBERG_HOME`, the home directory and the current
/// directory, the `PYICEBERG_CATALOG__<NAME>__<PROPERTY>` variables, then `properties`. Without
/// a name, `default-catalog` names it, else `default`.
#[napi]
#[allow(
    clippy::implicit_hasher,
    reason = "napi converts a JS object into this HashMap"
)]
pub async fn load_catalog(
    name: Option<String>,
    properties: Option<
        std::collections::HashMap<String, napi::bindgen_prelude::Either3<String, f64, bool>>,
    >,
) -> napi::Result<Catalog> {
    Catalog::load(name, properties.unwrap_or_default()).await
}

/// Read a receipt log (JSON lines written by `catalog.run(plan, { receiptLog })`) as an Arrow
/// IPC stream.
#[napi]
pub async fn read_receipts(path: String) -> napi::Result<Buffer> {
    let batch = runtime::blocking(move || receipts_batch(&JsonLinesLog::new(path).read()?)).await?;
    arrow::ipc(&batch)
}

/// A table identifier as cryo-core prints it (`namespace.table`, a part quoted when it needs it),
/// from the `{ namespace: [...], name }` form `toObject()` results carry.
#[napi]
pub fn table_name(namespace: Vec<String>, name: String) -> String {
    TableId::new(Namespace::new(namespace), name).to_string()
}

/// cryo-core's human-readable reports (what its quickstart and the CLI print), as text: the
/// `report` namespace in JS.
pub mod report {
    use napi::Either;
    use napi::bindgen_prelude::ClassInstance;
    use napi_derive::napi;

    use crate::models::{FleetOutcome, FleetScan, HealthReport, Plan, RunOutcome, TableScan};

    /// One line per graded table: grade, score, files, size, snapshots, deletes, monthly cost.
    #[napi(namespace = "report")]
    #[allow(
        clippy::needless_pass_by_value,
        reason = "napi-rs converts a JS array into an owned Vec"
    )]
    pub fn fleet_table(
        scans: Either<&FleetScan, Vec<&TableScan>>,
        reports: Vec<&HealthReport>,
    ) -> String {
        let scans: Vec<_> = match scans {
            Either::A(fleet) => fleet.inner.tables.clone(),
            Either::B(tables) => tables.iter().map(|s| s.inner.as_ref().clone()).collect(),
        };
        let reports: Vec<_> = reports.iter().map(|r| r.inner.as_ref().clone()).collect();
        cryo_core::report::fleet_table(&scans, &reports)
    }

    /// A table's grade with every deduction, its fix and the cost.
    #[napi(namespace = "report")]
    pub fn health_report(report: &HealthReport) -> String {
        cryo_core::report::health_report(&report.inner)
    }

    /// The plan, table by table, step by step.
    #[napi(namespace = "report")]
    pub fn plan_text(plan: &Plan) -> String {
        cryo_core::report::plan_text(&plan.inner)
    }

    /// One line per receipt of a run (native or fleet).
    #[napi(namespace = "report")]
    pub fn receipts_text(
        outcome: Either<ClassInstance<'_, RunOutcome>, ClassInstance<'_, FleetOutcome>>,
    ) -> String {
        match outcome {
            Either::A(run) => cryo_core::report::receipts_text(&run.inner.receipts),
            Either::B(fleet) => cryo_core::report::receipts_text(&fleet.inner.receipts),
        }
    }

    /// The tables and namespaces a fleet scan could not read, one per line (empty when none).
    #[napi(namespace = "report")]
    pub fn scan_errors(fleet: &FleetScan) -> String {
        cryo_core::report::scan_errors(&fleet.inner)
    }
}
