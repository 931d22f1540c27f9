//! Cryo's snapshot producer: new manifests, the base snapshot's manifests carried over, a
//! manifest list, a full summary, and the requirements + updates that commit them.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use iceberg::spec::{
    DataContentType, DataFile, DataFileFormat, FormatVersion, MAIN_BRANCH, ManifestContentType,
    ManifestFile, ManifestListWriter, ManifestWriter, ManifestWriterBuilder, Operation,
    PartitionSpecRef, Snapshot, SnapshotReference, SnapshotRetention, TableMetadata,
};
use iceberg::{TableRequirement, TableUpdate};

use super::committer::{CatalogCommitter, TableChanges, discard, metadata_dir};
use super::files::{read_manifest, read_manifest_list};
use super::iceberg_error;
use super::summary::SummaryBuilder;
use crate::catalog::LoadedTable;
use crate::clock::{self, Clock};
use crate::error::{Error, Result};

/// Builds one snapshot on a base table: data files and delete files to add, whole data files to
/// remove.
///
/// | adds data | adds deletes / removes files | operation (as Java's `RowDelta`/`DeleteFiles`) |
/// |---|---|---|
/// | yes | no | `append` |
/// | no | yes | `delete` |
/// | yes | yes | `overwrite` |
///
/// New data files and new delete files go to separate new manifests (format v2+ keeps deletes in
/// delete manifests; v1 has no delete files); their sequence numbers are inherited from the
/// snapshot, so equality deletes added here apply to older data only. The base snapshot's
/// manifests are carried over unchanged, except those listing a removed file, which are rewritten
/// with the removed files as `DELETED` and the rest as `EXISTING`, keeping every file's original
/// sequence numbers.
///
/// The commit requires that the table is still the same table (UUID) and that `main` still
/// points at the base snapshot; if either changed, the commit fails with
/// [`Error::CommitConflict`] and the files it wrote are deleted. Retrying means building again on
/// the new head (the validation that makes that safe for rewrites belongs to `replace` commits).
///
/// Files to add must be written for the table's current schema and default partition spec, as
/// [`write_data_files`](super::write_data_files) and the delete writers do.
#[derive(Debug, Clone)]
pub struct SnapshotProducer {
    base: LoadedTable,
    added_data: Vec<DataFile>,
    added_deletes: Vec<DataFile>,
    removed_data: BTreeSet<String>,
    properties: HashMap<String, String>,
    clock: Arc<dyn Clock>,
}

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
    /// `append`, `overwrite` or `delete`.
    pub operation: String,
    /// Its summary (without the operation).
    pub summary: HashMap<String, String>,
    /// Data files added.
    pub added_data_files: usize,
    /// Delete files added.
    pub added_delete_files: usize,
    /// Data files removed.
    pub removed_data_files: usize,
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
            properties: HashMap::new(),
            clock: clock::system(),
        }
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

    /// Remove whole data files (by path) from the table, as a metadata-only `DELETE` does.
    ///
    /// Delete files that referenced them stay (they are no longer applicable, "dangling", until
    /// a position-delete rewrite drops them), as in Java.
    #[must_use]
    pub fn delete_data_files(mut self, paths: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.removed_data.extend(paths.into_iter().map(Into::into));
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

    /// Take the snapshot timestamp from `clock`.
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The operation the snapshot will record.
    pub fn operation(&self) -> Result<Operation> {
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
        let operation = self.operation()?;
        self.validate()?;
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
        if version >= FormatVersion::V3 && !self.removed_data.is_empty() {
            return Err(Error::unsupported(format!(
                "{table}: removing data files from a v3 table (row lineage of rewritten manifests) is not supported yet"
            )));
        }
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

    async fn stage_inner(
        &self,
        operation: Operation,
        written: &mut Vec<String>,
    ) -> Result<StagedSnapshot> {
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
        let mut manifests = Vec::new();
        for (content, files) in [
            (ManifestContentType::Data, &self.added_data),
            (ManifestContentType::Deletes, &self.added_deletes),
        ] {
            if !files.is_empty() {
                manifests.push(
                    self.write_added_manifest(&mut names, content, files, written)
                        .await?,
                );
            }
        }
        let base_manifests = match parent {
            Some(s) => read_manifest_list(&self.base, s).await?,
            None => Vec::new(),
        };
        let carried = self
            .rewrite_for_removals(
                &mut names,
                base_manifests,
                &mut summary,
                &mut manifests,
                written,
            )
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

        let changes = TableChanges::new(
            vec![
                TableRequirement::UuidMatch { uuid: md.uuid() },
                TableRequirement::RefSnapshotIdMatch {
                    r#ref: MAIN_BRANCH.to_string(),
                    snapshot_id: parent_id,
                },
            ],
            vec![
                TableUpdate::AddSnapshot {
                    snapshot: snapshot.clone(),
                },
                TableUpdate::SetSnapshotRef {
                    ref_name: MAIN_BRANCH.to_string(),
                    reference: SnapshotReference::new(
                        names.snapshot_id,
                        main_retention(&table, md)?,
                    ),
                },
            ],
        );
        Ok(StagedSnapshot {
            snapshot,
            changes,
            written_files: written.clone(),
            added_data_files: self.added_data.len(),
            added_delete_files: self.added_deletes.len(),
            removed_data_files: self.removed_data.len(),
            base: self.base.clone(),
        })
    }

    /// One manifest listing `files` as added, in the default spec.
    async fn write_added_manifest(
        &self,
        names: &mut ManifestNames,
        content: ManifestContentType,
        files: &[DataFile],
        written: &mut Vec<String>,
    ) -> Result<ManifestFile> {
        let table = self.base.id.to_string();
        let (path, mut writer) = self.new_manifest_writer(names, content, None)?;
        written.push(path);
        for f in files {
            // A negative sequence number leaves it null: inherited from this snapshot, so
            // delete files added here apply to older data only.
            writer
                .add_file(f.clone(), -1)
                .map_err(|e| iceberg_error(&table, "add file to manifest", e))?;
        }
        writer
            .write_manifest_file()
            .await
            .map_err(|e| iceberg_error(&table, "write manifest", e))
    }

    /// Rewrite the data manifests that list a removed file (removed files `DELETED`, the other
    /// live ones `EXISTING`, original sequence numbers kept) into `rewritten`; return the base
    /// manifests to carry over unchanged.
    async fn rewrite_for_removals(
        &self,
        names: &mut ManifestNames,
        base_manifests: Vec<ManifestFile>,
        summary: &mut SummaryBuilder,
        rewritten: &mut Vec<ManifestFile>,
        written: &mut Vec<String>,
    ) -> Result<Vec<ManifestFile>> {
        if self.removed_data.is_empty() {
            return Ok(base_manifests);
        }
        let md = self.base.metadata.as_ref();
        let table = self.base.id.to_string();
        let mut carried = Vec::with_capacity(base_manifests.len());
        let mut found = BTreeSet::new();
        for mf in base_manifests {
            if mf.content != ManifestContentType::Data {
                carried.push(mf);
                continue;
            }
            let manifest = read_manifest(&self.base, &mf).await?;
            if !manifest
                .entries()
                .iter()
                .any(|e| e.is_alive() && self.removed_data.contains(e.file_path()))
            {
                carried.push(mf);
                continue;
            }
            let spec = md
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
            let (path, mut writer) =
                self.new_manifest_writer(names, ManifestContentType::Data, Some(&spec))?;
            written.push(path);
            // DELETED entries of earlier snapshots are dropped when a manifest is rewritten; the
            // snapshots that deleted them still list them.
            for entry in manifest.entries().iter().filter(|e| e.is_alive()) {
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
                let file = entry.data_file().clone();
                if self.removed_data.contains(file.file_path()) {
                    found.insert(file.file_path().to_string());
                    summary.removed(&file, &spec);
                    writer.add_delete_file(file, seq, file_seq)
                } else {
                    let added_by = entry.snapshot_id().unwrap_or(mf.added_snapshot_id);
                    writer.add_existing_file(file, added_by, seq, file_seq)
                }
                .map_err(|e| iceberg_error(&table, "rewrite manifest", e))?;
            }
            rewritten.push(
                writer
                    .write_manifest_file()
                    .await
                    .map_err(|e| iceberg_error(&table, "write manifest", e))?,
            );
        }
        if found.len() != self.removed_data.len() {
            let missing: Vec<&String> = self.removed_data.difference(&found).take(5).collect();
            return Err(Error::validation(format!(
                "{table}: cannot remove files that are not live data files of snapshot {:?}: {missing:?}",
                md.current_snapshot_id()
            )));
        }
        Ok(carried)
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

    fn new_manifest_writer(
        &self,
        names: &mut ManifestNames,
        content: ManifestContentType,
        spec: Option<&PartitionSpecRef>,
    ) -> Result<(String, ManifestWriter)> {
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
        let builder = ManifestWriterBuilder::new(
            output,
            Some(names.snapshot_id),
            Arc::clone(md.current_schema()),
            spec.as_ref().clone(),
        );
        let writer = match (md.format_version(), content) {
            (FormatVersion::V1, _) => builder.build_v1(),
            (FormatVersion::V2, ManifestContentType::Data) => builder.build_v2_data(),
            (FormatVersion::V2, ManifestContentType::Deletes) => builder.build_v2_deletes(),
            (FormatVersion::V3, ManifestContentType::Data) => builder.build_v3_data(),
            (FormatVersion::V3, ManifestContentType::Deletes) => builder.build_v3_deletes(),
        };
        Ok((path, writer))
    }
}

/// Names of the metadata files one staged snapshot writes.
struct ManifestNames {
    snapshot_id: i64,
    commit_uuid: uuid::Uuid,
    next: u32,
}

impl StagedSnapshot {
    /// Commit through `committer`; on a conflict the staged files are deleted.
    pub async fn commit(self, committer: &dyn CatalogCommitter) -> Result<CommitOutcome> {
        match committer.commit(&self.base, self.changes.clone()).await {
            Ok(table) => Ok(CommitOutcome {
                table,
                snapshot_id: self.snapshot.snapshot_id(),
                sequence_number: self.snapshot.sequence_number(),
                timestamp_ms: self.snapshot.timestamp_ms(),
                operation: self.snapshot.summary().operation.as_str().to_string(),
                summary: self.snapshot.summary().additional_properties.clone(),
                added_data_files: self.added_data_files,
                added_delete_files: self.added_delete_files,
                removed_data_files: self.removed_data_files,
                written_files: self.written_files,
            }),
            Err(e) => {
                // Only when the commit certainly did not happen: an I/O error during the swap
                // leaves it unknown, and the files may now be referenced.
                if matches!(e, Error::CommitConflict { .. } | Error::Validation { .. }) {
                    self.abort().await;
                }
                Err(e)
            }
        }
    }

    /// Delete the files written for this snapshot (it will not be committed).
    pub async fn abort(self) {
        for f in &self.written_files {
            discard(&self.base.storage, f).await;
        }
    }
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
