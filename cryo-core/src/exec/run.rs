//! The maintenance run: a [`MaintenancePlan`] carried out on the native engine, in one pass.
//!
//! ```text
//! plan (verified fingerprint)
//!   └─ table after table ── the gate: deadline, window, lock, same table (uuid) ──┐
//!        └─ its steps in the fixed order (Operation::ORDER) ◀─────────────────────┘
//!             rewrite_position_deletes → rewrite_data_files → rewrite_manifests
//!             → expire_snapshots → remove_orphan_files
//!        every decision ─▶ a Receipt (redacted) ─▶ the outcome, and the log if one is set
//! ```
//!
//! [`MaintenanceRun`] is [`FleetRun`] with one destination, the native engine, paced
//! [`Pacing::OnePass`]: the same loop and the same gate, table after table, and what the gate
//! holds back is deferred to the next run instead of waited for.
//!
//! A failing table never fails the run: its failure is a receipt, the run goes on with the next
//! table. A failing step ends that table's run (the later steps are skipped with a receipt), since
//! the fixed order makes each step assume the ones before it happened. The run is a dry run unless
//! asked otherwise: every operation then computes what it would change and changes nothing.
//! Orphan deletion needs two opt-ins: a run that is not a dry run and a plan step that says so.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::fleet::{FleetOptions, FleetRun, Pacing};
use crate::catalog::{Catalog, TableId};
use crate::clock::Clock;
use crate::compact::RunOptions as CompactRunOptions;
use crate::error::{Error, Result};
use crate::govern::{CommitFence, TableLocks};
use crate::plan::{MaintenancePlan, Window};
use crate::progress::ProgressSink;
use crate::receipt::{Receipt, ReceiptLog, ReceiptStatus, default_actor};

/// The engine name receipts of this run carry.
pub const NATIVE_ENGINE: &str = "native";

/// How a maintenance run is carried out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MaintenanceOptions {
    /// Change nothing; report what each step would do (the default).
    pub dry_run: bool,
    /// Who runs it (receipts' `actor`); default `$USER@$HOSTNAME`.
    pub actor: String,
    /// Start no step outside this daily UTC window (checked before each step: a plan made
    /// inside the window may run past its end).
    pub window: Option<Window>,
    /// Start no step after this instant (ms since epoch); what has not started is deferred.
    pub deadline_ms: Option<i64>,
    /// Compaction groups rewritten at once.
    pub parallel_groups: usize,
    /// Most commits one compaction chunk makes.
    pub max_commits: usize,
    /// Compaction and position-delete rewrites leave alone the partitions a commit changed less
    /// than this many milliseconds ago (where merge-on-read writers are working; see
    /// [`CompactOptions::quiet_period_ms`](crate::compact::CompactOptions::quiet_period_ms)); `None`: maintain hot partitions too.
    pub quiet_period_ms: Option<u64>,
    /// Commit fence shared with cooperating writers, taken around every commit the run makes
    /// (see [`CommitFence`]); `None`: commit without it.
    pub commit_fence: Option<CommitFence>,
}

impl Default for MaintenanceOptions {
    fn default() -> Self {
        let run = CompactRunOptions::default();
        Self {
            dry_run: true,
            actor: default_actor(),
            window: None,
            deadline_ms: None,
            parallel_groups: run.parallel_groups,
            max_commits: run.max_commits,
            quiet_period_ms: None,
            commit_fence: None,
        }
    }
}

impl MaintenanceOptions {
    /// Reject nonsensical options.
    pub fn validate(&self) -> Result<()> {
        self.compact_run().validate()?;
        if let Some(w) = self.window {
            w.validate()?;
        }
        if self.actor.trim().is_empty() {
            return Err(Error::validation("actor must not be empty"));
        }
        Ok(())
    }

    pub(super) fn compact_run(&self) -> CompactRunOptions {
        CompactRunOptions {
            dry_run: self.dry_run,
            parallel_groups: self.parallel_groups,
            max_commits: self.max_commits,
            retry: None,
            commit_fence: self.commit_fence.clone(),
        }
    }
}

/// What a maintenance run did: a receipt for every decision, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MaintenanceOutcome {
    /// The plan's fingerprint.
    pub plan_fingerprint: String,
    /// Whether nothing was changed on purpose.
    pub dry_run: bool,
    /// Every decision, in the order it was taken.
    pub receipts: Vec<Receipt>,
    /// Wall time.
    pub duration_ms: u64,
}

impl MaintenanceOutcome {
    /// Receipts with `status`.
    pub fn count(&self, status: ReceiptStatus) -> usize {
        self.receipts.iter().filter(|r| r.status == status).count()
    }

    /// Tables with at least one failed receipt.
    pub fn failed_tables(&self) -> Vec<&TableId> {
        let mut out: Vec<&TableId> = self
            .receipts
            .iter()
            .filter(|r| r.status == ReceiptStatus::Failed)
            .map(|r| &r.table)
            .collect();
        out.dedup();
        out
    }
}

/// A maintenance run of one plan on the native engine: a builder that ends in
/// [`MaintenanceRun::execute`].
#[derive(Debug)]
pub struct MaintenanceRun<'a> {
    run: FleetRun<'a>,
}

impl<'a> MaintenanceRun<'a> {
    /// Run `plan` against `catalog` (a dry run unless [`MaintenanceRun::dry_run`] says otherwise).
    pub fn new(catalog: &'a Catalog, plan: &'a MaintenancePlan) -> Self {
        let options = FleetOptions {
            pacing: Pacing::OnePass,
            // The planner applied the cooldowns it was given; a run of its plan does not add its own.
            cooldowns_ms: std::collections::BTreeMap::new(),
            ..FleetOptions::default()
        };
        Self {
            run: FleetRun::new(catalog, plan)
                .with_options(options)
                .with_stage("run"),
        }
    }

    /// Replace the options.
    #[must_use]
    pub fn with_options(mut self, options: MaintenanceOptions) -> Self {
        self.run.options.run = options;
        self
    }

    /// Change nothing (the default), or carry the plan out.
    #[must_use]
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.run.options.run.dry_run = dry_run;
        self
    }

    /// Take a per-table lock before touching a table; a held lock defers the table.
    #[must_use]
    pub fn with_locks(mut self, locks: Arc<dyn TableLocks>) -> Self {
        self.run = self.run.with_locks(locks);
        self
    }

    /// Append every receipt to this log as it is made.
    #[must_use]
    pub fn with_receipt_log(mut self, log: impl Into<ReceiptLog>) -> Self {
        self.run = self.run.with_receipt_log(log);
        self
    }

    /// Time source (windows, deadlines, receipts, operation clocks).
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.run = self.run.with_clock(clock);
        self
    }

    /// Report progress here: stage `run`, one unit per table of the plan, as each finishes.
    #[must_use]
    pub fn with_progress(mut self, progress: ProgressSink) -> Self {
        self.run = self.run.with_progress(progress);
        self
    }

    /// Carry the plan out, table after table. Fails only when the plan or the options are
    /// invalid, or the receipt log cannot be written; everything that happens to a table is a
    /// receipt.
    pub async fn execute(self) -> Result<MaintenanceOutcome> {
        let out = self.run.execute().await?;
        Ok(MaintenanceOutcome {
            plan_fingerprint: out.plan_fingerprint,
            dry_run: out.dry_run,
            receipts: out.receipts,
            duration_ms: out.duration_ms,
        })
    }
}

/// Run `plan` on the native engine with `options` (a dry run by default).
pub async fn run_plan(
    catalog: &Catalog,
    plan: &MaintenancePlan,
    options: &MaintenanceOptions,
) -> Result<MaintenanceOutcome> {
    MaintenanceRun::new(catalog, plan)
        .with_options(options.clone())
        .execute()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_a_dry_run() {
        let o = MaintenanceOptions::default();
        assert!(o.dry_run);
        o.validate().unwrap();
        let bad = MaintenanceOptions {
            parallel_groups: 0,
            ..MaintenanceOptions::default()
        };
        assert!(bad.validate().is_err());
    }
}
