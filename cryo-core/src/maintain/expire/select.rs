//! Which snapshots and refs an expiry removes: options resolved against the table's
//! properties, the snapshot graph, Java's selection rules, and the commit that removes them.

use crate::catalog::LoadedTable;
use crate::commit::RetryPolicy;
use crate::commit::TableChanges;
use crate::error::Error;
use crate::error::Result;
use iceberg::TableRequirement;
use iceberg::TableUpdate;
use iceberg::spec::MAIN_BRANCH;
use iceberg::spec::SnapshotReference;
use iceberg::spec::SnapshotRetention;
use iceberg::spec::TableMetadata;
use serde::Deserialize;
use serde::Serialize;
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::collections::HashMap;
use std::collections::HashSet;

/// Java's table properties for expiry (`TableProperties`).
pub(super) const MAX_SNAPSHOT_AGE_MS: &str = "history.expire.max-snapshot-age-ms";
pub(super) const MIN_SNAPSHOTS_TO_KEEP: &str = "history.expire.min-snapshots-to-keep";
pub(super) const MAX_REF_AGE_MS: &str = "history.expire.max-ref-age-ms";
pub(super) const GC_ENABLED: &str = "gc.enabled";
pub(super) const DELETE_AFTER_COMMIT: &str = "write.metadata.delete-after-commit.enabled";
pub(super) const WRITE_DATA_PATH: &str = "write.data.path";
pub(super) const WRITE_METADATA_PATH: &str = "write.metadata.path";
pub(super) const OBJECT_STORAGE_PATH: &str = "write.object-storage.path";
pub(super) const FOLDER_STORAGE_PATH: &str = "write.folder-storage.path";
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
            max_concurrent_reads: crate::io::READS_IN_FLIGHT,
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

pub(super) fn prop_i64(properties: &HashMap<String, String>, key: &str) -> Result<Option<i64>> {
    properties
        .get(key)
        .map(|v| {
            v.trim()
                .parse::<i64>()
                .map_err(|_| Error::config(format!("table property {key}={v} is not an integer")))
        })
        .transpose()
}

pub(super) fn prop_true(properties: &HashMap<String, String>, key: &str) -> bool {
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
        let refs =
            crate::format::table_refs(metadata).map_err(|e| Error::metadata(table, "<refs>", e))?;
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
pub(super) fn expiry_changes(
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
pub(super) fn apply_locally(
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
            .map_err(|e| Error::compute(format!("{table}: cannot apply expiry locally"), e))?;
    }
    let built = builder
        .build()
        .map_err(|e| Error::compute(format!("{table}: cannot build metadata"), e))?;
    let dropped = built
        .expired_metadata_logs
        .iter()
        .map(|m| m.metadata_file.clone())
        .collect();
    Ok((built.metadata, dropped))
}
