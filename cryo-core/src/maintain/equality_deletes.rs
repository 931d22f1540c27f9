//! Turning equality deletes into position deletes (v2) or deletion vectors (v3), the data files
//! untouched: every reader then finds a deleted row by its position instead of comparing every
//! row it reads with every key of every equality delete file that applies.
//!
//! ```text
//! load S0 ─▶ live files ─▶ per partition (one group each, every data file of it):
//!              v3: a data file the deletes hit holds a deletion vector or position deletes
//!              (it takes one vector), a data file of an older spec, a partition too recently
//!              changed ─▶ left, with the reason (a rewrite applies them)
//!          ─▶ an equality delete file is converted when every live data file it applies to
//!              (its partition's, or every one for a global delete, older than it) is in a
//!              partition converted
//!          ─▶ dry run: that plan
//!          ─▶ each data file those deletes apply to: read its key columns only, positions of
//!              the rows a key matches (those already deleted by position left out)
//!          ─▶ write_position_deletes (v2) / write_deletion_vectors (v3)
//!   ┌───────▼────────────────────────────────────────────────────────────────┐
//!   │ on a newer head: every converted delete file still live, every data    │─ no ─▶ conflict:
//!   │ file it applies to one the positions were read from, every data file   │  new files
//!   │ given positions still live (v3: and still without a vector)            │  deleted
//!   └───────┬────────────────────────────────────────────────────────────────┘
//!           ▼ yes
//!   SnapshotProducer::replace(head): remove the equality delete files, add the new ones
//!   ─▶ commit (the commit driver: retry on a moved head, fence, unknown outcomes)
//! ```
//!
//! The new delete files take the new snapshot's sequence number. They name each row by its data
//! file's path, so they apply to exactly the rows the equality deletes removed from the data
//! files that existed; a data file written later was never subject to those deletes, and is
//! subject to none of the new ones. The table's rows do not change: the snapshot is a `replace`.
//!
//! Iceberg's Java library declares this action (`ConvertEqualityDeleteFiles`) without an
//! implementation; Spark and Trino apply equality deletes only by rewriting the data files,
//! which the planner chooses where that is cheaper (see [`crate::plan::EqualityDeleteMethod`]).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use iceberg::spec::{DataContentType, DataFile, FormatVersion};
use serde::{Deserialize, Serialize};

use crate::catalog::{Catalog, LoadedTable, TableId};
use crate::clock::Clock;
use crate::commit::driver::{Attempt, AttemptContext, CommitDriver, CommitOp, Driven};
use crate::commit::{
    CommitFence, LiveFile, RetryPolicy, SnapshotProducer, expect_counts, live_files,
    write_deletion_vectors_of, write_position_deletes_of,
};
use crate::compact::{
    CompactOptions, DataReader, DeleteKind, EqualitySet, GroupDeletes, PartitionPaths,
    PartitionRef, equality_positions, plan_compaction_of,
};
use crate::error::{Error, Result};
use crate::receipt::Footprint;

/// What to convert and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConvertEqualityDeletesOptions {
    /// Plan only: report the delete files that would be converted and the data files whose key
    /// columns would be read; change nothing. Off by default: the conversion changes no row
    /// and deletes no file (the equality delete files stay with the older snapshots until they
    /// expire).
    pub dry_run: bool,
    /// Partitions to convert; `None`: every partition. A global equality delete (of an
    /// unpartitioned spec) is converted only when every partition it applies to is.
    pub partitions: Option<BTreeSet<PartitionRef>>,
    /// Data files read at once.
    pub concurrency: usize,
    /// Leave alone every partition that a commit changed less than this many milliseconds ago
    /// (as [`CompactOptions::quiet_period_ms`]); `None`: convert hot ones too.
    pub quiet_period_ms: Option<u64>,
    /// Commit retries; `None`: the table's `commit.retry.*` properties, else Java's defaults.
    pub retry: Option<RetryPolicy>,
    /// Take this commit fence around the commit (see [`CommitFence`]); `None`: commit without it.
    pub commit_fence: Option<CommitFence>,
}

impl Default for ConvertEqualityDeletesOptions {
    fn default() -> Self {
        Self {
            dry_run: false,
            partitions: None,
            concurrency: 4,
            quiet_period_ms: None,
            retry: None,
            commit_fence: None,
        }
    }
}

impl ConvertEqualityDeletesOptions {
    /// Reject options that cannot work.
    pub fn validate(&self) -> Result<()> {
        if self.concurrency == 0 {
            return Err(Error::validation("concurrency must be at least 1"));
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

/// A partition whose equality deletes stay, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LeftPartition {
    /// Partition.
    pub partition: PartitionRef,
    /// Why its deletes are not converted (a rewrite of its data files applies them).
    pub reason: String,
}

/// How a conversion ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ConvertEqualityDeletesStatus {
    /// No equality delete file could be converted (none, or every partition left: see
    /// [`ConvertEqualityDeletesOutcome::left`]).
    Nothing,
    /// Dry run: this is what would be done.
    DryRun,
    /// Committed in this snapshot.
    Committed {
        /// The snapshot.
        snapshot_id: i64,
    },
    /// A concurrent commit changed what the conversion read.
    Conflicted {
        /// What changed.
        reason: String,
        /// Whether the new delete files were deleted (false when an earlier attempt's commit had
        /// an unknown outcome: they may be live, and orphan removal finds them if not).
        files_deleted: bool,
    },
}

/// The outcome of converting one table's equality deletes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ConvertEqualityDeletesOutcome {
    /// Table.
    pub table: TableId,
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// Snapshot read.
    pub base_snapshot_id: Option<i64>,
    /// How it ended.
    pub status: ConvertEqualityDeletesStatus,
    /// Equality delete files of the table before.
    pub equality_delete_files: u64,
    /// Their bytes.
    pub equality_delete_bytes: u64,
    /// Equality delete files converted (to convert, in a dry run): they leave the table.
    pub files_converted: u64,
    /// Their bytes.
    pub bytes_converted: u64,
    /// Data files whose key columns were read (to read, in a dry run).
    pub data_files_read: u64,
    /// Their bytes (the key columns are a part of them).
    pub data_bytes: u64,
    /// Rows the converted deletes delete, now by position (0 in a dry run).
    pub positions: u64,
    /// New delete files (Puffin entries for deletion vectors; 0 in a dry run).
    pub delete_files_added: u64,
    /// Their bytes (a Puffin file counted once).
    pub delete_bytes_added: u64,
    /// Format v3: the new deletes are deletion vectors; else position delete files.
    pub deletion_vectors: bool,
    /// Partitions whose equality deletes stay, and why.
    pub left: Vec<LeftPartition>,
    /// Snapshots committed (at most one).
    pub snapshot_ids: Vec<i64>,
    /// Failed commit attempts before the outcome.
    pub retries: u32,
    /// Wall time.
    pub duration_ms: u64,
}

impl ConvertEqualityDeletesOutcome {
    /// The table's equality delete files before.
    pub fn before(&self) -> Footprint {
        Footprint {
            files: self.equality_delete_files,
            bytes: self.equality_delete_bytes,
        }
    }

    /// Its delete files after, of the kinds this changed: the equality delete files left and
    /// the new position deletes (expected, in a dry run: new files unknown).
    pub fn after(&self) -> Footprint {
        let done = matches!(
            self.status,
            ConvertEqualityDeletesStatus::Committed { .. } | ConvertEqualityDeletesStatus::DryRun
        );
        if !done {
            return self.before();
        }
        Footprint {
            files: self.equality_delete_files - self.files_converted + self.delete_files_added,
            bytes: self.equality_delete_bytes - self.bytes_converted + self.delete_bytes_added,
        }
    }
}

/// The conversion of one table's equality deletes: a builder that ends in
/// [`ConvertEqualityDeletes::execute`].
#[derive(Debug)]
pub struct ConvertEqualityDeletes<'a> {
    catalog: &'a Catalog,
    table: TableId,
    options: ConvertEqualityDeletesOptions,
    clock: Arc<dyn Clock>,
}

impl<'a> ConvertEqualityDeletes<'a> {
    /// Convert the equality deletes of `table` in `catalog`, every partition.
    pub fn new(catalog: &'a Catalog, table: TableId) -> Self {
        Self {
            catalog,
            table,
            options: ConvertEqualityDeletesOptions::default(),
            clock: crate::clock::system(),
        }
    }

    /// The clock that stamps the snapshot and judges the quiet period.
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Options.
    #[must_use]
    pub fn with_options(mut self, options: ConvertEqualityDeletesOptions) -> Self {
        self.options = options;
        self
    }

    /// Only say what would be converted.
    #[must_use]
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.options.dry_run = dry_run;
        self
    }

    /// Read the key columns, write the position deletes, commit.
    pub async fn execute(self) -> Result<ConvertEqualityDeletesOutcome> {
        self.prepare().await?.commit().await
    }

    /// Plan, read and write, without committing: the new delete files are on storage and
    /// [`PreparedConversion::commit`] (or [`PreparedConversion::abort`]) ends it. A dry run, or a
    /// table with nothing to convert, prepares nothing to commit.
    pub async fn prepare(self) -> Result<PreparedConversion<'a>> {
        prepare(self.catalog, &self.table, &self.options, self.clock).await
    }
}

/// A conversion whose new delete files are written and not yet committed.
#[derive(Debug)]
pub struct PreparedConversion<'a> {
    catalog: &'a Catalog,
    options: ConvertEqualityDeletesOptions,
    base: LoadedTable,
    outcome: ConvertEqualityDeletesOutcome,
    removed: Vec<DeleteScope>,
    converted: HashSet<String>,
    referenced: Vec<String>,
    added: Vec<DataFile>,
    clock: Arc<dyn Clock>,
    started: Instant,
}

impl PreparedConversion<'_> {
    /// What it will commit (the dry run's answer, for a dry run).
    pub fn outcome(&self) -> &ConvertEqualityDeletesOutcome {
        &self.outcome
    }

    /// The new delete files, written and not yet committed.
    pub fn written_files(&self) -> Vec<String> {
        let mut paths: Vec<String> = self
            .added
            .iter()
            .map(|f| f.file_path().to_string())
            .collect();
        paths.dedup();
        paths
    }

    /// Delete the new files; nothing is committed.
    pub async fn abort(self) -> Result<()> {
        let mut op = self.op();
        op.give_up(&Error::Internal("aborted".to_string()), true, 0)
            .await;
        Ok(())
    }

    fn op(&self) -> ConvertCommit<'_> {
        ConvertCommit {
            base: &self.base,
            removed: self.removed.clone(),
            converted: self.converted.clone(),
            referenced: self.referenced.clone(),
            added: self.added.clone(),
            v3: self.outcome.deletion_vectors,
            clock: Arc::clone(&self.clock),
            files_deleted: false,
        }
    }

    /// Commit through the commit driver, validating the head if it moved since the read.
    pub async fn commit(self) -> Result<ConvertEqualityDeletesOutcome> {
        let mut outcome = self.outcome.clone();
        let done = |mut o: ConvertEqualityDeletesOutcome| {
            o.duration_ms = self.started.elapsed().as_millis() as u64;
            o
        };
        if outcome.dry_run || self.removed.is_empty() {
            return Ok(done(outcome));
        }
        let table = &outcome.table.clone();
        let committer = self.catalog.committer()?;
        let policy = match &self.options.retry {
            Some(p) => Ok(p.clone()),
            None => RetryPolicy::for_table(self.base.metadata.properties())
                .map_err(|e| e.in_table(table)),
        };
        let mut op = self.op();
        let mut driver = match policy.and_then(|p| CommitDriver::new(committer.as_ref(), p)) {
            Ok(d) => d.with_fence(self.options.commit_fence.as_ref(), self.catalog.name()),
            Err(e) => {
                op.give_up(&e, true, 0).await;
                return Err(e);
            }
        };
        let mut head = self.base.clone();
        let result = driver.drive(&mut head, &mut op).await;
        outcome.retries = driver.retries();
        match result {
            Ok(Driven::Landed(l)) => {
                let snapshot_id = l.snapshot_id.unwrap_or_default();
                let equality: u64 = self.removed.iter().map(|d| d.records).sum();
                expect_counts(
                    &l.summary,
                    &[
                        ("added-position-deletes", outcome.positions),
                        ("removed-equality-deletes", equality),
                    ],
                    "conversion",
                )?;
                outcome.status = ConvertEqualityDeletesStatus::Committed { snapshot_id };
                outcome.snapshot_ids.push(snapshot_id);
                tracing::info!(
                    table = %table,
                    snapshot_id,
                    converted = outcome.files_converted,
                    positions = outcome.positions,
                    "equality deletes converted"
                );
            }
            Ok(Driven::Nothing(_)) => {}
            Err(Error::CommitConflict {
                message,
                retryable: false,
                ..
            }) => {
                tracing::info!(table = %table, reason = %message, "equality-delete conversion aborted by validation");
                outcome.status = ConvertEqualityDeletesStatus::Conflicted {
                    reason: message,
                    files_deleted: op.files_deleted,
                };
            }
            Err(e) => return Err(e),
        }
        Ok(done(outcome))
    }
}

/// Where an equality delete file applies: the live data files of its partition (every one when
/// its spec is unpartitioned) older than it.
#[derive(Debug, Clone)]
struct DeleteScope {
    path: String,
    records: u64,
    bytes: u64,
    spec_id: i32,
    partition: String,
    global: bool,
    seq: i64,
}

impl DeleteScope {
    fn of(f: &LiveFile, paths: &PartitionPaths, table: &LoadedTable) -> Self {
        let global = table
            .metadata
            .partition_spec_by_id(f.spec_id)
            .is_none_or(|s| s.is_unpartitioned());
        Self {
            path: f.file.file_path().to_string(),
            records: f.file.record_count(),
            bytes: f.file.file_size_in_bytes(),
            spec_id: f.spec_id,
            partition: paths.path(f.spec_id, f.file.partition()),
            global,
            seq: f.sequence_number.unwrap_or(0),
        }
    }

    /// The live data files of `index` it applies to.
    fn applies_to<'b, 'a: 'b>(
        &'b self,
        index: &'b DataIndex<'a>,
    ) -> Box<dyn Iterator<Item = &'a str> + 'b> {
        let seq = self.seq;
        let older = move |&(s, p): &(i64, &'a str)| (s < seq).then_some(p);
        if self.global {
            Box::new(index.by_partition.values().flatten().filter_map(older))
        } else {
            Box::new(
                index
                    .by_partition
                    .get(&(self.spec_id, self.partition.clone()))
                    .into_iter()
                    .flatten()
                    .filter_map(older),
            )
        }
    }
}

/// The live data files of a snapshot by partition (spec id, partition path), each with its
/// data sequence number: built once, so that matching every equality delete with the files it
/// applies to formats each file's partition path once.
struct DataIndex<'a> {
    by_partition: HashMap<(i32, String), Vec<(i64, &'a str)>>,
}

impl<'a> DataIndex<'a> {
    fn new(live: &'a [LiveFile], paths: &PartitionPaths) -> Self {
        let mut by_partition: HashMap<(i32, String), Vec<(i64, &'a str)>> = HashMap::new();
        for d in live
            .iter()
            .filter(|d| d.file.content_type() == DataContentType::Data)
        {
            by_partition
                .entry((d.spec_id, paths.path(d.spec_id, d.file.partition())))
                .or_default()
                .push((d.sequence_number.unwrap_or(0), d.file.file_path()));
        }
        Self { by_partition }
    }
}

/// A data file whose key columns are read, with the converted deletes that apply to it.
struct Target {
    file: crate::compact::GroupDataFile,
    group: usize,
    /// Indexes into the group's delete files.
    deletes: Vec<usize>,
}

/// Convert the equality deletes of `table`'s current snapshot.
pub async fn convert_equality_deletes(
    catalog: &Catalog,
    table: &TableId,
    options: &ConvertEqualityDeletesOptions,
) -> Result<ConvertEqualityDeletesOutcome> {
    prepare(catalog, table, options, crate::clock::system())
        .await?
        .commit()
        .await
}

#[allow(
    clippy::too_many_lines,
    reason = "one pass: plan, read, write, each step short"
)]
async fn prepare<'a>(
    catalog: &'a Catalog,
    table: &TableId,
    options: &ConvertEqualityDeletesOptions,
    clock: Arc<dyn Clock>,
) -> Result<PreparedConversion<'a>> {
    let started = Instant::now();
    options.validate()?;
    let base = catalog.load_table(table).await?;
    let md = base.metadata.as_ref();
    let v3 = md.format_version() >= FormatVersion::V3;
    let mut outcome = ConvertEqualityDeletesOutcome {
        table: table.clone(),
        dry_run: options.dry_run,
        base_snapshot_id: md.current_snapshot_id(),
        status: ConvertEqualityDeletesStatus::Nothing,
        equality_delete_files: 0,
        equality_delete_bytes: 0,
        files_converted: 0,
        bytes_converted: 0,
        data_files_read: 0,
        data_bytes: 0,
        positions: 0,
        delete_files_added: 0,
        delete_bytes_added: 0,
        deletion_vectors: v3,
        left: Vec::new(),
        snapshot_ids: Vec::new(),
        retries: 0,
        duration_ms: 0,
    };
    let nothing = |outcome: ConvertEqualityDeletesOutcome| PreparedConversion {
        catalog,
        options: options.clone(),
        base: base.clone(),
        outcome,
        removed: Vec::new(),
        converted: HashSet::new(),
        referenced: Vec::new(),
        added: Vec::new(),
        clock: Arc::clone(&clock),
        started,
    };
    if md.format_version() < FormatVersion::V2 || md.current_snapshot().is_none() {
        return Ok(nothing(outcome));
    }
    let live = live_files(&base).await?;
    let paths = PartitionPaths::new(md);
    let equality: Vec<DeleteScope> = live
        .iter()
        .filter(|f| f.file.content_type() == DataContentType::EqualityDeletes)
        .map(|f| DeleteScope::of(f, &paths, &base))
        .collect();
    outcome.equality_delete_files = equality.len() as u64;
    outcome.equality_delete_bytes = equality.iter().map(|d| d.bytes).sum();
    if equality.is_empty() {
        return Ok(nothing(outcome));
    }

    // Every data file of each selected partition, in one group per partition, with the deletes
    // that apply to it.
    let plan = plan_compaction_of(
        &base,
        &CompactOptions {
            max_file_group_size_bytes: u64::MAX,
            partitions: options.partitions.clone(),
            concurrency: options.concurrency,
            quiet_period_ms: options.quiet_period_ms,
            ..CompactOptions::every_file()
        },
        clock.now_ms(),
        live.clone(),
    )?;
    let default_spec = md.default_partition_spec_id();
    for s in &plan.skipped {
        outcome.left.push(LeftPartition {
            partition: s.partition.clone(),
            reason: s.reason.clone(),
        });
    }
    // The groups that can be converted, and the data files in them.
    let mut convertible: Vec<usize> = Vec::new();
    for (i, g) in plan.groups.iter().enumerate() {
        let eq: HashSet<usize> = (0..g.delete_files.len())
            .filter(|&d| g.delete_files[d].kind == DeleteKind::Equality)
            .collect();
        let hit = || {
            g.data_files
                .iter()
                .filter(|f| f.deletes.iter().any(|d| eq.contains(d)))
        };
        if eq.is_empty() {
            continue;
        }
        let reason = if let Some(f) = hit().find(|f| f.spec_id != default_spec) {
            Some(format!(
                "data file {} was written with partition spec {}, not the default one",
                f.path, f.spec_id
            ))
        } else if v3 {
            hit()
                .find(|f| f.deletes.iter().any(|d| g.delete_files[*d].kind != DeleteKind::Equality))
                .map(|f| {
                    format!(
                        "data file {} already has position deletes or a deletion vector (format v3 allows one vector per data file)",
                        f.path
                    )
                })
        } else {
            None
        };
        match reason {
            Some(reason) => outcome.left.push(LeftPartition {
                partition: g.partition.clone(),
                reason,
            }),
            None => convertible.push(i),
        }
    }
    let converted: HashSet<&str> = convertible
        .iter()
        .flat_map(|&i| plan.groups[i].data_files.iter().map(|f| f.path.as_str()))
        .collect();
    // An equality delete file goes only where every data file it applies to is converted.
    let index = DataIndex::new(&live, &paths);
    let removable: Vec<&DeleteScope> = equality
        .iter()
        .filter(|d| d.applies_to(&index).all(|f| converted.contains(f)))
        .collect();
    let removable_paths: HashSet<&str> = removable.iter().map(|d| d.path.as_str()).collect();
    let mut targets: Vec<Target> = Vec::new();
    for &i in &convertible {
        let g = &plan.groups[i];
        for f in &g.data_files {
            let deletes: Vec<usize> = f
                .deletes
                .iter()
                .copied()
                .filter(|&d| {
                    g.delete_files[d].kind == DeleteKind::Equality
                        && removable_paths.contains(g.delete_files[d].path.as_str())
                })
                .collect();
            if !deletes.is_empty() {
                targets.push(Target {
                    file: f.clone(),
                    group: i,
                    deletes,
                });
            }
        }
    }
    outcome.files_converted = removable.len() as u64;
    outcome.bytes_converted = removable.iter().map(|d| d.bytes).sum();
    outcome.data_files_read = targets.len() as u64;
    outcome.data_bytes = targets.iter().map(|t| t.file.size_bytes).sum();
    if removable.is_empty() {
        return Ok(nothing(outcome));
    }
    if options.dry_run {
        outcome.status = ConvertEqualityDeletesStatus::DryRun;
        return Ok(nothing(outcome));
    }

    // Read the key columns, group by group (one group's delete sets in memory at a time).
    let reader = DataReader::new(&base)?;
    let schema = md.current_schema();
    let mut found: Vec<(String, Vec<i64>)> = Vec::new();
    for &i in &convertible {
        let g = &plan.groups[i];
        let mine: Vec<&Target> = targets.iter().filter(|t| t.group == i).collect();
        if mine.is_empty() {
            continue;
        }
        let deletes = GroupDeletes::load(&base, g, &reader, schema).await?;
        let name = table.to_string();
        let jobs: Vec<_> = mine
            .into_iter()
            .map(|t| {
                let sets: Vec<Arc<EqualitySet>> = t
                    .deletes
                    .iter()
                    .filter_map(|d| deletes.equality.get(d).cloned())
                    .collect();
                let skip = deletes.positions.get(&t.file.path).cloned();
                (t.file.clone(), sets, skip, reader.clone(), name.clone())
            })
            .collect();
        let mut reads = futures::stream::iter(jobs)
            .map(|(file, sets, skip, reader, name)| async move {
                let skip = skip.as_deref().map_or(&[][..], Vec::as_slice);
                let set = equality_positions(&reader, &name, &file, &sets, skip).await?;
                Ok::<_, Error>((file.path, set))
            })
            .buffer_unordered(options.concurrency);
        while let Some(r) = reads.next().await {
            let (path, set) = r?;
            if !set.is_empty() {
                outcome.positions += set.len();
                let positions = set
                    .iter()
                    .map(|p| {
                        i64::try_from(p).map_err(|_| {
                            Error::metadata(table, &path, format!("position {p} out of range"))
                        })
                    })
                    .collect::<Result<Vec<i64>>>()?;
                found.push((path, positions));
            }
        }
    }
    found.sort();

    // Write the new deletes.
    let added: Vec<DataFile> = if found.is_empty() {
        Vec::new()
    } else if v3 {
        let vectors = write_deletion_vectors_of(&base, &live, &found).await?;
        if !vectors.superseded.is_empty() {
            // Files with a vector were left out above; a merge here would need its removal.
            return Err(Error::Internal(format!(
                "{table}: conversion merged into the deletion vectors of {:?}",
                vectors.superseded
            )));
        }
        vectors.files
    } else {
        write_position_deletes_of(&base, &live, &found).await?.files
    };
    outcome.delete_files_added = added.len() as u64;
    let mut counted: HashSet<&str> = HashSet::new();
    outcome.delete_bytes_added = added
        .iter()
        .filter(|f| counted.insert(f.file_path()))
        .map(DataFile::file_size_in_bytes)
        .sum();

    Ok(PreparedConversion {
        catalog,
        options: options.clone(),
        removed: removable.into_iter().cloned().collect(),
        converted: converted.iter().map(|p| (*p).to_string()).collect(),
        referenced: found.into_iter().map(|(p, _)| p).collect(),
        added,
        base,
        outcome,
        clock,
        started,
    })
}

/// The conversion as the commit driver sees it.
struct ConvertCommit<'a> {
    base: &'a LoadedTable,
    /// The equality delete files removed.
    removed: Vec<DeleteScope>,
    /// Every data file of the partitions converted (their key columns read where a removed
    /// delete applies).
    converted: HashSet<String>,
    /// The data files the new deletes name.
    referenced: Vec<String>,
    added: Vec<DataFile>,
    v3: bool,
    clock: Arc<dyn Clock>,
    /// Set by `give_up` once the new files are deleted.
    files_deleted: bool,
}

impl ConvertCommit<'_> {
    /// Why the conversion cannot commit on `head`, if it cannot.
    fn conflict(&self, head: &LoadedTable, live: &[LiveFile]) -> Option<String> {
        let paths = PartitionPaths::new(head.metadata.as_ref());
        let live_paths: HashSet<&str> = live.iter().map(|f| f.file.file_path()).collect();
        if let Some(d) = self
            .removed
            .iter()
            .find(|d| !live_paths.contains(d.path.as_str()))
        {
            return Some(format!(
                "equality delete file {} is no longer live (another commit removed or replaced it)",
                d.path
            ));
        }
        if let Some(p) = self
            .referenced
            .iter()
            .find(|p| !live_paths.contains(p.as_str()))
        {
            return Some(format!(
                "data file {p} is no longer live (another commit rewrote or removed it)"
            ));
        }
        let index = DataIndex::new(live, &paths);
        for d in &self.removed {
            if let Some(f) = d.applies_to(&index).find(|f| !self.converted.contains(*f)) {
                return Some(format!(
                    "data file {f}, which {} applies to, was committed after the conversion read the table",
                    d.path
                ));
            }
        }
        if self.v3 {
            let named: HashSet<&str> = self.referenced.iter().map(String::as_str).collect();
            if let Some(f) = live.iter().find(|f| {
                f.file.content_type() == DataContentType::PositionDeletes
                    && f.file
                        .referenced_data_file()
                        .is_some_and(|r| named.contains(r.as_str()))
                    && !self
                        .added
                        .iter()
                        .any(|a| a.file_path() == f.file.file_path())
            }) {
                return Some(format!(
                    "another commit gave data file {} a deletion vector",
                    f.file.referenced_data_file().unwrap_or_default()
                ));
            }
        }
        None
    }
}

impl CommitOp for ConvertCommit<'_> {
    async fn attempt(&mut self, head: &LoadedTable, _cx: AttemptContext<'_>) -> Result<Attempt> {
        if head.metadata.current_snapshot_id() != self.base.metadata.current_snapshot_id() {
            let live = live_files(head).await?;
            if let Some(reason) = self.conflict(head, &live) {
                return Err(Error::CommitConflict {
                    table: head.id.to_string(),
                    message: reason,
                    retryable: false,
                });
            }
        }
        let producer = SnapshotProducer::replace(head)
            .with_clock(Arc::clone(&self.clock))
            .set_snapshot_property("cryo.operation", "convert_equality_deletes")
            .remove_delete_files(self.removed.iter().map(|d| d.path.clone()))
            .add_delete_files(self.added.clone());
        Ok(Attempt::Snapshot(Box::new(producer.stage().await?)))
    }

    async fn give_up(&mut self, err: &Error, delete_written: bool, _attempts: u32) {
        // Only a commit that certainly did not land lets the new files go.
        if !delete_written {
            return;
        }
        self.files_deleted = true;
        let mut seen = HashSet::new();
        for f in &self.added {
            let path = f.file_path();
            if seen.insert(path)
                && let Err(e) = self.base.storage.delete(path).await
            {
                tracing::warn!(file = path, error = %e, cause = %err, "uncommitted delete file left behind");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_validated() {
        assert!(ConvertEqualityDeletesOptions::default().validate().is_ok());
        assert!(!ConvertEqualityDeletesOptions::default().dry_run);
        let bad = ConvertEqualityDeletesOptions {
            concurrency: 0,
            ..Default::default()
        };
        assert!(matches!(bad.validate(), Err(Error::Validation { .. })));
        assert!(serde_json::from_str::<ConvertEqualityDeletesOptions>(r#"{"dry": true}"#).is_err());
    }
}
