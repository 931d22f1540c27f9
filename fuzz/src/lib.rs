//! `cargo fuzz` targets for Cryo: `metadata.json`, manifest lists and manifests as the scan
//! and expiry's fast readers read them, and the grader and planner. The bodies live in
//! [`targets`] (shared with cryo-core's `fuzz_corpus` test, which replays the committed corpora
//! on stable).

use std::path::Path;

mod targets;

pub use targets::*;

/// The in-memory fuzz lake, from `fuzz/lake/`.
pub fn lake() -> &'static Lake {
    Lake::get(&Path::new(env!("CARGO_MANIFEST_DIR")).join("lake"))
}
