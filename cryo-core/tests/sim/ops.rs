//! Cryo's operations as the simulation runs them: the public API, the real code paths.

use std::collections::BTreeMap;
use std::sync::Arc;

use cryo_core::clock::Clock;
use cryo_core::compact::{CompactOptions, Compaction, GroupStatus, RunOptions};
use cryo_core::exec::{MaintenanceOptions, MaintenanceRun};
use cryo_core::grade::{GradeOptions, grade};
use cryo_core::maintain::{
    ConvertEqualityDeletes, ConvertEqualityDeletesOptions, ExpireOptions, ExpireSnapshots,
    RemoveOrphanFiles, RemoveOrphanFilesOptions, RewriteManifests, RewriteManifestsOptions,
    RewritePositionDeletes, RewritePositionDeletesOptions,
};
use cryo_core::plan::{PlanOptions, RewriteStrategy, plan_fleet};
use cryo_core::receipt::ReceiptStatus;
use cryo_core::scan::{ScanOptions, scan_table};
use cryo_core::{Catalog, Error, TableId};

use super::world::Rng;

/// One of Cryo's operations, with its options.
#[derive(Debug, Clone)]
pub enum CryoOp {
    Compact(RewriteStrategy),
    RewritePositionDeletes,
    RewriteManifests,
    ConvertEqualityDeletes,
    Expire {
        retain_last: u32,
    },
    RemoveOrphans,
    /// The maintenance run: scan, grade, plan with the defaults, then every planned step on the
    /// native engine, with a quiet period or not.
    MaintenanceRun {
        quiet_period_ms: Option<u64>,
    },
}

impl CryoOp {
    pub fn pick(rng: &mut Rng) -> CryoOp {
        let cols = || vec!["id".to_string()];
        let sorted = cfg!(feature = "datafusion");
        match rng.below(10) {
            1 if sorted && rng.chance(0.5) => CryoOp::Compact(RewriteStrategy::Hilbert {
                columns: vec!["id".into(), "v".into()],
            }),
            2 if sorted => CryoOp::Compact(RewriteStrategy::Sort { columns: cols() }),
            3 if sorted => CryoOp::Compact(RewriteStrategy::ZOrder {
                columns: vec!["id".into(), "v".into()],
            }),
            0..=3 => CryoOp::Compact(RewriteStrategy::BinPack),
            4 => CryoOp::RewritePositionDeletes,
            5 => CryoOp::RewriteManifests,
            6 => CryoOp::ConvertEqualityDeletes,
            7 => CryoOp::Expire {
                retain_last: 1 + rng.below(3) as u32,
            },
            8 => CryoOp::RemoveOrphans,
            _ => CryoOp::MaintenanceRun {
                quiet_period_ms: rng.chance(0.3).then_some(50),
            },
        }
    }

    /// The replay name of the operation.
    pub fn name(&self) -> String {
        format!("{self:?}")
    }
}

/// What an operation ended with, as the checks need it.
#[derive(Debug)]
pub struct Ended {
    /// Committed snapshots or metadata changes.
    pub committed: bool,
    pub summary: String,
}

/// Run `op` to its end. Errors are typed errors of Cryo (an internal error is a bug).
pub async fn run(
    op: &CryoOp,
    catalog: &Catalog,
    table: &TableId,
    clock: Arc<dyn Clock>,
) -> Result<Ended, Error> {
    match op {
        CryoOp::Compact(strategy) => {
            let out = Compaction::new(catalog, table.clone())
                .with_options(CompactOptions {
                    strategy: strategy.clone(),
                    // Small files everywhere: every partition with two files is a group.
                    target_file_size_bytes: Some(1 << 20),
                    min_input_files: 2,
                    concurrency: 2,
                    ..CompactOptions::default()
                })
                .with_run_options(RunOptions {
                    parallel_groups: 2,
                    max_commits: 2,
                    ..RunOptions::default()
                })
                .with_clock(clock)
                .execute()
                .await?;
            let committed = out
                .groups
                .iter()
                .any(|g| matches!(g.status, GroupStatus::Committed { .. }));
            Ok(Ended {
                committed,
                summary: format!(
                    "{} groups: {:?}",
                    out.groups.len(),
                    out.groups.iter().map(|g| &g.status).collect::<Vec<_>>()
                ),
            })
        }
        CryoOp::RewritePositionDeletes => {
            let out = RewritePositionDeletes::new(catalog, table.clone())
                .with_options(RewritePositionDeletesOptions {
                    dry_run: false,
                    min_input_files: 2,
                    remove_dangling: true,
                    ..RewritePositionDeletesOptions::default()
                })
                .with_clock(clock)
                .execute()
                .await?;
            Ok(Ended {
                committed: !out.snapshot_ids.is_empty(),
                summary: format!("{} groups", out.groups.len()),
            })
        }
        CryoOp::RewriteManifests => {
            let out = RewriteManifests::new(catalog, table.clone())
                .with_options(RewriteManifestsOptions {
                    dry_run: false,
                    ..RewriteManifestsOptions::default()
                })
                .with_clock(clock)
                .execute()
                .await?;
            Ok(Ended {
                committed: !out.snapshot_ids.is_empty(),
                summary: format!("{:?}", out.status),
            })
        }
        CryoOp::ConvertEqualityDeletes => {
            let out = ConvertEqualityDeletes::new(catalog, table.clone())
                .with_options(ConvertEqualityDeletesOptions {
                    dry_run: false,
                    concurrency: 2,
                    ..ConvertEqualityDeletesOptions::default()
                })
                .with_clock(clock)
                .execute()
                .await?;
            Ok(Ended {
                committed: !out.snapshot_ids.is_empty(),
                summary: format!("{:?}", out.status),
            })
        }
        CryoOp::Expire { retain_last } => {
            let now = clock.now_ms();
            let out = ExpireSnapshots::new(catalog, table.clone())
                .with_options(ExpireOptions {
                    dry_run: false,
                    older_than_ms: Some(now),
                    retain_last: Some(*retain_last),
                    max_concurrent_reads: 4,
                    max_concurrent_deletes: 4,
                    ..ExpireOptions::default()
                })
                .with_clock(clock)
                .execute()
                .await?;
            Ok(Ended {
                committed: !out.expired_snapshot_ids.is_empty(),
                summary: format!("expired {:?}", out.expired_snapshot_ids),
            })
        }
        CryoOp::MaintenanceRun { quiet_period_ms } => {
            maintenance_run(catalog, table, clock, *quiet_period_ms).await
        }
        CryoOp::RemoveOrphans => {
            let out = RemoveOrphanFiles::new(catalog, table.clone())
                .with_options(RemoveOrphanFilesOptions {
                    dry_run: false,
                    concurrency: 4,
                    ..RemoveOrphanFilesOptions::default()
                })
                .with_clock(clock)
                .execute()
                .await?;
            Ok(Ended {
                committed: false,
                summary: format!("{} orphans", out.orphans.len()),
            })
        }
    }
}

/// The orphan removal that ends a run: everything older than `older_than_ms` that no snapshot
/// or metadata file references goes.
pub async fn final_orphan_removal(
    catalog: &Catalog,
    table: &TableId,
    clock: Arc<dyn Clock>,
    older_than_ms: i64,
) -> Result<usize, Error> {
    let out = RemoveOrphanFiles::new(catalog, table.clone())
        .with_options(RemoveOrphanFilesOptions {
            dry_run: false,
            older_than_ms: Some(older_than_ms),
            // Nothing else runs: a retention of zero is safe here, and nowhere else.
            allow_short_retention: true,
            ..RemoveOrphanFilesOptions::default()
        })
        .with_clock(clock)
        .execute()
        .await?;
    Ok(out.orphans.len())
}

/// Scan, grade, plan and run the plan natively: what `cryo run` does to one table.
async fn maintenance_run(
    catalog: &Catalog,
    table: &TableId,
    clock: Arc<dyn Clock>,
    quiet_period_ms: Option<u64>,
) -> Result<Ended, Error> {
    let scan = scan_table(catalog, table, &ScanOptions::default(), clock.as_ref()).await?;
    let report = grade(&scan, &GradeOptions::default(), scan.scanned_at_ms)?;
    let plan = plan_fleet(
        catalog.name(),
        &[(scan, report)],
        &PlanOptions::default(),
        &BTreeMap::new(),
        clock.now_ms(),
    )?;
    let out = MaintenanceRun::new(catalog, &plan)
        .with_options(MaintenanceOptions {
            dry_run: false,
            quiet_period_ms,
            parallel_groups: 2,
            ..MaintenanceOptions::default()
        })
        .with_clock(clock)
        .execute()
        .await?;
    // A step's failure is a receipt; an internal error in one is a bug all the same.
    if let Some(r) = out.receipts.iter().find(|r| {
        r.status == ReceiptStatus::Failed
            && r.reason
                .as_deref()
                .is_some_and(|m| m.contains("internal error"))
    }) {
        return Err(Error::Internal(format!(
            "{:?} failed: {}",
            r.operation,
            r.reason.as_deref().unwrap_or_default()
        )));
    }
    let steps: Vec<String> = out
        .receipts
        .iter()
        .filter(|r| r.operation.is_some())
        .map(|r| {
            format!(
                "{:?} {} ({})",
                r.operation,
                r.status.as_str(),
                r.reason.as_deref().unwrap_or("")
            )
        })
        .collect();
    Ok(Ended {
        committed: out
            .receipts
            .iter()
            .any(|r| r.status == ReceiptStatus::Succeeded && !r.snapshots_after.is_empty()),
        summary: steps.join(", "),
    })
}
