//! `plan_compaction`: file groups from metadata only, at the table's current snapshot.

use std::collections::{BTreeMap, HashMap};

use iceberg::spec::{
    DataContentType, DataFile, DataFileFormat, PrimitiveLiteral, PrimitiveType, Schema, Struct,
    TableMetadata, Transform,
};
use serde::{Deserialize, Serialize};

use super::options::{CompactOptions, FileSizes, PartitionRef};
use crate::catalog::{LoadedTable, TableId};
use crate::commit::{LiveFile, POS_DELETE_FILE_PATH_FIELD_ID, live_files};
use crate::error::{Error, Result};
use crate::plan::RewriteStrategy;
use crate::scan::{PartitionFieldInfo, partition};

/// Current compaction plan format.
pub const COMPACTION_PLAN_VERSION: u32 = 1;

/// The work of one compaction, at one base snapshot. A dry run is exactly this value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CompactionPlan {
    /// Plan format version.
    pub format_version: u32,
    /// Table.
    pub table: TableId,
    /// Table UUID at planning time (a replaced table must not receive this plan).
    pub table_uuid: String,
    /// Metadata file the plan was computed from.
    pub base_metadata_location: Option<String>,
    /// The base snapshot S0 (`None`: the table has no snapshot, and no groups).
    pub base_snapshot_id: Option<i64>,
    /// S0's sequence number: new files are committed with it as their data sequence number,
    /// so equality deletes committed after S0 still apply to rewritten rows.
    pub base_sequence_number: i64,
    /// Table format version (1, 2, 3).
    pub table_format_version: u8,
    /// Schema the output is written in (the current one).
    pub schema_id: i32,
    /// Partition spec the output is written in (the default one).
    pub spec_id: i32,
    /// Strategy.
    pub strategy: RewriteStrategy,
    /// File sizes in force.
    pub sizes: FileSizes,
    /// File groups, in partition order; each can be rewritten and committed on its own.
    pub groups: Vec<FileGroup>,
    /// Partitions with candidate files that were left alone, with the reason.
    pub skipped: Vec<SkippedPartition>,
}

/// One unit of rewrite and commit: data files of one partition of one spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FileGroup {
    /// Position in [`CompactionPlan::groups`].
    pub id: u32,
    /// Partition the input files belong to.
    pub partition: PartitionRef,
    /// Why the group is rewritten (`small_files`, `large_files`, `deletes`, `old_spec`, `rewrite_all`).
    pub reasons: Vec<String>,
    /// Data files to rewrite, by path.
    pub data_files: Vec<GroupDataFile>,
    /// Delete files that apply to at least one of them (read during the rewrite).
    pub delete_files: Vec<GroupDeleteFile>,
    /// Delete files (paths) no live data file needs once this group commits: applied here and
    /// applying to nothing else, or already dangling. Removed in the same commit.
    pub removable_delete_files: Vec<String>,
    /// Bytes of the data files.
    pub input_bytes: u64,
    /// Rows of the data files (before deletes).
    pub input_records: u64,
    /// Output files expected at the target size.
    pub expected_output_files: u64,
}

/// A data file of a group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupDataFile {
    /// Location.
    pub path: String,
    /// Bytes.
    pub size_bytes: u64,
    /// Rows (before deletes).
    pub records: u64,
    /// Spec it was written with.
    pub spec_id: i32,
    /// Data sequence number (0 on v1).
    pub data_sequence_number: i64,
    /// Format v3: the row id of its first row (its own or inherited; see
    /// [`LiveFile::first_row_id`]). A rewrite writes every surviving row's `_row_id` from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_row_id: Option<i64>,
    /// Indexes into [`FileGroup::delete_files`] of the deletes that apply to it.
    pub deletes: Vec<usize>,
}

/// Kind of a delete file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeleteKind {
    /// Position delete file (Parquet `file_path`, `pos`).
    Position,
    /// Equality delete file.
    Equality,
    /// Deletion vector (a Puffin blob, format v3).
    DeletionVector,
}

/// A delete file that applies to files of a group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupDeleteFile {
    /// Location (the Puffin file for a deletion vector).
    pub path: String,
    /// Kind.
    pub kind: DeleteKind,
    /// Bytes of the file.
    pub size_bytes: u64,
    /// Deleted rows it holds.
    pub records: u64,
    /// Spec it was written with.
    pub spec_id: i32,
    /// Data sequence number.
    pub data_sequence_number: i64,
    /// Equality field ids (equality deletes).
    pub equality_ids: Vec<i32>,
    /// The one data file it applies to (deletion vectors, file-scoped position deletes).
    pub referenced_data_file: Option<String>,
    /// Blob offset inside the Puffin file (deletion vectors).
    pub content_offset: Option<i64>,
    /// Blob length (deletion vectors).
    pub content_size_in_bytes: Option<i64>,
}

/// Partition left alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedPartition {
    /// Partition.
    pub partition: PartitionRef,
    /// Candidate files in it.
    pub files: u64,
    /// Why.
    pub reason: String,
}

/// What a plan would rewrite, in sum (the figures a dry run reports).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanTotals {
    /// File groups.
    pub groups: usize,
    /// Data files rewritten.
    pub data_files: usize,
    /// Their bytes.
    pub input_bytes: u64,
    /// Their rows, before deletes.
    pub input_records: u64,
    /// Distinct delete files read.
    pub delete_files: usize,
    /// Delete files removed if every group commits.
    pub removable_delete_files: usize,
    /// Output files expected at the target size.
    pub expected_output_files: u64,
}

impl CompactionPlan {
    /// Sums over all groups.
    pub fn totals(&self) -> PlanTotals {
        let mut deletes = std::collections::BTreeSet::new();
        for g in &self.groups {
            deletes.extend(g.delete_files.iter().map(|d| d.path.as_str()));
        }
        PlanTotals {
            groups: self.groups.len(),
            data_files: self.data_files(),
            input_bytes: self.input_bytes(),
            input_records: self.groups.iter().map(|g| g.input_records).sum(),
            delete_files: deletes.len(),
            removable_delete_files: self.removable_delete_files(),
            expected_output_files: self.groups.iter().map(|g| g.expected_output_files).sum(),
        }
    }

    /// Data files in all groups.
    pub fn data_files(&self) -> usize {
        self.groups.iter().map(|g| g.data_files.len()).sum()
    }

    /// Input bytes of all groups.
    pub fn input_bytes(&self) -> u64 {
        self.groups.iter().map(|g| g.input_bytes).sum()
    }

    /// Delete files removed if every group commits.
    pub fn removable_delete_files(&self) -> usize {
        self.groups
            .iter()
            .map(|g| g.removable_delete_files.len())
            .sum()
    }

    /// The group with this id.
    pub fn group(&self, id: u32) -> Option<&FileGroup> {
        self.groups.iter().find(|g| g.id == id)
    }
}

/// A live file with what planning needs.
struct Entry {
    file: DataFile,
    spec_id: i32,
    seq: i64,
    first_row_id: Option<i64>,
    partition_path: String,
}

/// A delete file and the data files in its scope.
struct DeleteEntry {
    entry: Entry,
    kind: DeleteKind,
    /// Exact `file_path` bounds of a position delete file, when recorded.
    path_bounds: Option<(String, String)>,
    /// Live data files (indexes) it could apply to.
    scope: Vec<usize>,
}

/// Plan a compaction of `table` at its current snapshot. Reads manifests only.
///
/// "Now", for [`CompactOptions::quiet_period_ms`], is the system clock; [`plan_compaction_at`]
/// takes it as a value.
pub async fn plan_compaction(
    table: &LoadedTable,
    options: &CompactOptions,
) -> Result<CompactionPlan> {
    plan_compaction_at(table, options, chrono::Utc::now().timestamp_millis()).await
}

/// [`plan_compaction`] with "now" (epoch milliseconds) given: partitions changed within
/// [`CompactOptions::quiet_period_ms`] before `now_ms` are skipped, reason `quiet_period`.
pub async fn plan_compaction_at(
    table: &LoadedTable,
    options: &CompactOptions,
    now_ms: i64,
) -> Result<CompactionPlan> {
    let plan = empty_plan(table, options)?;
    if table.metadata.current_snapshot().is_none() {
        return Ok(plan);
    }
    let live = live_files(table).await?;
    plan_live(table, options, now_ms, plan, live)
}

/// [`plan_compaction_at`] on the live files of the table's current snapshot, already read.
pub(crate) fn plan_compaction_of(
    table: &LoadedTable,
    options: &CompactOptions,
    now_ms: i64,
    live: Vec<LiveFile>,
) -> Result<CompactionPlan> {
    let plan = empty_plan(table, options)?;
    if table.metadata.current_snapshot().is_none() {
        return Ok(plan);
    }
    plan_live(table, options, now_ms, plan, live)
}

/// The options checked against the table, and a plan with no groups yet.
fn empty_plan(table: &LoadedTable, options: &CompactOptions) -> Result<CompactionPlan> {
    options.validate()?;
    let md = table.metadata.as_ref();
    let sizes = options.sizes(table)?;
    check_strategy_columns(table, &options.strategy)?;
    super::lineage::check_rewritable(&table.id.to_string(), md)?;
    let snapshot = md.current_snapshot();
    Ok(CompactionPlan {
        format_version: COMPACTION_PLAN_VERSION,
        table: table.id.clone(),
        table_uuid: md.uuid().to_string(),
        base_metadata_location: table.metadata_location.clone(),
        base_snapshot_id: snapshot.map(|s| s.snapshot_id()),
        base_sequence_number: snapshot.map_or(0, |s| s.sequence_number()),
        table_format_version: md.format_version() as u8,
        schema_id: md.current_schema_id(),
        spec_id: md.default_partition_spec_id(),
        strategy: options.strategy.clone(),
        sizes,
        groups: Vec::new(),
        skipped: Vec::new(),
    })
}

#[allow(clippy::too_many_lines)] // Reason: one pass (index, select, pack, keep) reads best in order.
fn plan_live(
    table: &LoadedTable,
    options: &CompactOptions,
    now_ms: i64,
    mut plan: CompactionPlan,
    live: Vec<LiveFile>,
) -> Result<CompactionPlan> {
    let md = table.metadata.as_ref();
    let sizes = plan.sizes;
    let paths = PartitionPaths::new(md);
    let hot = recently_changed(md, &live, &paths, options.quiet_period_ms, now_ms);
    let (data, mut deletes) = split_live(&table.id, live, &paths)?;
    index_scopes(md, &data, &mut deletes);

    // Per data file: the deletes (indexes) that apply to it.
    let mut applicable: Vec<Vec<usize>> = vec![Vec::new(); data.len()];
    for (d, del) in deletes.iter().enumerate() {
        for &f in &del.scope {
            applicable[f].push(d);
        }
    }
    // A deletion vector replaces the position delete files of its data file (v3 spec).
    for list in &mut applicable {
        if list
            .iter()
            .any(|&d| deletes[d].kind == DeleteKind::DeletionVector)
        {
            list.retain(|&d| deletes[d].kind != DeleteKind::Position);
        }
    }

    let default_spec = md.default_partition_spec_id();
    let mut by_partition: BTreeMap<PartitionRef, Vec<usize>> = BTreeMap::new();
    for (i, e) in data.iter().enumerate() {
        let key = PartitionRef {
            spec_id: e.spec_id,
            path: e.partition_path.clone(),
        };
        if let Some(filter) = &options.partitions
            && !filter.contains(&key)
        {
            continue;
        }
        by_partition.entry(key).or_default().push(i);
    }

    // Dangling delete files (no live data file in scope), by partition, to be dropped by the
    // first group of their partition (global equality deletes: the first group of all).
    let mut dangling: BTreeMap<PartitionRef, Vec<usize>> = BTreeMap::new();
    for (d, del) in deletes.iter().enumerate() {
        if del.scope.is_empty() {
            dangling
                .entry(PartitionRef {
                    spec_id: del.entry.spec_id,
                    path: del.entry.partition_path.clone(),
                })
                .or_default()
                .push(d);
        }
    }

    for (key, files) in by_partition {
        if let Some(&changed_ms) = hot.get(&key) {
            plan.skipped.push(SkippedPartition {
                partition: key.clone(),
                files: files.len() as u64,
                reason: format!(
                    "quiet_period: last changed {} s ago, within the quiet period of {} s",
                    (now_ms - changed_ms).max(0) / 1000,
                    options.quiet_period_ms.unwrap_or(0) / 1000
                ),
            });
            continue;
        }
        let mut candidates = Vec::new();
        let mut reasons_of = HashMap::new();
        for &i in &files {
            let e = &data[i];
            let size = e.file.file_size_in_bytes();
            let mut reasons = Vec::new();
            if options.rewrite_all {
                reasons.push("rewrite_all");
            }
            if size < sizes.min {
                reasons.push("small_files");
            }
            if size > sizes.max {
                reasons.push("large_files");
            }
            if applicable[i].len() >= options.delete_file_threshold as usize {
                reasons.push("deletes");
            }
            if e.spec_id != default_spec {
                reasons.push("old_spec");
            }
            if !reasons.is_empty() {
                candidates.push(i);
                reasons_of.insert(i, reasons);
            }
        }
        if candidates.is_empty() {
            continue;
        }
        for bin in pack(&data, candidates, options.max_file_group_size_bytes) {
            let bytes: u64 = bin.iter().map(|&i| data[i].file.file_size_in_bytes()).sum();
            let mut reasons: Vec<&str> = bin
                .iter()
                .flat_map(|i| reasons_of[i].iter().copied())
                .collect();
            reasons.sort_unstable();
            reasons.dedup();
            let forced = reasons
                .iter()
                .any(|r| matches!(*r, "deletes" | "old_spec" | "rewrite_all" | "large_files"));
            let enough_files = bin.len() >= options.min_input_files as usize;
            let enough_content = bin.len() > 1 && bytes > sizes.target;
            if !(forced || enough_files || enough_content) {
                plan.skipped.push(SkippedPartition {
                    partition: key.clone(),
                    files: bin.len() as u64,
                    reason: format!(
                        "{} candidate file(s), {bytes} bytes: below min_input_files ({}) and the target size",
                        bin.len(),
                        options.min_input_files
                    ),
                });
                continue;
            }
            let id = plan.groups.len() as u32;
            let mut own_dangling = Vec::new();
            if id == 0 {
                // Global equality deletes that apply to nothing go with the first group.
                let global: Vec<PartitionRef> = dangling
                    .keys()
                    .filter(|k| {
                        md.partition_spec_by_id(k.spec_id)
                            .is_some_and(|s| s.is_unpartitioned())
                    })
                    .cloned()
                    .collect();
                for k in global {
                    own_dangling.extend(dangling.remove(&k).unwrap_or_default());
                }
            }
            own_dangling.extend(dangling.remove(&key).unwrap_or_default());
            plan.groups.push(build_group(
                id,
                key.clone(),
                reasons.iter().map(|r| (*r).to_string()).collect(),
                &bin,
                &data,
                &deletes,
                &applicable,
                &own_dangling,
                sizes.target,
            ));
        }
    }
    // Dangling delete files of partitions without a group (their data is gone: a metadata-only
    // delete removed it) go with the first group, when the run covers their partition.
    if let Some(first) = plan.groups.first_mut() {
        let mut extra: Vec<String> = dangling
            .iter()
            .filter(|(k, _)| options.partitions.as_ref().is_none_or(|f| f.contains(*k)))
            .filter(|(k, _)| !hot.contains_key(*k))
            .flat_map(|(_, v)| {
                v.iter()
                    .map(|&d| deletes[d].entry.file.file_path().to_string())
            })
            .collect();
        if !extra.is_empty() {
            extra.append(&mut first.removable_delete_files);
            extra.sort();
            extra.dedup();
            first.removable_delete_files = extra;
        }
    }
    Ok(plan)
}

/// Every column the strategy names must exist in the current schema.
fn check_strategy_columns(table: &LoadedTable, strategy: &RewriteStrategy) -> Result<()> {
    let schema = table.metadata.current_schema();
    let names: Vec<String> = match strategy {
        RewriteStrategy::BinPack => return Ok(()),
        RewriteStrategy::Sort { columns } => columns
            .iter()
            .map(|c| super::sort::sort_column(schema, c).map(|c| c.name))
            .collect::<Result<_>>()?,
        // Z-order takes plain names, exactly as given.
        RewriteStrategy::ZOrder { columns } | RewriteStrategy::Hilbert { columns } => {
            columns.clone()
        }
    };
    for name in names {
        let field = schema.field_by_name(&name).ok_or_else(|| {
            Error::validation(format!("{}: no column `{name}` to order by", table.id))
        })?;
        if field.field_type.as_primitive_type().is_none() {
            return Err(Error::validation(format!(
                "{}: `{name}` is not a primitive column and cannot order files",
                table.id
            )));
        }
    }
    Ok(())
}

fn split_live(
    table: &TableId,
    live: Vec<LiveFile>,
    paths: &PartitionPaths,
) -> Result<(Vec<Entry>, Vec<DeleteEntry>)> {
    let mut data = Vec::new();
    let mut deletes = Vec::new();
    for lf in live {
        let seq = lf.sequence_number.unwrap_or(0);
        let partition_path = paths.path(lf.spec_id, lf.file.partition());
        let kind = match lf.file.content_type() {
            DataContentType::Data => None,
            DataContentType::EqualityDeletes => Some(DeleteKind::Equality),
            DataContentType::PositionDeletes if lf.file.file_format() == DataFileFormat::Puffin => {
                Some(DeleteKind::DeletionVector)
            }
            DataContentType::PositionDeletes => Some(DeleteKind::Position),
        };
        let format = lf.file.file_format();
        let entry = Entry {
            file: lf.file,
            spec_id: lf.spec_id,
            seq,
            first_row_id: lf.first_row_id,
            partition_path,
        };
        if entry.file.key_metadata().is_some() {
            return Err(Error::unsupported(format!(
                "{table}: {} is encrypted (key_metadata); Cryo does not rewrite encrypted files",
                entry.file.file_path()
            )));
        }
        match kind {
            None => {
                if format != DataFileFormat::Parquet {
                    return Err(Error::unsupported(format!(
                        "{table}: data file {} is {format}; Cryo rewrites Parquet files",
                        entry.file.file_path()
                    )));
                }
                data.push(entry);
            }
            Some(kind) => {
                let path_bounds = (kind == DeleteKind::Position)
                    .then(|| path_bounds(&entry.file))
                    .flatten();
                deletes.push(DeleteEntry {
                    entry,
                    kind,
                    path_bounds,
                    scope: Vec::new(),
                });
            }
        }
    }
    // Deterministic plans: files in path order.
    data.sort_by(|a, b| a.file.file_path().cmp(b.file.file_path()));
    deletes.sort_by(|a, b| a.entry.file.file_path().cmp(b.entry.file.file_path()));
    Ok((data, deletes))
}

/// When the rows of a live file were last changed, from the table's snapshots.
///
/// Format v2+: the snapshot that committed the file's data sequence number. A rewrite gives
/// its output the base snapshot's data sequence number (Cryo's and Java's alike), so a
/// compacted partition looks as old as that base, not as the rewrite. When that snapshot is
/// expired, the oldest snapshot kept with a sequence number at least as high stands in: it
/// was committed later, so the partition looks younger than it is, never older. Format v1 has
/// no sequence numbers: the snapshot that added the file (or, expired, the oldest kept).
struct ChangeTimes {
    /// (sequence number, commit time) per snapshot, by sequence number.
    by_seq: Vec<(i64, i64)>,
    by_id: HashMap<i64, i64>,
    v1: bool,
    oldest_ms: i64,
}

impl ChangeTimes {
    fn new(md: &TableMetadata) -> Self {
        let mut by_seq: Vec<(i64, i64)> = md
            .snapshots()
            .map(|s| (s.sequence_number(), s.timestamp_ms()))
            .collect();
        by_seq.sort_unstable();
        Self {
            oldest_ms: by_seq.iter().map(|&(_, t)| t).min().unwrap_or(0),
            by_id: md
                .snapshots()
                .map(|s| (s.snapshot_id(), s.timestamp_ms()))
                .collect(),
            by_seq,
            v1: md.format_version() == iceberg::spec::FormatVersion::V1,
        }
    }

    fn changed_ms(&self, seq: i64, snapshot_id: Option<i64>) -> i64 {
        if self.v1 {
            return snapshot_id
                .and_then(|id| self.by_id.get(&id).copied())
                .unwrap_or(self.oldest_ms);
        }
        // The first snapshot kept whose sequence number is at least `seq`; none (a sequence
        // number no snapshot kept reaches): treat the partition as changed just now.
        let first = self.by_seq.partition_point(|&(s, _)| s < seq);
        self.by_seq.get(first).map_or(i64::MAX, |&(_, t)| t)
    }
}

/// The partitions (with the time of their last change) whose live files — data or delete —
/// were changed less than `quiet_period_ms` before `now_ms` (see [`ChangeTimes`]); empty
/// without a quiet period. Compaction and the position-delete rewrite leave them alone.
pub(crate) fn recently_changed(
    md: &TableMetadata,
    live: &[LiveFile],
    paths: &PartitionPaths,
    quiet_period_ms: Option<u64>,
    now_ms: i64,
) -> BTreeMap<PartitionRef, i64> {
    let Some(quiet) = quiet_period_ms.filter(|q| *q > 0) else {
        return BTreeMap::new();
    };
    let since = now_ms.saturating_sub(i64::try_from(quiet).unwrap_or(i64::MAX));
    let times = ChangeTimes::new(md);
    let mut last: BTreeMap<PartitionRef, i64> = BTreeMap::new();
    for f in live {
        let changed = times.changed_ms(f.sequence_number.unwrap_or(0), f.snapshot_id);
        let key = PartitionRef {
            spec_id: f.spec_id,
            path: paths.path(f.spec_id, f.file.partition()),
        };
        let t = last.entry(key).or_insert(i64::MIN);
        *t = (*t).max(changed);
    }
    last.retain(|_, t| *t > since);
    last
}

fn path_bounds(file: &DataFile) -> Option<(String, String)> {
    let lo = file.lower_bounds().get(&POS_DELETE_FILE_PATH_FIELD_ID)?;
    let hi = file.upper_bounds().get(&POS_DELETE_FILE_PATH_FIELD_ID)?;
    match (lo.literal(), hi.literal()) {
        (PrimitiveLiteral::String(a), PrimitiveLiteral::String(b)) => Some((a.clone(), b.clone())),
        _ => None,
    }
}

/// Fill every delete file's scope: the live data files it applies to, by the spec's rules.
///
/// - Equality deletes: data sequence number strictly lower; same spec and partition, or the
///   delete file's spec is unpartitioned (global).
/// - Position deletes: data sequence number lower or equal; same spec and partition; the
///   referenced data file (or exact `file_path` bounds) when recorded.
/// - Deletion vectors: the referenced data file, data sequence number lower or equal.
fn index_scopes(md: &TableMetadata, data: &[Entry], deletes: &mut [DeleteEntry]) {
    let mut by_partition: HashMap<(i32, &Struct), Vec<usize>> = HashMap::new();
    let mut by_path: HashMap<&str, usize> = HashMap::new();
    for (i, e) in data.iter().enumerate() {
        by_partition
            .entry((e.spec_id, e.file.partition()))
            .or_default()
            .push(i);
        by_path.insert(e.file.file_path(), i);
    }
    for del in deletes.iter_mut() {
        let d = &del.entry;
        let scope: Vec<usize> = match del.kind {
            DeleteKind::DeletionVector => d
                .file
                .referenced_data_file()
                .and_then(|p| by_path.get(p.as_str()).copied())
                .filter(|&i| data[i].seq <= d.seq)
                .into_iter()
                .collect(),
            DeleteKind::Position => {
                if let Some(p) = d.file.referenced_data_file() {
                    by_path
                        .get(p.as_str())
                        .copied()
                        .filter(|&i| data[i].seq <= d.seq && data[i].spec_id == d.spec_id)
                        .into_iter()
                        .collect()
                } else {
                    by_partition
                        .get(&(d.spec_id, d.file.partition()))
                        .into_iter()
                        .flatten()
                        .copied()
                        .filter(|&i| data[i].seq <= d.seq)
                        .filter(|&i| {
                            del.path_bounds.as_ref().is_none_or(|(lo, hi)| {
                                let p = data[i].file.file_path();
                                lo.as_str() <= p && p <= hi.as_str()
                            })
                        })
                        .collect()
                }
            }
            DeleteKind::Equality => {
                let global = md
                    .partition_spec_by_id(d.spec_id)
                    .is_none_or(|s| s.is_unpartitioned());
                if global {
                    (0..data.len()).filter(|&i| data[i].seq < d.seq).collect()
                } else {
                    by_partition
                        .get(&(d.spec_id, d.file.partition()))
                        .into_iter()
                        .flatten()
                        .copied()
                        .filter(|&i| data[i].seq < d.seq)
                        .collect()
                }
            }
        };
        del.scope = scope;
    }
}

/// First-fit decreasing into groups of at most `max_bytes` (a larger file is a group alone),
/// each group listed in path order.
fn pack(data: &[Entry], mut files: Vec<usize>, max_bytes: u64) -> Vec<Vec<usize>> {
    files.sort_by(|&a, &b| {
        data[b]
            .file
            .file_size_in_bytes()
            .cmp(&data[a].file.file_size_in_bytes())
            .then_with(|| data[a].file.file_path().cmp(data[b].file.file_path()))
    });
    let mut bins: Vec<(u64, Vec<usize>)> = Vec::new();
    for i in files {
        let size = data[i].file.file_size_in_bytes();
        match bins
            .iter_mut()
            .find(|(used, _)| used.saturating_add(size) <= max_bytes)
        {
            Some((used, bin)) => {
                *used += size;
                bin.push(i);
            }
            None => bins.push((size, vec![i])),
        }
    }
    bins.into_iter()
        .map(|(_, mut bin)| {
            bin.sort_by(|&a, &b| data[a].file.file_path().cmp(data[b].file.file_path()));
            bin
        })
        .collect()
}

#[allow(clippy::too_many_arguments)] // Reason: one private call site; a struct would only rename the arguments.
fn build_group(
    id: u32,
    partition: PartitionRef,
    reasons: Vec<String>,
    bin: &[usize],
    data: &[Entry],
    deletes: &[DeleteEntry],
    applicable: &[Vec<usize>],
    dangling: &[usize],
    target: u64,
) -> FileGroup {
    let mut used: BTreeMap<usize, usize> = BTreeMap::new();
    for &i in bin {
        for &d in &applicable[i] {
            used.insert(d, 0);
        }
    }
    let mut delete_files = Vec::with_capacity(used.len());
    for (pos, (d, slot)) in used.iter_mut().enumerate() {
        *slot = pos;
        delete_files.push(group_delete(&deletes[*d]));
    }
    let in_group: std::collections::HashSet<usize> = bin.iter().copied().collect();
    let mut removable: Vec<String> = used
        .keys()
        .filter(|&&d| deletes[d].scope.iter().all(|f| in_group.contains(f)))
        .map(|&d| deletes[d].entry.file.file_path().to_string())
        .collect();
    removable.extend(
        dangling
            .iter()
            .map(|&d| deletes[d].entry.file.file_path().to_string()),
    );
    // A Puffin file holds many vectors, one entry each: list each location once.
    removable.sort();
    removable.dedup();
    let data_files: Vec<GroupDataFile> = bin
        .iter()
        .map(|&i| GroupDataFile {
            path: data[i].file.file_path().to_string(),
            size_bytes: data[i].file.file_size_in_bytes(),
            records: data[i].file.record_count(),
            spec_id: data[i].spec_id,
            data_sequence_number: data[i].seq,
            first_row_id: data[i].first_row_id,
            deletes: applicable[i].iter().map(|d| used[d]).collect(),
        })
        .collect();
    let input_bytes: u64 = data_files.iter().map(|f| f.size_bytes).sum();
    FileGroup {
        id,
        partition,
        reasons,
        input_records: data_files.iter().map(|f| f.records).sum(),
        expected_output_files: input_bytes.div_ceil(target.max(1)).max(1),
        input_bytes,
        data_files,
        delete_files,
        removable_delete_files: removable,
    }
}

fn group_delete(d: &DeleteEntry) -> GroupDeleteFile {
    let f = &d.entry.file;
    GroupDeleteFile {
        path: f.file_path().to_string(),
        kind: d.kind,
        size_bytes: f.file_size_in_bytes(),
        records: f.record_count(),
        spec_id: d.entry.spec_id,
        data_sequence_number: d.entry.seq,
        equality_ids: f.equality_ids().unwrap_or_default(),
        referenced_data_file: f.referenced_data_file(),
        content_offset: f.content_offset(),
        content_size_in_bytes: f.content_size_in_bytes(),
    }
}

/// Partition paths as the scanner and planner spell them (so plan chunks select groups).
pub(crate) struct PartitionPaths {
    specs: HashMap<i32, SpecPaths>,
}

struct SpecPaths {
    fields: Vec<PartitionFieldInfo>,
    transforms: Vec<Transform>,
    source_types: Vec<Option<PrimitiveType>>,
}

impl PartitionPaths {
    pub(crate) fn new(md: &TableMetadata) -> Self {
        // A spec may reference a column dropped later: look the source up in every schema.
        let schemas: Vec<&Schema> = std::iter::once(md.current_schema().as_ref())
            .chain(md.schemas_iter().map(AsRef::as_ref))
            .collect();
        let specs = md
            .partition_specs_iter()
            .map(|spec| {
                let mut fields = Vec::new();
                let mut transforms = Vec::new();
                let mut source_types = Vec::new();
                for f in spec.fields() {
                    let source = schemas
                        .iter()
                        .find_map(|s| partition::source_primitive(s, f.source_id));
                    fields.push(PartitionFieldInfo {
                        field_id: f.field_id,
                        name: f.name.clone(),
                        source_id: f.source_id,
                        source_column: None,
                        source_type: None,
                        transform: f.transform.to_string(),
                    });
                    transforms.push(f.transform);
                    source_types.push(source);
                }
                (
                    spec.spec_id(),
                    SpecPaths {
                        fields,
                        transforms,
                        source_types,
                    },
                )
            })
            .collect();
        Self { specs }
    }

    pub(crate) fn path(&self, spec_id: i32, data: &Struct) -> String {
        self.specs.get(&spec_id).map_or_else(String::new, |s| {
            partition::path_of(&partition::tuple(
                &s.fields,
                &s.transforms,
                &s.source_types,
                data,
            ))
        })
    }
}
