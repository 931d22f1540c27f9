//! Reading the manifests a commit builds on.

use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{
    DataFile, Manifest, ManifestContentType, ManifestEntry, ManifestFile, ManifestStatus, Snapshot,
};

use crate::catalog::LoadedTable;
use crate::error::{Error, Result};

/// Manifests read at once.
const MANIFEST_READ_CONCURRENCY: usize = 16;

/// A live file (data or delete) of a table's current snapshot, as its manifest lists it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LiveFile {
    /// The file, with its partition tuple and metrics.
    pub file: DataFile,
    /// Partition spec the file was written with.
    pub spec_id: i32,
    /// `Added` by the snapshot that wrote its manifest, or `Existing`.
    pub status: ManifestStatus,
    /// Snapshot that added the file.
    pub snapshot_id: Option<i64>,
    /// Data sequence number (inherited from the manifest when written as null).
    pub sequence_number: Option<i64>,
    /// File sequence number.
    pub file_sequence_number: Option<i64>,
    /// Format v3: the row id of the file's first row, its own or inherited from the manifest
    /// (`None` for delete files, and for data files that have none: added before the table
    /// was upgraded to v3 and not yet assigned one).
    pub first_row_id: Option<i64>,
    /// Manifest that lists it.
    pub manifest: String,
}

/// Every live data and delete file of the table's current snapshot (empty for a table without
/// snapshots). Reads manifests only.
pub async fn live_files(table: &LoadedTable) -> Result<Vec<LiveFile>> {
    let Some(snapshot) = table.metadata.current_snapshot() else {
        return Ok(Vec::new());
    };
    let manifests = read_manifest_list(table, snapshot).await?;
    let read = read_manifests(table, manifests).await?;
    let mut out = Vec::new();
    for (mf, manifest) in read {
        let mut row_ids = RowIdInheritance::new(&mf);
        for entry in manifest.entries() {
            let inherited = row_ids.next(entry.data_file());
            if entry.is_alive() {
                out.push(LiveFile {
                    file: entry.data_file().clone(),
                    spec_id: mf.partition_spec_id,
                    status: entry.status(),
                    snapshot_id: entry.snapshot_id(),
                    sequence_number: entry.sequence_number(),
                    file_sequence_number: entry.file_sequence_number,
                    first_row_id: entry.data_file().first_row_id().or(inherited),
                    manifest: mf.manifest_path.clone(),
                });
            }
        }
    }
    Ok(out)
}

/// The spec's first-row-id inheritance over one manifest's entries, in manifest order: a data
/// file without a `first_row_id` of its own takes the manifest's `first_row_id` plus the record
/// counts of every earlier entry that had none (`DELETED` entries included). Delete manifests
/// have no row ids.
#[derive(Debug, Clone)]
pub(crate) struct RowIdInheritance {
    next: Option<i64>,
}

impl RowIdInheritance {
    pub(crate) fn new(mf: &ManifestFile) -> Self {
        let next = match mf.content {
            ManifestContentType::Data => mf.first_row_id.and_then(|id| i64::try_from(id).ok()),
            ManifestContentType::Deletes => None,
        };
        Self { next }
    }

    /// The row id `file` (the next entry) inherits, when it has none of its own and the
    /// manifest has one.
    pub(crate) fn next(&mut self, file: &DataFile) -> Option<i64> {
        if file.first_row_id().is_some() {
            return None;
        }
        let id = self.next?;
        self.next = Some(id.saturating_add(i64::try_from(file.record_count()).unwrap_or(i64::MAX)));
        Some(id)
    }
}

/// Read and parse `manifests`, in their order, several at once. Each is parsed on a task of its
/// own, so that a multi-threaded runtime spreads the Avro decoding over its workers (it is most
/// of the cost of reading a table's metadata).
pub(crate) async fn read_manifests(
    table: &LoadedTable,
    manifests: impl IntoIterator<Item = ManifestFile>,
) -> Result<Vec<(ManifestFile, Manifest)>> {
    futures::stream::iter(manifests)
        .map(|mf| {
            let table = table.clone();
            tokio::spawn(async move {
                let manifest = read_manifest(&table, &mf).await?;
                Ok::<_, Error>((mf, manifest))
            })
        })
        .buffered(MANIFEST_READ_CONCURRENCY)
        .map(|joined| {
            joined.map_err(|e| Error::Internal(format!("manifest reader task failed: {e}")))?
        })
        .try_collect()
        .await
}

/// The manifests a snapshot lists, in list order.
pub(crate) async fn read_manifest_list(
    table: &LoadedTable,
    snapshot: &Snapshot,
) -> Result<Vec<ManifestFile>> {
    let name = table.id.to_string();
    let location = snapshot.manifest_list();
    let bytes = crate::catalog::metadata::read_metadata_file(
        &table.storage,
        &name,
        location,
        "manifest list",
    )
    .await?;
    let list =
        crate::catalog::metadata::parse_manifest_list(&bytes, table.metadata.format_version())
            .map_err(|e| Error::metadata(&name, location, format!("corrupt manifest list: {e}")))?;
    Ok(list.consume_entries().into_iter().collect())
}

/// One manifest, with snapshot ids and sequence numbers inherited from its list entry.
pub(crate) async fn read_manifest(table: &LoadedTable, mf: &ManifestFile) -> Result<Manifest> {
    if mf.key_metadata.is_some() {
        return Err(Error::unsupported(format!(
            "{}: encrypted manifest {}",
            table.id, mf.manifest_path
        )));
    }
    let name = table.id.to_string();
    let path = mf.manifest_path.as_str();
    let bytes =
        crate::catalog::metadata::read_metadata_file(&table.storage, &name, path, "manifest")
            .await?;
    let manifest = crate::catalog::metadata::parse_manifest(&bytes)
        .map_err(|e| Error::metadata(&name, path, format!("corrupt manifest: {e}")))?;
    Ok(inherit(manifest, mf))
}

/// `manifest`'s entries with what they leave unset taken from its list entry `mf` (the spec's
/// inheritance, as upstream's `load_manifest` applies it): the snapshot id, and for `ADDED`
/// entries (or any entry of a manifest of sequence number 0) the data and file sequence numbers.
fn inherit(manifest: Manifest, mf: &ManifestFile) -> Manifest {
    let (entries, metadata) = manifest.into_parts();
    let inherits_seq =
        |e: &ManifestEntry| e.status == ManifestStatus::Added || mf.sequence_number == 0;
    let entries = entries
        .into_iter()
        .map(|e| {
            let mut e = std::sync::Arc::unwrap_or_clone(e);
            e.snapshot_id = e.snapshot_id.or(Some(mf.added_snapshot_id));
            if inherits_seq(&e) {
                e.sequence_number = e.sequence_number.or(Some(mf.sequence_number));
                e.file_sequence_number = e.file_sequence_number.or(Some(mf.sequence_number));
            }
            e
        })
        .collect();
    Manifest::new(metadata, entries)
}
