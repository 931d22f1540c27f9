//! The snapshot-finishing path every kind of snapshot shares: new manifests written, the
//! manifest list (and on v3 the snapshot's row range), the summary, the snapshot itself.

use super::Parts;
use super::StagedSnapshot;
use super::iceberg_error;
use super::staged::ManifestNames;
use super::staged::commit_changes;
use super::staged::new_snapshot_id;
use crate::catalog::committer::metadata_dir;
use crate::commit::files::read_manifest;
use crate::commit::files::read_manifest_list;
use crate::commit::summary::SummaryBuilder;
use crate::error::Error;
use crate::error::Result;
use crate::format::manifest_write::ManifestOut;
use iceberg::spec::DataFile;
use iceberg::spec::FormatVersion;
use iceberg::spec::ManifestContentType;
use iceberg::spec::ManifestFile;
use iceberg::spec::ManifestListWriter;
use iceberg::spec::Operation;
use iceberg::spec::PartitionSpecRef;
use iceberg::spec::Snapshot;
use iceberg::spec::TableMetadata;
use std::sync::Arc;

impl Parts {
    /// The snapshot every kind of producer ends with (its manifest list written), and the
    /// catalog changes that commit it on the base.
    pub(super) fn finish_snapshot(
        &self,
        snapshot_id: i64,
        parent_id: Option<i64>,
        sequence_number: i64,
        list_path: String,
        summary: iceberg::spec::Summary,
        row_range: Option<(u64, u64)>,
    ) -> Result<(Snapshot, crate::catalog::TableChanges)> {
        let md = self.base.metadata.as_ref();
        let builder = Snapshot::builder()
            .with_snapshot_id(snapshot_id)
            .with_parent_snapshot_id(parent_id)
            .with_sequence_number(sequence_number)
            .with_timestamp_ms(self.clock.now_ms())
            .with_manifest_list(list_path)
            .with_summary(summary)
            .with_schema_id(md.current_schema_id());
        // v3: the snapshot's row range (empty when no data manifest adds rows, but present).
        let snapshot = match row_range {
            Some((first_row_id, added_rows)) => {
                builder.with_row_range(first_row_id, added_rows).build()
            }
            None => builder.build(),
        };
        let changes = commit_changes(&self.base.id.to_string(), md, &snapshot)?;
        Ok((snapshot, changes))
    }

    /// Stage a snapshot that adds and removes files (a change or a replace).
    pub(super) async fn stage_files(
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
            commit_uuid: crate::random::uuid(),
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
        let (snapshot, changes) = self.finish_snapshot(
            names.snapshot_id,
            parent_id,
            sequence_number,
            list_path,
            summary,
            row_range,
        )?;
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
    pub(super) async fn write_added_manifest(
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

    /// Write the manifest list; for v3 return the snapshot's row range `(first row id, rows)`.
    pub(super) async fn write_manifest_list(
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
    pub(super) async fn live_entry_count(&self, manifests: &[ManifestFile]) -> Result<u64> {
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

    pub(super) fn new_manifest_writer(
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
pub(super) fn manifest_writer(
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

/// Write `writer`'s manifest and list it, with the cluster of its live entries.
pub(super) async fn finish_manifest(
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
