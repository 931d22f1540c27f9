//! Writing Parquet data files and delete files for a table, with upstream's writer stack
//! (`ParquetWriterBuilder` + `RollingFileWriterBuilder`): field ids and metrics come from it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, Int64Array, RecordBatch, StringArray, make_array, new_null_array,
};
use arrow_schema::{DataType, SchemaRef as ArrowSchemaRef};
use iceberg::arrow::{RecordBatchPartitionSplitter, schema_to_arrow_schema};
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, FormatVersion, NestedField,
    PartitionKey, PartitionSpecRef, PrimitiveType, Schema, SchemaRef, Struct, Type,
};
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use parquet::basic::{Compression, GzipLevel, ZstdLevel};
use parquet::file::properties::WriterProperties;

use super::files::live_files;
use super::iceberg_error;
use super::summary::is_deletion_vector;
use crate::catalog::LoadedTable;
use crate::catalog::committer::discard;
use crate::error::{Error, Result};

/// The Parquet footer's `created_by`, in the `<app> version <v> (build <b>)` form parquet-mr
/// parses: a string it cannot parse makes Spark and other parquet-mr readers ignore the binary
/// column statistics of the file (PARQUET-251's guard), which costs them row-group pruning.
pub(crate) const CREATED_BY: &str =
    concat!("cryo version ", env!("CARGO_PKG_VERSION"), " (build cryo)");

/// Field id of `file_path` in position delete files (Iceberg spec, reserved).
pub const POS_DELETE_FILE_PATH_FIELD_ID: i32 = 2_147_483_546;
/// Field id of `pos` in position delete files (Iceberg spec, reserved).
pub const POS_DELETE_POS_FIELD_ID: i32 = 2_147_483_545;

const TARGET_FILE_SIZE: &str = "write.target-file-size-bytes";
const DELETE_TARGET_FILE_SIZE: &str = "write.delete.target-file-size-bytes";
const PARQUET_CODEC: &str = "write.parquet.compression-codec";
const PARQUET_LEVEL: &str = "write.parquet.compression-level";
const METRICS_DEFAULT: &str = "write.metadata.metrics.default";
const FILE_FORMAT: &str = "write.format.default";

/// Java's defaults: 512 MiB data files, 64 MiB delete files.
const DEFAULT_TARGET_FILE_SIZE: u64 = 512 << 20;
const DEFAULT_DELETE_TARGET_FILE_SIZE: u64 = 64 << 20;
/// Java's default zstd level.
const DEFAULT_ZSTD_LEVEL: i32 = 3;

/// Files written by one call, ready to be added with a [`SnapshotProducer`](super::SnapshotProducer).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct WrittenFiles {
    /// The files, with partition tuples and metrics.
    pub files: Vec<DataFile>,
    /// Rows written (for delete files: deleted positions or equality rows).
    pub records: u64,
    /// Bytes written.
    pub bytes: u64,
    /// The Parquet codec used, e.g. `zstd(3)`.
    pub codec: String,
    /// True when the table sets no `write.parquet.compression-codec` and Cryo chose zstd (Java
    /// would fall back to gzip; PyIceberg-created tables set none).
    pub codec_defaulted: bool,
}

impl WrittenFiles {
    fn new(files: Vec<DataFile>, cfg: &WriteConfig) -> Self {
        Self {
            records: files.iter().map(DataFile::record_count).sum(),
            bytes: files.iter().map(DataFile::file_size_in_bytes).sum(),
            files,
            codec: cfg.codec.clone(),
            codec_defaulted: cfg.codec_defaulted,
        }
    }
}

/// Java's column metrics modes (`write.metadata.metrics.default` and per-column overrides).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MetricsMode {
    None,
    Counts,
    /// `full` and `truncate(n)`: what the Parquet writer records (exact bounds only).
    Bounds,
}

/// A metrics mode as a table property spells it (unknown modes keep bounds, as Java's default).
pub(crate) fn metrics_mode(v: &str) -> MetricsMode {
    match v.trim().to_ascii_lowercase().as_str() {
        "none" => MetricsMode::None,
        "counts" => MetricsMode::Counts,
        _ => MetricsMode::Bounds,
    }
}

/// `table`'s `write.metadata.metrics.default` (bounds when unset, as Java's default).
pub(crate) fn default_metrics_mode(table: &LoadedTable) -> MetricsMode {
    table
        .metadata
        .properties()
        .get(METRICS_DEFAULT)
        .map_or(MetricsMode::Bounds, |m| metrics_mode(m))
}

/// The Parquet codec a table's properties ask for.
pub(crate) struct ParquetCodec {
    pub(crate) compression: Compression,
    /// As receipts show it, e.g. `zstd(3)`.
    pub(crate) label: String,
    /// True when the table sets no `write.parquet.compression-codec` and Cryo chose zstd.
    pub(crate) defaulted: bool,
}

/// The codec and level of `table`'s `write.parquet.compression-*` properties (zstd at Java's
/// level 3 when unset); an error for a `write.format.default` other than Parquet, a codec Cryo
/// does not write, or a level the codec does not take.
pub(crate) fn parquet_codec(table: &LoadedTable) -> Result<ParquetCodec> {
    let p = table.metadata.properties();
    let name = &table.id;
    if let Some(format) = p.get(FILE_FORMAT)
        && !format.eq_ignore_ascii_case("parquet")
    {
        return Err(Error::unsupported(format!(
            "{name}: {FILE_FORMAT}={format} (Cryo writes Parquet)"
        )));
    }
    let level = match p
        .get(PARQUET_LEVEL)
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
    {
        Some(v) => Some(v.parse::<i32>().map_err(|_| {
            Error::config(format!("{name}: {PARQUET_LEVEL}={v} is not an integer"))
        })?),
        None => None,
    };
    let codec_name = p.get(PARQUET_CODEC).map(|c| c.trim().to_ascii_lowercase());
    let bad_level =
        |e: parquet::errors::ParquetError| Error::config(format!("{name}: {PARQUET_LEVEL}: {e}"));
    let (compression, label) = match codec_name.as_deref().unwrap_or("zstd") {
        "zstd" => {
            let l = level.unwrap_or(DEFAULT_ZSTD_LEVEL);
            (
                Compression::ZSTD(ZstdLevel::try_new(l).map_err(bad_level)?),
                format!("zstd({l})"),
            )
        }
        "gzip" => {
            let l = level.map_or(Ok(GzipLevel::default()), |l| {
                GzipLevel::try_new(u32::try_from(l).unwrap_or(u32::MAX)).map_err(bad_level)
            })?;
            (
                Compression::GZIP(l),
                format!("gzip({})", l.compression_level()),
            )
        }
        "snappy" => (Compression::SNAPPY, "snappy".to_string()),
        // Java's `lz4` is Hadoop-framed LZ4, deprecated in Parquet; LZ4_RAW is what every current
        // reader expects.
        "lz4" | "lz4_raw" => (Compression::LZ4_RAW, "lz4_raw".to_string()),
        "uncompressed" | "none" => (Compression::UNCOMPRESSED, "uncompressed".to_string()),
        other => {
            return Err(Error::unsupported(format!(
                "{name}: {PARQUET_CODEC}={other} (Cryo writes zstd, gzip, snappy, lz4 or uncompressed)"
            )));
        }
    };
    Ok(ParquetCodec {
        compression,
        label,
        defaulted: codec_name.is_none(),
    })
}

/// A positive byte size from `table`'s property `key`, `default` when unset.
pub(crate) fn positive_size(table: &LoadedTable, key: &str, default: u64) -> Result<u64> {
    match table.metadata.properties().get(key).map(|v| v.trim()) {
        None | Some("") => Ok(default),
        Some(v) => v.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
            Error::config(format!("{}: {key}={v} is not a positive size", table.id))
        }),
    }
}

struct WriteConfig {
    properties: WriterProperties,
    codec: String,
    codec_defaulted: bool,
    target_file_size: usize,
    delete_target_file_size: usize,
    metrics: MetricsMode,
}

fn write_config(table: &LoadedTable) -> Result<WriteConfig> {
    let codec = parquet_codec(table)?;
    let size = |key: &str, default: u64| positive_size(table, key, default).map(|n| n as usize);
    let metrics = default_metrics_mode(table);
    Ok(WriteConfig {
        properties: WriterProperties::builder()
            .set_compression(codec.compression)
            .set_created_by(CREATED_BY.to_string())
            .build(),
        codec: codec.label,
        codec_defaulted: codec.defaulted,
        target_file_size: size(TARGET_FILE_SIZE, DEFAULT_TARGET_FILE_SIZE)?,
        delete_target_file_size: size(DELETE_TARGET_FILE_SIZE, DEFAULT_DELETE_TARGET_FILE_SIZE)?,
        metrics,
    })
}

fn apply_metrics_mode(mode: MetricsMode, b: &mut DataFileBuilder) {
    if mode == MetricsMode::None {
        b.column_sizes(HashMap::new())
            .value_counts(HashMap::new())
            .null_value_counts(HashMap::new())
            .nan_value_counts(HashMap::new());
    }
    if mode != MetricsMode::Bounds {
        b.lower_bounds(HashMap::new()).upper_bounds(HashMap::new());
    }
}

/// Write Arrow record batches as Parquet data files of the table.
///
/// Columns are matched to the table's current schema by name and written with its field ids;
/// optional columns missing from the batches are written as nulls. Rows are split by the default
/// partition spec, one file per partition value (more when a file would exceed
/// `write.target-file-size-bytes`). The codec is `write.parquet.compression-codec` (zstd when
/// unset, see [`WrittenFiles::codec_defaulted`]); `write.metadata.metrics.default` of `none` or
/// `counts` drops the metrics Java would not keep.
///
/// The files are not part of the table until a [`SnapshotProducer`](super::SnapshotProducer)
/// commits them. If writing fails, files already written by this call are deleted.
pub async fn write_data_files(
    table: &LoadedTable,
    batches: impl IntoIterator<Item = RecordBatch>,
) -> Result<WrittenFiles> {
    let md = table.metadata.as_ref();
    let name = table.id.to_string();
    let cfg = write_config(table)?;
    let schema = Arc::clone(md.current_schema());
    let spec = Arc::clone(md.default_partition_spec());
    let groups = partition_batches(&name, &schema, &spec, batches, Ok)?;
    let files = write_groups(
        table,
        &cfg,
        &schema,
        cfg.target_file_size,
        None,
        groups,
        |b| {
            b.content(DataContentType::Data);
            apply_metrics_mode(cfg.metrics, b);
        },
    )
    .await?;
    Ok(WrittenFiles::new(files, &cfg))
}

/// Write position delete files: for each `(data file path, row positions)`, the positions to
/// delete from that live data file of the table's current snapshot.
///
/// One file per partition, rows sorted by path then position (as the spec requires), schema
/// `file_path` (id 2147483546, string) and `pos` (id 2147483545, long). Positions are checked
/// against the data file's row count; duplicates are written once. A delete file that covers a
/// single data file records it as `referenced_data_file`, and keeps exact `file_path` bounds so
/// readers can tell which data file it applies to.
///
/// Format v1 tables have no delete files and v3 tables take deletion vectors instead
/// ([`write_deletion_vectors`]): both are refused.
pub async fn write_position_deletes(
    table: &LoadedTable,
    deletes: &[(String, Vec<i64>)],
) -> Result<WrittenFiles> {
    let live = live_files(table).await?;
    write_position_deletes_of(table, &live, deletes).await
}

/// [`write_position_deletes`] against the live files of the table's current snapshot, already
/// read.
pub(crate) async fn write_position_deletes_of(
    table: &LoadedTable,
    live: &[super::LiveFile],
    deletes: &[(String, Vec<i64>)],
) -> Result<WrittenFiles> {
    let md = table.metadata.as_ref();
    let name = table.id.to_string();
    match md.format_version() {
        FormatVersion::V1 => {
            return Err(Error::unsupported(format!(
                "{name}: format v1 tables cannot hold delete files"
            )));
        }
        FormatVersion::V3 => {
            return Err(Error::unsupported(format!(
                "{name}: format v3 tables take deletion vectors (write_deletion_vectors), not position delete files"
            )));
        }
        FormatVersion::V2 => {}
    }
    let cfg = write_config(table)?;
    let by_partition = group_position_deletes(table, live, deletes)?;
    let table_schema = Arc::clone(md.current_schema());
    let default_spec = md.default_partition_spec();
    let delete_schema = position_delete_schema(&name)?;
    let arrow_schema = arrow_schema_of(&name, &delete_schema)?;
    let mut groups = Vec::new();
    for (_, (partition, mut rows)) in by_partition {
        rows.sort_unstable();
        rows.dedup();
        if rows.is_empty() {
            continue;
        }
        let single = rows
            .first()
            .map(|r| r.0.clone())
            .filter(|first| rows.iter().all(|r| &r.0 == first));
        let (paths, positions): (Vec<String>, Vec<i64>) = rows.into_iter().unzip();
        let batch = RecordBatch::try_new(
            Arc::clone(&arrow_schema),
            vec![
                Arc::new(StringArray::from(paths)) as ArrayRef,
                Arc::new(Int64Array::from(positions)) as ArrayRef,
            ],
        )
        .map_err(|e| Error::compute(format!("{name}: position delete batch"), e))?;
        let key = (!default_spec.is_unpartitioned()).then(|| {
            PartitionKey::new(
                default_spec.as_ref().clone(),
                Arc::clone(&table_schema),
                partition.clone(),
            )
        });
        groups.push(Group {
            key,
            data: partition,
            batches: vec![batch],
            referenced: single,
        });
    }
    // Exact bounds on `file_path` (Parquet truncates statistics to 64 bytes by default, and the
    // writer then drops them) let readers match delete files to data files without opening them.
    let cfg = WriteConfig {
        properties: cfg
            .properties
            .clone()
            .into_builder()
            .set_statistics_truncate_length(None)
            .build(),
        ..cfg
    };
    let files = write_groups(
        table,
        &cfg,
        &delete_schema,
        cfg.delete_target_file_size,
        Some("deletes"),
        groups,
        |b| {
            b.content(DataContentType::PositionDeletes);
        },
    )
    .await?;
    Ok(WrittenFiles::new(files, &cfg))
}

/// The blob type of a deletion vector.
pub(crate) const DELETION_VECTOR_BLOB_TYPE: &str = "deletion-vector-v1";
/// The reserved field id of a row's position (`_pos`), the field a deletion vector is about.
const ROW_POSITION_FIELD_ID: i32 = 2_147_483_645;

/// Deletion vectors written by [`write_deletion_vectors`], to commit with
/// [`SnapshotProducer::add_deletion_vectors`](super::SnapshotProducer::add_deletion_vectors).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct DeletionVectors {
    /// One entry per data file (vectors of one partition share a Puffin file).
    pub files: Vec<DataFile>,
    /// Data files that had a live deletion vector: the new vector holds its positions too, and
    /// the commit removes it (a data file has at most one).
    pub superseded: Vec<String>,
    /// Positions the new vectors hold (the superseded vectors' included).
    pub records: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// Format v3: write deletion vectors, one `deletion-vector-v1` blob for each `(data file,
/// positions)` — positions of rows to delete from that live data file of the table's current
/// snapshot — in one Puffin file per partition under the table's data location (what Spark's
/// merge-on-read `DELETE`, `UPDATE` and `MERGE` write on v3).
///
/// A data file has at most one deletion vector: where one is live, its positions are read and
/// merged into the new vector, and the data file is listed in
/// [`DeletionVectors::superseded`], so that the commit removes the old vector. Commit them on the
/// same table state with [`SnapshotProducer::add_deletion_vectors`](super::SnapshotProducer::add_deletion_vectors):
/// on a newer head the merge may miss positions, and the commit is refused.
///
/// Positions are checked against the data file's row count, as for position delete files.
/// Tables of format v1 and v2 are refused (they take [`write_position_deletes`]).
pub async fn write_deletion_vectors(
    table: &LoadedTable,
    deletes: &[(String, Vec<i64>)],
) -> Result<DeletionVectors> {
    let live = live_files(table).await?;
    write_deletion_vectors_of(table, &live, deletes).await
}

/// [`write_deletion_vectors`] against the live files of the table's current snapshot, already
/// read. Each vector is an entry of its own: its data file as `referenced_data_file`, its blob's
/// offset and length, its cardinality as the record count (Java's `BaseDVFileWriter`: blobs
/// stored uncompressed, `snapshot-id` and `sequence-number` -1, properties
/// `referenced-data-file` and `cardinality`).
pub(crate) async fn write_deletion_vectors_of(
    table: &LoadedTable,
    live: &[super::LiveFile],
    deletes: &[(String, Vec<i64>)],
) -> Result<DeletionVectors> {
    use iceberg::writer::file_writer::location_generator::LocationGenerator as _;

    use crate::format::puffin::{self, NewBlob};
    let md = table.metadata.as_ref();
    let name = table.id.to_string();
    let by_partition = group_position_deletes(table, live, deletes)?;
    // The live vectors of the data files named: merged into the new ones, then superseded.
    let existing = live_vectors_of(table, live, deletes).await?;
    let superseded: Vec<String> = existing.keys().cloned().collect();
    let default_spec = md.default_partition_spec();
    let spec_id = md.default_partition_spec_id();
    let schema = Arc::clone(md.current_schema());
    let locations =
        DefaultLocationGenerator::new(md).map_err(|e| iceberg_error(&name, "data location", e))?;
    let operation = crate::random::uuid();
    let mut written: Vec<DataFile> = Vec::new();
    let mut locations_written: Vec<String> = Vec::new();
    let mut bytes_written = 0u64;
    let result: Result<()> = async {
        for (task, (_, (partition, rows))) in by_partition.into_iter().enumerate() {
            let mut per_file: BTreeMap<String, roaring::RoaringTreemap> = BTreeMap::new();
            for (path, pos) in rows {
                let old = || existing.get(&path).cloned().unwrap_or_default();
                per_file
                    .entry(path.clone())
                    .or_insert_with(old)
                    .insert(pos as u64);
            }
            let blobs = per_file
                .iter()
                .map(|(path, set)| NewBlob {
                    kind: DELETION_VECTOR_BLOB_TYPE.to_string(),
                    fields: vec![ROW_POSITION_FIELD_ID],
                    snapshot_id: -1,
                    sequence_number: -1,
                    properties: BTreeMap::from([
                        ("referenced-data-file".to_string(), path.clone()),
                        ("cardinality".to_string(), set.len().to_string()),
                    ]),
                    data: crate::compact::encode_deletion_vector(set),
                    compress: false,
                })
                .collect();
            let file = puffin::write(blobs, CREATED_BY)?;
            let key = (!default_spec.is_unpartitioned()).then(|| {
                PartitionKey::new(
                    default_spec.as_ref().clone(),
                    Arc::clone(&schema),
                    partition.clone(),
                )
            });
            let location = locations.generate_location(
                key.as_ref(),
                &format!("{task:05}-0-{operation}-00001-deletes.puffin"),
            );
            let size = file.bytes.len() as u64;
            bytes_written += size;
            table
                .storage
                .write_all(&location, bytes::Bytes::from(file.bytes))
                .await?;
            locations_written.push(location.clone());
            for (blob, (path, set)) in file.footer.blobs.iter().zip(&per_file) {
                let mut b = DataFileBuilder::default();
                b.content(DataContentType::PositionDeletes)
                    .file_path(location.clone())
                    .file_format(DataFileFormat::Puffin)
                    .partition(partition.clone())
                    .partition_spec_id(spec_id)
                    .record_count(set.len())
                    .file_size_in_bytes(size)
                    .referenced_data_file(Some(path.clone()))
                    .content_offset(Some(blob.offset as i64))
                    .content_size_in_bytes(Some(blob.length as i64));
                written
                    .push(b.build().map_err(|e| {
                        Error::compute(format!("{name}: deletion vector entry"), e)
                    })?);
            }
        }
        Ok(())
    }
    .await;
    if let Err(e) = result {
        for location in &locations_written {
            discard(&table.storage, location).await;
        }
        return Err(e);
    }
    Ok(DeletionVectors {
        records: written.iter().map(DataFile::record_count).sum(),
        bytes: bytes_written,
        files: written,
        superseded,
    })
}

/// The positions of the live deletion vectors of the data files `deletes` names, by data file
/// (a table below format v3 is refused: it has no deletion vectors).
async fn live_vectors_of(
    table: &LoadedTable,
    live: &[super::LiveFile],
    deletes: &[(String, Vec<i64>)],
) -> Result<BTreeMap<String, roaring::RoaringTreemap>> {
    let version = table.metadata.format_version();
    if version < FormatVersion::V3 {
        return Err(Error::unsupported(format!(
            "{}: deletion vectors need format v3 (this table is {version})",
            table.id
        )));
    }
    let named: HashSet<&str> = deletes.iter().map(|(p, _)| p.as_str()).collect();
    let mut existing: BTreeMap<String, roaring::RoaringTreemap> = BTreeMap::new();
    for f in live {
        let Some(data) = f
            .file
            .referenced_data_file()
            .filter(|d| is_deletion_vector(&f.file) && named.contains(d.as_str()))
        else {
            continue;
        };
        let set = crate::compact::read_deletion_vector_at(
            table,
            f.file.file_path(),
            f.file.content_offset(),
            f.file.content_size_in_bytes(),
        )
        .await?;
        if existing.insert(data.clone(), set).is_some() {
            return Err(Error::metadata(
                &table.id,
                f.file.file_path(),
                format!("{data} has two live deletion vectors"),
            ));
        }
    }
    Ok(existing)
}

/// Positions to delete by partition: partition path → (partition tuple, `[(data file, position)]`).
type DeletesByPartition = BTreeMap<String, (Struct, Vec<(String, i64)>)>;

/// Check each `(data file, positions)` against the table's live data files and group the
/// positions by partition.
fn group_position_deletes(
    table: &LoadedTable,
    live: &[super::LiveFile],
    deletes: &[(String, Vec<i64>)],
) -> Result<DeletesByPartition> {
    let name = &table.id;
    let live: HashMap<&str, &super::LiveFile> = live
        .iter()
        .filter(|f| f.file.content_type() == DataContentType::Data)
        .map(|f| (f.file.file_path(), f))
        .collect();
    let schema = table.metadata.current_schema();
    let default_spec = table.metadata.default_partition_spec();
    let mut by_partition = DeletesByPartition::new();
    for (path, positions) in deletes {
        let file = live.get(path.as_str()).ok_or_else(|| {
            Error::validation(format!(
                "{name}: {path} is not a live data file of the table"
            ))
        })?;
        if file.spec_id != default_spec.spec_id() {
            return Err(Error::unsupported(format!(
                "{name}: {path} was written with partition spec {}; deletes for files of older specs are not supported yet",
                file.spec_id
            )));
        }
        let rows = file.file.record_count();
        if let Some(bad) = positions.iter().find(|p| **p < 0 || **p as u64 >= rows) {
            return Err(Error::validation(format!(
                "{name}: position {bad} is outside {path} ({rows} rows)"
            )));
        }
        let partition = file.file.partition().clone();
        let key = default_spec.partition_to_path(&partition, Arc::clone(schema));
        by_partition
            .entry(key)
            .or_insert_with(|| (partition, Vec::new()))
            .1
            .extend(positions.iter().map(|p| (path.clone(), *p)));
    }
    Ok(by_partition)
}

/// The position delete file schema: `file_path` and `pos`, with the spec's reserved ids.
fn position_delete_schema(table: &str) -> Result<SchemaRef> {
    Schema::builder()
        .with_fields(vec![
            NestedField::required(
                POS_DELETE_FILE_PATH_FIELD_ID,
                "file_path",
                Type::Primitive(PrimitiveType::String),
            )
            .into(),
            NestedField::required(
                POS_DELETE_POS_FIELD_ID,
                "pos",
                Type::Primitive(PrimitiveType::Long),
            )
            .into(),
        ])
        .build()
        .map(Arc::new)
        .map_err(|e| iceberg_error(table, "position delete schema", e))
}

/// Write equality delete files: every row of `batches` deletes the older rows whose `columns`
/// equal its values.
///
/// `columns` must be top-level primitive columns other than float/double (the spec's rule for
/// equality fields). For a partitioned table the batches must also carry the partition source
/// columns, so each delete lands in the partition of the rows it deletes; the files hold the
/// equality columns only. Sequence numbers make a delete apply to rows committed before it, not
/// to rows added in the same or later commits.
pub async fn write_equality_deletes(
    table: &LoadedTable,
    columns: &[&str],
    batches: impl IntoIterator<Item = RecordBatch>,
) -> Result<WrittenFiles> {
    let md = table.metadata.as_ref();
    let name = table.id.to_string();
    if md.format_version() == FormatVersion::V1 {
        return Err(Error::unsupported(format!(
            "{name}: format v1 tables cannot hold delete files"
        )));
    }
    if columns.is_empty() {
        return Err(Error::validation(format!(
            "{name}: equality deletes need at least one column"
        )));
    }
    let cfg = write_config(table)?;
    let schema = md.current_schema();
    let equality_ids = equality_field_ids(&name, schema, columns)?;
    let spec = Arc::clone(md.default_partition_spec());
    let mut input_ids = equality_ids.clone();
    input_ids.extend(spec.fields().iter().map(|f| f.source_id));
    let input_schema = Arc::new(project_schema(&name, schema, &input_ids)?);
    let delete_schema = Arc::new(project_schema(&name, schema, &equality_ids)?);
    let delete_arrow = arrow_schema_of(&name, &delete_schema)?;
    // Equality columns' positions inside the input schema.
    let keep: Vec<usize> = delete_schema
        .as_struct()
        .fields()
        .iter()
        .filter_map(|f| {
            input_schema
                .as_struct()
                .fields()
                .iter()
                .position(|i| i.id == f.id)
        })
        .collect();
    let groups = partition_batches(&name, &input_schema, &spec, batches, |b| {
        RecordBatch::try_new(
            Arc::clone(&delete_arrow),
            keep.iter().map(|i| Arc::clone(b.column(*i))).collect(),
        )
        .map_err(|e| Error::compute(format!("{name}: equality delete batch"), e))
    })?;
    let files = write_groups(
        table,
        &cfg,
        &delete_schema,
        cfg.delete_target_file_size,
        Some("eq-deletes"),
        groups,
        |b| {
            b.content(DataContentType::EqualityDeletes)
                .equality_ids(Some(equality_ids.clone()));
        },
    )
    .await?;
    Ok(WrittenFiles::new(files, &cfg))
}

/// Field ids of the equality columns, refusing what the spec does not allow.
fn equality_field_ids(table: &str, schema: &Schema, columns: &[&str]) -> Result<Vec<i32>> {
    let top_level: Vec<i32> = schema.as_struct().fields().iter().map(|f| f.id).collect();
    let mut ids = Vec::with_capacity(columns.len());
    for column in columns {
        let field = schema
            .field_by_name(column)
            .filter(|f| top_level.contains(&f.id))
            .ok_or_else(|| Error::validation(format!("{table}: no top-level column `{column}`")))?;
        match field.field_type.as_primitive_type() {
            Some(PrimitiveType::Float | PrimitiveType::Double) | None => {
                return Err(Error::validation(format!(
                    "{table}: `{column}` cannot be an equality column (floating point and nested types are not allowed)"
                )));
            }
            Some(_) => ids.push(field.id),
        }
    }
    Ok(ids)
}

/// Conform each batch to `schema`, split its rows by `spec` and group them by partition (in
/// partition path order, so file names and order do not depend on hashing), passing every part
/// through `project`.
fn partition_batches(
    table: &str,
    schema: &SchemaRef,
    spec: &PartitionSpecRef,
    batches: impl IntoIterator<Item = RecordBatch>,
    project: impl Fn(RecordBatch) -> Result<RecordBatch>,
) -> Result<Vec<Group>> {
    let arrow_schema = arrow_schema_of(table, schema)?;
    let splitter = if spec.is_unpartitioned() {
        None
    } else {
        Some(
            RecordBatchPartitionSplitter::try_new_with_computed_values(
                Arc::clone(schema),
                Arc::clone(spec),
            )
            .map_err(|e| iceberg_error(table, "partition rows", e))?,
        )
    };
    let mut groups: BTreeMap<String, (Option<PartitionKey>, Vec<RecordBatch>)> = BTreeMap::new();
    for batch in batches {
        let batch = conform_batch(table, &batch, &arrow_schema)?;
        if batch.num_rows() == 0 {
            continue;
        }
        let Some(splitter) = &splitter else {
            groups
                .entry(String::new())
                .or_default()
                .1
                .push(project(batch)?);
            continue;
        };
        for (key, part) in splitter
            .split(&batch)
            .map_err(|e| iceberg_error(table, "partition rows", e))?
        {
            let part = project(part)?;
            // By the partition values: Iceberg's path reads the same for a null and `null`.
            groups
                .entry(format!("{:?}", key.data()))
                .or_insert_with(|| (Some(key), Vec::new()))
                .1
                .push(part);
        }
    }
    Ok(groups
        .into_values()
        .map(|(key, batches)| Group {
            data: key
                .as_ref()
                .map_or_else(Struct::empty, |k| k.data().clone()),
            key,
            batches,
            referenced: None,
        })
        .collect())
}

/// Rows of one partition.
struct Group {
    /// For the file location (`None`: unpartitioned).
    key: Option<PartitionKey>,
    /// The partition tuple recorded in the manifest.
    data: Struct,
    batches: Vec<RecordBatch>,
    /// The one data file a position delete file covers.
    referenced: Option<String>,
}

/// Write each group with a rolling Parquet writer; on failure delete what was written.
async fn write_groups(
    table: &LoadedTable,
    cfg: &WriteConfig,
    schema: &SchemaRef,
    target_file_size: usize,
    suffix: Option<&str>,
    groups: Vec<Group>,
    finish: impl Fn(&mut DataFileBuilder),
) -> Result<Vec<DataFile>> {
    let md = table.metadata.as_ref();
    let name = table.id.to_string();
    let spec_id = md.default_partition_spec_id();
    let operation = crate::random::uuid();
    let mut files: Vec<DataFile> = Vec::new();
    let mut result = Ok(());
    for (task, group) in groups.into_iter().enumerate() {
        let step = async {
            let locations = DefaultLocationGenerator::new(md)
                .map_err(|e| iceberg_error(&name, "data location", e))?;
            // Java's naming: <partition>-<task>-<operation uuid>-<file>.parquet.
            let names = DefaultFileNameGenerator::new(
                format!("{task:05}-0-{operation}"),
                suffix.map(str::to_string),
                DataFileFormat::Parquet,
            );
            let mut writer = RollingFileWriterBuilder::new(
                ParquetWriterBuilder::new(cfg.properties.clone(), Arc::clone(schema)),
                target_file_size,
                table.file_io.clone(),
                locations,
                names,
            )
            .build();
            for batch in &group.batches {
                writer
                    .write(&group.key, batch)
                    .await
                    .map_err(|e| iceberg_error(&name, "write Parquet", e))?;
            }
            let builders = writer
                .close()
                .await
                .map_err(|e| iceberg_error(&name, "close Parquet file", e))?;
            let mut out = Vec::with_capacity(builders.len());
            for mut b in builders {
                b.partition(group.data.clone()).partition_spec_id(spec_id);
                if let Some(r) = &group.referenced {
                    b.referenced_data_file(Some(r.clone()));
                }
                finish(&mut b);
                out.push(
                    b.build()
                        .map_err(|e| Error::compute(format!("{name}: data file entry"), e))?,
                );
            }
            Ok::<_, Error>(out)
        };
        match step.await {
            Ok(written) => files.extend(written),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    if let Err(e) = result {
        for f in &files {
            discard(&table.storage, f.file_path()).await;
        }
        return Err(e);
    }
    Ok(files)
}

fn arrow_schema_of(table: &str, schema: &Schema) -> Result<ArrowSchemaRef> {
    schema_to_arrow_schema(schema)
        .map(Arc::new)
        .map_err(|e| iceberg_error(table, "Arrow schema", e))
}

/// The top-level fields of `schema` whose ids are in `ids`, in schema order.
fn project_schema(table: &str, schema: &Schema, ids: &[i32]) -> Result<Schema> {
    let fields: Vec<_> = schema
        .as_struct()
        .fields()
        .iter()
        .filter(|f| ids.contains(&f.id))
        .cloned()
        .collect();
    Schema::builder()
        .with_schema_id(schema.schema_id())
        .with_fields(fields)
        .build()
        .map_err(|e| iceberg_error(table, "project schema", e))
}

/// Same physical layout: equal ignoring nested field names/metadata, or two UTC-anchored
/// timestamps of one unit that only spell the zone differently (`UTC` vs `+00:00`).
fn compatible(from: &DataType, to: &DataType) -> bool {
    match (from, to) {
        (DataType::Timestamp(a, Some(_)), DataType::Timestamp(b, Some(_))) => a == b,
        _ => from.equals_datatype(to),
    }
}

/// Give a batch exactly the table's Arrow schema (field ids, order, types), matching columns by
/// name. Refuses unknown columns, missing required columns, nulls in required columns and type
/// changes: silently dropping or casting user data is worse than an error.
fn conform_batch(table: &str, batch: &RecordBatch, target: &ArrowSchemaRef) -> Result<RecordBatch> {
    let input = batch.schema();
    if let Some(extra) = input
        .fields()
        .iter()
        .find(|f| target.field_with_name(f.name()).is_err())
    {
        return Err(Error::validation(format!(
            "{table}: column `{}` is not in the table schema",
            extra.name()
        )));
    }
    let rows = batch.num_rows();
    let mut columns = Vec::with_capacity(target.fields().len());
    for field in target.fields() {
        let column = match batch.column_by_name(field.name()) {
            None if field.is_nullable() => new_null_array(field.data_type(), rows),
            None => {
                return Err(Error::validation(format!(
                    "{table}: required column `{}` is missing",
                    field.name()
                )));
            }
            Some(c) if c.data_type() == field.data_type() => Arc::clone(c),
            Some(c) if compatible(c.data_type(), field.data_type()) => {
                // Same buffers, the table's field names/ids/zone on the type.
                let data = c
                    .to_data()
                    .into_builder()
                    .data_type(field.data_type().clone())
                    .build()
                    .map_err(|e| {
                        Error::validation(format!("{table}: column `{}`: {e}", field.name()))
                    })?;
                make_array(data)
            }
            Some(c) => {
                return Err(Error::validation(format!(
                    "{table}: column `{}` is {}, the table expects {}",
                    field.name(),
                    c.data_type(),
                    field.data_type()
                )));
            }
        };
        if !field.is_nullable() && column.null_count() > 0 {
            return Err(Error::validation(format!(
                "{table}: required column `{}` has {} nulls",
                field.name(),
                column.null_count()
            )));
        }
        columns.push(column);
    }
    RecordBatch::try_new(Arc::clone(target), columns)
        .map_err(|e| Error::validation(format!("{table}: {e}")))
}

#[cfg(test)]
mod tests {
    use arrow_array::{Int32Array, TimestampMicrosecondArray};
    use arrow_schema::{Field, Schema as ArrowSchema, TimeUnit};

    use super::*;

    fn table_schema() -> ArrowSchemaRef {
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::optional(2, "note", Type::Primitive(PrimitiveType::String)).into(),
                NestedField::optional(3, "ts", Type::Primitive(PrimitiveType::Timestamptz)).into(),
            ])
            .build()
            .unwrap();
        arrow_schema_of("t", &schema).unwrap()
    }

    #[test]
    fn conforms_by_name_and_refuses_what_it_cannot_keep() {
        let target = table_schema();
        let input = Arc::new(ArrowSchema::new(vec![
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
            Field::new("id", DataType::Int64, false),
        ]));
        let batch = RecordBatch::try_new(
            input,
            vec![
                Arc::new(TimestampMicrosecondArray::from(vec![1, 2]).with_timezone("UTC")),
                Arc::new(Int64Array::from(vec![1, 2])),
            ],
        )
        .unwrap();
        let out = conform_batch("t", &batch, &target).unwrap();
        assert_eq!(out.schema(), target);
        assert_eq!(
            out.column(1).null_count(),
            2,
            "missing optional column is null"
        );

        let wrong = RecordBatch::try_new(
            Arc::new(ArrowSchema::new(vec![Field::new(
                "id",
                DataType::Int32,
                false,
            )])),
            vec![Arc::new(Int32Array::from(vec![1]))],
        )
        .unwrap();
        assert!(matches!(
            conform_batch("t", &wrong, &target),
            Err(Error::Validation { .. })
        ));
        let extra = RecordBatch::try_new(
            Arc::new(ArrowSchema::new(vec![
                Field::new("id", DataType::Int64, false),
                Field::new("bogus", DataType::Int64, false),
            ])),
            vec![
                Arc::new(Int64Array::from(vec![1])),
                Arc::new(Int64Array::from(vec![1])),
            ],
        )
        .unwrap();
        assert!(
            conform_batch("t", &extra, &target)
                .unwrap_err()
                .to_string()
                .contains("bogus")
        );
        let missing = RecordBatch::try_new(
            Arc::new(ArrowSchema::new(vec![Field::new(
                "note",
                DataType::Utf8,
                true,
            )])),
            vec![Arc::new(StringArray::from(vec![Some("x")]))],
        )
        .unwrap();
        assert!(
            conform_batch("t", &missing, &target)
                .unwrap_err()
                .to_string()
                .contains("`id`")
        );
    }
}
