//! Cryo's snapshot producer: new manifests, the base snapshot's manifests carried over, a
//! manifest list, a full summary, and the requirements + updates that commit them.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use iceberg::spec::{
    DataContentType, DataFile, DataFileFormat, FormatVersion, ManifestContentType, Operation,
    Snapshot,
};

use super::iceberg_error;
use crate::catalog::LoadedTable;
use crate::catalog::committer::{CatalogCommitter, TableChanges, discard};
use crate::clock::{self, Clock};
use crate::commit::summary::is_deletion_vector;
use crate::error::{Error, Result};

mod lineage;
mod manifests;
mod replace;
mod stage;
mod staged;
#[cfg(test)]
mod tests;

pub(crate) use manifests::existing_entries;
pub(crate) use manifests::manifest_size_model;
pub use staged::certainly_not_committed;

/// Builds one snapshot on a base table: data files and delete files to add, data files (and, in
/// a `replace`, delete files) to remove.
///
/// | built with (kind) | adds data | adds deletes / removes files | operation (as Java's) |
/// |---|---|---|---|
/// | [`new`](SnapshotProducer::new) ([`Change`]) | yes | no | `append` |
/// | [`new`](SnapshotProducer::new) ([`Change`]) | no | yes | `delete` (`RowDelta`, `DeleteFiles`) |
/// | [`new`](SnapshotProducer::new) ([`Change`]) | yes | yes | `overwrite` |
/// | [`replace`](SnapshotProducer::replace) ([`Replace`]) | any | removes data and/or delete files | `replace` (`RewriteFiles`) |
/// | (crate-internal) `rewrite_manifests`, for `maintain::RewriteManifests` | no | no: the same files in other manifests | `replace` (`RewriteManifests`) |
///
/// New data files and new delete files go to separate new manifests (format v2+ keeps deletes in
/// delete manifests; v1 has no delete files); their sequence numbers are inherited from the
/// snapshot, so equality deletes added here apply to older data only — except the data files of
/// a `replace` given an explicit [data sequence number](Self::with_data_sequence_number).
///
/// The base snapshot's manifests are carried over unchanged, except:
/// - manifests listing a removed file: their other live files are rewritten as `EXISTING`,
///   merged per content type and partition spec (and cluster, see
///   [`with_clusters`](Self::with_clusters)) into manifests near
///   `commit.manifest.target-size-bytes`, and the removed files of all of them are merged into
///   one `DELETED`-only manifest per partition spec and content type (docs/architecture.md, "Lean metadata after a rewrite": they must be
///   recorded, for other engines' snapshot expiry, but should not be spread over many
///   manifests); every file keeps its original data and file sequence numbers, and on v3 its
///   inherited `first_row_id`;
/// - manifests with no live files left (the `DELETED`-only manifests of an earlier commit) are
///   dropped, as Java's merging producers drop them.
///
/// Deletion vectors (v3) whose data file is removed are removed with it: they can apply to
/// nothing else, and several vectors may share one Puffin file, so they cannot be named by path
/// alone (Java's `removeDanglingDeletesFor`).
///
/// The commit requires that the table is still the same table (UUID) and that `main` still
/// points at the base snapshot; if either changed, the commit fails with
/// [`Error::CommitConflict`] and the files it wrote are deleted. Retrying means building again on
/// the new head, after [`validate_rewrite`](super::validate_rewrite) for a `replace`.
///
/// Files to add must be written for the table's current schema and default partition spec, as
/// [`write_data_files`](super::write_data_files) and the delete writers do.
///
/// The kind is in the type ([`SnapshotKind`]): what only a `replace` may do is not there on
/// other producers. Removing delete files outside a rewrite would bring deleted rows back:
///
/// ```compile_fail,E0599
/// # fn f(table: &cryo_core::LoadedTable) {
/// use cryo_core::commit::SnapshotProducer;
/// let _ = SnapshotProducer::new(table).remove_delete_files(["deletes.parquet"]);
/// # }
/// ```
///
/// and an explicit data sequence number is only meaningful for the rewritten files of a replace:
///
/// ```compile_fail,E0599
/// # fn f(table: &cryo_core::LoadedTable) {
/// use cryo_core::commit::SnapshotProducer;
/// let _ = SnapshotProducer::new(table).with_data_sequence_number(3);
/// # }
/// ```
///
/// ```
/// # fn f(table: &cryo_core::LoadedTable) {
/// use cryo_core::commit::SnapshotProducer;
/// let _ = SnapshotProducer::replace(table)
///     .delete_data_files(["small-1.parquet", "small-2.parquet"])
///     .remove_delete_files(["deletes.parquet"])
///     .with_data_sequence_number(3);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct SnapshotProducer<K: SnapshotKind = Change> {
    parts: Parts,
    kind: K,
}

/// What every kind of snapshot is built from: the base, the files it adds and removes, its
/// settings. The snapshot-finishing path (`stage`) works on these.
#[derive(Debug, Clone)]
pub struct Parts {
    base: LoadedTable,
    added_data: Vec<DataFile>,
    added_deletes: Vec<DataFile>,
    removed_data: BTreeSet<String>,
    removed_deletes: BTreeSet<String>,
    /// Data files whose live deletion vector an added one supersedes (it holds its positions).
    superseded_vectors: BTreeSet<String>,
    data_sequence_number: Option<i64>,
    /// Explicit data sequence numbers of added delete files, by path (a position-delete rewrite).
    delete_sequence_numbers: HashMap<String, i64>,
    /// A multi-snapshot run's layout of the files it removes later (see [`ManifestClusters`]).
    clusters: Option<ManifestClusters>,
    properties: HashMap<String, String>,
    clock: Arc<dyn Clock>,
}

/// The kinds of snapshot a [`SnapshotProducer`] makes: [`Change`], [`Replace`], and the
/// crate's manifest rewrite. Each states what it may stage and which operation it records; all
/// share the snapshot-finishing path (manifests, manifest list, summary, snapshot, catalog
/// changes). Sealed: the kinds are Cryo's.
pub trait SnapshotKind: kind::Sealed + fmt::Debug + Clone + Send + Sync {}

mod kind {
    use iceberg::spec::Operation;

    use super::{ManifestRewrite, Parts};
    use crate::error::Result;

    pub trait Sealed {
        /// The operation the snapshot records, after the kind's own rules on what it adds
        /// and removes.
        fn check(&self, parts: &Parts) -> Result<Operation>;
        /// A manifest rewrite stages its own manifests instead of files.
        fn manifest_rewrite(&self) -> Option<&ManifestRewrite> {
            None
        }
    }
}

/// `append`, `delete` or `overwrite` (Java's `MergeAppend`, `RowDelta`, `OverwriteFiles`,
/// `DeleteFiles`): the operation follows from what is added and removed. Delete files are never
/// removed here (that would bring deleted rows back unless the rows are rewritten: a
/// [`Replace`] does it).
#[derive(Debug, Clone, Copy, Default)]
pub struct Change;

/// `replace` (Java's `RewriteFiles`): files rewritten, the table's rows unchanged; it may remove
/// delete files and give the files it adds explicit data sequence numbers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Replace;

impl SnapshotKind for Change {}
impl SnapshotKind for Replace {}
impl SnapshotKind for ManifestRewrite {}

impl kind::Sealed for Change {
    fn check(&self, parts: &Parts) -> Result<Operation> {
        let adds_data = !parts.added_data.is_empty();
        let deletes = !parts.added_deletes.is_empty() || !parts.removed_data.is_empty();
        match (adds_data, deletes) {
            (true, false) => Ok(Operation::Append),
            (false, true) => Ok(Operation::Delete),
            (true, true) => Ok(Operation::Overwrite),
            (false, false) => Err(Error::validation(format!(
                "{}: nothing to commit (no files added or removed)",
                parts.base.id
            ))),
        }
    }
}

impl kind::Sealed for Replace {
    fn check(&self, parts: &Parts) -> Result<Operation> {
        let table = &parts.base.id;
        if parts.removed_deletes.is_empty() {
            // Java's rule: a rewrite that adds delete files must be rewriting delete files;
            // otherwise the new deletes would change the table's rows.
            if !parts.added_deletes.is_empty() {
                return Err(Error::validation(format!(
                    "{table}: a replace may add delete files only when it removes delete files"
                )));
            }
            if parts.removed_data.is_empty() {
                return Err(Error::validation(format!(
                    "{table}: a replace must remove at least one data or delete file"
                )));
            }
        }
        Ok(Operation::Replace)
    }
}

impl kind::Sealed for ManifestRewrite {
    fn check(&self, parts: &Parts) -> Result<Operation> {
        if !(parts.added_data.is_empty()
            && parts.added_deletes.is_empty()
            && parts.removed_data.is_empty()
            && parts.removed_deletes.is_empty())
        {
            return Err(Error::validation(format!(
                "{}: a manifest rewrite adds and removes no files",
                parts.base.id
            )));
        }
        if self.replaced.is_empty() {
            return Err(Error::validation(format!(
                "{}: a manifest rewrite must replace at least one manifest",
                parts.base.id
            )));
        }
        Ok(Operation::Replace)
    }

    fn manifest_rewrite(&self) -> Option<&ManifestRewrite> {
        Some(self)
    }
}

/// How a run that removes files over several snapshots (compaction with partial progress) lays
/// out the live entries it rewrites, so that each later snapshot reads and rewrites only the
/// manifests that list what it removes.
///
/// The run assigns every file that one of its snapshots will remove (data files, delete files)
/// to a cluster, e.g. the batch expected to commit it. A snapshot staged
/// [`with_clusters`](SnapshotProducer::with_clusters) writes the live entries it moves out of a
/// touched manifest into manifests of one cluster each (entries of no cluster into their own), and
/// [records](Self::record) which cluster each manifest it wrote lists. A later snapshot of the run
/// carries over, unread, every recorded manifest whose cluster holds none of the files it removes:
/// such a manifest cannot list them. Manifests that are not recorded (the table's own, another
/// writer's) are read as always, and a file the snapshot removes that is found in no manifest it
/// read is still an error, so a wrong layout stops a commit; it cannot drop or keep the wrong
/// file.
///
/// A deletion vector belongs to the cluster of the data file it references (it is removed with
/// it).
#[derive(Debug, Clone, Default)]
pub struct ManifestClusters {
    cluster_of: Arc<HashMap<String, usize>>,
    /// Manifests written by the run's snapshots: the cluster of every live entry in each
    /// (`None`: files no snapshot of the run removes).
    written: HashMap<String, Option<usize>>,
}

impl ManifestClusters {
    /// A layout assigning each file path (data or delete file) to a cluster.
    pub fn new(files: impl IntoIterator<Item = (String, usize)>) -> Self {
        Self {
            cluster_of: Arc::new(files.into_iter().collect()),
            written: HashMap::new(),
        }
    }

    /// Remember the manifests `staged` wrote (call before committing it: a manifest of an
    /// attempt that does not land is never listed, so recording it is harmless).
    pub fn record(&mut self, staged: &StagedSnapshot) {
        self.written
            .extend(staged.manifest_clusters.iter().cloned());
    }

    /// The cluster a live entry of `content` belongs to.
    fn of(&self, content: ManifestContentType, file: &DataFile) -> Option<usize> {
        let path = match content {
            ManifestContentType::Deletes if is_deletion_vector(file) => file.referenced_data_file(),
            _ => Some(file.file_path().to_string()),
        }?;
        self.cluster_of.get(&path).copied()
    }
}

/// `replace` (Java's `RewriteManifests`): the same live files in other manifests; what it
/// replaces and writes (see [`SnapshotProducer::rewrite_manifests`]).
#[derive(Debug, Clone, Default)]
pub struct ManifestRewrite {
    replaced: BTreeSet<String>,
    new: Vec<NewManifest>,
}

/// A live manifest entry as a rewritten manifest carries it: status `EXISTING`, with the
/// snapshot id and the data and file sequence numbers it was committed with (and, on v3, the
/// `first_row_id` it inherited, made explicit).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub(crate) struct ExistingEntry {
    /// The file (data or delete), with its partition tuple and metrics.
    pub file: DataFile,
    /// Snapshot that added the file.
    pub snapshot_id: i64,
    /// Data sequence number.
    pub sequence_number: i64,
    /// File sequence number.
    pub file_sequence_number: i64,
}

/// One manifest a [manifest rewrite](SnapshotProducer::rewrite_manifests) writes: `entries`
/// (all of one content type and one partition spec), in the order given.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub(crate) struct NewManifest {
    /// Data or delete manifest.
    pub content: ManifestContentType,
    /// Partition spec of every entry.
    pub spec_id: i32,
    /// The entries, written as `EXISTING`.
    pub entries: Vec<ExistingEntry>,
}

impl NewManifest {
    /// A manifest of `content` and spec `spec_id` holding `entries`.
    pub fn new(content: ManifestContentType, spec_id: i32, entries: Vec<ExistingEntry>) -> Self {
        Self {
            content,
            spec_id,
            entries,
        }
    }
}

/// The summary keys of a manifest rewrite (Java's `SnapshotSummary` constants).
pub(crate) const MANIFESTS_CREATED: &str = "manifests-created";
/// Manifests of the parent carried over unchanged.
pub(crate) const MANIFESTS_KEPT: &str = "manifests-kept";
/// Manifests of the parent replaced by the new ones.
pub(crate) const MANIFESTS_REPLACED: &str = "manifests-replaced";
/// Live entries moved from the replaced manifests into the new ones.
pub(crate) const ENTRIES_PROCESSED: &str = "entries-processed";

/// A snapshot written to storage (manifests, manifest list) but not yet committed.
#[derive(Debug, Clone)]
pub struct StagedSnapshot {
    /// The snapshot the commit adds.
    pub snapshot: Snapshot,
    /// Requirements and updates to send to the catalog.
    pub changes: TableChanges,
    /// Metadata files written for it (manifests, then the manifest list).
    pub written_files: Vec<String>,
    /// Data files added.
    pub added_data_files: usize,
    /// Delete files added.
    pub added_delete_files: usize,
    /// Data files removed.
    pub removed_data_files: usize,
    /// Delete files removed (named ones and the deletion vectors of removed data files).
    pub removed_delete_files: usize,
    /// The manifests written and the cluster of the live entries of each (see
    /// [`ManifestClusters`]).
    manifest_clusters: Vec<(String, Option<usize>)>,
    base: LoadedTable,
}

/// What a commit did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CommitOutcome {
    /// The table after the commit (its new head).
    pub table: LoadedTable,
    /// The new snapshot.
    pub snapshot_id: i64,
    /// Its sequence number (0 on format v1).
    pub sequence_number: i64,
    /// Its timestamp.
    pub timestamp_ms: i64,
    /// `append`, `overwrite`, `delete` or `replace`.
    pub operation: String,
    /// Its summary (without the operation).
    pub summary: HashMap<String, String>,
    /// Data files added.
    pub added_data_files: usize,
    /// Delete files added.
    pub added_delete_files: usize,
    /// Data files removed.
    pub removed_data_files: usize,
    /// Delete files removed.
    pub removed_delete_files: usize,
    /// Metadata files written (manifests and the manifest list).
    pub written_files: Vec<String>,
}

impl SnapshotProducer<Change> {
    /// A producer on `base` (the table as loaded; its current snapshot is the parent).
    pub fn new(base: &LoadedTable) -> Self {
        SnapshotProducer {
            parts: Parts::new(base),
            kind: Change,
        }
    }
}

impl SnapshotProducer<Change> {
    /// Add deletion vectors (format v3) written by
    /// [`write_deletion_vectors`](super::write_deletion_vectors) on this producer's base, and
    /// remove the live vectors they supersede (the new ones hold their positions): Java's
    /// `RowDelta::addDeletes` with `removeDeletes` of the previous vectors.
    ///
    /// The commit is refused if a superseded vector is not live on the base (the vectors were
    /// written on another table state), or if an added vector's data file keeps another live
    /// vector.
    #[must_use]
    pub fn add_deletion_vectors(mut self, vectors: super::DeletionVectors) -> Self {
        self.parts.added_deletes.extend(vectors.files);
        self.parts.superseded_vectors.extend(vectors.superseded);
        self
    }
}

impl Parts {
    fn new(base: &LoadedTable) -> Self {
        Self {
            base: base.clone(),
            added_data: Vec::new(),
            added_deletes: Vec::new(),
            removed_data: BTreeSet::new(),
            removed_deletes: BTreeSet::new(),
            superseded_vectors: BTreeSet::new(),
            data_sequence_number: None,
            delete_sequence_numbers: HashMap::new(),
            clusters: None,
            properties: HashMap::new(),
            clock: clock::system(),
        }
    }
}

impl SnapshotProducer<Replace> {
    /// A producer for a `replace` snapshot on `base`: files are rewritten, the table's rows do not
    /// change (Java's `RewriteFiles`, what compaction commits).
    ///
    /// It must remove at least one file; it may add delete files only when it also removes
    /// some (a position-delete rewrite). For a rewrite planned on an older snapshot `S0` and
    /// committed on a newer head, give the new data files `S0`'s sequence number with
    /// [`with_data_sequence_number`](Self::with_data_sequence_number), after checking the head
    /// with [`validate_rewrite`](super::validate_rewrite).
    pub fn replace(base: &LoadedTable) -> Self {
        SnapshotProducer {
            parts: Parts::new(base),
            kind: Replace,
        }
    }

    /// Remove delete files (position deletes, equality deletes; by path) — only in a `replace`,
    /// since removing a delete file outside a rewrite would bring deleted rows back.
    ///
    /// A deletion vector's Puffin file may hold the vectors of several data files: naming it
    /// removes only the vectors whose data file this snapshot removes (those go anyway).
    #[must_use]
    pub fn remove_delete_files(
        mut self,
        paths: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.parts
            .removed_deletes
            .extend(paths.into_iter().map(Into::into));
        self
    }

    /// The data sequence number of the data files a `replace` adds: the sequence number of the
    /// snapshot the rewrite read (`S0`), so that equality deletes committed after `S0` still apply
    /// to the rewritten rows (Java's `RewriteFiles::dataSequenceNumber`, Spark's
    /// `use-starting-sequence-number`).
    ///
    /// It must not exceed the table's last sequence number nor be below the data sequence number
    /// of any file the snapshot removes. Ignored on format v1 (no sequence numbers).
    #[must_use]
    pub fn with_data_sequence_number(mut self, sequence_number: i64) -> Self {
        self.parts.data_sequence_number = Some(sequence_number);
        self
    }

    /// In a `replace` that removes delete files: add delete files with an explicit data sequence
    /// number, so that they apply to the same data files as the delete files they replace and to
    /// no newer ones (Java's `RewriteFiles::addFile(file, seq)`, with the highest data sequence
    /// number of the replaced delete files).
    ///
    /// It must not exceed the table's last sequence number. Ignored on format v1.
    #[must_use]
    pub fn add_delete_files_with_sequence_number(
        mut self,
        files: impl IntoIterator<Item = DataFile>,
        sequence_number: i64,
    ) -> Self {
        for f in files {
            self.parts
                .delete_sequence_numbers
                .insert(f.file_path().to_string(), sequence_number);
            self.parts.added_deletes.push(f);
        }
        self
    }
}

impl SnapshotProducer<ManifestRewrite> {
    /// A producer for a manifest rewrite on `base` (Java's `RewriteManifests`): a `replace`
    /// snapshot that adds and removes no file, only lists the same live files in other
    /// manifests. Name what it replaces and writes with
    /// [`replace_manifests`](Self::replace_manifests).
    ///
    /// Staging checks that every replaced manifest is listed by `base`'s current snapshot and
    /// that the new manifests hold exactly as many entries as the replaced ones hold live
    /// files (Java's `validateFilesCounts`); manifests not replaced are carried over as they
    /// are, after the new ones. The summary carries the totals over and counts
    /// `manifests-created`, `manifests-kept`, `manifests-replaced` and `entries-processed`.
    pub(crate) fn rewrite_manifests(base: &LoadedTable) -> Self {
        SnapshotProducer {
            parts: Parts::new(base),
            kind: ManifestRewrite::default(),
        }
    }

    /// Drop the manifests at `replaced` (paths as the manifest list names them) and write
    /// `manifests` instead.
    #[must_use]
    pub(crate) fn replace_manifests(
        mut self,
        replaced: impl IntoIterator<Item = impl Into<String>>,
        manifests: impl IntoIterator<Item = NewManifest>,
    ) -> Self {
        self.kind
            .replaced
            .extend(replaced.into_iter().map(Into::into));
        self.kind.new.extend(manifests);
        self
    }
}

impl<K: SnapshotKind> SnapshotProducer<K> {
    /// Add data files.
    #[must_use]
    pub fn add_data_files(mut self, files: impl IntoIterator<Item = DataFile>) -> Self {
        self.parts.added_data.extend(files);
        self
    }

    /// Add delete files (position or equality deletes).
    #[must_use]
    pub fn add_delete_files(mut self, files: impl IntoIterator<Item = DataFile>) -> Self {
        self.parts.added_deletes.extend(files);
        self
    }

    /// Remove whole data files (by path) from the table, as a metadata-only `DELETE` does, or as
    /// the input of a `replace`.
    ///
    /// Position and equality delete files that referenced them stay (they are no longer
    /// applicable, "dangling", until a rewrite removes them), as in Java; deletion vectors of
    /// removed files are removed with them.
    #[must_use]
    pub fn delete_data_files(mut self, paths: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.parts
            .removed_data
            .extend(paths.into_iter().map(Into::into));
        self
    }

    /// Add a property to the snapshot summary (computed figures cannot be overridden).
    #[must_use]
    pub fn set_snapshot_property(
        mut self,
        key: impl Into<String>,
        value: impl Into<String>,
    ) -> Self {
        self.parts.properties.insert(key.into(), value.into());
        self
    }

    /// Lay out moved entries by `clusters`, and carry over unread the manifests of the run
    /// that cannot list a removed file (see [`ManifestClusters`]).
    #[must_use]
    pub fn with_clusters(mut self, clusters: ManifestClusters) -> Self {
        self.parts.clusters = Some(clusters);
        self
    }

    /// Take the snapshot timestamp from `clock`.
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.parts.clock = clock;
        self
    }

    /// The table this producer builds on.
    pub fn base(&self) -> &LoadedTable {
        &self.parts.base
    }

    /// The operation the snapshot will record.
    pub fn operation(&self) -> Result<Operation> {
        self.kind.check(&self.parts)
    }

    /// Stage and commit through `committer`.
    ///
    /// On [`Error::CommitConflict`] (or a commit the catalog rejected as invalid) the manifests
    /// and manifest list written for it are deleted; data and delete files stay with the caller.
    pub async fn commit(self, committer: &dyn CatalogCommitter) -> Result<CommitOutcome> {
        self.stage().await?.commit(committer).await
    }

    /// Write the manifests and manifest list and prepare the catalog changes.
    pub async fn stage(self) -> Result<StagedSnapshot> {
        self.parts.validate()?;
        let operation = self.kind.check(&self.parts)?;
        let mut written = Vec::new();
        let staged = match self.kind.manifest_rewrite() {
            Some(rewrite) => {
                self.parts
                    .stage_manifest_rewrite(rewrite, &mut written)
                    .await
            }
            None => self.parts.stage_files(operation, &mut written).await,
        };
        match staged {
            Ok(staged) => Ok(staged),
            Err(e) => {
                for f in &written {
                    discard(&self.parts.base.storage, f).await;
                }
                Err(e)
            }
        }
    }
}

impl Parts {
    fn validate(&self) -> Result<()> {
        let md = self.base.metadata.as_ref();
        let table = &self.base.id;
        let version = md.format_version();
        if version == FormatVersion::V1 && !self.added_deletes.is_empty() {
            return Err(Error::unsupported(format!(
                "{table}: format v1 tables cannot hold delete files (upgrade the table to v2)"
            )));
        }
        self.validate_removals()?;
        let partition_type = md.default_partition_type();
        let mut paths = HashSet::new();
        for f in self.added_data.iter().chain(&self.added_deletes) {
            // Deletion vectors share their Puffin file: each is named by its blob's offset.
            let key = (
                f.file_path(),
                (f.file_format() == DataFileFormat::Puffin).then(|| f.content_offset()),
            );
            if !paths.insert(key) {
                return Err(Error::validation(format!(
                    "{table}: {} is added twice",
                    f.file_path()
                )));
            }
            if self.removed_data.contains(f.file_path()) {
                return Err(Error::validation(format!(
                    "{table}: {} is both added and removed",
                    f.file_path()
                )));
            }
            let fields = f.partition().fields();
            let compatible = fields.len() == partition_type.fields().len()
                && fields.iter().zip(partition_type.fields()).all(|(v, t)| {
                    match (v, t.field_type.as_primitive_type()) {
                        (None, _) => true,
                        (Some(v), Some(t)) => {
                            v.as_primitive_literal().is_some_and(|l| t.compatible(&l))
                        }
                        (Some(_), None) => false,
                    }
                });
            if !compatible {
                return Err(Error::validation(format!(
                    "{table}: the partition of {} does not match the table's default partition spec",
                    f.file_path()
                )));
            }
        }
        for f in &self.added_data {
            if f.content_type() != DataContentType::Data {
                return Err(Error::validation(format!(
                    "{table}: {} is a delete file; add it with add_delete_files",
                    f.file_path()
                )));
            }
        }
        for f in &self.added_deletes {
            match f.content_type() {
                DataContentType::Data => {
                    return Err(Error::validation(format!(
                        "{table}: {} is a data file; add it with add_data_files",
                        f.file_path()
                    )));
                }
                DataContentType::EqualityDeletes
                    if f.equality_ids().is_none_or(|ids| ids.is_empty()) =>
                {
                    return Err(Error::validation(format!(
                        "{table}: equality delete file {} has no equality field ids",
                        f.file_path()
                    )));
                }
                DataContentType::PositionDeletes
                    if version >= FormatVersion::V3
                        && f.file_format() != DataFileFormat::Puffin =>
                {
                    // The v3 spec replaces position delete files with deletion vectors (Java
                    // refuses them too); Cryo does not write deletion vectors yet.
                    return Err(Error::unsupported(format!(
                        "{table}: format v3 tables take deletion vectors, not position delete files"
                    )));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Checks on what a snapshot removes and on its explicit data sequence number.
    fn validate_removals(&self) -> Result<()> {
        let md = self.base.metadata.as_ref();
        let table = &self.base.id;
        if !self.delete_sequence_numbers.is_empty() {
            if self.removed_deletes.is_empty() {
                return Err(Error::validation(format!(
                    "{table}: explicit data sequence numbers of delete files are only meaningful in a replace that removes delete files"
                )));
            }
            if let Some((path, seq)) = self
                .delete_sequence_numbers
                .iter()
                .find(|(_, seq)| **seq < 0 || **seq > md.last_sequence_number())
            {
                return Err(Error::validation(format!(
                    "{table}: data sequence number {seq} of {path} is outside the table's sequence numbers (0..={})",
                    md.last_sequence_number()
                )));
            }
        }
        if let Some(path) = self.removed_data.intersection(&self.removed_deletes).next() {
            return Err(Error::validation(format!(
                "{table}: {path} is removed both as a data file and as a delete file"
            )));
        }
        if let Some(seq) = self.data_sequence_number
            && (seq < 0 || seq > md.last_sequence_number())
        {
            return Err(Error::validation(format!(
                "{table}: data sequence number {seq} is outside the table's sequence numbers (0..={})",
                md.last_sequence_number()
            )));
        }
        Ok(())
    }
}
