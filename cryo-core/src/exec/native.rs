//! The native destination: a planned step carried out by Cryo's own engine, in this process.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use super::run::MaintenanceOptions;
use crate::catalog::{Catalog, TableId};
use crate::clock::Clock;
use crate::compact::{CompactOptions, Compaction, GroupStatus, PartitionRef, chunk_partitions};
use crate::error::Result;
use crate::maintain::{
    ComputeStatistics, ComputeStatisticsOptions, ComputeStatisticsStatus, ConvertEqualityDeletes,
    ConvertEqualityDeletesOptions, ConvertEqualityDeletesStatus, DeleteGroupStatus, ExpireOptions,
    ExpireSnapshots, RemoveOrphanFiles, RemoveOrphanFilesOptions, RewriteManifests,
    RewriteManifestsOptions, RewritePositionDeletes, RewritePositionDeletesOptions,
};
use crate::plan::{Chunk, EqualityDeleteMethod, PartitionTarget, PlannedStep, StepParams};
use crate::receipt::{Footprint, Receipt, ReceiptStatus};

/// Why a step's new files stayed on storage although its groups did not commit.
const KEPT_AFTER_UNKNOWN: &str =
    "after a commit of unknown outcome (orphan removal deletes them if nothing references them)";

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

/// Cryo's engine against the run's catalog, with the run's options.
pub(super) struct Native<'a> {
    pub(super) catalog: &'a Catalog,
    pub(super) options: &'a MaintenanceOptions,
    pub(super) clock: Arc<dyn Clock>,
}

impl Native<'_> {
    /// Run one planned step and write what happened into `r`, the step's receipt (a failure is a
    /// `Failed` receipt, never an error).
    pub(super) async fn step(&self, mut r: Receipt, id: &TableId, step: &PlannedStep) -> Receipt {
        let started = Instant::now();
        r.at_ms = self.clock.now_ms();
        let result = self.run_step(id, step).await;
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
                r.status = ReceiptStatus::Failed;
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

    /// Run one planned step on the native engine.
    async fn run_step(&self, table: &TableId, step: &PlannedStep) -> Result<StepResult> {
        let dry_run = self.options.dry_run;
        let done = if dry_run {
            ReceiptStatus::DryRun
        } else {
            ReceiptStatus::Succeeded
        };
        match &step.params {
            // Equality deletes are applied by rewriting every data file they could apply to
            // (`CompactOptions::from_step`), or turned into position deletes.
            StepParams::RewriteDataFiles { .. }
            | StepParams::ConvertEqualityDeletes {
                method: EqualityDeleteMethod::Rewrite,
                ..
            } => self.compact(table, step, done).await,
            StepParams::ConvertEqualityDeletes {
                method: EqualityDeleteMethod::PositionDeletes,
                ..
            } => self.convert_equality_deletes(table, step, done).await,
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
            StepParams::ComputeStatistics { columns } => {
                self.statistics(table, columns, done).await
            }
        }
    }

    /// `convert_equality_deletes` to position deletes, chunk by chunk. Partitions the
    /// conversion leaves (v3 data files that already have a vector, files of an older spec) get
    /// the rewrite instead, so that no equality delete the step was for stays.
    async fn convert_equality_deletes(
        &self,
        table: &TableId,
        step: &PlannedStep,
        done: ReceiptStatus,
    ) -> Result<StepResult> {
        let mut details = BTreeMap::new();
        let (mut before, mut after) = (Footprint::default(), Footprint::default());
        let mut snapshot_before = None;
        let mut snapshots_after = Vec::new();
        let (mut converted, mut positions, mut added) = (0u64, 0u64, 0u64);
        let mut conflicts = Vec::new();
        let mut files_kept = false;
        let mut left = Vec::new();
        for chunk in &step.chunks {
            let o = ConvertEqualityDeletes::new(self.catalog, table.clone())
                .with_options(ConvertEqualityDeletesOptions {
                    dry_run: self.options.dry_run,
                    partitions: chunk_partitions(chunk),
                    quiet_period_ms: self.options.quiet_period_ms,
                    commit_fence: self.options.commit_fence.clone(),
                    ..ConvertEqualityDeletesOptions::default()
                })
                .execute()
                .await?;
            snapshot_before = snapshot_before.or(o.base_snapshot_id);
            snapshots_after.extend(o.snapshot_ids.iter().copied());
            let (b, a) = (o.before(), o.after());
            if before == Footprint::default() {
                before = b;
            }
            after = a;
            converted += o.files_converted;
            positions += o.positions;
            added += o.delete_files_added;
            if let ConvertEqualityDeletesStatus::Conflicted {
                reason,
                files_deleted,
            } = &o.status
            {
                conflicts.push(reason.clone());
                files_kept |= !files_deleted;
            }
            left.extend(
                o.left
                    .iter()
                    .map(|l| (l.partition.clone(), l.reason.clone())),
            );
        }
        details.insert("method".into(), "position_deletes".into());
        details.insert("equality_delete_files_converted".into(), converted.into());
        details.insert("positions".into(), positions.into());
        details.insert("delete_files_added".into(), added.into());
        if let StepParams::ConvertEqualityDeletes { why, .. } = &step.params
            && !why.is_empty()
        {
            details.insert("why".into(), why.clone().into());
        }
        if !left.is_empty() {
            details.insert(
                "left_for_rewrite".into(),
                serde_json::Value::Object(
                    left.iter()
                        .map(|(p, r)| (p.path.clone(), r.clone().into()))
                        .collect(),
                ),
            );
            let r = self.rewrite_left(table, step, &left, done).await?;
            snapshots_after.extend(r.snapshots_after);
            details.insert(
                "rewrite".into(),
                serde_json::to_value(&r.details).unwrap_or_default(),
            );
            if r.status == ReceiptStatus::Failed {
                return Ok(StepResult {
                    status: ReceiptStatus::Failed,
                    reason: r
                        .reason
                        .map(|m| format!("the rewrite of the partitions left: {m}")),
                    before,
                    after,
                    snapshot_before,
                    snapshots_after,
                    details,
                });
            }
        }
        let (status, reason) = match conflict_reason(&conflicts, files_kept) {
            Some(reason) => (ReceiptStatus::Failed, Some(reason)),
            None => (done, None),
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

    /// The rewrite (the other method) of the partitions a conversion left.
    async fn rewrite_left(
        &self,
        table: &TableId,
        step: &PlannedStep,
        left: &[(PartitionRef, String)],
        done: ReceiptStatus,
    ) -> Result<StepResult> {
        let partitions: Vec<PartitionTarget> = left
            .iter()
            .map(|(p, _)| {
                step.chunks
                    .iter()
                    .flat_map(|c| &c.partitions)
                    .find(|t| t.spec_id == p.spec_id && t.path == p.path)
                    .cloned()
                    .unwrap_or_else(|| PartitionTarget {
                        spec_id: p.spec_id,
                        path: p.path.clone(),
                        predicate: Vec::new(),
                        files: 0,
                        bytes: 0,
                        score: 0.0,
                    })
            })
            .collect();
        let rewrite = PlannedStep {
            params: StepParams::ConvertEqualityDeletes {
                method: EqualityDeleteMethod::Rewrite,
                why: String::new(),
            },
            chunks: vec![Chunk {
                index: 0,
                whole_table: false,
                input_files: partitions.iter().map(|p| p.files).sum(),
                input_bytes: partitions.iter().map(|p| p.bytes).sum(),
                expected_output_files: 0,
                partitions,
            }],
            ..step.clone()
        };
        self.compact(table, &rewrite, done).await
    }

    /// `compute_statistics`.
    async fn statistics(
        &self,
        table: &TableId,
        columns: &[String],
        done: ReceiptStatus,
    ) -> Result<StepResult> {
        let o = ComputeStatistics::new(self.catalog, table.clone())
            .with_options(ComputeStatisticsOptions {
                columns: columns.to_vec(),
                dry_run: self.options.dry_run,
                commit_fence: self.options.commit_fence.clone(),
                ..ComputeStatisticsOptions::default()
            })
            .execute()
            .await?;
        let mut details = BTreeMap::new();
        details.insert("rows".into(), o.rows.into());
        details.insert(
            "ndv".into(),
            serde_json::Value::Object(
                o.columns
                    .iter()
                    .map(|c| (c.name.clone(), c.ndv.into()))
                    .collect(),
            ),
        );
        if let Some(p) = &o.statistics_path {
            details.insert("statistics_path".into(), p.clone().into());
        }
        if let Some(p) = &o.replaced_path {
            details.insert("replaced_statistics_path".into(), p.clone().into());
        }
        let (status, reason) = match o.status {
            ComputeStatisticsStatus::NoSnapshot => (
                ReceiptStatus::Skipped,
                Some("the table has no snapshot to describe".to_string()),
            ),
            _ => (done, None),
        };
        Ok(StepResult {
            status,
            reason,
            before: o.before(),
            after: o.after(),
            snapshot_before: o.snapshot_id,
            snapshots_after: Vec::new(),
            details,
        })
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
        let mut tally = GroupTally::default();
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
            tally.add(&outcome);
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
        details.insert("groups".into(), tally.groups.into());
        details.insert("committed_groups".into(), tally.committed.into());
        details.insert("conflicted_groups".into(), tally.conflicted.into());
        details.insert("failed_groups".into(), tally.failed.into());
        details.insert("rows_deleted".into(), rows_deleted.into());
        details.insert("delete_files_removed".into(), delete_files_removed.into());
        // The first failure, typed and named, so that the receipt says what broke and where.
        let because = first_failure.map_or_else(String::new, |(code, message)| {
            let text = format!("; first failure: {message}");
            details.insert("error_code".into(), code.into());
            text
        });
        let (status, reason) = tally.summary(done, &because);
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

/// Why a conversion failed, and what became of its new files; `None` without conflicts.
fn conflict_reason(conflicts: &[String], files_kept: bool) -> Option<String> {
    if conflicts.is_empty() {
        return None;
    }
    let files = if files_kept {
        format!("its new files were kept {KEPT_AFTER_UNKNOWN}")
    } else {
        "its new files were removed".to_string()
    };
    Some(format!(
        "conflicted with a concurrent writer ({files}): {}",
        conflicts.join("; ")
    ))
}

/// Compaction groups by outcome, over a step's chunks.
#[derive(Default)]
struct GroupTally {
    groups: usize,
    committed: usize,
    conflicted: usize,
    failed: usize,
    /// Groups that did not commit and whose new files stayed (after an unknown outcome).
    kept: usize,
}

impl GroupTally {
    fn add(&mut self, outcome: &crate::compact::CompactionOutcome) {
        self.groups += outcome.groups.len();
        self.committed += outcome.committed_groups();
        self.conflicted += outcome.conflicted_groups();
        self.failed += outcome.failed_groups();
        self.kept += outcome
            .groups
            .iter()
            .filter(|g| match &g.status {
                GroupStatus::Conflicted { files_deleted, .. }
                | GroupStatus::Failed { files_deleted, .. } => !files_deleted,
                _ => false,
            })
            .count();
    }

    /// The step's status and, when some group did not commit, why and what became of its files.
    fn summary(&self, done: ReceiptStatus, because: &str) -> (ReceiptStatus, Option<String>) {
        let Self {
            groups,
            committed,
            conflicted,
            failed,
            kept,
        } = *self;
        if done == ReceiptStatus::DryRun || conflicted + failed == 0 {
            return (done, None);
        }
        let files = if kept == 0 {
            "their new files were removed".to_string()
        } else {
            format!("{kept} kept their new files {KEPT_AFTER_UNKNOWN}")
        };
        if groups > 0 && committed == 0 {
            let reason = format!(
                "no group committed ({conflicted} conflicted with concurrent writers, {failed} failed; {files}){because}"
            );
            (ReceiptStatus::Failed, Some(reason))
        } else {
            let reason = format!(
                "{committed} of {groups} groups committed ({conflicted} conflicted, {failed} failed; {files}){because}"
            );
            (done, Some(reason))
        }
    }
}
