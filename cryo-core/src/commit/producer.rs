//! Cryo's snapshot producer: new manifests, the base snapshot's manifests carried over, a
//! manifest list, a full summary, and the requirements + updates that commit them.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, FormatVersion, MAIN_BRANCH,
    Manifest, ManifestContentType, ManifestFile, ManifestListWriter, Operation, PartitionSpecRef,
    Snapshot, SnapshotReference, SnapshotRetention, TableMetadata,
};
use iceberg::{TableRequirement, TableUpdate};

use super::committer::{CatalogCommitter, TableChanges, discard, metadata_dir};
use super::files::{RowIdInheritance, read_manifest, read_manifest_list, read_manifests};
use super::iceberg_error;
use super::manifest_out::ManifestOut;
use super::summary::{SummaryBuilder, is_deletion_vector};
use crate::catalog::LoadedTable;
use crate::clock::{self, Clock};
use crate::error::{Error, Result};

/// Builds one snapshot on a base table: data files and delete files to add, data files (and, in
/// a `replace`, delete files) to remove.
///
/// | built with | adds data | adds deletes / removes files | operation (as Java's) |
/// |---|---|---|---|
/// | [`new`](Self::new) | yes | no | `append` |
/// | [`new`](Self::new) | no | yes | `delete` (`RowDelta`, `DeleteFiles`) |
/// | [`new`](Self::new) | yes | yes | `overwrite` |
/// | [`replace`](Self::replace) | any | removes data and/or delete files | `replace` (`RewriteFiles`) |
/// | [`rewrite_manifests`](Self::rewrite_manifests) | no | no: the same files in other manifests | `replace` (`RewriteManifests`) |
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
///   one `DELETED`-only manifest per partition spec and content type (DESIGN §4.9: they must be
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
#[derive(Debug, Clone)]
pub struct SnapshotProducer {
    base: LoadedTable,
    added_data: Vec<DataFile>,
    added_deletes: Vec<DataFile>,
    removed_data: BTreeSet<String>,
    removed_deletes: BTreeSet<String>,
    replace: bool,
    data_sequence_number: Option<i64>,
    /// Explicit data sequence numbers of added delete files, by path (a position-delete rewrite).
    delete_sequence_numbers: HashMap<String, i64>,
    /// Set for a manifest rewrite: manifests replaced and the manifests written in their place.
    manifest_rewrite: Option<ManifestRewrite>,
    /// A multi-snapshot run's layout of the files it removes later (see [`ManifestClusters`]).
    clusters: Option<ManifestClusters>,
    properties: HashMap<String, String>,
    clock: Arc<dyn Clock>,
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

/// What a manifest rewrite replaces and writes (see [`SnapshotProducer::rewrite_manifests`]).
#[derive(Debug, Clone, Default)]
struct ManifestRewrite {
    replaced: BTreeSet<String>,
    new: Vec<NewManifest>,
}

/// A live manifest entry as a rewritten manifest carries it: status `EXISTING`, with the
/// snapshot id and the data and file sequence numbers it was committed with (and, on v3, the
/// `first_row_id` it inherited, made explicit).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ExistingEntry {
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
pub struct NewManifest {
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
pub const MANIFESTS_CREATED: &str = "manifests-created";
/// Manifests of the parent carried over unchanged.
pub const MANIFESTS_KEPT: &str = "manifests-kept";
/// Manifests of the parent replaced by the new ones.
pub const MANIFESTS_REPLACED: &str = "manifests-replaced";
/// Live entries moved from the replaced manifests into the new ones.
pub const ENTRIES_PROCESSED: &str = "entries-processed";

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

impl SnapshotProducer {
    /// A producer on `base` (the table as loaded; its current snapshot is the parent).
    pub fn new(base: &LoadedTable) -> Self {
        Self {
            base: base.clone(),
            added_data: Vec::new(),
            added_deletes: Vec::new(),
            removed_data: BTreeSet::new(),
            removed_deletes: BTreeSet::new(),
            replace: false,
            data_sequence_number: None,
            delete_sequence_numbers: HashMap::new(),
            manifest_rewrite: None,
            clusters: None,
            properties: HashMap::new(),
            clock: clock::system(),
        }
    }

    /// A producer for a `replace` snapshot on `base`: files are rewritten, the table's rows do not
    /// change (Java's `RewriteFiles`, what compaction commits).
    ///
    /// It must remove at least one file; it may add delete files only when it also removes
    /// some (a position-delete rewrite). For a rewrite planned on an older snapshot `S0` and
    /// committed on a newer head, give the new data files `S0`'s sequence number with
    /// [`with_data_sequence_number`](Self::with_data_sequence_number), after checking the head
    /// with [`validate_rewrite`](super::validate_rewrite).
    pub fn replace(base: &LoadedTable) -> Self {
        Self {
            replace: true,
            ..Self::new(base)
        }
    }

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
    pub fn rewrite_manifests(base: &LoadedTable) -> Self {
        Self {
            replace: true,
            manifest_rewrite: Some(ManifestRewrite::default()),
            ..Self::new(base)
        }
    }

    /// In a [manifest rewrite](Self::rewrite_manifests): drop the manifests at `replaced` (paths
    /// as the manifest list names them) and write `manifests` instead.
    #[must_use]
    pub fn replace_manifests(
        mut self,
        replaced: impl IntoIterator<Item = impl Into<String>>,
        manifests: impl IntoIterator<Item = NewManifest>,
    ) -> Self {
        let rewrite = self
            .manifest_rewrite
            .get_or_insert_with(ManifestRewrite::default);
        rewrite
            .replaced
            .extend(replaced.into_iter().map(Into::into));
        rewrite.new.extend(manifests);
        self
    }

    /// Add data files.
    #[must_use]
    pub fn add_data_files(mut self, files: impl IntoIterator<Item = DataFile>) -> Self {
        self.added_data.extend(files);
        self
    }

    /// Add delete files (position or equality deletes).
    #[must_use]
    pub fn add_delete_files(mut self, files: impl IntoIterator<Item = DataFile>) -> Self {
        self.added_deletes.extend(files);
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
        self.removed_data.extend(paths.into_iter().map(Into::into));
        self
    }

    /// Remove delete files (position deletes, equality deletes; by path) — only in a
    /// [`replace`](Self::replace), since removing a delete file outside a rewrite would bring
    /// deleted rows back.
    ///
    /// A deletion vector's Puffin file may hold the vectors of several data files: naming it
    /// removes only the vectors whose data file this snapshot removes (those go anyway).
    #[must_use]
    pub fn remove_delete_files(
        mut self,
        paths: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.removed_deletes
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
        self.data_sequence_number = Some(sequence_number);
        self
    }

    /// In a [`replace`](Self::replace) that removes delete files: add delete files with an
    /// explicit data sequence number, so that they apply to the same data files as the delete
    /// files they replace and to no newer ones (Java's `RewriteFiles::addFile(file, seq)`, with
    /// the highest data sequence number of the replaced delete files).
    ///
    /// It must not exceed the table's last sequence number. Ignored on format v1.
    #[must_use]
    pub fn add_delete_files_with_sequence_number(
        mut self,
        files: impl IntoIterator<Item = DataFile>,
        sequence_number: i64,
    ) -> Self {
        for f in files {
            self.delete_sequence_numbers
                .insert(f.file_path().to_string(), sequence_number);
            self.added_deletes.push(f);
        }
        self
    }

    /// Add a property to the snapshot summary (computed figures cannot be overridden).
    #[must_use]
    pub fn set_snapshot_property(
        mut self,
        key: impl Into<String>,
        value: impl Into<String>,
    ) -> Self {
        self.properties.insert(key.into(), value.into());
        self
    }

    /// Lay out moved entries by `clusters`, and carry over unread the manifests of the run
    /// that cannot list a removed file (see [`ManifestClusters`]).
    #[must_use]
    pub fn with_clusters(mut self, clusters: ManifestClusters) -> Self {
        self.clusters = Some(clusters);
        self
    }

    /// Take the snapshot timestamp from `clock`.
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The table this producer builds on.
    pub fn base(&self) -> &LoadedTable {
        &self.base
    }

    /// The operation the snapshot will record.
    pub fn operation(&self) -> Result<Operation> {
        if let Some(rewrite) = &self.manifest_rewrite {
            if !(self.added_data.is_empty()
                && self.added_deletes.is_empty()
                && self.removed_data.is_empty()
                && self.removed_deletes.is_empty())
            {
                return Err(Error::validation(format!(
                    "{}: a manifest rewrite adds and removes no files",
                    self.base.id
                )));
            }
            if rewrite.replaced.is_empty() {
                return Err(Error::validation(format!(
                    "{}: a manifest rewrite must replace at least one manifest",
                    self.base.id
                )));
            }
            return Ok(Operation::Replace);
        }
        if self.replace {
            if self.removed_data.is_empty() && self.removed_deletes.is_empty() {
                return Err(Error::validation(format!(
                    "{}: a replace must remove at least one data or delete file",
                    self.base.id
                )));
            }
            return Ok(Operation::Replace);
        }
        let adds_data = !self.added_data.is_empty();
        let deletes = !self.added_deletes.is_empty() || !self.removed_data.is_empty();
        match (adds_data, deletes) {
            (true, false) => Ok(Operation::Append),
            (false, true) => Ok(Operation::Delete),
            (true, true) => Ok(Operation::Overwrite),
            (false, false) => Err(Error::validation(format!(
                "{}: nothing to commit (no files added or removed)",
                self.base.id
            ))),
        }
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
        self.validate()?;
        let operation = self.operation()?;
        let mut written = Vec::new();
        match self.stage_inner(operation, &mut written).await {
            Ok(staged) => Ok(staged),
            Err(e) => {
                for f in &written {
                    discard(&self.base.storage, f).await;
                }
                Err(e)
            }
        }
    }

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
            if !paths.insert(f.file_path()) {
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
        if !self.replace {
            if !self.removed_deletes.is_empty() {
                return Err(Error::validation(format!(
                    "{table}: removing delete files brings deleted rows back unless the rows are rewritten; \
                     remove them in a replace (SnapshotProducer::replace)"
                )));
            }
            if self.data_sequence_number.is_some() {
                return Err(Error::validation(format!(
                    "{table}: an explicit data sequence number is only meaningful for the rewritten files of a replace"
                )));
            }
        } else if !self.added_deletes.is_empty() && self.removed_deletes.is_empty() {
            // Java's rule: a rewrite that adds delete files must be rewriting delete files;
            // otherwise the new deletes would change the table's rows.
            return Err(Error::validation(format!(
                "{table}: a replace may add delete files only when it removes delete files"
            )));
        }
        if !self.delete_sequence_numbers.is_empty() {
            if !self.replace || self.removed_deletes.is_empty() {
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

    async fn stage_inner(
        &self,
        operation: Operation,
        written: &mut Vec<String>,
    ) -> Result<StagedSnapshot> {
        if let Some(rewrite) = &self.manifest_rewrite {
            return self.stage_manifest_rewrite(rewrite, written).await;
        }
        let md = self.base.metadata.as_ref();
        let table = self.base.id.to_string();
        let parent = md.current_snapshot();
        let parent_id = parent.map(|s| s.snapshot_id());
        let mut names = ManifestNames {
            snapshot_id: new_snapshot_id(md),
            commit_uuid: uuid::Uuid::new_v4(),
            next: 0,
        };
        let default_spec = Arc::clone(md.default_partition_spec());
        let mut summary = SummaryBuilder::new(Arc::clone(md.current_schema()), md.properties());
        for f in self.added_data.iter().chain(&self.added_deletes) {
            summary.added(f, &default_spec);
        }

        // New manifests first, then rewritten ones, then the base's as they were (Java's order).
        let data_seq = match (md.format_version(), self.data_sequence_number) {
            (FormatVersion::V1, _) | (_, None) => -1,
            (_, Some(seq)) => seq,
        };
        let mut manifests = Vec::new();
        // Manifests written, with the cluster their live entries belong to (added files: none).
        let mut clusters = Vec::new();
        for (content, files, seq) in [
            (ManifestContentType::Data, &self.added_data, data_seq),
            (ManifestContentType::Deletes, &self.added_deletes, -1),
        ] {
            if !files.is_empty() {
                let added = self
                    .write_added_manifest(&mut names, content, files, seq, written)
                    .await?;
                clusters.push((added.manifest_path.clone(), None));
                manifests.push(added);
            }
        }
        let base_manifests = match parent {
            Some(s) => read_manifest_list(&self.base, s).await?,
            None => Vec::new(),
        };
        let removals = self.plan_removals(base_manifests, &mut summary).await?;
        if let (Some(seq), Some(max)) = (self.data_sequence_number, removals.max_removed_data_seq)
            && md.format_version() > FormatVersion::V1
            && seq < max
        {
            // Equality deletes between `seq` and `max` would apply to the rewritten rows but not
            // to the rows they replace: rows would disappear.
            return Err(Error::validation(format!(
                "{table}: data sequence number {seq} is below {max}, the data sequence number of a removed file"
            )));
        }
        let removed_delete_files = removals.removed_delete_files;
        let carried = self
            .write_removals(&mut names, removals, &mut manifests, &mut clusters, written)
            .await?;
        manifests.extend(carried);

        let sequence_number = md.next_sequence_number();
        let list_path = format!(
            "{}/snap-{}-1-{}.avro",
            metadata_dir(md),
            names.snapshot_id,
            names.commit_uuid
        );
        written.push(list_path.clone());
        let row_range = self
            .write_manifest_list(&list_path, names.snapshot_id, sequence_number, manifests)
            .await?;

        let summary = summary.build(operation, parent.map(|s| s.summary()), &self.properties);
        let builder = Snapshot::builder()
            .with_snapshot_id(names.snapshot_id)
            .with_parent_snapshot_id(parent_id)
            .with_sequence_number(sequence_number)
            .with_timestamp_ms(self.clock.now_ms())
            .with_manifest_list(list_path)
            .with_summary(summary)
            .with_schema_id(md.current_schema_id());
        let snapshot = match row_range {
            Some((first_row_id, added_rows)) => {
                builder.with_row_range(first_row_id, added_rows).build()
            }
            None => builder.build(),
        };

        let changes = commit_changes(&table, md, &snapshot)?;
        Ok(StagedSnapshot {
            snapshot,
            changes,
            written_files: written.clone(),
            added_data_files: self.added_data.len(),
            added_delete_files: self.added_deletes.len(),
            removed_data_files: self.removed_data.len(),
            removed_delete_files,
            manifest_clusters: clusters,
            base: self.base.clone(),
        })
    }

    /// One manifest listing `files` as added, in the default spec, with data sequence number
    /// `seq` (negative: inherited from the snapshot).
    async fn write_added_manifest(
        &self,
        names: &mut ManifestNames,
        content: ManifestContentType,
        files: &[DataFile],
        seq: i64,
        written: &mut Vec<String>,
    ) -> Result<ManifestFile> {
        let table = self.base.id.to_string();
        let (path, mut writer) = self.new_manifest_writer(names, content, None)?;
        written.push(path);
        for f in files {
            // A negative sequence number leaves it null: inherited from this snapshot, so
            // delete files added here apply to older data only. The file sequence number is
            // always this snapshot's.
            let seq = match content {
                ManifestContentType::Deletes
                    if self.base.metadata.format_version() > FormatVersion::V1 =>
                {
                    self.delete_sequence_numbers
                        .get(f.file_path())
                        .copied()
                        .unwrap_or(seq)
                }
                _ => seq,
            };
            writer
                .add_file(f.clone(), seq)
                .map_err(|e| iceberg_error(&table, "add file to manifest", e))?;
        }
        writer
            .write_manifest_file()
            .await
            .map_err(|e| iceberg_error(&table, "write manifest", e))
    }

    /// Whether a live entry of a manifest with `content` is removed by this snapshot.
    fn removes(&self, content: ManifestContentType, file: &DataFile) -> bool {
        match content {
            ManifestContentType::Data => self.removed_data.contains(file.file_path()),
            ManifestContentType::Deletes if is_deletion_vector(file) => file
                .referenced_data_file()
                .is_some_and(|r| self.removed_data.contains(&r)),
            ManifestContentType::Deletes => self.removed_deletes.contains(file.file_path()),
        }
    }

    /// Read the base manifests that may list a removed file and sort their live entries into
    /// kept and removed; every other live manifest is carried over as it is.
    async fn plan_removals(
        &self,
        base_manifests: Vec<ManifestFile>,
        summary: &mut SummaryBuilder,
    ) -> Result<Removals> {
        let md = self.base.metadata.as_ref();
        let table = self.base.id.to_string();
        let read_data = !self.removed_data.is_empty();
        // Deletion vectors go with their data files, so delete manifests are read whenever a v3
        // snapshot removes data files.
        let read_deletes = !self.removed_deletes.is_empty()
            || (read_data && md.format_version() >= FormatVersion::V3);
        let mut out = Removals::default();
        let mut to_read = Vec::new();
        // Clusters of the files this snapshot removes: a manifest of this run listing another
        // cluster's entries only cannot list them.
        let removing: Option<BTreeSet<Option<usize>>> = self.clusters.as_ref().map(|c| {
            self.removed_data
                .iter()
                .chain(&self.removed_deletes)
                .map(|p| c.cluster_of.get(p).copied())
                .collect()
        });
        for mf in base_manifests {
            if !has_live_files(&mf) {
                // A DELETED-only manifest of an earlier commit: that commit's snapshot keeps
                // listing it for expiry; later snapshots need not (Java drops them too).
                continue;
            }
            if let (Some(c), Some(removing)) = (&self.clusters, &removing)
                && c.written
                    .get(&mf.manifest_path)
                    .is_some_and(|cluster| !removing.contains(cluster))
            {
                out.carried.push(mf);
                continue;
            }
            let read = match mf.content {
                ManifestContentType::Data => read_data,
                ManifestContentType::Deletes => read_deletes,
            };
            if read {
                to_read.push(mf);
            } else {
                out.carried.push(mf);
            }
        }
        let loaded = read_manifests(&self.base, to_read).await?;

        for (mf, manifest) in loaded {
            self.split_manifest(mf, &manifest, summary, &mut out)?;
        }
        let snapshot = md.current_snapshot_id();
        for (wanted, found, what) in [
            (&self.removed_data, &out.found_data, "data"),
            (&self.removed_deletes, &out.found_deletes, "delete"),
        ] {
            // Deletion vectors removed with their data files may be in `found` unasked.
            let missing: Vec<&String> = wanted.difference(found).take(5).collect();
            if !missing.is_empty() {
                return Err(Error::validation(format!(
                    "{table}: cannot remove files that are not live {what} files of snapshot {snapshot:?}: {missing:?}"
                )));
            }
        }
        Ok(out)
    }

    /// Sort the live entries of one base manifest into kept and removed (or carry the manifest
    /// over when it lists nothing this snapshot removes).
    fn split_manifest(
        &self,
        mf: ManifestFile,
        manifest: &Manifest,
        summary: &mut SummaryBuilder,
        out: &mut Removals,
    ) -> Result<()> {
        let table = self.base.id.to_string();
        if !manifest
            .entries()
            .iter()
            .any(|e| e.is_alive() && self.removes(mf.content, e.data_file()))
        {
            out.carried.push(mf);
            return Ok(());
        }
        let spec = self
            .base
            .metadata
            .partition_spec_by_id(mf.partition_spec_id)
            .cloned()
            .ok_or_else(|| {
                Error::metadata(
                    &table,
                    &mf.manifest_path,
                    format!(
                        "manifest uses unknown partition spec {}",
                        mf.partition_spec_id
                    ),
                )
            })?;
        let mut row_ids = RowIdInheritance::new(&mf);
        let mut kept = Vec::new();
        for entry in manifest.entries() {
            // Row ids are inherited in manifest order over every entry without one, the
            // DELETED entries this rewrite drops included.
            let first_row_id = row_ids.next(entry.data_file());
            if !entry.is_alive() {
                // DELETED entries of earlier snapshots are dropped when a manifest is
                // rewritten; the snapshots that deleted them still list them.
                continue;
            }
            let seq = entry.sequence_number().ok_or_else(|| {
                Error::metadata(
                    &table,
                    &mf.manifest_path,
                    "live entry without a sequence number",
                )
            })?;
            // Writers before Java 1.0 left file sequence numbers null; the data sequence
            // number is the best value the spec allows in their place.
            let file_seq = entry.file_sequence_number.or(Some(seq));
            let mut file = entry.data_file().clone();
            if let Some(id) = first_row_id {
                // The spec asks rewritten EXISTING and DELETED entries to carry the row id
                // they inherited, so their rows keep their ids.
                file = with_first_row_id(&table, &file, mf.partition_spec_id, id)?;
            }
            let moved = MovedEntry {
                snapshot_id: entry.snapshot_id().unwrap_or(mf.added_snapshot_id),
                seq,
                file_seq,
                file,
            };
            if !self.removes(mf.content, &moved.file) {
                kept.push(moved);
                continue;
            }
            summary.removed(&moved.file, &spec);
            let path = moved.file.file_path().to_string();
            if mf.content == ManifestContentType::Data {
                out.found_data.insert(path);
                out.max_removed_data_seq = out.max_removed_data_seq.max(Some(seq));
            } else {
                out.found_deletes.insert(path);
                out.removed_delete_files += 1;
            }
            out.removed
                .entry((content_key(mf.content), mf.partition_spec_id))
                .or_insert_with(|| (Arc::clone(&spec), Vec::new()))
                .1
                .push(moved);
        }
        // The average entry size of this manifest estimates the size of the merged ones.
        let entry_bytes = u64::try_from(mf.manifest_length).unwrap_or(0)
            / (manifest.entries().len() as u64).max(1);
        out.touched.push(TouchedManifest {
            content: mf.content,
            spec,
            kept,
            entry_bytes,
        });
        Ok(())
    }

    /// Write the kept entries of the touched manifests (`EXISTING`), merged per content, spec
    /// (and cluster, see [`ManifestClusters`]) into manifests near
    /// `commit.manifest.target-size-bytes`, and the removed entries
    /// (`DELETED`, one manifest per spec and content) into `manifests`; return the manifests to
    /// carry over unchanged.
    ///
    /// Merging keeps the metadata lean (DESIGN §4.9): a rewrite touching every manifest of a
    /// table written by many small appends leaves a few manifests behind, not one per append,
    /// and the next commit of the same run reads those few.
    async fn write_removals(
        &self,
        names: &mut ManifestNames,
        removals: Removals,
        manifests: &mut Vec<ManifestFile>,
        clusters: &mut Vec<(String, Option<usize>)>,
        written: &mut Vec<String>,
    ) -> Result<Vec<ManifestFile>> {
        let table = self.base.id.to_string();
        let target = self
            .base
            .metadata
            .properties()
            .get("commit.manifest.target-size-bytes")
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|v| *v > 0)
            .unwrap_or(DEFAULT_MANIFEST_TARGET_BYTES);
        let mut merged: BTreeMap<(u8, i32, Option<usize>), MergedEntries> = BTreeMap::new();
        for touched in removals.touched {
            let bytes = touched.entry_bytes;
            for e in touched.kept {
                let cluster = self
                    .clusters
                    .as_ref()
                    .and_then(|c| c.of(touched.content, &e.file));
                merged
                    .entry((
                        content_key(touched.content),
                        touched.spec.spec_id(),
                        cluster,
                    ))
                    .or_insert_with(|| (touched.content, Arc::clone(&touched.spec), Vec::new()))
                    .2
                    .push((bytes, e));
            }
        }
        for ((_, _, cluster), (content, spec, entries)) in merged {
            let mut writer: Option<ManifestOut> = None;
            let mut estimate = 0u64;
            for (bytes, e) in entries {
                if writer.is_some() && estimate + bytes > target {
                    if let Some(w) = writer.take() {
                        finish_manifest(&table, w, cluster, manifests, clusters).await?;
                    }
                    estimate = 0;
                }
                if writer.is_none() {
                    let (path, w) = self.new_manifest_writer(names, content, Some(&spec))?;
                    written.push(path);
                    writer = Some(w);
                }
                let Some(w) = writer.as_mut() else {
                    continue;
                };
                w.add_existing_file(e.file, e.snapshot_id, e.seq, e.file_seq)
                    .map_err(|e| iceberg_error(&table, "rewrite manifest", e))?;
                estimate += bytes;
            }
            if let Some(w) = writer {
                finish_manifest(&table, w, cluster, manifests, clusters).await?;
            }
        }
        for ((content, _), (spec, entries)) in removals.removed {
            let content = if content == 0 {
                ManifestContentType::Data
            } else {
                ManifestContentType::Deletes
            };
            let (path, mut writer) = self.new_manifest_writer(names, content, Some(&spec))?;
            written.push(path);
            for e in entries {
                writer
                    .add_delete_file(e.file, e.seq, e.file_seq)
                    .map_err(|e| iceberg_error(&table, "rewrite manifest", e))?;
            }
            // DELETED entries only: no later snapshot reads it.
            finish_manifest(&table, writer, None, manifests, clusters).await?;
        }
        Ok(removals.carried)
    }

    /// Write the manifest list; for v3 return the snapshot's row range `(first row id, rows)`.
    async fn write_manifest_list(
        &self,
        path: &str,
        snapshot_id: i64,
        sequence_number: i64,
        manifests: Vec<ManifestFile>,
    ) -> Result<Option<(u64, u64)>> {
        let md = self.base.metadata.as_ref();
        let table = self.base.id.to_string();
        let err = |e| iceberg_error(&table, "write manifest list", e);
        let sink = self
            .base
            .file_io
            .new_output(path)
            .map_err(err)?
            .writer()
            .await
            .map_err(err)?;
        let parent_id = md.current_snapshot_id();
        let first_row_id = md.next_row_id();
        let mut list = match md.format_version() {
            FormatVersion::V1 => ManifestListWriter::v1(sink, snapshot_id, parent_id),
            FormatVersion::V2 => {
                ManifestListWriter::v2(sink, snapshot_id, parent_id, sequence_number)
            }
            // v3 row lineage: rows of new data manifests get ids from the table's next row id.
            FormatVersion::V3 => ManifestListWriter::v3(
                sink,
                snapshot_id,
                parent_id,
                sequence_number,
                Some(first_row_id),
            ),
        };
        list.add_manifests(manifests.into_iter()).map_err(err)?;
        let next_row_id = list.next_row_id();
        list.close().await.map_err(err)?;
        Ok(next_row_id.map(|next| (first_row_id, next - first_row_id)))
    }

    /// Live entries of `manifests`, from their counts (or their entries, when a writer left the
    /// counts out).
    async fn live_entry_count(&self, manifests: &[ManifestFile]) -> Result<u64> {
        let mut live: u64 = 0;
        for mf in manifests {
            live += match (mf.added_files_count, mf.existing_files_count) {
                (Some(a), Some(e)) => u64::from(a) + u64::from(e),
                _ => read_manifest(&self.base, mf)
                    .await?
                    .entries()
                    .iter()
                    .filter(|e| e.is_alive())
                    .count() as u64,
            };
        }
        Ok(live)
    }

    /// Write the manifests of a manifest rewrite, their entries as `EXISTING`.
    async fn write_new_manifests(
        &self,
        names: &mut ManifestNames,
        new: &[NewManifest],
        written: &mut Vec<String>,
    ) -> Result<Vec<ManifestFile>> {
        let md = self.base.metadata.as_ref();
        let table = self.base.id.to_string();
        let mut manifests = Vec::new();
        for m in new.iter().filter(|m| !m.entries.is_empty()) {
            let spec = md.partition_spec_by_id(m.spec_id).cloned().ok_or_else(|| {
                Error::validation(format!(
                    "{table}: a new manifest uses unknown partition spec {}",
                    m.spec_id
                ))
            })?;
            let (path, mut writer) = self.new_manifest_writer(names, m.content, Some(&spec))?;
            written.push(path);
            for e in &m.entries {
                let fits = match m.content {
                    ManifestContentType::Data => e.file.content_type() == DataContentType::Data,
                    ManifestContentType::Deletes => e.file.content_type() != DataContentType::Data,
                };
                if !fits {
                    return Err(Error::validation(format!(
                        "{table}: {} cannot go into a {} manifest (data and delete manifests never mix)",
                        e.file.file_path(),
                        m.content
                    )));
                }
                writer
                    .add_existing_file(
                        e.file.clone(),
                        e.snapshot_id,
                        e.sequence_number,
                        Some(e.file_sequence_number),
                    )
                    .map_err(|err| iceberg_error(&table, "rewrite manifest", err))?;
            }
            manifests.push(
                writer
                    .write_manifest_file()
                    .await
                    .map_err(|e| iceberg_error(&table, "write manifest", e))?,
            );
        }
        Ok(manifests)
    }

    /// Stage a manifest rewrite: the new manifests first, then the base's other manifests as
    /// they are; no file is added or removed.
    async fn stage_manifest_rewrite(
        &self,
        rewrite: &ManifestRewrite,
        written: &mut Vec<String>,
    ) -> Result<StagedSnapshot> {
        let md = self.base.metadata.as_ref();
        let table = self.base.id.to_string();
        let Some(parent) = md.current_snapshot() else {
            return Err(Error::validation(format!(
                "{table}: a table without snapshots has no manifests to rewrite"
            )));
        };
        let base_manifests = read_manifest_list(&self.base, parent).await?;
        let (replaced, kept): (Vec<ManifestFile>, Vec<ManifestFile>) = base_manifests
            .into_iter()
            .partition(|m| rewrite.replaced.contains(&m.manifest_path));
        if replaced.len() != rewrite.replaced.len() {
            let listed: HashSet<&str> = replaced.iter().map(|m| m.manifest_path.as_str()).collect();
            let missing: Vec<&String> = rewrite
                .replaced
                .iter()
                .filter(|p| !listed.contains(p.as_str()))
                .take(5)
                .collect();
            return Err(Error::validation(format!(
                "{table}: cannot replace manifests snapshot {} does not list: {missing:?}",
                parent.snapshot_id()
            )));
        }
        let live_replaced = self.live_entry_count(&replaced).await?;
        let entries: u64 = rewrite.new.iter().map(|m| m.entries.len() as u64).sum();
        if entries != live_replaced {
            return Err(Error::validation(format!(
                "{table}: replaced and created manifests must have the same number of live files: {entries} (new), {live_replaced} (replaced)"
            )));
        }
        let mut names = ManifestNames {
            snapshot_id: new_snapshot_id(md),
            commit_uuid: uuid::Uuid::new_v4(),
            next: 0,
        };
        let mut manifests = self
            .write_new_manifests(&mut names, &rewrite.new, written)
            .await?;
        let created = manifests.len();
        let kept_count = kept.len();
        manifests.extend(kept);

        let sequence_number = md.next_sequence_number();
        let list_path = format!(
            "{}/snap-{}-1-{}.avro",
            metadata_dir(md),
            names.snapshot_id,
            names.commit_uuid
        );
        written.push(list_path.clone());
        let row_range = self
            .write_manifest_list(&list_path, names.snapshot_id, sequence_number, manifests)
            .await?;

        let mut properties = self.properties.clone();
        for (key, value) in [
            (MANIFESTS_CREATED, created as u64),
            (MANIFESTS_KEPT, kept_count as u64),
            (MANIFESTS_REPLACED, replaced.len() as u64),
            (ENTRIES_PROCESSED, entries),
        ] {
            properties.insert(key.to_string(), value.to_string());
        }
        let summary = SummaryBuilder::new(Arc::clone(md.current_schema()), md.properties()).build(
            Operation::Replace,
            Some(parent.summary()),
            &properties,
        );
        let builder = Snapshot::builder()
            .with_snapshot_id(names.snapshot_id)
            .with_parent_snapshot_id(Some(parent.snapshot_id()))
            .with_sequence_number(sequence_number)
            .with_timestamp_ms(self.clock.now_ms())
            .with_manifest_list(list_path)
            .with_summary(summary)
            .with_schema_id(md.current_schema_id());
        let snapshot = match row_range {
            // No data manifest is new with added rows: the range is empty, but v3 wants one.
            Some((first_row_id, added_rows)) => {
                builder.with_row_range(first_row_id, added_rows).build()
            }
            None => builder.build(),
        };
        let changes = commit_changes(&table, md, &snapshot)?;
        Ok(StagedSnapshot {
            snapshot,
            changes,
            written_files: written.clone(),
            added_data_files: 0,
            added_delete_files: 0,
            removed_data_files: 0,
            removed_delete_files: 0,
            manifest_clusters: Vec::new(),
            base: self.base.clone(),
        })
    }

    fn new_manifest_writer(
        &self,
        names: &mut ManifestNames,
        content: ManifestContentType,
        spec: Option<&PartitionSpecRef>,
    ) -> Result<(String, ManifestOut)> {
        let md = self.base.metadata.as_ref();
        let table = self.base.id.to_string();
        // Java's naming: <commit uuid>-m<n>.avro.
        let path = format!(
            "{}/{}-m{}.avro",
            metadata_dir(md),
            names.commit_uuid,
            names.next
        );
        names.next += 1;
        let output = self
            .base
            .file_io
            .new_output(&path)
            .map_err(|e| iceberg_error(&table, "create manifest", e))?;
        let spec = spec.unwrap_or_else(|| md.default_partition_spec());
        Ok((
            path,
            manifest_writer(md, output, names.snapshot_id, content, spec),
        ))
    }
}

/// A manifest writer of the table's format version for `content` in `spec`.
fn manifest_writer(
    md: &TableMetadata,
    output: iceberg::io::OutputFile,
    snapshot_id: i64,
    content: ManifestContentType,
    spec: &PartitionSpecRef,
) -> ManifestOut {
    ManifestOut::new(
        output,
        Some(snapshot_id),
        Arc::clone(md.current_schema()),
        spec.as_ref().clone(),
        md.format_version(),
        content,
    )
}

/// The live entries of manifest `mf` (read as `manifest`) as a rewritten manifest must carry
/// them: `EXISTING`, with their snapshot id, data and file sequence numbers, and on v3 the
/// `first_row_id` they inherit made explicit. `DELETED` entries are left out.
pub fn existing_entries(
    table: &LoadedTable,
    mf: &ManifestFile,
    manifest: &Manifest,
) -> Result<Vec<ExistingEntry>> {
    let name = table.id.to_string();
    let mut row_ids = RowIdInheritance::new(mf);
    let mut out = Vec::new();
    for entry in manifest.entries() {
        // Row ids are inherited in manifest order over every entry without one, DELETED
        // entries included.
        let first_row_id = row_ids.next(entry.data_file());
        if !entry.is_alive() {
            continue;
        }
        let seq = entry.sequence_number().ok_or_else(|| {
            Error::metadata(
                &name,
                &mf.manifest_path,
                "live entry without a sequence number",
            )
        })?;
        let mut file = entry.data_file().clone();
        if let Some(id) = first_row_id {
            file = with_first_row_id(&name, &file, mf.partition_spec_id, id)?;
        }
        out.push(ExistingEntry {
            file,
            snapshot_id: entry.snapshot_id().unwrap_or(mf.added_snapshot_id),
            sequence_number: seq,
            // Writers before Java 1.0 left file sequence numbers null; the data sequence
            // number is the best value the spec allows in their place.
            file_sequence_number: entry.file_sequence_number.unwrap_or(seq),
        });
    }
    Ok(out)
}

/// How many bytes manifests of `content` in spec `spec_id` take when Cryo writes them:
/// `(fixed, per entry)`, measured by encoding `sample` (and its first entry alone) in memory —
/// nothing is written to the table's storage. Manifests of other writers are often compressed,
/// so their sizes do not predict Cryo's (upstream's writer does not compress).
pub(crate) async fn manifest_size_model(
    table: &LoadedTable,
    content: ManifestContentType,
    spec_id: i32,
    sample: &[ExistingEntry],
) -> Result<(u64, u64)> {
    let md = table.metadata.as_ref();
    let name = table.id.to_string();
    let spec = md.partition_spec_by_id(spec_id).cloned().ok_or_else(|| {
        Error::metadata(
            &name,
            "<partition-specs>",
            format!("unknown partition spec {spec_id}"),
        )
    })?;
    let Some(first) = sample.first() else {
        return Ok((0, 0));
    };
    let mut sizes = Vec::new();
    for entries in [std::slice::from_ref(first), sample] {
        let path = format!("memory://cryo-sizing-{}/m.avro", uuid::Uuid::new_v4());
        let output = table
            .file_io
            .new_output(&path)
            .map_err(|e| iceberg_error(&name, "size a manifest", e))?;
        let mut writer = manifest_writer(md, output, 0, content, &spec);
        for e in entries {
            writer
                .add_existing_file(
                    e.file.clone(),
                    e.snapshot_id,
                    e.sequence_number,
                    Some(e.file_sequence_number),
                )
                .map_err(|err| iceberg_error(&name, "size a manifest", err))?;
        }
        let written = writer.write_manifest_file().await;
        discard(&table.storage, &path).await;
        let mf = written.map_err(|e| iceberg_error(&name, "size a manifest", e))?;
        sizes.push(mf.manifest_length.max(0) as u64);
        if sample.len() == 1 {
            break;
        }
    }
    Ok(match sizes.as_slice() {
        [one, many] => {
            let per = many.saturating_sub(*one) / (sample.len() as u64 - 1);
            (one.saturating_sub(per), per.max(1))
        }
        [one] => (one / 2, one - one / 2),
        _ => (0, 1),
    })
}

/// Kept entries of touched manifests of one content and spec, each with its estimated bytes.
type MergedEntries = (
    ManifestContentType,
    PartitionSpecRef,
    Vec<(u64, MovedEntry)>,
);

/// `commit.manifest.target-size-bytes` when the table does not set it (Java's default).
const DEFAULT_MANIFEST_TARGET_BYTES: u64 = 8 << 20;

/// A live entry moved into a rewritten manifest, with what it keeps from the original.
struct MovedEntry {
    file: DataFile,
    snapshot_id: i64,
    seq: i64,
    file_seq: Option<i64>,
}

/// A base manifest that lists a removed file: its spec and the entries it keeps.
struct TouchedManifest {
    content: ManifestContentType,
    spec: PartitionSpecRef,
    kept: Vec<MovedEntry>,
    /// Average bytes per entry of the manifest these entries come from.
    entry_bytes: u64,
}

/// What removing files does to the base snapshot's manifests.
#[derive(Default)]
struct Removals {
    /// Manifests carried over unchanged.
    carried: Vec<ManifestFile>,
    /// Manifests to rewrite without their removed entries, in base order.
    touched: Vec<TouchedManifest>,
    /// Removed entries by (content, spec id), written as one DELETED-only manifest each.
    removed: BTreeMap<(u8, i32), (PartitionSpecRef, Vec<MovedEntry>)>,
    /// The highest data sequence number among removed data files.
    max_removed_data_seq: Option<i64>,
    /// Delete-file entries removed.
    removed_delete_files: usize,
    /// Paths of the data files found and removed.
    found_data: BTreeSet<String>,
    /// Paths of the delete files found and removed.
    found_deletes: BTreeSet<String>,
}

/// Write `writer`'s manifest and list it, with the cluster of its live entries.
async fn finish_manifest(
    table: &str,
    writer: ManifestOut,
    cluster: Option<usize>,
    manifests: &mut Vec<ManifestFile>,
    clusters: &mut Vec<(String, Option<usize>)>,
) -> Result<()> {
    let m = writer
        .write_manifest_file()
        .await
        .map_err(|e| iceberg_error(table, "write manifest", e))?;
    clusters.push((m.manifest_path.clone(), cluster));
    manifests.push(m);
    Ok(())
}

/// Sort key of a manifest content type (data manifests first, as Java lists them).
fn content_key(content: ManifestContentType) -> u8 {
    match content {
        ManifestContentType::Data => 0,
        ManifestContentType::Deletes => 1,
    }
}

/// Whether a manifest may list live files (Java's `hasAddedFiles() || hasExistingFiles()`;
/// unknown counts, as v1 writers may leave them, count as live).
fn has_live_files(mf: &ManifestFile) -> bool {
    mf.added_files_count.is_none_or(|n| n > 0) || mf.existing_files_count.is_none_or(|n| n > 0)
}

/// `file` with its `first_row_id` set (upstream keeps `DataFile` fields crate-private, so it is
/// rebuilt field by field).
fn with_first_row_id(
    table: &str,
    file: &DataFile,
    spec_id: i32,
    first_row_id: i64,
) -> Result<DataFile> {
    let mut b = DataFileBuilder::default();
    b.content(file.content_type())
        .file_path(file.file_path().to_string())
        .file_format(file.file_format())
        .partition(file.partition().clone())
        .partition_spec_id(spec_id)
        .record_count(file.record_count())
        .file_size_in_bytes(file.file_size_in_bytes())
        .column_sizes(file.column_sizes().clone())
        .value_counts(file.value_counts().clone())
        .null_value_counts(file.null_value_counts().clone())
        .nan_value_counts(file.nan_value_counts().clone())
        .lower_bounds(file.lower_bounds().clone())
        .upper_bounds(file.upper_bounds().clone())
        .key_metadata(file.key_metadata().map(<[u8]>::to_vec))
        .split_offsets(file.split_offsets().map(<[i64]>::to_vec))
        .equality_ids(file.equality_ids())
        .first_row_id(Some(first_row_id))
        .referenced_data_file(file.referenced_data_file())
        .content_offset(file.content_offset())
        .content_size_in_bytes(file.content_size_in_bytes());
    if let Some(order) = file.sort_order_id() {
        b.sort_order_id(order);
    }
    b.build().map_err(|e| {
        Error::Internal(format!(
            "{table}: cannot copy the metadata of {}: {e}",
            file.file_path()
        ))
    })
}

/// Names of the metadata files one staged snapshot writes.
struct ManifestNames {
    snapshot_id: i64,
    commit_uuid: uuid::Uuid,
    next: u32,
}

impl StagedSnapshot {
    /// The id of the snapshot this commit adds.
    pub fn snapshot_id(&self) -> i64 {
        self.snapshot.snapshot_id()
    }

    /// The table it was staged on.
    pub fn base(&self) -> &LoadedTable {
        &self.base
    }

    /// Commit through `committer`.
    ///
    /// - `Ok`: committed; the outcome holds the new head.
    /// - [`Error::CommitConflict`] or [`Error::Validation`]: certainly not committed; the staged
    ///   manifests and manifest list are deleted (see [`certainly_not_committed`]).
    /// - Any other error leaves the outcome of the swap unknown (a dropped connection, a REST
    ///   server's 5xx or a timeout). The head is then reloaded once: if it lists this snapshot,
    ///   the commit happened and this returns `Ok`; otherwise the error is returned and the staged
    ///   files are kept, since a request still in flight may yet commit them.
    pub async fn commit(self, committer: &dyn CatalogCommitter) -> Result<CommitOutcome> {
        match committer.commit(&self.base, self.changes.clone()).await {
            Ok(table) => Ok(self.outcome(table)),
            Err(e) if certainly_not_committed(&e) => {
                self.abort().await;
                Err(e)
            }
            Err(e) => match committer.load_head(&self.base).await {
                Ok(head) if head.metadata.snapshot_by_id(self.snapshot_id()).is_some() => {
                    tracing::info!(
                        table = %self.base.id,
                        snapshot_id = self.snapshot_id(),
                        error = %e,
                        "the commit reported an error but the table lists its snapshot"
                    );
                    Ok(self.outcome(head))
                }
                _ => Err(e),
            },
        }
    }

    fn outcome(self, table: LoadedTable) -> CommitOutcome {
        CommitOutcome {
            table,
            snapshot_id: self.snapshot.snapshot_id(),
            sequence_number: self.snapshot.sequence_number(),
            timestamp_ms: self.snapshot.timestamp_ms(),
            operation: self.snapshot.summary().operation.as_str().to_string(),
            summary: self.snapshot.summary().additional_properties.clone(),
            added_data_files: self.added_data_files,
            added_delete_files: self.added_delete_files,
            removed_data_files: self.removed_data_files,
            removed_delete_files: self.removed_delete_files,
            written_files: self.written_files,
        }
    }

    /// Delete the files written for this snapshot (it will not be committed).
    pub async fn abort(self) {
        for f in &self.written_files {
            discard(&self.base.storage, f).await;
        }
    }
}

/// Whether a commit that failed with `err` certainly did not change the table: the catalog
/// refused it (a conflict, or changes it found invalid) before applying anything.
///
/// Only then may the files written for it — staged metadata, and for a rewrite its new data
/// files — be deleted. Any other error (I/O during the swap, a REST server's 5xx, a timeout)
/// leaves the commit's fate unknown; deleting files then could corrupt a table that did commit.
pub fn certainly_not_committed(err: &Error) -> bool {
    matches!(
        err,
        Error::CommitConflict { .. }
            | Error::Validation { .. }
            | Error::Unsupported { .. }
            | Error::NotFound { .. }
    )
}

/// What committing `snapshot` on `md` asks of the catalog: the same table (UUID), `main` still
/// at the parent; then add the snapshot and move `main` to it, keeping `main`'s retention.
fn commit_changes(table: &str, md: &TableMetadata, snapshot: &Snapshot) -> Result<TableChanges> {
    Ok(TableChanges::new(
        vec![
            TableRequirement::UuidMatch { uuid: md.uuid() },
            TableRequirement::RefSnapshotIdMatch {
                r#ref: MAIN_BRANCH.to_string(),
                snapshot_id: md.current_snapshot_id(),
            },
        ],
        vec![
            TableUpdate::AddSnapshot {
                snapshot: snapshot.clone(),
            },
            TableUpdate::SetSnapshotRef {
                ref_name: MAIN_BRANCH.to_string(),
                reference: SnapshotReference::new(
                    snapshot.snapshot_id(),
                    main_retention(table, md)?,
                ),
            },
        ],
    ))
}

/// A random positive snapshot id not used by the table.
fn new_snapshot_id(md: &TableMetadata) -> i64 {
    loop {
        let (hi, lo) = uuid::Uuid::new_v4().as_u64_pair();
        let id = ((hi ^ lo) & (i64::MAX as u64)) as i64;
        if id != 0 && md.snapshot_by_id(id).is_none() {
            return id;
        }
    }
}

/// The retention settings of `main`, kept when the branch moves (Java's `setBranchSnapshot`).
///
/// `TableMetadata` does not expose its refs, only the snapshot they point at, so they are read
/// from its JSON form (the spec's).
fn main_retention(table: &str, md: &TableMetadata) -> Result<SnapshotRetention> {
    let default = SnapshotRetention::branch(None, None, None);
    if md.current_snapshot_id().is_none() {
        return Ok(default);
    }
    let json = serde_json::to_value(md)
        .map_err(|e| Error::Internal(format!("{table}: metadata to JSON: {e}")))?;
    match json.get("refs").and_then(|r| r.get(MAIN_BRANCH)) {
        Some(r) => serde_json::from_value::<SnapshotReference>(r.clone())
            .map(|r| r.retention)
            .map_err(|e| Error::metadata(table, "<refs>", format!("invalid main ref: {e}"))),
        None => Ok(default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_ids_are_positive() {
        let md_json = r#"{"format-version":2,"table-uuid":"9c12d441-03fe-4693-9a96-a0705ddf69c1","location":"file:///t","last-sequence-number":0,"last-updated-ms":1,"last-column-id":1,"current-schema-id":0,"schemas":[{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"x","required":true,"type":"long"}]}],"default-spec-id":0,"partition-specs":[{"spec-id":0,"fields":[]}],"last-partition-id":999,"default-sort-order-id":0,"sort-orders":[{"order-id":0,"fields":[]}],"properties":{},"snapshots":[],"snapshot-log":[],"metadata-log":[]}"#;
        let md: TableMetadata = serde_json::from_str(md_json).unwrap();
        for _ in 0..1000 {
            assert!(new_snapshot_id(&md) > 0);
        }
        assert_eq!(
            main_retention("t", &md).unwrap(),
            SnapshotRetention::branch(None, None, None)
        );
    }
}
