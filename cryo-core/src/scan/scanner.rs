use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use iceberg::spec::{
    DataContentType, DataFileFormat, FormatVersion, ManifestContentType, ManifestFile,
    ManifestStatus, NestedFieldRef, PrimitiveType, Schema, TableMetadata, Transform, Type,
};
use serde::{Deserialize, Serialize};

use super::memo;
use super::model::{
    ColumnInfo, ColumnStatsCoverage, DeleteStats, FileEntry, FileStats, ManifestStats,
    MetadataFileStats, PartitionFieldInfo, PartitionFieldValue, PartitionSpecInfo, PartitionStats,
    PartitioningInfo, RefInfo, SchemaInfo, SnapshotInfo, SnapshotStats, SortFieldInfo,
    SortOrderInfo, TableScan, WriteSettings,
};
use super::partition;
use crate::catalog::{Catalog, LoadedTable, TableId};
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::format::manifest_list::{IdHasher, fnv1a};
use crate::io::ObjectStorage;

/// Options for a scan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ScanOptions {
    /// Manifest and manifest-list reads in flight at once (manifests also up to 4 MiB of them
    /// at once, so memory stays bounded on tables with large manifests).
    pub concurrency: usize,
    /// Read the manifest lists of at most this many newest snapshots (`None`: all).
    pub max_snapshot_lists: Option<usize>,
    /// Override `write.target-file-size-bytes`.
    pub target_file_size_bytes: Option<u64>,
    /// A file is small below this fraction of the target size (Spark's `min-file-size-bytes`
    /// defaults to 75% of the target).
    pub small_file_ratio: f64,
    /// A local directory where the scan keeps what it read from the table's manifest lists and
    /// manifests (immutable files), one memo file per table: the next scan reads only the
    /// files written since (`None`: read everything every time). A memo never changes a
    /// scan's result; one that is missing, corrupt or stale is rebuilt.
    pub cache_dir: Option<std::path::PathBuf>,
}

impl Default for ScanOptions {
    fn default() -> Self {
        Self {
            concurrency: crate::io::READS_IN_FLIGHT,
            max_snapshot_lists: None,
            target_file_size_bytes: None,
            small_file_ratio: 0.75,
            cache_dir: None,
        }
    }
}

impl ScanOptions {
    /// Reject nonsensical options.
    pub fn validate(&self) -> Result<()> {
        if self.concurrency == 0 || self.concurrency > 1024 {
            return Err(Error::validation(
                "scan concurrency must be between 1 and 1024",
            ));
        }
        if !(self.small_file_ratio > 0.0 && self.small_file_ratio <= 1.0) {
            return Err(Error::validation("small_file_ratio must be in (0, 1]"));
        }
        if self.target_file_size_bytes == Some(0) {
            return Err(Error::validation("target_file_size_bytes must be positive"));
        }
        Ok(())
    }
}

/// Load and scan one table of a catalog.
pub async fn scan_table(
    catalog: &Catalog,
    id: &TableId,
    options: &ScanOptions,
    clock: &dyn Clock,
) -> Result<TableScan> {
    let table = catalog.load_table(id).await?;
    scan_loaded(&table, catalog.name(), options, clock.now_ms()).await
}

fn prop<T: std::str::FromStr>(props: &HashMap<String, String>, key: &str, default: T) -> T {
    props
        .get(key)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn write_settings(md: &TableMetadata, options: &ScanOptions) -> WriteSettings {
    let p = md.properties();
    let target = options
        .target_file_size_bytes
        .unwrap_or_else(|| prop(p, "write.target-file-size-bytes", 512u64 << 20))
        .max(1);
    let mode = |k: &str| {
        p.get(k)
            .cloned()
            .unwrap_or_else(|| "copy-on-write".to_string())
    };
    WriteSettings {
        target_file_size_bytes: target,
        // `min`: f64 rounding can land one past a target near i64::MAX.
        small_file_threshold_bytes: ((target as f64 * options.small_file_ratio) as u64).min(target),
        parquet_codec: p.get("write.parquet.compression-codec").cloned(),
        file_format: p
            .get("write.format.default")
            .cloned()
            .unwrap_or_else(|| "parquet".to_string()),
        delete_mode: mode("write.delete.mode"),
        update_mode: mode("write.update.mode"),
        merge_mode: mode("write.merge.mode"),
        manifest_target_size_bytes: prop(p, "commit.manifest.target-size-bytes", 8u64 << 20),
        max_snapshot_age_ms: prop(
            p,
            "history.expire.max-snapshot-age-ms",
            5 * 24 * 3_600_000i64,
        ),
        min_snapshots_to_keep: prop(p, "history.expire.min-snapshots-to-keep", 1u32),
        metadata_previous_versions_max: prop(p, "write.metadata.previous-versions-max", 100u32),
        metadata_delete_after_commit: prop(p, "write.metadata.delete-after-commit.enabled", false),
        metrics_default: p.get("write.metadata.metrics.default").cloned(),
    }
}

fn leaf_ids(fields: &[NestedFieldRef], out: &mut Vec<i32>) {
    for f in fields {
        match f.field_type.as_ref() {
            Type::Primitive(_) => out.push(f.id),
            Type::Struct(s) => leaf_ids(s.fields(), out),
            // Engines do not keep bounds for list elements and map entries by default.
            Type::List(_) | Type::Map(_) => {}
        }
    }
}

fn schema_info(md: &TableMetadata) -> (SchemaInfo, Vec<i32>) {
    let schema = md.current_schema();
    let mut leaves = Vec::new();
    leaf_ids(schema.as_struct().fields(), &mut leaves);
    let info = SchemaInfo {
        schema_id: schema.schema_id(),
        schema_count: md.schemas_iter().count(),
        columns: schema
            .as_struct()
            .fields()
            .iter()
            .map(|f| ColumnInfo {
                id: f.id,
                name: f.name.clone(),
                r#type: f.field_type.to_string(),
                required: f.required,
            })
            .collect(),
        leaf_column_count: leaves.len(),
    };
    (info, leaves)
}

/// Per-spec information needed to decode partition tuples.
struct SpecDecoder {
    info: PartitionSpecInfo,
    transforms: Vec<Transform>,
    source_types: Vec<Option<PrimitiveType>>,
}

fn spec_decoders(md: &TableMetadata) -> (PartitioningInfo, HashMap<i32, SpecDecoder>) {
    // A spec may reference a column dropped later: look the source up in every schema.
    let schemas: Vec<&Schema> = std::iter::once(md.current_schema().as_ref())
        .chain(md.schemas_iter().map(AsRef::as_ref))
        .collect();
    let lookup = |id: i32| {
        schemas.iter().find_map(|s| {
            s.field_by_id(id).map(|_| {
                (
                    s.name_by_field_id(id).map(str::to_string),
                    partition::source_primitive(s, id),
                )
            })
        })
    };
    let mut decoders = HashMap::new();
    let mut specs = Vec::new();
    for spec in md.partition_specs_iter() {
        let mut fields = Vec::new();
        let mut transforms = Vec::new();
        let mut source_types = Vec::new();
        for f in spec.fields() {
            let (name, ty) = lookup(f.source_id).unwrap_or((None, None));
            fields.push(PartitionFieldInfo {
                field_id: f.field_id,
                name: f.name.clone(),
                source_id: f.source_id,
                source_column: name,
                source_type: ty.as_ref().map(ToString::to_string),
                transform: f.transform.to_string(),
            });
            transforms.push(f.transform);
            source_types.push(ty);
        }
        let info = PartitionSpecInfo {
            spec_id: spec.spec_id(),
            fields,
        };
        specs.push(info.clone());
        decoders.insert(
            spec.spec_id(),
            SpecDecoder {
                info,
                transforms,
                source_types,
            },
        );
    }
    specs.sort_by_key(|s| s.spec_id);
    (
        PartitioningInfo {
            default_spec_id: md.default_partition_spec_id(),
            specs,
        },
        decoders,
    )
}

fn sort_order_info(md: &TableMetadata) -> SortOrderInfo {
    let order = md.default_sort_order();
    let schema = md.current_schema();
    SortOrderInfo {
        order_id: order.order_id,
        fields: order
            .fields
            .iter()
            .map(|f| SortFieldInfo {
                column: schema.name_by_field_id(f.source_id).map(str::to_string),
                transform: f.transform.to_string(),
                direction: f.direction.to_string().to_ascii_lowercase(),
                null_order: f.null_order.to_string().to_ascii_lowercase(),
            })
            .collect(),
    }
}

/// A manifest list's size in bytes and its entries.
type ListedManifests = (u64, Vec<ManifestFile>);

/// What the scan keeps of one snapshot's manifest list: its size and manifest count (the
/// current snapshot's manifests are kept whole, apart).
struct ListRead {
    bytes: u64,
    manifests: usize,
}

/// Paths are kept as 64-bit hashes where only membership matters (a collision, one in ~10^7 at a
/// million paths, at worst counts a dangling delete file as live).
type PathHashes = HashSet<u64, std::hash::BuildHasherDefault<IdHasher>>;

fn path_hash(path: &str) -> u64 {
    fnv1a(path.as_bytes())
}

async fn read_manifest_list(
    storage: &ObjectStorage,
    table: &str,
    location: &str,
    version: FormatVersion,
) -> Result<ListedManifests> {
    crate::format::manifest_list::read(storage, table, location, version).await
}

/// The manifest lists at `lists` (`(snapshot id, location)`), `concurrency` at a time and each
/// holding one of `reads`, as they arrive, reduced to their manifests' path hashes and lengths
/// (the fast reader: no `ManifestFile` per entry).
fn list_reads<'a>(
    storage: &'a ObjectStorage,
    table: &'a str,
    lists: Vec<(i64, String)>,
    version: FormatVersion,
    concurrency: usize,
    reads: Arc<tokio::sync::Semaphore>,
) -> futures::stream::BoxStream<'a, (i64, Result<crate::format::manifest_list::ListedPaths>)> {
    futures::stream::iter(lists)
        .map(move |(id, loc)| {
            // A task of its own: lists decode on every worker thread, not on the scan's.
            let (storage, table, reads) = (storage.clone(), table.to_string(), Arc::clone(&reads));
            async move {
                let read = tokio::spawn(async move {
                    let _permit = read_slot(&reads).await?;
                    crate::format::manifest_list::read_paths(&storage, &table, &loc, version).await
                })
                .await
                .map_err(|e| Error::Internal(format!("a manifest list read task failed: {e}")))
                .and_then(|r| r);
                (id, read)
            }
        })
        .buffer_unordered(concurrency)
        .boxed()
}

/// What every manifest fold of one scan shares.
struct FoldContext {
    table: String,
    decoders: HashMap<i32, SpecDecoder>,
    snapshot_ts: HashMap<i64, i64>,
    small_file_threshold: u64,
    /// Whether live data paths are kept (for delete files that name theirs).
    with_deletes: bool,
    /// Whether folds are written to a memo (which keys them by [`memo::FoldId`]).
    memo: bool,
}

/// One manifest of the current snapshot, folded.
#[derive(Default)]
pub(super) struct ManifestFold {
    pub(super) deleted_entries: u64,
    pub(super) live_entries: u64,
    /// Partitions, keyed as the scan keys them, in the order the manifest first names them.
    pub(super) parts: Vec<(Arc<str>, PartitionAcc)>,
    pub(super) data_files: FileStats,
    pub(super) data_file_count: u64,
    /// Path hashes of live data files (only with deletes).
    pub(super) live_data_paths: Vec<u64>,
    /// Data files by the set of columns with both bounds (a manifest's files mostly share one).
    pub(super) bounded: Vec<(Vec<i32>, u64)>,
}

/// The manifest bytes (KiB, as the manifest list gives their lengths) a scan reads and
/// decodes at once, whatever its `concurrency`. Each read in flight holds its manifest and,
/// while it is decoded, the inflated blocks: 64 reads of a ten-million-file table's 530 KB
/// manifests doubled the scan's peak memory over a million-file table's (benches/scale). At
/// 4 MiB a million-file table's 60 KB manifests still have 64 reads in flight, and a
/// ten-million-file table's 7, which at 30 ms per request read faster than they decode.
const MANIFEST_KIB_IN_FLIGHT: u64 = 4 * 1024;

/// One of the scan's slots for concurrent object reads, held while a read is in flight.
async fn read_slot(reads: &tokio::sync::Semaphore) -> Result<tokio::sync::SemaphorePermit<'_>> {
    reads
        .acquire()
        .await
        .map_err(|e| Error::Internal(format!("the read budget closed: {e}")))
}

/// `per_manifest` over each of `manifests`, read and handled on a task of its own (decoding
/// uses every core), `concurrency` at a time, results in list order. The scan's fold and the
/// file listing both stream the current snapshot's manifests through here.
fn manifest_tasks<C, T>(
    storage: ObjectStorage,
    manifests: Vec<ManifestFile>,
    ctx: Arc<C>,
    concurrency: usize,
    reads: Arc<tokio::sync::Semaphore>,
    per_manifest: fn(&C, &ManifestFile, &[u8]) -> Result<T>,
) -> futures::stream::BoxStream<'static, Result<T>>
where
    C: ManifestTaskContext + Send + Sync + 'static,
    T: Send + 'static,
{
    // Manifests of big tables are large (a megabyte and more): reads in flight are bounded by
    // their bytes too, so memory follows the budget, not the manifests' size times the count.
    let budget = Arc::new(tokio::sync::Semaphore::new(MANIFEST_KIB_IN_FLIGHT as usize));
    futures::stream::iter(manifests)
        .map(move |mf| {
            let (storage, ctx, budget, reads) = (
                storage.clone(),
                Arc::clone(&ctx),
                Arc::clone(&budget),
                Arc::clone(&reads),
            );
            async move {
                let kib = (mf.manifest_length.max(0) as u64)
                    .div_ceil(1024)
                    .clamp(1, MANIFEST_KIB_IN_FLIGHT);
                let permit = budget.acquire_many_owned(kib as u32).await.map_err(|e| {
                    Error::Internal(format!("the manifest read budget closed: {e}"))
                })?;
                tokio::spawn(async move {
                    let _permit = permit;
                    let path = mf.manifest_path.as_str();
                    let bytes = {
                        let _read = read_slot(&reads).await?;
                        crate::format::manifest::read_bytes(&storage, ctx.table(), path).await?
                    };
                    per_manifest(&ctx, &mf, &bytes)
                })
                .await
                .map_err(|e| Error::Internal(format!("a manifest read task failed: {e}")))?
            }
        })
        .buffered(concurrency)
        .boxed()
}

/// What a manifest task needs of its context: the table's name, for errors.
trait ManifestTaskContext {
    fn table(&self) -> &str;
}

impl ManifestTaskContext for FoldContext {
    fn table(&self) -> &str {
        &self.table
    }
}

impl ManifestTaskContext for ListingContext {
    fn table(&self) -> &str {
        &self.table
    }
}

fn fold_manifest(ctx: &FoldContext, mf: &ManifestFile, bytes: &[u8]) -> Result<ManifestFold> {
    let mut fold = ManifestFold::default();
    // The fold's partition slot of each of the manifest's tuples, and of each key.
    let mut slot_of: HashMap<usize, usize> = HashMap::new();
    let mut slot_by_key: HashMap<Arc<str>, usize> = HashMap::new();
    crate::format::summary::for_each_summary(&ctx.table, mf, bytes, |e| {
        if e.status == ManifestStatus::Deleted {
            fold.deleted_entries += 1;
            return;
        }
        fold.live_entries += 1;
        let slot = *slot_of.entry(e.partition_index).or_insert_with(|| {
            let values = ctx.decoders.get(&e.spec_id).map_or_else(Vec::new, |d| {
                partition::tuple(&d.info.fields, &d.transforms, &d.source_types, e.partition)
            });
            // Keyed by the decoded tuple's path, as the planner and the compactor select
            // partitions: raw tuples that decode alike (one with fields its spec does not
            // have, say) are one partition, never two sharing a path (found by fuzzing).
            let key: Arc<str> = format!("{}/{}", e.spec_id, partition::path_of(&values)).into();
            *slot_by_key.entry(key.clone()).or_insert_with(|| {
                fold.parts.push((
                    key,
                    PartitionAcc {
                        spec_id: e.spec_id,
                        values: values.into(),
                        ..PartitionAcc::default()
                    },
                ));
                fold.parts.len() - 1
            })
        });
        let acc = &mut fold.parts[slot].1;
        if let Some(ts) = e.snapshot_id.and_then(|id| ctx.snapshot_ts.get(&id)) {
            acc.last_modified_ms = Some(acc.last_modified_ms.map_or(*ts, |m| m.max(*ts)));
        }
        match delete_kind(e.content, e.format == DataFileFormat::Puffin) {
            None => {
                acc.data.add(e.bytes, e.records, ctx.small_file_threshold);
                fold.data_files
                    .add(e.bytes, e.records, ctx.small_file_threshold);
                if let Some(seq) = e.sequence_number {
                    acc.min_data_seq = Some(acc.min_data_seq.map_or(seq, |m| m.min(seq)));
                }
                if ctx.with_deletes {
                    fold.live_data_paths.push(path_hash(e.path));
                }
                fold.data_file_count += 1;
                match fold.bounded.iter_mut().find(|(ids, _)| ids == e.bounded) {
                    Some((_, n)) => *n += 1,
                    None => fold.bounded.push((e.bounded.to_vec(), 1)),
                }
            }
            Some(kind) => {
                let stats = match kind {
                    DeleteKind::Position => &mut acc.deletes.position,
                    DeleteKind::Equality => &mut acc.deletes.equality,
                    DeleteKind::Vector => &mut acc.deletes.deletion_vectors,
                };
                stats.files += 1;
                // A DV's bytes are its blob inside a shared Puffin file.
                let bytes = e.content_size.map_or(e.bytes, |s| s.max(0) as u64);
                stats.bytes = stats.bytes.saturating_add(bytes);
                stats.records = stats.records.saturating_add(e.records);
                let referenced = (kind != DeleteKind::Equality)
                    .then_some(e.referenced)
                    .flatten()
                    .map(path_hash);
                acc.pending_deletes
                    .push((kind, e.sequence_number, referenced));
            }
        }
    })?;
    Ok(fold)
}

impl ManifestFold {
    /// Whether its partition values come back from JSON as they are (not NaN or infinite).
    pub(super) fn round_trips(&self) -> bool {
        self.parts.iter().all(|(_, acc)| {
            acc.values.iter().all(|v| match v.value {
                super::model::PartitionValue::Float(f) => f.is_finite(),
                _ => true,
            })
        })
    }
}

#[derive(Default)]
pub(super) struct PartitionAcc {
    pub(super) spec_id: i32,
    /// Shared: a memo hands the same partition's values to every fold that names it.
    pub(super) values: Arc<[PartitionFieldValue]>,
    pub(super) data: FileStats,
    pub(super) deletes: DeleteStats,
    pub(super) last_modified_ms: Option<i64>,
    pub(super) min_data_seq: Option<i64>,
    // (kind, seq, referenced data file's path hash) of delete files, resolved to dangling after
    // the walk.
    pub(super) pending_deletes: Vec<(DeleteKind, Option<i64>, Option<u64>)>,
}

impl PartitionAcc {
    /// Fold in `other`, a later part of the same partition.
    fn merge(&mut self, other: PartitionAcc) {
        self.data.merge(&other.data);
        self.deletes.merge(&other.deletes);
        self.last_modified_ms = self.last_modified_ms.max(other.last_modified_ms);
        self.min_data_seq = match (self.min_data_seq, other.min_data_seq) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.pending_deletes.extend(other.pending_deletes);
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum DeleteKind {
    Position,
    Equality,
    Vector,
}

fn delete_kind(content: DataContentType, puffin: bool) -> Option<DeleteKind> {
    match content {
        DataContentType::Data => None,
        DataContentType::EqualityDeletes => Some(DeleteKind::Equality),
        DataContentType::PositionDeletes => Some(if puffin {
            DeleteKind::Vector
        } else {
            DeleteKind::Position
        }),
    }
}

fn content_name(kind: Option<DeleteKind>) -> &'static str {
    match kind {
        None => "data",
        Some(DeleteKind::Position) => "position_deletes",
        Some(DeleteKind::Equality) => "equality_deletes",
        Some(DeleteKind::Vector) => "deletion_vector",
    }
}

fn owned_file(f: &super::arrow::FileRow<'_>) -> FileEntry {
    FileEntry {
        path: f.path.to_string(),
        content: f.content.to_string(),
        format: f.format.to_string(),
        spec_id: f.spec_id,
        partition: f.partition.to_string(),
        records: f.records,
        size_bytes: f.size_bytes,
        sequence_number: f.sequence_number,
        snapshot_id: f.snapshot_id,
        manifest: f.manifest.to_string(),
        referenced_data_file: f.referenced_data_file.map(str::to_string),
    }
}

fn format_name(f: DataFileFormat) -> String {
    f.to_string().to_ascii_lowercase()
}

/// Branches and tags. `TableMetadata` has no public accessor for all refs, so they are read
/// back from its (spec-conformant) serialized form.
fn table_refs(md: &TableMetadata) -> Vec<(String, iceberg::spec::SnapshotReference)> {
    crate::format::table_refs(md)
        .unwrap_or_default()
        .into_iter()
        .collect()
}

/// Scan a loaded table.
#[allow(clippy::too_many_lines)] // one pass over the metadata, kept in one place on purpose
pub async fn scan_loaded(
    table: &LoadedTable,
    catalog: &str,
    options: &ScanOptions,
    now_ms: i64,
) -> Result<TableScan> {
    options.validate()?;
    let started = Instant::now();
    let md = table.metadata.as_ref();
    let name = table.id.to_string();
    // Fresh counters so this table's reads are attributed to it even in a concurrent fleet scan.
    let storage = table.storage.with_fresh_counters();
    let version = md.format_version();
    let write = write_settings(md, options);
    let (schema, leaves) = schema_info(md);
    let (partitioning, decoders) = spec_decoders(md);

    // --- snapshots and their manifest lists -------------------------------------------
    let mut snaps: Vec<_> = md.snapshots().collect();
    snaps.sort_by_key(|s| (s.timestamp_ms(), s.sequence_number()));
    let current_id = md.current_snapshot_id();
    let limit = options.max_snapshot_lists.unwrap_or(usize::MAX);
    let to_read: Vec<(i64, String)> = snaps
        .iter()
        .rev()
        .enumerate()
        .filter(|(i, s)| *i < limit || Some(s.snapshot_id()) == current_id)
        .map(|(_, s)| (s.snapshot_id(), s.manifest_list().to_string()))
        .collect();
    let mut lists: HashMap<i64, ListRead> = HashMap::new();
    let mut distinct: HashMap<u64, u64, std::hash::BuildHasherDefault<IdHasher>> =
        HashMap::default();
    // With a cache directory, what the memo has is taken from it: every list but the current
    // snapshot's (always read: it names the manifests to fold), and the folds of manifests.
    let table_uuid = md.uuid().to_string();
    let memo_path = options
        .cache_dir
        .as_deref()
        .map(|dir| memo::path_of(dir, &table_uuid));
    let mut memo = match &memo_path {
        Some(path) => {
            let (path, uuid) = (path.clone(), table_uuid.clone());
            tokio::task::spawn_blocking(move || memo::load(&path, &uuid))
                .await
                .unwrap_or_default()
        }
        None => memo::Memo::default(),
    };
    // The lists read now go into the new memo as they arrive; those taken from the memo are
    // added to it only if it is written (something changed).
    let mut writer = memo_path.as_ref().map(|_| memo::MemoWriter::new());
    let mut changed = false;
    // Reads in flight, lists and manifests together.
    let reads = Arc::new(tokio::sync::Semaphore::new(options.concurrency));

    // The current snapshot's list first: its manifests are folded while the other lists are
    // read, so on object storage the two overlap instead of waiting on each other.
    let current_list = current_id.and_then(|id| {
        to_read
            .iter()
            .find(|(s, _)| *s == id)
            .map(|(_, location)| (id, location.clone()))
    });
    let mut current_manifests: Vec<ManifestFile> = Vec::new();
    if let Some((id, location)) = &current_list {
        let (bytes, list) = {
            let _permit = read_slot(&reads).await?;
            read_manifest_list(&storage, &name, location, version).await?
        };
        for m in &list {
            distinct.insert(path_hash(&m.manifest_path), m.manifest_length.max(0) as u64);
        }
        if let Some(w) = writer.as_mut() {
            changed |= memo.lists.remove(location).is_none();
            w.list(
                location,
                bytes,
                list.iter()
                    .map(|m| (path_hash(&m.manifest_path), m.manifest_length.max(0) as u64)),
            );
        }
        lists.insert(
            *id,
            ListRead {
                bytes,
                manifests: list.len(),
            },
        );
        current_manifests = list;
    }

    let snapshot_ts: HashMap<i64, i64> = snaps
        .iter()
        .map(|s| (s.snapshot_id(), s.timestamp_ms()))
        .collect();

    let mut manifests = ManifestStats::default();
    // --- the current snapshot, file by file ---------------------------------------------
    let small_manifest = (write.manifest_target_size_bytes / 8).max(1);
    for m in &current_manifests {
        manifests.count += 1;
        match m.content {
            ManifestContentType::Data => manifests.data_manifests += 1,
            ManifestContentType::Deletes => manifests.delete_manifests += 1,
        }
        let len = m.manifest_length.max(0) as u64;
        manifests.total_bytes = manifests.total_bytes.saturating_add(len);
        if len < small_manifest {
            manifests.small_count += 1;
        }
    }
    // Each manifest is folded on a task of its own into per-partition figures, at most
    // `concurrency` at a time, and merged here in list order: nothing holds every entry of the
    // table, and no entry is built beyond what the fold reads (`format::summary`).
    // Live data files by path hash, for delete files that name theirs (only with deletes).
    let with_deletes = manifests.delete_manifests > 0;
    let ctx = Arc::new(FoldContext {
        table: name.clone(),
        decoders,
        snapshot_ts,
        small_file_threshold: write.small_file_threshold_bytes,
        with_deletes,
        memo: memo_path.is_some(),
    });
    // Folds the memo has (made under the same key, every snapshot they date by still here)
    // are taken from it; the other manifests are read.
    let fold_key = memo::FoldKey {
        format_version: version as u8,
        small_file_threshold: write.small_file_threshold_bytes,
        with_deletes,
        specs: fnv1a(&serde_json::to_vec(&partitioning).unwrap_or_default()),
    };
    let snapshot_ids: Vec<i64> = snaps.iter().map(|s| s.snapshot_id()).collect();
    memo.keep_folds_if(&fold_key, &snapshot_ids);
    let mut kept = Vec::new();
    let mut to_fold = Vec::with_capacity(current_manifests.len());
    for mf in std::mem::take(&mut current_manifests) {
        if memo_path.is_some() {
            let id = memo::FoldId::of(&mf);
            if let Some(fold) = memo.take_fold(&id) {
                kept.push(Ok((Some(id), fold)));
                continue;
            }
        }
        to_fold.push(mf);
    }
    changed |= !to_fold.is_empty() || memo.has_folds();
    let mut fold_writer = memo_path.as_ref().map(|_| memo::MemoWriter::new());
    let mut folds = futures::stream::iter(kept)
        .chain(manifest_tasks(
            storage.clone(),
            to_fold,
            Arc::clone(&ctx),
            options.concurrency,
            Arc::clone(&reads),
            |ctx, mf, bytes| {
                let id = ctx.memo.then(|| memo::FoldId::of(mf));
                Ok((id, fold_manifest(ctx, mf, bytes)?))
            },
        ))
        .boxed();

    // The other lists: from the memo, or read (each folded in as it arrives: a history of
    // thousands of snapshots, each listing thousands of manifests, is never held at once).
    let mut kept_lists: Vec<(String, memo::MemoList)> = Vec::new();
    let mut locations: HashMap<i64, String> = HashMap::new();
    let mut to_fetch = Vec::with_capacity(to_read.len());
    let mut seen = vec![false; memo.manifests.len()];
    for (id, location) in to_read {
        if Some(id) == current_id {
            continue;
        }
        if let Some(kept) = memo.lists.remove(&location) {
            for i in &kept.indices {
                seen[*i as usize] = true;
            }
            lists.insert(
                id,
                ListRead {
                    bytes: kept.bytes,
                    manifests: kept.indices.len(),
                },
            );
            kept_lists.push((location, kept));
            continue;
        }
        if memo_path.is_some() {
            changed = true;
            locations.insert(id, location.clone());
        }
        to_fetch.push((id, location));
    }
    for (seen, (hash, len)) in seen.into_iter().zip(&memo.manifests) {
        if seen {
            distinct.insert(*hash, *len);
        }
    }
    // Lists no longer in the table are dropped from the memo.
    changed |= !memo.lists.is_empty();
    memo.lists.clear();
    let mut list_results = list_reads(
        &storage,
        &name,
        to_fetch,
        version,
        options.concurrency,
        Arc::clone(&reads),
    );
    let other_lists = async {
        while let Some((id, res)) = list_results.next().await {
            match res {
                Ok(paths) => {
                    for m in &paths.manifests {
                        distinct.insert(m.hash, m.length);
                    }
                    if let (Some(w), Some(location)) = (writer.as_mut(), locations.get(&id)) {
                        w.list(
                            location,
                            paths.bytes,
                            paths.manifests.iter().map(|m| (m.hash, m.length)),
                        );
                    }
                    lists.insert(
                        id,
                        ListRead {
                            bytes: paths.bytes,
                            manifests: paths.manifests.len(),
                        },
                    );
                }
                // An old list that cannot be read is reported (manifest_count = None) but
                // does not fail the scan.
                Err(e) => {
                    tracing::warn!(table = %name, snapshot_id = id, error = %e, "manifest list unreadable");
                }
            }
        }
    };

    let mut parts: BTreeMap<Arc<str>, PartitionAcc> = BTreeMap::new();
    let mut data_files = FileStats::default();
    let mut live_data_paths = PathHashes::default();
    let mut stats_cols: HashMap<i32, u64> = HashMap::new();
    let mut coverage = ColumnStatsCoverage {
        leaf_columns: leaves.len() as u64,
        ..ColumnStatsCoverage::default()
    };
    let leaf_set: HashSet<i32> = leaves.iter().copied().collect();
    let current_folds = async {
        while let Some(fold) = folds.next().await {
            let (id, fold) = fold?;
            if let (Some(w), Some(id)) = (fold_writer.as_mut(), &id) {
                w.fold(id, &fold);
            }
            manifests.deleted_entries += fold.deleted_entries;
            manifests.live_entries += fold.live_entries;
            if fold.live_entries == 0 {
                manifests.no_live_entries += 1;
            }
            data_files.merge(&fold.data_files);
            live_data_paths.extend(fold.live_data_paths);
            coverage.files += fold.data_file_count;
            for (bounded, files) in fold.bounded {
                let bounded: Vec<i32> = bounded
                    .into_iter()
                    .filter(|id| leaf_set.contains(id))
                    .collect();
                if !bounded.is_empty() {
                    coverage.files_with_bounds += files;
                    for id in bounded {
                        *stats_cols.entry(id).or_default() += files;
                    }
                }
            }
            for (key, acc) in fold.parts {
                match parts.entry(key) {
                    std::collections::btree_map::Entry::Vacant(v) => {
                        v.insert(acc);
                    }
                    std::collections::btree_map::Entry::Occupied(mut o) => o.get_mut().merge(acc),
                }
            }
        }
        Ok::<_, Error>(())
    };
    let ((), folded) = futures::future::join(other_lists, current_folds).await;
    folded?;
    drop((folds, list_results));

    let snapshot_infos: Vec<SnapshotInfo> = snaps
        .iter()
        .map(|s| {
            let list = lists.get(&s.snapshot_id());
            let summary = &s.summary().additional_properties;
            let num = |k: &str| summary.get(k).and_then(|v| v.parse::<u64>().ok());
            SnapshotInfo {
                snapshot_id: s.snapshot_id(),
                parent_id: s.parent_snapshot_id(),
                sequence_number: s.sequence_number(),
                timestamp_ms: s.timestamp_ms(),
                operation: s.summary().operation.as_str().to_string(),
                manifest_count: list.map(|l| l.manifests as u32),
                manifest_list_bytes: list.map(|l| l.bytes),
                added_data_files: num("added-data-files"),
                added_records: num("added-records"),
                removed_files_bytes: num("removed-files-size"),
            }
        })
        .collect();
    let mut refs: Vec<RefInfo> = table_refs(md)
        .iter()
        .map(|(name, r)| {
            let (kind, max_ref_age_ms, max_snapshot_age_ms, min_snapshots_to_keep) =
                match &r.retention {
                    iceberg::spec::SnapshotRetention::Branch {
                        min_snapshots_to_keep,
                        max_snapshot_age_ms,
                        max_ref_age_ms,
                    } => (
                        "branch",
                        *max_ref_age_ms,
                        *max_snapshot_age_ms,
                        min_snapshots_to_keep.map(i64::from),
                    ),
                    iceberg::spec::SnapshotRetention::Tag { max_ref_age_ms } => {
                        ("tag", *max_ref_age_ms, None, None)
                    }
                };
            RefInfo {
                name: name.clone(),
                kind: kind.to_string(),
                snapshot_id: r.snapshot_id,
                max_ref_age_ms,
                max_snapshot_age_ms,
                min_snapshots_to_keep,
            }
        })
        .collect();
    refs.sort_by(|a, b| a.name.cmp(&b.name));

    // --- manifests across snapshots ------------------------------------------------------
    for l in lists.values() {
        manifests.manifest_list_bytes = manifests.manifest_list_bytes.saturating_add(l.bytes);
    }
    manifests.distinct_across_snapshots = distinct.len() as u64;
    manifests.distinct_bytes_across_snapshots =
        distinct.values().fold(0, |a, b| a.saturating_add(*b));
    if !lists.is_empty() {
        manifests.mean_per_snapshot =
            lists.values().map(|l| l.manifests).sum::<usize>() as f64 / lists.len() as f64;
    }

    if let (Some(path), Some(mut w), Some(folds)) = (memo_path, writer, fold_writer) {
        changed |= folds.changed;
        if changed {
            for (location, kept) in &kept_lists {
                w.list_kept(&memo.manifests, location, kept);
            }
            w.take_folds(folds);
            let uuid = table_uuid.clone();
            let written = tokio::task::spawn_blocking(move || {
                let result = w.write(&path, &uuid, fold_key, snapshot_ids);
                (path, result)
            })
            .await;
            if let Ok((path, Err(e))) = written {
                tracing::warn!(table = %name, memo = %path.display(), error = %e, "scan memo not written");
            }
        }
    }
    drop((memo, kept_lists));
    let decoders = &ctx.decoders;
    coverage.columns_with_bounds = stats_cols
        .values()
        .filter(|n| **n == coverage.files_with_bounds && **n > 0)
        .count() as u64;

    // Equality deletes in an unpartitioned spec apply table-wide.
    let global_min_seq = parts.values().filter_map(|p| p.min_data_seq).min();
    let mut delete_files = DeleteStats::default();
    let mut partitions = Vec::with_capacity(parts.len());
    for (_, mut acc) in parts {
        let global_scope = decoders
            .get(&acc.spec_id)
            .is_none_or(|d| d.info.is_unpartitioned());
        for (kind, seq, referenced) in std::mem::take(&mut acc.pending_deletes) {
            let dangling = match kind {
                DeleteKind::Position | DeleteKind::Vector => {
                    referenced.is_some_and(|r| !live_data_paths.contains(&r))
                        || match (seq, acc.min_data_seq) {
                            // Applies to data files with data seq <= its own.
                            (Some(s), Some(min)) => s < min,
                            (_, None) => true,
                            (None, Some(_)) => false,
                        }
                }
                DeleteKind::Equality => {
                    let min = if global_scope {
                        global_min_seq
                    } else {
                        acc.min_data_seq
                    };
                    match (seq, min) {
                        // Applies to data files with data seq < its own.
                        (Some(s), Some(min)) => s <= min,
                        (_, None) => true,
                        (None, Some(_)) => false,
                    }
                }
            };
            if dangling {
                match kind {
                    DeleteKind::Position => acc.deletes.position.dangling += 1,
                    DeleteKind::Equality => acc.deletes.equality.dangling += 1,
                    DeleteKind::Vector => acc.deletes.deletion_vectors.dangling += 1,
                }
            }
        }
        delete_files.merge(&acc.deletes);
        partitions.push(PartitionStats {
            spec_id: acc.spec_id,
            path: partition::path_of(&acc.values),
            values: acc.values.to_vec(),
            data_files: acc.data,
            delete_files: acc.deletes,
            last_modified_ms: acc.last_modified_ms,
            min_data_sequence_number: acc.min_data_seq,
        });
    }
    partitions.sort_by(|a, b| (a.spec_id, &a.path).cmp(&(b.spec_id, &b.path)));

    let metadata_files = MetadataFileStats {
        previous_versions: md.metadata_log().len(),
        current_bytes: None,
        statistics_files: md.statistics_iter().count(),
        partition_statistics_files: md.partition_statistics_iter().count(),
    };

    Ok(TableScan {
        catalog: catalog.to_string(),
        table: table.id.clone(),
        metadata_location: table.metadata_location.clone(),
        location: md.location().to_string(),
        table_uuid: md.uuid().to_string(),
        format_version: match version {
            FormatVersion::V1 => 1,
            FormatVersion::V2 => 2,
            FormatVersion::V3 => 3,
        },
        scanned_at_ms: now_ms,
        last_updated_ms: md.last_updated_ms(),
        current_snapshot_id: current_id,
        properties: md
            .properties()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        write,
        schema,
        partitioning,
        sort_order: sort_order_info(md),
        snapshots: SnapshotStats {
            count: snaps.len(),
            oldest_ms: snaps.first().map(|s| s.timestamp_ms()),
            newest_ms: snaps.last().map(|s| s.timestamp_ms()),
            refs,
            snapshots: snapshot_infos,
        },
        manifests,
        data_files,
        delete_files,
        metadata_files,
        column_stats: coverage,
        partitions,
        io: storage.counters().snapshot(),
        duration_ms: started.elapsed().as_millis() as u64,
    })
}

/// Every live file of the current snapshot (data and deletes), from manifests only. The whole
/// listing is held at once; [`file_batches`] streams it.
pub async fn list_files(table: &LoadedTable, options: &ScanOptions) -> Result<Vec<FileEntry>> {
    let mut out = Vec::new();
    let mut manifests = file_manifests(table, options, |ctx, mf, bytes| {
        let mut files = Vec::new();
        for_each_file(ctx, mf, bytes, |f| files.push(owned_file(&f)))?;
        Ok(files)
    })
    .await?;
    while let Some(files) = manifests.next().await {
        out.extend(files?);
    }
    Ok(out)
}

/// Every live file of the current snapshot (data and deletes) as Arrow record batches of
/// [`super::arrow::files_schema`], one per manifest, in manifest-list order. At most
/// `options.concurrency` manifests are read ahead, so a listing of any size takes bounded memory.
pub async fn file_batches(
    table: &LoadedTable,
    options: &ScanOptions,
) -> Result<futures::stream::BoxStream<'static, Result<arrow_array::RecordBatch>>> {
    file_manifests(table, options, |ctx, mf, bytes| {
        let mut rows = super::arrow::FileRows::new(ctx.table.clone());
        for_each_file(ctx, mf, bytes, |f| rows.push(&f))?;
        rows.finish()
    })
    .await
}

/// What the listing of one table's files shares across its manifests.
struct ListingContext {
    table: String,
    decoders: HashMap<i32, SpecDecoder>,
}

/// `per_manifest` over every manifest of the current snapshot, each on a task of its own,
/// `options.concurrency` at a time, in list order.
async fn file_manifests<T: Send + 'static>(
    table: &LoadedTable,
    options: &ScanOptions,
    per_manifest: fn(&ListingContext, &ManifestFile, &[u8]) -> Result<T>,
) -> Result<futures::stream::BoxStream<'static, Result<T>>> {
    options.validate()?;
    let md = table.metadata.as_ref();
    let name = table.id.to_string();
    let Some(snapshot) = md.current_snapshot() else {
        return Ok(futures::stream::empty().boxed());
    };
    let (_, manifests) = read_manifest_list(
        &table.storage,
        &name,
        snapshot.manifest_list(),
        md.format_version(),
    )
    .await?;
    let ctx = Arc::new(ListingContext {
        table: name,
        decoders: spec_decoders(md).1,
    });
    Ok(manifest_tasks(
        table.storage.clone(),
        manifests,
        ctx,
        options.concurrency,
        Arc::new(tokio::sync::Semaphore::new(options.concurrency)),
        per_manifest,
    ))
}

/// Every live file of the manifest `bytes` (which `mf` names) as a row of the listing.
fn for_each_file(
    ctx: &ListingContext,
    mf: &ManifestFile,
    bytes: &[u8],
    mut visit: impl FnMut(super::arrow::FileRow<'_>),
) -> Result<()> {
    let mut partitions: HashMap<usize, String> = HashMap::new();
    crate::format::summary::for_each_summary(&ctx.table, mf, bytes, |e| {
        if e.status == ManifestStatus::Deleted {
            return;
        }
        let partition = partitions.entry(e.partition_index).or_insert_with(|| {
            ctx.decoders.get(&e.spec_id).map_or_else(String::new, |d| {
                partition::path_of(&partition::tuple(
                    &d.info.fields,
                    &d.transforms,
                    &d.source_types,
                    e.partition,
                ))
            })
        });
        let kind = delete_kind(e.content, e.format == DataFileFormat::Puffin);
        let format = format_name(e.format);
        visit(super::arrow::FileRow {
            path: e.path,
            content: content_name(kind),
            format: &format,
            spec_id: e.spec_id,
            partition,
            records: e.records,
            size_bytes: e.bytes,
            sequence_number: e.sequence_number,
            snapshot_id: e.snapshot_id,
            manifest: mf.manifest_path.as_str(),
            referenced_data_file: e.referenced,
        });
    })
}
