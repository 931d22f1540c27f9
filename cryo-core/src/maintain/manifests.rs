//! Rewriting manifests: live entries clustered by partition into manifests near the table's
//! target size, committed as Iceberg's rewrite-manifests `replace` snapshot (Java's
//! `RewriteManifests`, Spark's `rewrite_manifests`).
//!
//! ```text
//! load S0 ─▶ read S0's manifests ─▶ group by (data | deletes, spec id)
//!              │  per group: which manifests to replace, and why
//!              ▼      (DELETED entries, no live entry, small, overlapping partition ranges, oversized)
//!           plan_manifest_rewrite ─▶ ManifestRewritePlan (the dry run's answer)
//!              │  live entries sorted by partition tuple, cut into manifests near the target
//!   ┌──────────▼──────────────────────────────┐
//!   │ head still lists every replaced manifest?│── no ─▶ plan again on the head (a retry;
//!   └──────────┬──────────────────────────────┘        Error::CommitConflict once spent)
//!              ▼ yes (manifests added meanwhile are kept)
//!  SnapshotProducer::rewrite_manifests(head) ─▶ stage ─▶ commit ─▶ CommitConflict: back off,
//!                                                               reload the head, check again
//! ```
//!
//! Entries move as `EXISTING` with their snapshot id and data and file sequence numbers, so
//! every delete applies exactly as before; data and delete manifests never mix, nor do specs.
//!
//! # Which manifests are replaced
//!
//! Within one group (content × spec), a manifest is replaced when it
//! - lists `DELETED` entries (they only slow planning: the snapshot that deleted them keeps them)
//!   or no live entry at all;
//! - is *small* — under half the target — and the group has another manifest to replace (a
//!   lone small manifest stays);
//! - *overlaps*: the range of partition tuples it lists overlaps another manifest's range by more
//!   than a shared end point, so a partition filter has to read both; or
//! - is *oversized* — over twice the target — and lists more than one partition.
//!
//! Replaced entries are sorted by partition tuple and cut into `⌈bytes / target⌉` manifests of
//! equal entry counts, sized with Cryo's own manifest writer (measured on a sample encoded in
//! memory; other writers compress, so their sizes say little). A kept manifest whose range
//! overlaps the new manifests' range is replaced too, so the result is clustered. A group is
//! left alone when replacing its small manifests would not reduce their number and none of
//! them has to go for another reason: a second run on a rewritten table changes nothing.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use iceberg::spec::{Literal, Manifest, ManifestContentType, ManifestFile, Struct};
use serde::{Deserialize, Serialize};

use crate::catalog::{Catalog, LoadedTable, TableId};
use crate::clock::{Clock, SystemClock};
use crate::commit::driver::{Attempt, AttemptContext, CommitDriver, CommitOp, Driven, Prepared};
use crate::commit::{
    ENTRIES_PROCESSED, ExistingEntry, MANIFESTS_CREATED, MANIFESTS_KEPT, MANIFESTS_REPLACED,
    NewManifest, RetryPolicy, SnapshotProducer, existing_entries, manifest_size_model,
    read_manifest_list, read_manifests,
};
use crate::error::{Error, Result};
use crate::receipt::Footprint;

/// Java's table property for the size of manifests a rewrite writes.
pub const MANIFEST_TARGET_SIZE_PROPERTY: &str = "commit.manifest.target-size-bytes";
/// Java's default target (8 MiB).
pub const DEFAULT_MANIFEST_TARGET_SIZE: u64 = 8 << 20;
/// Smallest target accepted: below it every manifest would hold a handful of entries.
pub const MIN_MANIFEST_TARGET_SIZE: u64 = 4 << 10;

/// Entries encoded to size the new manifests.
const SIZING_SAMPLE: usize = 128;

/// What to rewrite and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RewriteManifestsOptions {
    /// Plan only: report the manifests that would be replaced and the count after; change
    /// nothing. Off by default: a manifest rewrite deletes no file and changes no row (the
    /// replaced manifests stay with the older snapshots until they expire).
    pub dry_run: bool,
    /// Size of the manifests written; `None`: the table's `commit.manifest.target-size-bytes`,
    /// else 8 MiB.
    pub target_size_bytes: Option<u64>,
    /// Only manifests of this partition spec; `None`: every spec.
    pub spec_id: Option<i32>,
    /// Rewrite data manifests.
    pub rewrite_data_manifests: bool,
    /// Rewrite delete manifests (each with delete manifests only).
    pub rewrite_delete_manifests: bool,
    /// Commit retries; `None`: the table's `commit.retry.*` properties, else Java's defaults.
    pub retry: Option<RetryPolicy>,
    /// Commit under this commit fence, so that no cooperating writer's operation overlaps the
    /// commit (see [`crate::govern::CommitFence`]); `None`: commit without it.
    pub commit_fence: Option<crate::govern::CommitFence>,
}

impl Default for RewriteManifestsOptions {
    fn default() -> Self {
        Self {
            dry_run: false,
            target_size_bytes: None,
            spec_id: None,
            rewrite_data_manifests: true,
            rewrite_delete_manifests: true,
            retry: None,
            commit_fence: None,
        }
    }
}

impl RewriteManifestsOptions {
    /// Reject options that cannot work.
    pub fn validate(&self) -> Result<()> {
        if let Some(t) = self.target_size_bytes
            && t < MIN_MANIFEST_TARGET_SIZE
        {
            return Err(Error::validation(format!(
                "target_size_bytes must be at least {MIN_MANIFEST_TARGET_SIZE}, got {t}"
            )));
        }
        if !self.rewrite_data_manifests && !self.rewrite_delete_manifests {
            return Err(Error::validation(
                "nothing to rewrite: rewrite_data_manifests and rewrite_delete_manifests are both off",
            ));
        }
        if let Some(r) = &self.retry {
            r.validate()?;
        }
        Ok(())
    }

    /// The target size for `table`: the option, else the table property, else 8 MiB.
    pub fn target_size(&self, table: &LoadedTable) -> Result<u64> {
        if let Some(t) = self.target_size_bytes {
            return Ok(t);
        }
        match table
            .metadata
            .properties()
            .get(MANIFEST_TARGET_SIZE_PROPERTY)
            .map(|v| v.trim())
        {
            None | Some("") => Ok(DEFAULT_MANIFEST_TARGET_SIZE),
            Some(v) => v
                .parse::<u64>()
                .ok()
                .filter(|n| *n >= MIN_MANIFEST_TARGET_SIZE)
                .ok_or_else(|| {
                    Error::config(format!(
                        "{}: table property {MANIFEST_TARGET_SIZE_PROPERTY}={v} is not a size of at least {MIN_MANIFEST_TARGET_SIZE} bytes",
                        table.id
                    ))
                }),
        }
    }
}

/// Data or delete manifests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ManifestKind {
    /// Manifests of data files.
    Data,
    /// Manifests of delete files.
    Deletes,
}

impl ManifestKind {
    fn of(content: ManifestContentType) -> Self {
        match content {
            ManifestContentType::Data => ManifestKind::Data,
            ManifestContentType::Deletes => ManifestKind::Deletes,
        }
    }

    fn content(self) -> ManifestContentType {
        match self {
            ManifestKind::Data => ManifestContentType::Data,
            ManifestKind::Deletes => ManifestContentType::Deletes,
        }
    }
}

/// Why a manifest is replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplaceReason {
    /// It lists `DELETED` entries.
    DeletedEntries,
    /// It lists no live entry.
    NoLiveEntries,
    /// It is under half the target and can be merged.
    Small,
    /// Its partition range overlaps another manifest's.
    Overlapping,
    /// It is over twice the target and lists several partitions.
    Oversized,
}

/// One manifest the rewrite replaces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ReplacedManifest {
    /// Location, as the manifest list names it.
    pub path: String,
    /// Its length in bytes.
    pub length: u64,
    /// Live (`ADDED`/`EXISTING`) entries, carried into the new manifests.
    pub live_entries: u64,
    /// `DELETED` entries, dropped.
    pub deleted_entries: u64,
    /// Distinct partitions among its live entries.
    pub partitions: u64,
    /// Why it is replaced.
    pub reasons: Vec<ReplaceReason>,
}

/// The rewrite of one group of manifests: one content type, one partition spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ManifestGroup {
    /// Data or delete manifests.
    pub kind: ManifestKind,
    /// Partition spec.
    pub spec_id: i32,
    /// Manifests replaced.
    pub replaced: Vec<ReplacedManifest>,
    /// Manifests of this group left as they are.
    pub kept: usize,
    /// Live entries moved.
    pub entries: u64,
    /// Manifests written in their place.
    pub expected_manifests: usize,
    /// Their estimated bytes (Cryo's writer does not compress).
    pub expected_bytes: u64,
}

/// What a manifest rewrite will do, computed from the manifests of the base snapshot: the
/// answer of a dry run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ManifestRewritePlan {
    /// Table.
    pub table: TableId,
    /// Snapshot planned from (`None`: the table has no snapshot).
    pub base_snapshot_id: Option<i64>,
    /// Target manifest size.
    pub target_size_bytes: u64,
    /// Manifests the base snapshot lists (every kind and spec).
    pub manifests_before: usize,
    /// Their bytes.
    pub bytes_before: u64,
    /// Groups with work, by kind then spec id.
    pub groups: Vec<ManifestGroup>,
}

impl ManifestRewritePlan {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Manifests replaced.
    pub fn manifests_replaced(&self) -> usize {
        self.groups.iter().map(|g| g.replaced.len()).sum()
    }

    /// Manifests written.
    pub fn manifests_created(&self) -> usize {
        self.groups.iter().map(|g| g.expected_manifests).sum()
    }

    /// Live entries moved.
    pub fn entries(&self) -> u64 {
        self.groups.iter().map(|g| g.entries).sum()
    }

    /// Manifests the table lists after the rewrite (if nobody else commits meanwhile).
    pub fn expected_manifests_after(&self) -> usize {
        self.manifests_before - self.manifests_replaced() + self.manifests_created()
    }

    /// Bytes of those manifests (estimated for the new ones).
    pub fn expected_bytes_after(&self) -> u64 {
        let replaced: u64 = self
            .groups
            .iter()
            .flat_map(|g| &g.replaced)
            .map(|m| m.length)
            .sum();
        let created: u64 = self.groups.iter().map(|g| g.expected_bytes).sum();
        self.bytes_before.saturating_sub(replaced) + created
    }

    /// Paths of the manifests replaced.
    pub fn replaced_paths(&self) -> BTreeSet<String> {
        self.groups
            .iter()
            .flat_map(|g| &g.replaced)
            .map(|m| m.path.clone())
            .collect()
    }
}

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RewriteManifestsStatus {
    /// A `replace` snapshot was committed.
    Committed,
    /// The manifests are already clustered and sized: no snapshot.
    NothingToDo,
    /// Dry run: the plan says what would be done.
    DryRun,
}

/// The outcome of rewriting one table's manifests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RewriteManifestsOutcome {
    /// Table.
    pub table: TableId,
    /// What happened.
    pub status: RewriteManifestsStatus,
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// Snapshot the rewrite planned from.
    pub base_snapshot_id: Option<i64>,
    /// Snapshot committed (at most one).
    pub snapshot_ids: Vec<i64>,
    /// The plan (the dry run's answer).
    pub plan: ManifestRewritePlan,
    /// Manifests replaced (planned, in a dry run).
    pub manifests_replaced: usize,
    /// Manifests written (expected, in a dry run).
    pub manifests_created: usize,
    /// Manifests of the committed snapshot's parent carried over (expected, in a dry run).
    pub manifests_kept: usize,
    /// Live entries moved.
    pub entries_processed: u64,
    /// Manifests the table listed before.
    pub manifests_before: usize,
    /// Their bytes.
    pub bytes_before: u64,
    /// Manifests the table lists after (expected, in a dry run or when nothing was done).
    pub manifests_after: usize,
    /// Their bytes (estimated in a dry run).
    pub bytes_after: u64,
    /// Failed commit attempts before the commit.
    pub retries: u32,
    /// Wall time.
    pub duration_ms: u64,
}

impl RewriteManifestsOutcome {
    /// The table's manifests before.
    pub fn before(&self) -> Footprint {
        Footprint {
            files: self.manifests_before as u64,
            bytes: self.bytes_before,
        }
    }

    /// The table's manifests after (expected, in a dry run).
    pub fn after(&self) -> Footprint {
        Footprint {
            files: self.manifests_after as u64,
            bytes: self.bytes_after,
        }
    }
}

/// A manifest of the base snapshot, read.
struct ReadManifest {
    mf: ManifestFile,
    entries: Vec<ExistingEntry>,
    deleted: u64,
    /// Lowest and highest partition tuple of its live entries.
    range: Option<(Struct, Struct)>,
    partitions: u64,
}

/// The manifests the latest plan of one rewrite read, by path. A manifest never changes, so a
/// plan on a newer head reads only the manifests that head added (a manifest-list entry that
/// differs in any field is read again).
#[derive(Default)]
struct ReadCache(HashMap<String, Arc<ReadManifest>>);

/// A plan and the entries it moves (kept in memory between planning and committing: the
/// replaced manifests are immutable, so a retry on a newer head reuses them).
#[derive(Debug)]
struct Planned {
    plan: ManifestRewritePlan,
    manifests: Vec<NewManifest>,
}

/// Order partition tuples field by field (nulls first), as Iceberg orders partition values.
pub(crate) fn cmp_partitions(a: &Struct, b: &Struct) -> Ordering {
    for (x, y) in a.iter().zip(b.iter()) {
        let o = match (x, y) {
            (Some(Literal::Primitive(x)), Some(Literal::Primitive(y))) => {
                x.partial_cmp(y).unwrap_or(Ordering::Equal)
            }
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            // Partition values are primitive; anything else compares equal.
            (None, None) | (Some(_), Some(_)) => Ordering::Equal,
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    a.fields().len().cmp(&b.fields().len())
}

/// Plan a manifest rewrite of `table`'s current snapshot (reads its manifest list and the
/// manifests in scope; writes nothing).
pub async fn plan_manifest_rewrite(
    table: &LoadedTable,
    options: &RewriteManifestsOptions,
) -> Result<ManifestRewritePlan> {
    Ok(plan(table, options, &mut ReadCache::default()).await?.plan)
}

/// Plan on `table`'s current snapshot, reading the manifests in scope that `cache` does not
/// hold; `cache` then holds exactly the manifests in scope of this snapshot.
async fn plan(
    table: &LoadedTable,
    options: &RewriteManifestsOptions,
    cache: &mut ReadCache,
) -> Result<Planned> {
    options.validate()?;
    let target = options.target_size(table)?;
    let mut plan = ManifestRewritePlan {
        table: table.id.clone(),
        base_snapshot_id: table.metadata.current_snapshot_id(),
        target_size_bytes: target,
        manifests_before: 0,
        bytes_before: 0,
        groups: Vec::new(),
    };
    let Some(snapshot) = table.metadata.current_snapshot() else {
        return Ok(Planned {
            plan,
            manifests: Vec::new(),
        });
    };
    let list = read_manifest_list(table, snapshot).await?;
    plan.manifests_before = list.len();
    plan.bytes_before = list.iter().map(|m| m.manifest_length.max(0) as u64).sum();
    let in_scope: Vec<ManifestFile> = list
        .into_iter()
        .filter(|m| match m.content {
            ManifestContentType::Data => options.rewrite_data_manifests,
            ManifestContentType::Deletes => options.rewrite_delete_manifests,
        })
        .filter(|m| options.spec_id.is_none_or(|s| s == m.partition_spec_id))
        .collect();
    let known = |mf: &ManifestFile| {
        cache
            .0
            .get(&mf.manifest_path)
            .filter(|m| m.mf == *mf)
            .map(Arc::clone)
    };
    let missing: Vec<ManifestFile> = in_scope
        .iter()
        .filter(|mf| known(mf).is_none())
        .cloned()
        .collect();
    let mut fresh: HashMap<String, Arc<ReadManifest>> = HashMap::with_capacity(missing.len());
    for (mf, manifest) in read_manifests(table, missing).await? {
        fresh.insert(
            mf.manifest_path.clone(),
            Arc::new(read_one(table, mf, &manifest)?),
        );
    }
    // In list order, as the plan reports them.
    let read: Vec<Arc<ReadManifest>> = in_scope
        .iter()
        .filter_map(|mf| known(mf).or_else(|| fresh.get(&mf.manifest_path).map(Arc::clone)))
        .collect();
    cache.0 = read
        .iter()
        .map(|m| (m.mf.manifest_path.clone(), Arc::clone(m)))
        .collect();
    let mut groups: BTreeMap<(ManifestKind, i32), Vec<Arc<ReadManifest>>> = BTreeMap::new();
    for m in read {
        groups
            .entry((ManifestKind::of(m.mf.content), m.mf.partition_spec_id))
            .or_default()
            .push(m);
    }
    let mut manifests = Vec::new();
    for ((kind, spec_id), members) in groups {
        if let Some((group, new)) = plan_group(table, kind, spec_id, members, target).await? {
            plan.groups.push(group);
            manifests.extend(new);
        }
    }
    Ok(Planned { plan, manifests })
}

fn read_one(table: &LoadedTable, mf: ManifestFile, manifest: &Manifest) -> Result<ReadManifest> {
    let entries = existing_entries(table, &mf, manifest)?;
    let deleted = (manifest.entries().len() - entries.len()) as u64;
    let mut range: Option<(Struct, Struct)> = None;
    let mut distinct: Vec<&Struct> = entries.iter().map(|e| e.file.partition()).collect();
    distinct.sort_by(|a, b| cmp_partitions(a, b));
    distinct.dedup_by(|a, b| cmp_partitions(a, b) == Ordering::Equal);
    if let (Some(lo), Some(hi)) = (distinct.first(), distinct.last()) {
        range = Some(((*lo).clone(), (*hi).clone()));
    }
    Ok(ReadManifest {
        partitions: distinct.len() as u64,
        mf,
        entries,
        deleted,
        range,
    })
}

/// Whether two partition ranges share more than an end point.
fn overlaps(a: &(Struct, Struct), b: &(Struct, Struct)) -> bool {
    cmp_partitions(&a.0, &b.1) == Ordering::Less && cmp_partitions(&b.0, &a.1) == Ordering::Less
}

/// Indices of the manifests whose partition range overlaps another's.
///
/// Manifests sorted by range (start, then end) are swept once, keeping the widest range of the
/// current run of overlapping manifests: a manifest that overlaps it joins the run, one that
/// starts at or after its end starts a new run. Every member of a run of two or more overlaps
/// another member, and every overlapping pair ends up in one run.
fn overlapping(ranges: &[Option<&(Struct, Struct)>]) -> BTreeSet<usize> {
    let mut order: Vec<(usize, &(Struct, Struct))> = ranges
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.map(|r| (i, r)))
        .collect();
    order.sort_by(|(_, x), (_, y)| {
        cmp_partitions(&x.0, &y.0).then_with(|| cmp_partitions(&x.1, &y.1))
    });
    let mut out = BTreeSet::new();
    let mut run: Vec<usize> = Vec::new();
    let mut widest: Option<&(Struct, Struct)> = None;
    for (i, r) in order {
        match widest {
            Some(w) if overlaps(r, w) => {
                run.push(i);
                if cmp_partitions(&r.1, &w.1) == Ordering::Greater {
                    widest = Some(r);
                }
            }
            _ => {
                if run.len() > 1 {
                    out.extend(run.drain(..));
                }
                run = vec![i];
                widest = Some(r);
            }
        }
    }
    if run.len() > 1 {
        out.extend(run);
    }
    out
}

/// Which manifests of one group to replace, and why (indices into `members`; empty: none).
fn choose(
    members: &[Arc<ReadManifest>],
    target: u64,
) -> (BTreeSet<usize>, Vec<Vec<ReplaceReason>>) {
    // Cutting `n` target-sized manifests' worth into `n` equal pieces leaves none under half the
    // target, so what a rewrite writes is not small the next time.
    let small = target / 2;
    let overlap = overlapping(&members.iter().map(|m| m.range.as_ref()).collect::<Vec<_>>());
    let mut reasons: Vec<Vec<ReplaceReason>> = vec![Vec::new(); members.len()];
    for (i, m) in members.iter().enumerate() {
        let length = m.mf.manifest_length.max(0) as u64;
        let r = &mut reasons[i];
        if m.entries.is_empty() {
            r.push(ReplaceReason::NoLiveEntries);
        } else if m.deleted > 0 {
            r.push(ReplaceReason::DeletedEntries);
        }
        if overlap.contains(&i) {
            r.push(ReplaceReason::Overlapping);
        }
        if length > target.saturating_mul(2) && m.partitions > 1 {
            r.push(ReplaceReason::Oversized);
        }
    }
    let small_ones: Vec<usize> = members
        .iter()
        .enumerate()
        .filter(|(_, m)| !m.entries.is_empty() && (m.mf.manifest_length.max(0) as u64) < small)
        .map(|(i, _)| i)
        .collect();
    let forced = reasons.iter().filter(|r| !r.is_empty()).count();
    let mut chosen: BTreeSet<usize> = (0..members.len())
        .filter(|i| !reasons[*i].is_empty())
        .collect();
    let small_extra = small_ones.iter().filter(|i| !chosen.contains(i)).count();
    if forced + small_extra >= 2 {
        for i in &small_ones {
            chosen.insert(*i);
            if !reasons[*i].contains(&ReplaceReason::Small) {
                reasons[*i].push(ReplaceReason::Small);
            }
        }
    }
    if chosen.is_empty() {
        return (chosen, reasons);
    }
    // The new manifests span the chosen entries' range: a kept manifest overlapping it would
    // overlap them, so it joins (until nothing more does).
    loop {
        let span = chosen
            .iter()
            .filter_map(|i| members[*i].range.clone())
            .reduce(|a, b| {
                (
                    if cmp_partitions(&b.0, &a.0) == Ordering::Less {
                        b.0
                    } else {
                        a.0
                    },
                    if cmp_partitions(&b.1, &a.1) == Ordering::Greater {
                        b.1
                    } else {
                        a.1
                    },
                )
            });
        let Some(span) = span else { break };
        let joining: Vec<usize> = (0..members.len())
            .filter(|i| !chosen.contains(i))
            .filter(|i| {
                members[*i]
                    .range
                    .as_ref()
                    .is_some_and(|r| overlaps(r, &span))
            })
            .collect();
        if joining.is_empty() {
            break;
        }
        for i in joining {
            reasons[i].push(ReplaceReason::Overlapping);
            chosen.insert(i);
        }
    }

    (chosen, reasons)
}

/// Decide the manifests of one group to replace, and cut their entries into new manifests.
async fn plan_group(
    table: &LoadedTable,
    kind: ManifestKind,
    spec_id: i32,
    members: Vec<Arc<ReadManifest>>,
    target: u64,
) -> Result<Option<(ManifestGroup, Vec<NewManifest>)>> {
    let (chosen, reasons) = choose(&members, target);
    if chosen.is_empty() {
        return Ok(None);
    }
    let mut entries: Vec<ExistingEntry> = chosen
        .iter()
        .flat_map(|i| members[*i].entries.iter().cloned())
        .collect();
    entries.sort_by(|a, b| {
        cmp_partitions(a.file.partition(), b.file.partition())
            .then_with(|| a.file.file_path().cmp(b.file.file_path()))
    });
    let count = entries.len();
    let (fixed, per_entry) = if count == 0 {
        (0, 0)
    } else {
        let step = count.div_ceil(SIZING_SAMPLE).max(1);
        let sample: Vec<ExistingEntry> = entries.iter().step_by(step).cloned().collect();
        manifest_size_model(table, kind.content(), spec_id, &sample).await?
    };
    let pieces = if count == 0 {
        0
    } else {
        // Each piece pays the fixed part (header, schema) once.
        (per_entry * count as u64)
            .div_ceil(target.saturating_sub(fixed).max(per_entry).max(1))
            .max(1) as usize
    };
    // Nothing gained: only small manifests, and as many would be written as replaced.
    let must_go = chosen
        .iter()
        .any(|i| reasons[*i].iter().any(|r| *r != ReplaceReason::Small));
    if !must_go && pieces >= chosen.len() {
        return Ok(None);
    }
    let per_piece = count.div_ceil(pieces.max(1)).max(1);
    let mut new = Vec::with_capacity(pieces);
    let mut rest = entries;
    while !rest.is_empty() {
        let tail = rest.split_off(per_piece.min(rest.len()));
        new.push(NewManifest::new(kind.content(), spec_id, rest));
        rest = tail;
    }
    let expected_manifests = new.len();
    let replaced: Vec<ReplacedManifest> = chosen
        .iter()
        .map(|i| {
            let m = &members[*i];
            let mut r = reasons[*i].clone();
            r.sort();
            r.dedup();
            ReplacedManifest {
                path: m.mf.manifest_path.clone(),
                length: m.mf.manifest_length.max(0) as u64,
                live_entries: m.entries.len() as u64,
                deleted_entries: m.deleted,
                partitions: m.partitions,
                reasons: r,
            }
        })
        .collect();
    tracing::debug!(table = %table.id, ?kind, spec_id, replaced = replaced.len(), expected_manifests, "manifest group planned");
    Ok(Some((
        ManifestGroup {
            kind,
            spec_id,
            kept: members.len() - replaced.len(),
            entries: count as u64,
            expected_manifests,
            expected_bytes: if count == 0 {
                0
            } else {
                fixed * expected_manifests as u64 + per_entry * count as u64
            },
            replaced,
        },
        new,
    )))
}

/// A manifest rewrite of one table: a builder that ends in [`RewriteManifests::execute`].
#[derive(Debug)]
pub struct RewriteManifests<'a> {
    catalog: &'a Catalog,
    table: TableId,
    options: RewriteManifestsOptions,
    clock: Arc<dyn Clock>,
}

impl<'a> RewriteManifests<'a> {
    /// Rewrite the manifests of `table` in `catalog` with default options.
    pub fn new(catalog: &'a Catalog, table: TableId) -> Self {
        Self {
            catalog,
            table,
            options: RewriteManifestsOptions::default(),
            clock: Arc::new(SystemClock),
        }
    }

    /// Options.
    #[must_use]
    pub fn with_options(mut self, options: RewriteManifestsOptions) -> Self {
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

    /// Load the table and plan the rewrite (reads metadata only; writes nothing).
    pub async fn prepare(self) -> Result<PreparedManifestRewrite<'a>> {
        let started = Instant::now();
        self.options.validate()?;
        let base = self.catalog.load_table(&self.table).await?;
        let planned = plan(&base, &self.options, &mut ReadCache::default()).await?;
        Ok(PreparedManifestRewrite {
            catalog: self.catalog,
            options: self.options,
            clock: self.clock,
            base,
            planned,
            started,
        })
    }

    /// Plan, then commit (or report, for a dry run or when there is nothing to do).
    pub async fn execute(self) -> Result<RewriteManifestsOutcome> {
        self.prepare().await?.commit().await
    }
}

/// A planned manifest rewrite, waiting to commit (nothing is written yet).
#[derive(Debug)]
pub struct PreparedManifestRewrite<'a> {
    catalog: &'a Catalog,
    options: RewriteManifestsOptions,
    clock: Arc<dyn Clock>,
    base: LoadedTable,
    planned: Planned,
    started: Instant,
}

impl PreparedManifestRewrite<'_> {
    /// The plan.
    pub fn plan(&self) -> &ManifestRewritePlan {
        &self.planned.plan
    }

    /// Write the new manifests and commit them on the table's head, retrying on conflicts
    /// (or, for a dry run or an empty plan, only report). While every replaced manifest is
    /// still listed, a retry stages the same rewrite on the new head; when another commit
    /// rewrote one of them, the rewrite is planned again on the new head (each counts as a
    /// retry of the table's retry policy, and [`Error::CommitConflict`] ends the run when it is
    /// spent). Under a commit fence, the first plan again is made outside the fence; when a
    /// writer rewrites the manifests once more before Cryo is back in, the next plan is made
    /// inside the fence, reading only the manifests the head added since, and commits before
    /// the next cooperating writer gets in. The manifests written for an attempt that did not
    /// commit are deleted.
    #[allow(clippy::too_many_lines)] // Reason: one retry loop with its cleanup paths.
    pub async fn commit(self) -> Result<RewriteManifestsOutcome> {
        let Self {
            catalog,
            options,
            clock,
            base,
            planned,
            started,
        } = self;
        if planned.plan.is_empty() || options.dry_run {
            let mut outcome = planned_outcome(planned.plan, options.dry_run);
            outcome.duration_ms = started.elapsed().as_millis() as u64;
            return Ok(outcome);
        }
        let committer = catalog.committer()?;
        let policy = match &options.retry {
            Some(p) => p.clone(),
            None => RetryPolicy::for_table(base.metadata.properties())
                .map_err(|e| e.in_table(&base.id))?,
        };
        let mut driver = CommitDriver::new(committer.as_ref(), policy)?
            .with_fence(options.commit_fence.as_ref(), catalog.name());
        let mut op = ManifestsCommit {
            options: &options,
            clock: &clock,
            planned_on: base.metadata.current_snapshot_id(),
            planned,
            cache: ReadCache::default(),
            planned_again: false,
            replan: false,
        };
        let mut head = base;
        let landed = match driver.drive(&mut head, &mut op).await? {
            Driven::Landed(l) => l,
            Driven::Nothing(_) => return Ok(nothing_left(op.planned, driver.retries(), started)),
        };
        let planned = op.planned;
        let (snapshot_id, summary, after) = (
            landed.snapshot_id.unwrap_or_default(),
            landed.summary,
            landed.table,
        );
        let mut outcome = planned_outcome(planned.plan, false);
        let count = |key: &str| {
            summary
                .get(key)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        outcome.status = RewriteManifestsStatus::Committed;
        outcome.snapshot_ids = vec![snapshot_id];
        outcome.manifests_created = count(MANIFESTS_CREATED) as usize;
        outcome.manifests_kept = count(MANIFESTS_KEPT) as usize;
        outcome.manifests_replaced = count(MANIFESTS_REPLACED) as usize;
        outcome.entries_processed = count(ENTRIES_PROCESSED);
        outcome.retries = driver.retries();
        if let Some(s) = after.metadata.snapshot_by_id(snapshot_id) {
            let list = read_manifest_list(&after, s).await?;
            outcome.manifests_after = list.len();
            outcome.bytes_after = list.iter().map(|m| m.manifest_length.max(0) as u64).sum();
        }
        outcome.duration_ms = started.elapsed().as_millis() as u64;
        tracing::info!(
            table = %outcome.table,
            snapshot_id,
            replaced = outcome.manifests_replaced,
            created = outcome.manifests_created,
            "manifests rewritten"
        );
        Ok(outcome)
    }
}

/// A manifest rewrite as the commit driver sees it: while every replaced manifest is still
/// listed, an attempt stages the same rewrite on the new head; when another commit rewrote one
/// of them, the rewrite is planned again on the new head (outside the fence, or inside it when
/// writers rewrote them again before Cryo got back in).
struct ManifestsCommit<'a> {
    options: &'a RewriteManifestsOptions,
    clock: &'a Arc<dyn Clock>,
    planned: Planned,
    /// The snapshot the plan was made on.
    planned_on: Option<i64>,
    /// What plans made while committing read (manifests are immutable).
    cache: ReadCache,
    /// Whether the rewrite was planned again already.
    planned_again: bool,
    /// Plan again before the next attempt (outside the fence).
    replan: bool,
}

impl ManifestsCommit<'_> {
    async fn plan_on(&mut self, head: &LoadedTable) -> Result<Prepared> {
        self.planned = plan(head, self.options, &mut self.cache).await?;
        self.planned_on = head.metadata.current_snapshot_id();
        Ok(if self.planned.plan.is_empty() {
            Prepared::Nothing
        } else {
            Prepared::Ready
        })
    }
}

impl CommitOp for ManifestsCommit<'_> {
    async fn prepare(&mut self, head: &LoadedTable) -> Result<Prepared> {
        if !std::mem::take(&mut self.replan) {
            return Ok(Prepared::Ready);
        }
        // Another commit rewrote manifests this plan replaces: plan again on the head, outside
        // the fence (reading every manifest in scope).
        self.planned_again = true;
        self.plan_on(head).await
    }

    async fn attempt(&mut self, head: &LoadedTable, cx: AttemptContext<'_>) -> Result<Attempt> {
        let replaced = if head.metadata.current_snapshot_id() == self.planned_on {
            self.planned.plan.replaced_paths()
        } else {
            match check_head(head, &self.planned.plan).await {
                Ok(r) => r,
                Err(e @ Error::CommitConflict { .. }) if cx.fenced && self.planned_again => {
                    // Writers rewrite these manifests again and again (PyIceberg's overwrites
                    // rewrite the manifests of the files they delete): plan again inside the
                    // fence, where no cooperating writer moves the head. The plan before this
                    // one read the manifests, so only what the head added since is read while
                    // writers wait. An attempt of the retry policy, without its backoff (nobody
                    // else commits while Cryo holds the fence).
                    tracing::info!(table = %head.id, error = %e, "manifest rewrite planned again inside the commit fence");
                    cx.retry.next_wait(e)?;
                    if let Prepared::Nothing = self.plan_on(head).await? {
                        return Ok(Attempt::Nothing);
                    }
                    self.planned.plan.replaced_paths()
                }
                Err(e @ Error::CommitConflict { .. }) => {
                    tracing::info!(table = %head.id, error = %e, "manifest rewrite planned again");
                    self.replan = true;
                    return Err(e);
                }
                Err(e) => return Err(e),
            }
        };
        let staged = SnapshotProducer::rewrite_manifests(head)
            .replace_manifests(replaced, self.planned.manifests.iter().cloned())
            .with_clock(Arc::clone(self.clock))
            .set_snapshot_property("cryo.operation", "rewrite_manifests")
            .stage()
            .await?;
        Ok(Attempt::Snapshot(Box::new(staged)))
    }

    fn retry_on(&self, err: &Error) -> bool {
        self.replan && matches!(err, Error::CommitConflict { .. })
    }
}

/// The outcome of a rewrite whose plan on a newer head found nothing left to do.
fn nothing_left(planned: Planned, retries: u32, started: Instant) -> RewriteManifestsOutcome {
    let mut outcome = planned_outcome(planned.plan, false);
    outcome.retries = retries;
    outcome.duration_ms = started.elapsed().as_millis() as u64;
    outcome
}

/// The outcome `plan` predicts, before anything is committed.
fn planned_outcome(plan: ManifestRewritePlan, dry_run: bool) -> RewriteManifestsOutcome {
    RewriteManifestsOutcome {
        table: plan.table.clone(),
        status: if dry_run && !plan.is_empty() {
            RewriteManifestsStatus::DryRun
        } else {
            RewriteManifestsStatus::NothingToDo
        },
        dry_run,
        base_snapshot_id: plan.base_snapshot_id,
        snapshot_ids: Vec::new(),
        manifests_replaced: plan.manifests_replaced(),
        manifests_created: plan.manifests_created(),
        manifests_kept: plan.manifests_before - plan.manifests_replaced(),
        entries_processed: plan.entries(),
        manifests_before: plan.manifests_before,
        bytes_before: plan.bytes_before,
        manifests_after: plan.expected_manifests_after(),
        bytes_after: plan.expected_bytes_after(),
        retries: 0,
        duration_ms: 0,
        plan,
    }
}

/// A commit after the base: every manifest the rewrite replaces must still be listed by the
/// head (manifests the head added are simply kept), except those without live entries: a
/// writer's commit drops manifests that list only deleted files, as Java's does, and the new
/// manifests hold nothing of theirs. Returns the replaced manifests the head still lists.
async fn check_head(head: &LoadedTable, plan: &ManifestRewritePlan) -> Result<BTreeSet<String>> {
    let Some(snapshot) = head.metadata.current_snapshot() else {
        return Err(Error::CommitConflict {
            table: head.id.to_string(),
            message: "the table has no snapshot any more".into(),
            retryable: false,
        });
    };
    let listed: HashSet<String> = read_manifest_list(head, snapshot)
        .await?
        .into_iter()
        .map(|m| m.manifest_path)
        .collect();
    let replaced = plan.groups.iter().flat_map(|g| &g.replaced);
    let gone: Vec<&String> = replaced
        .clone()
        .filter(|m| m.live_entries > 0 && !listed.contains(&m.path))
        .map(|m| &m.path)
        .collect();
    if gone.is_empty() {
        return Ok(replaced
            .filter(|m| listed.contains(&m.path))
            .map(|m| m.path.clone())
            .collect());
    }
    Err(Error::CommitConflict {
        table: head.id.to_string(),
        message: format!(
            "{} manifest(s) this rewrite replaces are no longer listed by snapshot {} (another commit rewrote them), e.g. {}",
            gone.len(),
            snapshot.snapshot_id(),
            gone[0]
        ),
        retryable: true,
    })
}

/// Rewrite the manifests of one table.
pub async fn rewrite_manifests(
    catalog: &Catalog,
    table: &TableId,
    options: &RewriteManifestsOptions,
) -> Result<RewriteManifestsOutcome> {
    RewriteManifests::new(catalog, table.clone())
        .with_options(options.clone())
        .execute()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(d: i32) -> Struct {
        Struct::from_iter([Some(Literal::int(d))])
    }

    fn ranges(r: &[(i32, i32)]) -> Vec<(Struct, Struct)> {
        r.iter().map(|(a, b)| (day(*a), day(*b))).collect()
    }

    fn flagged(r: &[(i32, i32)]) -> Vec<usize> {
        let r = ranges(r);
        overlapping(&r.iter().map(Some).collect::<Vec<_>>())
            .into_iter()
            .collect()
    }

    #[test]
    fn partitions_order_nulls_first() {
        let null = Struct::from_iter([None]);
        assert_eq!(cmp_partitions(&null, &day(0)), Ordering::Less);
        assert_eq!(cmp_partitions(&day(2), &day(10)), Ordering::Less);
        assert_eq!(cmp_partitions(&day(3), &day(3)), Ordering::Equal);
        let two =
            |a: i32, b: &str| Struct::from_iter([Some(Literal::int(a)), Some(Literal::string(b))]);
        assert_eq!(
            cmp_partitions(&two(1, "b"), &two(1, "a")),
            Ordering::Greater
        );
        assert_eq!(cmp_partitions(&two(0, "z"), &two(1, "a")), Ordering::Less);
    }

    #[test]
    fn overlap_is_more_than_a_shared_end_point() {
        // Sorted chunks that meet at an end point, single-partition manifests, disjoint ones.
        assert!(flagged(&[(0, 5), (5, 9), (9, 9), (12, 12), (12, 12)]).is_empty());
        // A single partition where a wider one starts or ends: no overlap either.
        assert!(flagged(&[(5, 5), (5, 9), (9, 9)]).is_empty());
        // Inside another's range, or crossing it.
        assert_eq!(flagged(&[(0, 9), (3, 3)]), [0, 1]);
        assert_eq!(flagged(&[(20, 30), (0, 5), (4, 8), (40, 41)]), [1, 2]);
        // A chain: each overlaps the next.
        assert_eq!(flagged(&[(0, 4), (3, 7), (6, 9), (9, 12)]), [0, 1, 2]);
        // Hidden behind a wide one.
        assert_eq!(flagged(&[(0, 100), (10, 20), (30, 40)]), [0, 1, 2]);
    }

    #[test]
    fn options_are_validated() {
        let o = RewriteManifestsOptions::default();
        assert!(o.validate().is_ok());
        assert!(!o.dry_run, "a manifest rewrite deletes nothing");
        let tiny = RewriteManifestsOptions {
            target_size_bytes: Some(100),
            ..RewriteManifestsOptions::default()
        };
        assert!(matches!(tiny.validate(), Err(Error::Validation { .. })));
        let o: RewriteManifestsOptions =
            serde_json::from_str(r#"{"target_size_bytes": 65536, "dry_run": true}"#).unwrap();
        assert_eq!(o.target_size_bytes, Some(65536));
        assert!(o.rewrite_delete_manifests);
        assert!(serde_json::from_str::<RewriteManifestsOptions>(r#"{"target": 1}"#).is_err());
    }
}
