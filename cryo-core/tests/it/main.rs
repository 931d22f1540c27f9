//! Integration tests, compiled into one binary to keep link time down.
#![allow(clippy::unwrap_used, clippy::print_stderr)] // test code: unwrap to fail loudly, eprintln for measurements and diagnostics

mod bad_input;
mod catalogs;
mod commit;
mod commit_rest;
mod common;
mod compact;
mod compact_bench;
mod compact_lineage;
mod compact_run;
mod coordination;
mod demo_lake;
mod equality_deletes;
mod expire;
mod fleet;
mod fleet_trino;
mod fuzz_corpus;
mod golden;
mod maintain_manifests;
mod maintain_position_deletes;
mod maintain_run;
mod orphans;
mod orphans_paths;
mod peers_scan;
mod pipeline;
mod render;
mod render_fixtures;
mod render_hostile;
mod replace;
mod rest_scripted;
mod scan_memo;
mod secrets;
mod statistics;
