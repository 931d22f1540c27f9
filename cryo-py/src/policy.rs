//! `Policy`: a checked policy file (cryo-core's [`cryo_core::policy::Policy`]).

use std::path::PathBuf;
use std::sync::Arc;

use cryo_core::policy::Policy as CorePolicy;
use pyo3::prelude::*;

use crate::convert::to_python;
use crate::models::TableScan;
use crate::runtime::blocking;

/// A maintenance policy: presets, assignment rules, per-table overrides, pauses, windows,
/// budgets and prices, read from YAML and checked (every problem is raised at once, each with
/// its file, line and field, as `PolicyError.problems`).
#[pyclass(frozen, module = "cryo._cryo", name = "Policy")]
pub(crate) struct Policy {
    pub(crate) inner: Arc<CorePolicy>,
}

#[pymethods]
impl Policy {
    /// Read a policy file, or every `*.yaml`/`*.yml` file of a directory in name order.
    #[staticmethod]
    fn load(py: Python<'_>, path: PathBuf) -> PyResult<Policy> {
        let policy = blocking(py, move || CorePolicy::load(path))?;
        Ok(Policy {
            inner: Arc::new(policy),
        })
    }

    /// A policy from YAML text; `name` stands for the file in problems.
    #[staticmethod]
    #[pyo3(signature = (text, name = "<string>"))]
    fn from_yaml(py: Python<'_>, text: &str, name: &str) -> PyResult<Policy> {
        let policy = blocking(py, || CorePolicy::from_yaml(text, name))?;
        Ok(Policy {
            inner: Arc::new(policy),
        })
    }

    /// SHA-256 of the policy's canonical form: the same in Rust, Python and Node, and however
    /// the file spells it.
    #[getter]
    fn fingerprint(&self) -> &str {
        self.inner.fingerprint()
    }

    /// The files it was read from.
    #[getter]
    fn sources(&self) -> Vec<String> {
        self.inner.sources().to_vec()
    }

    /// The policy's canonical JSON (what the fingerprint is over).
    fn to_json(&self, py: Python<'_>) -> PyResult<String> {
        blocking(py, || self.inner.to_json())
    }

    /// The policy as one file, in canonical form, as plain Python values.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self.inner.file())
    }

    /// Every preset (the built-in `default` among them) as its tables get it: destination,
    /// cadence, window and the planning options.
    fn presets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self.inner.presets())
    }

    /// Each scanned table's preset and why (graded with the policy's prices), at the time of
    /// the newest scan: `{"tables": [...], "presets": {...}, "defaulted": n, "paused": n}`.
    fn resolve<'py>(
        &self,
        py: Python<'py>,
        scans: Vec<Bound<'py, TableScan>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let scans = TableScan::core_all(scans);
        let fleet = blocking(py, move || self.inner.resolve_scans(&scans))?;
        to_python(py, &fleet)
    }

    fn __repr__(&self) -> String {
        format!(
            "Policy({} presets, {} rules, fingerprint {}…)",
            self.inner.presets().len(),
            self.inner.file().rules.len(),
            &self.inner.fingerprint()[..12]
        )
    }
}

/// A change set of table properties the grades recommend: review it, approve its fingerprint,
/// then `Catalog.apply_advice(advice, approved=fingerprint)` commits exactly it.
#[pyclass(frozen, module = "cryo._cryo", name = "Advice")]
pub(crate) struct Advice {
    pub(crate) inner: Arc<cryo_core::policy::Advice>,
}

#[pymethods]
impl Advice {
    /// Read stored advice (refused unless intact: its fingerprint matches its content).
    #[staticmethod]
    fn from_json(py: Python<'_>, json: &str) -> PyResult<Advice> {
        let advice = blocking(py, || cryo_core::policy::Advice::from_json(json))?;
        Ok(Advice {
            inner: Arc::new(advice),
        })
    }

    /// The advice as JSON, for a reviewer and for storing.
    fn to_json(&self, py: Python<'_>) -> PyResult<String> {
        blocking(py, || self.inner.to_json())
    }

    /// Content fingerprint (SHA-256): the one a person approves.
    #[getter]
    fn fingerprint(&self) -> &str {
        &self.inner.fingerprint
    }

    /// Number of property changes.
    #[getter]
    fn change_count(&self) -> usize {
        self.inner.change_count()
    }

    /// Everything, as plain Python values (`tables[].changes[]`: key, from, to, finding, reason).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self.inner.as_ref())
    }

    fn __repr__(&self) -> String {
        format!(
            "Advice({} changes on {} tables, fingerprint {}…)",
            self.inner.change_count(),
            self.inner.tables.len(),
            &self.inner.fingerprint[..12]
        )
    }
}
