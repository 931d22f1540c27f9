//! cryo-core's human-readable reports (what its quickstart and the `cryo` CLI print), as text.

use cryo_core::report;
use pyo3::prelude::*;

use crate::models::{FleetOutcome, FleetScan, HealthReport, Plan, RunOutcome, TableScan};

/// One line per table: grade, score, size, files, snapshots, deletes, monthly cost.
#[pyfunction]
#[allow(
    clippy::needless_pass_by_value,
    reason = "pyo3 extracts sequences into owned vectors"
)]
pub(crate) fn fleet_table(
    scans: Vec<PyRef<'_, TableScan>>,
    reports: Vec<PyRef<'_, HealthReport>>,
) -> String {
    let scans: Vec<_> = scans.iter().map(|s| s.inner.as_ref().clone()).collect();
    let reports: Vec<_> = reports.iter().map(|r| r.inner.as_ref().clone()).collect();
    report::fleet_table(&scans, &reports)
}

/// A table's grade with every deduction, its fix and the cost.
#[pyfunction]
pub(crate) fn health_report(report: &HealthReport) -> String {
    report::health_report(&report.inner)
}

/// The plan, table by table.
#[pyfunction]
pub(crate) fn plan_text(plan: &Plan) -> String {
    report::plan_text(&plan.inner)
}

/// One line per receipt of a run (a native run or a fleet run).
#[pyfunction]
pub(crate) fn receipts_text(outcome: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(run) = outcome.cast::<RunOutcome>() {
        return Ok(report::receipts_text(&run.get().inner.receipts));
    }
    let fleet = outcome.cast::<FleetOutcome>()?;
    Ok(report::receipts_text(&fleet.get().inner.receipts))
}

/// The tables and namespaces a fleet scan could not read, one per line.
#[pyfunction]
pub(crate) fn scan_errors(fleet: &FleetScan) -> String {
    report::scan_errors(&fleet.inner)
}

/// Register the functions on the native module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fleet_table, m)?)?;
    m.add_function(wrap_pyfunction!(health_report, m)?)?;
    m.add_function(wrap_pyfunction!(plan_text, m)?)?;
    m.add_function(wrap_pyfunction!(receipts_text, m)?)?;
    m.add_function(wrap_pyfunction!(scan_errors, m)?)?;
    Ok(())
}
