use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::model::{
    Chunk, EqualityDeleteMethod, MaintenancePlan, PLAN_FORMAT_VERSION, PartitionTarget,
    PlannedStep, RewriteStrategy, SkippedStep, SkippedTable, StepParams, TableControl, TablePlan,
    Window,
};
use super::predicate::field_predicate;
use crate::catalog::TableId;
use crate::error::{Error, Result};
use crate::grade::{HealthReport, Remedy};
use crate::ops::Operation;
use crate::scan::{PartitionSpecInfo, PartitionStats, TableScan};

const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 24 * HOUR_MS;
const GIB: u64 = 1 << 30;

/// Snapshot expiry policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExpirePolicy {
    /// Keep snapshots younger than this; `None`: the table's `history.expire.max-snapshot-age-ms`.
    pub retention_ms: Option<i64>,
    /// Keep at least this many; `None`: the table's `history.expire.min-snapshots-to-keep`.
    pub retain_last: Option<u32>,
    /// Never plan a retention shorter than this (time-travel and running queries need it).
    pub min_retention_ms: i64,
}

impl Default for ExpirePolicy {
    fn default() -> Self {
        Self {
            retention_ms: None,
            retain_last: None,
            min_retention_ms: DAY_MS,
        }
    }
}

/// Orphan removal policy. Off unless enabled: it needs a storage listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OrphanPolicy {
    /// Plan `remove_orphan_files`.
    pub enabled: bool,
    /// Only files older than this (3 days by default; never below 1 day).
    pub retention_ms: i64,
    /// Report only. The default; destructive runs must ask for it.
    pub dry_run: bool,
}

impl Default for OrphanPolicy {
    fn default() -> Self {
        Self {
            enabled: false,
            retention_ms: 3 * DAY_MS,
            dry_run: true,
        }
    }
}

/// Planning knobs. Plain values; [`PlanOptions::validate`] rejects nonsense.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlanOptions {
    /// Only these operations (`None`: all seven).
    pub operations: Option<Vec<Operation>>,
    /// Bytes one chunk may rewrite. A partition larger than this runs alone.
    pub chunk_budget_bytes: u64,
    /// Partitions one chunk may hold.
    pub max_partitions_per_chunk: usize,
    /// Bytes rewritten per table per run (`None`: unlimited); the rest is deferred.
    pub table_budget_bytes: Option<u64>,
    /// Bytes rewritten across the fleet per run (`None`: unlimited); worst tables first.
    pub fleet_budget_bytes: Option<u64>,
    /// Tables up to this size are rewritten whole, without chunking.
    pub small_table_bytes: u64,
    /// Rewrite strategy for data files.
    pub strategy: RewriteStrategy,
    /// A partition needs this many small files to be compacted (Spark's `min-input-files`).
    pub min_input_files: u32,
    /// Rewrite a data file once this many delete files apply to it.
    pub delete_file_threshold: u32,
    /// Apply deletes in a partition whose deleted rows reach this share of its rows.
    pub deleted_row_ratio: f64,
    /// A partition needs this many position-delete files to combine them.
    pub min_position_delete_files: u32,
    /// Snapshot expiry.
    pub expire: ExpirePolicy,
    /// Orphan removal.
    pub orphans: OrphanPolicy,
    /// Minimum time between two runs of an operation on the same table.
    pub cooldowns_ms: BTreeMap<Operation, i64>,
    /// Off-peak window; outside it nothing is planned.
    pub window: Option<Window>,
    /// Rewrite throughput assumed when checking deadlines.
    pub throughput_bytes_per_sec: u64,
}

impl Default for PlanOptions {
    fn default() -> Self {
        Self {
            operations: None,
            chunk_budget_bytes: 8 * GIB,
            max_partitions_per_chunk: 64,
            table_budget_bytes: None,
            fleet_budget_bytes: None,
            small_table_bytes: GIB,
            strategy: RewriteStrategy::BinPack,
            min_input_files: 5,
            delete_file_threshold: 1,
            deleted_row_ratio: 0.05,
            min_position_delete_files: 2,
            expire: ExpirePolicy::default(),
            orphans: OrphanPolicy::default(),
            cooldowns_ms: BTreeMap::from([
                (Operation::ConvertEqualityDeletes, 6 * HOUR_MS),
                (Operation::RewritePositionDeletes, 6 * HOUR_MS),
                (Operation::RewriteDataFiles, 6 * HOUR_MS),
                (Operation::ComputeStatistics, DAY_MS),
                (Operation::RewriteManifests, 6 * HOUR_MS),
                (Operation::ExpireSnapshots, 12 * HOUR_MS),
                (Operation::RemoveOrphanFiles, 7 * DAY_MS),
            ]),
            window: None,
            throughput_bytes_per_sec: 64 << 20,
        }
    }
}

impl PlanOptions {
    /// Reject nonsensical options with a message that says how to fix them.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::validation(format!("plan options: {m}")));
        if self.chunk_budget_bytes == 0 {
            return bad("chunk_budget_bytes must be positive");
        }
        if self.max_partitions_per_chunk == 0 {
            return bad("max_partitions_per_chunk must be at least 1");
        }
        if self.min_input_files == 0
            || self.min_position_delete_files == 0
            || self.delete_file_threshold == 0
        {
            return bad(
                "min_input_files, min_position_delete_files and delete_file_threshold must be at least 1",
            );
        }
        if !(self.deleted_row_ratio > 0.0 && self.deleted_row_ratio <= 1.0) {
            return bad("deleted_row_ratio must be in (0, 1]");
        }
        if self.throughput_bytes_per_sec == 0 {
            return bad("throughput_bytes_per_sec must be positive");
        }
        if self.expire.min_retention_ms < 0 || self.expire.retention_ms.is_some_and(|r| r < 0) {
            return bad("expiry retention must not be negative");
        }
        if self.orphans.retention_ms < DAY_MS {
            return bad(
                "orphans.retention_ms must be at least one day: younger files may belong to commits in flight",
            );
        }
        if self.cooldowns_ms.values().any(|c| *c < 0) {
            return bad("cooldowns must not be negative");
        }
        if let Some(w) = self.window {
            w.validate()?;
        }
        match &self.strategy {
            RewriteStrategy::ZOrder { columns } if columns.len() < 2 => {
                bad("z-order needs at least two columns (use sort for one)")
            }
            RewriteStrategy::Hilbert { columns } if columns.len() < 2 => {
                bad("a Hilbert order needs at least two columns (use sort for one)")
            }
            _ => Ok(()),
        }
    }

    fn wants(&self, op: Operation) -> bool {
        self.operations.as_ref().is_none_or(|ops| ops.contains(&op))
    }
}

fn fmt_duration(ms: i64) -> String {
    let ms = ms.max(0);
    if ms >= DAY_MS && ms % DAY_MS == 0 {
        format!("{}d", ms / DAY_MS)
    } else if ms >= HOUR_MS {
        format!("{:.1}h", ms as f64 / HOUR_MS as f64)
    } else {
        format!("{}m", ms / 60_000)
    }
}

fn fmt_bytes(b: u64) -> String {
    if b >= GIB {
        format!("{:.1} GiB", b as f64 / GIB as f64)
    } else {
        format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20))
    }
}

/// Whether `now` is in the window; otherwise when it opens next (ms from now).
pub(crate) fn window_opens_in(w: Window, now_ms: i64) -> Option<i64> {
    let ms_of_day = now_ms.rem_euclid(DAY_MS);
    let start = i64::from(w.start_hour) * HOUR_MS;
    let end = i64::from(w.end_hour) * HOUR_MS;
    let inside = if start < end {
        ms_of_day >= start && ms_of_day < end
    } else {
        ms_of_day >= start || ms_of_day < end
    };
    if inside {
        None
    } else {
        Some((start - ms_of_day).rem_euclid(DAY_MS))
    }
}

/// Why a partition is worth rewriting, and what it costs.
struct Candidate<'a> {
    p: &'a PartitionStats,
    files: u64,
    bytes: u64,
    score: f64,
}

fn to_target(
    scan: &TableScan,
    p: &PartitionStats,
    files: u64,
    bytes: u64,
    score: f64,
) -> Option<PartitionTarget> {
    let spec = scan.partitioning.spec(p.spec_id)?;
    let mut predicate = Vec::new();
    for (field, value) in spec.fields.iter().zip(&p.values) {
        if field.transform == "void" {
            continue;
        }
        predicate.push(field_predicate(field, value)?);
    }
    Some(PartitionTarget {
        spec_id: p.spec_id,
        path: p.path.clone(),
        predicate,
        files,
        bytes,
        score: (score * 1000.0).round() / 1000.0,
    })
}

/// Rank by benefit per GiB (highest first), then pack into chunks under the budget and cap.
///
/// Returns the chunks and the number of partitions left out because no predicate on source
/// columns selects them (e.g. a partition field whose source column was dropped).
fn pack(
    scan: &TableScan,
    mut cands: Vec<Candidate<'_>>,
    options: &PlanOptions,
    whole: bool,
) -> (Vec<Chunk>, usize) {
    let target = scan.write.target_file_size_bytes.max(1);
    if cands.is_empty() {
        return (Vec::new(), 0);
    }
    // Files of an unpartitioned spec can only be selected by rewriting the whole table.
    let unpartitioned = cands.iter().any(|c| {
        scan.partitioning
            .spec(c.p.spec_id)
            .is_none_or(PartitionSpecInfo::is_unpartitioned)
    });
    if whole || unpartitioned {
        let files = cands.iter().map(|c| c.files).sum();
        let bytes = cands.iter().map(|c| c.bytes).fold(0, u64::saturating_add);
        return (
            vec![Chunk {
                index: 0,
                whole_table: true,
                partitions: Vec::new(),
                input_files: files,
                input_bytes: bytes,
                expected_output_files: bytes.div_ceil(target).max(cands.len() as u64),
            }],
            0,
        );
    }
    cands.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| (a.p.spec_id, &a.p.path).cmp(&(b.p.spec_id, &b.p.path)))
    });
    let mut chunks: Vec<Chunk> = Vec::new();
    let mut current: Vec<PartitionTarget> = Vec::new();
    let mut cur_bytes = 0u64;
    let flush = |chunks: &mut Vec<Chunk>, parts: &mut Vec<PartitionTarget>, bytes: &mut u64| {
        if parts.is_empty() {
            return;
        }
        let files = parts.iter().map(|p| p.files).sum();
        let expected = parts
            .iter()
            .map(|p| p.bytes.div_ceil(target).max(1))
            .fold(0, u64::saturating_add);
        chunks.push(Chunk {
            index: chunks.len() as u32,
            whole_table: false,
            partitions: std::mem::take(parts),
            input_files: files,
            input_bytes: *bytes,
            expected_output_files: expected,
        });
        *bytes = 0;
    };
    let mut dropped = 0;
    for c in cands {
        let Some(t) = to_target(scan, c.p, c.files, c.bytes, c.score) else {
            dropped += 1;
            continue;
        };
        if !current.is_empty()
            && (cur_bytes.saturating_add(c.bytes) > options.chunk_budget_bytes
                || current.len() >= options.max_partitions_per_chunk)
        {
            flush(&mut chunks, &mut current, &mut cur_bytes);
        }
        cur_bytes = cur_bytes.saturating_add(c.bytes);
        current.push(t);
        // An oversize partition runs alone.
        if cur_bytes >= options.chunk_budget_bytes {
            flush(&mut chunks, &mut current, &mut cur_bytes);
        }
    }
    flush(&mut chunks, &mut current, &mut cur_bytes);
    (chunks, dropped)
}

fn whole_table_chunk(files: u64, bytes: u64) -> Vec<Chunk> {
    vec![Chunk {
        index: 0,
        whole_table: true,
        partitions: Vec::new(),
        input_files: files,
        input_bytes: bytes,
        expected_output_files: 0,
    }]
}

fn because(report: &HealthReport, op: Operation) -> Vec<String> {
    report
        .findings
        .iter()
        .filter(|f| f.remedy.operation() == Some(op))
        .map(|f| f.code.clone())
        .collect()
}

/// The finding codes that call for `op`, or `fallback` when it is planned on the table's own
/// figures (equality deletes present, enough position-delete files) without a finding: a
/// planned step always says why (found by fuzzing: such steps said nothing).
fn because_or(report: &HealthReport, op: Operation, fallback: &str) -> Vec<String> {
    let mut codes = because(report, op);
    if codes.is_empty() {
        codes.push(fallback.to_string());
    }
    codes
}

fn saving(report: &HealthReport, op: Operation) -> f64 {
    report
        .cost
        .savings
        .iter()
        .filter(|s| s.operation == op)
        .map(|s| s.usd_month)
        .sum()
}

/// How to apply a table's equality deletes, and why: rewriting the data files of the chunks'
/// partitions (bin-pack, deletes applied) reads and writes all of them; converting the deletes
/// to position deletes reads only the key columns of the data files they apply to and writes a
/// small delete file per partition, but leaves deletes for readers to apply. The rewrite wins
/// where it costs little (a small table), where it does work that is due anyway (partitions with
/// small files, files of an older spec), and on v3 where data files already have deletion
/// vectors (a data file takes one).
fn equality_delete_method(
    scan: &TableScan,
    options: &PlanOptions,
    chunks: &[Chunk],
    small_table: bool,
) -> (EqualityDeleteMethod, String) {
    let targets: BTreeSet<(i32, &str)> = chunks
        .iter()
        .flat_map(|c| c.partitions.iter().map(|p| (p.spec_id, p.path.as_str())))
        .collect();
    let whole_table = chunks.iter().any(|c| c.whole_table);
    let parts: Vec<&PartitionStats> = scan
        .partitions
        .iter()
        .filter(|p| whole_table || targets.contains(&(p.spec_id, p.path.as_str())))
        .filter(|p| p.delete_files.equality.files > 0)
        .collect();
    let bytes: u64 = chunks.iter().map(|c| c.input_bytes).sum();
    let rewrite = |why: String| (EqualityDeleteMethod::Rewrite, why);
    if small_table {
        return rewrite(format!(
            "the table is small ({}): rewriting it costs little and leaves no delete file for readers",
            crate::report::bytes(bytes)
        ));
    }
    let default_spec = scan.partitioning.default_spec_id;
    if let Some(p) = parts.iter().find(|p| !p.in_spec(default_spec)) {
        return rewrite(format!(
            "partition {:?} is in an older partition spec: the rewrite moves its files to the current one",
            p.path
        ));
    }
    let small = parts
        .iter()
        .filter(|p| p.data_files.small_count >= u64::from(options.min_input_files.max(2)))
        .count();
    if small > 0 {
        return rewrite(format!(
            "{small} of the {} partitions with equality deletes need compacting too: one rewrite compacts them and applies the deletes",
            parts.len()
        ));
    }
    if scan.format_version >= 3
        && parts
            .iter()
            .any(|p| p.delete_files.position.files + p.delete_files.deletion_vectors.files > 0)
    {
        return rewrite(
            "data files here already have deletion vectors or position deletes, which a conversion would have to merge (a data file takes one vector): the rewrite applies them all"
                .to_string(),
        );
    }
    (
        EqualityDeleteMethod::PositionDeletes,
        format!(
            "converting reads only the key columns of the data files the deletes apply to (of {}) and writes a small delete file per partition, where a rewrite would read and write all of it",
            crate::report::bytes(bytes)
        ),
    )
}

/// Plan one table. Pure: same inputs, same plan.
#[allow(clippy::too_many_lines)] // the seven operations in order, each a short block
pub fn plan_table(
    scan: &TableScan,
    report: &HealthReport,
    options: &PlanOptions,
    control: &TableControl,
    now_ms: i64,
) -> Result<TablePlan> {
    options.validate()?;
    if report.table != scan.table {
        return Err(Error::validation(format!(
            "report is for {} but the scan is of {}",
            report.table, scan.table
        )));
    }
    let mut plan = TablePlan {
        table: scan.table.clone(),
        table_uuid: scan.table_uuid.clone(),
        base_snapshot_id: scan.current_snapshot_id,
        base_metadata_location: scan.metadata_location.clone(),
        format_version: scan.format_version,
        grade: report.grade,
        score: report.score,
        steps: Vec::new(),
        skipped: Vec::new(),
        policy: None,
    };
    // Findings whose remedy starts with a property change need a person first: rewriting before
    // the property is set would write the same files again.
    let mut called_for = BTreeSet::new();
    let mut needs_property = Vec::new();
    for f in &report.findings {
        match &f.remedy {
            Remedy::TableProperty {
                key,
                value,
                then: Some(op),
            } => needs_property.push((*op, f.code.clone(), key.clone(), value.clone())),
            r => called_for.extend(r.operation()),
        }
    }
    let skip = |plan: &mut TablePlan, op: Operation, reason: String| {
        plan.skipped.push(SkippedStep {
            operation: op,
            reason,
        });
    };

    // Gates that apply to every operation.
    let gate = |op: Operation| -> Option<String> {
        if !options.wants(op) {
            return Some("not among the requested operations".to_string());
        }
        if let Some(last) = control.last_runs.get(&op) {
            let cooldown = options.cooldowns_ms.get(&op).copied().unwrap_or(0);
            let since = now_ms - last;
            if since < cooldown {
                return Some(format!(
                    "cooldown: last ran {} ago, cooldown is {}",
                    fmt_duration(since),
                    fmt_duration(cooldown)
                ));
            }
        }
        None
    };
    if let Some(w) = options.window
        && let Some(opens_in) = window_opens_in(w, now_ms)
    {
        // Every operation the findings call for, those waiting on a property change included
        // (fuzzing found them left out of the plan without a word).
        let waiting: BTreeSet<Operation> = called_for
            .iter()
            .copied()
            .chain(needs_property.iter().map(|(op, ..)| *op))
            .collect();
        for op in waiting {
            skip(
                &mut plan,
                op,
                format!(
                    "outside the off-peak window {:02}:00-{:02}:00 UTC (opens in {})",
                    w.start_hour,
                    w.end_hour,
                    fmt_duration(opens_in)
                ),
            );
        }
        return Ok(plan);
    }

    let whole = scan
        .data_files
        .bytes
        .saturating_add(scan.delete_files.bytes())
        <= options.small_table_bytes;
    let mut taken: BTreeSet<(i32, String)> = BTreeSet::new();
    let target = scan.write.target_file_size_bytes;
    let default_spec = scan.partitioning.default_spec_id;
    let mut budget_left = options.table_budget_bytes.unwrap_or(u64::MAX);
    let mut deferred: Vec<(Operation, usize, u64)> = Vec::new();
    let mut unselectable: Vec<(Operation, usize)> = Vec::new();

    // Apply the byte budget to a partitioned step: keep chunks while they fit.
    let mut within_budget =
        |op: Operation, chunks: Vec<Chunk>, budget_left: &mut u64| -> Vec<Chunk> {
            let mut kept = Vec::new();
            let (mut n, mut b) = (0usize, 0u64);
            for mut c in chunks {
                if c.input_bytes <= *budget_left {
                    *budget_left -= c.input_bytes;
                    c.index = kept.len() as u32;
                    kept.push(c);
                } else {
                    n += c.partitions.len().max(1);
                    b = b.saturating_add(c.input_bytes);
                }
            }
            if n > 0 {
                deferred.push((op, n, b));
            }
            kept
        };

    // 1. Convert equality deletes: partitions carrying them (the whole table when they are global).
    let op = Operation::ConvertEqualityDeletes;
    if scan.delete_files.equality.files > 0 {
        if let Some(reason) = gate(op) {
            skip(&mut plan, op, reason);
        } else {
            let global = scan.partitions.iter().any(|p| {
                p.delete_files.equality.files > 0
                    && scan
                        .partitioning
                        .spec(p.spec_id)
                        .is_none_or(PartitionSpecInfo::is_unpartitioned)
            });
            let cands: Vec<Candidate<'_>> = scan
                .partitions
                .iter()
                // A whole-table run (a small table, or global deletes) is a rewrite-all of the
                // whole table: it counts, and takes, every partition, not only those with deletes
                // (the budgets saw a fraction of what it reads; found by the grade_plan invariant).
                .filter(|p| global || whole || p.delete_files.equality.files > 0)
                .filter(|p| p.data_files.count > 0 || p.delete_files.files() > 0)
                .map(|p| Candidate {
                    p,
                    files: p.data_files.count + p.delete_files.files(),
                    bytes: p.rewrite_bytes(),
                    score: (p.delete_files.equality.files as f64 * 4.0
                        + p.delete_files.equality.records as f64 / 1000.0)
                        / (p.rewrite_bytes() as f64 / GIB as f64).max(1.0 / 1024.0),
                })
                .collect();
            for c in &cands {
                taken.insert((c.p.spec_id, c.p.path.clone()));
            }
            let chunks = {
                let (chunks, dropped) = pack(scan, cands, options, whole || global);
                unselectable.push((op, dropped));
                within_budget(op, chunks, &mut budget_left)
            };
            if !chunks.is_empty() {
                let (method, why) = equality_delete_method(scan, options, &chunks, whole);
                plan.steps.push(PlannedStep {
                    operation: op,
                    params: StepParams::ConvertEqualityDeletes { method, why },
                    chunks,
                    because: because_or(report, op, "equality_deletes_present"),
                    saving_usd_month: saving(report, op),
                });
            }
        }
    }

    // Decide the data-file rewrite set before position deletes, so a partition whose data is
    // rewritten (which applies its deletes) is not also given a delete-file rewrite.
    let op_data = Operation::RewriteDataFiles;
    let sorts = !matches!(options.strategy, RewriteStrategy::BinPack);
    let data_cands: Vec<Candidate<'_>> = scan
        .partitions
        .iter()
        .filter(|p| !taken.contains(&(p.spec_id, p.path.clone())))
        .filter_map(|p| {
            let d = &p.data_files;
            let old_spec = p.spec_id != default_spec;
            let deleted_share = if d.records > 0 {
                p.delete_files.records() as f64 / d.records as f64
            } else {
                0.0
            };
            let apply_deletes = p.delete_files.files() > 0
                && (deleted_share >= options.deleted_row_ratio
                    || p.delete_files.files() >= d.count.max(1));
            let compact = d.small_count >= u64::from(options.min_input_files);
            if !(compact || apply_deletes || (old_spec && d.count > 0)) {
                return None;
            }
            // Bin-pack rewrites the small files (all files when deletes are applied or the spec
            // changed); sorting rewrites the partition.
            let (files, bytes) = if sorts || apply_deletes || old_spec {
                (
                    d.count + p.delete_files.files(),
                    d.bytes.saturating_add(p.delete_files.bytes()),
                )
            } else {
                (d.small_count, d.small_bytes)
            };
            let out = bytes.div_ceil(target.max(1)).max(1);
            let benefit = files.saturating_sub(out) as f64
                + 2.0 * p.delete_files.files() as f64
                + if old_spec { d.count as f64 } else { 0.0 };
            Some(Candidate {
                p,
                files,
                bytes,
                score: benefit / (bytes as f64 / GIB as f64).max(1.0 / 1024.0),
            })
        })
        .collect();
    let data_gate = gate(op_data);
    if data_gate.is_none() {
        for c in &data_cands {
            taken.insert((c.p.spec_id, c.p.path.clone()));
        }
    }

    // 2. Rewrite position deletes: combine per partition, drop dangling ones.
    let op = Operation::RewritePositionDeletes;
    let pos_cands: Vec<Candidate<'_>> = scan
        .partitions
        .iter()
        .filter(|p| !taken.contains(&(p.spec_id, p.path.clone())))
        .filter(|p| {
            let pd = &p.delete_files;
            let files = pd.position.files + pd.deletion_vectors.files;
            files >= u64::from(options.min_position_delete_files)
                || pd.position.dangling + pd.deletion_vectors.dangling > 0
        })
        .map(|p| {
            let pd = &p.delete_files;
            let files = pd.position.files + pd.deletion_vectors.files;
            let bytes = pd.position.bytes.saturating_add(pd.deletion_vectors.bytes);
            Candidate {
                p,
                files,
                bytes,
                score: (files.saturating_sub(1) + pd.position.dangling) as f64
                    / (bytes as f64 / GIB as f64).max(1.0 / 1024.0),
            }
        })
        .collect();
    // A whole-table data rewrite applies every delete (files with deletes are rewritten whatever
    // their size); a separate delete-file rewrite then only pays for dropping dangling ones.
    let whole_data_rewrite = data_gate.is_none() && !data_cands.is_empty() && whole;
    let pos_cands: Vec<Candidate<'_>> = if whole_data_rewrite {
        scan.partitions
            .iter()
            .filter(|p| {
                p.delete_files.position.dangling + p.delete_files.deletion_vectors.dangling > 0
            })
            .map(|p| Candidate {
                p,
                files: p.delete_files.position.files + p.delete_files.deletion_vectors.files,
                bytes: (p.delete_files.position.bytes)
                    .saturating_add(p.delete_files.deletion_vectors.bytes),
                score: 0.0,
            })
            .collect()
    } else {
        pos_cands
    };
    if scan.format_version >= 2 && !pos_cands.is_empty() {
        if let Some(reason) = gate(op) {
            skip(&mut plan, op, reason);
        } else {
            let chunks = {
                let (chunks, dropped) = pack(scan, pos_cands, options, whole);
                unselectable.push((op, dropped));
                within_budget(op, chunks, &mut budget_left)
            };
            if !chunks.is_empty() {
                plan.steps.push(PlannedStep {
                    operation: op,
                    params: StepParams::RewritePositionDeletes {
                        min_input_files: options.min_position_delete_files,
                    },
                    chunks,
                    because: because_or(report, op, "position_delete_thresholds"),
                    saving_usd_month: saving(report, op),
                });
            }
        }
    } else if called_for.contains(&op) {
        // A v1 table cannot hold delete files; one whose manifests list some anyway (fuzzing
        // found such metadata) gets no rewrite of them, and the plan says why.
        let reason = if scan.format_version < 2 {
            "format version 1 has no position deletes to rewrite: the manifests listing some contradict the table's format version"
        } else if plan.steps.iter().any(|s| {
            s.operation == Operation::ConvertEqualityDeletes
                && s.chunks.iter().any(|c| c.whole_table)
        }) {
            "the whole-table convert_equality_deletes applies every position delete"
        } else if whole_data_rewrite {
            "the whole-table rewrite_data_files applies every position delete"
        } else {
            "every partition with position deletes is covered by rewrite_data_files"
        };
        skip(&mut plan, op, reason.to_string());
    }

    // 3. Rewrite data files.
    if let Some(reason) = data_gate {
        // Called for by a finding, or by the partitions' thresholds alone: say why it waits.
        if called_for.contains(&op_data) || !data_cands.is_empty() {
            skip(&mut plan, op_data, reason);
        }
    } else if data_cands.is_empty() {
        if called_for.contains(&op_data) {
            let convert = plan
                .steps
                .iter()
                .find(|s| s.operation == Operation::ConvertEqualityDeletes);
            let reason = if convert.is_some_and(|s| s.chunks.iter().any(|c| c.whole_table)) {
                "convert_equality_deletes rewrites every data file of the table".to_string()
            } else if convert.is_some() {
                "the partitions with deletes are rewritten by convert_equality_deletes".to_string()
            } else {
                format!(
                    "no partition has {} or more small files, deletes to apply or files in an old spec",
                    options.min_input_files
                )
            };
            skip(&mut plan, op_data, reason);
        }
    } else {
        let chunks = {
            let (chunks, dropped) = pack(scan, data_cands, options, whole);
            unselectable.push((op_data, dropped));
            within_budget(op_data, chunks, &mut budget_left)
        };
        if !chunks.is_empty() {
            let mut reasons = because(report, op_data);
            if reasons.is_empty() {
                reasons.push("partition_thresholds".to_string());
            }
            plan.steps.push(PlannedStep {
                operation: op_data,
                params: StepParams::RewriteDataFiles {
                    strategy: options.strategy.clone(),
                    target_file_size_bytes: target,
                    // Never above the target (f64 rounding put it one past a target near
                    // i64::MAX, and the compactor refused the step; found by fuzzing).
                    min_file_size_bytes: scan.write.small_file_threshold_bytes.min(target),
                    // 1.8 × target, never below it (saturating before dividing did, for huge
                    // targets, and the compactor refused the step; found by fuzzing).
                    max_file_size_bytes: (target.saturating_mul(9) / 5).max(target),
                    min_input_files: options.min_input_files,
                    delete_file_threshold: options.delete_file_threshold,
                },
                chunks,
                because: reasons,
                saving_usd_month: saving(report, op_data),
            });
        }
    }

    // 4. Compute statistics.
    let op = Operation::ComputeStatistics;
    if called_for.contains(&op) {
        if let Some(reason) = gate(op) {
            skip(&mut plan, op, reason);
        } else {
            plan.steps.push(PlannedStep {
                operation: op,
                params: StepParams::ComputeStatistics {
                    columns: Vec::new(),
                },
                chunks: whole_table_chunk(scan.data_files.count, scan.data_files.bytes),
                because: because(report, op),
                saving_usd_month: 0.0,
            });
        }
    }

    // 5. Rewrite manifests: when the findings ask, or after a compaction (which leaves
    // manifests that list only the files it removed).
    let op = Operation::RewriteManifests;
    let compacted = plan.steps.iter().any(|s| {
        matches!(
            s.operation,
            Operation::RewriteDataFiles
                | Operation::ConvertEqualityDeletes
                | Operation::RewritePositionDeletes
        )
    });
    if called_for.contains(&op) || (compacted && scan.manifests.count > 1) {
        if let Some(reason) = gate(op) {
            skip(&mut plan, op, reason);
        } else {
            let mut reasons = because(report, op);
            if reasons.is_empty() {
                reasons.push("follows_compaction".to_string());
            }
            plan.steps.push(PlannedStep {
                operation: op,
                params: StepParams::RewriteManifests {
                    target_manifest_size_bytes: scan.write.manifest_target_size_bytes,
                },
                chunks: whole_table_chunk(scan.manifests.count, scan.manifests.total_bytes),
                because: reasons,
                saving_usd_month: saving(report, op),
            });
        }
    }

    // 6. Expire snapshots.
    let op = Operation::ExpireSnapshots;
    let retention = options
        .expire
        .retention_ms
        .unwrap_or(scan.write.max_snapshot_age_ms)
        .max(options.expire.min_retention_ms);
    let retain_last = options
        .expire
        .retain_last
        .unwrap_or(scan.write.min_snapshots_to_keep)
        .max(1);
    let older_than = now_ms - retention;
    let protected: BTreeSet<i64> = scan.snapshots.refs.iter().map(|r| r.snapshot_id).collect();
    let expirable = scan
        .snapshots
        .snapshots
        .iter()
        .rev()
        .skip(retain_last as usize)
        .filter(|s| s.timestamp_ms < older_than && !protected.contains(&s.snapshot_id))
        .count() as u64;
    if expirable > 0 || called_for.contains(&op) {
        if let Some(reason) = gate(op) {
            skip(&mut plan, op, reason);
        } else if expirable == 0 {
            skip(
                &mut plan,
                op,
                format!(
                    "no snapshot is older than the {} retention beyond the newest {retain_last}",
                    fmt_duration(retention)
                ),
            );
        } else {
            let mut reasons = because(report, op);
            if reasons.is_empty() {
                reasons.push("snapshots_past_retention".to_string());
            }
            plan.steps.push(PlannedStep {
                operation: op,
                params: StepParams::ExpireSnapshots {
                    older_than_ms: older_than,
                    retain_last,
                    retention_ms: retention,
                },
                chunks: whole_table_chunk(expirable, report.cost.retained_by_snapshots_bytes),
                because: reasons,
                saving_usd_month: saving(report, op),
            });
        }
    }

    // 7. Remove orphan files (opt-in: needs a listing of the table location).
    let op = Operation::RemoveOrphanFiles;
    if options.orphans.enabled {
        if let Some(reason) = gate(op) {
            skip(&mut plan, op, reason);
        } else {
            plan.steps.push(PlannedStep {
                operation: op,
                params: StepParams::RemoveOrphanFiles {
                    older_than_ms: now_ms - options.orphans.retention_ms,
                    retention_ms: options.orphans.retention_ms,
                    dry_run: options.orphans.dry_run,
                },
                chunks: whole_table_chunk(0, 0),
                because: vec!["orphans_enabled".to_string()],
                saving_usd_month: 0.0,
            });
        }
    }

    for (op, code, key, value) in needs_property {
        if !plan.steps.iter().any(|s| s.operation == op) {
            skip(
                &mut plan,
                op,
                format!("{code}: set {key}={value} on the table first, then {op} applies it"),
            );
        }
    }
    for (op, n) in unselectable.into_iter().filter(|(_, n)| *n > 0) {
        skip(
            &mut plan,
            op,
            format!(
                "{n} partitions cannot be selected by a predicate on their source columns (a partition source column was dropped)"
            ),
        );
    }
    for (op, n, bytes) in deferred {
        skip(
            &mut plan,
            op,
            format!(
                "budget: {n} partitions ({}) deferred to a later run",
                fmt_bytes(bytes)
            ),
        );
    }

    // Deadline: drop trailing steps that cannot finish in time (expiry and manifests are cheap
    // and run last; rewrites are estimated from bytes and throughput).
    if let Some(deadline) = control.deadline_ms {
        let mut t = now_ms;
        let mut kept = Vec::new();
        for step in std::mem::take(&mut plan.steps) {
            let secs = step.input_bytes() / options.throughput_bytes_per_sec.max(1);
            let cost_ms = i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX);
            if t.saturating_add(cost_ms) > deadline {
                plan.skipped.push(SkippedStep {
                    operation: step.operation,
                    reason: format!(
                        "deadline: needs ~{} of work, {} left",
                        fmt_duration(cost_ms),
                        fmt_duration(deadline - t)
                    ),
                });
            } else {
                t += cost_ms;
                kept.push(step);
            }
        }
        plan.steps = kept;
    }

    plan.steps.sort_by_key(|s| s.operation);
    plan.skipped.sort_by(|a, b| {
        a.operation
            .cmp(&b.operation)
            .then_with(|| a.reason.cmp(&b.reason))
    });
    Ok(plan)
}

/// Plan a fleet: worst tables first, under the fleet budget.
pub fn plan_fleet(
    catalog: &str,
    tables: &[(TableScan, HealthReport)],
    options: &PlanOptions,
    controls: &BTreeMap<TableId, TableControl>,
    now_ms: i64,
) -> Result<MaintenancePlan> {
    options.validate()?;
    plan_fleet_each(
        catalog,
        tables,
        |_| options,
        options.fleet_budget_bytes,
        controls,
        now_ms,
    )
}

/// [`plan_fleet`] with each table's own options (a policy's presets): worst tables first, the
/// fleet under `fleet_budget` and each table's own fleet budget, whichever is lower.
pub(crate) fn plan_fleet_each<'a>(
    catalog: &str,
    tables: &'a [(TableScan, HealthReport)],
    options_for: impl Fn(&'a TableScan) -> &'a PlanOptions,
    fleet_budget: Option<u64>,
    controls: &BTreeMap<TableId, TableControl>,
    now_ms: i64,
) -> Result<MaintenancePlan> {
    let mut order: Vec<&(TableScan, HealthReport)> = tables.iter().collect();
    order.sort_by(|a, b| {
        HealthReport::worst_first(&a.1, &b.1).then_with(|| a.0.table.cmp(&b.0.table))
    });
    let mut plan = MaintenancePlan {
        format_version: PLAN_FORMAT_VERSION,
        catalog: catalog.to_string(),
        created_at_ms: now_ms,
        tables: Vec::new(),
        skipped_tables: Vec::new(),
        policy: None,
        fingerprint: String::new(),
    };
    let mut fleet_left = fleet_budget.unwrap_or(u64::MAX);
    let default_control = TableControl::default();
    for (scan, report) in order {
        let control = controls.get(&scan.table).unwrap_or(&default_control);
        if control.paused {
            plan.skipped_tables.push(SkippedTable {
                table: scan.table.clone(),
                reason: format!(
                    "paused{}",
                    control
                        .pause_reason
                        .as_ref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                ),
            });
            continue;
        }
        let options = options_for(scan);
        let left = fleet_left.min(options.fleet_budget_bytes.unwrap_or(u64::MAX));
        let mut opts = options.clone();
        opts.table_budget_bytes = Some(options.table_budget_bytes.unwrap_or(u64::MAX).min(left));
        let tp = plan_table(scan, report, &opts, control, now_ms)?;
        let used: u64 = tp
            .steps
            .iter()
            .filter(|s| {
                matches!(
                    s.operation,
                    Operation::ConvertEqualityDeletes
                        | Operation::RewritePositionDeletes
                        | Operation::RewriteDataFiles
                )
            })
            .map(PlannedStep::input_bytes)
            .fold(0, u64::saturating_add);
        fleet_left = fleet_left.saturating_sub(used);
        if tp.steps.is_empty() && tp.skipped.is_empty() {
            plan.skipped_tables.push(SkippedTable {
                table: scan.table.clone(),
                reason: format!(
                    "healthy: grade {} ({}), nothing to do",
                    report.grade, report.score
                ),
            });
        } else {
            plan.tables.push(tp);
        }
    }
    plan.fingerprint = plan.compute_fingerprint()?;
    Ok(plan)
}

/// Grade every scan and plan the fleet in one call, at the time of the newest scan (so a plan
/// made from the same scans is the same plan, whenever it is made): what the Python and Node
/// packages' `plan` does.
pub fn plan_scans(
    catalog: &str,
    scans: &[TableScan],
    grading: &crate::grade::GradeOptions,
    options: &PlanOptions,
    controls: &BTreeMap<TableId, TableControl>,
) -> Result<MaintenancePlan> {
    let now_ms = crate::policy::newest_scan_ms(scans);
    let graded = scans
        .iter()
        .map(|scan| {
            Ok((
                scan.clone(),
                crate::grade::grade(scan, grading, scan.scanned_at_ms)?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    plan_fleet(catalog, &graded, options, controls, now_ms)
}

impl MaintenancePlan {
    /// SHA-256 (hex) over the canonical JSON of the plan with an empty fingerprint.
    pub fn compute_fingerprint(&self) -> Result<String> {
        let mut copy = self.clone();
        copy.fingerprint.clear();
        let json = serde_json::to_vec(&copy).map_err(|e| Error::compute("plan to JSON", e))?;
        Ok(Sha256::digest(&json)
            .iter()
            .fold(String::with_capacity(64), |mut hex, b| {
                let _ = write!(hex, "{b:02x}");
                hex
            }))
    }

    /// Serialize (pretty JSON).
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(self).map_err(|e| Error::compute("plan to JSON", e))
    }

    /// Parse a plan and check that it is the plan that was fingerprinted.
    pub fn from_json(json: &str) -> Result<Self> {
        let plan: MaintenancePlan = serde_json::from_str(json)
            .map_err(|e| Error::validation(format!("not a Cryo maintenance plan: {e}")))?;
        if plan.format_version != PLAN_FORMAT_VERSION {
            return Err(Error::unsupported(format!(
                "plan format version {} (this Cryo reads {PLAN_FORMAT_VERSION})",
                plan.format_version
            )));
        }
        plan.verify()?;
        Ok(plan)
    }

    /// Refuse a plan whose content no longer matches its fingerprint.
    pub fn verify(&self) -> Result<()> {
        let actual = self.compute_fingerprint()?;
        if actual != self.fingerprint {
            return Err(Error::validation(format!(
                "plan fingerprint mismatch: recorded {}, content hashes to {actual}; the plan was changed after review",
                self.fingerprint
            )));
        }
        Ok(())
    }

    /// Refuse to run a plan other than the reviewed one.
    pub fn verify_reviewed(&self, reviewed_fingerprint: &str) -> Result<()> {
        self.verify()?;
        if self.fingerprint != reviewed_fingerprint {
            return Err(Error::validation(format!(
                "plan {} is not the reviewed plan {reviewed_fingerprint}",
                self.fingerprint
            )));
        }
        Ok(())
    }
}
