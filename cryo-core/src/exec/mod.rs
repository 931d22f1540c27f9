//! Engines at scale (docs/architecture.md, "Engines and governing"): run a fleet plan on the native engine, on the user's Trino or on
//! the user's Spark, step by step, each step only when the governor admits it.
//!
//! ```text
//! fleet plan ──▶ FleetRun ── per table, its steps in the fixed order ─────────────────────────┐
//!                  │  route: table → destination (native | trino | spark | …)                 │
//!                  │  lock? window? deadline? probe(destination) ─▶ Governor::decide          │
//!                  │     Admit{slot} ─▶ native step, or the step rendered in the destination's │
//!                  │                    dialect, statement after statement ─▶ receipt          │
//!                  │     Defer{reason, retry_after} ─▶ receipt; tried again when it passes     │
//!                  └── deadline: what has not started is deferred with a receipt ◀────────────┘
//! ```
//!
//! A destination that runs SQL is an [`SqlEngine`]: [`trino::TrinoEngine`] speaks Trino's HTTP
//! protocol; the Python package wraps a `SparkSession` the caller hands in. The native engine is
//! this process ([`Destination::Native`]).

pub mod trino;

mod fleet;

use std::fmt;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::govern::Probe;
use crate::render::Dialect;

pub use fleet::{FleetOptions, FleetOutcome, FleetRun, TableReport, TableStatus};

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
            Destination::Native => crate::maintain::NATIVE_ENGINE,
            Destination::Sql(e) => e.kind(),
        }
    }
}
