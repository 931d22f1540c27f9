//! Rewriting position deletes: small position-delete files combined per partition, rows that
//! point at data files no longer live dropped, and dangling delete files (that can apply to no
//! live data file) removed — committed as a `replace` snapshot (Java's
//! `RewritePositionDeleteFiles`, Spark's `rewrite_position_delete_files`).
//!
//! ```text
//! load S0 ─▶ live files ─▶ per partition of the position-delete files (Parquet only):
//!              dangling by metadata (referenced file / file_path bounds / partition), or a lone
//!              small file whose rows name no live data file it applies to (read) ─▶ remove
//!              small (< ¾ of write.delete.target-file-size-bytes), ≥ min_input_files ─▶ combine
//!           ─▶ PositionDeletePlan (the dry run's answer)
//!           ─▶ read the rows that still apply (live data file, same partition, not newer than
//!              the delete) ─▶ write_position_deletes (sorted by file_path, pos)
//!   ┌───────▼──────────────────────────────────────────────────────────────┐
//!   │ on a newer head: every replaced delete file and every data file the  │─ no ─▶ that group
//!   │ new rows name still live?                                            │  is conflicted,
//!   └───────┬──────────────────────────────────────────────────────────────┘  its files deleted
//!           ▼ yes
//!   SnapshotProducer::replace(head): remove the old delete files, add the new ones with the
//!   highest data sequence number of the files they replace ─▶ commit (retry: back off, reload)
//! ```
//!
//! A position delete applies to a data file of its partition (any partition, when its spec is
//! unpartitioned) whose data sequence number is not above its own. The combined file takes the
//! highest data sequence number of the files it replaces (Java's
//! `maxRewrittenDataSequenceNumber`), and keeps only the rows that applied before — so it
//! applies to exactly the rows the old files deleted, and to no data file written later.
//!
//! Deletion vectors (v3 Puffin blobs) and equality deletes are left alone. Combining needs a
//! format v2 table and the default partition spec (the writer's); dangling files of any spec
//! (and Parquet position deletes left in a v3 table) are removed all the same.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use iceberg::spec::{DataContentType, DataFile, DataFileFormat, FormatVersion, PrimitiveLiteral};
use serde::{Deserialize, Serialize};

use crate::catalog::{Catalog, LoadedTable, TableId};
use crate::clock::{Clock, SystemClock};
use crate::commit::driver::{Attempt, AttemptContext, CommitDriver, CommitOp, Driven};
use crate::commit::{
    CatalogCommitter, CommitFence, LiveFile, POS_DELETE_FILE_PATH_FIELD_ID, RetryPolicy,
    SnapshotProducer, live_files, write_position_deletes,
};
use crate::compact::{
    DeleteKind, GroupDeleteFile, PartitionPaths, PartitionRef, read_position_file, recently_changed,
};
use crate::error::{Error, Result};
use crate::receipt::Footprint;

/// Java's table property for the size of delete files.
const DELETE_TARGET_SIZE_PROPERTY: &str = "write.delete.target-file-size-bytes";
/// Java's default (64 MiB).
const DEFAULT_DELETE_TARGET_SIZE: u64 = 64 << 20;

/// What to rewrite and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RewritePositionDeletesOptions {
    /// Plan only: report the delete files that would be combined or removed; change nothing.
    /// Off by default: the rewrite changes no row and deletes no file (the replaced delete files
    /// stay with the older snapshots until they expire).
    pub dry_run: bool,
    /// Delete files smaller than this are combined; `None`: three quarters of the table's
    /// `write.delete.target-file-size-bytes` (64 MiB when unset), which is also the size at
    /// which the writer starts a new file.
    pub small_file_size_bytes: Option<u64>,
    /// A partition's small delete files are combined only when there are at least this many.
    pub min_input_files: usize,
    /// Remove dangling delete files (that can apply to no live data file).
    pub remove_dangling: bool,
    /// Partitions to rewrite; `None`: every partition.
    pub partitions: Option<BTreeSet<PartitionRef>>,
    /// Commit retries; `None`: the table's `commit.retry.*` properties, else Java's defaults.
    pub retry: Option<RetryPolicy>,
    /// Leave alone every partition that a commit changed less than this many milliseconds ago
    /// (as [`crate::compact::CompactOptions::quiet_period_ms`]); `None`: rewrite hot ones too.
    ///
    /// Iceberg's Spark writers (1.8 on) keep one file-scoped position delete file per data file:
    /// a merge-on-read `MERGE`/`DELETE`/`UPDATE` replaces the delete file of every data file it
    /// touches. One that read a delete file this rewrite combines, and commits after it, fails
    /// ("Missing required files to delete"); a quiet period keeps the rewrite off the
    /// partitions those writers are working in.
    pub quiet_period_ms: Option<u64>,
    /// Take this commit fence around the commit, so that no cooperating writer's operation
    /// overlaps it (see [`CommitFence`]); `None`: commit without it.
    pub commit_fence: Option<CommitFence>,
}

impl Default for RewritePositionDeletesOptions {
    fn default() -> Self {
        Self {
            dry_run: false,
            small_file_size_bytes: None,
            min_input_files: 2,
            remove_dangling: true,
            partitions: None,
            retry: None,
            quiet_period_ms: None,
            commit_fence: None,
        }
    }
}

impl RewritePositionDeletesOptions {
    /// Reject options that cannot work.
    pub fn validate(&self) -> Result<()> {
        if self.min_input_files < 2 {
            return Err(Error::validation(format!(
                "min_input_files must be at least 2 (combining one file into one gains nothing), got {}",
                self.min_input_files
            )));
        }
        if self.small_file_size_bytes == Some(0) {
            return Err(Error::validation("small_file_size_bytes must be positive"));
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

/// One position-delete file the rewrite replaces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PlannedDeleteFile {
    /// Location.
    pub path: String,
    /// Bytes.
    pub size_bytes: u64,
    /// Positions it holds.
    pub records: u64,
    /// Its data sequence number.
    pub data_sequence_number: i64,
}

/// The rewrite of one partition's position deletes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PositionDeleteGroup {
    /// Partition (of the delete files' spec).
    pub partition: PartitionRef,
    /// Small files combined into new ones.
    pub combined: Vec<PlannedDeleteFile>,
    /// Dangling files removed without replacement.
    pub dangling: Vec<PlannedDeleteFile>,
    /// Data sequence number of the new files: the highest among `combined`.
    pub data_sequence_number: Option<i64>,
    /// New files expected (0 when nothing is combined).
    pub expected_files: u64,
}

impl PositionDeleteGroup {
    fn replaced(&self) -> impl Iterator<Item = &PlannedDeleteFile> {
        self.combined.iter().chain(&self.dangling)
    }
}

/// A partition with position deletes left alone, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SkippedDeletes {
    /// Partition.
    pub partition: PartitionRef,
    /// Small delete files in it.
    pub files: u64,
    /// Why they are not combined.
    pub reason: String,
}

/// What a position-delete rewrite will do, from the base snapshot's metadata: the answer of a
/// dry run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PositionDeletePlan {
    /// Table.
    pub table: TableId,
    /// Snapshot planned from.
    pub base_snapshot_id: Option<i64>,
    /// Size at which the writer starts a new delete file.
    pub target_file_size_bytes: u64,
    /// Files under this size count as small.
    pub small_file_size_bytes: u64,
    /// Position-delete files (Parquet; deletion vectors aside) of the base snapshot.
    pub position_delete_files: u64,
    /// Their bytes.
    pub position_delete_bytes: u64,
    /// Partitions with work.
    pub groups: Vec<PositionDeleteGroup>,
    /// Partitions with small files left alone.
    pub skipped: Vec<SkippedDeletes>,
}

impl PositionDeletePlan {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Delete files combined.
    pub fn files_combined(&self) -> usize {
        self.groups.iter().map(|g| g.combined.len()).sum()
    }

    /// Dangling delete files removed.
    pub fn files_dangling(&self) -> usize {
        self.groups.iter().map(|g| g.dangling.len()).sum()
    }
}

/// What happened to one partition's group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum DeleteGroupStatus {
    /// Committed in this snapshot.
    Committed {
        /// The snapshot.
        snapshot_id: i64,
    },
    /// A concurrent commit removed a delete file it replaces or a data file its rows name.
    Conflicted {
        /// What changed.
        reason: String,
        /// Whether the group's new files were deleted (false when an earlier attempt's commit
        /// had an unknown outcome: they may be live, and orphan removal finds them if not).
        files_deleted: bool,
    },
    /// Reading, writing or committing failed.
    Failed {
        /// Error code ([`Error::code`]).
        code: String,
        /// What happened.
        message: String,
        /// Whether the group's new files were deleted (false when the commit's fate is unknown).
        files_deleted: bool,
    },
    /// Dry run: this is what would be done.
    DryRun,
}

/// One group's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DeleteGroupOutcome {
    /// Partition.
    pub partition: PartitionRef,
    /// Status.
    pub status: DeleteGroupStatus,
    /// Delete files combined (planned, in a dry run).
    pub files_combined: u64,
    /// Dangling delete files removed.
    pub files_dangling: u64,
    /// Bytes of the files replaced.
    pub bytes_removed: u64,
    /// New delete files (expected, in a dry run).
    pub files_added: u64,
    /// Their bytes (0 in a dry run).
    pub bytes_added: u64,
    /// Positions held by the replaced files.
    pub rows_in: u64,
    /// Positions written (the rest named data files no longer live, applied to none, or were
    /// duplicates).
    pub rows_out: u64,
    /// Data sequence number of the new files.
    pub data_sequence_number: Option<i64>,
    /// Failed commit attempts before the outcome.
    pub retries: u32,
}

/// The outcome of rewriting one table's position deletes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RewritePositionDeletesOutcome {
    /// Table.
    pub table: TableId,
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// Snapshot planned from.
    pub base_snapshot_id: Option<i64>,
    /// The plan (the dry run's answer).
    pub plan: PositionDeletePlan,
    /// Per partition.
    pub groups: Vec<DeleteGroupOutcome>,
    /// Snapshots committed (at most one).
    pub snapshot_ids: Vec<i64>,
    /// Wall time.
    pub duration_ms: u64,
}

impl RewritePositionDeletesOutcome {
    fn counted(&self) -> impl Iterator<Item = &DeleteGroupOutcome> {
        self.groups.iter().filter(move |g| match g.status {
            DeleteGroupStatus::Committed { .. } => true,
            DeleteGroupStatus::DryRun => self.dry_run,
            _ => false,
        })
    }

    /// Groups committed.
    pub fn committed_groups(&self) -> usize {
        self.groups
            .iter()
            .filter(|g| matches!(g.status, DeleteGroupStatus::Committed { .. }))
            .count()
    }

    /// Groups aborted by validation.
    pub fn conflicted_groups(&self) -> usize {
        self.groups
            .iter()
            .filter(|g| matches!(g.status, DeleteGroupStatus::Conflicted { .. }))
            .count()
    }

    /// Groups that failed.
    pub fn failed_groups(&self) -> usize {
        self.groups
            .iter()
            .filter(|g| matches!(g.status, DeleteGroupStatus::Failed { .. }))
            .count()
    }

    /// Delete files combined by committed groups (planned, in a dry run).
    pub fn files_combined(&self) -> u64 {
        self.counted().map(|g| g.files_combined).sum()
    }

    /// Dangling delete files removed.
    pub fn files_dangling(&self) -> u64 {
        self.counted().map(|g| g.files_dangling).sum()
    }

    /// New delete files.
    pub fn files_added(&self) -> u64 {
        self.counted().map(|g| g.files_added).sum()
    }

    /// Positions dropped (rows of data files no longer live, or that applied to nothing).
    pub fn rows_dropped(&self) -> u64 {
        self.counted()
            .map(|g| g.rows_in.saturating_sub(g.rows_out))
            .sum()
    }

    /// The table's position-delete files before.
    pub fn before(&self) -> Footprint {
        Footprint {
            files: self.plan.position_delete_files,
            bytes: self.plan.position_delete_bytes,
        }
    }

    /// The table's position-delete files after (expected, in a dry run: new files' bytes
    /// unknown).
    pub fn after(&self) -> Footprint {
        let removed: u64 = self
            .counted()
            .map(|g| g.files_combined + g.files_dangling)
            .sum();
        let removed_bytes: u64 = self.counted().map(|g| g.bytes_removed).sum();
        let added_bytes: u64 = self.counted().map(|g| g.bytes_added).sum();
        Footprint {
            files: self.plan.position_delete_files.saturating_sub(removed) + self.files_added(),
            bytes: self
                .plan
                .position_delete_bytes
                .saturating_sub(removed_bytes)
                + added_bytes,
        }
    }
}

/// A live data file, as position deletes match it.
struct DataRef {
    path: String,
    seq: i64,
}

/// Live data files by (spec id, partition path), sorted by path; and every one of them.
struct LiveData {
    by_partition: HashMap<(i32, String), Vec<DataRef>>,
    all: Vec<DataRef>,
    /// Path → (spec id, partition path).
    partition_of: HashMap<String, (i32, String)>,
}

impl LiveData {
    fn new(files: &[LiveFile], paths: &PartitionPaths) -> Self {
        let mut by_partition: HashMap<(i32, String), Vec<DataRef>> = HashMap::new();
        let mut all = Vec::new();
        let mut partition_of = HashMap::new();
        for f in files
            .iter()
            .filter(|f| f.file.content_type() == DataContentType::Data)
        {
            let key = (f.spec_id, paths.path(f.spec_id, f.file.partition()));
            let seq = f.sequence_number.unwrap_or(0);
            let path = f.file.file_path().to_string();
            partition_of.insert(path.clone(), key.clone());
            by_partition.entry(key).or_default().push(DataRef {
                path: path.clone(),
                seq,
            });
            all.push(DataRef { path, seq });
        }
        for v in by_partition.values_mut() {
            v.sort_by(|a, b| a.path.cmp(&b.path));
        }
        all.sort_by(|a, b| a.path.cmp(&b.path));
        Self {
            by_partition,
            all,
            partition_of,
        }
    }

    /// The live data files `delete` (in spec `spec_id`, partition path `partition`) may apply
    /// to: of its partition (every one, when its spec is unpartitioned), not newer than it,
    /// and within its referenced file or `file_path` bounds when it records them.
    fn targets<'a>(
        &'a self,
        delete: &DataFile,
        seq: i64,
        spec_id: i32,
        partition: &str,
        unpartitioned: bool,
    ) -> Vec<&'a str> {
        let candidates: &[DataRef] = if unpartitioned {
            &self.all
        } else {
            self.by_partition
                .get(&(spec_id, partition.to_string()))
                .map_or(&[], Vec::as_slice)
        };
        let bound = |m: &HashMap<i32, iceberg::spec::Datum>| match m
            .get(&POS_DELETE_FILE_PATH_FIELD_ID)
            .map(iceberg::spec::Datum::literal)
        {
            Some(PrimitiveLiteral::String(s)) => Some(s.clone()),
            _ => None,
        };
        let referenced = delete.referenced_data_file();
        let (lo, hi) = (bound(delete.lower_bounds()), bound(delete.upper_bounds()));
        candidates
            .iter()
            .filter(|d| d.seq <= seq)
            .filter(|d| match (&referenced, &lo, &hi) {
                (Some(r), _, _) => &d.path == r,
                // Truncated bounds stay conservative (a prefix below, rounded up above).
                (None, Some(lo), Some(hi)) => {
                    lo.as_str() <= d.path.as_str() && d.path.as_str() <= hi.as_str()
                }
                _ => true,
            })
            .map(|d| d.path.as_str())
            .collect()
    }
}

/// A position-delete file of the base, with what planning learnt about it.
struct DeleteCandidate {
    live: LiveFile,
    seq: i64,
    targets: Vec<String>,
}

impl DeleteCandidate {
    fn planned(&self) -> PlannedDeleteFile {
        PlannedDeleteFile {
            path: self.live.file.file_path().to_string(),
            size_bytes: self.live.file.file_size_in_bytes(),
            records: self.live.file.record_count(),
            data_sequence_number: self.seq,
        }
    }
}

/// A plan, with the files and targets execution needs.
struct Planned {
    plan: PositionDeletePlan,
    /// By group index: the combined files with the data files each may apply to.
    inputs: Vec<Vec<DeleteCandidate>>,
}

fn delete_target_size(table: &LoadedTable) -> Result<u64> {
    match table
        .metadata
        .properties()
        .get(DELETE_TARGET_SIZE_PROPERTY)
        .map(|v| v.trim())
    {
        None | Some("") => Ok(DEFAULT_DELETE_TARGET_SIZE),
        Some(v) => v.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
            Error::config(format!(
                "{}: {DELETE_TARGET_SIZE_PROPERTY}={v} is not a positive size",
                table.id
            ))
        }),
    }
}

/// Plan a position-delete rewrite of `table`'s current snapshot (reads its manifests, and a
/// partition's lone small delete file when only its rows can tell whether it still applies).
///
/// "Now", for [`RewritePositionDeletesOptions::quiet_period_ms`], is the system clock.
pub async fn plan_position_delete_rewrite(
    table: &LoadedTable,
    options: &RewritePositionDeletesOptions,
) -> Result<PositionDeletePlan> {
    Ok(plan(table, options, SystemClock.now_ms()).await?.plan)
}

#[allow(
    clippy::too_many_lines,
    reason = "one pass: classify every delete file, then group by partition"
)]
async fn plan(
    table: &LoadedTable,
    options: &RewritePositionDeletesOptions,
    now_ms: i64,
) -> Result<Planned> {
    options.validate()?;
    let md = table.metadata.as_ref();
    let target = delete_target_size(table)?;
    let small = options.small_file_size_bytes.unwrap_or(target / 4 * 3);
    let mut plan = PositionDeletePlan {
        table: table.id.clone(),
        base_snapshot_id: md.current_snapshot_id(),
        target_file_size_bytes: target,
        small_file_size_bytes: small,
        position_delete_files: 0,
        position_delete_bytes: 0,
        groups: Vec::new(),
        skipped: Vec::new(),
    };
    if md.format_version() == FormatVersion::V1 || md.current_snapshot().is_none() {
        return Ok(Planned {
            plan,
            inputs: Vec::new(),
        });
    }
    let live = live_files(table).await?;
    let paths = PartitionPaths::new(md);
    let data = LiveData::new(&live, &paths);
    let hot = recently_changed(md, &live, &paths, options.quiet_period_ms, now_ms);
    let default_spec = md.default_partition_spec_id();
    let mut by_partition: BTreeMap<PartitionRef, (Vec<DeleteCandidate>, Vec<DeleteCandidate>)> =
        BTreeMap::new();
    for f in live {
        if f.file.content_type() != DataContentType::PositionDeletes
            || f.file.file_format() != DataFileFormat::Parquet
        {
            continue;
        }
        plan.position_delete_files += 1;
        plan.position_delete_bytes += f.file.file_size_in_bytes();
        let partition = PartitionRef {
            spec_id: f.spec_id,
            path: paths.path(f.spec_id, f.file.partition()),
        };
        if let Some(filter) = &options.partitions
            && !filter.contains(&partition)
        {
            continue;
        }
        let seq = f.sequence_number.unwrap_or(0);
        let unpartitioned = md
            .partition_spec_by_id(f.spec_id)
            .is_some_and(|s| s.is_unpartitioned());
        let targets: Vec<String> = data
            .targets(&f.file, seq, f.spec_id, &partition.path, unpartitioned)
            .into_iter()
            .map(str::to_string)
            .collect();
        let candidate = DeleteCandidate {
            live: f,
            seq,
            targets,
        };
        let entry = by_partition.entry(partition).or_default();
        if candidate.targets.is_empty() {
            entry.1.push(candidate);
        } else if candidate.live.file.file_size_in_bytes() < small {
            entry.0.push(candidate);
        }
    }
    let mut inputs = Vec::new();
    for (partition, (mut small_files, mut dangling)) in by_partition {
        if options.remove_dangling
            && small_files.len() == 1
            && small_files.len() < options.min_input_files
            && small_files[0].live.file.referenced_data_file().is_none()
            && applicable_rows(table, &small_files[0]).await?.is_empty()
        {
            // A lone small file its metadata cannot place (its `file_path` bounds span a live
            // file, e.g. one a compaction wrote at the delete's sequence number): it is read, and
            // removed when none of its rows names a file it applies to.
            dangling.append(&mut small_files);
        }
        let mut why_not: Option<String> = None;
        if let Some(&changed_ms) = hot.get(&partition) {
            why_not = Some(format!(
                "quiet_period: last changed {} s ago, within the quiet period of {} s",
                (now_ms - changed_ms).max(0) / 1000,
                options.quiet_period_ms.unwrap_or(0) / 1000
            ));
            dangling.clear();
        } else if small_files.len() < options.min_input_files {
            if !small_files.is_empty() {
                why_not = Some(format!(
                    "{} small delete file(s), fewer than min_input_files ({})",
                    small_files.len(),
                    options.min_input_files
                ));
            }
        } else if md.format_version() >= FormatVersion::V3 {
            why_not = Some(
                "format v3 takes deletion vectors: Parquet position deletes are not written".into(),
            );
        } else if partition.spec_id != default_spec {
            why_not = Some(format!(
                "written with partition spec {}, not the default spec {default_spec}",
                partition.spec_id
            ));
        } else if let Some(other) = small_files.iter().flat_map(|c| &c.targets).find(|t| {
            data.partition_of
                .get(*t)
                .is_some_and(|(spec, _)| *spec != default_spec)
        }) {
            why_not = Some(format!(
                "its deletes apply to {other}, a data file of an older partition spec"
            ));
        }
        if let Some(reason) = why_not {
            plan.skipped.push(SkippedDeletes {
                partition: partition.clone(),
                files: small_files.len() as u64,
                reason,
            });
            small_files.clear();
        }
        let dangling = if options.remove_dangling {
            dangling
        } else {
            Vec::new()
        };
        if small_files.is_empty() && dangling.is_empty() {
            continue;
        }
        small_files.sort_by(|a, b| a.live.file.file_path().cmp(b.live.file.file_path()));
        let bytes: u64 = small_files
            .iter()
            .map(|c| c.live.file.file_size_in_bytes())
            .sum();
        plan.groups.push(PositionDeleteGroup {
            partition,
            combined: small_files.iter().map(DeleteCandidate::planned).collect(),
            dangling: dangling.iter().map(DeleteCandidate::planned).collect(),
            data_sequence_number: small_files.iter().map(|c| c.seq).max(),
            expected_files: if small_files.is_empty() {
                0
            } else {
                bytes.div_ceil(target).max(1)
            },
        });
        inputs.push(small_files);
    }
    Ok(Planned { plan, inputs })
}

/// One group's new delete files, written and not yet committed.
#[derive(Debug)]
struct Rewritten {
    group: usize,
    files: Vec<DataFile>,
    rows_in: u64,
    rows_out: u64,
    /// Data files the new rows name.
    referenced: BTreeSet<String>,
}

/// A position-delete rewrite of one table: a builder that ends in
/// [`RewritePositionDeletes::execute`].
#[derive(Debug)]
pub struct RewritePositionDeletes<'a> {
    catalog: &'a Catalog,
    table: TableId,
    options: RewritePositionDeletesOptions,
    clock: Arc<dyn Clock>,
}

impl<'a> RewritePositionDeletes<'a> {
    /// Rewrite the position deletes of `table` in `catalog` with default options.
    pub fn new(catalog: &'a Catalog, table: TableId) -> Self {
        Self {
            catalog,
            table,
            options: RewritePositionDeletesOptions::default(),
            clock: Arc::new(SystemClock),
        }
    }

    /// Options.
    #[must_use]
    pub fn with_options(mut self, options: RewritePositionDeletesOptions) -> Self {
        self.options = options;
        self
    }

    /// Plan only.
    #[must_use]
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.options.dry_run = dry_run;
        self
    }

    /// Snapshot timestamps from this clock.
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Load the table, plan, and write the combined delete files (nothing in a dry run);
    /// nothing is committed yet.
    pub async fn prepare(self) -> Result<PreparedPositionDeleteRewrite<'a>> {
        let started = Instant::now();
        self.options.validate()?;
        let base = self.catalog.load_table(&self.table).await?;
        let Planned { plan, inputs } = plan(&base, &self.options, self.clock.now_ms()).await?;
        let (rewritten, failures) = if self.options.dry_run || plan.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            rewrite_groups(&base, &plan, inputs).await
        };
        Ok(PreparedPositionDeleteRewrite {
            catalog: self.catalog,
            options: self.options,
            clock: self.clock,
            base,
            plan,
            rewritten,
            failures,
            started,
        })
    }

    /// Plan, write the combined files and commit (or only plan, for a dry run).
    pub async fn execute(self) -> Result<RewritePositionDeletesOutcome> {
        self.prepare().await?.commit().await
    }
}

/// A position-delete rewrite whose new files are written, waiting to commit.
#[derive(Debug)]
pub struct PreparedPositionDeleteRewrite<'a> {
    catalog: &'a Catalog,
    options: RewritePositionDeletesOptions,
    clock: Arc<dyn Clock>,
    base: LoadedTable,
    plan: PositionDeletePlan,
    rewritten: Vec<Rewritten>,
    failures: Vec<DeleteGroupOutcome>,
    started: Instant,
}

impl PreparedPositionDeleteRewrite<'_> {
    /// The plan.
    pub fn plan(&self) -> &PositionDeletePlan {
        &self.plan
    }

    /// The new delete files written so far (none in a dry run).
    pub fn written_files(&self) -> Vec<String> {
        self.rewritten
            .iter()
            .flat_map(|r| r.files.iter().map(|f| f.file_path().to_string()))
            .collect()
    }

    /// Delete the files written and commit nothing; returns how many were deleted.
    pub async fn abort(self) -> usize {
        let mut n = 0;
        for r in &self.rewritten {
            if delete_files(&self.base, r).await {
                n += r.files.len();
            }
        }
        n
    }

    /// Commit the rewritten groups in one `replace` snapshot, validating every retry against
    /// the head (or, for a dry run, report the plan).
    pub async fn commit(self) -> Result<RewritePositionDeletesOutcome> {
        let mut outcome = RewritePositionDeletesOutcome {
            table: self.plan.table.clone(),
            dry_run: self.options.dry_run,
            base_snapshot_id: self.plan.base_snapshot_id,
            groups: Vec::new(),
            snapshot_ids: Vec::new(),
            duration_ms: 0,
            plan: self.plan,
        };
        if self.options.dry_run {
            outcome.groups = outcome
                .plan
                .groups
                .iter()
                .map(|g| planned_outcome(g, DeleteGroupStatus::DryRun))
                .collect();
        } else {
            let mut results = self.failures;
            if !self.rewritten.is_empty() {
                let committer = match self.catalog.committer() {
                    Ok(c) => c,
                    Err(e) => {
                        for r in &self.rewritten {
                            delete_files(&self.base, r).await;
                        }
                        return Err(e);
                    }
                };
                let policy = match &self.options.retry {
                    Some(p) => Ok(p.clone()),
                    None => RetryPolicy::for_table(self.base.metadata.properties())
                        .map_err(|e| e.in_table(&self.base.id)),
                };
                let (group_outcomes, snapshot) = commit_groups(
                    committer.as_ref(),
                    self.options.commit_fence.as_ref(),
                    self.catalog.name(),
                    &self.base,
                    &outcome.plan,
                    self.rewritten,
                    policy,
                    &self.clock,
                )
                .await;
                results.extend(group_outcomes);
                outcome.snapshot_ids.extend(snapshot);
            }
            results.sort_by(|a, b| a.partition.cmp(&b.partition));
            outcome.groups = results;
        }
        outcome.duration_ms = self.started.elapsed().as_millis() as u64;
        Ok(outcome)
    }
}

fn planned_outcome(g: &PositionDeleteGroup, status: DeleteGroupStatus) -> DeleteGroupOutcome {
    DeleteGroupOutcome {
        partition: g.partition.clone(),
        status,
        files_combined: g.combined.len() as u64,
        files_dangling: g.dangling.len() as u64,
        bytes_removed: g.replaced().map(|f| f.size_bytes).sum(),
        files_added: g.expected_files,
        bytes_added: 0,
        rows_in: g.replaced().map(|f| f.records).sum(),
        rows_out: 0,
        data_sequence_number: g.data_sequence_number,
        retries: 0,
    }
}

fn written_outcome(
    g: &PositionDeleteGroup,
    r: &Rewritten,
    status: DeleteGroupStatus,
    retries: u32,
) -> DeleteGroupOutcome {
    DeleteGroupOutcome {
        files_added: r.files.len() as u64,
        bytes_added: r.files.iter().map(DataFile::file_size_in_bytes).sum(),
        rows_in: r.rows_in,
        rows_out: r.rows_out,
        retries,
        ..planned_outcome(g, status)
    }
}

fn failed(table: &TableId, e: &Error, files_deleted: bool) -> DeleteGroupStatus {
    DeleteGroupStatus::Failed {
        code: e.code().to_string(),
        message: e.message_for(table),
        files_deleted,
    }
}

/// Read every group's rows that still apply and write them as new delete files (one writer
/// call for all groups: it reads the live files once). A group whose reads fail is reported
/// failed; a failed write fails every group (the writer deletes what it wrote).
async fn rewrite_groups(
    base: &LoadedTable,
    plan: &PositionDeletePlan,
    inputs: Vec<Vec<DeleteCandidate>>,
) -> (Vec<Rewritten>, Vec<DeleteGroupOutcome>) {
    let mut failures = Vec::new();
    let mut rewritten = Vec::new();
    let mut rows: Vec<(String, Vec<i64>)> = Vec::new();
    let mut by_partition: HashMap<String, usize> = HashMap::new();
    for (i, files) in inputs.into_iter().enumerate() {
        let Some(group) = plan.groups.get(i) else {
            continue;
        };
        match read_group(base, &files).await {
            Ok(positions) => {
                let rows_in = files
                    .iter()
                    .map(|c| c.live.file.record_count())
                    .sum::<u64>()
                    + group.dangling.iter().map(|f| f.records).sum::<u64>();
                let rows_out: u64 = positions.values().map(|p| p.len() as u64).sum();
                let referenced: BTreeSet<String> = positions.keys().cloned().collect();
                if !positions.is_empty() {
                    // Only default-spec groups have rows: the written files are in that spec.
                    by_partition.insert(group.partition.path.clone(), rewritten.len());
                }
                rows.extend(positions);
                rewritten.push(Rewritten {
                    group: i,
                    files: Vec::new(),
                    rows_in,
                    rows_out,
                    referenced,
                });
            }
            Err(e) => {
                tracing::warn!(table = %plan.table, partition = %group.partition.path, error = %e, "reading position deletes failed");
                failures.push(planned_outcome(group, failed(&plan.table, &e, true)));
            }
        }
    }
    if rows.is_empty() {
        return (rewritten, failures);
    }
    match write_position_deletes(base, &rows).await {
        Ok(written) => {
            let paths = PartitionPaths::new(&base.metadata);
            let spec = base.metadata.default_partition_spec_id();
            for f in written.files {
                let key = paths.path(spec, f.partition());
                if let Some(r) = by_partition.get(&key).and_then(|i| rewritten.get_mut(*i)) {
                    r.files.push(f);
                } else {
                    // Cannot happen (rows come from the groups' partitions); never commit a
                    // file no group owns.
                    tracing::error!(table = %plan.table, file = f.file_path(), "a written delete file matches no group");
                    let _ = base.storage.delete(f.file_path()).await;
                }
            }
        }
        Err(e) => {
            for r in rewritten.drain(..) {
                if let Some(g) = plan.groups.get(r.group) {
                    failures.push(planned_outcome(g, failed(&plan.table, &e, true)));
                }
            }
        }
    }
    (rewritten, failures)
}

/// The rows of `files` that still apply, by data file: each file's rows for the live data files
/// it may apply to (its partition, not newer than it), merged and deduplicated.
async fn read_group(
    base: &LoadedTable,
    files: &[DeleteCandidate],
) -> Result<BTreeMap<String, Vec<i64>>> {
    let mut out: BTreeMap<String, roaring::RoaringTreemap> = BTreeMap::new();
    for c in files {
        for (path, set) in applicable_rows(base, c).await? {
            *out.entry(path).or_default() |= set;
        }
    }
    out.into_iter()
        .map(|(path, set)| {
            let positions = set
                .iter()
                .map(|p| {
                    i64::try_from(p).map_err(|_| {
                        Error::metadata(&base.id, &path, format!("position {p} out of range"))
                    })
                })
                .collect::<Result<Vec<i64>>>()?;
            Ok((path, positions))
        })
        .collect()
}

/// The rows of one position-delete file that apply to a live data file (one of its targets).
async fn applicable_rows(
    base: &LoadedTable,
    c: &DeleteCandidate,
) -> Result<HashMap<String, roaring::RoaringTreemap>> {
    let f = &c.live.file;
    let del = GroupDeleteFile {
        path: f.file_path().to_string(),
        kind: DeleteKind::Position,
        size_bytes: f.file_size_in_bytes(),
        records: f.record_count(),
        spec_id: c.live.spec_id,
        data_sequence_number: c.seq,
        equality_ids: Vec::new(),
        referenced_data_file: f.referenced_data_file(),
        content_offset: None,
        content_size_in_bytes: None,
    };
    let targets: HashSet<&str> = c.targets.iter().map(String::as_str).collect();
    read_position_file(base, &del, &targets).await
}

async fn delete_files(base: &LoadedTable, r: &Rewritten) -> bool {
    let mut ok = true;
    for f in &r.files {
        if let Err(e) = base.storage.delete(f.file_path()).await {
            tracing::warn!(file = f.file_path(), error = %e, "could not delete an uncommitted delete file");
            ok = false;
        }
    }
    ok
}

/// Why `r` can no longer commit on `head`: a delete file it replaces or a data file its rows
/// name is not live any more.
fn conflict(g: &PositionDeleteGroup, r: &Rewritten, live: &HashSet<String>) -> Option<String> {
    if let Some(f) = g.replaced().find(|f| !live.contains(&f.path)) {
        return Some(format!(
            "delete file {} is no longer live (another commit replaced or removed it)",
            f.path
        ));
    }
    r.referenced
        .iter()
        .find(|d| !live.contains(*d))
        .map(|d| format!("data file {d} is no longer live (another commit rewrote or removed it)"))
}

/// Commit the rewritten groups in one `replace` through the commit driver (under `fence`, if
/// any), validating every attempt whose head moved from `base`; returns the groups' outcomes and
/// the snapshot committed.
#[allow(
    clippy::too_many_arguments,
    reason = "the commit's inputs, passed once"
)]
async fn commit_groups(
    committer: &dyn CatalogCommitter,
    fence: Option<&CommitFence>,
    catalog: &str,
    base: &LoadedTable,
    plan: &PositionDeletePlan,
    groups: Vec<Rewritten>,
    policy: Result<RetryPolicy>,
    clock: &Arc<dyn Clock>,
) -> (Vec<DeleteGroupOutcome>, Option<i64>) {
    let mut op = GroupsCommit {
        base,
        plan,
        groups,
        clock,
        out: Vec::new(),
    };
    let mut driver = match policy.and_then(|p| CommitDriver::new(committer, p)) {
        Ok(d) => d.with_fence(fence, catalog),
        Err(e) => {
            op.give_up(&e, true, 0).await;
            return (op.out, None);
        }
    };
    let mut head = base.clone();
    let landed = match driver.drive(&mut head, &mut op).await {
        Ok(Driven::Landed(l)) => l,
        Ok(Driven::Nothing(_)) | Err(_) => return (op.out, None),
    };
    let snapshot_id = landed.snapshot_id.unwrap_or_default();
    let status = match verify(&landed.summary, &op.groups) {
        Ok(()) => DeleteGroupStatus::Committed { snapshot_id },
        Err(e) => {
            tracing::error!(table = %plan.table, error = %e, "post-commit verification failed");
            failed(&plan.table, &e, false)
        }
    };
    let retries = driver.retries();
    for r in &op.groups {
        if let Some(g) = plan.groups.get(r.group) {
            op.out.push(written_outcome(g, r, status.clone(), retries));
        }
    }
    (op.out, Some(snapshot_id))
}

/// The rewritten groups as the commit driver sees them.
struct GroupsCommit<'a> {
    base: &'a LoadedTable,
    plan: &'a PositionDeletePlan,
    /// The groups still to commit.
    groups: Vec<Rewritten>,
    clock: &'a Arc<dyn Clock>,
    /// Outcomes of the groups dropped or given up.
    out: Vec<DeleteGroupOutcome>,
}

impl CommitOp for GroupsCommit<'_> {
    async fn attempt(&mut self, head: &LoadedTable, cx: AttemptContext<'_>) -> Result<Attempt> {
        let plan = self.plan;
        if head.metadata.current_snapshot_id() != self.base.metadata.current_snapshot_id() {
            let live: HashSet<String> = live_files(head)
                .await?
                .into_iter()
                .map(|f| f.file.file_path().to_string())
                .collect();
            let mut keep = Vec::new();
            for r in std::mem::take(&mut self.groups) {
                let Some(g) = plan.groups.get(r.group) else {
                    continue;
                };
                if let Some(reason) = conflict(g, &r, &live) {
                    tracing::info!(table = %plan.table, partition = %g.partition.path, %reason, "position-delete group aborted by validation");
                    let files_deleted = !cx.outcome_unknown;
                    if files_deleted {
                        delete_files(self.base, &r).await;
                    }
                    self.out.push(written_outcome(
                        g,
                        &r,
                        DeleteGroupStatus::Conflicted {
                            reason,
                            files_deleted,
                        },
                        cx.retry.failed_attempts(),
                    ));
                } else {
                    keep.push(r);
                }
            }
            self.groups = keep;
        }
        if self.groups.is_empty() {
            return Ok(Attempt::Nothing);
        }
        let mut producer = SnapshotProducer::replace(head)
            .with_clock(Arc::clone(self.clock))
            .set_snapshot_property("cryo.operation", "rewrite_position_deletes");
        for r in &self.groups {
            let Some(g) = plan.groups.get(r.group) else {
                continue;
            };
            producer = producer.remove_delete_files(g.replaced().map(|f| f.path.clone()));
            if let Some(seq) = g.data_sequence_number {
                producer = producer.add_delete_files_with_sequence_number(r.files.clone(), seq);
            }
        }
        Ok(Attempt::Snapshot(Box::new(producer.stage().await?)))
    }

    async fn give_up(&mut self, err: &Error, delete_written: bool, attempts: u32) {
        for r in std::mem::take(&mut self.groups) {
            let deleted = delete_written && delete_files(self.base, &r).await;
            if let Some(g) = self.plan.groups.get(r.group) {
                self.out.push(written_outcome(
                    g,
                    &r,
                    failed(&self.plan.table, err, deleted),
                    attempts,
                ));
            }
        }
    }
}

/// The committed summary must count the positions the rewrite counted.
fn verify(summary: &HashMap<String, String>, groups: &[Rewritten]) -> Result<()> {
    let written: u64 = groups.iter().map(|g| g.rows_out).sum();
    let read: u64 = groups.iter().map(|g| g.rows_in).sum();
    crate::commit::expect_counts(
        summary,
        &[
            ("added-position-deletes", written),
            ("removed-position-deletes", read),
        ],
        "position-delete rewrite",
    )
}

/// Rewrite the position deletes of one table.
pub async fn rewrite_position_deletes(
    catalog: &Catalog,
    table: &TableId,
    options: &RewritePositionDeletesOptions,
) -> Result<RewritePositionDeletesOutcome> {
    RewritePositionDeletes::new(catalog, table.clone())
        .with_options(options.clone())
        .execute()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_validated() {
        assert!(RewritePositionDeletesOptions::default().validate().is_ok());
        assert!(!RewritePositionDeletesOptions::default().dry_run);
        for bad in [
            RewritePositionDeletesOptions {
                min_input_files: 1,
                ..Default::default()
            },
            RewritePositionDeletesOptions {
                small_file_size_bytes: Some(0),
                ..Default::default()
            },
        ] {
            assert!(matches!(bad.validate(), Err(Error::Validation { .. })));
        }
        let json = r#"{"min_input_files": 3}"#;
        let o: RewritePositionDeletesOptions = serde_json::from_str(json).unwrap();
        assert_eq!(o.min_input_files, 3);
        assert!(o.remove_dangling);
        assert!(
            serde_json::from_str::<RewritePositionDeletesOptions>(r#"{"min_files": 3}"#).is_err()
        );
    }
}
