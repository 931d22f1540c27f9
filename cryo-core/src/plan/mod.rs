//! Planning: which maintenance each table needs, partition by partition, under byte budgets,
//! in the fixed operation order ([`crate::ops::Operation::ORDER`]).
//!
//! ```text
//! (TableScan, HealthReport) ──plan_table──▶ TablePlan ─┐
//!            … for every table ──plan_fleet──────────────┴─▶ MaintenancePlan (fingerprinted)
//! ```
//!
//! - Partitions are ranked by benefit (small files removed, deletes applied, old-spec files
//!   moved) per GiB rewritten, skipped under thresholds, and packed into chunks under a byte
//!   budget and a partitions-per-chunk cap; an oversize partition runs alone; a small table
//!   runs whole.
//! - No partition is planned twice: a partition whose data files are rewritten (which applies
//!   its deletes) gets no separate delete-file rewrite.
//! - Cooldowns, off-peak windows, deadlines and pauses are inputs; every skip says why.
//! - The plan is a serde value with a stable SHA-256 fingerprint; it holds structured predicates
//!   and never SQL.
//!
//! # Example
//!
//! Plan the demo lake: every decayed table gets steps, the healthy control is skipped with the
//! reason.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use std::collections::BTreeMap;
//! use cryo_core::clock::SystemClock;
//! use cryo_core::demo::{DemoOptions, create_demo_lake};
//! use cryo_core::grade::GradeOptions;
//! use cryo_core::ops::Operation::{self, *};
//! use cryo_core::plan::{PlanOptions, plan_scans};
//! use cryo_core::scan::{FleetScanOptions, scan_fleet};
//!
//! let dir = tempfile::tempdir()?;
//! let lake = create_demo_lake(dir.path(), &DemoOptions::default()).await?;
//! let fleet = scan_fleet(&lake.catalog, &FleetScanOptions::default(), &SystemClock).await?;
//! // Grade every scan and plan the fleet; no controls (cooldowns, pauses, deadlines).
//! let (grading, options) = (GradeOptions::default(), PlanOptions::default());
//! let controls = BTreeMap::new();
//! let plan = plan_scans(lake.catalog.name(), &fleet.tables, &grading, &options, &controls)?;
//!
//! assert_eq!(plan.tables.len(), 4);
//! assert_eq!(plan.skipped_tables[0].table.to_string(), "lake.healthy");
//! for table in &plan.tables {
//!     // Steps follow the fixed order, each operation at most once.
//!     let ops: Vec<Operation> = table.steps.iter().map(|s| s.operation).collect();
//!     let ordered: Vec<Operation> =
//!         Operation::ORDER.into_iter().filter(|op| ops.contains(op)).collect();
//!     assert_eq!(ops, ordered, "{}", table.table);
//! }
//! let orders = plan.tables.iter().find(|t| t.table.to_string() == "lake.orders").unwrap();
//! let ops: Vec<Operation> = orders.steps.iter().map(|s| s.operation).collect();
//! assert_eq!(ops, [RewritePositionDeletes, RewriteDataFiles, RewriteManifests, ExpireSnapshots]);
//! // A plan is a value: its fingerprint pins its JSON.
//! assert_eq!(plan.fingerprint, plan.compute_fingerprint()?);
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

mod model;
mod planner;
mod predicate;

pub use model::{
    Chunk, EqualityDeleteMethod, FieldPredicate, Literal, MaintenancePlan, PLAN_FORMAT_VERSION,
    PartitionTarget, PlannedStep, PredicateKind, RewriteStrategy, SkippedStep, SkippedTable,
    StepParams, TableControl, TablePlan, TablePolicy, Window,
};
pub(crate) use planner::plan_fleet_each;
pub(crate) use planner::window_opens_in;
pub use planner::{ExpirePolicy, OrphanPolicy, PlanOptions, plan_fleet, plan_scans, plan_table};

#[cfg(test)]
mod tests;
