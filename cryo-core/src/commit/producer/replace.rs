//! Removing files: which base manifests a removal touches, their live entries sorted into kept
//! and removed, and the merged manifests written for them (`replace`, `delete`, `overwrite`).

use super::Parts;
use super::iceberg_error;
use super::lineage::with_first_row_id;
use super::manifests::DEFAULT_MANIFEST_TARGET_BYTES;
use super::manifests::MergedEntries;
use super::stage::finish_manifest;
use super::staged::ManifestNames;
use crate::commit::files::read_manifests;
use crate::commit::summary::SummaryBuilder;
use crate::commit::summary::is_deletion_vector;
use crate::error::Error;
use crate::error::Result;
use crate::format::manifest::RowIdInheritance;
use crate::format::manifest_write::ManifestOut;
use iceberg::spec::DataFile;
use iceberg::spec::FormatVersion;
use iceberg::spec::Manifest;
use iceberg::spec::ManifestContentType;
use iceberg::spec::ManifestFile;
use iceberg::spec::PartitionSpecRef;
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::sync::Arc;

impl Parts {
    /// Whether a live entry of a manifest with `content` is removed by this snapshot.
    pub(super) fn removes(&self, content: ManifestContentType, file: &DataFile) -> bool {
        match content {
            ManifestContentType::Data => self.removed_data.contains(file.file_path()),
            ManifestContentType::Deletes if is_deletion_vector(file) => {
                file.referenced_data_file().is_some_and(|r| {
                    self.removed_data.contains(&r) || self.superseded_vectors.contains(&r)
                })
            }
            ManifestContentType::Deletes => self.removed_deletes.contains(file.file_path()),
        }
    }

    /// Read the base manifests that may list a removed file and sort their live entries into
    /// kept and removed; every other live manifest is carried over as it is.
    pub(super) async fn plan_removals(
        &self,
        base_manifests: Vec<ManifestFile>,
        summary: &mut SummaryBuilder,
    ) -> Result<Removals> {
        let md = self.base.metadata.as_ref();
        let table = self.base.id.to_string();
        let read_data = !self.removed_data.is_empty();
        // Deletion vectors go with their data files, so delete manifests are read whenever a v3
        // snapshot removes data files.
        // Added vectors are checked against the live ones (one per data file).
        let read_deletes = !self.removed_deletes.is_empty()
            || (read_data && md.format_version() >= FormatVersion::V3)
            || self.added_deletes.iter().any(is_deletion_vector);
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
        if let Some(missing) = self
            .superseded_vectors
            .iter()
            .find(|d| !out.superseded_found.contains(*d))
        {
            return Err(Error::validation(format!(
                "{table}: the deletion vector of {missing} to supersede is not live in snapshot {snapshot:?} (write the vectors on the state they commit on)"
            )));
        }
        if let Some(f) = self.added_deletes.iter().find(|f| {
            is_deletion_vector(f)
                && f.referenced_data_file()
                    .is_some_and(|d| out.vectors_kept.contains(&d))
        }) {
            return Err(Error::validation(format!(
                "{table}: {} keeps a live deletion vector; a data file has at most one (merge it: write_deletion_vectors does)",
                f.referenced_data_file().unwrap_or_default()
            )));
        }
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
    pub(super) fn split_manifest(
        &self,
        mf: ManifestFile,
        manifest: &Manifest,
        summary: &mut SummaryBuilder,
        out: &mut Removals,
    ) -> Result<()> {
        let table = self.base.id.to_string();
        if mf.content == ManifestContentType::Deletes {
            for e in manifest.entries().iter().filter(|e| e.is_alive()) {
                let f = e.data_file();
                if let Some(d) = f.referenced_data_file().filter(|_| is_deletion_vector(f)) {
                    if self.removes(mf.content, f) {
                        out.superseded_found.insert(d);
                    } else {
                        out.vectors_kept.insert(d);
                    }
                }
            }
        }
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
    /// Merging keeps the metadata lean (docs/architecture.md, "Lean metadata after a rewrite"): a rewrite touching every manifest of a
    /// table written by many small appends leaves a few manifests behind, not one per append,
    /// and the next commit of the same run reads those few.
    pub(super) async fn write_removals(
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
}

/// A live entry moved into a rewritten manifest, with what it keeps from the original.
pub(super) struct MovedEntry {
    pub(super) file: DataFile,
    pub(super) snapshot_id: i64,
    pub(super) seq: i64,
    pub(super) file_seq: Option<i64>,
}

/// A base manifest that lists a removed file: its spec and the entries it keeps.
pub(super) struct TouchedManifest {
    pub(super) content: ManifestContentType,
    pub(super) spec: PartitionSpecRef,
    pub(super) kept: Vec<MovedEntry>,
    /// Average bytes per entry of the manifest these entries come from.
    pub(super) entry_bytes: u64,
}

/// What removing files does to the base snapshot's manifests.
#[derive(Default)]
pub(super) struct Removals {
    /// Manifests carried over unchanged.
    pub(super) carried: Vec<ManifestFile>,
    /// Manifests to rewrite without their removed entries, in base order.
    pub(super) touched: Vec<TouchedManifest>,
    /// Removed entries by (content, spec id), written as one DELETED-only manifest each.
    pub(super) removed: BTreeMap<(u8, i32), (PartitionSpecRef, Vec<MovedEntry>)>,
    /// The highest data sequence number among removed data files.
    pub(super) max_removed_data_seq: Option<i64>,
    /// Delete-file entries removed.
    pub(super) removed_delete_files: usize,
    /// Paths of the data files found and removed.
    pub(super) found_data: BTreeSet<String>,
    /// Paths of the delete files found and removed.
    pub(super) found_deletes: BTreeSet<String>,
    /// Data files whose live deletion vector is removed (with the file, or superseded).
    pub(super) superseded_found: BTreeSet<String>,
    /// Data files whose live deletion vector stays.
    pub(super) vectors_kept: BTreeSet<String>,
}

/// Sort key of a manifest content type (data manifests first, as Java lists them).
pub(super) fn content_key(content: ManifestContentType) -> u8 {
    match content {
        ManifestContentType::Data => 0,
        ManifestContentType::Deletes => 1,
    }
}

/// Whether a manifest may list live files (Java's `hasAddedFiles() || hasExistingFiles()`;
/// unknown counts, as v1 writers may leave them, count as live).
pub(super) fn has_live_files(mf: &ManifestFile) -> bool {
    mf.added_files_count.is_none_or(|n| n > 0) || mf.existing_files_count.is_none_or(|n| n > 0)
}
