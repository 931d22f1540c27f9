//! Manifest rewrites (`rewrite_manifests`, `replace_manifests`): the same live files in other
//! manifests, no file added or removed.

use super::ENTRIES_PROCESSED;
use super::ExistingEntry;
use super::MANIFESTS_CREATED;
use super::MANIFESTS_KEPT;
use super::MANIFESTS_REPLACED;
use super::ManifestRewrite;
use super::NewManifest;
use super::Parts;
use super::StagedSnapshot;
use super::iceberg_error;
use super::lineage::with_first_row_id;
use super::replace::MovedEntry;
use super::stage::manifest_writer;
use super::staged::ManifestNames;
use super::staged::new_snapshot_id;
use crate::catalog::LoadedTable;
use crate::catalog::committer::discard;
use crate::catalog::committer::metadata_dir;
use crate::commit::files::read_manifest_list;
use crate::commit::summary::SummaryBuilder;
use crate::error::Error;
use crate::error::Result;
use crate::format::manifest::RowIdInheritance;
use iceberg::spec::DataContentType;
use iceberg::spec::Manifest;
use iceberg::spec::ManifestContentType;
use iceberg::spec::ManifestFile;
use iceberg::spec::Operation;
use iceberg::spec::PartitionSpecRef;
use std::collections::HashSet;
use std::sync::Arc;

impl Parts {
    /// Write the manifests of a manifest rewrite, their entries as `EXISTING`.
    pub(super) async fn write_new_manifests(
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
    pub(super) async fn stage_manifest_rewrite(
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
            commit_uuid: crate::random::uuid(),
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
        let (snapshot, changes) = self.finish_snapshot(
            names.snapshot_id,
            Some(parent.snapshot_id()),
            sequence_number,
            list_path,
            summary,
            row_range,
        )?;
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
}

/// The live entries of manifest `mf` (read as `manifest`) as a rewritten manifest must carry
/// them: `EXISTING`, with their snapshot id, data and file sequence numbers, and on v3 the
/// `first_row_id` they inherit made explicit. `DELETED` entries are left out.
pub(crate) fn existing_entries(
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
        let path = format!("memory://cryo-sizing-{}/m.avro", crate::random::uuid());
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
pub(super) type MergedEntries = (
    ManifestContentType,
    PartitionSpecRef,
    Vec<(u64, MovedEntry)>,
);

/// `commit.manifest.target-size-bytes` when the table does not set it (Java's default).
pub(super) const DEFAULT_MANIFEST_TARGET_BYTES: u64 = 8 << 20;
