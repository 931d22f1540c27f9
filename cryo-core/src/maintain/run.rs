//! The maintenance run: execute a [`MaintenancePlan`] on the native engine.
//!
//! ```text
//! plan (verified fingerprint)
//!   └─ table after table ── deadline / window? ── lock? ── same table (uuid)? ──┐
//!        └─ its steps in the fixed order (Operation::ORDER) ◀──────────────────┘
//!             rewrite_position_deletes → rewrite_data_files → rewrite_manifests
//!             → expire_snapshots → remove_orphan_files
//!        every decision ─▶ a Receipt (redacted) ─▶ the outcome, and the log if one is set
//! ```
//!
//! A failing table never fails the run: its failure is a receipt, the run goes on with the next
//! table. A failing step ends that table's run (the later steps are skipped with a receipt), since
//! the fixed order makes each step assume the ones before it happened. The run is a dry run unless
//! asked otherwise: every operation then computes what it would change and changes nothing.
//! Orphan deletion needs two opt-ins: a run that is not a dry run and a plan step that says so.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::expire::{ExpireOptions, ExpireSnapshots};
use super::manifests::{RewriteManifests, RewriteManifestsOptions};
use super::orphans::{RemoveOrphanFiles, RemoveOrphanFilesOptions};
use super::position_deletes::{
    DeleteGroupStatus, RewritePositionDeletes, RewritePositionDeletesOptions,
};
use crate::catalog::{Catalog, TableId};
use crate::clock::{Clock, SystemClock};
use crate::compact::{CompactOptions, Compaction, GroupStatus, RunOptions as CompactRunOptions};
use crate::error::{Error, Result};
use crate::govern::CommitFence;
use crate::govern::TableLocks;
use crate::ops::Operation;
use crate::plan::{MaintenancePlan, PlannedStep, StepParams, TablePlan, Window};
use crate::progress::{ProgressSink, report};
use crate::receipt::{Footprint, JsonLinesLog, Receipt, ReceiptStatus, default_actor};

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
    /// Start no table outside this daily UTC window (re-checked before each table: a plan made
    /// inside the window may run past its end).
    pub window: Option<Window>,
    /// Start no table after this instant (ms since epoch).
    pub deadline_ms: Option<i64>,
    /// Compaction groups rewritten at once.
    pub parallel_groups: usize,
    /// Most commits one compaction chunk makes.
    pub max_commits: usize,
    /// Compaction and position-delete rewrites leave alone the partitions a commit changed less
    /// than this many milliseconds ago (where merge-on-read writers are working; see
    /// [`CompactOptions::quiet_period_ms`]); `None`: maintain hot partitions too.
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

    fn compact_run(&self) -> CompactRunOptions {
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

/// A maintenance run of one plan: a builder that ends in [`MaintenanceRun::execute`].
#[derive(Debug)]
pub struct MaintenanceRun<'a> {
    catalog: &'a Catalog,
    plan: &'a MaintenancePlan,
    options: MaintenanceOptions,
    locks: Option<Arc<dyn TableLocks>>,
    log: Option<JsonLinesLog>,
    clock: Arc<dyn Clock>,
    progress: Option<ProgressSink>,
}

/// What one step did, for its receipt.
struct StepResult {
    status: ReceiptStatus,
    reason: Option<String>,
    before: Footprint,
    after: Footprint,
    snapshot_before: Option<i64>,
    snapshots_after: Vec<i64>,
    details: BTreeMap<String, serde_json::Value>,
}

impl<'a> MaintenanceRun<'a> {
    /// Run `plan` against `catalog` (a dry run unless [`MaintenanceRun::dry_run`] says otherwise).
    pub fn new(catalog: &'a Catalog, plan: &'a MaintenancePlan) -> Self {
        Self {
            catalog,
            plan,
            options: MaintenanceOptions::default(),
            locks: None,
            log: None,
            clock: Arc::new(SystemClock),
            progress: None,
        }
    }

    /// Replace the options.
    #[must_use]
    pub fn with_options(mut self, options: MaintenanceOptions) -> Self {
        self.options = options;
        self
    }

    /// Change nothing (the default), or carry the plan out.
    #[must_use]
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.options.dry_run = dry_run;
        self
    }

    /// Take a per-table lock before touching a table; a held lock defers the table.
    #[must_use]
    pub fn with_locks(mut self, locks: Arc<dyn TableLocks>) -> Self {
        self.locks = Some(locks);
        self
    }

    /// Append every receipt to this log as soon as its table is done.
    #[must_use]
    pub fn with_receipt_log(mut self, log: JsonLinesLog) -> Self {
        self.log = Some(log);
        self
    }

    /// Time source (windows, deadlines, receipts, operation clocks).
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Report progress here: stage `run`, one unit per table of the plan, as each finishes.
    #[must_use]
    pub fn with_progress(mut self, progress: ProgressSink) -> Self {
        self.progress = Some(progress);
        self
    }

    /// Carry the plan out, table after table. Fails only when the plan or the options are
    /// invalid, or the receipt log cannot be written; everything that happens to a table is a
    /// receipt.
    pub async fn execute(self) -> Result<MaintenanceOutcome> {
        let started = Instant::now();
        self.options.validate()?;
        self.plan.verify()?;
        let mut receipts = Vec::new();
        for skipped in &self.plan.skipped_tables {
            let r = self
                .receipt(&skipped.table, None, ReceiptStatus::Skipped)
                .with_reason(skipped.reason.clone());
            self.record(&mut receipts, vec![r])?;
        }
        let total = self.plan.tables.len() as u64;
        report(self.progress.as_ref(), "run", 0, total, None);
        for (done, table) in (1..).zip(&self.plan.tables) {
            let table_receipts = self.run_table(table).await;
            self.record(&mut receipts, table_receipts)?;
            report(
                self.progress.as_ref(),
                "run",
                done,
                total,
                Some(table.table.to_string()),
            );
        }
        Ok(MaintenanceOutcome {
            plan_fingerprint: self.plan.fingerprint.clone(),
            dry_run: self.options.dry_run,
            receipts,
            duration_ms: started.elapsed().as_millis() as u64,
        })
    }

    /// Redact, log and keep a table's receipts.
    fn record(&self, all: &mut Vec<Receipt>, new: Vec<Receipt>) -> Result<()> {
        let config = self.catalog.config();
        let new: Vec<Receipt> = new.into_iter().map(|r| r.redact(config)).collect();
        if let Some(log) = &self.log {
            log.append(&new)?;
        }
        all.extend(new);
        Ok(())
    }

    pub(crate) fn receipt(
        &self,
        table: &TableId,
        operation: Option<Operation>,
        status: ReceiptStatus,
    ) -> Receipt {
        Receipt::new(
            self.clock.now_ms(),
            self.catalog.name(),
            table.clone(),
            operation,
            NATIVE_ENGINE,
            status,
            self.options.actor.clone(),
        )
        .with_plan(self.plan.fingerprint.clone())
    }

    /// Every receipt of one table. Never fails: failures are receipts.
    async fn run_table(&self, table: &TablePlan) -> Vec<Receipt> {
        let mut out = Vec::new();
        let id = &table.table;
        out.extend(self.planner_skips(table));
        if table.steps.is_empty() {
            return out;
        }
        // The lock is held until this function returns (the guard drops last).
        let _guard = match self.admit(table).await {
            Ok(guard) => guard,
            Err(receipts) => {
                out.extend(receipts);
                return out;
            }
        };
        let mut steps: Vec<&PlannedStep> = table.steps.iter().collect();
        steps.sort_by_key(|s| s.operation);
        let mut failed: Option<Operation> = None;
        for step in steps {
            if let Some(op) = failed {
                out.push(
                    self.receipt(id, Some(step.operation), ReceiptStatus::Skipped)
                        .with_reason(format!("{op} failed earlier on this table")),
                );
                continue;
            }
            let r = self.step_receipt(id, step).await;
            if r.status == ReceiptStatus::Failed {
                failed = Some(step.operation);
            }
            out.push(r);
        }
        out
    }

    /// Receipts for the steps the planner left out: deferred (a cooldown or outside the window:
    /// it will run later) or skipped (not needed or not possible).
    pub(crate) fn planner_skips(&self, table: &TablePlan) -> Vec<Receipt> {
        table
            .skipped
            .iter()
            .map(|s| {
                let status = if s.reason.starts_with("cooldown") || s.reason.starts_with("outside")
                {
                    ReceiptStatus::Deferred
                } else {
                    ReceiptStatus::Skipped
                };
                self.receipt(&table.table, Some(s.operation), status)
                    .with_reason(s.reason.clone())
            })
            .collect()
    }

    /// Run one planned step on the native engine and turn what happened into its receipt (a
    /// failure is a `Failed` receipt, never an error).
    pub(crate) async fn step_receipt(&self, id: &TableId, step: &PlannedStep) -> Receipt {
        let started = Instant::now();
        let at = self.clock.now_ms();
        let result = self.run_step(id, step).await;
        let mut r = self.receipt(id, Some(step.operation), ReceiptStatus::Failed);
        r.at_ms = at;
        r.duration_ms = Some(started.elapsed().as_millis() as u64);
        match result {
            Ok(s) => {
                r.status = s.status;
                r.reason = s.reason;
                r.before = Some(s.before);
                r.after = Some(s.after);
                r.snapshot_before = s.snapshot_before;
                r.snapshots_after = s.snapshots_after;
                r.details = s.details;
            }
            Err(e) => {
                tracing::warn!(table = %id, operation = %step.operation, error = %e, "maintenance step failed");
                r.reason = Some(e.message_for(id));
                r.details
                    .insert("error_code".into(), serde_json::Value::from(e.code()));
            }
        }
        if !step.because.is_empty() {
            r.details.insert(
                "because".into(),
                serde_json::Value::from(step.because.clone()),
            );
        }
        r
    }

    /// Whether the table may run now: the deadline, the window, its lock, and that it is still
    /// the table the plan was made for. `Err` holds the receipts of a table held back.
    async fn admit(
        &self,
        table: &TablePlan,
    ) -> std::result::Result<Option<crate::govern::LockGuard>, Vec<Receipt>> {
        let id = &table.table;
        let mut out = Vec::new();
        let now = self.clock.now_ms();
        let held_back = if let Some(deadline) = self.options.deadline_ms
            && now >= deadline
        {
            Some(format!(
                "the run's deadline passed {} ms ago",
                now - deadline
            ))
        } else if let Some(w) = self.options.window
            && !in_window(w, now)
        {
            Some(format!(
                "outside the off-peak window {:02}:00-{:02}:00 UTC",
                w.start_hour, w.end_hour
            ))
        } else {
            None
        };
        if let Some(reason) = held_back {
            for step in &table.steps {
                out.push(
                    self.receipt(id, Some(step.operation), ReceiptStatus::Deferred)
                        .with_reason(reason.clone()),
                );
            }
            return Err(out);
        }
        let guard = match &self.locks {
            None => None,
            Some(locks) => {
                match locks.try_acquire(self.catalog.name(), id, &self.options.actor, now) {
                    Ok(Ok(guard)) => Some(guard),
                    Ok(Err(holder)) => {
                        for step in &table.steps {
                            out.push(
                                self.receipt(id, Some(step.operation), ReceiptStatus::Deferred)
                                    .with_reason(format!(
                                        "table is locked by {} (pid {}) since {} ms ago",
                                        holder.holder,
                                        holder.pid,
                                        now - holder.since_ms
                                    ))
                                    .with_detail("lock_holder", holder.holder.clone()),
                            );
                        }
                        return Err(out);
                    }
                    Err(e) => {
                        out.push(
                            self.receipt(id, None, ReceiptStatus::Failed)
                                .with_reason(format!("could not take the table lock: {e}")),
                        );
                        return Err(out);
                    }
                }
            }
        };
        if let Some(r) = self.same_table(table).await {
            out.push(r);
            return Err(out);
        }
        Ok(guard)
    }

    /// `None` when the table is still the one the plan was made for; else the receipt saying why
    /// it must not run (replaced since planning, or cannot be loaded).
    pub(crate) async fn same_table(&self, table: &TablePlan) -> Option<Receipt> {
        let id = &table.table;
        match self.catalog.load_table(id).await {
            Ok(loaded) => {
                let uuid = loaded.metadata.uuid().to_string();
                if !table.table_uuid.is_empty() && uuid != table.table_uuid {
                    return Some(
                        self.receipt(id, None, ReceiptStatus::Skipped)
                            .with_reason(format!(
                                "the table was replaced since planning (uuid {} in the plan, {uuid} now): plan again",
                                table.table_uuid
                            )),
                    );
                }
                None
            }
            Err(e) => Some(
                self.receipt(id, None, ReceiptStatus::Failed)
                    .with_reason(e.to_string())
                    .with_detail("error_code", e.code()),
            ),
        }
    }

    /// Run one planned step on the native engine.
    async fn run_step(&self, table: &TableId, step: &PlannedStep) -> Result<StepResult> {
        let dry_run = self.options.dry_run;
        let done = if dry_run {
            ReceiptStatus::DryRun
        } else {
            ReceiptStatus::Succeeded
        };
        match &step.params {
            StepParams::RewriteDataFiles { .. } => self.compact(table, step, done).await,
            StepParams::RewritePositionDeletes { min_input_files } => {
                self.position_deletes(table, *min_input_files, done).await
            }
            StepParams::RewriteManifests {
                target_manifest_size_bytes,
            } => {
                self.manifests(table, *target_manifest_size_bytes, done)
                    .await
            }
            StepParams::ExpireSnapshots {
                older_than_ms,
                retain_last,
                ..
            } => self.expire(table, *older_than_ms, *retain_last, done).await,
            StepParams::RemoveOrphanFiles {
                older_than_ms,
                dry_run: step_dry_run,
                ..
            } => self.orphans(table, *older_than_ms, *step_dry_run).await,
            StepParams::ConvertEqualityDeletes {} | StepParams::ComputeStatistics { .. } => {
                Ok(StepResult {
                    status: ReceiptStatus::Skipped,
                    reason: Some(format!(
                        "{} has no native engine yet: render the plan for Trino or Spark (rewrite_data_files applies equality deletes natively)",
                        step.operation
                    )),
                    before: Footprint::default(),
                    after: Footprint::default(),
                    snapshot_before: None,
                    snapshots_after: Vec::new(),
                    details: BTreeMap::new(),
                })
            }
        }
    }

    /// `rewrite_position_deletes`.
    async fn position_deletes(
        &self,
        table: &TableId,
        min_input_files: u32,
        done: ReceiptStatus,
    ) -> Result<StepResult> {
        let dry_run = self.options.dry_run;
        let o = RewritePositionDeletes::new(self.catalog, table.clone())
            .with_options(RewritePositionDeletesOptions {
                dry_run,
                min_input_files: min_input_files as usize,
                quiet_period_ms: self.options.quiet_period_ms,
                commit_fence: self.options.commit_fence.clone(),
                ..RewritePositionDeletesOptions::default()
            })
            .with_clock(Arc::clone(&self.clock))
            .execute()
            .await?;
        let mut details = BTreeMap::new();
        details.insert("files_combined".into(), o.files_combined().into());
        details.insert("files_dangling".into(), o.files_dangling().into());
        details.insert("files_added".into(), o.files_added().into());
        details.insert("rows_dropped".into(), o.rows_dropped().into());
        details.insert("conflicted_groups".into(), o.conflicted_groups().into());
        details.insert("failed_groups".into(), o.failed_groups().into());
        let groups = o.groups.len();
        let first_failure = o.groups.iter().find_map(|g| match &g.status {
            DeleteGroupStatus::Failed { code, message, .. } => {
                Some((code.clone(), message.clone()))
            }
            _ => None,
        });
        let because = first_failure.map_or_else(String::new, |(code, message)| {
            details.insert("error_code".into(), code.into());
            format!("; first failure: {message}")
        });
        let (status, reason) = if !dry_run && groups > 0 && o.committed_groups() == 0 {
            (
                ReceiptStatus::Failed,
                Some(format!(
                    "no group committed ({} conflicted, {} failed){because}",
                    o.conflicted_groups(),
                    o.failed_groups()
                )),
            )
        } else {
            (done, None)
        };
        Ok(StepResult {
            status,
            reason,
            before: o.before(),
            after: o.after(),
            snapshot_before: o.base_snapshot_id,
            snapshots_after: o.snapshot_ids.clone(),
            details,
        })
    }

    /// `rewrite_manifests`.
    async fn manifests(
        &self,
        table: &TableId,
        target_manifest_size_bytes: u64,
        done: ReceiptStatus,
    ) -> Result<StepResult> {
        let dry_run = self.options.dry_run;
        let o = RewriteManifests::new(self.catalog, table.clone())
            .with_options(RewriteManifestsOptions {
                dry_run,
                target_size_bytes: Some(target_manifest_size_bytes),
                commit_fence: self.options.commit_fence.clone(),
                ..RewriteManifestsOptions::default()
            })
            .with_clock(Arc::clone(&self.clock))
            .execute()
            .await?;
        let mut details = BTreeMap::new();
        details.insert("manifests_replaced".into(), o.manifests_replaced.into());
        details.insert("manifests_created".into(), o.manifests_created.into());
        details.insert("manifests_kept".into(), o.manifests_kept.into());
        details.insert("entries_processed".into(), o.entries_processed.into());
        details.insert("retries".into(), o.retries.into());
        Ok(StepResult {
            status: done,
            reason: None,
            before: o.before(),
            after: o.after(),
            snapshot_before: o.base_snapshot_id,
            snapshots_after: o.snapshot_ids.clone(),
            details,
        })
    }

    /// `expire_snapshots`.
    async fn expire(
        &self,
        table: &TableId,
        older_than_ms: i64,
        retain_last: u32,
        done: ReceiptStatus,
    ) -> Result<StepResult> {
        let dry_run = self.options.dry_run;
        let o = ExpireSnapshots::new(self.catalog, table.clone())
            .with_options(ExpireOptions {
                dry_run,
                older_than_ms: Some(older_than_ms),
                retain_last: Some(retain_last),
                commit_fence: self.options.commit_fence.clone(),
                ..ExpireOptions::default()
            })
            .with_clock(Arc::clone(&self.clock))
            .execute()
            .await?;
        let mut details = BTreeMap::new();
        details.insert(
            "expired_snapshots".into(),
            o.expired_snapshot_ids.len().into(),
        );
        details.insert("removed_refs".into(), o.removed_refs.len().into());
        details.insert("delete_failures".into(), o.failures.len().into());
        details.insert("retries".into(), o.retries.into());
        let reason = if o.failures.is_empty() && o.cleanup_error.is_none() {
            None
        } else {
            Some(format!(
                "expired; {} unreachable files could not be deleted{}",
                o.failures.len(),
                o.cleanup_error
                    .as_ref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            ))
        };
        Ok(StepResult {
            status: done,
            reason,
            before: o.before(),
            after: o.after(),
            snapshot_before: o.base_snapshot_id,
            snapshots_after: o.snapshot_ids.clone(),
            details,
        })
    }

    /// `remove_orphan_files`: deletes only when neither the run nor the plan step is a dry run.
    async fn orphans(
        &self,
        table: &TableId,
        older_than_ms: i64,
        step_dry_run: bool,
    ) -> Result<StepResult> {
        let dry_run = self.options.dry_run;
        let dry = dry_run || step_dry_run;
        let o = RemoveOrphanFiles::new(self.catalog, table.clone())
            .with_options(RemoveOrphanFilesOptions {
                dry_run: dry,
                older_than_ms: Some(older_than_ms),
                ..RemoveOrphanFilesOptions::default()
            })
            .with_clock(Arc::clone(&self.clock))
            .execute()
            .await?;
        let mut details = BTreeMap::new();
        details.insert("orphan_files".into(), (o.orphans.len() as u64).into());
        details.insert("orphan_bytes".into(), o.orphan_bytes.into());
        details.insert("deleted_files".into(), o.deleted_files.into());
        details.insert("delete_failures".into(), (o.failures.len() as u64).into());
        details.insert("older_than_ms".into(), o.older_than_ms.into());
        let status = if !o.failures.is_empty() {
            ReceiptStatus::Failed
        } else if dry {
            ReceiptStatus::DryRun
        } else {
            ReceiptStatus::Succeeded
        };
        let reason = if dry && !dry_run {
            Some(
                "the plan's orphan step is a dry run (plan with orphan dry_run off to delete)"
                    .to_string(),
            )
        } else if !o.failures.is_empty() {
            Some(format!(
                "{} orphan files could not be deleted",
                o.failures.len()
            ))
        } else {
            None
        };
        Ok(StepResult {
            status,
            reason,
            before: o.before(),
            after: o.after(),
            snapshot_before: o.snapshot_id_before,
            snapshots_after: o.snapshot_ids.clone(),
            details,
        })
    }

    /// `rewrite_data_files`: each chunk of the step compacted on its own.
    async fn compact(
        &self,
        table: &TableId,
        step: &PlannedStep,
        done: ReceiptStatus,
    ) -> Result<StepResult> {
        let mut before = Footprint::default();
        let mut after = Footprint::default();
        let mut snapshot_before = None;
        let mut snapshots_after = Vec::new();
        let (mut groups, mut committed, mut conflicted, mut failed) = (0usize, 0, 0, 0);
        let (mut rows_deleted, mut delete_files_removed) = (0u64, 0u64);
        let mut first_failure: Option<(String, String)> = None;
        for chunk in &step.chunks {
            let outcome = Compaction::new(self.catalog, table.clone())
                .with_options(CompactOptions {
                    quiet_period_ms: self.options.quiet_period_ms,
                    ..CompactOptions::from_step(step, chunk)?
                })
                .with_run_options(self.options.compact_run())
                .with_clock(Arc::clone(&self.clock))
                .execute()
                .await?;
            if snapshot_before.is_none() {
                snapshot_before = outcome.base_snapshot_id;
            }
            snapshots_after.extend(outcome.snapshot_ids.iter().copied());
            groups += outcome.groups.len();
            committed += outcome.committed_groups();
            conflicted += outcome.conflicted_groups();
            failed += outcome.failed_groups();
            rows_deleted += outcome.rows_deleted();
            delete_files_removed += outcome.delete_files_removed();
            if first_failure.is_none() {
                first_failure = outcome.groups.iter().find_map(|g| match &g.status {
                    GroupStatus::Failed { code, message, .. } => {
                        Some((code.clone(), message.clone()))
                    }
                    _ => None,
                });
            }
            if outcome.dry_run {
                before.files += outcome
                    .plan
                    .groups
                    .iter()
                    .map(|g| g.data_files.len() as u64)
                    .sum::<u64>();
                before.bytes += outcome
                    .plan
                    .groups
                    .iter()
                    .map(|g| g.input_bytes)
                    .sum::<u64>();
            } else {
                before.files += outcome.files_in();
                before.bytes += outcome.bytes_in();
                after.files += outcome.files_out();
                after.bytes += outcome.bytes_out();
            }
        }
        let mut details = BTreeMap::new();
        details.insert("chunks".into(), step.chunks.len().into());
        details.insert("groups".into(), groups.into());
        details.insert("committed_groups".into(), committed.into());
        details.insert("conflicted_groups".into(), conflicted.into());
        details.insert("failed_groups".into(), failed.into());
        details.insert("rows_deleted".into(), rows_deleted.into());
        details.insert("delete_files_removed".into(), delete_files_removed.into());
        // The first failure, typed and named, so that the receipt says what broke and where.
        let because = first_failure.map_or_else(String::new, |(code, message)| {
            let text = format!("; first failure: {message}");
            details.insert("error_code".into(), code.into());
            text
        });
        let (status, reason) = if done == ReceiptStatus::DryRun {
            (done, None)
        } else if groups > 0 && committed == 0 {
            (
                ReceiptStatus::Failed,
                Some(format!(
                    "no group committed ({conflicted} conflicted with concurrent writers, {failed} failed){because}"
                )),
            )
        } else if conflicted + failed > 0 {
            (
                done,
                Some(format!(
                    "{committed} of {groups} groups committed ({conflicted} conflicted, {failed} failed; their files were removed){because}"
                )),
            )
        } else {
            (done, None)
        };
        Ok(StepResult {
            status,
            reason,
            before,
            after,
            snapshot_before,
            snapshots_after,
            details,
        })
    }
}

/// The per-table controls the planner takes, rebuilt from receipts: when each operation last
/// succeeded on each table, so cooldowns hold across runs and processes that share a log.
pub fn controls_from_receipts(
    receipts: &[Receipt],
) -> BTreeMap<TableId, crate::plan::TableControl> {
    let mut out: BTreeMap<TableId, crate::plan::TableControl> = BTreeMap::new();
    for r in receipts {
        if r.status != ReceiptStatus::Succeeded {
            continue;
        }
        let Some(op) = r.operation else { continue };
        let last = out
            .entry(r.table.clone())
            .or_default()
            .last_runs
            .entry(op)
            .or_insert(r.at_ms);
        *last = (*last).max(r.at_ms);
    }
    out
}

/// Where a scheduler keeps what it knows about its tables between runs: controls it was given
/// (pauses, deadlines, last runs), and a receipt log whose successful receipts say when each
/// operation last ran. [`ControlSources::load`] folds them into the per-table controls that
/// [`plan_fleet`](crate::plan::plan_fleet) and [`FleetRun`](crate::exec::FleetRun) take; the
/// Python and Node packages hand theirs over as this value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ControlSources {
    /// Per table, keyed by its identifier as written (`ns.table`, `"my.ns".t`).
    pub tables: BTreeMap<String, crate::plan::TableControl>,
    /// A receipt log (JSON lines, as [`JsonLinesLog`] writes it); absent: none yet.
    pub receipt_log: Option<std::path::PathBuf>,
}

impl ControlSources {
    /// The controls of every table either source names. Fails on an identifier that does not
    /// parse or a receipt log that cannot be read.
    pub fn load(&self) -> Result<BTreeMap<TableId, crate::plan::TableControl>> {
        let mut out = match &self.receipt_log {
            Some(path) => controls_from_receipts(&JsonLinesLog::new(path).read()?),
            None => BTreeMap::new(),
        };
        for (name, control) in &self.tables {
            out.entry(TableId::parse(name)?).or_default().merge(control);
        }
        Ok(out)
    }
}

/// Whether `now_ms` falls in the daily UTC window (the planner's rule).
fn in_window(w: Window, now_ms: i64) -> bool {
    crate::plan::window_opens_in(w, now_ms).is_none()
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
    fn windows_wrap_past_midnight() {
        let h = |hour: i64| hour * 3_600_000;
        let night = Window {
            start_hour: 22,
            end_hour: 4,
        };
        assert!(in_window(night, h(23)));
        assert!(in_window(night, h(24 + 3)));
        assert!(!in_window(night, h(4)));
        assert!(!in_window(night, h(12)));
        let day = Window {
            start_hour: 9,
            end_hour: 17,
        };
        assert!(in_window(day, h(9)));
        assert!(!in_window(day, h(17)));
    }

    #[test]
    fn control_sources_fold_the_log_and_the_given_controls() {
        let table = TableId::parse("lake.t").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let log = JsonLinesLog::new(dir.path().join("r.jsonl"));
        let receipt =
            |at, op, status| Receipt::new(at, "c", table.clone(), Some(op), "native", status, "me");
        log.append(&[
            receipt(100, Operation::RewriteDataFiles, ReceiptStatus::Succeeded),
            receipt(300, Operation::RewriteDataFiles, ReceiptStatus::Succeeded),
            receipt(900, Operation::ExpireSnapshots, ReceiptStatus::Failed),
        ])
        .unwrap();
        let sources = ControlSources {
            tables: BTreeMap::from([(
                "lake.t".to_string(),
                crate::plan::TableControl {
                    paused: true,
                    last_runs: BTreeMap::from([(Operation::RewriteDataFiles, 200)]),
                    deadline_ms: Some(5_000),
                    ..Default::default()
                },
            )]),
            receipt_log: Some(log.path().to_path_buf()),
        };
        let controls = sources.load().unwrap();
        let c = &controls[&table];
        assert!(c.paused);
        assert_eq!(c.pause().as_deref(), Some("paused by its controls"));
        assert_eq!(c.deadline_ms, Some(5_000));
        // The later of the two sources; a failed run starts no cooldown.
        assert_eq!(
            c.last_runs,
            BTreeMap::from([(Operation::RewriteDataFiles, 300)])
        );
        let cooldowns = BTreeMap::from([(Operation::RewriteDataFiles, 1_000)]);
        assert_eq!(
            c.cooldown_until_ms(Operation::RewriteDataFiles, &cooldowns, 500),
            Some(1_300)
        );
        assert_eq!(
            c.cooldown_until_ms(Operation::RewriteDataFiles, &cooldowns, 1_300),
            None
        );
        assert_eq!(
            c.cooldown_until_ms(Operation::ExpireSnapshots, &cooldowns, 500),
            None
        );

        let bad = ControlSources {
            tables: BTreeMap::from([(
                "no_namespace".to_string(),
                crate::plan::TableControl::default(),
            )]),
            receipt_log: None,
        };
        assert!(matches!(bad.load(), Err(Error::Validation { .. })));
    }

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
