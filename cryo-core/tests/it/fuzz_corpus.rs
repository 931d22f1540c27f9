//! The fuzz corpora as regression tests on stable: every committed seed and crash reproducer
//! (`fuzz/corpus/<target>/`, `fuzz/artifacts/<target>/`) is replayed through the same target
//! bodies `cargo fuzz` runs (`fuzz/src/targets.rs`), so they keep passing without nightly or
//! cargo-fuzz. A body panics only when an invariant breaks; the file that broke it is named.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

use crate::common::repo_root;

#[path = "../../../fuzz/src/targets.rs"]
#[allow(
    dead_code,
    reason = "shared with the fuzz crate, which calls items this test does not"
)]
mod targets;

fn fuzz_dir() -> PathBuf {
    repo_root().join("fuzz")
}

/// Run every file of the target's corpus and artifacts through `body`; returns how many ran.
fn replay(target: &str, body: impl Fn(&[u8])) -> usize {
    let mut files = Vec::new();
    for dir in ["corpus", "artifacts"] {
        let Ok(entries) = std::fs::read_dir(fuzz_dir().join(dir).join(target)) else {
            continue;
        };
        files.extend(entries.filter_map(Result::ok).map(|e| e.path()));
    }
    files.sort();
    let mut failed = Vec::new();
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        if catch_unwind(AssertUnwindSafe(|| body(&bytes))).is_err() {
            failed.push(f.display().to_string());
        }
    }
    assert!(
        failed.is_empty(),
        "{target}: invariants broken by {failed:#?}"
    );
    files.len()
}

fn lake() -> &'static targets::Lake {
    targets::Lake::get(&fuzz_dir().join("lake"))
}

#[test]
fn table_metadata_corpus() {
    let n = replay("table_metadata", |d| targets::table_metadata(lake(), d));
    assert!(n >= 10, "only {n} table_metadata seeds");
}

#[test]
fn manifest_list_corpus() {
    let n = replay("manifest_list", |d| targets::manifest_list(lake(), d));
    assert!(n >= 10, "only {n} manifest_list seeds");
}

#[test]
fn manifest_corpus() {
    let n = replay("manifest", |d| targets::manifest(lake(), d));
    assert!(n >= 10, "only {n} manifest seeds");
}

#[test]
fn grade_plan_corpus() {
    let n = replay("grade_plan", targets::grade_plan);
    assert!(n >= 10, "only {n} grade_plan seeds");
}

/// Needs cryo-core's `fuzz` feature (scripts/test.sh builds with it): the readers' check is a
/// hook behind it, not API.
#[cfg(feature = "fuzz")]
#[test]
fn expire_readers_corpus() {
    let n = replay("expire_readers", targets::expire_readers);
    assert!(n >= 10, "only {n} expire_readers seeds");
}
