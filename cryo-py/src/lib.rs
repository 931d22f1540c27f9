//! Python bindings: the native module `cryo._cryo` behind the hand-written `cryo` package.
//!
//! Bindings translate types and nothing else; logic and defaults live in `cryo-core`:
//! keyword options are overlaid on the core options' `Default` ([`convert::options`]), Rust work
//! runs on one shared runtime with the GIL released and Ctrl-C honoured ([`runtime`]), errors
//! become a small exception hierarchy ([`errors`]), tabular results leave as Arrow streams
//! ([`arrow`]) and small results as frozen classes ([`models`]).
// Reason: a cdylib has no Rust users; these crate docs are for its maintainers and point at
// its private modules on purpose (`cargo doc --document-private-items` renders them).
#![allow(rustdoc::private_intra_doc_links)]

mod arrow;
mod catalog;
mod convert;
mod engines;
mod errors;
mod fence;
mod logging;
mod models;
mod policy;
mod progress;
mod report;
mod runtime;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use cryo_core::catalog::{Namespace, PyIcebergConfig, TableId};
use cryo_core::demo::{DemoOptions, create_demo_lake};
use cryo_core::grade::{GradeOptions, grade as grade_scan};
use cryo_core::receipt::{JsonLinesLog, receipts_batch};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::arrow::ArrowResult;
use crate::catalog::Catalog;
use crate::convert::{options, to_python};
use crate::models::{HealthReport, TableScan};
use crate::runtime::{blocking, wait};

/// Grade a table scan: a letter, a score and the findings behind them (pure: reads nothing).
#[pyfunction]
#[pyo3(signature = (scan, options = None))]
fn grade(
    py: Python<'_>,
    scan: &TableScan,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<HealthReport> {
    let opts: GradeOptions = self::options("grade options", options)?;
    let scan = Arc::clone(&scan.inner);
    let report = blocking(py, || grade_scan(&scan, &opts, scan.scanned_at_ms))?;
    Ok(HealthReport {
        inner: Arc::new(report),
    })
}

/// Health reports in the fleet order (lowest score first, ties by table), as cryo-core orders
/// them everywhere, plans included.
#[pyfunction]
fn worst_first(reports: Vec<Bound<'_, HealthReport>>) -> Vec<Bound<'_, HealthReport>> {
    let mut reports = reports;
    reports.sort_by(|a, b| {
        cryo_core::grade::HealthReport::worst_first(&a.get().inner, &b.get().inner)
    });
    reports
}

/// A demo lake built by Cryo: the catalog and what was built.
#[pyclass(frozen, module = "cryo._cryo", name = "DemoLake")]
struct DemoLake {
    /// The connected catalog.
    #[pyo3(get)]
    catalog: Py<Catalog>,
    /// Directory holding the catalog, the warehouse and the manifest.
    #[pyo3(get)]
    root: PathBuf,
    /// True when this call built the lake (False: it reopened an existing one).
    #[pyo3(get)]
    built: bool,
    /// True when no table was committed to since the lake was built.
    #[pyo3(get)]
    pristine: bool,
    manifest: cryo_core::demo::DemoManifest,
}

#[pymethods]
impl DemoLake {
    /// Table identifiers.
    #[getter]
    fn tables(&self) -> Vec<String> {
        self.manifest
            .tables
            .iter()
            .map(|t| t.identifier.clone())
            .collect()
    }
    /// The lake's manifest (what every table holds), as plain Python values.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.manifest)
    }
    fn __repr__(&self) -> String {
        format!(
            "DemoLake({}: {} tables{})",
            self.root.display(),
            self.manifest.tables.len(),
            if self.pristine {
                ""
            } else {
                ", changed since built"
            }
        )
    }
}

/// Build Cryo's demo lake (a sqlite catalog and a local warehouse of decayed tables) under
/// `path`, or reopen it.
#[pyfunction]
#[pyo3(signature = (path, options = None))]
fn demo_lake(
    py: Python<'_>,
    path: PathBuf,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<DemoLake> {
    let opts: DemoOptions = self::options("demo options", options)?;
    let lake = wait(
        py,
        move || async move { create_demo_lake(&path, &opts).await },
    )?;
    let catalog = Py::new(py, Catalog::from_core(lake.catalog))?;
    Ok(DemoLake {
        catalog,
        root: lake.root,
        built: lake.built,
        pristine: lake.pristine,
        manifest: lake.manifest,
    })
}

/// Read a receipt log (JSON lines written by `Catalog.run(..., receipt_log=...)`) as Arrow.
#[pyfunction]
fn read_receipts(py: Python<'_>, path: PathBuf) -> PyResult<ArrowResult> {
    let batch = blocking(py, || receipts_batch(&JsonLinesLog::new(path).read()?))?;
    Ok(ArrowResult::new("receipts", batch))
}

/// A table identifier as cryo-core prints it (`namespace.table`, a part quoted when it needs it),
/// from the `{"namespace": [...], "name": ...}` form `to_dict()` results carry.
#[pyfunction]
fn table_name(namespace: Vec<String>, name: String) -> String {
    TableId::new(Namespace::new(namespace), name).to_string()
}

/// PyIceberg's configuration of catalog `name` (the default catalog when `None`): the first
/// `.pyiceberg.yaml` of `$PYICEBERG_HOME`, the home directory and the current directory, the
/// `PYICEBERG_CATALOG__<NAME>__<PROPERTY>` variables, then `properties`: `(name, properties)`.
#[pyfunction]
#[pyo3(signature = (name, properties))]
fn pyiceberg_config(
    py: Python<'_>,
    name: Option<String>,
    properties: BTreeMap<String, String>,
) -> PyResult<(String, BTreeMap<String, String>)> {
    let config = py.detach(move || {
        PyIcebergConfig::from_env().and_then(|c| c.catalog(name.as_deref(), properties))
    });
    let config = crate::errors::check(config)?;
    Ok((config.name, config.properties))
}

/// The native module.
#[pymodule]
fn _cryo(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    m.add_class::<Catalog>()?;
    m.add_class::<ArrowResult>()?;
    m.add_class::<DemoLake>()?;
    m.add_class::<models::Footprint>()?;
    m.add_class::<TableScan>()?;
    m.add_class::<models::FleetScan>()?;
    m.add_class::<models::Finding>()?;
    m.add_class::<HealthReport>()?;
    m.add_class::<models::Plan>()?;
    m.add_class::<policy::Policy>()?;
    m.add_class::<policy::Advice>()?;
    m.add_class::<models::CompactionOutcome>()?;
    m.add_class::<models::ExpireOutcome>()?;
    m.add_class::<models::RewriteManifestsOutcome>()?;
    m.add_class::<models::ComputeStatisticsOutcome>()?;
    m.add_class::<models::ConvertEqualityDeletesOutcome>()?;
    m.add_class::<models::RewritePositionDeletesOutcome>()?;
    m.add_class::<models::RemoveOrphanFilesOutcome>()?;
    m.add_class::<models::MissingFilesOutcome>()?;
    m.add_class::<models::RunOutcome>()?;
    m.add_class::<models::FleetOutcome>()?;
    m.add_class::<engines::Engine>()?;
    m.add_class::<engines::PyGovernor>()?;
    m.add_class::<fence::CommitFence>()?;
    m.add_class::<fence::WriterFence>()?;
    m.add_function(wrap_pyfunction!(engines::trino_engine, m)?)?;
    m.add_function(wrap_pyfunction!(engines::python_engine, m)?)?;
    m.add_function(wrap_pyfunction!(grade, m)?)?;
    m.add_function(wrap_pyfunction!(worst_first, m)?)?;
    m.add_function(wrap_pyfunction!(demo_lake, m)?)?;
    m.add_function(wrap_pyfunction!(read_receipts, m)?)?;
    m.add_function(wrap_pyfunction!(table_name, m)?)?;
    m.add_function(wrap_pyfunction!(pyiceberg_config, m)?)?;
    report::register(m)?;
    logging::install(m.py());
    Ok(())
}
