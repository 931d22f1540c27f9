use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{
    DataContentType, DataFileFormat, FormatVersion, ManifestContentType, ManifestEntry,
    ManifestFile, ManifestStatus, NestedFieldRef, PrimitiveLiteral, PrimitiveType, Schema,
    TableMetadata, Transform, Type,
};
use serde::{Deserialize, Serialize};

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

/// Field id of `file_path` in position delete files (Iceberg spec).
const POS_DELETE_FILE_PATH_ID: i32 = 2_147_483_546;

/// Options for a scan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ScanOptions {
    /// Manifest and manifest-list reads in flight at once.
    pub concurrency: usize,
    /// Read the manifest lists of at most this many newest snapshots (`None`: all).
    pub max_snapshot_lists: Option<usize>,
    /// Override `write.target-file-size-bytes`.
    pub target_file_size_bytes: Option<u64>,
    /// A file is small below this fraction of the target size (Spark's `min-file-size-bytes`
    /// defaults to 75% of the target).
    pub small_file_ratio: f64,
}

impl Default for ScanOptions {
    fn default() -> Self {
        Self {
            concurrency: 16,
            max_snapshot_lists: None,
            target_file_size_bytes: None,
            small_file_ratio: 0.75,
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

/// A live manifest entry with inherited sequence numbers resolved.
pub(crate) struct LiveEntry {
    pub(crate) entry: Arc<ManifestEntry>,
    pub(crate) data_sequence_number: Option<i64>,
    pub(crate) snapshot_id: Option<i64>,
    pub(crate) spec_id: i32,
    pub(crate) manifest: Arc<str>,
}

/// What one manifest contributed.
pub(crate) struct ManifestRead {
    pub(crate) live: Vec<LiveEntry>,
    pub(crate) deleted_entries: u64,
}

pub(crate) async fn read_manifest(
    storage: &ObjectStorage,
    table: &str,
    mf: &ManifestFile,
) -> Result<ManifestRead> {
    let manifest = crate::format::manifest::read(storage, table, mf).await?;
    let spec_id = manifest.metadata().partition_spec().spec_id();
    let path: Arc<str> = Arc::from(mf.manifest_path.as_str());
    let (entries, _) = manifest.into_parts();
    let mut live = Vec::with_capacity(entries.len());
    let mut deleted = 0;
    for entry in entries {
        if entry.status == ManifestStatus::Deleted {
            deleted += 1;
            continue;
        }
        // Inherited from the list entry by the reader (`format::manifest::Inheritance`).
        let (data_sequence_number, snapshot_id) = (entry.sequence_number, entry.snapshot_id);
        live.push(LiveEntry {
            entry,
            data_sequence_number,
            snapshot_id,
            spec_id,
            manifest: Arc::clone(&path),
        });
    }
    Ok(ManifestRead {
        live,
        deleted_entries: deleted,
    })
}

/// The manifest lists at `lists` (`(snapshot id, location)`), `concurrency` at a time, as they
/// arrive: the current snapshot's (`current`) whole, the others reduced to their manifests' path
/// hashes and lengths (the fast reader: no `ManifestFile` per entry).
fn list_reads<'a>(
    storage: &'a ObjectStorage,
    table: &'a str,
    lists: Vec<(i64, String)>,
    current: Option<i64>,
    version: FormatVersion,
    concurrency: usize,
) -> futures::stream::BoxStream<'a, (i64, Result<Listed>)> {
    futures::stream::iter(lists)
        .map(move |(id, loc)| {
            // A task of its own: lists decode on every worker thread, not on the scan's.
            let (storage, table) = (storage.clone(), table.to_string());
            async move {
                let read = tokio::spawn(async move {
                    if Some(id) == current {
                        read_manifest_list(&storage, &table, &loc, version)
                            .await
                            .map(|(bytes, list)| Listed::Whole(bytes, list))
                    } else {
                        crate::format::manifest_list::read_paths(&storage, &table, &loc, version)
                            .await
                            .map(Listed::Paths)
                    }
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

/// A manifest list as the scan reads it.
enum Listed {
    /// The current snapshot's: its size and manifests.
    Whole(u64, Vec<ManifestFile>),
    /// Another snapshot's: its size, its manifests' path hashes and lengths.
    Paths(crate::format::manifest_list::ListedPaths),
}

/// The manifests `manifests`, `concurrency` at a time, in list order.
fn manifest_reads<'a>(
    storage: &'a ObjectStorage,
    table: &'a str,
    manifests: &'a [ManifestFile],
    concurrency: usize,
) -> futures::stream::BoxStream<'a, Result<ManifestRead>> {
    futures::stream::iter(manifests)
        .map(move |mf| {
            // A task of its own: manifests decode on every worker thread, not on the scan's.
            let (storage, table, mf) = (storage.clone(), table.to_string(), mf.clone());
            async move {
                tokio::spawn(async move { read_manifest(&storage, &table, &mf).await })
                    .await
                    .map_err(|e| Error::Internal(format!("a manifest read task failed: {e}")))?
            }
        })
        .buffered(concurrency)
        .boxed()
}

/// Read every manifest of the current snapshot with bounded concurrency, in list order.
pub(crate) async fn read_current_manifests(
    storage: &ObjectStorage,
    table: &str,
    manifests: &[ManifestFile],
    concurrency: usize,
) -> Result<Vec<(ManifestFile, ManifestRead)>> {
    futures::stream::iter(manifests.iter().cloned())
        .map(|mf| async move {
            let read = read_manifest(storage, table, &mf).await?;
            Ok::<_, Error>((mf, read))
        })
        .buffered(concurrency)
        .try_collect()
        .await
}

#[derive(Default)]
struct PartitionAcc {
    spec_id: i32,
    values: Vec<PartitionFieldValue>,
    data: FileStats,
    deletes: DeleteStats,
    last_modified_ms: Option<i64>,
    min_data_seq: Option<i64>,
    // (kind, seq, referenced data file's path hash) of delete files, resolved to dangling after
    // the walk.
    pending_deletes: Vec<(DeleteKind, Option<i64>, Option<u64>)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum DeleteKind {
    Position,
    Equality,
    Vector,
}

fn delete_kind(entry: &ManifestEntry) -> Option<DeleteKind> {
    match entry.content_type() {
        DataContentType::Data => None,
        DataContentType::EqualityDeletes => Some(DeleteKind::Equality),
        DataContentType::PositionDeletes => {
            Some(if entry.file_format() == DataFileFormat::Puffin {
                DeleteKind::Vector
            } else {
                DeleteKind::Position
            })
        }
    }
}

fn referenced_file(entry: &ManifestEntry) -> Option<String> {
    let df = entry.data_file();
    if let Some(r) = df.referenced_data_file() {
        return Some(r);
    }
    let lo = df.lower_bounds().get(&POS_DELETE_FILE_PATH_ID)?;
    let hi = df.upper_bounds().get(&POS_DELETE_FILE_PATH_ID)?;
    match (lo.literal(), hi.literal()) {
        (PrimitiveLiteral::String(a), PrimitiveLiteral::String(b)) if a == b => Some(a.clone()),
        _ => None,
    }
}

fn content_name(entry: &ManifestEntry) -> &'static str {
    match delete_kind(entry) {
        None => "data",
        Some(DeleteKind::Position) => "position_deletes",
        Some(DeleteKind::Equality) => "equality_deletes",
        Some(DeleteKind::Vector) => "deletion_vector",
    }
}

fn format_name(f: DataFileFormat) -> String {
    f.to_string().to_ascii_lowercase()
}

/// Branches and tags. `TableMetadata` has no public accessor for all refs, so they are read
/// back from its (spec-conformant) serialized form.
fn table_refs(md: &TableMetadata) -> Vec<(String, iceberg::spec::SnapshotReference)> {
    let refs = serde_json::to_value(md)
        .ok()
        .and_then(|v| v.get("refs").cloned())
        .and_then(|r| {
            serde_json::from_value::<HashMap<String, iceberg::spec::SnapshotReference>>(r).ok()
        })
        .unwrap_or_default();
    let mut refs: Vec<_> = refs.into_iter().collect();
    if refs.is_empty() {
        // v1 metadata may carry only `current-snapshot-id`: that is the main branch.
        if let Some(main) = md.snapshot_for_ref(iceberg::spec::MAIN_BRANCH) {
            refs.push((
                iceberg::spec::MAIN_BRANCH.to_string(),
                iceberg::spec::SnapshotReference {
                    snapshot_id: main.snapshot_id(),
                    retention: iceberg::spec::SnapshotRetention::Branch {
                        min_snapshots_to_keep: None,
                        max_snapshot_age_ms: None,
                        max_ref_age_ms: None,
                    },
                },
            ));
        }
    }
    refs
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
    // Each list is folded in as it arrives: a history of thousands of snapshots, each listing
    // thousands of manifests, is never held at once; only the current snapshot's list is kept.
    let mut list_results = list_reads(
        &storage,
        &name,
        to_read,
        current_id,
        version,
        options.concurrency,
    );
    let mut lists: HashMap<i64, ListRead> = HashMap::new();
    let mut current_manifests: Vec<ManifestFile> = Vec::new();
    let mut distinct: HashMap<u64, u64, std::hash::BuildHasherDefault<IdHasher>> =
        HashMap::default();
    while let Some((id, res)) = list_results.next().await {
        match res {
            Ok(Listed::Whole(bytes, list)) => {
                for m in &list {
                    distinct.insert(path_hash(&m.manifest_path), m.manifest_length.max(0) as u64);
                }
                lists.insert(
                    id,
                    ListRead {
                        bytes,
                        manifests: list.len(),
                    },
                );
                current_manifests = list;
            }
            Ok(Listed::Paths(paths)) => {
                for m in &paths.manifests {
                    distinct.insert(m.hash, m.length);
                }
                lists.insert(
                    id,
                    ListRead {
                        bytes: paths.bytes,
                        manifests: paths.manifests.len(),
                    },
                );
            }
            // The current snapshot's list is required; an old one that cannot be read is
            // reported (manifest_count = None) but does not fail the scan.
            Err(e) if Some(id) == current_id => return Err(e),
            Err(e) => {
                tracing::warn!(table = %name, snapshot_id = id, error = %e, "manifest list unreadable");
            }
        }
    }

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
    let snapshot_ts: HashMap<i64, i64> = snaps
        .iter()
        .map(|s| (s.snapshot_id(), s.timestamp_ms()))
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
    let mut manifests = ManifestStats::default();
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
    // Each manifest is folded into the per-partition figures as it arrives (in list order, at
    // most `concurrency` in flight) and dropped: nothing holds every entry of the table.
    let mut reads = manifest_reads(&storage, &name, &current_manifests, options.concurrency);
    // Live data files by path hash, for delete files that name theirs (only with deletes).
    let with_deletes = manifests.delete_manifests > 0;

    let mut parts: BTreeMap<String, PartitionAcc> = BTreeMap::new();
    let mut data_files = FileStats::default();
    let mut live_data_paths = PathHashes::default();
    let mut stats_cols: HashMap<i32, u64> = HashMap::new();
    let mut coverage = ColumnStatsCoverage {
        leaf_columns: leaves.len() as u64,
        ..ColumnStatsCoverage::default()
    };
    let leaf_set: HashSet<i32> = leaves.iter().copied().collect();
    while let Some(read) = reads.next().await {
        let read = read?;
        manifests.deleted_entries += read.deleted_entries;
        manifests.live_entries += read.live.len() as u64;
        if read.live.is_empty() {
            manifests.no_live_entries += 1;
        }
        for le in &read.live {
            let e = le.entry.as_ref();
            let df = e.data_file();
            let decoder = decoders.get(&le.spec_id);
            let values = decoder.map_or_else(Vec::new, |d| {
                partition::tuple(
                    &d.info.fields,
                    &d.transforms,
                    &d.source_types,
                    df.partition(),
                )
            });
            // Keyed by the decoded tuple's path, as the planner and the compactor select
            // partitions: raw tuples that decode alike (one with fields its spec does not
            // have, say) are one partition, never two sharing a path (found by fuzzing).
            let key = format!("{}/{}", le.spec_id, partition::path_of(&values));
            let acc = parts.entry(key).or_insert_with(|| PartitionAcc {
                spec_id: le.spec_id,
                values,
                ..PartitionAcc::default()
            });
            if let Some(ts) = le.snapshot_id.and_then(|id| snapshot_ts.get(&id)) {
                acc.last_modified_ms = Some(acc.last_modified_ms.map_or(*ts, |m| m.max(*ts)));
            }
            let size = df.file_size_in_bytes();
            let records = df.record_count();
            match delete_kind(e) {
                None => {
                    acc.data
                        .add(size, records, write.small_file_threshold_bytes);
                    data_files.add(size, records, write.small_file_threshold_bytes);
                    if let Some(seq) = le.data_sequence_number {
                        acc.min_data_seq = Some(acc.min_data_seq.map_or(seq, |m| m.min(seq)));
                    }
                    if with_deletes {
                        live_data_paths.insert(path_hash(df.file_path()));
                    }
                    coverage.files += 1;
                    let bounded: Vec<i32> = df
                        .lower_bounds()
                        .keys()
                        .filter(|id| df.upper_bounds().contains_key(id) && leaf_set.contains(id))
                        .copied()
                        .collect();
                    if !bounded.is_empty() {
                        coverage.files_with_bounds += 1;
                        for id in bounded {
                            *stats_cols.entry(id).or_default() += 1;
                        }
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
                    let bytes = df.content_size_in_bytes().map_or(size, |s| s.max(0) as u64);
                    stats.bytes = stats.bytes.saturating_add(bytes);
                    stats.records = stats.records.saturating_add(records);
                    let referenced = (kind != DeleteKind::Equality)
                        .then(|| referenced_file(e))
                        .flatten()
                        .map(|r| path_hash(&r));
                    acc.pending_deletes
                        .push((kind, le.data_sequence_number, referenced));
                }
            }
        }
    }
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
            values: acc.values,
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

/// Every live file of the current snapshot (data and deletes), from manifests only.
pub async fn list_files(table: &LoadedTable, options: &ScanOptions) -> Result<Vec<FileEntry>> {
    options.validate()?;
    let md = table.metadata.as_ref();
    let name = table.id.to_string();
    let Some(snapshot) = md.current_snapshot() else {
        return Ok(Vec::new());
    };
    let (_, decoders) = spec_decoders(md);
    let (_, manifests) = read_manifest_list(
        &table.storage,
        &name,
        snapshot.manifest_list(),
        md.format_version(),
    )
    .await?;
    let reads =
        read_current_manifests(&table.storage, &name, &manifests, options.concurrency).await?;
    let mut out = Vec::new();
    for (_, read) in reads {
        for le in read.live {
            let e = le.entry.as_ref();
            let df = e.data_file();
            let partition = decoders.get(&le.spec_id).map_or_else(String::new, |d| {
                partition::path_of(&partition::tuple(
                    &d.info.fields,
                    &d.transforms,
                    &d.source_types,
                    df.partition(),
                ))
            });
            out.push(FileEntry {
                path: df.file_path().to_string(),
                content: content_name(e).to_string(),
                format: format_name(df.file_format()),
                spec_id: le.spec_id,
                partition,
                records: df.record_count(),
                size_bytes: df.file_size_in_bytes(),
                sequence_number: le.data_sequence_number,
                snapshot_id: le.snapshot_id,
                manifest: le.manifest.to_string(),
                referenced_data_file: referenced_file(e),
            });
        }
    }
    Ok(out)
}
