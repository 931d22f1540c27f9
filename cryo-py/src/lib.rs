//! Python bindings: the native module `cryo._cryo` behind the hand-written `cryo` package.
//! Bindings translate types and nothing else; logic and defaults live in `cryo-core`.

use pyo3::prelude::*;

/// The native module.
#[pymodule]
fn _cryo(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
