//! Receipts: every decision leaves one (docs/architecture.md, "Receipts").
//!
//! A [`Receipt`] records what was decided about one table and operation — planned, admitted,
//! deferred, succeeded, failed, skipped or dry-run — with the reason, the duration, files and
//! bytes before and after, snapshot ids, the plan fingerprint and the actor. Receipts append to
//! a durable log ([`JsonLinesLog`], one JSON object per line) and read back as values or as an
//! Arrow record batch. They never hold credentials: they are built from outcomes and errors,
//! whose messages are scrubbed where they are made, and [`Receipt::redact`] scrubs any
//! configured secret once more before a receipt is written.

mod log;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use log::{JsonLinesLog, ObjectReceiptLog, ReceiptLog, receipts_batch, receipts_schema};

use crate::catalog::{CatalogConfig, TableId};
use crate::ops::Operation;

/// What happened to a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReceiptStatus {
    /// Put in a plan.
    Planned,
    /// Admitted to run by the governor.
    Admitted,
    /// Held back (window, cooldown, load, lock); `reason` says until when or why.
    Deferred,
    /// Ran and committed.
    Succeeded,
    /// Ran and failed; `reason` has the error.
    Failed,
    /// Not done; `reason` says why.
    Skipped,
    /// Computed what would change, changed nothing.
    DryRun,
}

impl ReceiptStatus {
    /// Stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            ReceiptStatus::Planned => "planned",
            ReceiptStatus::Admitted => "admitted",
            ReceiptStatus::Deferred => "deferred",
            ReceiptStatus::Succeeded => "succeeded",
            ReceiptStatus::Failed => "failed",
            ReceiptStatus::Skipped => "skipped",
            ReceiptStatus::DryRun => "dry_run",
        }
    }
}

/// Files and bytes of a table (or of the part an operation touched).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Footprint {
    /// Files.
    pub files: u64,
    /// Bytes.
    pub bytes: u64,
}

/// One decision about one table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Receipt {
    /// Unique id (UUID v7: sortable by time).
    pub id: String,
    /// When the decision was recorded (ms since epoch).
    pub at_ms: i64,
    /// Catalog.
    pub catalog: String,
    /// Table.
    pub table: TableId,
    /// Operation; `None` for decisions about the whole table (e.g. paused).
    pub operation: Option<Operation>,
    /// Engine: `native`, `trino`, `spark`, or `planner` for planning decisions.
    pub engine: String,
    /// Status.
    pub status: ReceiptStatus,
    /// Why (skips, deferrals, failures), or a short summary.
    pub reason: Option<String>,
    /// Wall time of the work.
    pub duration_ms: Option<u64>,
    /// Before the work.
    pub before: Option<Footprint>,
    /// After the work.
    pub after: Option<Footprint>,
    /// Snapshot the work started from.
    pub snapshot_before: Option<i64>,
    /// Snapshot(s) it committed, newest last.
    pub snapshots_after: Vec<i64>,
    /// Fingerprint of the plan the decision belongs to.
    pub plan_fingerprint: Option<String>,
    /// Who or what made it (`user@host`, an Airflow task id, …).
    pub actor: String,
    /// Operation-specific figures (rows deleted, retries, …).
    pub details: BTreeMap<String, serde_json::Value>,
}

impl Receipt {
    /// A receipt with the required fields; the rest default to empty.
    pub fn new(
        at_ms: i64,
        catalog: impl Into<String>,
        table: TableId,
        operation: Option<Operation>,
        engine: impl Into<String>,
        status: ReceiptStatus,
        actor: impl Into<String>,
    ) -> Self {
        Self {
            id: uuid::Uuid::now_v7().to_string(),
            at_ms,
            catalog: catalog.into(),
            table,
            operation,
            engine: engine.into(),
            status,
            reason: None,
            duration_ms: None,
            before: None,
            after: None,
            snapshot_before: None,
            snapshots_after: Vec::new(),
            plan_fingerprint: None,
            actor: actor.into(),
            details: BTreeMap::new(),
        }
    }

    /// Set the reason.
    #[must_use]
    pub fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// Set the plan fingerprint.
    #[must_use]
    pub fn with_plan(mut self, fingerprint: impl Into<String>) -> Self {
        self.plan_fingerprint = Some(fingerprint.into());
        self
    }

    /// Add an operation-specific figure.
    #[must_use]
    pub fn with_detail(
        mut self,
        key: impl Into<String>,
        value: impl Into<serde_json::Value>,
    ) -> Self {
        self.details.insert(key.into(), value.into());
        self
    }

    /// Scrub every secret of `config` from the free-text fields.
    #[must_use]
    pub fn redact(mut self, config: &CatalogConfig) -> Self {
        self.reason = self.reason.map(|r| config.redact(&r));
        self.actor = config.redact(&self.actor);
        for v in self.details.values_mut() {
            if let serde_json::Value::String(s) = v {
                *s = config.redact(s);
            }
        }
        self
    }
}

/// How many of `receipts` have each status (`succeeded`, `dry_run`, `skipped`, `deferred`,
/// `failed`, …), keyed by the status's name: the summary every binding shows of a run.
pub fn status_counts<'a>(
    receipts: impl IntoIterator<Item = &'a Receipt>,
) -> std::collections::BTreeMap<&'static str, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for r in receipts {
        *counts.entry(r.status.as_str()).or_insert(0) += 1;
    }
    counts
}

/// The default actor: `$USER@$HOSTNAME`, or `cryo`.
pub fn default_actor() -> String {
    let user = std::env::var("USER").ok().filter(|s| !s.is_empty());
    let host = std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty());
    match (user, host) {
        (Some(u), Some(h)) => format!("{u}@{h}"),
        (Some(u), None) => u,
        _ => "cryo".to_string(),
    }
}
