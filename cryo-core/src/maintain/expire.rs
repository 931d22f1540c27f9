//! Snapshot expiry: drop old snapshots (and expired refs) from a table's metadata, then delete
//! every file that no remaining snapshot can reach. The same decisions as Java's
//! `RemoveSnapshots` and Spark's `expire_snapshots` procedure, computed from metadata alone.
//!
//! ```text
//! load head ─▶ Retention::resolve (options, table properties, clock)
//!   ┌────────────────────────────────────────┐
//!   ▼                                        │ CommitConflict: back off, reload, recompute
//! select_snapshots(head) ─▶ RemoveSnapshotRef… RemoveStatistics… RemoveSnapshots
//!   requirements: table UUID, every ref still where it was ─▶ commit ──┘   (dry run: applied locally)
//!   ─▶ reachability: manifest lists of expired and retained snapshots (in parallel, once each)
//!        expired-only manifests ─▶ live entries = candidates
//!        retained manifests ─▶ live entries strike candidates out
//!   ─▶ delete (bounded concurrency): content files, manifests, manifest lists, statistics
//!   ─▶ old metadata.json files the commit dropped from the log (when the table asks for it)
//! ```
//!
//! Which snapshots go (Java's rules, so Cryo and Spark agree on the same table):
//!
//! - `main` is always kept; another branch or tag is removed when its snapshot is older than its
//!   `max-ref-age-ms` (default: the table's `history.expire.max-ref-age-ms`, else forever);
//! - every kept branch keeps its head and its ancestors while they are younger than its
//!   `max-snapshot-age-ms` (default: `older_than`) or fewer than its `min-snapshots-to-keep`
//!   (default: `retain_last`); every kept tag keeps its snapshot;
//! - a snapshot no ref reaches is kept while it is not older than `older_than`;
//! - snapshots named in [`ExpireOptions::snapshot_ids`] go as well (unless a kept ref points at
//!   one: that is refused), on top of the rules above, as in Java.
//!
//! Which files go (Spark's `ExpireSnapshotsSparkAction`): the files reachable from the expired
//! snapshots minus those reachable from the snapshots left after the commit, where a manifest's
//! files are its *live* (`ADDED`/`EXISTING`) entries only — a file that a kept snapshot lists
//! only as `DELETED` is no longer part of it and goes. Paths are compared in normalized form
//! ([`crate::io::normalize_location`]: `s3a://` and `s3://`, duplicate slashes), so a second
//! spelling of a kept file never gets it deleted.
//!
//! Safety (DESIGN §10): a dry run is the default and changes nothing; nothing is deleted before
//! the commit succeeded; a table with `gc.enabled=false` is refused ([`Error::Refused`]: its
//! files may belong to another table); files outside the table's location (and its
//! `write.data.path` / `write.metadata.path`) are never deleted, only reported; which files
//! become unreachable is proved before the commit, so a manifest list or manifest that cannot
//! be read fails a real run as it fails the dry run, with nothing expired (should the commit
//! land on a newer head, the proof is redone after it, and a failure there stops all deletion:
//! the outcome says why, the files stay for orphan removal); a failed delete is reported,
//! never fatal.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::BuildHasherDefault;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use iceberg::spec::{
    DataContentType, MAIN_BRANCH, SnapshotReference, SnapshotRetention, TableMetadata,
};
use iceberg::{TableRequirement, TableUpdate};
use serde::{Deserialize, Serialize};

use crate::avro;
use crate::catalog::{Catalog, LoadedTable, TableId};
use crate::clock::{Clock, SystemClock};
use crate::commit::{CatalogCommitter, CommitRetry, RetryPolicy, TableChanges};
use crate::error::{Error, Result};
use crate::govern::enter_fence;
use crate::io::{ObjectStorage, normalize_location};
use crate::receipt::Footprint;

/// Java's table properties for expiry (`TableProperties`).
const MAX_SNAPSHOT_AGE_MS: &str = "history.expire.max-snapshot-age-ms";
const MIN_SNAPSHOTS_TO_KEEP: &str = "history.expire.min-snapshots-to-keep";
const MAX_REF_AGE_MS: &str = "history.expire.max-ref-age-ms";
const GC_ENABLED: &str = "gc.enabled";
const DELETE_AFTER_COMMIT: &str = "write.metadata.delete-after-commit.enabled";
const WRITE_DATA_PATH: &str = "write.data.path";
const WRITE_METADATA_PATH: &str = "write.metadata.path";
const OBJECT_STORAGE_PATH: &str = "write.object-storage.path";
const FOLDER_STORAGE_PATH: &str = "write.folder-storage.path";
/// Java's default `history.expire.max-snapshot-age-ms`: 5 days.
pub const DEFAULT_MAX_SNAPSHOT_AGE_MS: i64 = 5 * 24 * 60 * 60 * 1000;

/// What to expire and how. Defaults are the safe ones: a dry run, the table's own retention.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExpireOptions {
    /// Expire snapshots older than this instant (ms since the epoch); `None`: now minus the
    /// table's `history.expire.max-snapshot-age-ms` (5 days by default). Must not lie in the
    /// future.
    pub older_than_ms: Option<i64>,
    /// Keep at least this many snapshots of every branch (at least 1); `None`: the table's
    /// `history.expire.min-snapshots-to-keep` (1 by default).
    pub retain_last: Option<u32>,
    /// Also expire exactly these snapshots (as Java's `expireSnapshotId`; the age rules still
    /// apply to the rest). A snapshot a kept branch or tag points at is refused.
    pub snapshot_ids: Vec<i64>,
    /// Delete the files no remaining snapshot reaches (false: only change the metadata).
    pub clean_files: bool,
    /// Compute exactly what would be expired and deleted; change nothing.
    pub dry_run: bool,
    /// Manifest lists and manifests read at once.
    pub max_concurrent_reads: usize,
    /// Files deleted at once.
    pub max_concurrent_deletes: usize,
    /// Commit retries; `None`: the table's `commit.retry.*` properties, else Java's defaults.
    pub retry: Option<RetryPolicy>,
    /// Commit under this commit fence, so that no cooperating writer's operation overlaps the
    /// commit (see [`crate::govern::CommitFence`]); `None`: commit without it.
    pub commit_fence: Option<crate::govern::CommitFence>,
}

impl Default for ExpireOptions {
    fn default() -> Self {
        Self {
            older_than_ms: None,
            retain_last: None,
            snapshot_ids: Vec::new(),
            clean_files: true,
            dry_run: true,
            max_concurrent_reads: 16,
            max_concurrent_deletes: 16,
            retry: None,
            commit_fence: None,
        }
    }
}

impl ExpireOptions {
    /// Reject options that cannot be meant (the instant's relation to "now" is checked when the
    /// operation runs, against its clock).
    pub fn validate(&self) -> Result<()> {
        if self.retain_last == Some(0) {
            return Err(Error::validation(
                "retain_last must be at least 1: every branch keeps its head snapshot",
            ));
        }
        if let Some(t) = self.older_than_ms
            && t < 0
        {
            return Err(Error::validation(format!(
                "older_than_ms must be an instant after 1970 (ms since the epoch), got {t}"
            )));
        }
        for (name, n) in [
            ("max_concurrent_reads", self.max_concurrent_reads),
            ("max_concurrent_deletes", self.max_concurrent_deletes),
        ] {
            if n == 0 || n > 1024 {
                return Err(Error::validation(format!(
                    "{name} must be between 1 and 1024, got {n}"
                )));
            }
        }
        if let Some(r) = &self.retry {
            r.validate()?;
        }
        Ok(())
    }
}

/// The retention in force for one run: options resolved against the table's properties and
/// the clock. Pure input to [`select_snapshots`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Retention {
    /// "Now" (ms since the epoch), for ref and branch ages.
    pub now_ms: i64,
    /// Snapshots older than this go, unless a branch's own rule keeps them.
    pub older_than_ms: i64,
    /// Snapshots each branch keeps at least, unless the branch says otherwise.
    pub retain_last: u32,
    /// Refs older than this go (`history.expire.max-ref-age-ms`), unless the ref says otherwise.
    pub max_ref_age_ms: i64,
    /// Snapshots to expire by id.
    pub snapshot_ids: BTreeSet<i64>,
}

impl Retention {
    /// Resolve `options` against a table's `properties` at `now_ms`.
    ///
    /// Errors: malformed retention properties ([`Error::Config`]), `older_than_ms` after
    /// `now_ms` or `retain_last` 0 ([`Error::Validation`]).
    pub fn resolve(
        options: &ExpireOptions,
        properties: &HashMap<String, String>,
        now_ms: i64,
    ) -> Result<Self> {
        options.validate()?;
        let max_snapshot_age =
            prop_i64(properties, MAX_SNAPSHOT_AGE_MS)?.unwrap_or(DEFAULT_MAX_SNAPSHOT_AGE_MS);
        let older_than_ms = match options.older_than_ms {
            Some(t) if t > now_ms => {
                return Err(Error::validation(format!(
                    "older_than_ms {t} lies in the future (now is {now_ms}): that would expire \
                     every snapshot beyond retain_last, including ones committed after the call"
                )));
            }
            Some(t) => t,
            None => now_ms.saturating_sub(max_snapshot_age),
        };
        let retain_last = match options.retain_last {
            Some(n) => n,
            None => match prop_i64(properties, MIN_SNAPSHOTS_TO_KEEP)? {
                None => 1,
                Some(n) => u32::try_from(n).ok().filter(|n| *n >= 1).ok_or_else(|| {
                    Error::config(format!(
                        "table property {MIN_SNAPSHOTS_TO_KEEP}={n} must be a positive integer"
                    ))
                })?,
            },
        };
        let max_ref_age_ms = prop_i64(properties, MAX_REF_AGE_MS)?.unwrap_or(i64::MAX);
        Ok(Self {
            now_ms,
            older_than_ms,
            retain_last,
            max_ref_age_ms,
            snapshot_ids: options.snapshot_ids.iter().copied().collect(),
        })
    }
}

fn prop_i64(properties: &HashMap<String, String>, key: &str) -> Result<Option<i64>> {
    properties
        .get(key)
        .map(|v| {
            v.trim()
                .parse::<i64>()
                .map_err(|_| Error::config(format!("table property {key}={v} is not an integer")))
        })
        .transpose()
}

fn prop_true(properties: &HashMap<String, String>, key: &str) -> bool {
    properties
        .get(key)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// A table's snapshot graph as expiry sees it: parents, timestamps and refs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    /// Snapshot id → (parent id, timestamp ms).
    pub snapshots: BTreeMap<i64, (Option<i64>, i64)>,
    /// Branches and tags by name.
    pub refs: BTreeMap<String, SnapshotReference>,
}

impl History {
    /// The history of `metadata`.
    ///
    /// `TableMetadata` exposes no list of its refs, so they are read back from its
    /// (spec-conformant) serialized form, as the scanner does.
    pub fn of(table: &str, metadata: &TableMetadata) -> Result<Self> {
        let snapshots = metadata
            .snapshots()
            .map(|s| (s.snapshot_id(), (s.parent_snapshot_id(), s.timestamp_ms())))
            .collect();
        let json = serde_json::to_value(metadata)
            .map_err(|e| Error::Internal(format!("{table}: metadata to JSON: {e}")))?;
        let mut refs: BTreeMap<String, SnapshotReference> = match json.get("refs") {
            Some(r) if !r.is_null() => serde_json::from_value(r.clone())
                .map_err(|e| Error::metadata(table, "<refs>", format!("invalid refs: {e}")))?,
            _ => BTreeMap::new(),
        };
        if !refs.contains_key(MAIN_BRANCH)
            && let Some(id) = metadata.current_snapshot_id()
        {
            // v1 metadata may carry only `current-snapshot-id`: that is the main branch.
            refs.insert(
                MAIN_BRANCH.to_string(),
                SnapshotReference::new(id, SnapshotRetention::branch(None, None, None)),
            );
        }
        Ok(Self { snapshots, refs })
    }

    /// `id` and its ancestors, newest first, as far as they exist (a cycle in corrupt metadata
    /// ends the walk).
    fn ancestors(&self, id: i64) -> Vec<(i64, i64)> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut current = Some(id);
        while let Some(id) = current {
            let Some((parent, ts)) = self.snapshots.get(&id) else {
                break;
            };
            if !seen.insert(id) {
                break;
            }
            out.push((id, *ts));
            current = *parent;
        }
        out
    }
}

/// Which snapshots and refs an expiry removes, and which stay.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SnapshotSelection {
    /// Snapshots to remove, ascending.
    pub expired: Vec<i64>,
    /// Snapshots that stay, ascending.
    pub retained: Vec<i64>,
    /// Refs to remove (their age passed `max-ref-age-ms`, or their snapshot is missing).
    pub removed_refs: Vec<String>,
    /// Refs that stay, with the snapshot each points at.
    pub retained_refs: BTreeMap<String, i64>,
    /// Requested snapshot ids the table does not have (already expired, or never existed).
    pub unknown_ids: Vec<i64>,
}

impl SnapshotSelection {
    /// Whether the selection changes nothing.
    pub fn is_empty(&self) -> bool {
        self.expired.is_empty() && self.removed_refs.is_empty()
    }
}

/// Decide which snapshots and refs go (Java's `RemoveSnapshots.internalApply`). Pure.
///
/// Errors with [`Error::Validation`] when a requested snapshot id is the head of a ref that
/// stays.
pub fn select_snapshots(history: &History, retention: &Retention) -> Result<SnapshotSelection> {
    let now = retention.now_ms;
    let mut retained_refs: BTreeMap<String, &SnapshotReference> = BTreeMap::new();
    let mut removed_refs = Vec::new();
    for (name, r) in &history.refs {
        if name == MAIN_BRANCH {
            retained_refs.insert(name.clone(), r);
            continue;
        }
        let max_ref_age = match &r.retention {
            SnapshotRetention::Branch { max_ref_age_ms, .. }
            | SnapshotRetention::Tag { max_ref_age_ms } => {
                max_ref_age_ms.unwrap_or(retention.max_ref_age_ms)
            }
        };
        match history.snapshots.get(&r.snapshot_id) {
            Some((_, ts)) if now.saturating_sub(*ts) <= max_ref_age => {
                retained_refs.insert(name.clone(), r);
            }
            _ => removed_refs.push(name.clone()),
        }
    }

    let mut keep: BTreeSet<i64> = BTreeSet::new();
    let mut heads: BTreeMap<i64, Vec<&str>> = BTreeMap::new();
    for (name, r) in &retained_refs {
        heads.entry(r.snapshot_id).or_default().push(name);
        keep.insert(r.snapshot_id);
    }
    for id in &retention.snapshot_ids {
        if let Some(names) = heads.get(id) {
            return Err(Error::validation(format!(
                "cannot expire snapshot {id}: it is the head of {}",
                names.join(", ")
            )));
        }
    }

    // Branch retention: a branch keeps its ancestors while they are young enough or too few.
    let mut referenced: HashSet<i64> = HashSet::new();
    for r in retained_refs.values() {
        match &r.retention {
            SnapshotRetention::Branch {
                min_snapshots_to_keep,
                max_snapshot_age_ms,
                ..
            } => {
                let older_than = max_snapshot_age_ms
                    .map_or(retention.older_than_ms, |age| now.saturating_sub(age));
                let min_keep =
                    min_snapshots_to_keep.map_or(i64::from(retention.retain_last), i64::from);
                let mut kept = 0i64;
                let mut within = true;
                for (id, ts) in history.ancestors(r.snapshot_id) {
                    referenced.insert(id);
                    if within && (kept < min_keep || ts >= older_than) {
                        keep.insert(id);
                        kept += 1;
                    } else {
                        within = false;
                    }
                }
            }
            SnapshotRetention::Tag { .. } => {
                referenced.insert(r.snapshot_id);
            }
        }
    }
    // Snapshots no ref reaches stay while they are young.
    for (id, (_, ts)) in &history.snapshots {
        if !referenced.contains(id) && *ts >= retention.older_than_ms {
            keep.insert(*id);
        }
    }

    let mut expired = Vec::new();
    let mut retained = Vec::new();
    for id in history.snapshots.keys() {
        if retention.snapshot_ids.contains(id) || !keep.contains(id) {
            expired.push(*id);
        } else {
            retained.push(*id);
        }
    }
    let unknown_ids = retention
        .snapshot_ids
        .iter()
        .filter(|id| !history.snapshots.contains_key(id))
        .copied()
        .collect();
    Ok(SnapshotSelection {
        expired,
        retained,
        removed_refs,
        retained_refs: retained_refs
            .into_iter()
            .map(|(n, r)| (n, r.snapshot_id))
            .collect(),
        unknown_ids,
    })
}

/// The commit for a selection: requirements (same table, every ref where it was) and updates
/// (refs removed, the statistics of expired snapshots removed, the snapshots removed).
fn expiry_changes(
    metadata: &TableMetadata,
    history: &History,
    selection: &SnapshotSelection,
) -> TableChanges {
    let mut requirements = vec![TableRequirement::UuidMatch {
        uuid: metadata.uuid(),
    }];
    // Removed refs are pinned too: a ref that moved since may no longer be expired.
    for (name, r) in &history.refs {
        requirements.push(TableRequirement::RefSnapshotIdMatch {
            r#ref: name.clone(),
            snapshot_id: Some(r.snapshot_id),
        });
    }
    let mut updates: Vec<TableUpdate> = selection
        .removed_refs
        .iter()
        .map(|name| TableUpdate::RemoveSnapshotRef {
            ref_name: name.clone(),
        })
        .collect();
    // Java's metadata builder drops a removed snapshot's statistics with it; upstream's does not,
    // so say it explicitly (before the snapshots, for servers that apply updates in order).
    let expired: HashSet<i64> = selection.expired.iter().copied().collect();
    for s in metadata.statistics_iter() {
        if expired.contains(&s.snapshot_id) {
            updates.push(TableUpdate::RemoveStatistics {
                snapshot_id: s.snapshot_id,
            });
        }
    }
    for s in metadata.partition_statistics_iter() {
        if expired.contains(&s.snapshot_id) {
            updates.push(TableUpdate::RemovePartitionStatistics {
                snapshot_id: s.snapshot_id,
            });
        }
    }
    if !selection.expired.is_empty() {
        updates.push(TableUpdate::RemoveSnapshots {
            snapshot_ids: selection.expired.clone(),
        });
    }
    TableChanges::new(requirements, updates)
}

/// `changes` applied to `head` locally, as a pointer catalog would: the metadata after the
/// commit and the metadata-log entries it drops.
fn apply_locally(
    head: &LoadedTable,
    changes: &TableChanges,
) -> Result<(TableMetadata, Vec<String>)> {
    let table = head.id.to_string();
    let mut builder = head
        .metadata
        .as_ref()
        .clone()
        .into_builder(head.metadata_location.clone());
    for update in changes.updates.iter().cloned() {
        builder = update
            .apply(builder)
            .map_err(|e| Error::Internal(format!("{table}: cannot apply expiry locally: {e}")))?;
    }
    let built = builder
        .build()
        .map_err(|e| Error::Internal(format!("{table}: cannot build metadata: {e}")))?;
    let dropped = built
        .expired_metadata_logs
        .iter()
        .map(|m| m.metadata_file.clone())
        .collect();
    Ok((built.metadata, dropped))
}

/// An expiry selected on one head: what goes, and (unless nothing does) the commit, the
/// metadata after it and the metadata files it drops from the log.
struct StagedExpiry {
    retention: Retention,
    selection: SnapshotSelection,
    commit: Option<(TableChanges, LoadedTable, Vec<String>)>,
}

/// Select the expiry on `head` and build its commit. Pure (no reads).
fn stage_expiry(head: &LoadedTable, options: &ExpireOptions, now: i64) -> Result<StagedExpiry> {
    let retention = Retention::resolve(options, head.metadata.properties(), now)?;
    let history = History::of(&head.id.to_string(), &head.metadata)?;
    let selection = select_snapshots(&history, &retention)?;
    if selection.is_empty() {
        return Ok(StagedExpiry {
            retention,
            selection,
            commit: None,
        });
    }
    let changes = expiry_changes(&head.metadata, &history, &selection);
    let (predicted, dropped) = apply_locally(head, &changes)?;
    let dropped = if prop_true(predicted.properties(), DELETE_AFTER_COMMIT) {
        dropped
    } else {
        Vec::new()
    };
    let predicted = LoadedTable {
        metadata: Arc::new(predicted),
        metadata_location: None,
        ..head.clone()
    };
    Ok(StagedExpiry {
        retention,
        selection,
        commit: Some((changes, predicted, dropped)),
    })
}

/// The files an expiry from `head` to `predicted` makes unreachable, with the snapshots it
/// was proved for.
struct Proof {
    expiring: BTreeSet<i64>,
    retained: HashSet<i64>,
    found: Unreachable,
}

async fn prove(
    head: &LoadedTable,
    predicted: &LoadedTable,
    concurrency: usize,
    cache: &mut ProofCache,
) -> Result<Proof> {
    let retained: HashSet<i64> = predicted
        .metadata
        .snapshots()
        .map(|s| s.snapshot_id())
        .collect();
    let expiring: BTreeSet<i64> = head
        .metadata
        .snapshots()
        .map(|s| s.snapshot_id())
        .filter(|id| !retained.contains(id))
        .collect();
    let found = unreachable_files(head, predicted, &expiring, concurrency, cache).await?;
    Ok(Proof {
        expiring,
        retained,
        found,
    })
}

/// The kind of an expired file (Spark's file types; statistics and partition statistics files
/// count together, as Spark counts them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExpiredFileKind {
    /// A data file.
    Data,
    /// A position-delete file (or a Puffin file of deletion vectors).
    PositionDeletes,
    /// An equality-delete file.
    EqualityDeletes,
    /// A manifest.
    Manifest,
    /// A manifest list.
    ManifestList,
    /// A statistics or partition-statistics file.
    Statistics,
    /// A `metadata.json` the commit dropped from the metadata log
    /// (`write.metadata.delete-after-commit.enabled`).
    MetadataJson,
}

impl ExpiredFileKind {
    fn of_content(c: DataContentType) -> Self {
        match c {
            DataContentType::Data => Self::Data,
            DataContentType::PositionDeletes => Self::PositionDeletes,
            DataContentType::EqualityDeletes => Self::EqualityDeletes,
        }
    }
}

/// A file expiry deleted (or, in a dry run, would delete).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExpiredFile {
    /// Kind.
    pub kind: ExpiredFileKind,
    /// Location, as the metadata spells it.
    pub path: String,
    /// Size (from the metadata, or from storage for manifest lists and metadata files; 0 when
    /// the file was already gone).
    pub bytes: u64,
}

/// A file expiry meant to delete but could not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DeleteFailure {
    /// Kind.
    pub kind: ExpiredFileKind,
    /// Location.
    pub path: String,
    /// Size.
    pub bytes: u64,
    /// What went wrong.
    pub message: String,
}

/// Files and bytes per kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FilesByKind {
    /// Data files.
    pub data: Footprint,
    /// Position-delete files.
    pub position_deletes: Footprint,
    /// Equality-delete files.
    pub equality_deletes: Footprint,
    /// Manifests.
    pub manifests: Footprint,
    /// Manifest lists.
    pub manifest_lists: Footprint,
    /// Statistics and partition-statistics files.
    pub statistics: Footprint,
    /// Old `metadata.json` files.
    pub metadata_json: Footprint,
}

impl FilesByKind {
    fn add(&mut self, kind: ExpiredFileKind, bytes: u64) {
        let slot = match kind {
            ExpiredFileKind::Data => &mut self.data,
            ExpiredFileKind::PositionDeletes => &mut self.position_deletes,
            ExpiredFileKind::EqualityDeletes => &mut self.equality_deletes,
            ExpiredFileKind::Manifest => &mut self.manifests,
            ExpiredFileKind::ManifestList => &mut self.manifest_lists,
            ExpiredFileKind::Statistics => &mut self.statistics,
            ExpiredFileKind::MetadataJson => &mut self.metadata_json,
        };
        slot.files += 1;
        slot.bytes += bytes;
    }

    /// All kinds together.
    pub fn total(&self) -> Footprint {
        [
            self.data,
            self.position_deletes,
            self.equality_deletes,
            self.manifests,
            self.manifest_lists,
            self.statistics,
            self.metadata_json,
        ]
        .iter()
        .fold(Footprint::default(), |a, f| Footprint {
            files: a.files + f.files,
            bytes: a.bytes + f.bytes,
        })
    }
}

/// What an expiry did (or, in a dry run, exactly what it would do).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ExpireOutcome {
    /// Table.
    pub table: TableId,
    /// Whether nothing was changed on purpose.
    pub dry_run: bool,
    /// `main`'s snapshot when the run started (expiry never moves it).
    pub base_snapshot_id: Option<i64>,
    /// Snapshots this run committed: always empty, expiry changes metadata only (the new
    /// metadata file is [`metadata_location`](Self::metadata_location)).
    pub snapshot_ids: Vec<i64>,
    /// The retention applied (after the last retry).
    pub retention: Retention,
    /// Snapshots removed (that would be), ascending.
    pub expired_snapshot_ids: Vec<i64>,
    /// Refs removed (that would be).
    pub removed_refs: Vec<String>,
    /// Snapshots left, ascending.
    pub retained_snapshot_ids: Vec<i64>,
    /// Requested snapshot ids the table did not have.
    pub unknown_snapshot_ids: Vec<i64>,
    /// The metadata file the commit wrote (`None` in a dry run, when nothing was to expire, or
    /// when the catalog does not report it).
    pub metadata_location: Option<String>,
    /// Files deleted (that would be), sorted by kind and path.
    pub files: Vec<ExpiredFile>,
    /// Counts and bytes of [`files`](Self::files) per kind.
    pub deleted: FilesByKind,
    /// Deletes that failed (the files stay; orphan removal can take them later).
    pub failures: Vec<DeleteFailure>,
    /// Unreachable files outside the table's location, never deleted.
    pub kept_outside_location: Vec<String>,
    /// Why no file was deleted although snapshots were expired: the commit landed on a newer
    /// head than the one reachability was proved on, and a manifest of it could not be read.
    pub cleanup_error: Option<String>,
    /// Expired metadata that could not be read (its files are left for orphan removal).
    pub warnings: Vec<String>,
    /// Failed commit attempts before the outcome.
    pub retries: u32,
    /// Wall time.
    pub duration_ms: u64,
}

impl ExpireOutcome {
    /// Files and bytes the operation concerns before it ran: every unreachable file it found
    /// (deleted, to delete, or failing to delete).
    pub fn before(&self) -> Footprint {
        let t = self.deleted.total();
        let (files, bytes) = self
            .failures
            .iter()
            .fold((t.files, t.bytes), |(f, b), x| (f + 1, b + x.bytes));
        Footprint { files, bytes }
    }

    /// Those still present after it: the failed deletes (none in a dry run: it reports what a
    /// real run would leave).
    pub fn after(&self) -> Footprint {
        Footprint {
            files: self.failures.len() as u64,
            bytes: self.failures.iter().map(|f| f.bytes).sum(),
        }
    }

    /// Snapshots removed.
    pub fn expired_snapshots(&self) -> usize {
        self.expired_snapshot_ids.len()
    }
}

/// Expire snapshots of one table: a builder that ends in [`ExpireSnapshots::execute`].
#[derive(Debug)]
pub struct ExpireSnapshots<'a> {
    catalog: &'a Catalog,
    table: TableId,
    options: ExpireOptions,
    clock: Arc<dyn Clock>,
}

impl<'a> ExpireSnapshots<'a> {
    /// Expire `table` of `catalog` with default options (a dry run of the table's own retention).
    pub fn new(catalog: &'a Catalog, table: TableId) -> Self {
        Self {
            catalog,
            table,
            options: ExpireOptions::default(),
            clock: Arc::new(SystemClock),
        }
    }

    /// What to expire and how.
    #[must_use]
    pub fn with_options(mut self, options: ExpireOptions) -> Self {
        self.options = options;
        self
    }

    /// Only compute (the default), or really expire and delete.
    #[must_use]
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.options.dry_run = dry_run;
        self
    }

    /// "Now" for default ages and ref ages.
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Expire (or, in a dry run, compute the expiry).
    pub async fn execute(self) -> Result<ExpireOutcome> {
        self.options.validate()?;
        let committer = if self.options.dry_run {
            None
        } else {
            Some(self.catalog.committer()?)
        };
        self.run(committer).await
    }

    /// [`execute`](Self::execute) through `committer` (`None`: a dry run).
    ///
    /// Under a commit fence, each attempt enters the fence, reloads the head and selects and
    /// proves on it: a writer inside the fence when Cryo arrives commits first, and the attempt
    /// is staged on its snapshot instead of failing on it. The reads that take time happen
    /// once, before the fence is entered; inside it, only what the head added since is read.
    #[allow(
        clippy::too_many_lines,
        reason = "one retry loop: fence, select, prove, commit, reload; then the cleanup"
    )]
    async fn run(self, committer: Option<Arc<dyn CatalogCommitter>>) -> Result<ExpireOutcome> {
        let started = Instant::now();
        let options = &self.options;
        options.validate()?;
        let base = self.catalog.load_table(&self.table).await?;
        let name = base.id.to_string();
        if let Some(v) = base
            .metadata
            .properties()
            .get(GC_ENABLED)
            .filter(|v| !v.trim().eq_ignore_ascii_case("true"))
        {
            return Err(Error::Refused {
                table: name,
                reason: format!(
                    "gc.enabled is {v} (not `true`): the table's files may belong to another \
                     table (a snapshot or migrated table); expiring would delete them"
                ),
            });
        }
        let committer = committer.filter(|_| !options.dry_run);
        let fence = options
            .commit_fence
            .as_ref()
            .filter(|_| committer.is_some());
        let policy = match &options.retry {
            Some(p) => p.clone(),
            None => RetryPolicy::for_table(base.metadata.properties())
                .map_err(|e| e.in_table(&base.id))?,
        };
        let mut retry = CommitRetry::new(policy)?;
        let now = self.clock.now_ms();

        let mut head = base.clone();
        // What the proofs read, kept across attempts (manifest lists and manifests never change).
        let mut cache = ProofCache::default();
        // The unreachable files, proved before the commit that expired them.
        let mut proved: Option<Proof> = None;
        // Under a fence, the proof on the head as first loaded is made outside it.
        let mut warm = fence.is_none() || !options.clean_files;
        let (retention, selection, after, dropped_metadata, metadata_sizes) = loop {
            let mut guard = None;
            if let (Some(committer), Some(fence)) = (&committer, fence) {
                if !warm {
                    if let Some((_, predicted, _)) = stage_expiry(&head, options, now)?.commit {
                        prove(&head, &predicted, options.max_concurrent_reads, &mut cache).await?;
                    }
                    warm = true;
                }
                match enter_fence(fence, self.catalog.name(), committer.as_ref(), &head).await {
                    Ok((g, fresh)) => {
                        guard = Some(g);
                        head = fresh;
                    }
                    Err(e) => {
                        head = retry.reload_after(committer.as_ref(), &head, e).await?;
                        continue;
                    }
                }
            }
            let s = stage_expiry(&head, options, now)?;
            let Some((changes, predicted, dropped)) = s.commit else {
                break (
                    s.retention,
                    s.selection,
                    head.clone(),
                    Vec::new(),
                    HashMap::new(),
                );
            };
            let sizes = stat_all(&head.storage, &dropped, &mut cache.sizes).await;
            let Some(committer) = &committer else {
                break (s.retention, s.selection, predicted, dropped, sizes);
            };
            if options.clean_files {
                // Prove which files become unreachable before committing: a manifest list or
                // manifest that cannot be read fails the real run exactly where its dry run
                // fails, with nothing changed, instead of expiring the snapshots a person may
                // need to roll a broken table back to and leaving the clean-up undone.
                proved =
                    Some(prove(&head, &predicted, options.max_concurrent_reads, &mut cache).await?);
            }
            match committer.commit(&head, changes).await {
                Ok(new_head) => {
                    let dropped = dropped_from_log(&head, &new_head);
                    break (s.retention, s.selection, new_head, dropped, sizes);
                }
                Err(e) => {
                    drop(guard);
                    tracing::info!(table = %name, error = %e, "expiry commit failed; reloading");
                    head = retry.reload_after(committer.as_ref(), &head, e).await?;
                }
            }
        };

        let after_ids: HashSet<i64> = after
            .metadata
            .snapshots()
            .map(|s| s.snapshot_id())
            .collect();
        let expired_ids: BTreeSet<i64> = base
            .metadata
            .snapshots()
            .map(|s| s.snapshot_id())
            .filter(|id| !after_ids.contains(id))
            .collect();
        let mut retained_snapshot_ids: Vec<i64> = after_ids.iter().copied().collect();
        retained_snapshot_ids.sort_unstable();
        // Whether this run changed the table (an attempt whose answer was lost may have landed:
        // then the last selection is empty, but the head moved).
        let changed = !options.dry_run && after.metadata_location != base.metadata_location;
        let removed_refs: Vec<String> = {
            let kept = History::of(&name, &after.metadata)?.refs;
            History::of(&name, &base.metadata)?
                .refs
                .into_keys()
                .filter(|r| !kept.contains_key(r))
                .collect()
        };
        let mut outcome = ExpireOutcome {
            table: base.id.clone(),
            dry_run: options.dry_run,
            base_snapshot_id: base.metadata.current_snapshot_id(),
            snapshot_ids: Vec::new(),
            retention,
            expired_snapshot_ids: expired_ids.iter().copied().collect(),
            removed_refs,
            retained_snapshot_ids,
            unknown_snapshot_ids: selection.unknown_ids.clone(),
            metadata_location: if changed {
                after.metadata_location.clone()
            } else {
                None
            },
            files: Vec::new(),
            deleted: FilesByKind::default(),
            failures: Vec::new(),
            kept_outside_location: Vec::new(),
            cleanup_error: None,
            warnings: Vec::new(),
            retries: retry.failed_attempts(),
            duration_ms: 0,
        };

        let mut to_delete: Vec<ExpiredFile> = Vec::new();
        if options.clean_files && !expired_ids.is_empty() {
            let found = match proved {
                // The commit removed exactly the snapshots the proof expired and kept exactly
                // the ones it kept (nothing was added beside it).
                Some(p) if p.expiring == expired_ids && p.retained == after_ids => Ok(p.found),
                _ => {
                    unreachable_files(
                        &base,
                        &after,
                        &expired_ids,
                        options.max_concurrent_reads,
                        &mut cache,
                    )
                    .await
                }
            };
            match found {
                Ok(found) => {
                    outcome.warnings = found.warnings;
                    let roots = table_roots(&base.metadata);
                    for f in found.files {
                        if within(&roots, &f.path) {
                            to_delete.push(f);
                        } else {
                            outcome.kept_outside_location.push(f.path);
                        }
                    }
                }
                Err(e) if changed => {
                    tracing::error!(table = %name, error = %e, "expired snapshots but cannot prove which files are unreachable; deleting none");
                    outcome.cleanup_error = Some(e.to_string());
                }
                Err(e) => return Err(e),
            }
        }
        to_delete.sort();

        if options.dry_run {
            for f in to_delete {
                outcome.deleted.add(f.kind, f.bytes);
                outcome.files.push(f);
            }
            for path in dropped_metadata {
                let bytes = metadata_sizes.get(&path).copied().unwrap_or(0);
                outcome.deleted.add(ExpiredFileKind::MetadataJson, bytes);
                outcome.files.push(ExpiredFile {
                    kind: ExpiredFileKind::MetadataJson,
                    path,
                    bytes,
                });
            }
        } else {
            let (done, failed) =
                delete_files(&base.storage, to_delete, options.max_concurrent_deletes).await;
            let (meta_done, meta_failed) =
                finish_metadata_cleanup(&after.storage, dropped_metadata, &metadata_sizes).await;
            for f in done.into_iter().chain(meta_done) {
                outcome.deleted.add(f.kind, f.bytes);
                outcome.files.push(f);
            }
            outcome.failures = failed.into_iter().chain(meta_failed).collect();
        }
        outcome.files.sort();
        outcome.duration_ms = started.elapsed().as_millis() as u64;
        tracing::info!(
            table = %name,
            dry_run = outcome.dry_run,
            expired = outcome.expired_snapshot_ids.len(),
            files = outcome.deleted.total().files,
            failures = outcome.failures.len(),
            "expire_snapshots"
        );
        Ok(outcome)
    }
}

/// Expire snapshots of one table (see [`ExpireSnapshots`]); `options.dry_run` is true by default.
pub async fn expire_snapshots(
    catalog: &Catalog,
    table: &TableId,
    options: &ExpireOptions,
) -> Result<ExpireOutcome> {
    ExpireSnapshots::new(catalog, table.clone())
        .with_options(options.clone())
        .execute()
        .await
}

// ------------------------------------------------------------------------------------------------
// Reachability
// ------------------------------------------------------------------------------------------------

/// What one manifest list says, reduced to what reachability needs.
struct ListRead {
    bytes: u64,
    /// The manifest paths, one after the other (one allocation per list, not per entry).
    arena: String,
    manifests: Vec<ListedManifest>,
}

/// One entry of a manifest list, its path a range of the list's arena.
struct ListedManifest {
    hash: u64,
    start: usize,
    end: usize,
    length: u64,
    may_have_live: bool,
    deletes: bool,
}

#[derive(Clone)]
struct ManifestRef {
    path: String,
    length: u64,
    /// Whether the manifest may list live files (false: its counts say it holds `DELETED`
    /// entries only).
    may_have_live: bool,
    deletes: bool,
}

/// A live entry of an expired-only manifest.
#[derive(Clone)]
struct LiveEntry {
    path: String,
    kind: ExpiredFileKind,
    bytes: u64,
}

/// The files reachable from the expired snapshots and from no snapshot left.
struct Unreachable {
    files: Vec<ExpiredFile>,
    warnings: Vec<String>,
}

/// What the proofs of one expiry read, kept across its attempts: manifest lists and manifests
/// are immutable, so a retry (or the proof made again inside the commit fence) reads only what
/// the head added since. Failed reads are not kept.
#[derive(Default)]
struct ProofCache {
    lists: HashMap<String, Arc<ListRead>>,
    /// The live entries of expired-only manifests.
    live: HashMap<String, Arc<Vec<LiveEntry>>>,
    /// The candidate keys each retained manifest lists as live, valid for the candidates in
    /// `strikes_for` only (another set of candidates needs the manifests read again).
    strikes: HashMap<String, Arc<Vec<String>>>,
    strikes_for: HashSet<String>,
    /// Sizes of metadata files.
    sizes: HashMap<String, u64>,
}

fn key(path: &str) -> String {
    normalize_location(path).unwrap_or_else(|_| path.to_string())
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Spark's `expireFiles`: files of the expired snapshots (manifest lists, manifests, their live
/// entries, statistics) minus those of every snapshot `after` keeps.
///
/// Each manifest list and manifest is read once, in parallel tasks: shared manifests are not
/// re-read per snapshot, manifests that both sides list are never opened (their entries are
/// reachable anyway), and the retained side is only opened when there are candidates to strike.
#[allow(
    clippy::too_many_lines,
    reason = "one pass: lists, expired-only manifests, retained manifests, statistics"
)]
async fn unreachable_files(
    base: &LoadedTable,
    after: &LoadedTable,
    expired: &BTreeSet<i64>,
    concurrency: usize,
    cache: &mut ProofCache,
) -> Result<Unreachable> {
    let name: Arc<str> = Arc::from(base.id.to_string());
    let version = base.metadata.format_version();
    let mut warnings = Vec::new();

    let mut expired_lists: Vec<String> = Vec::new();
    for s in base.metadata.snapshots() {
        if expired.contains(&s.snapshot_id()) {
            if s.manifest_list().is_empty() {
                return Err(Error::unsupported(format!(
                    "{name}: snapshot {} has no manifest list (v1 inline manifests)",
                    s.snapshot_id()
                )));
            }
            expired_lists.push(s.manifest_list().to_string());
        }
    }
    let mut retained_lists: Vec<String> = Vec::new();
    for s in after.metadata.snapshots() {
        if s.manifest_list().is_empty() {
            return Err(Error::unsupported(format!(
                "{name}: snapshot {} has no manifest list (v1 inline manifests)",
                s.snapshot_id()
            )));
        }
        retained_lists.push(s.manifest_list().to_string());
    }
    let retained_list_keys: HashSet<String> = retained_lists.iter().map(|p| key(p)).collect();

    // 1. Manifest lists, both sides, each once.
    // (manifest, listed by an expired snapshot, listed by a retained one), one per normalized path
    let mut manifests: Vec<(ManifestRef, bool, bool)> = Vec::new();
    let mut list_candidates: Vec<ExpiredFile> = Vec::new();
    {
        let mut jobs: Vec<(String, bool, Option<Arc<ListRead>>)> = Vec::new();
        let mut seen = HashSet::new();
        for (p, expired_side) in retained_lists
            .iter()
            .map(|p| (p, false))
            .chain(expired_lists.iter().map(|p| (p, true)))
        {
            if seen.insert(p.clone()) {
                jobs.push((p.clone(), expired_side, cache.lists.get(p).cloned()));
            }
        }
        let mut reads =
            futures::stream::iter(jobs.into_iter().map(|(path, expired_side, known)| {
                let storage = base.storage.clone();
                let name = Arc::clone(&name);
                tokio::spawn(async move {
                    let read = match known {
                        Some(r) => Ok((r, true)),
                        None => read_list(&storage, &name, &path, version)
                            .await
                            .map(|r| (Arc::new(r), false)),
                    };
                    (path, expired_side, read)
                })
            }))
            .buffer_unordered(concurrency);
        // Thousands of lists repeat the same manifests: dedupe by a hash of the raw path (its
        // bytes compared on a hit), and normalize each distinct path once.
        let mut by_hash: HashMap<u64, Vec<usize>, BuildHasherDefault<IdHasher>> =
            HashMap::default();
        let mut raw: Vec<(String, usize)> = Vec::new(); // raw path → index into `manifests`
        let mut by_key: HashMap<String, usize> = HashMap::new();
        while let Some(joined) = reads.next().await {
            let (path, expired_side, read) = joined
                .map_err(|e| Error::Internal(format!("{name}: manifest list task failed: {e}")))?;
            let read = match read {
                Ok((r, known)) => {
                    if !known {
                        cache.lists.insert(path.clone(), Arc::clone(&r));
                    }
                    r
                }
                // What an expired snapshot referenced cannot be known: its files stay.
                Err(e) if expired_side => {
                    warnings.push(format!(
                        "expired manifest list unreadable, its files are kept: {e}"
                    ));
                    continue;
                }
                Err(e) => return Err(e),
            };
            if expired_side && !retained_list_keys.contains(&key(&path)) {
                list_candidates.push(ExpiredFile {
                    kind: ExpiredFileKind::ManifestList,
                    path: path.clone(),
                    bytes: read.bytes,
                });
            }
            for m in &read.manifests {
                let text = &read.arena[m.start..m.end];
                let slots = by_hash.entry(m.hash).or_default();
                let idx = if let Some(r) = slots.iter().find(|r| raw[**r].0 == text) {
                    raw[*r].1
                } else {
                    let k = key(text);
                    let idx = *by_key.entry(k).or_insert_with(|| {
                        manifests.push((
                            ManifestRef {
                                path: text.to_string(),
                                length: m.length,
                                may_have_live: m.may_have_live,
                                deletes: m.deletes,
                            },
                            false,
                            false,
                        ));
                        manifests.len() - 1
                    });
                    slots.push(raw.len());
                    raw.push((text.to_string(), idx));
                    idx
                };
                let slot = &mut manifests[idx];
                if expired_side {
                    slot.1 = true;
                } else {
                    slot.2 = true;
                }
            }
        }
    }

    // 2. Manifests only expired snapshots list: they go, and their live entries are candidates.
    let expired_only: Vec<ManifestRef> = manifests
        .iter()
        .filter(|(_, e, r)| *e && !*r)
        .map(|(m, _, _)| m.clone())
        .collect();
    let mut files: Vec<ExpiredFile> = expired_only
        .iter()
        .map(|m| ExpiredFile {
            kind: ExpiredFileKind::Manifest,
            path: m.path.clone(),
            bytes: m.length,
        })
        .collect();
    files.extend(list_candidates);

    let mut candidates: HashMap<String, LiveEntry> = HashMap::new(); // key → entry
    {
        let jobs: Vec<(ManifestRef, Option<Arc<Vec<LiveEntry>>>)> = expired_only
            .into_iter()
            .filter(|m| m.may_have_live)
            .map(|m| {
                let known = cache.live.get(&m.path).cloned();
                (m, known)
            })
            .collect();
        let mut reads = futures::stream::iter(jobs.into_iter().map(|(m, known)| {
            let storage = base.storage.clone();
            let name = Arc::clone(&name);
            tokio::spawn(async move {
                let r = match known {
                    Some(entries) => Ok((entries, true)),
                    None => live_entries(&storage, &name, &m.path)
                        .await
                        .map(|e| (Arc::new(e), false)),
                };
                (m.path, r)
            })
        }))
        .buffer_unordered(concurrency);
        while let Some(joined) = reads.next().await {
            let (path, r) = joined
                .map_err(|e| Error::Internal(format!("{name}: manifest task failed: {e}")))?;
            match r {
                Ok((entries, known)) => {
                    for e in entries.iter() {
                        candidates.entry(key(&e.path)).or_insert_with(|| e.clone());
                    }
                    if !known {
                        cache.live.insert(path, entries);
                    }
                }
                Err(e) => warnings.push(format!(
                    "expired manifest {path} unreadable, the files it lists are kept: {e}"
                )),
            }
        }
    }

    // 3. Retained manifests strike out candidates they list as live.
    if !candidates.is_empty() {
        let want_data = candidates.values().any(|c| c.kind == ExpiredFileKind::Data);
        let want_deletes = candidates.values().any(|c| c.kind != ExpiredFileKind::Data);
        let mut by_name: HashMap<String, Vec<String>> = HashMap::new();
        for (k, c) in &candidates {
            by_name
                .entry(file_name(&c.path).to_string())
                .or_default()
                .push(k.clone());
        }
        let by_name = Arc::new(by_name);
        // Strikes found for other candidates say nothing of these: only exactly the same
        // candidates may reuse them.
        if cache.strikes_for.len() != candidates.len()
            || !candidates.keys().all(|k| cache.strikes_for.contains(k))
        {
            cache.strikes.clear();
            cache.strikes_for = candidates.keys().cloned().collect();
        }
        let mut jobs: Vec<ManifestRef> = Vec::new();
        for (m, _, r) in &manifests {
            if !(*r && m.may_have_live && if m.deletes { want_deletes } else { want_data }) {
                continue;
            }
            match cache.strikes.get(&m.path) {
                Some(hits) => {
                    for k in hits.iter() {
                        candidates.remove(k);
                    }
                }
                None => jobs.push(m.clone()),
            }
        }
        if candidates.is_empty() {
            jobs.clear(); // everything was struck by manifests read before
        }
        let mut reads = futures::stream::iter(jobs.into_iter().map(|m| {
            let storage = base.storage.clone();
            let name = Arc::clone(&name);
            let by_name = Arc::clone(&by_name);
            tokio::spawn(async move {
                let hits = reachable_candidates(&storage, &name, &m.path, &by_name).await;
                (m.path, hits)
            })
        }))
        .buffer_unordered(concurrency);
        while let Some(joined) = reads.next().await {
            let (path, hits) = joined
                .map_err(|e| Error::Internal(format!("{name}: manifest task failed: {e}")))?;
            let hits = hits?;
            for k in &hits {
                candidates.remove(k);
            }
            cache.strikes.insert(path, Arc::new(hits));
            if candidates.is_empty() {
                break; // nothing left to prove: the other reads would only strike nothing
            }
        }
    }
    files.extend(candidates.into_values().map(|c| ExpiredFile {
        kind: c.kind,
        path: c.path,
        bytes: c.bytes,
    }));

    // 4. Statistics of expired snapshots that no kept snapshot's statistics share.
    let kept_stats: HashSet<String> = after
        .metadata
        .statistics_iter()
        .map(|s| key(&s.statistics_path))
        .chain(
            after
                .metadata
                .partition_statistics_iter()
                .map(|s| key(&s.statistics_path)),
        )
        .collect();
    let mut stats_seen = HashSet::new();
    let stats = base
        .metadata
        .statistics_iter()
        .map(|s| (s.snapshot_id, &s.statistics_path, s.file_size_in_bytes))
        .chain(
            base.metadata
                .partition_statistics_iter()
                .map(|s| (s.snapshot_id, &s.statistics_path, s.file_size_in_bytes)),
        );
    for (id, path, size) in stats {
        let k = key(path);
        if expired.contains(&id) && !kept_stats.contains(&k) && stats_seen.insert(k) {
            files.push(ExpiredFile {
                kind: ExpiredFileKind::Statistics,
                path: path.clone(),
                bytes: size.max(0) as u64,
            });
        }
    }
    Ok(Unreachable { files, warnings })
}

async fn read_list(
    storage: &ObjectStorage,
    table: &str,
    path: &str,
    version: iceberg::spec::FormatVersion,
) -> Result<ListRead> {
    let bytes =
        crate::catalog::metadata::read_metadata_file(storage, table, path, "manifest list").await?;
    match parse_list_fast(&bytes) {
        Ok(read) => Ok(read),
        Err(why) => {
            tracing::debug!(table, path, why, "manifest list read by upstream's reader");
            parse_list_upstream(table, path, &bytes, version)
        }
    }
}

fn parse_list_fast(bytes: &[u8]) -> std::result::Result<ListRead, String> {
    let container = avro::open(bytes)?;
    let mut arena = String::with_capacity(bytes.len() / 2);
    let mut manifests = Vec::new();
    container.for_each(|cur, fields| {
        let (mut path, mut length, mut content, mut added, mut existing) =
            (None, None, 0, None, None);
        cur.record(fields, |f, cur| {
            if avro::is(f, 500, &["manifest_path"])? {
                path = Some(cur.leaf(&f.schema)?.str()?);
            } else if avro::is(f, 501, &["manifest_length"])? {
                length = cur.leaf(&f.schema)?.long();
            } else if avro::is(f, 517, &["content"])? {
                content = cur.leaf(&f.schema)?.long().unwrap_or(0);
            } else if avro::is(f, 504, &["added_files_count", "added_data_files_count"])? {
                added = cur.leaf(&f.schema)?.long();
            } else if avro::is(
                f,
                505,
                &["existing_files_count", "existing_data_files_count"],
            )? {
                existing = cur.leaf(&f.schema)?.long();
            } else {
                return Ok(false);
            }
            Ok(true)
        })?;
        let path = path.ok_or("a manifest list entry without manifest_path")?;
        let length = length.ok_or("a manifest list entry without manifest_length")?;
        let start = arena.len();
        arena.push_str(path);
        manifests.push(ListedManifest {
            hash: fnv1a(path.as_bytes()),
            start,
            end: arena.len(),
            length: length.max(0) as u64,
            may_have_live: !matches!((added, existing), (Some(0), Some(0))),
            deletes: content == 1,
        });
        Ok(())
    })?;
    Ok(ListRead {
        bytes: bytes.len() as u64,
        arena,
        manifests,
    })
}

fn parse_list_upstream(
    table: &str,
    path: &str,
    bytes: &[u8],
    version: iceberg::spec::FormatVersion,
) -> Result<ListRead> {
    let list = crate::catalog::metadata::parse_manifest_list(bytes, version)
        .map_err(|e| Error::metadata(table, path, format!("corrupt manifest list: {e}")))?;
    let mut arena = String::new();
    let mut manifests = Vec::new();
    for m in list.entries() {
        let start = arena.len();
        arena.push_str(&m.manifest_path);
        manifests.push(ListedManifest {
            hash: fnv1a(m.manifest_path.as_bytes()),
            start,
            end: arena.len(),
            length: m.manifest_length.max(0) as u64,
            may_have_live: !matches!(
                (m.added_files_count, m.existing_files_count),
                (Some(0), Some(0))
            ),
            deletes: m.content == iceberg::spec::ManifestContentType::Deletes,
        });
    }
    Ok(ListRead {
        bytes: bytes.len() as u64,
        arena,
        manifests,
    })
}

/// The expiry's fast Avro readers against upstream's, for the fuzz target `expire_readers`
/// (not API). Reads `bytes` as a manifest list and as a manifest. Panics when a fast reader
/// accepts the bytes and reads something else than upstream's reader (a list under the format
/// version its header declares, as expiry passes the table's): expiry would then keep or delete
/// the wrong files.
#[doc(hidden)]
pub fn check_fast_readers(bytes: &[u8]) {
    use iceberg::spec::FormatVersion;
    // The header's `format-version` entry: the key, then the value as Avro bytes (a zigzag
    // length, here one byte, and the digit).
    let declared = bytes
        .windows(16)
        .position(|w| &w[..14] == b"format-version")
        .and_then(|i| bytes.get(i + 14..i + 16))
        .and_then(|v| match v {
            [2, b'1'] => Some(FormatVersion::V1),
            [2, b'2'] => Some(FormatVersion::V2),
            [2, b'3'] => Some(FormatVersion::V3),
            _ => None,
        });
    let view = |r: &ListRead| -> Vec<(String, u64, bool, bool)> {
        r.manifests
            .iter()
            .map(|m| {
                let p = r.arena.get(m.start..m.end).unwrap_or_default();
                assert_eq!(m.hash, fnv1a(p.as_bytes()), "hash of {p}");
                (p.to_string(), m.length, m.may_have_live, m.deletes)
            })
            .collect()
    };
    if let (Ok(fast), Some(version)) = (parse_list_fast(bytes), declared)
        && let Ok(upstream) = parse_list_upstream("fuzz", "fuzz", bytes, version)
    {
        let (fast, upstream) = (view(&fast), view(&upstream));
        // A v1 list has no `content` (v1 tables have no delete files): upstream's v1 reader
        // drops it, so only v2 on compares it. Upstream's v1 reader also knows the file counts
        // only by their v1 names (`added_data_files_count`), which Java 1.5+ writes as
        // `added_files_count`; the fast reader finds them by field id. So on v1 the fast reader
        // may know a manifest has no live files where upstream cannot tell; it must never
        // claim live files where upstream knows there are none.
        let strip = |mut v: Vec<(String, u64, bool, bool)>| {
            if version == FormatVersion::V1 {
                for m in &mut v {
                    m.2 = true;
                    m.3 = false;
                }
            }
            v
        };
        if version == FormatVersion::V1 {
            for (f, u) in fast.iter().zip(&upstream) {
                assert!(
                    u.2 || !f.2,
                    "manifest list (V1): the fast reader says {} may have live files, upstream says it has none",
                    f.0
                );
            }
        }
        assert_eq!(
            strip(fast),
            strip(upstream),
            "manifest list ({version:?}): fast reader vs upstream"
        );
    }
    let mut fast = Vec::new();
    let mut push = |p: &str, k: ExpiredFileKind, b: u64| fast.push((p.to_string(), k, b));
    if live_fast(bytes, &mut push).is_ok()
        && let Ok(m) = crate::catalog::metadata::parse_manifest(bytes)
    {
        let upstream: Vec<_> = m
            .entries()
            .iter()
            .filter(|e| e.is_alive())
            .map(|e| {
                (
                    e.file_path().to_string(),
                    ExpiredFileKind::of_content(e.content_type()),
                    e.file_size_in_bytes(),
                )
            })
            .collect();
        assert_eq!(fast, upstream, "manifest: fast reader vs upstream");
    }
}

/// 64-bit FNV-1a: a fast hash for deduplicating paths (hits are confirmed by comparing bytes).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A hasher for keys that are hashes already.
#[derive(Default)]
struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

async fn read_manifest_bytes(
    storage: &ObjectStorage,
    table: &str,
    path: &str,
) -> Result<bytes::Bytes> {
    crate::catalog::metadata::read_metadata_file(storage, table, path, "manifest").await
}

/// Call `visit(path, kind, size)` for every live entry of a manifest.
fn for_each_live(
    table: &str,
    path: &str,
    bytes: &[u8],
    mut visit: impl FnMut(&str, ExpiredFileKind, u64),
) -> Result<()> {
    match live_fast(bytes, &mut visit) {
        Ok(()) => Ok(()),
        Err(why) => {
            tracing::debug!(table, path, why, "manifest read by upstream's reader");
            let manifest = crate::catalog::metadata::parse_manifest(bytes)
                .map_err(|e| Error::metadata(table, path, format!("corrupt manifest: {e}")))?;
            for e in manifest.entries().iter().filter(|e| e.is_alive()) {
                visit(
                    e.file_path(),
                    ExpiredFileKind::of_content(e.content_type()),
                    e.file_size_in_bytes(),
                );
            }
            Ok(())
        }
    }
}

/// [`for_each_live`] with the fast reader; visits nothing unless the whole file decodes.
fn live_fast(
    bytes: &[u8],
    visit: &mut impl FnMut(&str, ExpiredFileKind, u64),
) -> std::result::Result<(), String> {
    let container = avro::open(bytes)?;
    let mut live: Vec<(&str, i64, i64)> = Vec::new();
    container.for_each(|cur, fields| {
        let mut status = None;
        let (mut file, mut content, mut size) = (None, 0, None);
        cur.record(fields, |f, cur| {
            if avro::is(f, 0, &["status"])? {
                status = cur.leaf(&f.schema)?.long();
                Ok(true)
            } else if avro::is(f, 2, &["data_file"])? {
                let avro::Schema::Record(inner) = &f.schema else {
                    return Err("data_file is not a record".to_string());
                };
                cur.record(inner, |g, cur| {
                    if avro::is(g, 100, &["file_path"])? {
                        file = Some(cur.leaf(&g.schema)?.str()?);
                    } else if avro::is(g, 134, &["content"])? {
                        content = cur.leaf(&g.schema)?.long().unwrap_or(0);
                    } else if avro::is(g, 104, &["file_size_in_bytes"])? {
                        size = cur.leaf(&g.schema)?.long();
                    } else {
                        return Ok(false);
                    }
                    Ok(true)
                })?;
                Ok(true)
            } else {
                Ok(false)
            }
        })?;
        let status = status.ok_or("a manifest entry without status")?;
        let file = file.ok_or("a manifest entry without file_path")?;
        let size = size.ok_or("a manifest entry without file_size_in_bytes")?;
        if !(0..=2).contains(&status) || !(0..=2).contains(&content) {
            return Err(format!("unknown status {status} or content {content}"));
        }
        // 0 EXISTING, 1 ADDED, 2 DELETED.
        if status != 2 {
            live.push((file, content, size));
        }
        Ok(())
    })?;
    for (file, content, size) in live {
        let kind = match content {
            1 => ExpiredFileKind::PositionDeletes,
            2 => ExpiredFileKind::EqualityDeletes,
            _ => ExpiredFileKind::Data,
        };
        visit(file, kind, size.max(0) as u64);
    }
    Ok(())
}

/// The live entries of one manifest.
async fn live_entries(storage: &ObjectStorage, table: &str, path: &str) -> Result<Vec<LiveEntry>> {
    let bytes = read_manifest_bytes(storage, table, path).await?;
    let mut out = Vec::new();
    for_each_live(table, path, &bytes, |file, kind, size| {
        out.push(LiveEntry {
            path: file.to_string(),
            kind,
            bytes: size,
        });
    })?;
    Ok(out)
}

/// The candidate keys one retained manifest lists as live.
async fn reachable_candidates(
    storage: &ObjectStorage,
    table: &str,
    path: &str,
    by_name: &HashMap<String, Vec<String>>,
) -> Result<Vec<String>> {
    let bytes = read_manifest_bytes(storage, table, path).await?;
    let mut hits = Vec::new();
    for_each_live(table, path, &bytes, |file, _, _| {
        // File names are unique in practice: normalize only the few paths whose name matches.
        if let Some(keys) = by_name.get(file_name(file)) {
            let k = key(file);
            if keys.contains(&k) {
                hits.push(k);
            }
        }
    })?;
    Ok(hits)
}

/// The prefixes a table writes under: its location, and its data and metadata paths.
fn table_roots(metadata: &TableMetadata) -> Vec<String> {
    let mut roots = vec![metadata.location().to_string()];
    for k in [
        WRITE_DATA_PATH,
        WRITE_METADATA_PATH,
        OBJECT_STORAGE_PATH,
        FOLDER_STORAGE_PATH,
    ] {
        if let Some(v) = metadata.properties().get(k)
            && !v.trim().is_empty()
        {
            roots.push(v.trim().to_string());
        }
    }
    roots
        .iter()
        .filter_map(|r| normalize_location(r).ok())
        .map(|r| format!("{}/", r.trim_end_matches('/')))
        .collect()
}

fn within(roots: &[String], path: &str) -> bool {
    normalize_location(path).is_ok_and(|p| roots.iter().any(|r| p.starts_with(r.as_str())))
}

// ------------------------------------------------------------------------------------------------
// Deleting
// ------------------------------------------------------------------------------------------------

async fn delete_files(
    storage: &ObjectStorage,
    files: Vec<ExpiredFile>,
    concurrency: usize,
) -> (Vec<ExpiredFile>, Vec<DeleteFailure>) {
    let mut done = Vec::new();
    let mut failed = Vec::new();
    let mut results = futures::stream::iter(files.into_iter().map(|f| async move {
        let r = storage.delete(&f.path).await;
        (f, r)
    }))
    .buffer_unordered(concurrency);
    while let Some((f, r)) = results.next().await {
        match r {
            Ok(()) => done.push(f),
            Err(e) => {
                tracing::warn!(file = f.path, error = %e, "could not delete an expired file");
                failed.push(DeleteFailure {
                    kind: f.kind,
                    path: f.path,
                    bytes: f.bytes,
                    message: e.to_string(),
                });
            }
        }
    }
    (done, failed)
}

/// Sizes of existing files among `paths` (missing or unreadable ones are left out).
/// Sizes already in `known` are not asked again (and new ones are added to it).
async fn stat_all(
    storage: &ObjectStorage,
    paths: &[String],
    known: &mut HashMap<String, u64>,
) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    for p in paths {
        if let Some(size) = known.get(p) {
            out.insert(p.clone(), *size);
        } else if let Ok(Some(o)) = storage.head(p).await {
            known.insert(p.clone(), o.size);
            out.insert(p.clone(), o.size);
        }
    }
    out
}

/// Metadata files `head` knew that the committed metadata no longer logs.
fn dropped_from_log(head: &LoadedTable, committed: &LoadedTable) -> Vec<String> {
    if !prop_true(committed.metadata.properties(), DELETE_AFTER_COMMIT) {
        return Vec::new();
    }
    let kept: HashSet<String> = committed
        .metadata
        .metadata_log()
        .iter()
        .map(|m| key(&m.metadata_file))
        .chain(committed.metadata_location.iter().map(|l| key(l)))
        .collect();
    head.metadata
        .metadata_log()
        .iter()
        .map(|m| m.metadata_file.clone())
        .chain(head.metadata_location.iter().cloned())
        .filter(|p| !kept.contains(&key(p)))
        .collect()
}

/// A pointer catalog's commit already deleted the metadata files it dropped from the log (a
/// REST server may have too): delete what is left, and report them all.
async fn finish_metadata_cleanup(
    storage: &ObjectStorage,
    dropped: Vec<String>,
    sizes: &HashMap<String, u64>,
) -> (Vec<ExpiredFile>, Vec<DeleteFailure>) {
    let mut done = Vec::new();
    let mut failed = Vec::new();
    for path in dropped {
        let bytes = sizes.get(&path).copied().unwrap_or(0);
        let gone = match storage.head(&path).await {
            Ok(None) => Ok(()),
            Ok(Some(_)) => storage.delete(&path).await,
            Err(e) => Err(e),
        };
        match gone {
            Ok(()) => done.push(ExpiredFile {
                kind: ExpiredFileKind::MetadataJson,
                path,
                bytes,
            }),
            Err(e) => failed.push(DeleteFailure {
                kind: ExpiredFileKind::MetadataJson,
                path,
                bytes,
                message: e.to_string(),
            }),
        }
    }
    (done, failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000;
    const NOW: i64 = 1_767_225_600_000 + 100 * HOUR;

    fn branch(
        id: i64,
        min_keep: Option<i32>,
        max_age: Option<i64>,
        max_ref_age: Option<i64>,
    ) -> SnapshotReference {
        SnapshotReference::new(
            id,
            SnapshotRetention::branch(min_keep, max_age, max_ref_age),
        )
    }

    fn tag(id: i64, max_ref_age: Option<i64>) -> SnapshotReference {
        SnapshotReference::new(
            id,
            SnapshotRetention::Tag {
                max_ref_age_ms: max_ref_age,
            },
        )
    }

    /// A linear main of snapshots 1..=n, snapshot i committed `n - i + 1` hours before NOW.
    fn linear(n: i64) -> History {
        let mut h = History::default();
        for i in 1..=n {
            let parent = (i > 1).then(|| i - 1);
            h.snapshots.insert(i, (parent, NOW - (n - i + 1) * HOUR));
        }
        h.refs
            .insert(MAIN_BRANCH.into(), branch(n, None, None, None));
        h
    }

    fn retention(older_than: i64, retain_last: u32) -> Retention {
        Retention {
            now_ms: NOW,
            older_than_ms: older_than,
            retain_last,
            max_ref_age_ms: i64::MAX,
            snapshot_ids: BTreeSet::new(),
        }
    }

    #[test]
    fn older_than_expires_strictly_older_snapshots_of_main() {
        let h = linear(10); // snapshot i at NOW - (11 - i) h
        // Snapshot 5 is at NOW - 6h: kept (>=), 1..4 go.
        let s = select_snapshots(&h, &retention(NOW - 6 * HOUR, 1)).unwrap();
        assert_eq!(s.expired, vec![1, 2, 3, 4]);
        assert_eq!(s.retained, (5..=10).collect::<Vec<_>>());
        assert!(s.removed_refs.is_empty());
        assert_eq!(s.retained_refs.get("main"), Some(&10));
    }

    #[test]
    fn retain_last_keeps_the_newest_even_when_old() {
        let h = linear(10);
        let s = select_snapshots(&h, &retention(NOW, 3)).unwrap();
        assert_eq!(s.retained, vec![8, 9, 10]);
        assert_eq!(s.expired, (1..=7).collect::<Vec<_>>());
        // retain_last 1 with everything old: only the head stays.
        let s = select_snapshots(&h, &retention(NOW, 1)).unwrap();
        assert_eq!(s.retained, vec![10]);
        // retain_last beyond the history keeps everything.
        let s = select_snapshots(&h, &retention(NOW, 50)).unwrap();
        assert!(s.is_empty());
    }

    #[test]
    fn branch_retention_keeps_its_ancestors_and_its_own_settings_win() {
        // main: 1..10; branch `audit` forks at 4 with 11, 12 (old); its own min-snapshots-to-keep 4.
        let mut h = linear(10);
        h.snapshots.insert(11, (Some(4), NOW - 50 * HOUR));
        h.snapshots.insert(12, (Some(11), NOW - 49 * HOUR));
        h.refs
            .insert("audit".into(), branch(12, Some(4), None, None));
        let s = select_snapshots(&h, &retention(NOW - 2 * HOUR, 1)).unwrap();
        // main keeps 9 (NOW-2h) and 10; audit keeps 12, 11, 4, 3 (four, whatever their age).
        assert_eq!(s.retained, vec![3, 4, 9, 10, 11, 12]);
        assert_eq!(s.expired, vec![1, 2, 5, 6, 7, 8]);

        // A branch's max-snapshot-age-ms overrides older_than: 12 is 49 h old, 11 is 50 h.
        h.refs.insert(
            "audit".into(),
            branch(12, Some(1), Some(49 * HOUR + 1), None),
        );
        let s = select_snapshots(&h, &retention(NOW - 2 * HOUR, 1)).unwrap();
        assert_eq!(s.retained, vec![9, 10, 12]);
    }

    #[test]
    fn tags_keep_their_snapshot_until_their_ref_age_expires() {
        let mut h = linear(10);
        h.refs.insert("v1".into(), tag(2, None));
        h.refs.insert("stale".into(), tag(3, Some(HOUR))); // snapshot 3 is 8 h old
        let s = select_snapshots(&h, &retention(NOW, 1)).unwrap();
        assert_eq!(s.retained, vec![2, 10]);
        assert_eq!(s.removed_refs, vec!["stale".to_string()]);
        assert_eq!(s.retained_refs.keys().collect::<Vec<_>>(), ["main", "v1"]);
        // The table-wide default ref age applies to refs without their own.
        let mut r = retention(NOW, 1);
        r.max_ref_age_ms = 5 * HOUR; // snapshot 2 is 9 h old
        let s = select_snapshots(&h, &r).unwrap();
        assert_eq!(s.retained, vec![10]);
        assert_eq!(s.removed_refs, vec!["stale".to_string(), "v1".to_string()]);
        // main is never removed, however old.
        let mut old = linear(2);
        old.refs
            .insert(MAIN_BRANCH.into(), branch(2, None, None, Some(1)));
        let s = select_snapshots(&old, &retention(NOW, 1)).unwrap();
        assert!(s.removed_refs.is_empty());
        assert_eq!(s.retained, vec![2]);
    }

    #[test]
    fn old_branch_expires_with_its_ref() {
        let mut h = linear(5);
        h.snapshots.insert(20, (Some(2), NOW - 40 * HOUR));
        h.refs
            .insert("dev".into(), branch(20, Some(5), None, Some(10 * HOUR)));
        let s = select_snapshots(&h, &retention(NOW, 1)).unwrap();
        assert_eq!(s.removed_refs, vec!["dev".to_string()]);
        assert_eq!(s.retained, vec![5]);
        assert!(s.expired.contains(&20));
    }

    #[test]
    fn unreferenced_snapshots_stay_while_young() {
        // 1..5 on main; 30 and 31 are left over from a rolled-back commit (no ref reaches them).
        let mut h = linear(5);
        h.snapshots.insert(30, (Some(3), NOW - HOUR / 2));
        h.snapshots.insert(31, (Some(3), NOW - 30 * HOUR));
        let s = select_snapshots(&h, &retention(NOW - HOUR, 1)).unwrap();
        assert!(s.retained.contains(&30));
        assert!(s.expired.contains(&31));
    }

    #[test]
    fn explicit_ids_go_unless_a_ref_points_at_them() {
        let mut h = linear(6);
        h.refs.insert("v1".into(), tag(2, None));
        let mut r = retention(NOW - 100 * HOUR, 1); // the age rule alone expires nothing
        r.snapshot_ids = [4, 5, 99].into();
        let s = select_snapshots(&h, &r).unwrap();
        // Java: an id in a branch's retention window still goes; only ref heads are refused.
        assert_eq!(s.expired, vec![4, 5]);
        assert_eq!(s.unknown_ids, vec![99]);
        r.snapshot_ids = [2].into();
        let e = select_snapshots(&h, &r).unwrap_err();
        assert!(matches!(e, Error::Validation { .. }), "{e}");
        assert!(e.to_string().contains("v1"), "{e}");
        r.snapshot_ids = [6].into();
        assert!(select_snapshots(&h, &r).is_err());
    }

    #[test]
    fn corrupt_parent_cycles_end_the_walk() {
        let mut h = History::default();
        h.snapshots.insert(1, (Some(2), NOW - 10 * HOUR));
        h.snapshots.insert(2, (Some(1), NOW - 9 * HOUR));
        h.refs
            .insert(MAIN_BRANCH.into(), branch(2, None, None, None));
        let s = select_snapshots(&h, &retention(NOW, 1)).unwrap();
        assert_eq!(s.retained, vec![2]);
        assert_eq!(s.expired, vec![1]);
    }

    #[test]
    fn resolve_uses_table_properties_and_the_clock() {
        let props = HashMap::from([
            (MAX_SNAPSHOT_AGE_MS.to_string(), "3600000".to_string()),
            (MIN_SNAPSHOTS_TO_KEEP.to_string(), "4".to_string()),
            (MAX_REF_AGE_MS.to_string(), "7200000".to_string()),
        ]);
        let r = Retention::resolve(&ExpireOptions::default(), &props, NOW).unwrap();
        assert_eq!(
            (r.older_than_ms, r.retain_last, r.max_ref_age_ms),
            (NOW - HOUR, 4, 2 * HOUR)
        );
        let r = Retention::resolve(&ExpireOptions::default(), &HashMap::new(), NOW).unwrap();
        assert_eq!(r.older_than_ms, NOW - DEFAULT_MAX_SNAPSHOT_AGE_MS);
        assert_eq!((r.retain_last, r.max_ref_age_ms), (1, i64::MAX));
        let opts = ExpireOptions {
            older_than_ms: Some(NOW - 5),
            retain_last: Some(2),
            ..ExpireOptions::default()
        };
        let r = Retention::resolve(&opts, &props, NOW).unwrap();
        assert_eq!((r.older_than_ms, r.retain_last), (NOW - 5, 2));
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        let future = ExpireOptions {
            older_than_ms: Some(NOW + 1),
            ..ExpireOptions::default()
        };
        let e = Retention::resolve(&future, &HashMap::new(), NOW).unwrap_err();
        assert!(matches!(e, Error::Validation { .. }), "{e}");
        for bad in [
            ExpireOptions {
                retain_last: Some(0),
                ..ExpireOptions::default()
            },
            ExpireOptions {
                older_than_ms: Some(-1),
                ..ExpireOptions::default()
            },
            ExpireOptions {
                max_concurrent_deletes: 0,
                ..ExpireOptions::default()
            },
        ] {
            assert!(matches!(bad.validate(), Err(Error::Validation { .. })));
        }
        for (k, v) in [
            (MAX_SNAPSHOT_AGE_MS, "5 days"),
            (MIN_SNAPSHOTS_TO_KEEP, "0"),
            (MAX_REF_AGE_MS, "x"),
        ] {
            let props = HashMap::from([(k.to_string(), v.to_string())]);
            let e = Retention::resolve(&ExpireOptions::default(), &props, NOW).unwrap_err();
            assert!(matches!(e, Error::Config { .. }), "{k}: {e}");
        }
    }

    #[test]
    fn defaults_are_safe_and_serde_round_trips() {
        let d = ExpireOptions::default();
        assert!(d.dry_run && d.clean_files);
        let parsed: ExpireOptions = serde_json::from_str(r#"{"retain_last": 3}"#).unwrap();
        assert!(parsed.dry_run);
        assert_eq!(parsed.retain_last, Some(3));
        assert!(serde_json::from_str::<ExpireOptions>(r#"{"retainlast": 3}"#).is_err());
    }

    #[test]
    fn history_from_metadata_reads_refs_and_changes_pin_them() {
        let md_json = r#"{"format-version":2,"table-uuid":"9c12d441-03fe-4693-9a96-a0705ddf69c1","location":"file:///w/t","last-sequence-number":3,"last-updated-ms":1,"last-column-id":1,"current-schema-id":0,"schemas":[{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"x","required":true,"type":"long"}]}],"default-spec-id":0,"partition-specs":[{"spec-id":0,"fields":[]}],"last-partition-id":999,"default-sort-order-id":0,"sort-orders":[{"order-id":0,"fields":[]}],"properties":{},
          "current-snapshot-id":3,
          "snapshots":[
            {"snapshot-id":1,"sequence-number":1,"timestamp-ms":1000,"manifest-list":"file:///w/t/metadata/snap-1.avro","summary":{"operation":"append"}},
            {"snapshot-id":2,"parent-snapshot-id":1,"sequence-number":2,"timestamp-ms":2000,"manifest-list":"file:///w/t/metadata/snap-2.avro","summary":{"operation":"append"}},
            {"snapshot-id":3,"parent-snapshot-id":2,"sequence-number":3,"timestamp-ms":3000,"manifest-list":"file:///w/t/metadata/snap-3.avro","summary":{"operation":"append"}}],
          "statistics":[{"snapshot-id":1,"statistics-path":"file:///w/t/metadata/1.stats","file-size-in-bytes":10,"file-footer-size-in-bytes":5,"blob-metadata":[]}],
          "refs":{"main":{"snapshot-id":3,"type":"branch"},"old":{"snapshot-id":2,"type":"tag","max-ref-age-ms":10}},
          "snapshot-log":[],"metadata-log":[]}"#;
        let md: TableMetadata = serde_json::from_str(md_json).unwrap();
        let h = History::of("t", &md).unwrap();
        assert_eq!(h.snapshots.len(), 3);
        assert_eq!(h.snapshots[&2], (Some(1), 2000));
        assert_eq!(h.refs.len(), 2);
        let s = select_snapshots(
            &h,
            &Retention {
                now_ms: 10_000,
                older_than_ms: 10_000,
                retain_last: 1,
                max_ref_age_ms: i64::MAX,
                snapshot_ids: BTreeSet::new(),
            },
        )
        .unwrap();
        assert_eq!(s.expired, vec![1, 2]);
        assert_eq!(s.removed_refs, vec!["old".to_string()]);
        let changes = expiry_changes(&md, &h, &s);
        assert!(
            changes
                .requirements
                .contains(&TableRequirement::RefSnapshotIdMatch {
                    r#ref: "main".into(),
                    snapshot_id: Some(3)
                })
        );
        assert!(
            changes
                .requirements
                .contains(&TableRequirement::RefSnapshotIdMatch {
                    r#ref: "old".into(),
                    snapshot_id: Some(2)
                })
        );
        assert!(matches!(
            changes.requirements[0],
            TableRequirement::UuidMatch { .. }
        ));
        assert_eq!(
            changes.updates,
            vec![
                TableUpdate::RemoveSnapshotRef {
                    ref_name: "old".into()
                },
                TableUpdate::RemoveStatistics { snapshot_id: 1 },
                TableUpdate::RemoveSnapshots {
                    snapshot_ids: vec![1, 2]
                },
            ]
        );
    }

    /// A container with the same metadata and records, its blocks deflated (as Java writes them).
    fn deflated(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let c = avro::open(bytes).unwrap();
        // The header's metadata map (open() keeps only the parsed schema).
        let mut at = 4;
        let mut meta: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let read = |at: &mut usize| {
            let (len, n) = zigzag(&bytes[*at..]);
            *at += n;
            let v = bytes[*at..*at + len as usize].to_vec();
            *at += len as usize;
            v
        };
        loop {
            let (count, n) = zigzag(&bytes[at..]);
            at += n;
            if count == 0 {
                break;
            }
            for _ in 0..count {
                let k = read(&mut at);
                let v = read(&mut at);
                meta.push((k, v));
            }
        }
        let sync = [7u8; 16];
        let mut out = b"Obj\x01".to_vec();
        out.extend(varint(meta.len() as i64));
        for (k, v) in &meta {
            let v: &[u8] = if k == b"avro.codec" { b"deflate" } else { v };
            out.extend(varint(k.len() as i64));
            out.extend(k);
            out.extend(varint(v.len() as i64));
            out.extend(v);
        }
        out.extend(varint(0));
        out.extend(sync);
        for (count, data) in &c.blocks {
            let mut enc =
                flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
            enc.write_all(data).unwrap();
            let z = enc.finish().unwrap();
            out.extend(varint(*count as i64));
            out.extend(varint(z.len() as i64));
            out.extend(z);
            out.extend(sync);
        }
        out
    }

    fn varint(v: i64) -> Vec<u8> {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        let mut out = Vec::new();
        loop {
            if z < 0x80 {
                out.push(z as u8);
                return out;
            }
            out.push((z as u8 & 0x7f) | 0x80);
            z >>= 7;
        }
    }

    fn zigzag(b: &[u8]) -> (i64, usize) {
        let (mut v, mut i) = (0u64, 0);
        loop {
            v |= u64::from(b[i] & 0x7f) << (7 * i);
            i += 1;
            if b[i - 1] & 0x80 == 0 {
                return ((v >> 1) as i64 ^ -((v & 1) as i64), i);
            }
        }
    }

    fn list_view(r: &ListRead) -> Vec<(String, u64, bool, bool, u64)> {
        r.manifests
            .iter()
            .map(|m| {
                let p = &r.arena[m.start..m.end];
                assert_eq!(m.hash, fnv1a(p.as_bytes()));
                (p.to_string(), m.length, m.may_have_live, m.deletes, m.hash)
            })
            .collect()
    }

    fn live_view(bytes: &[u8], fast: bool) -> Vec<(String, ExpiredFileKind, u64)> {
        let mut out = Vec::new();
        let mut push = |p: &str, k: ExpiredFileKind, b: u64| out.push((p.to_string(), k, b));
        if fast {
            live_fast(bytes, &mut push).unwrap();
        } else {
            let m = iceberg::spec::Manifest::parse_avro(bytes).unwrap();
            for e in m.entries().iter().filter(|e| e.is_alive()) {
                push(
                    e.file_path(),
                    ExpiredFileKind::of_content(e.content_type()),
                    e.file_size_in_bytes(),
                );
            }
        }
        out
    }

    /// The fast Avro reader reads exactly what upstream's does, from Cryo's own manifest lists
    /// and manifests (format v1, v2, v3; ADDED, EXISTING and DELETED entries; data and delete
    /// manifests), uncompressed and deflated; it refuses codecs it does not know.
    #[tokio::test]
    #[allow(
        clippy::too_many_lines,
        reason = "one table per format version, every file compared"
    )]
    async fn fast_avro_reader_agrees_with_upstream() {
        use arrow_array::{ArrayRef, Int64Array, RecordBatch};
        use iceberg::spec::{FormatVersion, NestedField, PrimitiveType, Schema, Type};

        use crate::catalog::{CatalogConfig, Namespace};
        use crate::commit::{NewTable, SnapshotProducer, write_data_files, write_position_deletes};

        let dir = tempfile::tempdir().unwrap();
        let mut config = CatalogConfig::local("t", dir.path());
        config
            .properties
            .insert("init_catalog_tables".into(), "true".into());
        let catalog = Catalog::connect(config).await.unwrap();
        catalog
            .create_namespace(&Namespace::new(["db"]))
            .await
            .unwrap();
        let committer = catalog.committer().unwrap();
        let batch = |first: i64| {
            let schema =
                std::sync::Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
                    "id",
                    arrow_schema::DataType::Int64,
                    false,
                )]));
            RecordBatch::try_new(
                schema,
                vec![
                    std::sync::Arc::new(Int64Array::from_iter_values(first..first + 5)) as ArrayRef,
                ],
            )
            .unwrap()
        };
        let (mut lists, mut manifests) = (0, 0);
        for version in [FormatVersion::V1, FormatVersion::V2, FormatVersion::V3] {
            let id = TableId::parse(&format!("db.t_{version}")).unwrap();
            let schema = Schema::builder()
                .with_fields(vec![
                    NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                ])
                .build()
                .unwrap();
            let mut t = catalog
                .create_table(&id, NewTable::new(schema).with_format_version(version))
                .await
                .unwrap();
            let mut first_file = None;
            for i in 0..3 {
                let w = write_data_files(&t, [batch(i * 5)]).await.unwrap();
                first_file.get_or_insert_with(|| w.files[0].file_path().to_string());
                t = SnapshotProducer::new(&t)
                    .add_data_files(w.files)
                    .commit(committer.as_ref())
                    .await
                    .unwrap()
                    .table;
            }
            let victim = first_file.unwrap();
            if version == FormatVersion::V2 {
                let d = write_position_deletes(&t, &[(victim.clone(), vec![0, 1])])
                    .await
                    .unwrap();
                t = SnapshotProducer::new(&t)
                    .add_delete_files(d.files)
                    .commit(committer.as_ref())
                    .await
                    .unwrap()
                    .table;
            }
            t = SnapshotProducer::new(&t)
                .delete_data_files([victim])
                .commit(committer.as_ref())
                .await
                .unwrap()
                .table;
            for s in t.metadata.snapshots() {
                let bytes = t.storage.read_all(s.manifest_list()).await.unwrap();
                let upstream = parse_list_upstream("t", "l", &bytes, version).unwrap();
                let expect = list_view(&upstream);
                assert_eq!(list_view(&parse_list_fast(&bytes).unwrap()), expect);
                assert_eq!(
                    list_view(&parse_list_fast(&deflated(&bytes)).unwrap()),
                    expect
                );
                lists += 1;
                for m in &upstream.manifests {
                    let mb = t
                        .storage
                        .read_all(&upstream.arena[m.start..m.end])
                        .await
                        .unwrap();
                    let expect = live_view(&mb, false);
                    assert_eq!(live_view(&mb, true), expect);
                    assert_eq!(live_view(&deflated(&mb), true), expect);
                    assert_eq!(
                        live_view(&deflated(&mb), false),
                        expect,
                        "a valid deflated file"
                    );
                    manifests += 1;
                }
            }
        }
        assert!(
            lists == 13 && manifests >= 30,
            "{lists} lists, {manifests} manifests"
        );
        // Unknown codecs and damaged files are refused (the caller then uses upstream's reader).
        let mut snappy = deflated(&std::fs::read(first_avro(dir.path())).unwrap());
        let at = snappy.windows(7).position(|w| w == b"deflate").unwrap();
        snappy.splice(at..at + 7, b"snappyX".iter().copied());
        assert!(avro::open(&snappy).is_err());
        let good = std::fs::read(first_avro(dir.path())).unwrap();
        assert!(parse_list_fast(&good[..good.len() - 20]).is_err());
        assert!(parse_list_fast(b"Obj\x01").is_err());
    }

    /// Commits a concurrent append through `inner` before forwarding the first commit, so that
    /// commit finds `main` moved.
    #[derive(Debug)]
    struct Interfering {
        inner: Arc<dyn CatalogCommitter>,
        fired: std::sync::atomic::AtomicBool,
    }

    #[async_trait::async_trait]
    impl CatalogCommitter for Interfering {
        async fn load_head(&self, base: &LoadedTable) -> Result<LoadedTable> {
            self.inner.load_head(base).await
        }

        async fn commit(&self, base: &LoadedTable, changes: TableChanges) -> Result<LoadedTable> {
            if !self.fired.swap(true, std::sync::atomic::Ordering::SeqCst) {
                let head = self.inner.load_head(base).await?;
                let w = crate::commit::write_data_files(&head, [ids(100)]).await?;
                crate::commit::SnapshotProducer::new(&head)
                    .add_data_files(w.files)
                    .commit(self.inner.as_ref())
                    .await?;
            }
            self.inner.commit(base, changes).await
        }
    }

    fn ids(first: i64) -> arrow_array::RecordBatch {
        let schema = Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
            "id",
            arrow_schema::DataType::Int64,
            false,
        )]));
        arrow_array::RecordBatch::try_new(
            schema,
            vec![
                Arc::new(arrow_array::Int64Array::from_iter_values(first..first + 5))
                    as arrow_array::ArrayRef,
            ],
        )
        .unwrap()
    }

    /// A local catalog under `dir` with an empty table `name` of one `id: long` column.
    async fn id_table(dir: &std::path::Path, name: &str) -> (Catalog, TableId, LoadedTable) {
        use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};

        use crate::catalog::{CatalogConfig, Namespace};
        use crate::commit::NewTable;

        let mut config = CatalogConfig::local("t", dir);
        config
            .properties
            .insert("init_catalog_tables".into(), "true".into());
        let catalog = Catalog::connect(config).await.unwrap();
        catalog
            .create_namespace(&Namespace::new(["db"]))
            .await
            .unwrap();
        let id = TableId::parse(name).unwrap();
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            ])
            .build()
            .unwrap();
        let t = catalog
            .create_table(&id, NewTable::new(schema))
            .await
            .unwrap();
        (catalog, id, t)
    }

    /// A writer commits between Cryo's selection and its commit: the commit's requirement on
    /// `main` fails, Cryo reloads, selects again on the new head (which now keeps the new
    /// snapshot and lets the old head go) and commits.
    #[tokio::test]
    async fn a_concurrent_commit_is_retried_on_the_new_head() {
        use crate::commit::{SnapshotProducer, write_data_files};

        let dir = tempfile::tempdir().unwrap();
        let (catalog, id, mut t) = id_table(dir.path(), "db.busy").await;
        let committer = catalog.committer().unwrap();
        for i in 0..4 {
            let w = write_data_files(&t, [ids(i * 5)]).await.unwrap();
            t = SnapshotProducer::new(&t)
                .add_data_files(w.files)
                .commit(committer.as_ref())
                .await
                .unwrap()
                .table;
        }
        let old: Vec<i64> = t.metadata.snapshots().map(|s| s.snapshot_id()).collect();
        let interfering: Arc<dyn CatalogCommitter> = Arc::new(Interfering {
            inner: Arc::clone(&committer),
            fired: false.into(),
        });
        let out = ExpireSnapshots::new(&catalog, id.clone())
            .with_options(ExpireOptions {
                older_than_ms: Some(chrono::Utc::now().timestamp_millis() + 1),
                retain_last: Some(1),
                dry_run: false,
                retry: Some(RetryPolicy {
                    min_backoff_ms: 1,
                    max_backoff_ms: 5,
                    ..RetryPolicy::default()
                }),
                ..ExpireOptions::default()
            })
            .with_clock(Arc::new(crate::clock::FixedClock(
                chrono::Utc::now().timestamp_millis() + 60_000,
            )))
            .run(Some(interfering))
            .await
            .unwrap();
        assert_eq!(out.retries, 1);
        let after = catalog.load_table(&id).await.unwrap();
        let head = after.metadata.current_snapshot_id().unwrap();
        assert!(!old.contains(&head), "the concurrent snapshot is the head");
        assert_eq!(out.retained_snapshot_ids, vec![head]);
        let mut expired = old.clone();
        expired.sort_unstable();
        assert_eq!(
            out.expired_snapshot_ids, expired,
            "all four old snapshots, the old head too"
        );
        assert_eq!(out.deleted.manifest_lists.files, 4);
        // The concurrent writer's rows and every earlier row are still there.
        let rows: usize = crate::commit::live_files(&after)
            .await
            .unwrap()
            .iter()
            .map(|f| f.file.record_count() as usize)
            .sum();
        assert_eq!(rows, 25);
        assert_eq!(out.deleted.data.files, 0);
    }

    /// Proofs made one after another with one cache (as an expiry's attempts are) find exactly
    /// what proofs with a fresh cache find, while the expired set, the candidates and the
    /// retained manifests change between them; every reuse path is taken: lists, expired-only
    /// manifests, and the strikes of retained manifests (same candidates: reused; other
    /// candidates: read again).
    #[tokio::test]
    #[allow(clippy::too_many_lines)] // Reason: one history, then the proofs over it.
    async fn proofs_sharing_a_cache_find_what_fresh_proofs_find() {
        use crate::commit::{SnapshotProducer, write_data_files};
        use crate::maintain::{RewriteManifests, RewriteManifestsStatus};

        let dir = tempfile::tempdir().unwrap();
        let (catalog, id, mut t) = id_table(dir.path(), "db.proofs").await;
        let committer = catalog.committer().unwrap();
        let path_of = std::cell::RefCell::new(HashMap::new());
        let append = async |t: &LoadedTable, name: &str, first: i64| {
            let w = write_data_files(t, [ids(first)]).await.unwrap();
            path_of
                .borrow_mut()
                .insert(name.to_string(), w.files[0].file_path().to_string());
            SnapshotProducer::new(t)
                .add_data_files(w.files)
                .commit(committer.as_ref())
                .await
                .unwrap()
                .table
        };
        // s1: +A; s2: +B; s3: A and B's manifests rewritten into one; s4: A replaced by C;
        // s5: +D; s6: B replaced by E; s7: +F.
        t = append(&t, "A", 0).await;
        append(&t, "B", 5).await;
        let rewritten = RewriteManifests::new(&catalog, id.clone())
            .execute()
            .await
            .unwrap();
        assert_eq!(rewritten.status, RewriteManifestsStatus::Committed);
        t = catalog.load_table(&id).await.unwrap();
        let replace = async |t: &LoadedTable, old: &str, new: &str, first: i64| {
            let w = write_data_files(t, [ids(first)]).await.unwrap();
            let replaced = path_of.borrow()[old].clone();
            path_of
                .borrow_mut()
                .insert(new.to_string(), w.files[0].file_path().to_string());
            SnapshotProducer::replace(t)
                .delete_data_files([replaced])
                .add_data_files(w.files)
                .commit(committer.as_ref())
                .await
                .unwrap()
                .table
        };
        t = replace(&t, "A", "C", 0).await;
        t = append(&t, "D", 10).await;
        t = replace(&t, "B", "E", 5).await;
        t = append(&t, "F", 15).await;
        let mut s: Vec<(i64, i64)> = t
            .metadata
            .snapshots()
            .map(|s| (s.sequence_number(), s.snapshot_id()))
            .collect();
        s.sort_unstable();
        let s: Vec<i64> = s.into_iter().map(|(_, id)| id).collect();
        assert_eq!(s.len(), 7);

        let proof = async |expired: &[usize], cache: &mut ProofCache| {
            let expired: BTreeSet<i64> = expired.iter().map(|i| s[*i - 1]).collect();
            let changes = TableChanges::new(
                Vec::new(),
                vec![TableUpdate::RemoveSnapshots {
                    snapshot_ids: expired.iter().copied().collect(),
                }],
            );
            let (md, _) = apply_locally(&t, &changes).unwrap();
            let after = LoadedTable {
                metadata: Arc::new(md),
                metadata_location: None,
                ..t.clone()
            };
            let found = unreachable_files(&t, &after, &expired, 4, cache)
                .await
                .unwrap();
            assert!(found.warnings.is_empty(), "{:?}", found.warnings);
            let mut files: Vec<(ExpiredFileKind, String)> =
                found.files.into_iter().map(|f| (f.kind, f.path)).collect();
            files.sort();
            files
        };
        let data = |files: &[(ExpiredFileKind, String)]| -> BTreeSet<String> {
            files
                .iter()
                .filter(|(k, _)| *k == ExpiredFileKind::Data)
                .map(|(_, p)| {
                    path_of
                        .borrow()
                        .iter()
                        .find(|(_, v)| *v == p)
                        .map(|(k, _)| k.clone())
                        .unwrap()
                })
                .collect()
        };
        let set = |names: &[&str]| -> BTreeSet<String> {
            names.iter().map(|n| (*n).to_string()).collect()
        };
        let mut shared = ProofCache::default();
        let cases: [(&[usize], &[&str]); 8] = [
            // A is struck by nothing kept, B by s4's rewritten manifest.
            (&[1, 2, 3, 4], &["A"]),
            // The same candidates, other retained manifests: the strikes are reused.
            (&[1, 2, 3], &["A"]),
            // No expired-only manifest.
            (&[1], &[]),
            // The same candidates again; now s1 and s2 keep A and B live.
            (&[3], &[]),
            (&[1, 2, 3, 4, 5, 6], &["A", "B"]),
            // Other candidates ({B}): the strikes are read again.
            (&[2, 4], &[]),
            (&[1, 2, 3, 4], &["A"]),
            (&[1, 2, 3, 4, 5, 6], &["A", "B"]),
        ];
        for (expired, want) in cases {
            let fresh = proof(expired, &mut ProofCache::default()).await;
            let reused = proof(expired, &mut shared).await;
            assert_eq!(reused, fresh, "expiring {expired:?}");
            assert_eq!(data(&fresh), set(want), "expiring {expired:?}");
        }
        assert!(!shared.lists.is_empty() && !shared.live.is_empty());

        // Strikes found for other candidates are never reused: a manifest read while A was no
        // candidate says nothing of A. (Expiring s3 alone, s1 keeps A live and s2 keeps B.)
        let mut stale = ProofCache {
            strikes_for: [key(&path_of.borrow()["B"])].into(),
            ..ProofCache::default()
        };
        for list in shared.lists.values() {
            for m in &list.manifests {
                let path = list.arena[m.start..m.end].to_string();
                stale.strikes.insert(path, Arc::new(Vec::new()));
            }
        }
        assert!(data(&proof(&[3], &mut stale).await).is_empty());
    }

    fn first_avro(root: &std::path::Path) -> std::path::PathBuf {
        fn walk(d: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("snap-")
                {
                    out.push(p);
                }
            }
        }
        let mut out = Vec::new();
        walk(root, &mut out);
        out.sort();
        out.remove(0)
    }

    #[test]
    fn roots_and_containment_normalize() {
        let md_json = r#"{"format-version":2,"table-uuid":"9c12d441-03fe-4693-9a96-a0705ddf69c1","location":"s3a://bucket/wh/t/","last-sequence-number":0,"last-updated-ms":1,"last-column-id":1,"current-schema-id":0,"schemas":[{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"x","required":true,"type":"long"}]}],"default-spec-id":0,"partition-specs":[{"spec-id":0,"fields":[]}],"last-partition-id":999,"default-sort-order-id":0,"sort-orders":[{"order-id":0,"fields":[]}],"properties":{"write.data.path":"s3://other/data"},"snapshots":[],"snapshot-log":[],"metadata-log":[]}"#;
        let md: TableMetadata = serde_json::from_str(md_json).unwrap();
        let roots = table_roots(&md);
        assert!(within(&roots, "s3://bucket/wh/t/data/a.parquet"));
        assert!(within(&roots, "s3a://bucket//wh/t/metadata/m.avro"));
        assert!(within(&roots, "s3://other/data/x.parquet"));
        assert!(!within(&roots, "s3://bucket/wh/t2/data/a.parquet"));
        assert!(!within(&roots, "s3://bucket/wh/x.parquet"));
        assert_eq!(key("s3a://b//k/x"), key("s3://b/k/x"));
    }
}
