//! # Cryo: Apache Iceberg table maintenance as a library
//!
//! ```text
//! catalog ──load──▶ scan ──▶ grade ──▶ plan ──▶ render / execute ──▶ receipt
//!  (source)        metadata  A–F +    ops in    Trino / Spark SQL,
//!                  only      findings fixed     or the native engine
//!                                     order
//! ```
//!
//! - [`catalog`]: connect to a SQL (sqlite), REST or Hadoop catalog, or a single `metadata.json`,
//!   with PyIceberg's property names.
//! - [`scan`]: read a table's metadata (never its data files) into [`scan::TableScan`].
//! - [`grade`]: explainable checks, a score and an A–F grade, with the operation that fixes each.
//! - [`plan`]: the maintenance work, partition by partition, under byte budgets, in a fixed order.
//! - [`policy`]: maintenance as code: presets, assignment rules, overrides, pauses and budgets
//!   in a YAML file, resolved per table and planned under.
//! - [`render`]: the plan as Trino or Spark SQL.
//! - [`compact`]: the native compaction engine: file groups planned from metadata, rewritten
//!   with deletes applied (bin-pack, sort, z-order).
//! - [`commit`]: Cryo's writers, snapshot producer and per-catalog compare-and-swap.
//! - [`govern`]: admission by live engine load (the governor), per-table locks.
//! - [`exec`]: the fleet run loop: native, Trino (HTTP protocol) or Spark destinations.
//! - [`demo`]: a small local lake of decayed tables, for examples, tests and benchmarks.
//!
//! Pure stages (grade, plan, render) take values and return values; time comes in as an
//! argument. Only scanning and committing touch storage.
//!
//! ## Feature flags
//!
//! - `datafusion` (off by default): sorted and z-ordered rewrites in [`compact`], through
//!   `DataFusion`'s spilling `SortExec` (`DataFusion` 53 sub-crates; several minutes of extra clean
//!   build). Without it, bin-pack rewrites and every plan (including dry runs of sorts) work,
//!   and rewriting a sort or z-order group is refused as unsupported.

pub mod catalog;
pub mod commit;
pub mod compact;
pub mod error;
pub mod exec;
pub mod format;
pub mod govern;
pub mod grade;
pub mod io;
pub mod maintain;
pub mod ops;
pub mod options;
pub mod plan;
pub mod policy;
pub mod progress;
mod random;
pub mod receipt;
pub mod render;
pub mod report;

pub use catalog::{Catalog, CatalogConfig, LoadedTable, Namespace, TableId};
pub use error::{Error, Result};
pub mod clock;
pub mod demo;
pub mod scan;

/// The README's examples, compiled as doctests so they cannot drift from the API.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
