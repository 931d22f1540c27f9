//! One tokio runtime for the process, created on first use and again after `os.fork()`.
//!
//! Rust work runs on the runtime while the calling thread waits without the GIL, taking it back
//! every 50 ms to check for signals: Ctrl-C raises `KeyboardInterrupt` in the caller and drops
//! the future (it stops at its next await point; nothing it had not committed is committed). A forked child (Airflow's workers) inherits the parent's runtime memory but
//! none of its threads, so the runtime is keyed by process id and rebuilt in a new process.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use pyo3::prelude::*;
use tokio::runtime::Runtime;

use crate::errors;

/// How often the waiting caller takes the GIL to look at signals.
const SLICE: Duration = Duration::from_millis(50);

static RUNTIME: Mutex<Option<(u32, Arc<Runtime>)>> = Mutex::new(None);

fn runtime() -> PyResult<Arc<Runtime>> {
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((owner, rt)) = slot.as_ref()
        && *owner == pid
    {
        return Ok(Arc::clone(rt));
    }
    if let Some(stale) = slot.take() {
        // Inherited through fork: its worker threads do not exist here, so dropping it would
        // wait for them forever. Leak it instead (a few kilobytes, once per fork).
        std::mem::forget(stale);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("cryo")
        .build()
        .map_err(|e| errors::internal(format!("cannot start the tokio runtime: {e}")))?;
    let rt = Arc::new(rt);
    *slot = Some((pid, Arc::clone(&rt)));
    Ok(rt)
}

/// Run the future `make` returns on the shared runtime with the GIL released, interruptible by
/// Ctrl-C (the future is dropped and `KeyboardInterrupt` raised).
///
/// The future is built and driven on the calling thread (`block_on`; what it spawns runs on the
/// runtime's workers), so it need not be `Send`: some of cryo-core's futures are not provably
/// `Send` to rustc (higher-ranked lifetimes in `buffer_unordered` closures).
pub(crate) fn wait<T, F, Fut>(py: Python<'_>, make: F) -> PyResult<T>
where
    F: FnOnce() -> Fut + Send,
    Fut: Future<Output = cryo_core::Result<T>>,
    T: Send,
{
    crate::logging::refresh_level(py);
    let rt = runtime()?;
    let outcome = py.detach(move || {
        rt.block_on(async move {
            let fut = make();
            tokio::pin!(fut);
            let mut tick = tokio::time::interval(SLICE);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    result = &mut fut => return Ok(result),
                    _ = tick.tick() => {
                        // Reason: `Python::check_signals` is not general over the `'py` lifetime attach needs.
                        #[allow(clippy::redundant_closure_for_method_calls)]
                        Python::attach(|py| py.check_signals())?;
                    }
                }
            }
        })
    });
    match outcome {
        Ok(result) => result.map_err(|e| errors::to_py(py, &e)),
        Err(interrupted) => Err(interrupted),
    }
}

/// Run `fut` on the shared runtime and wait for it without releasing the GIL, so that no other
/// thread of this process forks meanwhile; for short clean-up that never calls into Python
/// (only `cryo_core` events reach Python's logging, and the caller must not emit any). Does
/// nothing on a runtime thread, where blocking is not allowed.
pub(crate) fn finish_holding_gil(fut: impl Future<Output = ()>) {
    if tokio::runtime::Handle::try_current().is_ok() {
        return;
    }
    let Ok(rt) = runtime() else { return };
    rt.block_on(fut);
}

/// Run blocking (non-async) Rust work with the GIL released.
pub(crate) fn blocking<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    F: FnOnce() -> cryo_core::Result<T> + Send,
    T: Send,
{
    crate::logging::refresh_level(py);
    py.detach(work).map_err(|e| errors::to_py(py, &e))
}
