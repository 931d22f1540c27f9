//! The compaction run: plan file groups, rewrite them with bounded parallelism, commit them in
//! batches as `replace` snapshots, validating every retry against concurrent writers.
//!
//! ```text
//! load S0 ─▶ plan_compaction ─▶ groups ──rewrite_group (N at once)──▶ RewrittenGroup
//!                                                                         │ check rows
//!            batch of groups (partial progress), as soon as it is ready ◀─┘
//!   ┌──────────────────────────────────┐
//!   ▼                                  │ CommitConflict: back off, reload head
//! validate_rewrite(checked, head) ─▶ drop conflicting groups (delete their files now)
//!   ─▶ stage replace on head (new files carry S0's sequence number) ─▶ commit ──┘
//!   ─▶ verify the committed summary against the rows counted
//! ```
//!
//! `checked` is the newest snapshot every pending group is known to be committable on: S0,
//! then each snapshot the run itself commits directly on top of it. Commits by others after it
//! are validated; the run's own are not re-read.
//!
//! One conflict loses one group, never the run; a group that does not commit deletes what it
//! wrote before the run returns, unless the catalog's answer left its fate unknown (then its
//! files are kept and the outcome says so: deleting them could corrupt a table that committed).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use serde::{Deserialize, Serialize};

use super::options::{CompactOptions, PartitionRef};
use super::plan::{CompactionPlan, FileGroup, plan_compaction_at};
use super::rewrite::{DeletedRows, RewrittenGroup, cleanup_group, rewrite_group};
use crate::catalog::{Catalog, LoadedTable, TableId};
use crate::clock::{Clock, SystemClock};
use crate::commit::driver::{Attempt, AttemptContext, CommitDriver, CommitOp, Driven};
use crate::commit::{
    CatalogCommitter, CommitFence, ManifestClusters, RetryPolicy, RewriteConflict,
    SnapshotProducer, live_subset, validate_rewrite,
};
use crate::error::{Error, Result};
use crate::progress::{ProgressSink, report};

/// Most groups one run rewrites at once.
const MAX_PARALLEL_GROUPS: usize = 64;

/// How a run is carried out (what to rewrite is [`CompactOptions`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunOptions {
    /// Plan only: report the groups, files and bytes a real run would rewrite; change nothing.
    pub dry_run: bool,
    /// Groups rewritten at once (each within [`CompactOptions::memory_budget_bytes`]); by
    /// default one more than the cores, so that a core whose group waits (on a read, on its
    /// channel) finds another group's work.
    pub parallel_groups: usize,
    /// Most commits one run makes: groups are committed in up to this many batches, each on its
    /// own, so a conflict costs one batch's conflicting groups only (Java's
    /// `partial-progress.max-commits`).
    pub max_commits: usize,
    /// Commit retries; `None`: the table's `commit.retry.*` properties, else Java's defaults.
    pub retry: Option<RetryPolicy>,
    /// Take this commit fence around every commit, so that no cooperating writer's operation
    /// overlaps one (see [`CommitFence`]); `None`: commit without it.
    pub commit_fence: Option<CommitFence>,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            dry_run: false,
            parallel_groups: (std::thread::available_parallelism().map_or(2, usize::from) + 1)
                .min(MAX_PARALLEL_GROUPS),
            max_commits: 10,
            retry: None,
            commit_fence: None,
        }
    }
}

impl RunOptions {
    /// Reject nonsensical options.
    pub fn validate(&self) -> Result<()> {
        if self.parallel_groups == 0 || self.parallel_groups > MAX_PARALLEL_GROUPS {
            return Err(Error::validation(format!(
                "parallel_groups must be between 1 and {MAX_PARALLEL_GROUPS}"
            )));
        }
        if self.max_commits == 0 {
            return Err(Error::validation("max_commits must be at least 1"));
        }
        if let Some(r) = &self.retry {
            r.validate()?;
        }
        if let Some(f) = &self.commit_fence {
            f.validate()?;
        }
        Ok(())
    }
}

/// What happened to one file group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum GroupStatus {
    /// Committed in this snapshot.
    Committed {
        /// The snapshot.
        snapshot_id: i64,
    },
    /// A concurrent writer removed or added deletes to one of its files; aborted cleanly.
    Conflicted {
        /// What conflicted.
        conflicts: Vec<RewriteConflict>,
        /// Whether the group's new files were deleted (false when an earlier attempt's commit
        /// had an unknown outcome: they may be live, and orphan removal finds them if not).
        files_deleted: bool,
    },
    /// Rewriting or committing failed.
    Failed {
        /// Error code ([`Error::code`]).
        code: String,
        /// What happened.
        message: String,
        /// Whether the group's new files were deleted (false when the commit's fate is unknown).
        files_deleted: bool,
    },
    /// Dry run: this is what would be rewritten.
    DryRun,
}

/// One group's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct GroupOutcome {
    /// Group id in the plan.
    pub group_id: u32,
    /// Partition.
    pub partition: PartitionRef,
    /// Status.
    pub status: GroupStatus,
    /// Data files replaced (or that would be).
    pub data_files_in: u64,
    /// Their bytes.
    pub bytes_in: u64,
    /// New data files (expected files in a dry run).
    pub data_files_out: u64,
    /// Their bytes (0 in a dry run).
    pub bytes_out: u64,
    /// Delete files removed with the group (that would be, in a dry run).
    pub delete_files_removed: u64,
    /// Rows read before deletes.
    pub rows_in: u64,
    /// Rows removed by deletes.
    pub rows_deleted: DeletedRows,
    /// Rows written.
    pub rows_out: u64,
    /// Failed commit attempts before the outcome.
    pub retries: u32,
    /// Rewrite time.
    pub rewrite_ms: u64,
    /// Bytes a sorted rewrite spilled to disk past its memory budget (0 for a bin-pack).
    #[serde(default)]
    pub spilled_bytes: u64,
}

/// The outcome of compacting one table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CompactionOutcome {
    /// Table.
    pub table: TableId,
    /// Snapshot the run planned from.
    pub base_snapshot_id: Option<i64>,
    /// Whether nothing was changed on purpose.
    pub dry_run: bool,
    /// The plan the run executed (the dry-run answer).
    pub plan: CompactionPlan,
    /// Per group.
    pub groups: Vec<GroupOutcome>,
    /// Snapshots committed, oldest first.
    pub snapshot_ids: Vec<i64>,
    /// Parquet codec written (`zstd(3)`), when files were written.
    pub codec: Option<String>,
    /// True when the table sets no codec and Cryo chose zstd.
    pub codec_defaulted: bool,
    /// Wall time.
    pub duration_ms: u64,
    /// Wall time of the commit phase (validation, manifests, catalog swaps), after the rewrites.
    pub commit_ms: u64,
}

impl CompactionOutcome {
    fn sum(&self, pick: impl Fn(&GroupOutcome) -> u64, committed_only: bool) -> u64 {
        self.groups
            .iter()
            .filter(|g| !committed_only || matches!(g.status, GroupStatus::Committed { .. }))
            .map(pick)
            .sum()
    }

    /// Groups committed.
    pub fn committed_groups(&self) -> usize {
        self.groups
            .iter()
            .filter(|g| matches!(g.status, GroupStatus::Committed { .. }))
            .count()
    }

    /// Groups aborted by validation.
    pub fn conflicted_groups(&self) -> usize {
        self.groups
            .iter()
            .filter(|g| matches!(g.status, GroupStatus::Conflicted { .. }))
            .count()
    }

    /// Groups that failed.
    pub fn failed_groups(&self) -> usize {
        self.groups
            .iter()
            .filter(|g| matches!(g.status, GroupStatus::Failed { .. }))
            .count()
    }

    /// Data files replaced by committed groups (or planned, in a dry run).
    pub fn files_in(&self) -> u64 {
        self.sum(|g| g.data_files_in, !self.dry_run)
    }

    /// Bytes replaced.
    pub fn bytes_in(&self) -> u64 {
        self.sum(|g| g.bytes_in, !self.dry_run)
    }

    /// Data files written by committed groups.
    pub fn files_out(&self) -> u64 {
        self.sum(|g| g.data_files_out, !self.dry_run)
    }

    /// Bytes written by committed groups.
    pub fn bytes_out(&self) -> u64 {
        self.sum(|g| g.bytes_out, !self.dry_run)
    }

    /// Rows removed by applied deletes in committed groups.
    pub fn rows_deleted(&self) -> u64 {
        self.sum(|g| g.rows_deleted.total(), !self.dry_run)
    }

    /// Delete files removed by committed groups.
    pub fn delete_files_removed(&self) -> u64 {
        self.sum(|g| g.delete_files_removed, !self.dry_run)
    }

    /// Commit retries across the run.
    pub fn retries(&self) -> u64 {
        self.groups.iter().map(|g| u64::from(g.retries)).sum()
    }
}

fn rewritten_outcome(r: &RewrittenGroup, status: GroupStatus, retries: u32) -> GroupOutcome {
    GroupOutcome {
        group_id: r.group_id,
        partition: r.partition.clone(),
        status,
        data_files_in: r.removed_data_files.len() as u64,
        bytes_in: r.bytes_read,
        data_files_out: r.new_files.len() as u64,
        bytes_out: r.bytes_written,
        delete_files_removed: r.removed_delete_files.len() as u64,
        rows_in: r.rows_read,
        rows_deleted: r.rows_deleted,
        rows_out: r.rows_written,
        retries,
        rewrite_ms: r.duration_ms,
        spilled_bytes: r.spilled_bytes,
    }
}

fn failed(table: &TableId, e: &Error, files_deleted: bool) -> GroupStatus {
    GroupStatus::Failed {
        code: e.code().to_string(),
        message: e.message_for(table),
        files_deleted,
    }
}

fn group_outcome(g: &FileGroup, status: GroupStatus) -> GroupOutcome {
    GroupOutcome {
        group_id: g.id,
        partition: g.partition.clone(),
        status,
        data_files_in: g.data_files.len() as u64,
        bytes_in: g.input_bytes,
        data_files_out: g.expected_output_files,
        bytes_out: 0,
        delete_files_removed: g.removable_delete_files.len() as u64,
        rows_in: g.input_records,
        rows_deleted: DeletedRows::default(),
        rows_out: 0,
        retries: 0,
        rewrite_ms: 0,
        spilled_bytes: 0,
    }
}

/// A compaction of one table: a builder that ends in [`Compaction::execute`], or — to look at
/// or act between the stages — [`Compaction::plan`], [`Compaction::rewrite`] and
/// [`RewrittenCompaction::commit`].
#[derive(Debug)]
pub struct Compaction<'a> {
    catalog: &'a Catalog,
    table: TableId,
    options: CompactOptions,
    run: RunOptions,
    clock: Arc<dyn Clock>,
    progress: Option<ProgressSink>,
}

impl<'a> Compaction<'a> {
    /// Compact `table` of `catalog` with default options (bin-pack to the table's target size).
    pub fn new(catalog: &'a Catalog, table: TableId) -> Self {
        Self {
            catalog,
            table,
            options: CompactOptions::default(),
            run: RunOptions::default(),
            clock: Arc::new(SystemClock),
            progress: None,
        }
    }

    /// What to rewrite.
    #[must_use]
    pub fn with_options(mut self, options: CompactOptions) -> Self {
        self.options = options;
        self
    }

    /// How to run.
    #[must_use]
    pub fn with_run_options(mut self, run: RunOptions) -> Self {
        self.run = run;
        self
    }

    /// Plan only (the default is a real run: compaction replaces files but loses nothing —
    /// the replaced files stay in old snapshots until they are expired).
    #[must_use]
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.run.dry_run = dry_run;
        self
    }

    /// Snapshot timestamps from this clock.
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Report progress here: stage `plan` once the groups are planned, then stage `rewrite`
    /// as each group's rewrite finishes (a dry run stops after `plan`).
    #[must_use]
    pub fn with_progress(mut self, progress: ProgressSink) -> Self {
        self.progress = Some(progress);
        self
    }

    /// Load the table and plan the file groups (metadata only).
    pub async fn plan(&self) -> Result<(LoadedTable, CompactionPlan)> {
        self.options.validate()?;
        self.run.validate()?;
        let base = self.catalog.load_table(&self.table).await?;
        let plan = plan_compaction_at(&base, &self.options, self.clock.now_ms()).await?;
        let input: u64 = plan.groups.iter().map(|g| g.input_bytes).sum();
        tracing::info!(
            table = %self.table,
            snapshot_id = plan.base_snapshot_id,
            groups = plan.groups.len(),
            input_bytes = input,
            dry_run = self.run.dry_run,
            "compaction planned"
        );
        report(
            self.progress.as_ref(),
            "plan",
            1,
            1,
            Some(self.table.to_string()),
        );
        Ok((base, plan))
    }

    /// Plan, then rewrite every group (each on its own task, `parallel_groups` at once). Nothing
    /// is committed yet.
    pub async fn rewrite(self) -> Result<RewrittenCompaction<'a>> {
        let started = Instant::now();
        let (base, plan) = self.plan().await?;
        let mut out = self.into_rewritten(base, Arc::new(plan), started);
        if !out.run.dry_run {
            let mut finished = out.spawn_rewrites();
            while let Some(joined) = finished.recv().await {
                if let Some(r) = out.absorb(joined).await? {
                    out.rewritten.push(r);
                }
            }
        }
        out.rewritten.sort_by_key(|r| r.group_id);
        Ok(out)
    }

    /// Plan, rewrite and commit (or only plan, for a dry run). Batches commit as soon as their
    /// groups are rewritten, while the other groups are still being rewritten.
    pub async fn execute(self) -> Result<CompactionOutcome> {
        if self.run.dry_run {
            return self.rewrite().await?.commit().await;
        }
        let started = Instant::now();
        let (base, plan) = self.plan().await?;
        let mut out = self.into_rewritten(base, Arc::new(plan), started);
        let mut loop_state = out.commit_loop()?;
        let mut finished = out.spawn_rewrites();
        let mut ready = Vec::new();
        while let Some(joined) = finished.recv().await {
            if let Some(r) = out.absorb(joined).await? {
                ready.push(r);
                out.commit_ready(&mut loop_state, &mut ready, false).await;
            }
        }
        out.commit_ready(&mut loop_state, &mut ready, true).await;
        Ok(out.finish(loop_state))
    }

    fn into_rewritten(
        self,
        base: LoadedTable,
        plan: Arc<CompactionPlan>,
        started: Instant,
    ) -> RewrittenCompaction<'a> {
        RewrittenCompaction {
            catalog: self.catalog,
            table: self.table,
            options: self.options,
            run: self.run,
            clock: self.clock,
            progress: self.progress,
            finished: 0,
            base,
            plan,
            rewritten: Vec::new(),
            failures: Vec::new(),
            started,
        }
    }
}

/// A rewrite task's answer: the group and what rewriting it gave.
type Joined = std::result::Result<(FileGroup, Result<RewrittenGroup>), tokio::task::JoinError>;

/// Groups rewritten and waiting to commit (their files are written, the table is unchanged).
#[derive(Debug)]
pub struct RewrittenCompaction<'a> {
    catalog: &'a Catalog,
    table: TableId,
    options: CompactOptions,
    run: RunOptions,
    clock: Arc<dyn Clock>,
    progress: Option<ProgressSink>,
    /// Groups whose rewrite finished (for progress).
    finished: u64,
    base: LoadedTable,
    plan: Arc<CompactionPlan>,
    rewritten: Vec<RewrittenGroup>,
    failures: Vec<GroupOutcome>,
    started: Instant,
}

impl RewrittenCompaction<'_> {
    /// The plan the groups were rewritten from.
    pub fn plan(&self) -> &CompactionPlan {
        &self.plan
    }

    /// The rewritten groups.
    pub fn groups(&self) -> &[RewrittenGroup] {
        &self.rewritten
    }

    /// Delete every file the rewrite wrote and commit nothing.
    pub async fn abort(self) -> Result<usize> {
        let mut n = 0;
        for g in &self.rewritten {
            n += cleanup_group(&self.base, g).await?;
        }
        Ok(n)
    }

    /// Commit the groups in up to `max_commits` batches, validating every attempt.
    pub async fn commit(mut self) -> Result<CompactionOutcome> {
        if self.run.dry_run {
            let mut outcome = self.empty_outcome();
            outcome.groups = outcome
                .plan
                .groups
                .iter()
                .map(|g| group_outcome(g, GroupStatus::DryRun))
                .collect();
            outcome.duration_ms = self.started.elapsed().as_millis() as u64;
            return Ok(outcome);
        }
        let mut loop_state = self.commit_loop()?;
        let mut ready = std::mem::take(&mut self.rewritten);
        self.commit_ready(&mut loop_state, &mut ready, true).await;
        Ok(self.finish(loop_state))
    }

    fn empty_outcome(&self) -> CompactionOutcome {
        CompactionOutcome {
            table: self.plan.table.clone(),
            base_snapshot_id: self.plan.base_snapshot_id,
            dry_run: self.run.dry_run,
            groups: Vec::new(),
            snapshot_ids: Vec::new(),
            codec: None,
            codec_defaulted: false,
            duration_ms: 0,
            commit_ms: 0,
            plan: (*self.plan).clone(),
        }
    }

    /// Start a rewrite task per group (`parallel_groups` at once); their answers arrive on the
    /// returned channel as they finish.
    fn spawn_rewrites(&self) -> tokio::sync::mpsc::Receiver<Joined> {
        report(
            self.progress.as_ref(),
            "rewrite",
            0,
            self.plan.groups.len() as u64,
            Some(self.table.to_string()),
        );
        let (tx, rx) = tokio::sync::mpsc::channel(self.plan.groups.len().max(1));
        let tasks: Vec<_> = self
            .plan
            .groups
            .iter()
            .map(|g| {
                let (base, plan, options, group) = (
                    self.base.clone(),
                    Arc::clone(&self.plan),
                    self.options.clone(),
                    g.clone(),
                );
                // One task per group: a group's writer encodes on the task that drives it, so
                // groups polled together in one task would share a single core.
                async move {
                    tokio::spawn(async move {
                        let res = rewrite_group(&base, &plan, &group, &options).await;
                        (group, res)
                    })
                    .await
                }
            })
            .collect();
        let parallel = self.run.parallel_groups;
        // The driver keeps starting groups while the caller commits finished ones. It never
        // stops early: a started task always runs to its answer, so its files are accounted for.
        tokio::spawn(async move {
            let mut results = futures::stream::iter(tasks).buffer_unordered(parallel);
            while let Some(joined) = results.next().await {
                if tx.send(joined).await.is_err() {
                    break;
                }
            }
        });
        rx
    }

    /// Take in one finished rewrite: the group to commit, or `None` when it failed (its outcome
    /// is recorded and its files are deleted).
    async fn absorb(&mut self, joined: Joined) -> Result<Option<RewrittenGroup>> {
        let (group, res) =
            joined.map_err(|e| Error::compute("compaction task panicked or was cancelled", e))?;
        self.finished += 1;
        report(
            self.progress.as_ref(),
            "rewrite",
            self.finished,
            self.plan.groups.len() as u64,
            Some(self.table.to_string()),
        );
        match res {
            Ok(r) => match r.check_rows() {
                Ok(()) => Ok(Some(r)),
                Err(e) => {
                    let deleted = cleanup_group(&self.base, &r).await.is_ok();
                    self.failures
                        .push(group_outcome(&group, failed(&self.table, &e, deleted)));
                    Ok(None)
                }
            },
            // rewrite_group deletes what it wrote before it returns an error.
            Err(e) => {
                tracing::warn!(table = %self.table, group = group.id, error = %e, "group rewrite failed");
                self.failures
                    .push(group_outcome(&group, failed(&self.table, &e, true)));
                Ok(None)
            }
        }
    }

    /// The commit loop's starting state.
    fn commit_loop(&self) -> Result<CommitLoop> {
        let policy = match &self.run.retry {
            Some(p) => p.clone(),
            None => RetryPolicy::for_table(self.base.metadata.properties())
                .map_err(|e| e.in_table(&self.table))?,
        };
        let per_commit = self.plan.groups.len().div_ceil(self.run.max_commits).max(1);
        // A group's files, kept by an earlier commit of the run, go to the manifests of the batch
        // expected to remove them (groups start in plan order), so that each commit reads and
        // rewrites about its own batch's entries, not the whole table's.
        let clusters =
            ManifestClusters::new(self.plan.groups.iter().enumerate().flat_map(|(i, g)| {
                let batch = i / per_commit;
                g.data_files
                    .iter()
                    .map(|f| f.path.clone())
                    .chain(g.removable_delete_files.iter().cloned())
                    .map(move |p| (p, batch))
            }));
        Ok(CommitLoop {
            committer: self.catalog.committer()?,
            policy,
            per_commit,
            clusters,
            head: self.base.clone(),
            checked: Checked {
                table: self.base.clone(),
                removed_deletes: BTreeSet::new(),
            },
            stopped: None,
            results: Vec::new(),
            snapshot_ids: Vec::new(),
            codec: None,
            commit_ms: 0,
        })
    }

    /// Commit `ready` groups in batches of the loop's batch size; with `flush`, also the last,
    /// smaller batch.
    async fn commit_ready(
        &self,
        st: &mut CommitLoop,
        ready: &mut Vec<RewrittenGroup>,
        flush: bool,
    ) {
        let started = Instant::now();
        ready.sort_by_key(|g| g.group_id);
        while ready.len() >= st.per_commit || (flush && !ready.is_empty()) {
            let rest = ready.split_off(st.per_commit.min(ready.len()));
            let batch = std::mem::replace(ready, rest);
            if st.codec.is_none() {
                st.codec = batch.first().map(|g| (g.codec.clone(), g.codec_defaulted));
            }
            if let Some(reason) = &st.stopped {
                // A batch that failed to commit (retries spent, catalog unavailable) means the
                // next ones would too: delete what they wrote.
                for g in batch {
                    let deleted = cleanup_group(&self.base, &g).await.is_ok();
                    let e = Error::validation(format!(
                        "not attempted: an earlier commit of this run failed ({reason})"
                    ));
                    st.results
                        .push(rewritten_outcome(&g, failed(&self.table, &e, deleted), 0));
                }
                continue;
            }
            let batch_deletes: Vec<String> = batch
                .iter()
                .flat_map(|g| g.removed_delete_files.iter().cloned())
                .collect();
            let done = self
                .commit_batch(
                    st.committer.as_ref(),
                    &mut st.head,
                    &st.checked,
                    batch,
                    &st.policy,
                    &mut st.clusters,
                )
                .await;
            // Under the fence (if any) the batch was validated and staged on the head as the
            // writers in flight left it; its snapshot sits directly on the checked one when
            // nothing else committed in between.
            let checked_id = st.checked.table.metadata.current_snapshot_id();
            let landed_on_checked = st.head.metadata.current_snapshot().is_some_and(|s| {
                done.iter().any(|g| {
                    matches!(g.status, GroupStatus::Committed { snapshot_id } if snapshot_id == s.snapshot_id())
                }) && s.parent_snapshot_id().is_some()
                    && s.parent_snapshot_id() == checked_id
            });
            if landed_on_checked {
                // Every pending group is still committable on our own snapshot: it sits
                // directly on the checked one and touched only this batch's files.
                st.checked.table = st.head.clone();
                st.checked.removed_deletes.extend(batch_deletes);
            }
            st.stopped = done.iter().find_map(|g| match &g.status {
                GroupStatus::Failed { message, .. } => Some(message.clone()),
                _ => None,
            });
            for g in &done {
                if let GroupStatus::Committed { snapshot_id } = g.status
                    && !st.snapshot_ids.contains(&snapshot_id)
                {
                    st.snapshot_ids.push(snapshot_id);
                }
            }
            st.results.extend(done);
        }
        st.commit_ms += started.elapsed().as_millis() as u64;
    }

    fn finish(&self, st: CommitLoop) -> CompactionOutcome {
        let mut outcome = self.empty_outcome();
        let mut results = self.failures.clone();
        results.extend(st.results);
        results.sort_by_key(|g| g.group_id);
        outcome.groups = results;
        outcome.snapshot_ids = st.snapshot_ids;
        if let Some((codec, defaulted)) = st.codec {
            outcome.codec = Some(codec);
            outcome.codec_defaulted = defaulted;
        }
        outcome.commit_ms = st.commit_ms;
        outcome.duration_ms = self.started.elapsed().as_millis() as u64;
        tracing::info!(
            table = %self.table,
            committed_groups = outcome.committed_groups(),
            conflicted_groups = outcome.conflicted_groups(),
            failed_groups = outcome.failed_groups(),
            snapshots = ?outcome.snapshot_ids,
            duration_ms = outcome.duration_ms,
            "compaction finished"
        );
        outcome
    }

    /// Commit one batch of rewritten groups through the commit driver (under the run's commit
    /// fence, if any), validating every attempt on the head it is staged on.
    async fn commit_batch(
        &self,
        committer: &dyn CatalogCommitter,
        head: &mut LoadedTable,
        checked: &Checked,
        groups: Vec<RewrittenGroup>,
        policy: &RetryPolicy,
        clusters: &mut ManifestClusters,
    ) -> Vec<GroupOutcome> {
        let mut op = BatchCommit {
            run: self,
            checked,
            groups,
            clusters,
            out: Vec::new(),
        };
        let mut driver = match CommitDriver::new(committer, policy.clone()) {
            Ok(d) => d.with_fence(self.run.commit_fence.as_ref(), self.catalog.name()),
            Err(e) => {
                op.give_up(&e, true, 0).await;
                return op.out;
            }
        };
        let landed = match driver.drive(head, &mut op).await {
            Ok(Driven::Landed(l)) => l,
            Ok(Driven::Nothing(_)) | Err(_) => return op.out,
        };
        let retries = driver.retries();
        let BatchCommit {
            groups, mut out, ..
        } = op;
        let snapshot_id = landed.snapshot_id.unwrap_or_default();
        // An attempt whose answer was lost and that did commit is not verified: its summary is
        // the one found on the head.
        if !landed.recovered
            && let Err(e) = verify(&landed.summary, &groups)
        {
            tracing::error!(table = %self.table, error = %e, "post-commit verification failed");
            for g in &groups {
                out.push(rewritten_outcome(
                    g,
                    failed(&self.table, &e, false),
                    retries,
                ));
            }
            return out;
        }
        for g in &groups {
            out.push(rewritten_outcome(
                g,
                GroupStatus::Committed { snapshot_id },
                retries,
            ));
        }
        out
    }
}

/// One batch of rewritten groups as the commit driver sees it.
struct BatchCommit<'a, 'r> {
    run: &'a RewrittenCompaction<'r>,
    checked: &'a Checked,
    /// The groups still to commit.
    groups: Vec<RewrittenGroup>,
    /// Where the files of later batches are listed (updated with each staged snapshot).
    clusters: &'a mut ManifestClusters,
    /// Outcomes of the groups dropped by validation or given up.
    out: Vec<GroupOutcome>,
}

impl CommitOp for BatchCommit<'_, '_> {
    async fn attempt(&mut self, head: &LoadedTable, cx: AttemptContext<'_>) -> Result<Attempt> {
        let s0 = &self.run.base;
        let plan = self.run.plan.as_ref();
        // Validate against the head: only groups whose files are untouched may commit.
        let on_checked = head.metadata.current_snapshot_id()
            == self.checked.table.metadata.current_snapshot_id();
        if !on_checked {
            let replaced: BTreeSet<String> = self
                .groups
                .iter()
                .flat_map(|g| g.removed_data_files.iter().cloned())
                .collect();
            let conflicts = validate_rewrite(&self.checked.table, head, &replaced).await?;
            if !conflicts.is_empty() {
                let (keep, lose): (Vec<_>, Vec<_>) =
                    std::mem::take(&mut self.groups).into_iter().partition(|g| {
                        !conflicts
                            .iter()
                            .any(|c| g.removed_data_files.contains(&c.data_file))
                    });
                for g in lose {
                    let mine: Vec<RewriteConflict> = conflicts
                        .iter()
                        .filter(|c| g.removed_data_files.contains(&c.data_file))
                        .cloned()
                        .collect();
                    tracing::info!(table = %plan.table, group = g.group_id, conflicts = mine.len(), "group aborted by validation");
                    let files_deleted = !cx.outcome_unknown;
                    if files_deleted {
                        let _ = cleanup_group(s0, &g).await;
                    }
                    self.out.push(rewritten_outcome(
                        &g,
                        GroupStatus::Conflicted {
                            conflicts: mine,
                            files_deleted,
                        },
                        cx.retry.failed_attempts(),
                    ));
                }
                self.groups = keep;
            }
        }
        if self.groups.is_empty() {
            return Ok(Attempt::Nothing);
        }
        // Delete files another writer already removed are simply no longer ours to remove.
        let deletes: BTreeSet<String> = self
            .groups
            .iter()
            .flat_map(|g| g.removed_delete_files.iter().cloned())
            .collect();
        let deletes = if on_checked {
            // Live at the checked snapshot unless this run already removed them.
            deletes
                .into_iter()
                .filter(|d| !self.checked.removed_deletes.contains(d))
                .collect()
        } else {
            live_subset(head, &deletes).await?
        };
        let mut producer = SnapshotProducer::replace(head)
            .with_data_sequence_number(plan.base_sequence_number)
            .with_clock(Arc::clone(&self.run.clock))
            .remove_delete_files(deletes)
            .with_clusters(self.clusters.clone())
            .set_snapshot_property("cryo.operation", "rewrite_data_files");
        for g in &self.groups {
            producer = producer
                .delete_data_files(g.removed_data_files.iter().cloned())
                .add_data_files(g.new_files.iter().cloned());
        }
        let staged = producer.stage().await?;
        self.clusters.record(&staged);
        Ok(Attempt::Snapshot(Box::new(staged)))
    }

    async fn give_up(&mut self, err: &Error, delete_written: bool, attempts: u32) {
        for g in std::mem::take(&mut self.groups) {
            let deleted = delete_written && cleanup_group(&self.run.base, &g).await.is_ok();
            self.out.push(rewritten_outcome(
                &g,
                failed(&self.run.table, err, deleted),
                attempts,
            ));
        }
    }
}

/// The state of a run's commits across batches.
struct CommitLoop {
    committer: Arc<dyn CatalogCommitter>,
    policy: RetryPolicy,
    /// Groups per commit (`max_commits` batches at most).
    per_commit: usize,
    /// Where the files of later batches are listed (see [`ManifestClusters`]).
    clusters: ManifestClusters,
    /// The table as this run last saw it.
    head: LoadedTable,
    checked: Checked,
    /// Why the run stopped committing, once a batch failed.
    stopped: Option<String>,
    results: Vec<GroupOutcome>,
    snapshot_ids: Vec<i64>,
    /// Codec of the files written (and whether Cryo chose it).
    codec: Option<(String, bool)>,
    commit_ms: u64,
}

/// The snapshot every pending group has been validated against: the run's base, or a snapshot
/// this run committed directly on top of a checked one.
struct Checked {
    /// The table at that snapshot.
    table: LoadedTable,
    /// Delete files this run removed in its own commits on top of it.
    removed_deletes: BTreeSet<String>,
}

/// The committed snapshot's summary must count the rows the rewrite counted.
fn verify(
    summary: &std::collections::HashMap<String, String>,
    groups: &[RewrittenGroup],
) -> Result<()> {
    let written: u64 = groups.iter().map(|g| g.rows_written).sum();
    let read: u64 = groups.iter().map(|g| g.rows_read).sum();
    crate::commit::expect_counts(
        summary,
        &[("added-records", written), ("deleted-records", read)],
        "rewrite",
    )
}

/// Compact one table with default run options.
pub async fn compact(
    catalog: &Catalog,
    table: &TableId,
    options: &CompactOptions,
) -> Result<CompactionOutcome> {
    Compaction::new(catalog, table.clone())
        .with_options(options.clone())
        .execute()
        .await
}
