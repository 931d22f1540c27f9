//! Validating a rewrite planned on an older snapshot against the table's current head.
//!
//! A rewrite reads the table at snapshot `S0`, writes new files, and commits a `replace` on
//! whatever the head is by then. That is safe exactly when nothing committed after `S0` touched
//! the rows it rewrote (Java's `BaseRewriteFiles.validate`, Spark's "found new delete for
//! replaced data file"):
//!
//! - every replaced data file is still live in the head, and
//! - no position delete file or deletion vector added after `S0` may delete rows of it.
//!
//! Appends after `S0` never conflict. Equality deletes after `S0` do not either: the new files
//! carry `S0`'s data sequence number
//! ([`SnapshotProducer::with_data_sequence_number`](super::SnapshotProducer::with_data_sequence_number)),
//! so those deletes still apply to the rewritten rows.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use iceberg::spec::{
    DataContentType, DataFile, FormatVersion, Manifest, ManifestContentType, ManifestFile,
    ManifestStatus, PrimitiveLiteral, Snapshot, Struct,
};
use serde::{Deserialize, Serialize};

use super::files::{live_files, read_manifest_list, read_manifests};
use super::summary::is_deletion_vector;
use super::write::POS_DELETE_FILE_PATH_FIELD_ID;
use crate::catalog::LoadedTable;
use crate::error::{Error, Result};

/// Why a replaced data file cannot be committed as planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RewriteConflictKind {
    /// The file is no longer live in the head: another commit removed or replaced it.
    Removed,
    /// A position delete file added after the base may delete rows of it.
    NewPositionDelete,
    /// A deletion vector added after the base deletes rows of it.
    NewDeletionVector,
    /// The rewrite moves the file's rows into another partition spec (the base's default), and
    /// an equality delete file added after the base is scoped to a partition of the spec they
    /// leave (it would no longer reach them) or of the one they join (it might reach them now).
    NewEqualityDelete,
    /// The head does not descend from the base (the table was rolled back, replaced, or the
    /// snapshots in between expired), so what happened in between cannot be checked.
    HistoryDiverged,
}

impl RewriteConflictKind {
    /// A stable code for receipts and bindings.
    pub fn code(self) -> &'static str {
        match self {
            RewriteConflictKind::Removed => "removed",
            RewriteConflictKind::NewPositionDelete => "new_position_delete",
            RewriteConflictKind::NewDeletionVector => "new_deletion_vector",
            RewriteConflictKind::NewEqualityDelete => "new_equality_delete",
            RewriteConflictKind::HistoryDiverged => "history_diverged",
        }
    }
}

/// One replaced data file that conflicts with a commit made after the rewrite's base snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RewriteConflict {
    /// The replaced data file.
    pub data_file: String,
    /// What conflicts.
    pub kind: RewriteConflictKind,
    /// The snapshot that removed the file or added the delete, when known.
    pub by_snapshot: Option<i64>,
    /// The delete file (position deletes, deletion vector or equality deletes) that may apply to
    /// the file.
    pub delete_file: Option<String>,
}

impl fmt::Display for RewriteConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            RewriteConflictKind::Removed => "is no longer live",
            RewriteConflictKind::NewPositionDelete => "may have new position deletes",
            RewriteConflictKind::NewDeletionVector => "has a new deletion vector",
            RewriteConflictKind::NewEqualityDelete => {
                "has new equality deletes whose reach its rows would leave or enter in the new spec"
            }
            RewriteConflictKind::HistoryDiverged => {
                "cannot be checked: the head does not descend from the base snapshot"
            }
        };
        write!(f, "{} {what}", self.data_file)?;
        if let Some(d) = &self.delete_file {
            write!(f, " ({d})")?;
        }
        if let Some(s) = self.by_snapshot {
            write!(f, " since snapshot {s}")?;
        }
        Ok(())
    }
}

/// Check a rewrite planned on `base_at_s0` (the table as the rewrite read it) against `head`
/// (the table as it is now): which of `removed_data` (the data files it replaces) can no longer
/// be replaced.
///
/// An empty result means a `replace` staged on `head` that removes `removed_data`, with the new
/// data files at `S0`'s data sequence number and in `S0`'s default partition spec, loses no row
/// and brings none back. For each conflicting file it reports:
///
/// - [`Removed`](RewriteConflictKind::Removed): not live in the head;
/// - [`NewPositionDelete`](RewriteConflictKind::NewPositionDelete) /
///   [`NewDeletionVector`](RewriteConflictKind::NewDeletionVector): a snapshot after `S0` added
///   a position delete file or deletion vector that references it (by `referenced_data_file`,
///   else by the bounds of its `file_path` column) or — when the delete file records neither —
///   that lies in its partition;
/// - [`NewEqualityDelete`](RewriteConflictKind::NewEqualityDelete): the file's spec is not
///   `S0`'s default, and a snapshot after `S0` added an equality delete file of a partitioned
///   spec that is either the file's, with its partition (the rows would leave its reach), or
///   the default (they might enter it). Equality deletes added after `S0` otherwise need no
///   check: at `S0`'s sequence number, new files in the replaced file's spec and partition stay
///   in exactly the same deletes' reach, and a delete of an unpartitioned spec reaches every
///   file;
/// - [`HistoryDiverged`](RewriteConflictKind::HistoryDiverged), for every file, when `head`'s
///   `main` does not descend from `S0`.
///
/// Reads the manifest lists of the snapshots after `S0`, the delete manifests they added, and
/// the data manifests that differ between `S0` and the head; nothing when the head is `S0`.
pub async fn validate_rewrite(
    base_at_s0: &LoadedTable,
    head: &LoadedTable,
    removed_data: &BTreeSet<String>,
) -> Result<Vec<RewriteConflict>> {
    if removed_data.is_empty() {
        return Ok(Vec::new());
    }
    let table = base_at_s0.id.to_string();
    let Some(s0) = base_at_s0.metadata.current_snapshot() else {
        return Err(Error::validation(format!(
            "{table}: the rewrite's base has no snapshot, so it cannot replace files"
        )));
    };
    let diverged = || {
        removed_data
            .iter()
            .map(|f| RewriteConflict {
                data_file: f.clone(),
                kind: RewriteConflictKind::HistoryDiverged,
                by_snapshot: None,
                delete_file: None,
            })
            .collect()
    };
    if head.metadata.uuid() != base_at_s0.metadata.uuid() {
        return Ok(diverged());
    }
    let Some(after) = snapshots_after(head, s0.snapshot_id()) else {
        return Ok(diverged());
    };
    if after.is_empty() {
        return Ok(Vec::new());
    }
    let Some(head_snapshot) = head.metadata.current_snapshot() else {
        return Ok(diverged());
    };

    let mut check = Check {
        base: base_at_s0,
        head,
        after,
        cache: ManifestCache::default(),
    };
    let mut conflicts = check.removed(s0, head_snapshot, removed_data).await?;
    let removed_now: BTreeSet<&str> = conflicts.iter().map(|c| c.data_file.as_str()).collect();
    let candidates: BTreeSet<&String> = removed_data
        .iter()
        .filter(|f| !removed_now.contains(f.as_str()))
        .collect();
    // Format v1 has no delete files.
    if !candidates.is_empty() && head.metadata.format_version() >= FormatVersion::V2 {
        conflicts.extend(check.new_deletes(&candidates, removed_data).await?);
    }
    conflicts.sort_by(|a, b| a.data_file.cmp(&b.data_file).then(a.kind.cmp(&b.kind)));
    Ok(conflicts)
}

/// One validation: the base, the head, the snapshots in between and the manifests read so far.
struct Check<'a> {
    base: &'a LoadedTable,
    head: &'a LoadedTable,
    /// Snapshots of the head's `main` after the base, newest first.
    after: Vec<&'a Snapshot>,
    cache: ManifestCache,
}

impl Check<'_> {
    /// The replaced files that are no longer live in the head.
    ///
    /// A file live at S0 sits in exactly one of S0's manifests. If the head still lists that
    /// manifest, the file is live; if not, it is live only if a manifest new since S0 lists it
    /// live. So only the data manifests that differ need reading.
    async fn removed(
        &mut self,
        s0: &Snapshot,
        head_snapshot: &Snapshot,
        replaced: &BTreeSet<String>,
    ) -> Result<Vec<RewriteConflict>> {
        let s0_list = read_manifest_list(self.base, s0).await?;
        let head_list = read_manifest_list(self.head, head_snapshot).await?;
        let s0_paths: HashSet<&str> = s0_list.iter().map(|m| m.manifest_path.as_str()).collect();
        let head_paths: HashSet<&str> =
            head_list.iter().map(|m| m.manifest_path.as_str()).collect();
        let only_in = |list: &[ManifestFile], other: &HashSet<&str>| -> Vec<ManifestFile> {
            list.iter()
                .filter(|m| m.content == ManifestContentType::Data)
                .filter(|m| !other.contains(m.manifest_path.as_str()))
                .cloned()
                .collect()
        };
        let dropped = only_in(&s0_list, &head_paths);
        let new = only_in(&head_list, &s0_paths);
        let mut was_in_dropped = BTreeSet::new();
        for (_, manifest) in self.cache.load(self.base, &dropped).await? {
            for e in manifest.entries().iter().filter(|e| e.is_alive()) {
                if replaced.contains(e.file_path()) {
                    was_in_dropped.insert(e.file_path().to_string());
                }
            }
        }
        if was_in_dropped.is_empty() {
            return Ok(Vec::new());
        }
        let mut live_again = BTreeSet::new();
        let mut deleted_by = HashMap::new();
        for (_, manifest) in self.cache.load(self.head, &new).await? {
            for e in manifest.entries() {
                if !was_in_dropped.contains(e.file_path()) {
                    continue;
                }
                if e.is_alive() {
                    live_again.insert(e.file_path().to_string());
                } else if e.status() == ManifestStatus::Deleted {
                    deleted_by.insert(e.file_path().to_string(), e.snapshot_id());
                }
            }
        }
        let gone: BTreeSet<String> = was_in_dropped.difference(&live_again).cloned().collect();
        if gone.iter().any(|f| !deleted_by.contains_key(f)) {
            // The DELETED entry may sit in a manifest a later commit dropped (DELETED-only
            // manifests are not carried): look in what each snapshot after S0 added.
            for (snapshot_id, manifest) in self.added_after(ManifestContentType::Data).await? {
                for e in manifest.entries() {
                    if e.status() == ManifestStatus::Deleted && gone.contains(e.file_path()) {
                        deleted_by
                            .entry(e.file_path().to_string())
                            .or_insert(Some(snapshot_id));
                    }
                }
            }
        }
        Ok(gone
            .into_iter()
            .map(|f| RewriteConflict {
                by_snapshot: deleted_by.get(&f).copied().flatten(),
                data_file: f,
                kind: RewriteConflictKind::Removed,
                delete_file: None,
            })
            .collect())
    }

    /// Position deletes and deletion vectors added after S0 that may apply to `candidates`,
    /// snapshot by snapshot as Java does: a delete added after S0 counts even if a later commit
    /// rewrote its manifest or removed it again.
    async fn new_deletes(
        &mut self,
        candidates: &BTreeSet<&String>,
        replaced: &BTreeSet<String>,
    ) -> Result<Vec<RewriteConflict>> {
        let mut base_partitions = BasePartitions {
            base: self.base,
            files: replaced,
            loaded: None,
        };
        // The spec the rewrite writes its files in.
        let out_spec = self.base.metadata.default_partition_spec_id();
        let mut out: Vec<RewriteConflict> = Vec::new();
        let mut flagged = BTreeSet::new();
        for (snapshot_id, manifest) in self.added_after(ManifestContentType::Deletes).await? {
            let spec_id = manifest.metadata().partition_spec().spec_id();
            for e in manifest.entries() {
                let d = e.data_file();
                if e.status() != ManifestStatus::Added || e.snapshot_id() != Some(snapshot_id) {
                    continue;
                }
                if d.content_type() == DataContentType::EqualityDeletes {
                    // A delete of an unpartitioned spec reaches every file, old and new alike.
                    if is_unpartitioned(self.head, spec_id) {
                        continue;
                    }
                    let partitions = base_partitions.get().await?;
                    for f in candidates {
                        let at = partitions.get(f.as_str());
                        // Rows that change spec leave the reach of their old partition's
                        // deletes, and may enter that of a partition of the spec they join
                        // (which partition is not known here: any such delete conflicts).
                        // A file of unknown partition conflicts, to be safe.
                        let applies = at.is_none_or(|(spec, part)| {
                            *spec != out_spec
                                && ((*spec == spec_id && part == d.partition())
                                    || spec_id == out_spec)
                        });
                        if applies && flagged.insert((*f).clone()) {
                            out.push(RewriteConflict {
                                data_file: (*f).clone(),
                                kind: RewriteConflictKind::NewEqualityDelete,
                                by_snapshot: Some(snapshot_id),
                                delete_file: Some(d.file_path().to_string()),
                            });
                        }
                    }
                    continue;
                }
                if d.content_type() != DataContentType::PositionDeletes {
                    continue;
                }
                let scope = DeleteScope::of(d);
                // Only a delete file without a referenced file or path bounds needs the
                // partitions of the replaced files.
                let partitions = match scope {
                    DeleteScope::Partition => Some(base_partitions.get().await?),
                    _ => None,
                };
                for f in candidates {
                    let applies = match &scope {
                        DeleteScope::File(r) => r == *f,
                        DeleteScope::Paths(lo, hi) => {
                            lo.as_str() <= f.as_str() && f.as_str() <= hi.as_str()
                        }
                        // The spec scopes position deletes to their partition; a file of
                        // unknown partition conflicts, to be safe.
                        DeleteScope::Partition => partitions
                            .and_then(|p| p.get(f.as_str()))
                            .is_none_or(|(spec, part)| {
                                (*spec == spec_id && part == d.partition())
                                    || is_unpartitioned(self.head, spec_id)
                            }),
                    };
                    if applies && flagged.insert((*f).clone()) {
                        out.push(RewriteConflict {
                            data_file: (*f).clone(),
                            kind: if is_deletion_vector(d) {
                                RewriteConflictKind::NewDeletionVector
                            } else {
                                RewriteConflictKind::NewPositionDelete
                            },
                            by_snapshot: Some(snapshot_id),
                            delete_file: Some(d.file_path().to_string()),
                        });
                    }
                }
            }
        }
        Ok(out)
    }

    /// The manifests of `content` each snapshot after S0 wrote itself, oldest snapshot first,
    /// with that snapshot's id.
    async fn added_after(
        &mut self,
        content: ManifestContentType,
    ) -> Result<Vec<(i64, Arc<Manifest>)>> {
        let mut out = Vec::new();
        for snapshot in self.after.iter().rev() {
            let id = snapshot.snapshot_id();
            let added: Vec<ManifestFile> = read_manifest_list(self.head, snapshot)
                .await?
                .into_iter()
                .filter(|m| m.content == content && m.added_snapshot_id == id)
                .collect();
            for (_, manifest) in self.cache.load(self.head, &added).await? {
                out.push((id, manifest));
            }
        }
        Ok(out)
    }
}

/// The subset of `paths` that are live files (data or delete) of `head`'s current snapshot.
///
/// A rewrite that also removes delete files can check with it that they are still there:
/// staging a `replace` that names a file the head no longer lists fails.
pub async fn live_subset(head: &LoadedTable, paths: &BTreeSet<String>) -> Result<BTreeSet<String>> {
    if paths.is_empty() {
        return Ok(BTreeSet::new());
    }
    Ok(live_files(head)
        .await?
        .into_iter()
        .map(|f| f.file.file_path().to_string())
        .filter(|p| paths.contains(p))
        .collect())
}

/// Whether `snapshot_id` is one of the snapshots `head`'s `main` descends from (itself
/// included): a commit whose outcome was unknown can be recognised by its snapshot id.
pub fn is_ancestor(head: &LoadedTable, snapshot_id: i64) -> bool {
    let mut current = head.metadata.current_snapshot().map(AsRef::as_ref);
    while let Some(s) = current {
        if s.snapshot_id() == snapshot_id {
            return true;
        }
        current = s
            .parent_snapshot_id()
            .and_then(|p| head.metadata.snapshot_by_id(p).map(AsRef::as_ref));
    }
    false
}

/// The snapshots of `head`'s `main` after `s0`, newest first; `None` when `main` does not reach
/// `s0` (rolled back, replaced, or history expired in between).
fn snapshots_after(head: &LoadedTable, s0: i64) -> Option<Vec<&Snapshot>> {
    let mut out = Vec::new();
    let mut current = head.metadata.current_snapshot().map(AsRef::as_ref);
    while let Some(s) = current {
        if s.snapshot_id() == s0 {
            return Some(out);
        }
        out.push(s);
        current = s
            .parent_snapshot_id()
            .and_then(|p| head.metadata.snapshot_by_id(p).map(AsRef::as_ref));
    }
    None
}

/// Which data files a position delete file (or deletion vector) can apply to.
enum DeleteScope {
    /// Exactly this file (`referenced_data_file`; required for deletion vectors).
    File(String),
    /// Files whose path lies in the bounds of the `file_path` column. Truncated bounds stay
    /// conservative: a truncated lower bound is a prefix, a truncated upper bound rounds up.
    Paths(String, String),
    /// Anything in its partition: the writer recorded neither.
    Partition,
}

impl DeleteScope {
    fn of(d: &DataFile) -> Self {
        if let Some(r) = d.referenced_data_file() {
            return DeleteScope::File(r);
        }
        let bound = |m: &HashMap<i32, iceberg::spec::Datum>| match m
            .get(&POS_DELETE_FILE_PATH_FIELD_ID)
            .map(iceberg::spec::Datum::literal)
        {
            Some(PrimitiveLiteral::String(s)) => Some(s.clone()),
            _ => None,
        };
        match (bound(d.lower_bounds()), bound(d.upper_bounds())) {
            (Some(lo), Some(hi)) => DeleteScope::Paths(lo, hi),
            _ => DeleteScope::Partition,
        }
    }
}

fn is_unpartitioned(table: &LoadedTable, spec_id: i32) -> bool {
    table
        .metadata
        .partition_spec_by_id(spec_id)
        .is_some_and(|s| s.is_unpartitioned())
}

/// Spec id and partition of each replaced file at the rewrite's base, read from the base's
/// manifests on first use (only a delete scoped by partition needs them).
struct BasePartitions<'a> {
    base: &'a LoadedTable,
    files: &'a BTreeSet<String>,
    loaded: Option<HashMap<String, (i32, Struct)>>,
}

impl BasePartitions<'_> {
    async fn get(&mut self) -> Result<&HashMap<String, (i32, Struct)>> {
        if self.loaded.is_none() {
            let files = self.files;
            self.loaded = Some(
                live_files(self.base)
                    .await?
                    .into_iter()
                    .filter(|f| files.contains(f.file.file_path()))
                    .map(|f| {
                        (
                            f.file.file_path().to_string(),
                            (f.spec_id, f.file.partition().clone()),
                        )
                    })
                    .collect(),
            );
        }
        Ok(self.loaded.get_or_insert_default())
    }
}

/// Manifests read once per validation, by path.
#[derive(Default)]
struct ManifestCache {
    loaded: BTreeMap<String, Arc<Manifest>>,
}

impl ManifestCache {
    /// The manifests of `list`, read through `table`'s storage, in list order.
    async fn load(
        &mut self,
        table: &LoadedTable,
        list: &[ManifestFile],
    ) -> Result<Vec<(ManifestFile, Arc<Manifest>)>> {
        let missing: Vec<&ManifestFile> = list
            .iter()
            .filter(|m| !self.loaded.contains_key(&m.manifest_path))
            .collect();
        let read = read_manifests(table, missing.into_iter().cloned())
            .await?
            .into_iter()
            .map(|(mf, m)| (mf.manifest_path, Arc::new(m)));
        self.loaded.extend(read);
        Ok(list
            .iter()
            .filter_map(|mf| {
                self.loaded
                    .get(&mf.manifest_path)
                    .map(|m| (mf.clone(), Arc::clone(m)))
            })
            .collect())
    }
}
