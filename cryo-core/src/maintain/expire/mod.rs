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
//! Safety (docs/architecture.md, "Deletion safety"): a dry run is the default and changes nothing; nothing is deleted before
//! the commit succeeded; a table with `gc.enabled=false` is refused ([`Error::Refused`]: its
//! files may belong to another table); files outside the table's location (and its
//! `write.data.path` / `write.metadata.path`) are never deleted, only reported; which files
//! become unreachable is proved before the commit, so a manifest list or manifest that cannot
//! be read fails a real run as it fails the dry run, with nothing expired (should the commit
//! land on a newer head, the proof is redone after it, and a failure there stops all deletion:
//! the outcome says why, the files stay for orphan removal); a failed delete is reported,
//! never fatal.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use iceberg::spec::DataContentType;
use serde::{Deserialize, Serialize};

use crate::catalog::{Catalog, LoadedTable, TableId};
use crate::clock::{Clock, SystemClock};
use crate::commit::driver::{Attempt, AttemptContext, CommitDriver, CommitOp, Driven, Prepared};
use crate::commit::{CatalogCommitter, RetryPolicy, TableChanges};
use crate::error::{Error, Result};
use crate::receipt::Footprint;

mod cleanup;
mod reach;
mod select;
#[cfg(test)]
mod tests;

use cleanup::{delete_files, dropped_from_log, finish_metadata_cleanup, stat_all};
use reach::{ProofCache, Unreachable, table_roots, unreachable_files, within};
pub use select::{
    DEFAULT_MAX_SNAPSHOT_AGE_MS, ExpireOptions, History, Retention, SnapshotSelection,
    select_snapshots,
};
use select::{DELETE_AFTER_COMMIT, GC_ENABLED, apply_locally, expiry_changes, prop_true};

/// An expiry selected on one head: what goes, and (unless nothing does) the commit, the
/// metadata after it and the metadata files it drops from the log.
struct StagedExpiry {
    retention: Retention,
    selection: SnapshotSelection,
    commit: Option<(TableChanges, LoadedTable, Vec<String>)>,
}

/// Select the expiry on `head` and build its commit. Pure (no reads; `cache` keeps the
/// history it reads off the metadata).
fn stage_expiry(
    head: &LoadedTable,
    options: &ExpireOptions,
    now: i64,
    cache: &mut ProofCache,
) -> Result<StagedExpiry> {
    let retention = Retention::resolve(options, head.metadata.properties(), now)?;
    let history = cache.history(head)?;
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

/// An expiry as the commit driver sees it: each attempt selects on the head it is given and,
/// when files are cleaned, proves which become unreachable before the commit.
struct ExpiryCommit<'a> {
    options: &'a ExpireOptions,
    now: i64,
    cache: &'a mut ProofCache,
    /// Whether the proof on the head as first loaded was made (outside the fence).
    warm: bool,
    /// That proof, with the metadata it was made on: inside the fence, a head that has not
    /// moved needs no second proof.
    warm_proof: Option<(String, Proof)>,
    /// The last attempt's retention, selection and the sizes of the metadata files it drops.
    staged: Option<(Retention, SnapshotSelection, HashMap<String, u64>)>,
    /// The last attempt's proof.
    proved: Option<Proof>,
}

impl CommitOp for ExpiryCommit<'_> {
    async fn prepare(&mut self, head: &LoadedTable) -> Result<Prepared> {
        if !self.warm {
            if let Some((_, predicted, _)) =
                stage_expiry(head, self.options, self.now, self.cache)?.commit
            {
                let concurrency = self.options.max_concurrent_reads;
                let proof = prove(head, &predicted, concurrency, self.cache).await?;
                self.warm_proof = head.metadata_location.clone().map(|at| (at, proof));
            }
            self.warm = true;
        }
        Ok(Prepared::Ready)
    }

    async fn attempt(&mut self, head: &LoadedTable, _cx: AttemptContext<'_>) -> Result<Attempt> {
        let s = stage_expiry(head, self.options, self.now, self.cache)?;
        let Some((changes, predicted, dropped)) = s.commit else {
            self.staged = Some((s.retention, s.selection, HashMap::new()));
            return Ok(Attempt::Nothing);
        };
        let sizes = stat_all(&head.storage, &dropped, &mut self.cache.sizes).await;
        if self.options.clean_files {
            // Prove which files become unreachable before committing: a manifest list or
            // manifest that cannot be read fails the real run exactly where its dry run fails,
            // with nothing changed, instead of expiring the snapshots a person may need to roll
            // a broken table back to and leaving the clean-up undone.
            let concurrency = self.options.max_concurrent_reads;
            // The selection is a function of the head: on the metadata proved outside the
            // fence, that proof stands.
            let proof = match self.warm_proof.take() {
                Some((at, proof)) if head.metadata_location.as_deref() == Some(at.as_str()) => {
                    proof
                }
                _ => prove(head, &predicted, concurrency, self.cache).await?,
            };
            self.proved = Some(proof);
        }
        self.staged = Some((s.retention, s.selection, sizes));
        Ok(Attempt::Changes(changes))
    }
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
        let now = self.clock.now_ms();

        let mut head = base.clone();
        // What the proofs read, kept across attempts (manifest lists and manifests never change).
        let mut cache = ProofCache::default();
        let mut retries = 0;
        // The unreachable files, proved before the commit that expired them (`proved`).
        let (retention, selection, after, dropped_metadata, metadata_sizes, proved) =
            match &committer {
                None => {
                    let s = stage_expiry(&head, options, now, &mut cache)?;
                    match s.commit {
                        None => (
                            s.retention,
                            s.selection,
                            head,
                            Vec::new(),
                            HashMap::new(),
                            None,
                        ),
                        Some((_, predicted, dropped)) => {
                            let sizes = stat_all(&head.storage, &dropped, &mut cache.sizes).await;
                            (s.retention, s.selection, predicted, dropped, sizes, None)
                        }
                    }
                }
                Some(committer) => {
                    let mut driver = CommitDriver::new(committer.as_ref(), policy)?
                        .with_fence(fence, self.catalog.name());
                    let mut op = ExpiryCommit {
                        options,
                        now,
                        cache: &mut cache,
                        // Under a fence, the proof on the head as first loaded is made outside it.
                        warm: fence.is_none() || !options.clean_files,
                        warm_proof: None,
                        staged: None,
                        proved: None,
                    };
                    let ended = driver.drive(&mut head, &mut op).await?;
                    retries = driver.retries();
                    let (proved, staged) = (op.proved, op.staged);
                    let Some((retention, selection, sizes)) = staged else {
                        return Err(Error::Internal(
                            "expiry: the commit driver ended without an attempt".into(),
                        ));
                    };
                    match ended {
                        Driven::Nothing(head) => (
                            retention,
                            selection,
                            *head,
                            Vec::new(),
                            HashMap::new(),
                            None,
                        ),
                        Driven::Landed(l) => {
                            let dropped = dropped_from_log(&l.staged_on, &l.table);
                            (retention, selection, l.table, dropped, sizes, proved)
                        }
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
            let kept = cache.history(&after)?;
            cache
                .history(&base)?
                .refs
                .keys()
                .filter(|r| !kept.refs.contains_key(*r))
                .cloned()
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
            retries,
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
