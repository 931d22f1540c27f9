//! Progress callbacks: a Python callable becomes cryo-core's [`ProgressSink`].
//!
//! The callable is called with a dict `{"stage", "done", "total", "table"}` from whichever
//! thread made progress, holding the GIL for that call only (the caller waits without it). An
//! exception it raises is reported through `sys.unraisablehook` and does not stop the
//! operation: progress is a view, never a control.

use cryo_core::progress::{Progress, ProgressSink};
use pyo3::prelude::*;
use pyo3::types::PyDict;

fn call(py: Python<'_>, callback: &Py<PyAny>, p: &Progress) -> PyResult<()> {
    let d = PyDict::new(py);
    d.set_item("stage", p.stage)?;
    d.set_item("done", p.done)?;
    d.set_item("total", p.total)?;
    d.set_item("table", p.table.as_deref())?;
    callback.call1(py, (d,))?;
    Ok(())
}

/// The sink for an optional Python callable (`None`: no reports).
pub(crate) fn sink(callback: Option<Py<PyAny>>) -> Option<ProgressSink> {
    let callback = callback?;
    Some(ProgressSink::new(move |p| {
        // None during interpreter shutdown: nobody is watching.
        let _ = Python::try_attach(|py| {
            if let Err(e) = call(py, &callback, p) {
                e.write_unraisable(py, Some(callback.bind(py)));
            }
        });
    }))
}
