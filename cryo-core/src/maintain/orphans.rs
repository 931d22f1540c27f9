//! Orphan files: files in a table's location that no snapshot or metadata file references,
//! removed once they are older than a retention window (docs/architecture.md, "Deletion safety").
//!
//! ```text
//! catalog ──every table──▶ shared-path check: another table's location equals, contains or
//!                          nests in this one ─▶ Error::Refused (or, on request, its files protected)
//! table location ──one recursive LIST──▶ listed files (hidden paths skipped, as Java does;
//!                  on local storage with the `name#N` staging files killed writers leave)
//! metadata, loaded after the listing ──▶ referenced: every snapshot's manifest list, manifests
//!     and live data/delete files; current and logged metadata.json; version hint; statistics
//! listed − referenced − younger than older_than ──▶ orphans (the dry-run answer)
//!     ──real run──▶ reload the head, re-check ──▶ delete, N at once, failures reported
//! ```
//!
//! Locations are compared the way Java's `DeleteOrphanFilesSparkAction` compares them: by path,
//! after mapping equal schemes (`s3a`, `s3n` → `s3`, plus [`RemoveOrphanFilesOptions::equal_schemes`])
//! and equal authorities, with duplicate and trailing slashes removed. A listed file whose path
//! a reference names under another scheme or authority is a *prefix mismatch*: by default the
//! run refuses ([`PrefixMismatchMode::Error`]). Paths compare literally (a `%20` in metadata names
//! a file whose name holds `%20`, as in Java); a listed file is also kept when its
//! percent-decoded path is referenced, so no spelling of a reference can turn into an orphan.
//!
//! Safety, in order: the table must not turn garbage collection off (`gc.enabled` anything but
//! `true`, as Java reads it); the window must leave at least [`MIN_RETENTION_MS`] unless
//! explicitly overridden; no other table of the catalog may share the location; every
//! metadata file must read (a missing or corrupt
//! manifest refuses the run rather than make its files orphans); nothing outside the table
//! location is ever listed or deleted (a location that spells a way out, `..` or `%2e%2e` or
//! `%2F`, is refused; on local storage a file that resolves through a symbolic link to
//! somewhere else is skipped); and the default is a dry run.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use iceberg::spec::{DataContentType, ManifestFile, Snapshot};
use serde::{Deserialize, Serialize};

use crate::catalog::{Catalog, LoadedTable, TableId};
use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::receipt::Footprint;

/// The default retention window: files younger than this are never orphans (Java's default).
pub const DEFAULT_RETENTION_MS: i64 = 3 * DAY_MS;
/// The shortest window accepted without [`RemoveOrphanFilesOptions::allow_short_retention`]
/// (Spark's procedure refuses less than 24 hours as well): a writer may still be about to
/// commit a file it wrote minutes ago.
pub const MIN_RETENTION_MS: i64 = DAY_MS;
const DAY_MS: i64 = 86_400_000;

/// Table properties that place files; another table whose files go under this table's
/// location shares it even when its own location is elsewhere.
const LOCATION_PROPERTIES: [&str; 4] = [
    "write.data.path",
    "write.object-storage.path",
    "write.folder-storage.path",
    "write.metadata.path",
];

/// What to do with a listed file whose path is referenced under another scheme or authority
/// (Java's `prefix-mismatch-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrefixMismatchMode {
    /// Refuse the run, naming the conflicting schemes/authorities: map them with
    /// `equal_schemes`/`equal_authorities` if they are the same storage.
    #[default]
    Error,
    /// Keep such files (not orphans) and report the conflicts.
    Ignore,
    /// Treat such files as orphans: only when the schemes/authorities are certainly different
    /// storage.
    Delete,
}

/// What to do when another table of the catalog shares the location (equal, containing or
/// nested).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SharedLocationMode {
    /// Refuse with [`Error::Refused`] naming the other tables.
    #[default]
    Refuse,
    /// Go on, treating every file any of those tables references (all snapshots, metadata
    /// files, version hint, statistics) as referenced. Their unreferenced files older than the
    /// window are orphans for them too.
    ProtectReferenced,
}

/// How orphan files are found and removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RemoveOrphanFilesOptions {
    /// Report only (the default): list the orphans and their bytes, delete nothing.
    pub dry_run: bool,
    /// Only files last modified before this instant (ms since the epoch) can be orphans;
    /// `None`: the clock's now minus [`DEFAULT_RETENTION_MS`].
    pub older_than_ms: Option<i64>,
    /// Accept an `older_than_ms` less than [`MIN_RETENTION_MS`] before now. Files a writer is
    /// about to commit can then be deleted: for tables nobody writes to.
    pub allow_short_retention: bool,
    /// Listed files referenced under another scheme or authority.
    pub prefix_mismatch: PrefixMismatchMode,
    /// Schemes that name the same storage, e.g. `{"s3a,s3n": "s3"}` (always applied; keys may
    /// list several schemes separated by commas).
    pub equal_schemes: BTreeMap<String, String>,
    /// Authorities that name the same storage, e.g. `{"bucket.s3.amazonaws.com": "bucket"}`.
    pub equal_authorities: BTreeMap<String, String>,
    /// Other tables sharing the location.
    pub shared_location: SharedLocationMode,
    /// Manifests read, tables loaded and files deleted at once.
    pub concurrency: usize,
}

impl Default for RemoveOrphanFilesOptions {
    fn default() -> Self {
        Self {
            dry_run: true,
            older_than_ms: None,
            allow_short_retention: false,
            prefix_mismatch: PrefixMismatchMode::Error,
            equal_schemes: BTreeMap::new(),
            equal_authorities: BTreeMap::new(),
            shared_location: SharedLocationMode::Refuse,
            concurrency: crate::io::READS_IN_FLIGHT,
        }
    }
}

impl RemoveOrphanFilesOptions {
    /// Reject nonsensical options (the retention floor needs the clock: [`Self::older_than`]).
    pub fn validate(&self) -> Result<()> {
        if self.concurrency == 0 || self.concurrency > 256 {
            return Err(Error::validation("concurrency must be between 1 and 256"));
        }
        for (what, map) in [
            ("equal_schemes", &self.equal_schemes),
            ("equal_authorities", &self.equal_authorities),
        ] {
            if map
                .iter()
                .any(|(k, v)| v.trim().is_empty() || k.split(',').any(|s| s.trim().is_empty()))
            {
                return Err(Error::validation(format!(
                    "{what} must not map or be mapped to an empty name"
                )));
            }
        }
        Ok(())
    }

    /// The cut-off at `now_ms`, or [`Error::Refused`] when it leaves less than
    /// [`MIN_RETENTION_MS`] and no override is set.
    pub fn older_than(&self, table: &TableId, now_ms: i64) -> Result<i64> {
        let older_than = self
            .older_than_ms
            .unwrap_or(now_ms.saturating_sub(DEFAULT_RETENTION_MS));
        let window = now_ms.saturating_sub(older_than);
        if window < MIN_RETENTION_MS && !self.allow_short_retention {
            return Err(Error::Refused {
                table: table.to_string(),
                reason: format!(
                    "older_than leaves a retention window of {} (less than 1 day): files a writer \
                     has not committed yet could be deleted; set allow_short_retention to override",
                    human_window(window)
                ),
            });
        }
        Ok(older_than)
    }

    fn uri_maps(&self) -> UriMaps {
        let mut maps = UriMaps::default();
        for (k, v) in &self.equal_schemes {
            for s in k.split(',') {
                maps.schemes
                    .insert(s.trim().to_ascii_lowercase(), v.trim().to_ascii_lowercase());
            }
        }
        for (k, v) in &self.equal_authorities {
            for a in k.split(',') {
                maps.authorities
                    .insert(a.trim().to_ascii_lowercase(), v.trim().to_ascii_lowercase());
            }
        }
        maps
    }
}

fn human_window(ms: i64) -> String {
    if ms < 0 {
        format!("{} s in the future", -ms / 1000)
    } else {
        format!("{:.1} h", ms as f64 / 3_600_000.0)
    }
}

/// A file found to be an orphan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrphanFile {
    /// Location as listed (canonical spelling: `s3://`, `file:///`).
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// Last modification, ms since the epoch.
    pub last_modified_ms: i64,
}

/// An orphan whose deletion failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteFailure {
    /// Location.
    pub path: String,
    /// What went wrong.
    pub message: String,
}

/// A listed file whose path is referenced under another scheme or authority.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PrefixConflict {
    /// The listed location.
    pub listed: String,
    /// Scheme and authority the metadata uses for the same path (`s3a://bucket`).
    pub referenced_prefix: String,
}

/// What orphan removal found and did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RemoveOrphanFilesOutcome {
    /// Table.
    pub table: TableId,
    /// The location listed (normalized).
    pub location: String,
    /// Current snapshot when the references were read.
    pub snapshot_id_before: Option<i64>,
    /// Snapshots committed: always empty (orphan removal changes storage, not metadata).
    pub snapshot_ids: Vec<i64>,
    /// Whether nothing was deleted on purpose.
    pub dry_run: bool,
    /// Files last modified at or after this instant were kept whatever their status.
    pub older_than_ms: i64,
    /// Files listed under the location (hidden paths excluded).
    pub listed_files: u64,
    /// Their bytes.
    pub listed_bytes: u64,
    /// Files skipped as hidden (a path component starting with `.` or `_`, e.g. Hadoop's `.crc`).
    pub hidden_files: u64,
    /// Distinct locations the metadata references (inside the location or not).
    pub referenced_files: u64,
    /// Unreferenced files kept because they are younger than `older_than_ms`.
    pub young_unreferenced_files: u64,
    /// Orphans (deleted, or to delete in a dry run), sorted by path.
    pub orphans: Vec<OrphanFile>,
    /// Their bytes.
    pub orphan_bytes: u64,
    /// Orphans deleted.
    pub deleted_files: u64,
    /// Bytes deleted.
    pub deleted_bytes: u64,
    /// Orphans that could not be deleted.
    pub failures: Vec<DeleteFailure>,
    /// Prefix mismatches kept ([`PrefixMismatchMode::Ignore`]) or deleted (`Delete`).
    pub prefix_conflicts: Vec<PrefixConflict>,
    /// Other tables sharing the location whose references were protected
    /// ([`SharedLocationMode::ProtectReferenced`]).
    pub shared_with: Vec<TableId>,
    /// Wall time.
    pub duration_ms: u64,
}

impl RemoveOrphanFilesOutcome {
    /// Files and bytes under the location before the run.
    pub fn before(&self) -> Footprint {
        Footprint {
            files: self.listed_files,
            bytes: self.listed_bytes,
        }
    }

    /// Files and bytes left under the location: after the deletions, or, in a dry run, after
    /// the deletions a real run would make.
    pub fn after(&self) -> Footprint {
        let (files, bytes) = if self.dry_run {
            (self.orphans.len() as u64, self.orphan_bytes)
        } else {
            (self.deleted_files, self.deleted_bytes)
        };
        Footprint {
            files: self.listed_files.saturating_sub(files),
            bytes: self.listed_bytes.saturating_sub(bytes),
        }
    }
}

/// Orphan-file removal for one table: a builder that ends in [`RemoveOrphanFiles::execute`].
#[derive(Debug)]
pub struct RemoveOrphanFiles<'a> {
    catalog: &'a Catalog,
    table: TableId,
    options: RemoveOrphanFilesOptions,
    clock: Arc<dyn Clock>,
}

impl<'a> RemoveOrphanFiles<'a> {
    /// Find the orphans of `table` with the default options (a dry run, 3-day window).
    pub fn new(catalog: &'a Catalog, table: TableId) -> Self {
        Self {
            catalog,
            table,
            options: RemoveOrphanFilesOptions::default(),
            clock: Arc::new(SystemClock),
        }
    }

    /// Options.
    #[must_use]
    pub fn with_options(mut self, options: RemoveOrphanFilesOptions) -> Self {
        self.options = options;
        self
    }

    /// Report only (`true`, the default) or delete.
    #[must_use]
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.options.dry_run = dry_run;
        self
    }

    /// "Now", for the default window and the retention floor.
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Check, list, compare and (unless a dry run) delete.
    pub async fn execute(self) -> Result<RemoveOrphanFilesOutcome> {
        let started = Instant::now();
        let opts = &self.options;
        opts.validate()?;
        let older_than = opts.older_than(&self.table, self.clock.now_ms())?;
        let maps = opts.uri_maps();
        let table = self.catalog.load_table(&self.table).await?;
        refuse_if_gc_disabled(&table)?;
        let location = table_location(&table)?;
        let root = FileUri::parse(&location, &maps);
        let shared = shared_tables(self.catalog, &table, &root, &maps, opts.concurrency).await?;
        if !shared.is_empty() && opts.shared_location == SharedLocationMode::Refuse {
            let names: Vec<String> = shared
                .iter()
                .map(|(t, why)| format!("{} ({why})", t.id))
                .collect();
            return Err(self.refused(format!(
                "its location {location} is shared with {}: their files would look like \
                 orphans; give every table its own location",
                names.join(", ")
            )));
        }
        let mut tables: Vec<LoadedTable> = vec![table];
        tables.extend(shared.into_iter().map(|(t, _)| t));

        // List first, read the references second: a file committed between the two is then
        // referenced by what is read.
        let listing = list_location(&tables[0], &location, opts.concurrency).await?;
        let specs = hidden_partition_prefixes(&tables[0]);
        let (hidden, visible): (Vec<Listed>, Vec<Listed>) = listing
            .into_iter()
            .partition(|f| is_hidden(&root, &FileUri::parse(&f.path, &maps), &specs));

        let mut index = ReferenceIndex::new(maps.clone());
        for t in &tables {
            let refs = table_references(t, opts.concurrency).await?;
            index.extend(refs.iter().map(String::as_str));
        }
        let mut classified = classify(&visible, &index, older_than, opts.prefix_mismatch)
            .map_err(|r| self.refused(r))?;
        if !opts.dry_run && !classified.orphans.is_empty() {
            // Another writer may have committed since the references were read: read the heads
            // again and keep anything they reference.
            if self
                .add_new_references(&tables, &location, &mut index)
                .await?
            {
                classified.orphans = classify(&visible, &index, older_than, opts.prefix_mismatch)
                    .map_err(|r| self.refused(r))?
                    .orphans;
            }
        }
        // Never outside the location, whatever the listing returned: by path, and on local
        // storage also once links are resolved.
        let mut inside = Vec::with_capacity(classified.orphans.len());
        for f in std::mem::take(&mut classified.orphans) {
            if !root.contains(&FileUri::parse(&f.path, &maps)) || f.path == location {
                tracing::error!(table = %self.table, path = %f.path, "listed file outside the table location skipped");
            } else if !resolves_inside(&location, &f.path).await {
                tracing::error!(table = %self.table, path = %f.path, "listed file resolves (through a link) outside the table location: skipped");
            } else {
                inside.push(f);
            }
        }
        classified.orphans = inside;
        classified.orphans.sort_by(|a, b| a.path.cmp(&b.path));

        let mut outcome = RemoveOrphanFilesOutcome {
            table: self.table.clone(),
            location,
            snapshot_id_before: tables[0].metadata.current_snapshot_id(),
            snapshot_ids: Vec::new(),
            dry_run: opts.dry_run,
            older_than_ms: older_than,
            listed_files: visible.len() as u64,
            listed_bytes: visible.iter().map(|f| f.size).sum(),
            hidden_files: hidden.len() as u64,
            referenced_files: index.len() as u64,
            young_unreferenced_files: classified.young,
            orphan_bytes: classified.orphans.iter().map(|f| f.size).sum(),
            orphans: Vec::new(),
            deleted_files: 0,
            deleted_bytes: 0,
            failures: Vec::new(),
            prefix_conflicts: classified.conflicts,
            shared_with: tables[1..].iter().map(|t| t.id.clone()).collect(),
            duration_ms: 0,
        };
        if !opts.dry_run {
            self.delete(&tables[0], &classified.orphans, &mut outcome)
                .await;
        }
        outcome.orphans = classified.orphans;
        outcome.duration_ms = started.elapsed().as_millis() as u64;
        Ok(outcome)
    }

    fn refused(&self, reason: String) -> Error {
        Error::Refused {
            table: self.table.to_string(),
            reason,
        }
    }

    /// Reload the table and the tables sharing its location; add what their new metadata
    /// references. `true` when anything changed.
    async fn add_new_references(
        &self,
        tables: &[LoadedTable],
        location: &str,
        index: &mut ReferenceIndex,
    ) -> Result<bool> {
        let mut changed = false;
        for (i, t) in tables.iter().enumerate() {
            let head = self.catalog.load_table(&t.id).await?;
            if head.metadata_location == t.metadata_location {
                continue;
            }
            changed = true;
            if i == 0 {
                refuse_if_gc_disabled(&head)?;
                if table_location(&head)? != location {
                    return Err(self.refused("the table's location changed during the run".into()));
                }
            }
            let refs = table_references(&head, self.options.concurrency).await?;
            index.extend(refs.iter().map(String::as_str));
        }
        Ok(changed)
    }

    /// Delete the orphans, `concurrency` at once; failures go to the outcome.
    async fn delete(
        &self,
        table: &LoadedTable,
        orphans: &[OrphanFile],
        outcome: &mut RemoveOrphanFilesOutcome,
    ) {
        let paths: Vec<String> = orphans.iter().map(|f| f.path.clone()).collect();
        let results = table
            .storage
            .delete_all(&paths, self.options.concurrency)
            .await;
        let results = orphans.iter().zip(results);
        for (f, r) in results {
            match r {
                Ok(()) => {
                    outcome.deleted_files += 1;
                    outcome.deleted_bytes += f.size;
                }
                Err(e) => {
                    tracing::warn!(table = %self.table, path = %f.path, error = %e, "orphan not deleted");
                    outcome.failures.push(DeleteFailure {
                        path: f.path.clone(),
                        message: e.to_string(),
                    });
                }
            }
        }
        outcome.failures.sort_by(|a, b| a.path.cmp(&b.path));
    }
}

/// Find (and, unless `options.dry_run`, delete) the orphan files of one table.
pub async fn remove_orphan_files(
    catalog: &Catalog,
    table: &TableId,
    options: &RemoveOrphanFilesOptions,
) -> Result<RemoveOrphanFilesOutcome> {
    RemoveOrphanFiles::new(catalog, table.clone())
        .with_options(options.clone())
        .execute()
        .await
}

fn refuse_if_gc_disabled(table: &LoadedTable) -> Result<()> {
    // As Java reads it (`Boolean.parseBoolean`): anything but `true` turns garbage collection
    // off, so a misspelled value refuses rather than deletes.
    let gc = table.metadata.properties().get("gc.enabled");
    if let Some(v) = gc.filter(|v| !v.trim().eq_ignore_ascii_case("true")) {
        return Err(Error::Refused {
            table: table.id.to_string(),
            reason: format!(
                "the table sets gc.enabled={v} (not `true`: its files may belong to other tables)"
            ),
        });
    }
    Ok(())
}

/// The table location, normalized, or a refusal when it cannot be reasoned about.
///
/// The location is checked as written, before normalization: normalizing re-encodes a `..`
/// segment as `%2E%2E`, and a local store decodes `%2e%2e` and `%2F` again when it turns the key
/// into a file path, so a location that only *spells* its way out (`t/../victim`,
/// `t/%2e%2e/victim`, `t%2F..%2Fvictim`) would list and delete another directory.
pub(crate) fn table_location(table: &LoadedTable) -> Result<String> {
    let raw = table.metadata.location();
    let refuse = |why: &str| Error::Refused {
        table: table.id.to_string(),
        reason: format!("its location `{raw}` {why}"),
    };
    if let Some(seg) = FileUri::parse(raw, &UriMaps::default())
        .segments()
        .find(|s| traverses(s))
    {
        return Err(refuse(&format!(
            "has the path segment `{seg}`, which (decoded) is `.` or `..` or holds a separator: not a plain path"
        )));
    }
    let location = crate::io::normalize_location(raw)?;
    let uri = FileUri::parse(&location, &UriMaps::default());
    if uri.segments().any(traverses) || uri.segments().next().is_none() {
        return Err(refuse("is a storage root or not a plain path"));
    }
    Ok(location)
}

/// A path segment that is, or decodes (once or more: stores and tools decode again) to, `.` or
/// `..`, or that decodes to something holding a separator.
fn traverses(segment: &str) -> bool {
    let mut s = segment.to_string();
    for _ in 0..4 {
        if s == "." || s == ".." || s.contains(['/', '\\']) {
            return true;
        }
        match percent_decoded(&s) {
            Some(d) => s = d,
            None => return false,
        }
    }
    true
}

/// On local storage, whether `path` really lies below `root` once symbolic links are resolved:
/// the local store follows links when it lists, so a link inside the table directory to a
/// directory elsewhere lists that directory's files under the table's prefix, and deleting them
/// through the link would delete outside the table. A path that does not resolve (a dangling
/// link, a file gone meanwhile) is not inside. Not local storage: `true` (object stores have no
/// links; the path check stands).
async fn resolves_inside(root: &str, path: &str) -> bool {
    let (Some(root), Some(file)) = (
        crate::io::local_file_path(root),
        crate::io::local_file_path(path),
    ) else {
        return true;
    };
    match (
        tokio::fs::canonicalize(&root).await,
        tokio::fs::canonicalize(&file).await,
    ) {
        (Ok(root), Ok(file)) => file.starts_with(&root) && file != root,
        _ => false,
    }
}

// ------------------------------------------------------------------------------------------
// Listing and classification
// ------------------------------------------------------------------------------------------

/// A file under the table location.
#[derive(Debug, Clone)]
pub(crate) struct Listed {
    pub(crate) path: String,
    pub(crate) size: u64,
    pub(crate) last_modified_ms: i64,
}

/// One recursive listing of everything under `location` (never above it), with the staging
/// files of local writes that never finished (a killed writer's, Cryo's own included).
pub(crate) async fn list_location(
    table: &LoadedTable,
    location: &str,
    concurrency: usize,
) -> Result<Vec<Listed>> {
    let prefix = format!("{location}/");
    // Two levels: `data/` and `metadata/`, then each partition's directory on its own.
    let mut listed = table.storage.list_parallel(&prefix, 2, concurrency).await?;
    listed.extend(table.storage.list_unfinished_uploads(&prefix).await?);
    Ok(listed
        .into_iter()
        .map(|o| Listed {
            path: o.location,
            size: o.size,
            last_modified_ms: o.last_modified_ms,
        })
        .collect())
}

#[derive(Default)]
struct Classified {
    orphans: Vec<OrphanFile>,
    young: u64,
    conflicts: Vec<PrefixConflict>,
}

/// Split the listing into orphans, young unreferenced files and prefix conflicts; `Err` with
/// the conflicts when `mode` is [`PrefixMismatchMode::Error`] and there are any.
fn classify(
    listed: &[Listed],
    index: &ReferenceIndex,
    older_than: i64,
    mode: PrefixMismatchMode,
) -> std::result::Result<Classified, String> {
    let mut out = Classified::default();
    for f in listed {
        let orphan = match index.lookup(&f.path) {
            Lookup::Referenced => false,
            Lookup::Unreferenced => true,
            Lookup::Mismatch(prefix) => {
                out.conflicts.push(PrefixConflict {
                    listed: f.path.clone(),
                    referenced_prefix: prefix,
                });
                mode == PrefixMismatchMode::Delete
            }
        };
        if !orphan {
            continue;
        }
        if f.last_modified_ms >= older_than {
            out.young += 1;
            continue;
        }
        out.orphans.push(OrphanFile {
            path: f.path.clone(),
            size: f.size,
            last_modified_ms: f.last_modified_ms,
        });
    }
    out.conflicts.sort();
    if mode == PrefixMismatchMode::Error && !out.conflicts.is_empty() {
        let pairs: BTreeSet<String> = out
            .conflicts
            .iter()
            .map(|c| {
                let listed = FileUri::parse(&c.listed, &index.maps).prefix();
                format!("{} vs {listed}", c.referenced_prefix)
            })
            .collect();
        return Err(format!(
            "{} listed file(s) are referenced under another scheme or authority ({}): map \
             them with equal_schemes / equal_authorities if they are the same storage, or set \
             prefix_mismatch to `ignore` (keep them) or `delete` (only if they are certainly \
             different storage)",
            out.conflicts.len(),
            pairs.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(out)
}

/// Partition directory prefixes (`_hidden=`) that look hidden but are not (Java's
/// `PartitionAwareHiddenPathFilter`).
fn hidden_partition_prefixes(table: &LoadedTable) -> Vec<String> {
    let mut out: Vec<String> = table
        .metadata
        .partition_specs_iter()
        .flat_map(|s| s.fields().iter().map(|f| f.name.clone()))
        .filter(|n| n.starts_with('_') || n.starts_with('.'))
        .map(|n| format!("{n}="))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Whether a listed file sits in a hidden path below `root`: a component starting with `.` or
/// `_` that is not a partition directory of a field whose name starts so (Hadoop's `.crc`
/// checksums, `_SUCCESS` markers, staging directories).
fn is_hidden(root: &FileUri, file: &FileUri, partition_prefixes: &[String]) -> bool {
    let depth = root.segments().count();
    file.segments().skip(depth).any(|seg| {
        (seg.starts_with('.') || seg.starts_with('_'))
            && !partition_prefixes
                .iter()
                .any(|p| seg.starts_with(p.as_str()))
    })
}

// ------------------------------------------------------------------------------------------
// Shared-path detection
// ------------------------------------------------------------------------------------------

/// Every other table of the catalog whose location (or data/metadata path property) equals,
/// contains or nests in `root`, with why. A table that cannot be loaded refuses the run: its
/// location is unknown.
async fn shared_tables(
    catalog: &Catalog,
    me: &LoadedTable,
    root: &FileUri,
    maps: &UriMaps,
    concurrency: usize,
) -> Result<Vec<(LoadedTable, String)>> {
    let ids: Vec<TableId> = catalog
        .list_all_tables()
        .await?
        .into_iter()
        .filter(|id| id != &me.id)
        .collect();
    let loaded: Vec<(TableId, Result<LoadedTable>)> = futures::stream::iter(ids)
        .map(|id| async move {
            let t = catalog.load_table(&id).await;
            (id, t)
        })
        .buffered(concurrency.min(8))
        // Boxed: without it rustc cannot prove this stream's borrows `Send` for every
        // lifetime, and callers could not `tokio::spawn` the operation.
        .boxed()
        .collect()
        .await;
    let mut out = Vec::new();
    for (id, t) in loaded {
        let t = match t {
            Ok(t) => t,
            // Listed a moment ago and dropped since: it shares nothing any more.
            Err(Error::NotFound { .. }) => continue,
            Err(e) => {
                return Err(Error::Refused {
                    table: me.id.to_string(),
                    reason: format!(
                        "table {id} of the catalog cannot be loaded, so whether it shares the \
                         location is unknown: {e}"
                    ),
                });
            }
        };
        let mut places = vec![("location".to_string(), t.metadata.location().to_string())];
        for p in LOCATION_PROPERTIES {
            if let Some(v) = t.metadata.properties().get(p) {
                places.push((p.to_string(), v.clone()));
            }
        }
        let hit = places.into_iter().find_map(|(what, loc)| {
            let other = FileUri::parse(&loc, maps);
            let why = if other.same_location(root) {
                "same location"
            } else if other.contains(root) {
                "contains it"
            } else if root.contains(&other) {
                "nested inside it"
            } else {
                return None;
            };
            Some(format!("{what} {loc}: {why}"))
        });
        if let Some(why) = hit {
            out.push((t, why));
        }
    }
    Ok(out)
}

// ------------------------------------------------------------------------------------------
// Location normalization
// ------------------------------------------------------------------------------------------

/// Scheme and authority equivalences.
#[derive(Debug, Clone)]
pub(crate) struct UriMaps {
    schemes: HashMap<String, String>,
    authorities: HashMap<String, String>,
}

impl Default for UriMaps {
    fn default() -> Self {
        Self {
            schemes: [("s3a", "s3"), ("s3n", "s3")]
                .into_iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
            authorities: HashMap::new(),
        }
    }
}

/// A location split the way Java's orphan action compares locations: scheme and authority
/// (lower-cased, after the equivalence maps; absent when the location has none) and the path
/// (leading `/`, no duplicate or trailing `/`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileUri {
    /// Scheme (`s3`, `file`), if any.
    pub scheme: Option<String>,
    /// Authority (bucket, host), if any (`file:///x` has none).
    pub authority: Option<String>,
    /// Path.
    pub path: String,
}

impl FileUri {
    /// Split and normalize a location with the default equivalences (`s3a`, `s3n` → `s3`).
    pub fn new(location: &str) -> Self {
        Self::parse(location, &UriMaps::default())
    }

    pub(crate) fn parse(location: &str, maps: &UriMaps) -> Self {
        let (scheme, rest) = match location.find(':') {
            Some(i)
                if i > 0
                    && !location[..i].contains('/')
                    && location[..i]
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) =>
            {
                (Some(location[..i].to_ascii_lowercase()), &location[i + 1..])
            }
            _ => (None, location),
        };
        let (authority, path) = match rest.strip_prefix("//") {
            Some(r) => match r.find('/') {
                Some(j) => (Some(&r[..j]), &r[j..]),
                None => (Some(r), ""),
            },
            None => (None, rest),
        };
        let scheme = scheme.map(|s| maps.schemes.get(&s).cloned().unwrap_or(s));
        let authority = authority.filter(|a| !a.is_empty()).map(|a| {
            let a = a.to_ascii_lowercase();
            maps.authorities.get(&a).cloned().unwrap_or(a)
        });
        let mut norm = String::with_capacity(path.len() + 1);
        for seg in path.split('/').filter(|s| !s.is_empty()) {
            norm.push('/');
            norm.push_str(seg);
        }
        if norm.is_empty() {
            norm.push('/');
        }
        FileUri {
            scheme,
            authority,
            path: norm,
        }
    }

    fn segments(&self) -> impl Iterator<Item = &str> {
        self.path.split('/').filter(|s| !s.is_empty())
    }

    /// Java's `uriComponentMatch`: a reference without a scheme (authority) matches any.
    fn prefix_matches(&self, listed: &FileUri) -> bool {
        let m = |valid: &Option<String>, actual: &Option<String>| {
            valid.is_none() || valid.as_deref() == actual.as_deref()
        };
        m(&self.scheme, &listed.scheme) && m(&self.authority, &listed.authority)
    }

    /// Same scheme and authority, where a missing one matches anything (the conservative
    /// reading: an unqualified location may be on any storage).
    fn same_store(&self, other: &FileUri) -> bool {
        let m = |a: &Option<String>, b: &Option<String>| a.is_none() || b.is_none() || a == b;
        m(&self.scheme, &other.scheme) && m(&self.authority, &other.authority)
    }

    /// The same location (`s3a://b/t` and `s3://b/t/`).
    pub fn same_location(&self, other: &FileUri) -> bool {
        self.same_store(other) && self.path == other.path
    }

    /// Whether `other` is this location or lies below it, component by component
    /// (`/t` contains `/t/a`, not `/ta`).
    pub fn contains(&self, other: &FileUri) -> bool {
        if !self.same_store(other) {
            return false;
        }
        let mut mine = self.segments();
        let mut theirs = other.segments();
        loop {
            match (mine.next(), theirs.next()) {
                (None, _) => return true,
                (Some(a), Some(b)) if a == b => {}
                _ => return false,
            }
        }
    }

    /// Whether either contains the other.
    pub fn overlaps(&self, other: &FileUri) -> bool {
        self.contains(other) || other.contains(self)
    }

    fn prefix(&self) -> String {
        match (&self.scheme, &self.authority) {
            (Some(s), Some(a)) => format!("{s}://{a}"),
            (Some(s), None) => format!("{s}:"),
            (None, Some(a)) => format!("//{a}"),
            (None, None) => String::new(),
        }
    }
}

/// Decode `%XX` escapes; `None` when there are none or the result is not UTF-8.
fn percent_decoded(path: &str) -> Option<String> {
    if !path.contains('%') {
        return None;
    }
    let b = path.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).ok().filter(|s| s != path)
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

// ------------------------------------------------------------------------------------------
// References
// ------------------------------------------------------------------------------------------

enum Lookup {
    Referenced,
    Unreferenced,
    /// The path is referenced, but only under this other prefix.
    Mismatch(String),
}

/// Referenced locations by normalized path (and by percent-decoded path), with the prefixes
/// (scheme, authority) each is referenced under.
pub(crate) struct ReferenceIndex {
    maps: UriMaps,
    by_path: HashMap<String, Vec<FileUri>>,
    distinct: HashSet<FileUri>,
}

impl ReferenceIndex {
    pub(crate) fn new(maps: UriMaps) -> Self {
        Self {
            maps,
            by_path: HashMap::new(),
            distinct: HashSet::new(),
        }
    }

    pub(crate) fn extend<'s>(&mut self, locations: impl IntoIterator<Item = &'s str>) {
        for loc in locations {
            let uri = FileUri::parse(loc, &self.maps);
            if !self.distinct.insert(uri.clone()) {
                continue;
            }
            if let Some(decoded) = percent_decoded(&uri.path) {
                self.by_path.entry(decoded).or_default().push(uri.clone());
            }
            self.by_path.entry(uri.path.clone()).or_default().push(uri);
        }
    }

    /// Distinct referenced locations.
    pub(crate) fn len(&self) -> usize {
        self.distinct.len()
    }

    fn lookup(&self, listed: &str) -> Lookup {
        let actual = FileUri::parse(listed, &self.maps);
        let decoded = percent_decoded(&actual.path);
        let candidates = self
            .by_path
            .get(&actual.path)
            .into_iter()
            .chain(decoded.as_ref().and_then(|d| self.by_path.get(d)))
            .flatten();
        let mut mismatch = None;
        for valid in candidates {
            if valid.prefix_matches(&actual) {
                return Lookup::Referenced;
            }
            mismatch.get_or_insert_with(|| valid.prefix());
        }
        mismatch.map_or(Lookup::Unreferenced, Lookup::Mismatch)
    }
}

/// A live data or delete file of a manifest.
#[derive(Debug, Clone)]
pub(crate) struct LiveEntry {
    pub(crate) path: String,
    pub(crate) content: DataContentType,
    pub(crate) records: u64,
    pub(crate) bytes: u64,
}

/// The manifests a snapshot's manifest list names.
pub(crate) async fn read_manifest_list(
    table: &LoadedTable,
    snapshot: &Snapshot,
) -> Result<Vec<ManifestFile>> {
    crate::commit::read_manifest_list(table, snapshot).await
}

/// The live (added or existing) entries of one manifest.
pub(crate) async fn read_live_entries(
    table: &LoadedTable,
    manifest: &ManifestFile,
) -> Result<Vec<LiveEntry>> {
    let location = &manifest.manifest_path;
    if manifest.key_metadata.is_some() {
        return Err(Error::unsupported(format!(
            "{}: encrypted manifest {location}",
            table.id
        )));
    }
    let name = table.id.to_string();
    let bytes = crate::format::manifest::read_bytes(&table.storage, &name, location).await?;
    let mut out = Vec::new();
    crate::format::manifest::for_each_live(&name, location, &bytes, |e| {
        out.push(LiveEntry {
            path: e.path.to_string(),
            content: e.content,
            records: e.records,
            bytes: e.bytes,
        });
    })?;
    Ok(out)
}

/// Metadata files a table references besides snapshots' manifests: the current and logged
/// `metadata.json`, the version hint (wherever Hadoop tables would keep one), statistics and
/// partition statistics files.
pub(crate) fn metadata_references(table: &LoadedTable) -> Vec<String> {
    let md = &table.metadata;
    let mut out: Vec<String> = table.metadata_location.iter().cloned().collect();
    out.extend(md.metadata_log().iter().map(|m| m.metadata_file.clone()));
    let location = md.location().trim_end_matches('/');
    out.push(format!("{location}/metadata/version-hint.text"));
    if let Some(dir) = md.properties().get("write.metadata.path") {
        out.push(format!("{}/version-hint.text", dir.trim_end_matches('/')));
    }
    out.extend(md.statistics_iter().map(|s| s.statistics_path.clone()));
    out.extend(
        md.partition_statistics_iter()
            .map(|s| s.statistics_path.clone()),
    );
    out
}

/// Every location a table's metadata references, each once: [`metadata_references`], every
/// snapshot's manifest list and manifests, and their live data and delete files. Any manifest
/// list or manifest that cannot be read fails the call.
///
/// Lists and manifests are read `concurrency` at once and decoded on worker tasks; their paths
/// are deduplicated as they arrive, so a history whose manifests were merged at every commit
/// (each file listed in thousands of manifests) is held as its distinct files, not its entries.
pub(crate) async fn table_references(
    table: &LoadedTable,
    concurrency: usize,
) -> Result<Vec<String>> {
    let name: Arc<str> = Arc::from(table.id.to_string());
    let version = table.metadata.format_version();
    let mut out: HashSet<String> = metadata_references(table).into_iter().collect();
    let mut lists: Vec<String> = Vec::new();
    for s in crate::format::snapshots(&table.metadata) {
        if s.manifest_list().is_empty() {
            return Err(Error::unsupported(format!(
                "{name}: snapshot {} has no manifest list (v1 inline manifests)",
                s.snapshot_id()
            )));
        }
        if out.insert(s.manifest_list().to_string()) {
            lists.push(s.manifest_list().to_string());
        }
    }
    let mut manifests: Vec<String> = Vec::new();
    let mut reads = futures::stream::iter(lists.into_iter().map(|path| {
        let storage = table.storage.clone();
        let name = Arc::clone(&name);
        tokio::spawn(async move {
            let list =
                crate::format::manifest_list::read_paths(&storage, &name, &path, version).await?;
            let mut paths = Vec::with_capacity(list.manifests.len());
            for m in &list.manifests {
                if m.encrypted {
                    return Err(Error::unsupported(format!(
                        "{name}: encrypted manifest {}",
                        list.path(m)
                    )));
                }
                paths.push(list.path(m).to_string());
            }
            Ok(paths)
        })
    }))
    .buffer_unordered(concurrency);
    while let Some(joined) = reads.next().await {
        let paths = joined
            .map_err(|e| Error::compute(format!("{name}: manifest list task failed"), e))??;
        for p in paths {
            if !out.contains(&p) {
                out.insert(p.clone());
                manifests.push(p);
            }
        }
    }
    let mut reads = futures::stream::iter(manifests.into_iter().map(|path| {
        let storage = table.storage.clone();
        let name = Arc::clone(&name);
        tokio::spawn(async move {
            let bytes = crate::format::manifest::read_bytes(&storage, &name, &path).await?;
            let mut live = Vec::new();
            crate::format::manifest::for_each_live(&name, &path, &bytes, |e| {
                live.push(e.path.to_string());
            })?;
            Ok::<_, Error>(live)
        })
    }))
    .buffer_unordered(concurrency);
    while let Some(joined) = reads.next().await {
        let live =
            joined.map_err(|e| Error::compute(format!("{name}: manifest task failed"), e))??;
        out.extend(live);
    }
    Ok(out.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> FileUri {
        FileUri::new(s)
    }

    #[test]
    fn normalizes_schemes_authorities_and_slashes() {
        assert_eq!(u("s3a://b/t"), u("s3://b/t/"));
        assert_eq!(u("s3n://B//t///x"), u("s3://b/t/x"));
        assert_eq!(u("file:/x/y"), u("file:///x/y"));
        assert_eq!(u("file:/x/y").authority, None);
        assert_eq!(u("/x/y").scheme, None);
        assert_eq!(u("s3://b").path, "/");
        assert_ne!(u("s3://b/t"), u("s3://c/t"));
        assert_ne!(u("gs://b/t"), u("s3://b/t"));
        let maps = RemoveOrphanFilesOptions {
            equal_schemes: [("gs, abfs".to_string(), "s3".to_string())].into(),
            equal_authorities: [("b.example.com".to_string(), "b".to_string())].into(),
            ..RemoveOrphanFilesOptions::default()
        }
        .uri_maps();
        assert_eq!(
            FileUri::parse("abfs://b.example.com/t", &maps),
            FileUri::parse("s3a://b/t", &maps)
        );
        // A colon later in the path is not a scheme.
        assert_eq!(u("/a/b:c").scheme, None);
        assert_eq!(u("/a/b:c").path, "/a/b:c");
    }

    #[test]
    fn containment_is_by_whole_components() {
        assert!(u("s3a://b/t").same_location(&u("s3://b/t/")));
        assert!(u("file:/x").same_location(&u("file:///x")));
        assert!(u("/t").contains(&u("/t/a")));
        assert!(u("/t/").contains(&u("/t//a/b")));
        assert!(!u("/t/a").contains(&u("/t/ab")));
        assert!(!u("/t/a").overlaps(&u("/t/ab")));
        assert!(!u("/t/a").contains(&u("/t")));
        assert!(u("/t/a").overlaps(&u("/t")));
        assert!(!u("s3://b/t").overlaps(&u("s3://c/t")));
        assert!(!u("s3://b/t").overlaps(&u("file:///t")));
        // Unqualified locations may be on any storage: they overlap conservatively.
        assert!(u("/b/t").overlaps(&u("file:///b/t/x")));
        assert!(u("s3://b/wh").contains(&u("s3a://b/wh/db/t")));
    }

    #[test]
    fn hidden_paths_below_the_root_only() {
        let root = u("file:///tmp/.cache/t");
        let none: Vec<String> = Vec::new();
        assert!(!is_hidden(
            &root,
            &u("file:///tmp/.cache/t/data/a.parquet"),
            &none
        ));
        assert!(is_hidden(
            &root,
            &u("file:///tmp/.cache/t/data/.a.parquet.crc"),
            &none
        ));
        assert!(is_hidden(&root, &u("file:///tmp/.cache/t/_temp/x"), &none));
        let parts = vec!["_region=".to_string()];
        assert!(!is_hidden(
            &root,
            &u("file:///tmp/.cache/t/data/_region=eu/a.parquet"),
            &parts
        ));
        assert!(is_hidden(
            &root,
            &u("file:///tmp/.cache/t/data/_other=eu/a.parquet"),
            &parts
        ));
    }

    #[test]
    fn lookup_matches_like_java() {
        let mut idx = ReferenceIndex::new(UriMaps::default());
        idx.extend([
            "s3a://b/t/data/a.parquet",
            "/t/data/b.parquet",
            "s3://other/t/data/c.parquet",
            "s3://b/t/data/name=x%2Fy/d.parquet",
        ]);
        assert!(matches!(
            idx.lookup("s3://b/t/data/a.parquet"),
            Lookup::Referenced
        ));
        assert!(matches!(
            idx.lookup("s3://b//t/data/a.parquet"),
            Lookup::Referenced
        ));
        // No scheme in the reference: matches any listed scheme.
        assert!(matches!(
            idx.lookup("file:///t/data/b.parquet"),
            Lookup::Referenced
        ));
        assert!(matches!(
            idx.lookup("s3://b/t/data/e.parquet"),
            Lookup::Unreferenced
        ));
        // The same path referenced in another bucket only: a conflict, never silently an orphan.
        assert!(
            matches!(idx.lookup("s3://b/t/data/c.parquet"), Lookup::Mismatch(p) if p == "s3://other")
        );
        // Literal match, and the decoded spelling is kept too.
        assert!(matches!(
            idx.lookup("s3://b/t/data/name=x%2Fy/d.parquet"),
            Lookup::Referenced
        ));
        assert!(matches!(
            idx.lookup("s3://b/t/data/name=x/y/d.parquet"),
            Lookup::Referenced
        ));
        // Decoding errs on the side of keeping: `%252F` decodes to the referenced `%2F`.
        assert!(matches!(
            idx.lookup("s3://b/t/data/name=x%252Fy/d.parquet"),
            Lookup::Referenced
        ));
        assert!(matches!(
            idx.lookup("s3://b/t/data/name=x%2Fz/d.parquet"),
            Lookup::Unreferenced
        ));
        assert_eq!(idx.len(), 4);
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decoded("/a%20b"), Some("/a b".to_string()));
        assert_eq!(percent_decoded("/a b"), None);
        assert_eq!(percent_decoded("/a%2"), None);
        assert_eq!(percent_decoded("/a%zz"), None);
        assert_eq!(percent_decoded("/%ff"), None);
    }

    #[test]
    fn traversal_is_found_however_it_is_spelled() {
        for seg in [
            ".",
            "..",
            "%2e",
            "%2E%2e",
            "%252e%252E",
            "a%2Fb",
            "a%2fb",
            "a%5Cb",
            "%2e%2e%2f",
            "%25252e%25252e",
        ] {
            assert!(traverses(seg), "{seg}");
        }
        for seg in [
            "t",
            "...",
            ".hidden",
            "a%20b",
            "%zz",
            "caf\u{e9}",
            "a..b",
            "%ff",
        ] {
            assert!(!traverses(seg), "{seg}");
        }
    }

    #[test]
    fn classify_respects_window_and_prefix_mode() {
        let mut idx = ReferenceIndex::new(UriMaps::default());
        idx.extend(["s3://b/t/data/kept.parquet", "s3://c/t/data/moved.parquet"]);
        let f = |p: &str, t: i64| Listed {
            path: p.to_string(),
            size: 10,
            last_modified_ms: t,
        };
        let listed = vec![
            f("s3://b/t/data/kept.parquet", 0),
            f("s3://b/t/data/old.parquet", 50),
            f("s3://b/t/data/young.parquet", 100),
            f("s3://b/t/data/moved.parquet", 0),
        ];
        let e = classify(&listed, &idx, 100, PrefixMismatchMode::Error)
            .err()
            .unwrap();
        assert!(e.contains("s3://c vs s3://b"), "{e}");
        let c = classify(&listed, &idx, 100, PrefixMismatchMode::Ignore).unwrap();
        assert_eq!(c.orphans.len(), 1);
        assert_eq!(c.orphans[0].path, "s3://b/t/data/old.parquet");
        assert_eq!(c.young, 1);
        assert_eq!(c.conflicts.len(), 1);
        let c = classify(&listed, &idx, 100, PrefixMismatchMode::Delete).unwrap();
        assert_eq!(c.orphans.len(), 2);
    }

    #[test]
    fn retention_floor_and_options() {
        let id = TableId::parse("db.t").unwrap();
        let now = 10 * DAY_MS;
        let o = RemoveOrphanFilesOptions::default();
        assert!(o.dry_run, "dry run is the default");
        assert_eq!(o.older_than(&id, now).unwrap(), now - DEFAULT_RETENTION_MS);
        let short = RemoveOrphanFilesOptions {
            older_than_ms: Some(now - DAY_MS / 2),
            ..o.clone()
        };
        assert!(matches!(
            short.older_than(&id, now),
            Err(Error::Refused { .. })
        ));
        let future = RemoveOrphanFilesOptions {
            older_than_ms: Some(now + 1),
            ..o.clone()
        };
        assert!(matches!(
            future.older_than(&id, now),
            Err(Error::Refused { .. })
        ));
        let forced = RemoveOrphanFilesOptions {
            allow_short_retention: true,
            ..short
        };
        assert_eq!(forced.older_than(&id, now).unwrap(), now - DAY_MS / 2);
        assert!(
            RemoveOrphanFilesOptions {
                older_than_ms: Some(now - DAY_MS),
                ..o.clone()
            }
            .older_than(&id, now)
            .is_ok()
        );
        assert!(
            RemoveOrphanFilesOptions {
                concurrency: 0,
                ..o.clone()
            }
            .validate()
            .is_err()
        );
        assert!(
            RemoveOrphanFilesOptions {
                equal_schemes: [("s3a,".to_string(), "s3".to_string())].into(),
                ..o
            }
            .validate()
            .is_err()
        );
    }
}
