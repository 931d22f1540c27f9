//! Maintenance as code: a policy file says which tables get what maintenance, where, how
//! often and when, and what is paused — written down, reviewed, and applied the same way from
//! Rust, Python, Node and the CLI.
//!
//! ```text
//! policy.yaml ──Policy::load──▶ Policy (checked, fingerprinted)
//!                                  │
//! (TableScan, HealthReport) ──resolve──▶ ResolvedTable { preset, assignment, paused }
//!                                  │
//!                       ──plan──▶ MaintenancePlan { policy: fingerprint, tables[].policy }
//!                       ──explain──▶ per table: the preset, why, what runs next and when
//! (TableScan, HealthReport)… ──advise──▶ Advice (approve its fingerprint) ──apply_advice──▶ commits
//! receipts ──────────── ──due──▶ tables and operations due now (cadence, window, pause, backoff)
//! ```
//!
//! - A **preset** names operations, a destination (`native`, `trino`, `spark`), a cadence
//!   (`every`), a daily window, a quiet period and planning options.
//! - **Rules** select tables by namespace and name patterns, size, file counts, small-file
//!   ratio, grade, format version, properties and findings; the first that matches wins. A
//!   per-table override beats the rules; a table nothing matches gets the default preset.
//! - **Pauses** (a pattern, a reason, an end), **budgets** (hard caps) and **prices** (the
//!   cost model) complete it.
//! - Every problem is reported at once, each with its file, line, column and field
//!   ([`crate::Error::Policy`]).
//! - The policy is a value with a fingerprint: a plan records the policy it was made under.
//!
//! # Example
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use std::collections::BTreeMap;
//! use cryo_core::clock::SystemClock;
//! use cryo_core::demo::{DemoOptions, create_demo_lake};
//! use cryo_core::policy::{Assignment, Policy};
//! use cryo_core::scan::{FleetScanOptions, scan_fleet};
//!
//! let policy = Policy::from_yaml(
//!     r#"
//! presets:
//!   hourly: {operations: [rewrite_position_deletes, rewrite_data_files], every: 1h}
//! rules:
//!   - name: orders
//!     preset: hourly
//!     match: {name: "orders*"}
//! pauses:
//!   - {tables: lake.healthy, reason: "owned by another team"}
//! "#,
//!     "policy.yaml",
//! )?;
//! let dir = tempfile::tempdir()?;
//! let lake = create_demo_lake(dir.path(), &DemoOptions::default()).await?;
//! let fleet = scan_fleet(&lake.catalog, &FleetScanOptions::default(), &SystemClock).await?;
//! let graded = policy.grade(&fleet.tables)?;
//! let now = fleet.scanned_at_ms;
//! let resolved = policy.resolve_fleet(&graded, now);
//! let orders = resolved.tables.iter().find(|t| t.table.to_string() == "lake.orders").unwrap();
//! assert_eq!(orders.preset, "hourly");
//! assert!(matches!(orders.assignment, Assignment::Rule { index: 0, .. }));
//!
//! let plan = policy.plan(lake.catalog.name(), &graded, &BTreeMap::new(), now)?;
//! assert_eq!(plan.policy.as_deref(), Some(policy.fingerprint()));
//! let skipped = plan.skipped_tables.iter().find(|t| t.table.to_string() == "lake.healthy");
//! assert!(skipped.unwrap().reason.contains("owned by another team"));
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

mod advice;
mod due;
mod file;
mod resolve;
mod units;

pub use advice::{
    ADVICE_FORMAT_VERSION, Advice, AppliedStatus, AppliedTable, ApplyOutcome, PropertyChange,
    TableAdvice, advise, advise_scans, apply_advice,
};
pub use due::{BackingOff, Due, DueTable, Streak, streaks};
pub use file::{
    Backoff, Budgets, DestinationKind, POLICY_FORMAT_VERSION, Pause, PolicyFile, PolicyProblem,
    Preset, Rule, Selector, TableOverride, WindowRef, WindowSpec,
};
pub(crate) use resolve::newest_scan_ms;
pub use resolve::{
    Assignment, DEFAULT_PRESET, NextRun, Policy, ResolvedFleet, ResolvedPreset, ResolvedTable,
    TableExplanation,
};
pub use units::{ByteSize, Duration, Instant, Pattern};

#[cfg(test)]
mod tests;
