//! Reading the manifests a commit builds on.

use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{DataFile, Manifest, ManifestFile, ManifestStatus, Snapshot};

use crate::catalog::LoadedTable;
use crate::error::{Error, Result};
use crate::format::manifest::RowIdInheritance;

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
        .map(|joined| joined.map_err(|e| Error::compute("manifest reader task failed", e))?)
        .try_collect()
        .await
}

/// One manifest, with what its entries inherit from its list entry applied.
pub(crate) async fn read_manifest(table: &LoadedTable, mf: &ManifestFile) -> Result<Manifest> {
    crate::format::manifest::read(&table.storage, &table.id.to_string(), mf).await
}

/// The manifests `snapshot` of `table` lists, in list order.
pub(crate) async fn read_manifest_list(
    table: &LoadedTable,
    snapshot: &Snapshot,
) -> Result<Vec<ManifestFile>> {
    let (_, manifests) = crate::format::manifest_list::read(
        &table.storage,
        &table.id.to_string(),
        snapshot.manifest_list(),
        table.metadata.format_version(),
    )
    .await?;
    Ok(manifests)
}
