//! Node bindings (napi-rs). Bindings translate types and nothing else; logic and defaults live
//! in `cryo-core`.

use napi_derive::napi;

/// The version of the native addon.
#[napi]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}
