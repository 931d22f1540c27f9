//! Missing files ("silent data loss"): files the metadata commits to that storage no longer has,
//! reported per snapshot with the rows and bytes at risk.
//!
//! ```text
//! table location ──one recursive LIST──▶ present paths
//! referenced outside the location ──HEAD each (N at once)──▶ present or not
//! every snapshot ─▶ manifest list ─▶ manifests (each read once) ─▶ live data/delete files
//!     absent: the file, its rows (record_count) and bytes (file_size_in_bytes), per snapshot;
//!     an absent manifest list or manifest counts the rows its parent says it holds
//! ```
//!
//! Nothing is changed: this is a report for a person (or the grader's opt-in storage check).
//! A present manifest that cannot be read is reported as unreadable, not as missing.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use iceberg::spec::{DataContentType, ManifestContentType, ManifestFile, SnapshotRef};
use serde::{Deserialize, Serialize};

use super::orphans::{FileUri, LiveEntry, list_location, read_live_entries, read_manifest_list};
use crate::catalog::{Catalog, LoadedTable, TableId};
use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::receipt::Footprint;

/// How the check runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FindMissingFilesOptions {
    /// Manifests read and HEAD requests (for files outside the location) at once.
    pub concurrency: usize,
}

impl Default for FindMissingFilesOptions {
    fn default() -> Self {
        Self {
            concurrency: crate::io::READS_IN_FLIGHT,
        }
    }
}

impl FindMissingFilesOptions {
    /// Reject nonsensical options.
    pub fn validate(&self) -> Result<()> {
        if self.concurrency == 0 || self.concurrency > 256 {
            return Err(Error::validation("concurrency must be between 1 and 256"));
        }
        Ok(())
    }
}

/// What kind of file is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MissingKind {
    /// A snapshot's manifest list: the whole snapshot is unreadable.
    ManifestList,
    /// A manifest: every file it lists is unreachable.
    Manifest,
    /// A data file.
    DataFile,
    /// A position-delete file or deletion vector: deleted rows come back (or reads fail).
    PositionDeletes,
    /// An equality-delete file.
    EqualityDeletes,
    /// A table statistics (Puffin) file.
    Statistics,
    /// A partition statistics file.
    PartitionStatistics,
}

/// A file the metadata references that storage does not have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissingFile {
    /// Location as the metadata writes it.
    pub path: String,
    /// Kind.
    pub kind: MissingKind,
    /// Rows at risk: the file's `record_count`; for a manifest or manifest list, the live rows
    /// its parent says it holds.
    pub records: u64,
    /// The file's size as the metadata records it.
    pub bytes: u64,
    /// Snapshots that reference it, ascending.
    pub snapshot_ids: Vec<i64>,
}

/// A referenced file that is present but could not be read or checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnreadableFile {
    /// Location.
    pub path: String,
    /// What went wrong.
    pub message: String,
}

/// The damage to one snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SnapshotDamage {
    /// Snapshot.
    pub snapshot_id: i64,
    /// When it was committed (ms since the epoch).
    pub timestamp_ms: i64,
    /// Whether it is the table's current snapshot.
    pub is_current: bool,
    /// Branches and tags pointing at it.
    pub refs: Vec<String>,
    /// Its manifest list is missing (nothing of it can be read).
    pub manifest_list_missing: bool,
    /// Missing manifests.
    pub missing_manifests: u64,
    /// Missing data files (known: those listed by readable manifests).
    pub missing_data_files: u64,
    /// Missing delete files.
    pub missing_delete_files: u64,
    /// Missing statistics files.
    pub missing_statistics_files: u64,
    /// Data rows that can no longer be read.
    pub rows_at_risk: u64,
    /// Rows of missing delete files (rows that would come back if readers skipped them).
    pub delete_records_at_risk: u64,
    /// Bytes of the missing files, as the metadata records them.
    pub bytes_at_risk: u64,
}

/// What the check found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MissingFilesOutcome {
    /// Table.
    pub table: TableId,
    /// Location listed (normalized).
    pub location: String,
    /// The `metadata.json` the check read.
    pub metadata_location: Option<String>,
    /// Current snapshot.
    pub snapshot_id_before: Option<i64>,
    /// Snapshots committed: always empty (a report).
    pub snapshot_ids: Vec<i64>,
    /// Distinct files checked.
    pub checked_files: u64,
    /// Files listed under the location (one listing).
    pub listed_files: u64,
    /// HEAD requests made for files outside the location.
    pub head_requests: u64,
    /// Missing files, sorted by path.
    pub missing: Vec<MissingFile>,
    /// Present files that could not be read or checked.
    pub unreadable: Vec<UnreadableFile>,
    /// Affected snapshots, newest first.
    pub snapshots: Vec<SnapshotDamage>,
    /// Their ids, ascending.
    pub affected_snapshot_ids: Vec<i64>,
    /// Whether the current snapshot is affected.
    pub current_affected: bool,
    /// Rows at risk in the current snapshot.
    pub rows_at_risk: u64,
    /// Bytes at risk in the current snapshot.
    pub bytes_at_risk: u64,
    /// Wall time.
    pub duration_ms: u64,
}

impl MissingFilesOutcome {
    /// Missing files and their bytes (the check changes nothing: [`Self::after`] is the same).
    pub fn before(&self) -> Footprint {
        Footprint {
            files: self.missing.len() as u64,
            bytes: self.missing.iter().map(|m| m.bytes).sum(),
        }
    }

    /// The same as [`Self::before`].
    pub fn after(&self) -> Footprint {
        self.before()
    }

    /// Whether nothing is missing or unreadable.
    pub fn is_clean(&self) -> bool {
        self.missing.is_empty() && self.unreadable.is_empty()
    }
}

/// The missing-files check for one table: a builder that ends in [`FindMissingFiles::execute`].
#[derive(Debug)]
pub struct FindMissingFiles<'a> {
    catalog: &'a Catalog,
    table: TableId,
    options: FindMissingFilesOptions,
    clock: Arc<dyn Clock>,
}

impl<'a> FindMissingFiles<'a> {
    /// Check `table` with the default options.
    pub fn new(catalog: &'a Catalog, table: TableId) -> Self {
        Self {
            catalog,
            table,
            options: FindMissingFilesOptions::default(),
            clock: Arc::new(SystemClock),
        }
    }

    /// Options.
    #[must_use]
    pub fn with_options(mut self, options: FindMissingFilesOptions) -> Self {
        self.options = options;
        self
    }

    /// Accepted for symmetry with the other operations: the check is read-only, so this is a
    /// no-op either way.
    #[must_use]
    pub fn dry_run(self, _dry_run: bool) -> Self {
        self
    }

    /// Clock (recorded in traces; the check itself does not depend on time).
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Run the check.
    pub async fn execute(self) -> Result<MissingFilesOutcome> {
        self.options.validate()?;
        let table = self.catalog.load_table(&self.table).await?;
        tracing::debug!(table = %self.table, now_ms = self.clock.now_ms(), "missing-files check");
        check_table(&table, &self.options).await
    }
}

/// Report the files `table`'s metadata commits to that storage does not have.
pub async fn find_missing_files(
    catalog: &Catalog,
    table: &TableId,
    options: &FindMissingFilesOptions,
) -> Result<MissingFilesOutcome> {
    FindMissingFiles::new(catalog, table.clone())
        .with_options(options.clone())
        .execute()
        .await
}

/// Presence of referenced files: one listing of the location, HEAD for the rest. The table was
/// loaded before the listing, so every file its metadata commits to existed by then unless it
/// was lost.
struct Presence {
    root: FileUri,
    listed: HashSet<String>,
    outside: HashMap<String, std::result::Result<bool, String>>,
}

impl Presence {
    async fn list(table: &LoadedTable, location: &str, concurrency: usize) -> Result<Self> {
        let listed = list_location(table, location, concurrency)
            .await?
            .into_iter()
            .map(|l| FileUri::new(&l.path).path)
            .collect();
        Ok(Self {
            root: FileUri::new(location),
            listed,
            outside: HashMap::new(),
        })
    }

    /// HEAD the paths outside the location not checked yet; returns how many requests.
    async fn head_outside(
        &mut self,
        table: &LoadedTable,
        paths: impl IntoIterator<Item = String>,
        concurrency: usize,
    ) -> u64 {
        let todo: HashSet<String> = paths
            .into_iter()
            .filter(|p| !self.root.contains(&FileUri::new(p)) && !self.outside.contains_key(p))
            .collect();
        let n = todo.len() as u64;
        let storage = &table.storage;
        let checked: Vec<(String, std::result::Result<bool, String>)> = futures::stream::iter(todo)
            .map(|p| async move {
                let r = storage
                    .head(&p)
                    .await
                    .map(|o| o.is_some())
                    .map_err(|e| e.to_string());
                (p, r)
            })
            .buffer_unordered(concurrency)
            // Boxed: without it rustc cannot prove this stream's borrows `Send` for every
            // lifetime, and callers could not `tokio::spawn` the operation.
            .boxed()
            .collect()
            .await;
        self.outside.extend(checked);
        n
    }

    /// `Ok(true)` present, `Ok(false)` missing, `Err` when it could not be checked.
    fn present(&self, path: &str) -> std::result::Result<bool, String> {
        let uri = FileUri::new(path);
        if self.root.contains(&uri) {
            return Ok(self.listed.contains(&uri.path));
        }
        self.outside
            .get(path)
            .cloned()
            .unwrap_or_else(|| Err("not checked".into()))
    }
}

/// A manifest's live entries, `None` when it is missing, `Err` when it could not be read.
type ManifestRead = std::result::Result<Option<Vec<LiveEntry>>, String>;

/// What one manifest contributes to a snapshot's damage.
#[derive(Default, Clone)]
struct ManifestDamage {
    manifest_missing: bool,
    /// Missing entries (path, kind, records, bytes).
    missing: Vec<(String, MissingKind, u64, u64)>,
}

fn entry_kind(e: &LiveEntry) -> MissingKind {
    match e.content {
        DataContentType::Data => MissingKind::DataFile,
        DataContentType::PositionDeletes => MissingKind::PositionDeletes,
        DataContentType::EqualityDeletes => MissingKind::EqualityDeletes,
    }
}

fn summary_u64(s: &SnapshotRef, key: &str) -> u64 {
    s.summary()
        .additional_properties
        .get(key)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Branch and tag names by snapshot. `TableMetadata` has no public accessor for all refs; they
/// are read back from its spec-conformant serialized form.
fn refs_by_snapshot(table: &LoadedTable) -> HashMap<i64, Vec<String>> {
    let mut out: HashMap<i64, Vec<String>> = HashMap::new();
    let refs = serde_json::to_value(table.metadata.as_ref())
        .ok()
        .and_then(|v| v.get("refs").cloned())
        .and_then(|r| r.as_object().cloned())
        .unwrap_or_default();
    for (name, r) in refs {
        if let Some(id) = r.get("snapshot-id").and_then(serde_json::Value::as_i64) {
            out.entry(id).or_default().push(name);
        }
    }
    if out.is_empty()
        && let Some(id) = table.metadata.current_snapshot_id()
    {
        out.insert(id, vec![iceberg::spec::MAIN_BRANCH.to_string()]);
    }
    for v in out.values_mut() {
        v.sort();
    }
    out
}

#[allow(
    clippy::too_many_lines,
    reason = "one walk: snapshots, their manifests, their files, then the per-snapshot tally"
)]
async fn check_table(
    table: &LoadedTable,
    options: &FindMissingFilesOptions,
) -> Result<MissingFilesOutcome> {
    let started = Instant::now();
    let conc = options.concurrency;
    let location = crate::io::normalize_location(table.metadata.location())?;
    let md = &table.metadata;
    let snapshots: Vec<SnapshotRef> = crate::format::snapshots(md).into_iter().cloned().collect();
    let mut unreadable: Vec<UnreadableFile> = Vec::new();

    // Manifest lists first (they name the manifests), then every distinct manifest.
    let lists: Vec<String> = snapshots
        .iter()
        .map(|s| s.manifest_list().to_string())
        .collect();
    let stats: Vec<(String, MissingKind, i64, u64)> = md
        .statistics_iter()
        .map(|s| {
            (
                s.statistics_path.clone(),
                MissingKind::Statistics,
                s.snapshot_id,
                s.file_size_in_bytes.max(0) as u64,
            )
        })
        .chain(md.partition_statistics_iter().map(|s| {
            (
                s.statistics_path.clone(),
                MissingKind::PartitionStatistics,
                s.snapshot_id,
                s.file_size_in_bytes.max(0) as u64,
            )
        }))
        .collect();
    let mut presence = Presence::list(table, &location, conc).await?;
    let first_paths = lists
        .iter()
        .cloned()
        .chain(stats.iter().map(|s| s.0.clone()));
    let mut heads = presence.head_outside(table, first_paths, conc).await;

    let read_lists: Vec<(i64, Option<Result<Vec<ManifestFile>>>)> =
        futures::stream::iter(snapshots.iter())
            .map(|s| {
                let presence = &presence;
                async move {
                    match presence.present(s.manifest_list()) {
                        Ok(true) => (s.snapshot_id(), Some(read_manifest_list(table, s).await)),
                        _ => (s.snapshot_id(), None),
                    }
                }
            })
            .buffer_unordered(conc)
            // Boxed: without it rustc cannot prove this stream's borrows `Send` for every
            // lifetime, and callers could not `tokio::spawn` the operation.
            .boxed()
            .collect()
            .await;
    let mut snapshot_manifests: HashMap<i64, Vec<ManifestFile>> = HashMap::new();
    for (id, r) in read_lists {
        match r {
            Some(Ok(m)) => {
                snapshot_manifests.insert(id, m);
            }
            Some(Err(e)) => {
                if let Some(s) = md.snapshot_by_id(id) {
                    unreadable.push(UnreadableFile {
                        path: s.manifest_list().to_string(),
                        message: e.to_string(),
                    });
                }
            }
            None => {}
        }
    }
    let mut manifests: HashMap<String, ManifestFile> = HashMap::new();
    for mf in snapshot_manifests.values().flatten() {
        manifests
            .entry(mf.manifest_path.clone())
            .or_insert_with(|| mf.clone());
    }
    // The manifests are under the location as a rule: the listing answers for them; the rare
    // one outside gets a HEAD.
    heads += presence
        .head_outside(table, manifests.keys().cloned(), conc)
        .await;
    let manifest_reads: Vec<(String, ManifestRead)> = futures::stream::iter(manifests.values())
        .map(|mf| {
            let p = &presence;
            async move {
                let r = match p.present(&mf.manifest_path) {
                    Ok(true) => read_live_entries(table, mf)
                        .await
                        .map(Some)
                        .map_err(|e| e.to_string()),
                    Ok(false) => Ok(None),
                    Err(e) => Err(e),
                };
                (mf.manifest_path.clone(), r)
            }
        })
        .buffer_unordered(conc)
        // Boxed: without it rustc cannot prove this stream's borrows `Send` for every
        // lifetime, and callers could not `tokio::spawn` the operation.
        .boxed()
        .collect()
        .await;
    let mut entries: HashMap<String, Option<Vec<LiveEntry>>> = HashMap::new();
    for (path, r) in manifest_reads {
        match r {
            Ok(e) => {
                entries.insert(path, e);
            }
            Err(message) => unreadable.push(UnreadableFile { path, message }),
        }
    }
    let content_paths: Vec<String> = entries
        .values()
        .flatten()
        .flatten()
        .map(|e| e.path.clone())
        .collect();
    heads += presence.head_outside(table, content_paths, conc).await;
    let presence = presence;

    let mut checked: HashSet<&str> = HashSet::new();
    checked.extend(lists.iter().map(String::as_str));
    checked.extend(stats.iter().map(|s| s.0.as_str()));
    checked.extend(manifests.keys().map(String::as_str));

    // Per manifest: what is missing inside it (computed once, shared by every snapshot).
    let mut damage: HashMap<&str, ManifestDamage> = HashMap::new();
    for path in manifests.keys() {
        let mut d = ManifestDamage::default();
        match entries.get(path) {
            Some(None) => d.manifest_missing = true,
            Some(Some(list)) => {
                for e in list {
                    checked.insert(e.path.as_str());
                    match presence.present(&e.path) {
                        Ok(true) => {}
                        Ok(false) => {
                            d.missing
                                .push((e.path.clone(), entry_kind(e), e.records, e.bytes));
                        }
                        Err(message) => unreadable.push(UnreadableFile {
                            path: e.path.clone(),
                            message,
                        }),
                    }
                }
            }
            None => {} // unreadable, already reported
        }
        damage.insert(path.as_str(), d);
    }

    let refs = refs_by_snapshot(table);
    let current = md.current_snapshot_id();
    let mut missing: BTreeMap<String, MissingFile> = BTreeMap::new();
    let mut note = |path: &str, kind: MissingKind, records: u64, bytes: u64, sid: i64| {
        let m = missing
            .entry(path.to_string())
            .or_insert_with(|| MissingFile {
                path: path.to_string(),
                kind,
                records,
                bytes,
                snapshot_ids: Vec::new(),
            });
        if !m.snapshot_ids.contains(&sid) {
            m.snapshot_ids.push(sid);
        }
    };
    let mut snapshots_out = Vec::new();
    for s in &snapshots {
        let sid = s.snapshot_id();
        let mut d = SnapshotDamage {
            snapshot_id: sid,
            timestamp_ms: s.timestamp_ms(),
            is_current: current == Some(sid),
            refs: refs.get(&sid).cloned().unwrap_or_default(),
            manifest_list_missing: false,
            missing_manifests: 0,
            missing_data_files: 0,
            missing_delete_files: 0,
            missing_statistics_files: 0,
            rows_at_risk: 0,
            delete_records_at_risk: 0,
            bytes_at_risk: 0,
        };
        if presence.present(s.manifest_list()) == Ok(false) {
            d.manifest_list_missing = true;
            d.rows_at_risk = summary_u64(s, "total-records");
            d.delete_records_at_risk =
                summary_u64(s, "total-position-deletes") + summary_u64(s, "total-equality-deletes");
            d.bytes_at_risk = summary_u64(s, "total-files-size");
            note(
                s.manifest_list(),
                MissingKind::ManifestList,
                d.rows_at_risk,
                0,
                sid,
            );
        }
        for mf in snapshot_manifests.get(&sid).into_iter().flatten() {
            let Some(md) = damage.get(mf.manifest_path.as_str()) else {
                continue;
            };
            if md.manifest_missing {
                let rows = mf.added_rows_count.unwrap_or(0) + mf.existing_rows_count.unwrap_or(0);
                d.missing_manifests += 1;
                if mf.content == ManifestContentType::Data {
                    d.rows_at_risk += rows;
                } else {
                    d.delete_records_at_risk += rows;
                }
                let bytes = mf.manifest_length.max(0) as u64;
                d.bytes_at_risk += bytes;
                note(&mf.manifest_path, MissingKind::Manifest, rows, bytes, sid);
            }
            for (path, kind, records, bytes) in &md.missing {
                if *kind == MissingKind::DataFile {
                    d.missing_data_files += 1;
                    d.rows_at_risk += records;
                } else {
                    d.missing_delete_files += 1;
                    d.delete_records_at_risk += records;
                }
                d.bytes_at_risk += bytes;
                note(path, *kind, *records, *bytes, sid);
            }
        }
        for (path, kind, stat_sid, bytes) in &stats {
            if *stat_sid == sid && presence.present(path) == Ok(false) {
                d.missing_statistics_files += 1;
                d.bytes_at_risk += bytes;
                note(path, *kind, 0, *bytes, sid);
            }
        }
        let affected = d.manifest_list_missing
            || d.missing_manifests
                + d.missing_data_files
                + d.missing_delete_files
                + d.missing_statistics_files
                > 0;
        if affected {
            snapshots_out.push(d);
        }
    }
    // Statistics of snapshots that no longer exist are still referenced by the metadata.
    for (path, kind, stat_sid, bytes) in &stats {
        if md.snapshot_by_id(*stat_sid).is_none() && presence.present(path) == Ok(false) {
            note(path, *kind, 0, *bytes, *stat_sid);
        }
    }
    for (path, _, _, _) in &stats {
        if let Err(message) = presence.present(path) {
            unreadable.push(UnreadableFile {
                path: path.clone(),
                message,
            });
        }
    }
    for s in &snapshots {
        if let Err(message) = presence.present(s.manifest_list()) {
            unreadable.push(UnreadableFile {
                path: s.manifest_list().to_string(),
                message,
            });
        }
    }

    snapshots_out.sort_by(|a, b| {
        b.timestamp_ms
            .cmp(&a.timestamp_ms)
            .then(b.snapshot_id.cmp(&a.snapshot_id))
    });
    let mut affected_snapshot_ids: Vec<i64> = snapshots_out.iter().map(|d| d.snapshot_id).collect();
    affected_snapshot_ids.sort_unstable();
    let cur = snapshots_out.iter().find(|d| d.is_current);
    let mut missing: Vec<MissingFile> = missing.into_values().collect();
    for m in &mut missing {
        m.snapshot_ids.sort_unstable();
    }
    unreadable.sort_by(|a, b| a.path.cmp(&b.path));
    unreadable.dedup_by(|a, b| a.path == b.path);
    Ok(MissingFilesOutcome {
        table: table.id.clone(),
        location,
        metadata_location: table.metadata_location.clone(),
        snapshot_id_before: current,
        snapshot_ids: Vec::new(),
        checked_files: checked.len() as u64,
        listed_files: presence.listed.len() as u64,
        head_requests: heads,
        current_affected: cur.is_some(),
        rows_at_risk: cur.map_or(0, |d| d.rows_at_risk),
        bytes_at_risk: cur.map_or(0, |d| d.bytes_at_risk),
        missing,
        unreadable,
        snapshots: snapshots_out,
        affected_snapshot_ids,
        duration_ms: started.elapsed().as_millis() as u64,
    })
}
