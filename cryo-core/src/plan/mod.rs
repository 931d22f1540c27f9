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

mod model;
mod planner;
mod predicate;

pub use model::*;
pub(crate) use planner::window_opens_in;
pub use planner::{ExpirePolicy, OrphanPolicy, PlanOptions, plan_fleet, plan_scans, plan_table};

#[cfg(test)]
mod tests;
