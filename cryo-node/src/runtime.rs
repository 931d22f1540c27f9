//! Rust work off the event loop.
//!
//! `#[napi] async fn` runs its future on napi-rs's tokio runtime, which needs the future to be
//! `Send`. Some of cryo-core's futures are not provably `Send` to rustc (higher-ranked lifetimes in
//! `buffer_unordered` closures), so [`run`] builds and drives them on a blocking-pool thread
//! (`block_on` on the same runtime: what they spawn runs on its workers) and awaits that thread.
//! The JS thread only ever waits on a Promise.

use std::future::Future;

use cryo_core::CatalogConfig;

use crate::errors;

/// Run the future `make` returns on the runtime, off the JS thread; errors are redacted with
/// `config` when one is given.
pub(crate) async fn run<T, F, Fut>(config: Option<CatalogConfig>, make: F) -> napi::Result<T>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = cryo_core::Result<T>>,
    T: Send + 'static,
{
    let handle = tokio::runtime::Handle::current();
    let outcome = tokio::task::spawn_blocking(move || handle.block_on(make()))
        .await
        .map_err(|e| errors::internal(format!("a Cryo task did not finish: {e}")))?;
    outcome.map_err(|e| errors::to_napi(&e, config.as_ref()))
}

/// Run blocking (CPU-bound, non-async) work off the JS thread.
pub(crate) async fn blocking<T, F>(work: F) -> napi::Result<T>
where
    F: FnOnce() -> cryo_core::Result<T> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| errors::internal(format!("a Cryo task did not finish: {e}")))?
        .map_err(|e| errors::to_napi(&e, None))
}
