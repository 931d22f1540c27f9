//! The checks. Each is a pure function of the scan; thresholds and the reasoning behind them
//! sit next to the code and are rendered to `docs/grading.md` by [`checks_markdown`].

use std::fmt::Write as _;

use super::{Finding, Remedy, Severity};
use crate::ops::Operation;
use crate::scan::TableScan;

const DAY_MS: f64 = 86_400_000.0;

pub(super) struct Ctx<'a> {
    pub(super) scan: &'a TableScan,
    /// Size factor for count limits.
    pub(super) sf: f64,
    pub(super) now_ms: i64,
}

/// A check: its stable code, what it measures, its thresholds with their reasoning, and the code.
pub struct CheckInfo {
    /// Stable code.
    pub code: &'static str,
    /// What it measures.
    pub title: &'static str,
    /// Thresholds and why.
    pub rationale: &'static str,
    /// What fixes it.
    pub remedy: &'static str,
    pub(super) run: fn(&Ctx<'_>) -> Option<Finding>,
}

impl std::fmt::Debug for CheckInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckInfo")
            .field("code", &self.code)
            .finish_non_exhaustive()
    }
}

fn op(operation: Operation) -> Remedy {
    Remedy::Operation { operation }
}

/// Tiered "higher is worse": crit at or above `crit`, warn at or above `warn`.
fn above(
    code: &str,
    measured: f64,
    warn: f64,
    crit: f64,
    unit: &str,
    reason: impl FnOnce(Severity) -> String,
    remedy: Remedy,
) -> Option<Finding> {
    let (severity, threshold) = if measured >= crit {
        (Severity::Crit, crit)
    } else if measured >= warn {
        (Severity::Warn, warn)
    } else {
        return None;
    };
    Some(Finding {
        code: code.to_string(),
        severity,
        points: severity.points(),
        measured: round(measured),
        threshold: round(threshold),
        unit: unit.to_string(),
        reason: reason(severity),
        remedy,
    })
}

/// Tiered "lower is worse".
fn below(
    code: &str,
    measured: f64,
    warn: f64,
    crit: f64,
    unit: &str,
    reason: impl FnOnce(Severity) -> String,
    remedy: Remedy,
) -> Option<Finding> {
    above(code, -measured, -warn, -crit, unit, reason, remedy).map(|mut f| {
        f.measured = -f.measured;
        f.threshold = -f.threshold;
        f
    })
}

fn round(v: f64) -> f64 {
    (v * 10_000.0).round() / 10_000.0
}

fn pct(v: f64) -> String {
    format!("{:.0}%", v * 100.0)
}

fn mib(bytes: u64) -> String {
    crate::report::bytes(bytes)
}

/// Files the live data would need if every file were the target size, with at least one per
/// partition that holds data.
pub(crate) fn ideal_files(scan: &TableScan) -> u64 {
    let by_size = scan
        .data_files
        .bytes
        .div_ceil(scan.write.target_file_size_bytes.max(1));
    let partitions = scan
        .partitions
        .iter()
        .filter(|p| p.data_files.count > 0)
        .count() as u64;
    by_size.max(partitions).max(1)
}

fn small_file_share(c: &Ctx<'_>) -> Option<Finding> {
    let d = &c.scan.data_files;
    // Only small files that a rewrite can merge count: two or more in one partition, or any
    // in an old spec. A lone small file per partition is a partitioning problem
    // (`over_partitioning`), not a compaction one.
    let default_spec = c.scan.partitioning.default_spec_id;
    let mergeable: u64 = c
        .scan
        .partitions
        .iter()
        .filter(|p| p.data_files.small_count >= 2 || p.spec_id != default_spec)
        .map(|p| p.data_files.small_count)
        .fold(0, u64::saturating_add);
    // Below 16 mergeable small files (scaled) the rewrite costs more than it saves.
    if (mergeable as f64) < 16.0 * c.sf || d.count == 0 {
        return None;
    }
    let share = mergeable as f64 / d.count as f64;
    above(
        "small_file_share",
        share,
        0.30,
        0.60,
        "ratio",
        |_| {
            format!(
                "{mergeable} of {} data files are below {} (small-file threshold) and share a partition with another; readers open a file per split",
                d.count,
                mib(c.scan.write.small_file_threshold_bytes)
            )
        },
        op(Operation::RewriteDataFiles),
    )
}

fn mean_file_size(c: &Ctx<'_>) -> Option<Finding> {
    let d = &c.scan.data_files;
    if d.count < 8 {
        return None;
    }
    let ideal = ideal_files(c.scan);
    let excess = d.count as f64 / ideal as f64;
    above(
        "mean_file_size",
        excess,
        4.0,
        16.0,
        "x ideal file count",
        |_| {
            format!(
                "mean data file is {} against a {} target: {} files where {} would do",
                mib(d.mean_bytes().unwrap_or(0)),
                mib(c.scan.write.target_file_size_bytes),
                d.count,
                ideal
            )
        },
        op(Operation::RewriteDataFiles),
    )
}

fn snapshot_count(c: &Ctx<'_>) -> Option<Finding> {
    let n = c.scan.snapshots.count as f64;
    above(
        "snapshot_count",
        n,
        100.0 * c.sf,
        500.0 * c.sf,
        "snapshots",
        |_| {
            format!(
                "{n} snapshots in the metadata; every commit rewrites and every planner parses them"
            )
        },
        op(Operation::ExpireSnapshots),
    )
}

fn snapshot_age(c: &Ctx<'_>) -> Option<Finding> {
    let s = &c.scan.snapshots;
    let keep = c.scan.write.min_snapshots_to_keep as usize;
    if s.count <= keep.max(1) {
        return None;
    }
    // The oldest snapshot that no branch or tag points at: refs keep theirs on purpose.
    let referenced: std::collections::HashSet<i64> = s.refs.iter().map(|r| r.snapshot_id).collect();
    let oldest = s
        .snapshots
        .iter()
        .filter(|x| !referenced.contains(&x.snapshot_id))
        .map(|x| x.timestamp_ms)
        .min()?;
    let retention_days = c.scan.write.max_snapshot_age_ms as f64 / DAY_MS;
    let age_days = (c.now_ms - oldest) as f64 / DAY_MS;
    above(
        "snapshot_age",
        age_days,
        retention_days * 2.0,
        retention_days * 6.0,
        "days",
        |_| {
            format!(
                "oldest unreferenced snapshot is {age_days:.1} days old, retention is {retention_days:.1} days: expiry is not running"
            )
        },
        op(Operation::ExpireSnapshots),
    )
}

fn manifests_per_snapshot(c: &Ctx<'_>) -> Option<Finding> {
    let m = &c.scan.manifests;
    let ideal = (m
        .total_bytes
        .div_ceil(c.scan.write.manifest_target_size_bytes.max(1)))
    .max(1);
    let count = m.count as f64;
    let warn = (16.0 * c.sf).max(4.0 * ideal as f64);
    let crit = (100.0 * c.sf).max(20.0 * ideal as f64);
    above(
        "manifests_per_snapshot",
        count,
        warn,
        crit,
        "manifests",
        |_| {
            format!(
                "the current snapshot lists {} manifests; planning opens each one",
                m.count
            )
        },
        op(Operation::RewriteManifests),
    )
}

fn small_manifests(c: &Ctx<'_>) -> Option<Finding> {
    let m = &c.scan.manifests;
    if (m.count as f64) < 8.0 * c.sf {
        return None;
    }
    let share = m.small_count as f64 / m.count as f64;
    above(
        "small_manifests",
        share,
        0.50,
        0.80,
        "ratio",
        |_| {
            format!(
                "{} of {} manifests are under 1/8 of the {} manifest target",
                m.small_count,
                m.count,
                mib(c.scan.write.manifest_target_size_bytes)
            )
        },
        op(Operation::RewriteManifests),
    )
}

fn deleted_only_manifests(c: &Ctx<'_>) -> Option<Finding> {
    let m = &c.scan.manifests;
    above(
        "deleted_only_manifests",
        m.no_live_entries as f64,
        4.0,
        64.0,
        "manifests",
        |_| {
            format!(
                "{} manifests carry only DELETED entries ({} in all); planners still open them",
                m.no_live_entries, m.deleted_entries
            )
        },
        op(Operation::RewriteManifests),
    )
}

fn position_delete_files(c: &Ctx<'_>) -> Option<Finding> {
    let d = &c.scan.delete_files;
    let files = (d.position.files + d.deletion_vectors.files) as f64;
    if files < 4.0 {
        return None;
    }
    let data = c.scan.data_files.count.max(1) as f64;
    above(
        "position_delete_files",
        files / data,
        0.10,
        0.50,
        "per data file",
        |_| format!("{files} position-delete files over {data} data files; every read merges them"),
        op(Operation::RewritePositionDeletes),
    )
}

fn equality_delete_files(c: &Ctx<'_>) -> Option<Finding> {
    let n = c.scan.delete_files.equality.files as f64;
    // Any equality delete forces readers to join; many force a join per split.
    above(
        "equality_delete_files",
        n,
        1.0,
        16.0 * c.sf,
        "files",
        |_| {
            format!(
                "{n} equality-delete files ({} rows): every scan joins them against the data",
                c.scan.delete_files.equality.records
            )
        },
        op(Operation::ConvertEqualityDeletes),
    )
}

fn deleted_row_ratio(c: &Ctx<'_>) -> Option<Finding> {
    let rows = c.scan.data_files.records;
    let deleted = c.scan.delete_files.records();
    if rows == 0 || deleted == 0 {
        return None;
    }
    let ratio = deleted as f64 / rows as f64;
    above(
        "deleted_row_ratio",
        ratio,
        0.05,
        0.20,
        "ratio",
        |_| {
            format!(
                "{deleted} deleted rows recorded against {rows} stored rows ({}): storage and reads for dead rows",
                pct(ratio)
            )
        },
        op(Operation::RewriteDataFiles),
    )
}

fn dangling_deletes(c: &Ctx<'_>) -> Option<Finding> {
    let d = &c.scan.delete_files;
    let dangling = (d.position.dangling + d.equality.dangling + d.deletion_vectors.dangling) as f64;
    above(
        "dangling_deletes",
        dangling,
        1.0,
        (16.0 * c.sf).max(d.files() as f64 * 0.5).max(2.0),
        "files",
        |_| {
            format!(
                "{dangling} delete files no longer apply to any live data file but are still read"
            )
        },
        op(Operation::RewritePositionDeletes),
    )
}

fn partition_skew(c: &Ctx<'_>) -> Option<Finding> {
    let mut sizes: Vec<u64> = c
        .scan
        .partitions
        .iter()
        .filter(|p| p.spec_id == c.scan.partitioning.default_spec_id && p.data_files.bytes > 0)
        .map(|p| p.data_files.bytes)
        .collect();
    if sizes.len() < 8 {
        return None;
    }
    sizes.sort_unstable();
    let median = sizes[sizes.len() / 2].max(1);
    let max = *sizes.last()?;
    // Skew only hurts once the big partition is more than a file: it serializes compaction
    // and makes one task of every scan.
    if max < c.scan.write.target_file_size_bytes {
        return None;
    }
    let ratio = max as f64 / median as f64;
    above(
        "partition_skew",
        ratio,
        10.0,
        100.0,
        "x median",
        |_| {
            format!(
                "largest partition holds {} against a median of {}",
                mib(max),
                mib(median)
            )
        },
        Remedy::Repartition {
            suggestion: "add a bucket or finer time transform on the hot key".to_string(),
        },
    )
}

fn over_partitioning(c: &Ctx<'_>) -> Option<Finding> {
    let spec = c.scan.partitioning.default_spec_id;
    let mut sizes: Vec<u64> = c
        .scan
        .partitions
        .iter()
        .filter(|p| p.spec_id == spec && p.data_files.bytes > 0)
        .map(|p| p.data_files.bytes)
        .collect();
    if (sizes.len() as f64) < 32.0 * c.sf {
        return None;
    }
    sizes.sort_unstable();
    let median = sizes[sizes.len() / 2];
    let target = c.scan.write.target_file_size_bytes as f64;
    // How many partitions it takes to fill one target-sized file: a partition should hold at
    // least a file's worth of data, or the layout itself mandates small files.
    let per_file = target / median.max(1) as f64;
    above(
        "over_partitioning",
        per_file,
        16.0,
        128.0,
        "partitions per target file",
        |_| {
            format!(
                "{} partitions with a median of {}: no compaction can reach the {} target",
                sizes.len(),
                mib(median),
                mib(c.scan.write.target_file_size_bytes)
            )
        },
        Remedy::Repartition {
            suggestion:
                "use a coarser transform (e.g. day → month, drop a high-cardinality identity field)"
                    .to_string(),
        },
    )
}

fn files_in_old_specs(c: &Ctx<'_>) -> Option<Finding> {
    let spec = c.scan.partitioning.default_spec_id;
    let total = c.scan.data_files.bytes;
    let old: u64 = c
        .scan
        .partitions
        .iter()
        .filter(|p| p.spec_id != spec)
        .map(|p| p.data_files.bytes)
        .fold(0, u64::saturating_add);
    if total == 0 || old == 0 {
        return None;
    }
    let share = old as f64 / total as f64;
    above(
        "files_in_old_specs",
        share,
        0.10,
        0.50,
        "ratio",
        |_| {
            format!(
                "{} of the data ({}) is still laid out by an older partition spec",
                pct(share),
                mib(old)
            )
        },
        op(Operation::RewriteDataFiles),
    )
}

fn metadata_history(c: &Ctx<'_>) -> Option<Finding> {
    let m = &c.scan.metadata_files;
    let w = &c.scan.write;
    let n = m.previous_versions as f64;
    let remedy = if w.metadata_delete_after_commit {
        op(Operation::ExpireSnapshots)
    } else {
        Remedy::TableProperty {
            key: "write.metadata.delete-after-commit.enabled".to_string(),
            value: "true".to_string(),
            then: Some(Operation::ExpireSnapshots),
        }
    };
    above(
        "metadata_history",
        n,
        50.0 * c.sf,
        500.0 * c.sf,
        "metadata files",
        |_| {
            format!(
                "{n} previous metadata.json versions listed{}",
                if w.metadata_delete_after_commit {
                    ""
                } else {
                    " and old ones are never deleted (delete-after-commit is off)"
                }
            )
        },
        remedy,
    )
}

fn column_bounds(c: &Ctx<'_>) -> Option<Finding> {
    let s = &c.scan.column_stats;
    if s.files == 0 || s.leaf_columns == 0 {
        return None;
    }
    let file_cov = s.files_with_bounds as f64 / s.files as f64;
    let col_cov = s.columns_with_bounds as f64 / s.leaf_columns as f64;
    let coverage = file_cov.min(col_cov);
    below(
        "column_bounds",
        coverage,
        0.5,
        0.1,
        "coverage",
        |_| {
            format!(
                "min/max bounds cover {} of data files and {} of columns: predicates cannot prune files",
                pct(file_cov),
                pct(col_cov)
            )
        },
        Remedy::TableProperty {
            key: "write.metadata.metrics.default".to_string(),
            value: "truncate(16)".to_string(),
            then: Some(Operation::RewriteDataFiles),
        },
    )
}

fn table_statistics(c: &Ctx<'_>) -> Option<Finding> {
    // Cost-based optimizers need NDV statistics only once joins get big; below 1 GiB it does
    // not pay to compute them.
    if c.scan.data_files.bytes < (1u64 << 30) || c.scan.metadata_files.statistics_files > 0 {
        return None;
    }
    Some(Finding {
        code: "table_statistics".to_string(),
        severity: Severity::Warn,
        points: Severity::Warn.points(),
        measured: 0.0,
        threshold: 1.0,
        unit: "statistics files".to_string(),
        reason: format!(
            "no table statistics for {} of data: join planning runs blind",
            mib(c.scan.data_files.bytes)
        ),
        remedy: op(Operation::ComputeStatistics),
    })
}

fn format_version(c: &Ctx<'_>) -> Option<Finding> {
    (c.scan.format_version < 2).then(|| Finding {
        code: "format_version".to_string(),
        severity: Severity::Warn,
        points: Severity::Warn.points(),
        measured: f64::from(c.scan.format_version),
        threshold: 2.0,
        unit: "format version".to_string(),
        reason: "format v1: no row-level deletes, no sequence numbers, weaker concurrent commits"
            .to_string(),
        remedy: Remedy::TableProperty {
            key: "format-version".to_string(),
            value: "2".to_string(),
            then: None,
        },
    })
}

fn compression_codec(c: &Ctx<'_>) -> Option<Finding> {
    let codec = c.scan.write.parquet_codec.as_deref()?.to_ascii_lowercase();
    let bad = matches!(codec.as_str(), "uncompressed" | "none");
    (bad && c.scan.write.file_format.eq_ignore_ascii_case("parquet")).then(|| Finding {
        code: "compression_codec".to_string(),
        severity: Severity::Warn,
        points: Severity::Warn.points(),
        measured: 0.0,
        threshold: 1.0,
        unit: "compressed".to_string(),
        reason: format!(
            "write.parquet.compression-codec={codec}: files are 3-5x larger than with zstd"
        ),
        remedy: Remedy::TableProperty {
            key: "write.parquet.compression-codec".to_string(),
            value: "zstd".to_string(),
            then: Some(Operation::RewriteDataFiles),
        },
    })
}

/// Every check, in report order.
pub static CHECKS: &[CheckInfo] = &[
    CheckInfo {
        code: "small_file_share",
        title: "Share of data files below the small-file threshold (75% of write.target-file-size-bytes) that a rewrite can merge (two or more in a partition, or in an old spec)",
        rationale: "WARN at 30%, CRIT at 60% of files, once there are at least 16 mergeable small files (times the size factor). Every file is at least one request and one task for every reader; below 16 the rewrite costs more than it saves. A lone small file per partition is the layout's fault and is graded by over_partitioning.",
        remedy: "rewrite_data_files",
        run: small_file_share,
    },
    CheckInfo {
        code: "mean_file_size",
        title: "Data files against the ideal count (bytes / target, at least one per partition)",
        rationale: "WARN at 4x, CRIT at 16x the ideal count, from 8 files up. Measuring against the achievable count, not the raw target, keeps small tables that cannot fill a target-sized file from being punished.",
        remedy: "rewrite_data_files",
        run: mean_file_size,
    },
    CheckInfo {
        code: "snapshot_count",
        title: "Snapshots in the metadata",
        rationale: "WARN above 100, CRIT above 500 (times the size factor). Each snapshot lives in every metadata.json the table writes; thousands make every commit and every planner slow.",
        remedy: "expire_snapshots",
        run: snapshot_count,
    },
    CheckInfo {
        code: "snapshot_age",
        title: "Age of the oldest snapshot no branch or tag points at, against history.expire.max-snapshot-age-ms",
        rationale: "WARN beyond 2x, CRIT beyond 6x the table's own retention (5 days by default). Old snapshots pin deleted files in storage; being far past retention means expiry is not running.",
        remedy: "expire_snapshots",
        run: snapshot_age,
    },
    CheckInfo {
        code: "manifests_per_snapshot",
        title: "Manifests in the current snapshot",
        rationale: "WARN above max(16 x size factor, 4x the ideal count), CRIT above max(100 x size factor, 20x). Planning opens every manifest whose partition summary matches; the ideal count is total manifest bytes / commit.manifest.target-size-bytes.",
        remedy: "rewrite_manifests",
        run: manifests_per_snapshot,
    },
    CheckInfo {
        code: "small_manifests",
        title: "Share of manifests under 1/8 of commit.manifest.target-size-bytes",
        rationale: "WARN at 50%, CRIT at 80%, from 8 manifests (times the size factor). Streaming appends add one tiny manifest per commit.",
        remedy: "rewrite_manifests",
        run: small_manifests,
    },
    CheckInfo {
        code: "deleted_only_manifests",
        title: "Manifests with no live entry (only DELETED entries)",
        rationale: "WARN at 4, CRIT at 64. A compaction leaves manifests listing only the files it removed; planners still open them (measured: ~3x slower partition-filtered planning on a 4032-file table).",
        remedy: "rewrite_manifests",
        run: deleted_only_manifests,
    },
    CheckInfo {
        code: "position_delete_files",
        title: "Position-delete files and deletion vectors per data file",
        rationale: "WARN at 0.1, CRIT at 0.5 per data file, from 4 files. Merge-on-read writes one per commit and partition; readers merge each into their scan.",
        remedy: "rewrite_position_deletes",
        run: position_delete_files,
    },
    CheckInfo {
        code: "equality_delete_files",
        title: "Equality-delete files",
        rationale: "WARN at 1, CRIT at 16 (times the size factor). Equality deletes make every reader join; many engines (PyIceberg among them) cannot read them at all.",
        remedy: "convert_equality_deletes",
        run: equality_delete_files,
    },
    CheckInfo {
        code: "deleted_row_ratio",
        title: "Deleted rows recorded in delete files against rows stored in data files",
        rationale: "WARN at 5%, CRIT at 20%. Past a few percent the table pays storage and read time for dead rows; a rewrite applies the deletes.",
        remedy: "rewrite_data_files",
        run: deleted_row_ratio,
    },
    CheckInfo {
        code: "dangling_deletes",
        title: "Delete files that can no longer apply (older than every live data file of their partition, or pointing at a removed file)",
        rationale: "WARN at 1, CRIT at max(2, 16 x size factor, half the delete files). Spark's compaction leaves them behind; readers still open them.",
        remedy: "rewrite_position_deletes",
        run: dangling_deletes,
    },
    CheckInfo {
        code: "partition_skew",
        title: "Largest partition against the median partition (current spec)",
        rationale: "WARN at 10x, CRIT at 100x, from 8 partitions and once the largest exceeds one target file. A hot partition serializes compaction and makes one straggler task of every scan.",
        remedy: "repartition",
        run: partition_skew,
    },
    CheckInfo {
        code: "over_partitioning",
        title: "Partitions it takes to fill one target-sized file (target / median partition size)",
        rationale: "WARN at 16, CRIT at 128, from 32 partitions (times the size factor). When a partition cannot hold a file's worth of data, the layout itself mandates small files.",
        remedy: "repartition",
        run: over_partitioning,
    },
    CheckInfo {
        code: "files_in_old_specs",
        title: "Share of data bytes written under an older partition spec",
        rationale: "WARN at 10%, CRIT at 50%. After partition evolution old files keep the old layout; filters on the new partition fields cannot prune them.",
        remedy: "rewrite_data_files",
        run: files_in_old_specs,
    },
    CheckInfo {
        code: "metadata_history",
        title: "Previous metadata.json versions listed in metadata-log",
        rationale: "WARN at 50, CRIT at 500 (times the size factor). With write.metadata.delete-after-commit.enabled off (the default) old metadata files are never deleted.",
        remedy: "write.metadata.delete-after-commit.enabled=true, then expire_snapshots",
        run: metadata_history,
    },
    CheckInfo {
        code: "column_bounds",
        title: "Column statistics coverage: data files with min/max bounds, and leaf columns bounded in all of them",
        rationale: "WARN below 50%, CRIT below 10% (the lower of the two ratios). Without bounds, predicates cannot skip files (write.metadata.metrics.default=none, or writers that skip metrics).",
        remedy: "write.metadata.metrics.default=truncate(16), then rewrite_data_files",
        run: column_bounds,
    },
    CheckInfo {
        code: "table_statistics",
        title: "Table statistics (Puffin NDV sketches) on tables of 1 GiB and more",
        rationale: "WARN when absent. Trino's and Spark's cost-based optimizers order joins by them; below 1 GiB computing them does not pay.",
        remedy: "compute_statistics",
        run: table_statistics,
    },
    CheckInfo {
        code: "format_version",
        title: "Iceberg format version",
        rationale: "WARN on v1: no row-level deletes, no sequence numbers, so merge-on-read and safe concurrent maintenance are unavailable.",
        remedy: "format-version=2",
        run: format_version,
    },
    CheckInfo {
        code: "compression_codec",
        title: "Parquet compression codec",
        rationale: "WARN when write.parquet.compression-codec is uncompressed/none: 3-5x the storage and I/O of zstd. Unset is fine (Iceberg >= 1.4 and PyIceberg default to zstd).",
        remedy: "write.parquet.compression-codec=zstd, then rewrite_data_files",
        run: compression_codec,
    },
];

/// The checks as a Markdown table (the source of `docs/grading.md`).
pub fn checks_markdown() -> String {
    let mut out =
        String::from("| code | measures | thresholds and why | fix |\n|---|---|---|---|\n");
    for c in CHECKS {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} |",
            c.code, c.title, c.rationale, c.remedy
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_enough() {
        let mut codes: Vec<_> = CHECKS.iter().map(|c| c.code).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), CHECKS.len());
        assert!(CHECKS.len() >= 14);
    }
}
