//! The values a scan produces. Plain serde types: stored, diffed, graded and planned from.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::catalog::TableId;
use crate::io::IoSnapshot;

/// Everything Cryo knows about one table, read from its metadata alone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TableScan {
    /// Catalog name.
    pub catalog: String,
    /// Table identifier.
    pub table: TableId,
    /// The `metadata.json` the scan read.
    pub metadata_location: Option<String>,
    /// Table location.
    pub location: String,
    /// Table UUID.
    pub table_uuid: String,
    /// Iceberg format version (1, 2 or 3).
    pub format_version: u8,
    /// When the scan ran (ms since epoch).
    pub scanned_at_ms: i64,
    /// `last-updated-ms` of the metadata.
    pub last_updated_ms: i64,
    /// The current snapshot, if any.
    pub current_snapshot_id: Option<i64>,
    /// Table properties.
    pub properties: BTreeMap<String, String>,
    /// Effective write settings (properties with Iceberg's defaults filled in).
    pub write: WriteSettings,
    /// Current schema.
    pub schema: SchemaInfo,
    /// Partition specs.
    pub partitioning: PartitioningInfo,
    /// Current sort order.
    pub sort_order: SortOrderInfo,
    /// Snapshots and refs.
    pub snapshots: SnapshotStats,
    /// Manifests.
    pub manifests: ManifestStats,
    /// Live data files of the current snapshot.
    pub data_files: FileStats,
    /// Live delete files of the current snapshot, by kind.
    pub delete_files: DeleteStats,
    /// Metadata files: `metadata-log` length and related settings.
    pub metadata_files: MetadataFileStats,
    /// How many data files carry column statistics.
    pub column_stats: ColumnStatsCoverage,
    /// Per-partition figures (spec id + partition value), sorted by spec then key.
    pub partitions: Vec<PartitionStats>,
    /// Storage reads the scan made, by kind of path.
    pub io: IoSnapshot,
    /// Wall time of the scan.
    pub duration_ms: u64,
}

/// Write settings that decide what "well-sized" means.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteSettings {
    /// `write.target-file-size-bytes` (default 512 MiB).
    pub target_file_size_bytes: u64,
    /// Files below this are small (default 75% of the target, as Spark's `min-file-size-bytes`).
    pub small_file_threshold_bytes: u64,
    /// `write.parquet.compression-codec`, if set.
    pub parquet_codec: Option<String>,
    /// `write.format.default` (default `parquet`).
    pub file_format: String,
    /// `write.delete.mode` / `write.update.mode` / `write.merge.mode` (`copy-on-write` default).
    pub delete_mode: String,
    /// `write.update.mode`.
    pub update_mode: String,
    /// `write.merge.mode`.
    pub merge_mode: String,
    /// `commit.manifest.target-size-bytes` (default 8 MiB).
    pub manifest_target_size_bytes: u64,
    /// `history.expire.max-snapshot-age-ms` (default 5 days).
    pub max_snapshot_age_ms: i64,
    /// `history.expire.min-snapshots-to-keep` (default 1).
    pub min_snapshots_to_keep: u32,
    /// `write.metadata.previous-versions-max` (default 100).
    pub metadata_previous_versions_max: u32,
    /// `write.metadata.delete-after-commit.enabled` (default false).
    pub metadata_delete_after_commit: bool,
    /// `write.metadata.metrics.default`, if set.
    pub metrics_default: Option<String>,
}

/// The current schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaInfo {
    /// Current schema id.
    pub schema_id: i32,
    /// Number of schemas in the metadata (evolution history).
    pub schema_count: usize,
    /// Top-level columns.
    pub columns: Vec<ColumnInfo>,
    /// Primitive leaf columns (the ones that carry statistics).
    pub leaf_column_count: usize,
}

/// A top-level column.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnInfo {
    /// Field id.
    pub id: i32,
    /// Name.
    pub name: String,
    /// Iceberg type, as the spec writes it (`long`, `timestamptz`, `decimal(10,2)`, `struct<…>`).
    pub r#type: String,
    /// Whether the column is required.
    pub required: bool,
}

/// Partition specs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitioningInfo {
    /// Default (current) spec id.
    pub default_spec_id: i32,
    /// All specs, by id.
    pub specs: Vec<PartitionSpecInfo>,
}

impl PartitioningInfo {
    /// The spec with this id.
    pub fn spec(&self, spec_id: i32) -> Option<&PartitionSpecInfo> {
        self.specs.iter().find(|s| s.spec_id == spec_id)
    }

    /// The current spec.
    pub fn current(&self) -> Option<&PartitionSpecInfo> {
        self.spec(self.default_spec_id)
    }

    /// Whether the partitioning ever changed (more than one spec).
    pub fn evolved(&self) -> bool {
        self.specs.len() > 1
    }
}

/// One partition spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionSpecInfo {
    /// Spec id.
    pub spec_id: i32,
    /// Fields, in order.
    pub fields: Vec<PartitionFieldInfo>,
}

impl PartitionSpecInfo {
    /// Whether the spec has no (non-void) fields.
    pub fn is_unpartitioned(&self) -> bool {
        self.fields.iter().all(|f| f.transform == "void")
    }
}

/// One partition field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionFieldInfo {
    /// Partition field id.
    pub field_id: i32,
    /// Partition field name (`ts_day`).
    pub name: String,
    /// Source column id.
    pub source_id: i32,
    /// Source column name, dotted for nested fields; `None` if the column was dropped.
    pub source_column: Option<String>,
    /// Source column type (`timestamp`, `date`, `string`, …).
    pub source_type: Option<String>,
    /// Transform as the spec writes it (`identity`, `day`, `bucket[16]`, `truncate[4]`, `void`).
    pub transform: String,
}

/// The current sort order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SortOrderInfo {
    /// Order id (0 = unsorted).
    pub order_id: i64,
    /// Fields as `column [transform] ASC|DESC NULLS FIRST|LAST`.
    pub fields: Vec<SortFieldInfo>,
}

/// A sort field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SortFieldInfo {
    /// Source column name.
    pub column: Option<String>,
    /// Transform.
    pub transform: String,
    /// `asc` or `desc`.
    pub direction: String,
    /// `first` or `last`.
    pub null_order: String,
}

/// Snapshots, refs and per-snapshot manifest lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotStats {
    /// Snapshots in the metadata.
    pub count: usize,
    /// Oldest snapshot timestamp.
    pub oldest_ms: Option<i64>,
    /// Newest snapshot timestamp.
    pub newest_ms: Option<i64>,
    /// Branches and tags.
    pub refs: Vec<RefInfo>,
    /// Every snapshot, oldest first.
    pub snapshots: Vec<SnapshotInfo>,
}

/// A branch or tag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefInfo {
    /// Ref name (`main`, …).
    pub name: String,
    /// `branch` or `tag`.
    pub kind: String,
    /// Snapshot it points to.
    pub snapshot_id: i64,
    /// `max-ref-age-ms`, if set.
    pub max_ref_age_ms: Option<i64>,
    /// `max-snapshot-age-ms` (branches), if set.
    pub max_snapshot_age_ms: Option<i64>,
    /// `min-snapshots-to-keep` (branches), if set.
    pub min_snapshots_to_keep: Option<i64>,
}

/// One snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotInfo {
    /// Snapshot id.
    pub snapshot_id: i64,
    /// Parent snapshot id.
    pub parent_id: Option<i64>,
    /// Sequence number.
    pub sequence_number: i64,
    /// Commit time.
    pub timestamp_ms: i64,
    /// Operation (`append`, `overwrite`, `replace`, `delete`).
    pub operation: String,
    /// Manifests in its manifest list (`None` if the list could not be read).
    pub manifest_count: Option<u32>,
    /// Size of its manifest list file.
    pub manifest_list_bytes: Option<u64>,
    /// `added-data-files` from its summary.
    pub added_data_files: Option<u64>,
    /// `added-records` from its summary.
    pub added_records: Option<u64>,
    /// `removed-files-size` from its summary: bytes this snapshot stopped referencing.
    pub removed_files_bytes: Option<u64>,
}

/// Manifests of the current snapshot, and across all snapshots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ManifestStats {
    /// Manifests in the current snapshot's list.
    pub count: u64,
    /// Of those, data manifests.
    pub data_manifests: u64,
    /// Of those, delete manifests.
    pub delete_manifests: u64,
    /// Total size of the current snapshot's manifests.
    pub total_bytes: u64,
    /// Manifests smaller than an eighth of `commit.manifest.target-size-bytes`.
    pub small_count: u64,
    /// Manifests with no live entry (only DELETED entries), which a rewrite drops.
    pub no_live_entries: u64,
    /// Live entries across the current manifests.
    pub live_entries: u64,
    /// Entries marked DELETED still carried by the current manifests.
    pub deleted_entries: u64,
    /// Mean manifests per snapshot (over snapshots whose list was read).
    pub mean_per_snapshot: f64,
    /// Distinct manifest files referenced by any snapshot.
    pub distinct_across_snapshots: u64,
    /// Their total size.
    pub distinct_bytes_across_snapshots: u64,
    /// Sum of all manifest list sizes.
    pub manifest_list_bytes: u64,
}

/// Sizes and counts of a set of files.
///
/// Byte and row totals saturate at `u64::MAX` instead of overflowing: a manifest may list files
/// of up to `i64::MAX` bytes each, and a corrupt one must not crash the scan (found by fuzzing).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct FileStats {
    /// Files.
    pub count: u64,
    /// Bytes.
    pub bytes: u64,
    /// Rows.
    pub records: u64,
    /// Files below the small-file threshold.
    pub small_count: u64,
    /// Bytes in those files.
    pub small_bytes: u64,
    /// Smallest file.
    pub min_bytes: Option<u64>,
    /// Largest file.
    pub max_bytes: Option<u64>,
    /// Size histogram.
    pub histogram: SizeHistogram,
}

impl FileStats {
    /// Mean file size.
    pub fn mean_bytes(&self) -> Option<u64> {
        (self.count > 0).then(|| self.bytes / self.count)
    }

    pub(crate) fn add(&mut self, size: u64, records: u64, small_threshold: u64) {
        self.count += 1;
        self.bytes = self.bytes.saturating_add(size);
        self.records = self.records.saturating_add(records);
        if size < small_threshold {
            self.small_count += 1;
            self.small_bytes = self.small_bytes.saturating_add(size);
        }
        self.min_bytes = Some(self.min_bytes.map_or(size, |m| m.min(size)));
        self.max_bytes = Some(self.max_bytes.map_or(size, |m| m.max(size)));
        self.histogram.add(size);
    }

    #[cfg_attr(not(test), allow(dead_code))] // used by synthetic scans in the planner tests
    pub(crate) fn merge(&mut self, other: &FileStats) {
        self.count += other.count;
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.records = self.records.saturating_add(other.records);
        self.small_count += other.small_count;
        self.small_bytes = self.small_bytes.saturating_add(other.small_bytes);
        self.min_bytes = match (self.min_bytes, other.min_bytes) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.max_bytes = match (self.max_bytes, other.max_bytes) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        for (a, b) in self.histogram.counts.iter_mut().zip(other.histogram.counts) {
            *a += b;
        }
    }
}

/// File counts in fixed size buckets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct SizeHistogram {
    /// Counts per bucket; bucket `i` holds sizes in `[BOUNDS[i-1], BOUNDS[i])`.
    pub counts: [u64; 9],
}

impl SizeHistogram {
    /// Upper bounds of the first eight buckets (the last is open): 1, 4, 16, 32, 64, 128, 256, 512 MiB.
    pub const BOUNDS: [u64; 8] = [
        1 << 20,
        4 << 20,
        16 << 20,
        32 << 20,
        64 << 20,
        128 << 20,
        256 << 20,
        512 << 20,
    ];
    /// Bucket labels.
    pub const LABELS: [&'static str; 9] = [
        "<1MiB",
        "1-4MiB",
        "4-16MiB",
        "16-32MiB",
        "32-64MiB",
        "64-128MiB",
        "128-256MiB",
        "256-512MiB",
        ">=512MiB",
    ];

    fn add(&mut self, size: u64) {
        let i = Self::BOUNDS.iter().position(|b| size < *b).unwrap_or(8);
        self.counts[i] += 1;
    }
}

/// Counts of one kind of delete file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct DeleteKindStats {
    /// Files.
    pub files: u64,
    /// Bytes.
    pub bytes: u64,
    /// Deleted rows (positions or equality rows) they record.
    pub records: u64,
    /// Files that can no longer apply to any live data file (older than every live data file
    /// of their partition, or referencing a data file that is gone).
    pub dangling: u64,
}

impl DeleteKindStats {
    fn merge(&mut self, o: &DeleteKindStats) {
        self.files += o.files;
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.records = self.records.saturating_add(o.records);
        self.dangling += o.dangling;
    }
}

/// Delete files by kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct DeleteStats {
    /// Position delete files (Parquet/Avro/ORC).
    pub position: DeleteKindStats,
    /// Equality delete files.
    pub equality: DeleteKindStats,
    /// Deletion vectors (v3, Puffin).
    pub deletion_vectors: DeleteKindStats,
}

impl DeleteStats {
    /// All delete files.
    pub fn files(&self) -> u64 {
        self.position.files + self.equality.files + self.deletion_vectors.files
    }

    /// All deleted-row records (positions + DV cardinalities + equality rows).
    pub fn records(&self) -> u64 {
        self.position
            .records
            .saturating_add(self.equality.records)
            .saturating_add(self.deletion_vectors.records)
    }

    /// Bytes of all delete files.
    pub fn bytes(&self) -> u64 {
        self.position
            .bytes
            .saturating_add(self.equality.bytes)
            .saturating_add(self.deletion_vectors.bytes)
    }

    pub(crate) fn merge(&mut self, o: &DeleteStats) {
        self.position.merge(&o.position);
        self.equality.merge(&o.equality);
        self.deletion_vectors.merge(&o.deletion_vectors);
    }
}

/// Metadata file history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct MetadataFileStats {
    /// Entries in `metadata-log` (previous metadata files still listed).
    pub previous_versions: usize,
    /// Size of the current `metadata.json`, if known.
    pub current_bytes: Option<u64>,
    /// Statistics files (Puffin) registered in the metadata.
    pub statistics_files: usize,
    /// Partition statistics files registered in the metadata.
    pub partition_statistics_files: usize,
}

/// Column statistics coverage of live data files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ColumnStatsCoverage {
    /// Data files examined.
    pub files: u64,
    /// Files with lower and upper bounds for at least one column.
    pub files_with_bounds: u64,
    /// Leaf columns of the current schema.
    pub leaf_columns: u64,
    /// Leaf columns that have bounds in every file that has any bounds.
    pub columns_with_bounds: u64,
}

/// A value in a partition tuple.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PartitionValue {
    /// Integer-like (int, long, date/time transform ordinals, bucket numbers).
    Int(i64),
    /// Boolean.
    Bool(bool),
    /// Floating point.
    Float(f64),
    /// String-like (strings, decimals as text, UUIDs, hex for binary).
    String(String),
    /// Null.
    Null,
}

/// One field of a partition tuple.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionFieldValue {
    /// Partition field name.
    pub field: String,
    /// The stored value (for `day` the days since epoch, for `bucket` the bucket number).
    pub value: PartitionValue,
    /// Iceberg's human form (`2024-01-31`, `2024-01`, `2024-01-31-10`, `42`, `null`).
    pub human: String,
}

/// Figures for one partition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionStats {
    /// Spec the files were written with.
    pub spec_id: i32,
    /// The partition tuple (empty for unpartitioned specs).
    pub values: Vec<PartitionFieldValue>,
    /// Hive-style path, e.g. `ts_day=2024-01-31/category=a` (empty when unpartitioned).
    pub path: String,
    /// Live data files.
    pub data_files: FileStats,
    /// Live delete files.
    pub delete_files: DeleteStats,
    /// Newest commit time of a live file here.
    pub last_modified_ms: Option<i64>,
    /// Lowest data sequence number of a live data file here.
    pub min_data_sequence_number: Option<i64>,
}

impl PartitionStats {
    /// Whether the files belong to the current spec.
    pub fn in_spec(&self, default_spec_id: i32) -> bool {
        self.spec_id == default_spec_id
    }

    /// Bytes a rewrite of the whole partition would read (data plus deletes).
    pub fn rewrite_bytes(&self) -> u64 {
        self.data_files
            .bytes
            .saturating_add(self.delete_files.bytes())
    }
}

/// One live file of the current snapshot, for listings (`scan::list_files`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Location.
    pub path: String,
    /// `data`, `position_deletes`, `equality_deletes` or `deletion_vector`.
    pub content: String,
    /// `parquet`, `avro`, `orc`, `puffin`.
    pub format: String,
    /// Spec id.
    pub spec_id: i32,
    /// Partition path (`ts_day=…/…`).
    pub partition: String,
    /// Rows (deleted rows for delete files).
    pub records: u64,
    /// Bytes.
    pub size_bytes: u64,
    /// Data sequence number.
    pub sequence_number: Option<i64>,
    /// Snapshot that added it.
    pub snapshot_id: Option<i64>,
    /// Manifest it is listed in.
    pub manifest: String,
    /// For DVs and file-scoped position deletes, the data file they apply to.
    pub referenced_data_file: Option<String>,
}
