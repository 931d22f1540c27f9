//! Execute: carry a maintenance plan out, step by step, each step only when the gate admits it,
//! on the native engine, on the user's Trino or on the user's Spark (docs/architecture.md,
//! "Engines and governing"). One loop does it, [`FleetRun`]; [`MaintenanceRun`] is that loop with
//! the native engine as its only destination, in one pass.
//!
//! ```text
//! plan ──▶ FleetRun ── per table, its steps in the fixed order ─────────────────────────────┐
//!            │  route: table → destination (native | trino | spark | …)                    │
//!            │  the gate: deadline, lock, same table (uuid), then Governor::decide:         │
//!            │    pause, cooldown, window, probe(destination), caps                         │
//!            │     Admit{slot} ─▶ native step, or the step rendered in the destination's    │
//!            │                    dialect, statement after statement ─▶ receipt             │
//!            │     Defer{reason, retry_after} ─▶ receipt; Governed: tried again when it     │
//!            │                    passes; OnePass: deferred to the next run                 │
//!            └── deadline: what has not started is deferred with a receipt ◀───────────────┘
//! ```
//!
//! A destination that runs SQL is an [`SqlEngine`]: [`trino::TrinoEngine`] speaks Trino's HTTP
//! protocol; the Python package wraps a `SparkSession` the caller hands in. The native engine is
//! this process ([`Destination::Native`]).
//!
//! # Example
//!
//! Run the demo lake's plan on the native engine, dry (the default): every step reports what it
//! would change, and nothing changes.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use cryo_core::clock::SystemClock;
//! use cryo_core::demo::{DemoOptions, create_demo_lake};
//! use cryo_core::exec::MaintenanceRun;
//! use cryo_core::grade::GradeOptions;
//! use cryo_core::plan::{PlanOptions, plan_scans};
//! use cryo_core::receipt::ReceiptStatus;
//! use cryo_core::scan::{FleetScanOptions, scan_fleet};
//!
//! let dir = tempfile::tempdir()?;
//! let lake = create_demo_lake(dir.path(), &DemoOptions::default()).await?;
//! let fleet = scan_fleet(&lake.catalog, &FleetScanOptions::default(), &SystemClock).await?;
//! let plan = plan_scans(
//!     lake.catalog.name(),
//!     &fleet.tables,
//!     &GradeOptions::default(),
//!     &PlanOptions::default(),
//!     &Default::default(), // no table controls: nothing paused, nothing cooling down
//! )?;
//! let outcome = MaintenanceRun::new(&lake.catalog, &plan).execute().await?;
//! assert!(outcome.dry_run);
//! assert!(outcome.count(ReceiptStatus::DryRun) > 0);
//! assert_eq!(outcome.count(ReceiptStatus::Succeeded), 0);
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

pub mod trino;

mod controls;
mod fleet;
mod native;
mod run;

use std::fmt;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::govern::Probe;
use crate::render::Dialect;

pub use controls::{ControlSources, controls_from_receipts};
pub use fleet::{FleetOptions, FleetOutcome, FleetRun, Pacing, TableReport, TableStatus};
pub use run::{MaintenanceOptions, MaintenanceOutcome, MaintenanceRun, NATIVE_ENGINE, run_plan};

/// An engine that runs Cryo's rendered SQL: the user's Trino or Spark.
#[async_trait]
pub trait SqlEngine: Send + Sync + fmt::Debug {
    /// Engine kind, as receipts name it (`trino`, `spark`).
    fn kind(&self) -> &str;
    /// The dialect statements are rendered in for this engine.
    fn dialect(&self) -> &dyn Dialect;
    /// Coordinators (or sessions) statements can be sent to; the governor picks one per step.
    fn coordinators(&self) -> Vec<String>;
    /// The engine's load now. A probe that cannot reach the engine says so: the governor defers.
    async fn probe(&self, destination: &str, now_ms: i64) -> Probe;
    /// Run one statement to completion on `coordinator`.
    async fn execute(&self, coordinator: &str, sql: &str) -> Result<StatementOutcome>;
}

/// What one statement did on its engine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StatementOutcome {
    /// The engine's id for it (Trino's query id, Spark's job group).
    pub query_id: Option<String>,
    /// Time it waited in the engine's queue.
    pub queued_ms: u64,
    /// Time it ran.
    pub elapsed_ms: u64,
    /// Attempts (more than one when a transient failure was retried).
    pub attempts: u32,
    /// The statement's result rows, as JSON (procedures report counts this way).
    pub rows: Vec<Vec<serde_json::Value>>,
    /// Column names of `rows`.
    pub columns: Vec<String>,
}

impl StatementOutcome {
    /// An outcome with the engine's query id and timings.
    pub fn new(query_id: Option<String>, queued_ms: u64, elapsed_ms: u64) -> Self {
        Self {
            query_id,
            queued_ms,
            elapsed_ms,
            attempts: 1,
            rows: Vec::new(),
            columns: Vec::new(),
        }
    }

    /// With result rows.
    #[must_use]
    pub fn with_rows(mut self, columns: Vec<String>, rows: Vec<Vec<serde_json::Value>>) -> Self {
        self.columns = columns;
        self.rows = rows;
        self
    }
}

/// Where a table's steps run.
#[derive(Debug, Clone)]
pub enum Destination {
    /// This process: Cryo's native engine against the run's catalog.
    Native,
    /// An engine that runs the rendered SQL.
    Sql(std::sync::Arc<dyn SqlEngine>),
}

impl Destination {
    /// Engine kind for receipts.
    pub fn kind(&self) -> &str {
        match self {
            Destination::Native => NATIVE_ENGINE,
            Destination::Sql(e) => e.kind(),
        }
    }
}
