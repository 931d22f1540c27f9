//! Reading a group's data files: projected to the current schema by field id (upstream's
//! `ArrowReader` does the schema evolution: renames, added columns, type promotion, name
//! mapping), with position deletes, deletion vectors and equality deletes applied by Cryo and
//! counted by kind. A small file whose columns already are the current schema's (the common
//! case for compaction inputs) is read in one request and decoded from memory by the Parquet
//! crate directly: upstream's reader would fetch its footer and its column chunks separately
//! and check every batch against the schema (about a tenth of a rewrite's CPU on small files).
//!
//! Each data file is read by its own task, in file order (one task per file, no predicate, so
//! batches arrive in row order and a running offset is the row position). At most
//! `concurrency` files are open at once; batches go through one bounded channel.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, make_array};
use arrow_row::RowConverter;
use arrow_schema::{DataType, Schema as ArrowSchema, SchemaRef as ArrowSchemaRef};
use arrow_select::filter::filter_record_batch;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use iceberg::arrow::schema_to_arrow_schema;
use iceberg::arrow::{ArrowReader, ArrowReaderBuilder};
use iceberg::scan::{FileScanTask, FileScanTaskStream};
use iceberg::spec::{DataFileFormat, NameMapping, SchemaRef};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::{PARQUET_FIELD_ID_META_KEY, ProjectionMask, parquet_to_arrow_field_levels};
use parquet::file::metadata::ParquetMetaDataReader;
use tokio::sync::mpsc;

use super::deletes::{EqualitySet, GroupDeletes};
use super::lineage::{self, FileLineage};
use super::plan::{DeleteKind, FileGroup, GroupDataFile};
use crate::catalog::LoadedTable;
use crate::error::{Error, Result};

/// Rows per batch read (Parquet's default of 1024 costs throughput).
pub(crate) const READ_BATCH_ROWS: usize = 8192;
/// Files up to this size are read whole, in one request, and decoded from memory when their
/// schema is the current one (compaction inputs are small files; larger ones stream through
/// upstream's reader by byte ranges).
pub(crate) const WHOLE_FILE_BYTES: u64 = 8 << 20;
/// `schema.name-mapping.default`.
const NAME_MAPPING: &str = "schema.name-mapping.default";

pub(crate) fn storage_err(path: &str, what: &str, e: iceberg::Error) -> Error {
    let retryable = e.retryable();
    // Upstream's message is often generic ("file scan task generate failed"); what went wrong
    // (a corrupt footer, not a Parquet file at all) is in its source.
    // Cryo's own storage errors arrive rendered ("storage: read: file not found (<path>)"):
    // keep what happened, not the variant's prefix and the path a second time.
    let inner = e.message();
    let inner = inner.strip_suffix(&format!(" ({path})")).unwrap_or(inner);
    let inner = inner.strip_prefix("storage: ").unwrap_or(inner);
    let mut message = format!("{what}: {inner}");
    if let Some(cause) = std::error::Error::source(&e).map(ToString::to_string)
        && !message.contains(&cause)
    {
        let _ = write!(message, ": {cause}");
    }
    Error::Storage {
        path: path.to_string(),
        message,
        source: Some(Box::new(e)),
        retryable,
    }
}

/// Reads Parquet files of a table projected to its current schema.
#[derive(Clone)]
pub(crate) struct DataReader {
    reader: ArrowReader,
    schema: SchemaRef,
    /// The current schema's Arrow form (what upstream's reader produces), with top-level
    /// strings as views when [`with_string_views`](Self::with_string_views) asked for them:
    /// the form of every batch this reader returns.
    arrow_schema: ArrowSchemaRef,
    string_views: bool,
    name_mapping: Option<Arc<NameMapping>>,
    file_io: iceberg::io::FileIO,
    /// Format v3: data files' rows carry their lineage columns (see [`lineage`]).
    lineage: bool,
}

impl DataReader {
    pub(crate) fn new(table: &LoadedTable) -> Result<Self> {
        let runtime = iceberg::Runtime::try_current().map_err(|e| {
            Error::config(format!(
                "{}: compaction needs a Tokio runtime: {}",
                table.id,
                e.message()
            ))
        })?;
        let name_mapping = match table.metadata.properties().get(NAME_MAPPING) {
            Some(json) => Some(Arc::new(
                serde_json::from_str::<NameMapping>(json).map_err(|e| {
                    Error::config(format!(
                        "{}: {NAME_MAPPING} is not a name mapping: {e}",
                        table.id
                    ))
                })?,
            )),
            None => None,
        };
        let arrow_schema = Arc::new(
            schema_to_arrow_schema(table.metadata.current_schema())
                .map_err(|e| Error::compute(format!("{}: Arrow schema", table.id), e))?,
        );
        Ok(Self {
            arrow_schema,
            string_views: false,
            lineage: lineage::tracked(&table.metadata),
            file_io: table.file_io.clone(),
            reader: ArrowReaderBuilder::new(table.file_io.clone(), runtime)
                .with_data_file_concurrency_limit(1)
                .with_batch_size(READ_BATCH_ROWS)
                .with_row_group_filtering_enabled(false)
                .build(),
            schema: Arc::clone(table.metadata.current_schema()),
            name_mapping,
        })
    }

    /// Deliver top-level string columns as string views (`Utf8View`).
    ///
    /// A view points into the decoded page instead of holding a copy of its bytes: dictionary
    /// pages (the usual encoding of small files' strings) are decoded once per file rather than
    /// once per row, and dropping deleted rows and gathering staging batches move 16-byte views
    /// rather than the strings (the Parquet writer takes views for string columns as they are).
    /// Only for the bin-pack rewrite: sort keys and partition transforms take plain strings.
    pub(crate) fn with_string_views(mut self) -> Self {
        self.string_views = true;
        self.arrow_schema = Arc::new(ArrowSchema::new_with_metadata(
            self.arrow_schema
                .fields()
                .iter()
                .map(viewed)
                .collect::<Vec<_>>(),
            self.arrow_schema.metadata().clone(),
        ));
        self
    }

    /// The Arrow type this reader delivers the top-level field `id` in.
    pub(crate) fn field_type(&self, id: i32) -> Option<&DataType> {
        self.arrow_schema
            .fields()
            .iter()
            .find(|f| field_id(f) == Some(id))
            .map(|f| f.data_type())
    }

    /// The rows of one Parquet file, in file order, with the fields `ids` of the current schema.
    ///
    /// A small file whose columns already are the current schema's (same field ids and types)
    /// is read whole and decoded directly; any other goes through upstream's reader, which
    /// handles schema evolution and name mapping.
    pub(crate) async fn stream(
        &self,
        path: &str,
        size: u64,
        ids: &[i32],
    ) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        self.read(path, size, ids, false).await
    }

    /// The rows of one data file, as [`stream`](Self::stream) reads them, followed on v3 by
    /// the lineage columns as the file stores them (`null` where it stores none; see
    /// [`lineage::FileLineage::fill`]).
    pub(crate) async fn rows(
        &self,
        path: &str,
        size: u64,
        ids: &[i32],
    ) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        self.read(path, size, ids, self.lineage).await
    }

    async fn read(
        &self,
        path: &str,
        size: u64,
        ids: &[i32],
        lineage: bool,
    ) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        if size <= WHOLE_FILE_BYTES
            && let Some(direct) = self.direct(path, ids, lineage).await?
        {
            return Ok(direct);
        }
        let rows = self.upstream(path, size, ids)?;
        if !lineage {
            return Ok(rows);
        }
        let stored = stored_lineage(&self.file_io, path, size).await?;
        Ok(lineage_beside(rows, stored, path))
    }

    /// The direct read: `None` when the file needs upstream's reader (no field ids, other
    /// types or missing columns, or a footer it should report on).
    async fn direct(
        &self,
        path: &str,
        ids: &[i32],
        lineage: bool,
    ) -> Result<Option<BoxStream<'static, Result<RecordBatch>>>> {
        let Some(target) = self.projected_schema(ids) else {
            return Ok(None);
        };
        let input = self
            .file_io
            .new_input(path)
            .map_err(|e| storage_err(path, "read Parquet", e))?;
        let bytes: Bytes = input
            .read()
            .await
            .map_err(|e| storage_err(path, "read Parquet", e))?;
        let Ok(meta) = ParquetMetaDataReader::new().parse_and_finish(&bytes) else {
            return Ok(None);
        };
        let Ok(mut meta) = ArrowReaderMetadata::try_new(Arc::new(meta), ArrowReaderOptions::new())
        else {
            return Ok(None);
        };
        if self.string_views {
            let fields: Vec<_> = meta.schema().fields().iter().map(viewed).collect();
            let hint = ArrowSchema::new_with_metadata(fields, meta.schema().metadata().clone());
            let options = ArrowReaderOptions::new().with_schema(Arc::new(hint));
            let Ok(viewed) = ArrowReaderMetadata::try_new(Arc::clone(meta.metadata()), options)
            else {
                return Ok(None);
            };
            meta = viewed;
        }
        let Some(plan) = DirectPlan::new(meta.schema(), &target, lineage) else {
            return Ok(None);
        };
        let mask = ProjectionMask::roots(
            meta.metadata().file_metadata().schema_descr(),
            plan.roots.iter().copied(),
        );
        let Ok(reader) = decode(bytes, meta, mask) else {
            return Ok(None);
        };
        let owned = path.to_string();
        let batches = reader.map(move |b| {
            let b = b.map_err(|e| parquet_err(&owned, "read", &e))?;
            plan.to_target(&b)
                .map_err(|e| parquet_err(&owned, "read", &e))
        });
        Ok(Some(Box::pin(futures::stream::iter(batches))))
    }

    /// The current schema's Arrow fields with ids `ids`, in that order; `None` when one is
    /// not a top-level field.
    fn projected_schema(&self, ids: &[i32]) -> Option<ArrowSchemaRef> {
        let fields = ids
            .iter()
            .map(|id| {
                self.arrow_schema
                    .fields()
                    .iter()
                    .find(|f| field_id(f) == Some(*id))
                    .cloned()
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Arc::new(ArrowSchema::new(fields)))
    }

    /// Upstream's reader (schema evolution, name mapping, byte-range reads).
    fn upstream(
        &self,
        path: &str,
        size: u64,
        ids: &[i32],
    ) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        let task = FileScanTask::builder()
            .with_file_size_in_bytes(size)
            .with_start(0)
            .with_length(0)
            .with_data_file_path(path.to_string())
            .with_data_file_format(DataFileFormat::Parquet)
            .with_schema(Arc::clone(&self.schema))
            .with_project_field_ids(ids.to_vec())
            .with_name_mapping(self.name_mapping.clone())
            .with_case_sensitive(true)
            .build();
        let tasks: FileScanTaskStream = Box::pin(futures::stream::iter([Ok(task)]));
        let owned = path.to_string();
        let views = self.string_views;
        let stream = self
            .reader
            .clone()
            .read(tasks)
            .map_err(|e| storage_err(path, "read Parquet", e))?
            .stream()
            .map_err(move |e| storage_err(&owned, "read Parquet", e))
            .map(move |b| {
                if views {
                    b.and_then(|b| string_views(&b))
                } else {
                    b
                }
            });
        Ok(Box::pin(stream))
    }

    /// Top-level field ids of the current schema.
    pub(crate) fn all_ids(&self) -> Vec<i32> {
        self.schema
            .as_struct()
            .fields()
            .iter()
            .map(|f| f.id)
            .collect()
    }
}

/// The lineage columns a Parquet file stores, by byte ranges: `None` when it stores neither.
async fn stored_lineage(
    file_io: &iceberg::io::FileIO,
    path: &str,
    size: u64,
) -> Result<Option<StoredLineage>> {
    use parquet::arrow::ParquetRecordBatchStreamBuilder;
    let read = file_io
        .new_input(path)
        .map_err(|e| storage_err(path, "read Parquet", e))?
        .reader()
        .await
        .map_err(|e| storage_err(path, "read Parquet", e))?;
    let file = iceberg::arrow::ArrowFileReader::new(iceberg::io::FileMetadata { size }, read);
    let builder = ParquetRecordBatchStreamBuilder::new(file)
        .await
        .map_err(|e| parquet_err(path, "read", &e))?;
    let stored = lineage::stored_roots(builder.schema());
    if stored.iter().all(Option::is_none) {
        return Ok(None);
    }
    if let Some(&r) = stored
        .iter()
        .flatten()
        .find(|&&r| builder.schema().field(r).data_type() != &DataType::Int64)
    {
        return Err(parquet_err(
            path,
            "read",
            &format!(
                "row-lineage column `{}` is not a long column",
                builder.schema().field(r).name()
            ),
        ));
    }
    let mut roots: Vec<usize> = stored.iter().flatten().copied().collect();
    roots.sort_unstable();
    let at = |r: Option<usize>| r.and_then(|r| roots.binary_search(&r).ok());
    let positions = [at(stored[0]), at(stored[1])];
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots.iter().copied());
    let owned = path.to_string();
    let stream = builder
        .with_projection(mask)
        .with_batch_size(READ_BATCH_ROWS)
        .build()
        .map_err(|e| parquet_err(path, "read", &e))?
        .map(move |b| {
            let b = b.map_err(|e| parquet_err(&owned, "read", &e))?;
            Ok(positions.map(|p| p.map(|i| Arc::clone(b.column(i)))))
        });
    Ok(Some(StoredLineage {
        stream: Box::pin(stream),
        pending: None,
    }))
}

/// The lineage columns a file stores, handed out in runs as long as the batches of its other
/// columns (the two readers batch independently).
struct StoredLineage {
    stream: BoxStream<'static, Result<[Option<ArrayRef>; 2]>>,
    /// A batch not fully handed out, and how many of its rows were.
    pending: Option<([Option<ArrayRef>; 2], usize)>,
}

impl StoredLineage {
    /// The next `n` rows of both columns.
    async fn take(&mut self, n: usize, path: &str) -> Result<[Option<ArrayRef>; 2]> {
        let mut parts: Vec<[Option<ArrayRef>; 2]> = Vec::new();
        let mut need = n;
        while need > 0 {
            let len =
                |p: &[Option<ArrayRef>; 2]| p.iter().flatten().map(Array::len).max().unwrap_or(0);
            if self
                .pending
                .as_ref()
                .is_none_or(|(p, used)| *used >= len(p))
            {
                let next = self.stream.next().await.transpose()?.ok_or_else(|| {
                    parquet_err(
                        path,
                        "read",
                        &"the row-lineage columns have fewer rows than the file",
                    )
                })?;
                self.pending = Some((next, 0));
                continue;
            }
            let Some((p, used)) = self.pending.as_mut() else {
                continue;
            };
            let take = need.min(len(p) - *used);
            parts.push([0, 1].map(|i| p[i].as_ref().map(|a| a.slice(*used, take))));
            *used += take;
            need -= take;
        }
        if parts.len() == 1 {
            return Ok(parts.pop().unwrap_or([None, None]));
        }
        let mut out: [Option<ArrayRef>; 2] = [None, None];
        for (i, slot) in out.iter_mut().enumerate() {
            let arrays: Vec<&dyn Array> = parts.iter().filter_map(|p| p[i].as_deref()).collect();
            if !arrays.is_empty() {
                *slot = Some(
                    arrow_select::concat::concat(&arrays)
                        .map_err(|e| parquet_err(path, "read", &e))?,
                );
            }
        }
        Ok(out)
    }
}

/// `rows` (a file's other columns) with its lineage columns appended: as `stored` holds them,
/// or nulls.
fn lineage_beside(
    rows: BoxStream<'static, Result<RecordBatch>>,
    stored: Option<StoredLineage>,
    path: &str,
) -> BoxStream<'static, Result<RecordBatch>> {
    let path = path.to_string();
    Box::pin(futures::stream::unfold(
        (rows, stored, path),
        |(mut rows, mut stored, path)| async move {
            let batch = match rows.next().await? {
                Ok(b) => b,
                Err(e) => return Some((Err(e), (rows, stored, path))),
            };
            let columns = match stored.as_mut() {
                None => Ok([None, None]),
                Some(s) => s.take(batch.num_rows(), &path).await,
            };
            let out = columns.and_then(|c| {
                lineage::append(&batch, c).map_err(|e| parquet_err(&path, "read", &e))
            });
            Some((out, (rows, stored, path)))
        },
    ))
}

/// The decoder of a whole file in memory: zstd and uncompressed files are paged by
/// [`pages`](super::pages) (one decompression context per thread), others by the Parquet crate.
pub(crate) fn decode(
    bytes: Bytes,
    meta: ArrowReaderMetadata,
    mask: ProjectionMask,
) -> parquet::errors::Result<ParquetRecordBatchReader> {
    if super::pages::supported(meta.metadata(), bytes.len()) {
        let levels = parquet_to_arrow_field_levels(
            meta.metadata().file_metadata().schema_descr(),
            mask,
            Some(meta.schema().fields()),
        )?;
        let groups = super::pages::MemRowGroups::new(bytes, Arc::clone(meta.metadata()));
        return ParquetRecordBatchReader::try_new_with_row_groups(
            &levels,
            &groups,
            READ_BATCH_ROWS,
            None,
        );
    }
    ParquetRecordBatchReaderBuilder::new_with_metadata(bytes, meta)
        .with_projection(mask)
        .with_batch_size(READ_BATCH_ROWS)
        .build()
}

/// `f`, a string column read as string views.
fn viewed(f: &arrow_schema::FieldRef) -> arrow_schema::FieldRef {
    match f.data_type() {
        DataType::Utf8 => Arc::new(f.as_ref().clone().with_data_type(DataType::Utf8View)),
        _ => Arc::clone(f),
    }
}

/// `batch` with its top-level string columns as views of the same bytes (no copy).
fn string_views(batch: &RecordBatch) -> Result<RecordBatch> {
    use arrow_array::cast::AsArray;
    if !batch
        .schema()
        .fields()
        .iter()
        .any(|f| f.data_type() == &DataType::Utf8)
    {
        return Ok(batch.clone());
    }
    let schema = batch.schema();
    let fields: Vec<_> = schema.fields().iter().map(viewed).collect();
    let columns = batch
        .columns()
        .iter()
        .map(|c| match c.data_type() {
            DataType::Utf8 => {
                Arc::new(arrow_array::StringViewArray::from(c.as_string::<i32>())) as ArrayRef
            }
            _ => Arc::clone(c),
        })
        .collect();
    RecordBatch::try_new(
        Arc::new(ArrowSchema::new_with_metadata(
            fields,
            schema.metadata().clone(),
        )),
        columns,
    )
    .map_err(|e| Error::compute("string views", e))
}

/// The field id Parquet records for an Arrow field.
pub(crate) fn field_id(f: &arrow_schema::Field) -> Option<i32> {
    f.metadata()
        .get(PARQUET_FIELD_ID_META_KEY)
        .and_then(|v| v.parse().ok())
}

/// A Parquet file that could not be read or written (`op`): not retried.
pub(crate) fn parquet_err(path: &str, op: &str, e: &dyn std::fmt::Display) -> Error {
    Error::Storage {
        path: path.to_string(),
        message: format!("{op} Parquet: {e}"),
        source: None,
        retryable: false,
    }
}

/// How a file's top-level columns become the current schema's: which roots to decode, and for
/// each target column, its position among the decoded ones (and whether only the time zone's
/// spelling differs, e.g. `UTC` and `+00:00`).
struct DirectPlan {
    roots: Vec<usize>,
    target: ArrowSchemaRef,
    columns: Vec<(usize, bool)>,
    /// With lineage: the position of each stored lineage column among the decoded ones.
    lineage: Option<[Option<usize>; 2]>,
}

impl DirectPlan {
    /// `lineage`: also decode the lineage columns the file stores (long columns, else the
    /// file is left to the upstream path, whose lineage reader reports it).
    fn new(file: &ArrowSchemaRef, target: &ArrowSchemaRef, lineage: bool) -> Option<Self> {
        let mut found = Vec::with_capacity(target.fields().len());
        for t in target.fields() {
            let id = field_id(t)?;
            let mut hits = file
                .fields()
                .iter()
                .enumerate()
                .filter(|(_, f)| field_id(f) == Some(id));
            let (root, f) = hits.next()?;
            if hits.next().is_some() {
                return None;
            }
            let retype = if f.data_type() == t.data_type() {
                false
            } else if same_instant_type(f.data_type(), t.data_type()) {
                true
            } else {
                return None;
            };
            found.push((root, retype));
        }
        let stored = if lineage {
            let stored = lineage::stored_roots(file);
            if stored
                .iter()
                .flatten()
                .any(|&r| file.field(r).data_type() != &DataType::Int64)
            {
                return None;
            }
            stored
        } else {
            [None, None]
        };
        let mut roots: Vec<usize> = found.iter().map(|(r, _)| *r).collect();
        roots.extend(stored.iter().flatten());
        roots.sort_unstable();
        roots.dedup();
        if roots.len() != found.len() + stored.iter().flatten().count() {
            return None;
        }
        let columns = found
            .iter()
            .map(|(r, retype)| (roots.binary_search(r).unwrap_or(0), *retype))
            .collect();
        let at = |r: Option<usize>| r.and_then(|r| roots.binary_search(&r).ok());
        Some(Self {
            target: if lineage {
                Arc::new(lineage::with_fields(target))
            } else {
                Arc::clone(target)
            },
            lineage: lineage.then(|| [at(stored[0]), at(stored[1])]),
            roots,
            columns,
        })
    }

    /// The decoded batch in the target schema (columns reordered, time zones respelled, nulls
    /// in required columns refused).
    fn to_target(
        &self,
        batch: &RecordBatch,
    ) -> std::result::Result<RecordBatch, arrow_schema::ArrowError> {
        let columns = self
            .columns
            .iter()
            .zip(self.target.fields())
            .map(|(&(i, retype), t)| {
                let c = Arc::clone(batch.column(i));
                if retype {
                    let data = c
                        .to_data()
                        .into_builder()
                        .data_type(t.data_type().clone())
                        .build()?;
                    Ok(make_array(data))
                } else {
                    Ok(c)
                }
            })
            .collect::<std::result::Result<Vec<ArrayRef>, arrow_schema::ArrowError>>()?;
        let mut columns = columns;
        if let Some(stored) = self.lineage {
            for s in stored {
                columns.push(match s {
                    Some(i) => Arc::clone(batch.column(i)),
                    None => arrow_array::new_null_array(&DataType::Int64, batch.num_rows()),
                });
            }
        }
        RecordBatch::try_new(Arc::clone(&self.target), columns)
    }
}

/// Timestamps of the same unit, both UTC-adjusted (time zone spelled differently).
fn same_instant_type(a: &DataType, b: &DataType) -> bool {
    let utc = |tz: &str| matches!(tz, "UTC" | "+00:00" | "Z" | "+0000" | "Etc/UTC");
    match (a, b) {
        (DataType::Timestamp(ua, Some(za)), DataType::Timestamp(ub, Some(zb))) => {
            ua == ub && utc(za) && utc(zb)
        }
        _ => false,
    }
}

/// Rows counted while reading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ReadCounts {
    pub(crate) files: u64,
    pub(crate) rows_read: u64,
    pub(crate) position_deleted: u64,
    pub(crate) vector_deleted: u64,
    pub(crate) equality_deleted: u64,
    pub(crate) bytes_read: u64,
}

impl ReadCounts {
    fn add(&mut self, o: &ReadCounts) {
        self.files += o.files;
        self.rows_read += o.rows_read;
        self.position_deleted += o.position_deleted;
        self.vector_deleted += o.vector_deleted;
        self.equality_deleted += o.equality_deleted;
        self.bytes_read += o.bytes_read;
    }
}

/// What reading one file needs, shareable with its task.
struct FileJob {
    reader: DataReader,
    ids: Arc<Vec<i32>>,
    file: GroupDataFile,
    positions: Option<Arc<Vec<u64>>>,
    positions_from_vector: bool,
    equality: Vec<Arc<EqualitySet>>,
    table: String,
}

impl FileJob {
    async fn rows(&self) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        let f = &self.file;
        self.reader.rows(&f.path, f.size_bytes, &self.ids).await
    }

    /// v3: what the file's rows derive their lineage from where they store none (filled in
    /// before any row is dropped, so each surviving row keeps its own).
    fn lineage(&self) -> Option<FileLineage> {
        self.reader.lineage.then_some(FileLineage {
            first_row_id: self.file.first_row_id,
            data_sequence_number: self.file.data_sequence_number,
        })
    }

    fn probes(&self, batch: &RecordBatch) -> Result<Vec<EqualityProbe>> {
        equality_probes(&self.table, &self.file.path, &self.equality, batch)
    }

    fn bad(&self, e: &Error) -> Error {
        Error::metadata(&self.table, &self.file.path, e.to_string())
    }
}

/// Start reading every data file of `group`; batches (deletes applied) arrive on the returned
/// channel, and the handle yields the counts once every file is read.
pub(crate) fn spawn_group_reader(
    table: &LoadedTable,
    group: &FileGroup,
    reader: &DataReader,
    deletes: &GroupDeletes,
    concurrency: usize,
) -> (
    mpsc::Receiver<Result<RecordBatch>>,
    tokio::task::JoinHandle<Result<ReadCounts>>,
) {
    let (tx, rx) = mpsc::channel::<Result<RecordBatch>>(concurrency.max(1) * 2);
    let ids = Arc::new(reader.all_ids());
    let jobs: Vec<FileJob> = group
        .data_files
        .iter()
        .map(|f| FileJob {
            reader: reader.clone(),
            ids: Arc::clone(&ids),
            positions: deletes.positions.get(&f.path).cloned(),
            positions_from_vector: f.deletes.iter().any(|&d| {
                group
                    .delete_files
                    .get(d)
                    .is_some_and(|x| x.kind == DeleteKind::DeletionVector)
            }),
            equality: f
                .deletes
                .iter()
                .filter_map(|d| deletes.equality.get(d).cloned())
                .collect(),
            file: f.clone(),
            table: table.id.to_string(),
        })
        .collect();
    let handle = tokio::spawn(async move {
        let mut total = ReadCounts::default();
        let mut running = futures::stream::iter(jobs)
            .map(|job| {
                let tx = tx.clone();
                tokio::spawn(read_file(job, tx))
            })
            .buffer_unordered(concurrency.max(1));
        while let Some(joined) = running.next().await {
            match joined.map_err(|e| Error::compute("reader task failed", e))? {
                Ok(counts) => total.add(&counts),
                Err(e) => {
                    // The consumer gets the error itself (a missing file stays a storage error);
                    // this task's result only matters when the consumer is gone.
                    let message = e.to_string();
                    let _ = tx.send(Err(e)).await;
                    return Err(Error::Internal(format!("read failed: {message}")));
                }
            }
        }
        Ok(total)
    });
    (rx, handle)
}

/// Read one file, apply its deletes, send what survives.
async fn read_file(job: FileJob, tx: mpsc::Sender<Result<RecordBatch>>) -> Result<ReadCounts> {
    let path = job.file.path.clone();
    let mut stream = job.rows().await?;
    let lineage = job.lineage();
    let mut counts = ReadCounts {
        files: 1,
        bytes_read: job.file.size_bytes,
        ..ReadCounts::default()
    };
    let positions = job.positions.as_deref().map_or(&[][..], Vec::as_slice);
    let mut cursor = 0usize;
    let mut offset: u64 = 0;
    let mut key_columns: Option<Vec<EqualityProbe>> = None;
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        let n = batch.num_rows();
        if n == 0 {
            continue;
        }
        let batch = match &lineage {
            Some(l) => l.fill(&batch, offset).map_err(|e| job.bad(&e))?,
            None => batch,
        };
        let end = offset + n as u64;
        if positions.is_empty() && job.equality.is_empty() {
            counts.rows_read += n as u64;
            offset = end;
            if tx.send(Ok(batch)).await.is_err() {
                return Ok(counts);
            }
            continue;
        }
        let mut deleted = vec![false; n];
        let mut pos_deleted = 0u64;
        while cursor < positions.len() && positions[cursor] < end {
            let p = positions[cursor];
            if p >= offset {
                deleted[(p - offset) as usize] = true;
                pos_deleted += 1;
            }
            cursor += 1;
        }
        let mut eq_deleted = 0u64;
        if !job.equality.is_empty() {
            let probes = match &key_columns {
                Some(p) => p,
                None => key_columns.insert(job.probes(&batch)?),
            };
            for probe in probes {
                eq_deleted += probe.mark(&batch, &mut deleted, &job.table, &path)?;
            }
        }
        counts.rows_read += n as u64;
        if job.positions_from_vector {
            counts.vector_deleted += pos_deleted;
        } else {
            counts.position_deleted += pos_deleted;
        }
        counts.equality_deleted += eq_deleted;
        offset = end;
        let out = if pos_deleted + eq_deleted == 0 {
            batch
        } else {
            let keep: BooleanArray = deleted.iter().map(|d| Some(!d)).collect();
            filter_record_batch(&batch, &keep)
                .map_err(|e| Error::compute("filter deleted rows", e))?
        };
        if out.num_rows() > 0 && tx.send(Ok(out)).await.is_err() {
            // The consumer stopped (its own error); nothing more to do.
            return Ok(counts);
        }
    }
    if offset != job.file.records {
        return Err(Error::metadata(
            &job.table,
            &path,
            format!(
                "data file has {offset} rows, its manifest entry says {}; row positions cannot be trusted",
                job.file.records
            ),
        ));
    }
    Ok(counts)
}

/// Equality sets that share field ids, probed with one encoding of the batch's key columns.
struct EqualityProbe {
    columns: Vec<usize>,
    converter: Arc<RowConverter>,
    sets: Vec<Arc<EqualitySet>>,
}

impl EqualityProbe {
    /// Mark each row of `batch` not marked yet whose key one of the sets holds; returns how
    /// many it marked.
    fn mark(
        &self,
        batch: &RecordBatch,
        marked: &mut [bool],
        table: &str,
        path: &str,
    ) -> Result<u64> {
        let cols: Vec<_> = self
            .columns
            .iter()
            .map(|&c| Arc::clone(batch.column(c)))
            .collect();
        let rows = self
            .converter
            .convert_columns(&cols)
            .map_err(|e| Error::compute(format!("{table}: equality keys of {path}"), e))?;
        let mut n = 0;
        for (i, m) in marked.iter_mut().enumerate() {
            if !*m
                && self
                    .sets
                    .iter()
                    .any(|s| s.keys.contains(rows.row(i).as_ref()))
            {
                *m = true;
                n += 1;
            }
        }
        Ok(n)
    }
}

fn equality_probes(
    table: &str,
    path: &str,
    equality: &[Arc<EqualitySet>],
    batch: &RecordBatch,
) -> Result<Vec<EqualityProbe>> {
    let schema = batch.schema();
    let by_id: HashMap<i32, usize> = schema
        .fields()
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            f.metadata()
                .get(PARQUET_FIELD_ID_META_KEY)
                .and_then(|v| v.parse().ok())
                .map(|id| (id, i))
        })
        .collect();
    let mut probes: Vec<(Vec<i32>, EqualityProbe)> = Vec::new();
    for set in equality {
        if let Some((_, p)) = probes.iter_mut().find(|(ids, _)| *ids == set.ids) {
            p.sets.push(Arc::clone(set));
            continue;
        }
        let columns = set
            .ids
            .iter()
            .map(|id| {
                by_id.get(id).copied().ok_or_else(|| {
                    Error::Internal(format!(
                        "{table}: equality field {id} missing from the rows of {path}"
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        probes.push((
            set.ids.clone(),
            EqualityProbe {
                columns,
                converter: Arc::clone(&set.converter),
                sets: vec![Arc::clone(set)],
            },
        ));
    }
    Ok(probes.into_iter().map(|(_, p)| p).collect())
}

/// The positions of `file`'s rows that one of the equality delete sets `equality` deletes,
/// reading only their key columns (what turning equality deletes into position deletes needs).
/// Positions in `skip` (already deleted by position) are left out.
pub(crate) async fn equality_positions(
    reader: &DataReader,
    table: &str,
    file: &GroupDataFile,
    equality: &[Arc<EqualitySet>],
    skip: &[u64],
) -> Result<roaring::RoaringTreemap> {
    let mut ids: Vec<i32> = equality
        .iter()
        .flat_map(|s| s.ids.iter().copied())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let mut stream = reader.stream(&file.path, file.size_bytes, &ids).await?;
    let mut out = roaring::RoaringTreemap::new();
    let mut probes: Option<Vec<EqualityProbe>> = None;
    let mut offset: u64 = 0;
    let mut cursor = 0usize;
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        let n = batch.num_rows() as u64;
        if n == 0 {
            continue;
        }
        let probes = match &probes {
            Some(p) => p,
            None => probes.insert(equality_probes(table, &file.path, equality, &batch)?),
        };
        let mut hit = vec![false; batch.num_rows()];
        for probe in probes {
            probe.mark(&batch, &mut hit, table, &file.path)?;
        }
        for (i, h) in hit.into_iter().enumerate() {
            let p = offset + i as u64;
            while cursor < skip.len() && skip[cursor] < p {
                cursor += 1;
            }
            if h && skip.get(cursor) != Some(&p) {
                out.insert(p);
            }
        }
        offset += n;
    }
    if offset != file.records {
        return Err(Error::metadata(
            table,
            &file.path,
            format!(
                "data file has {offset} rows, its manifest entry says {}; row positions cannot be trusted",
                file.records
            ),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use arrow_array::{Int64Array, StringArray, TimestampMicrosecondArray};
    use arrow_schema::{Field, TimeUnit};

    use super::*;

    fn field(name: &str, id: i32, t: DataType, nullable: bool) -> Field {
        Field::new(name, t, nullable).with_metadata(HashMap::from([(
            PARQUET_FIELD_ID_META_KEY.to_string(),
            id.to_string(),
        )]))
    }

    fn ts(tz: &str) -> DataType {
        DataType::Timestamp(TimeUnit::Microsecond, Some(tz.into()))
    }

    #[test]
    fn strings_decode_as_views_of_the_same_values_and_convert_back() {
        use parquet::arrow::ArrowWriter;
        let schema = Arc::new(ArrowSchema::new(vec![
            field("id", 1, DataType::Int64, false),
            field("s", 2, DataType::Utf8, true),
        ]));
        // Dictionary-encoded (few distinct values), long and short strings, and nulls.
        let values: Vec<Option<String>> = (0..5000)
            .map(|i| (i % 7 != 3).then(|| format!("value-{}-{}", i % 13, "x".repeat(i % 20))))
            .collect();
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from_iter_values(0..5000)),
                Arc::new(StringArray::from(values.clone())),
            ],
        )
        .expect("batch");
        let mut bytes = Vec::new();
        let mut w = ArrowWriter::try_new(&mut bytes, Arc::clone(&schema), None).expect("writer");
        w.write(&batch).expect("write");
        w.close().expect("close");
        let bytes = Bytes::from(bytes);
        let meta = ArrowReaderMetadata::load(&bytes, ArrowReaderOptions::new()).expect("footer");
        let fields: Vec<_> = meta.schema().fields().iter().map(viewed).collect();
        let hint = Arc::new(ArrowSchema::new(fields));
        let meta = ArrowReaderMetadata::try_new(
            Arc::clone(meta.metadata()),
            ArrowReaderOptions::new().with_schema(hint),
        )
        .expect("view hint");
        let mask = ProjectionMask::all();
        let decoded: Vec<RecordBatch> = decode(bytes, meta, mask)
            .expect("reader")
            .collect::<std::result::Result<_, _>>()
            .expect("decode");
        let mut got: Vec<Option<String>> = Vec::new();
        for b in &decoded {
            assert_eq!(b.column(1).data_type(), &DataType::Utf8View);
            let plain = crate::compact::write::plain_strings(b).expect("plain");
            assert_eq!(plain.column(1).data_type(), &DataType::Utf8);
            assert_eq!(field_id(plain.schema().field(1)), Some(2), "field id kept");
            let s = plain
                .column(1)
                .as_any()
                .downcast_ref::<StringArray>()
                .expect("strings");
            got.extend(s.iter().map(|v| v.map(str::to_string)));
            // And back to views without a copy of the values.
            let again = string_views(&plain).expect("views");
            assert_eq!(again.schema(), b.schema());
            assert_eq!(again.column(1).as_ref(), b.column(1).as_ref());
        }
        assert_eq!(got, values);
    }

    #[tokio::test]
    #[allow(clippy::too_many_lines)] // Reason: one file written, read and checked in one place.
    async fn stored_lineage_lines_up_with_rows_batched_differently() {
        use parquet::arrow::ArrowWriter;
        use parquet::file::properties::WriterProperties;
        // A file an earlier rewrite wrote: ids 0..100, row ids stored for most rows (null for
        // every 9th), no sequence numbers; row groups of 7 rows, so the two readers' batches
        // never line up.
        let schema = Arc::new(ArrowSchema::new(vec![
            field("id", 1, DataType::Int64, false),
            field("_row_id", lineage::ROW_ID, DataType::Int64, true),
        ]));
        let row_ids: Vec<Option<i64>> =
            (0..100).map(|i| (i % 9 != 4).then_some(5000 + i)).collect();
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from_iter_values(0..100)),
                Arc::new(Int64Array::from(row_ids.clone())),
            ],
        )
        .expect("batch");
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("f.parquet");
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(7))
            .build();
        let mut w = ArrowWriter::try_new(
            std::fs::File::create(&path).expect("file"),
            Arc::clone(&schema),
            Some(props),
        )
        .expect("writer");
        w.write(&batch).expect("write");
        w.close().expect("close");
        let size = std::fs::metadata(&path).expect("size").len();
        let location = format!("file://{}", path.display());
        let io = iceberg::io::FileIO::new_with_fs();
        let stored = stored_lineage(&io, &location, size)
            .await
            .expect("read")
            .expect("the file stores row ids");
        // The other columns, in batches of 5, 11, 3, 50 and 31 rows.
        let ids = RecordBatch::try_new(
            Arc::new(ArrowSchema::new(vec![field(
                "id",
                1,
                DataType::Int64,
                false,
            )])),
            vec![Arc::new(Int64Array::from_iter_values(0..100))],
        )
        .expect("ids");
        let mut at = 0;
        let parts: Vec<Result<RecordBatch>> = [5, 11, 3, 50, 31]
            .into_iter()
            .map(|n| {
                let b = ids.slice(at, n);
                at += n;
                Ok(b)
            })
            .collect();
        let out: Vec<RecordBatch> = lineage_beside(
            Box::pin(futures::stream::iter(parts)),
            Some(stored),
            &location,
        )
        .try_collect()
        .await
        .expect("rows with lineage");
        let filler = FileLineage {
            first_row_id: Some(100),
            data_sequence_number: 4,
        };
        let mut got_ids = Vec::new();
        let mut got_seqs = Vec::new();
        let mut offset = 0u64;
        for b in &out {
            assert_eq!(b.num_columns(), 3);
            let b = filler.fill(b, offset).expect("fill");
            offset += b.num_rows() as u64;
            let col = |i: usize| {
                b.column(i)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .expect("longs")
                    .iter()
                    .collect::<Vec<_>>()
            };
            got_ids.extend(col(1));
            got_seqs.extend(col(2));
        }
        let want: Vec<Option<i64>> = row_ids
            .iter()
            .enumerate()
            .map(|(i, v)| Some(v.unwrap_or(100 + i as i64)))
            .collect();
        assert_eq!(got_ids, want);
        assert_eq!(got_seqs, vec![Some(4); 100]);
        // A file that stores none: nothing to read beside it.
        let plain = dir.path().join("plain.parquet");
        let mut w = ArrowWriter::try_new(
            std::fs::File::create(&plain).expect("file"),
            ids.schema(),
            None,
        )
        .expect("writer");
        w.write(&ids).expect("write");
        w.close().expect("close");
        let size = std::fs::metadata(&plain).expect("size").len();
        let none = stored_lineage(&io, &format!("file://{}", plain.display()), size)
            .await
            .expect("read");
        assert!(none.is_none());
    }

    #[test]
    fn direct_plan_reorders_by_field_id_and_respells_utc() {
        let file = Arc::new(ArrowSchema::new(vec![
            field("s", 2, DataType::Utf8, true),
            field("extra", 9, DataType::Int64, true),
            field("t", 3, ts("UTC"), true),
            field("id", 1, DataType::Int64, true),
        ]));
        let target = Arc::new(ArrowSchema::new(vec![
            field("id", 1, DataType::Int64, false),
            field("t", 3, ts("+00:00"), true),
            field("s", 2, DataType::Utf8, true),
        ]));
        let plan = DirectPlan::new(&file, &target, false).expect("same columns");
        assert_eq!(plan.roots, vec![0, 2, 3]);
        // What the decoder yields for roots 0, 2, 3: s, t, id.
        let decoded = RecordBatch::try_new(
            Arc::new(ArrowSchema::new(vec![
                field("s", 2, DataType::Utf8, true),
                field("t", 3, ts("UTC"), true),
                field("id", 1, DataType::Int64, true),
            ])),
            vec![
                Arc::new(StringArray::from(vec!["a", "b"])),
                Arc::new(TimestampMicrosecondArray::from(vec![1, 2]).with_timezone("UTC")),
                Arc::new(Int64Array::from(vec![10, 20])),
            ],
        )
        .expect("batch");
        let out = plan.to_target(&decoded).expect("target batch");
        assert_eq!(out.schema(), target);
        assert_eq!(
            out.column(0).as_ref(),
            &Int64Array::from(vec![10, 20]) as &dyn Array
        );
        assert_eq!(
            out.column(2).as_ref(),
            &StringArray::from(vec!["a", "b"]) as &dyn Array
        );
        // A null in a required column is refused, not written.
        let with_null = RecordBatch::try_new(
            decoded.schema(),
            vec![
                Arc::clone(decoded.column(0)),
                Arc::clone(decoded.column(1)),
                Arc::new(Int64Array::from(vec![Some(1), None])),
            ],
        )
        .expect("batch");
        assert!(plan.to_target(&with_null).is_err());
    }

    #[test]
    fn direct_plan_leaves_other_files_to_upstream() {
        let target = Arc::new(ArrowSchema::new(vec![
            field("id", 1, DataType::Int64, false),
            field("n", 2, DataType::Int64, true),
        ]));
        // A promoted type (int → long), a missing column, no field ids.
        let promoted = Arc::new(ArrowSchema::new(vec![
            field("id", 1, DataType::Int64, false),
            field("n", 2, DataType::Int32, true),
        ]));
        let missing = Arc::new(ArrowSchema::new(vec![field(
            "id",
            1,
            DataType::Int64,
            false,
        )]));
        let no_ids = Arc::new(ArrowSchema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("n", DataType::Int64, true),
        ]));
        for file in [promoted, missing, no_ids] {
            assert!(DirectPlan::new(&file, &target, false).is_none(), "{file:?}");
        }
        assert!(!same_instant_type(&ts("UTC"), &ts("Europe/Paris")));
        assert!(!same_instant_type(
            &DataType::Timestamp(TimeUnit::Microsecond, None),
            &ts("UTC")
        ));
    }
}
