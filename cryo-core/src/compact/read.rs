//! Reading a group's data files: projected to the current schema by field id (upstream's
//! `ArrowReader` does the schema evolution: renames, added columns, type promotion, name
//! mapping), with position deletes, deletion vectors and equality deletes applied by Cryo and
//! counted by kind.
//!
//! Each data file is read by its own task, in file order (one task per file, no predicate, so
//! batches arrive in row order and a running offset is the row position). At most
//! `concurrency` files are open at once; batches go through one bounded channel.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{BooleanArray, RecordBatch};
use arrow_row::RowConverter;
use arrow_select::filter::filter_record_batch;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use iceberg::arrow::{ArrowReader, ArrowReaderBuilder};
use iceberg::scan::{FileScanTask, FileScanTaskStream};
use iceberg::spec::{DataFileFormat, NameMapping, SchemaRef};
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;
use tokio::sync::mpsc;

use super::deletes::{EqualitySet, GroupDeletes};
use super::plan::{DeleteKind, FileGroup, GroupDataFile};
use crate::catalog::LoadedTable;
use crate::error::{Error, Result};

/// Rows per batch read (Parquet's default of 1024 costs throughput).
pub(crate) const READ_BATCH_ROWS: usize = 8192;
/// `schema.name-mapping.default`.
const NAME_MAPPING: &str = "schema.name-mapping.default";

pub(crate) fn storage_err(path: &str, what: &str, e: iceberg::Error) -> Error {
    let retryable = e.retryable();
    Error::Storage {
        path: path.to_string(),
        message: format!("{what}: {}", e.message()),
        source: Some(Box::new(e)),
        retryable,
    }
}

/// Reads Parquet files of a table projected to its current schema.
#[derive(Clone)]
pub(crate) struct DataReader {
    reader: ArrowReader,
    schema: SchemaRef,
    name_mapping: Option<Arc<NameMapping>>,
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
        Ok(Self {
            reader: ArrowReaderBuilder::new(table.file_io.clone(), runtime)
                .with_data_file_concurrency_limit(1)
                .with_batch_size(READ_BATCH_ROWS)
                .with_row_group_filtering_enabled(false)
                .build(),
            schema: Arc::clone(table.metadata.current_schema()),
            name_mapping,
        })
    }

    /// The rows of one Parquet file, in file order, with the fields `ids` of the current schema.
    pub(crate) fn stream(
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
        let stream = self
            .reader
            .clone()
            .read(tasks)
            .map_err(|e| storage_err(path, "read Parquet", e))?
            .stream()
            .map_err(move |e| storage_err(&owned, "read Parquet", e));
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
            match joined.map_err(|e| Error::Internal(format!("reader task failed: {e}")))? {
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
    let mut stream = job.reader.stream(&path, job.file.size_bytes, &job.ids)?;
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
        let end = offset + n as u64;
        if positions.is_empty() && job.equality.is_empty() {
            counts.rows_read += n as u64;
            offset = end;
            if tx.send(Ok(batch)).await.is_err() {
                return Ok(counts);
            }
            continue;
        }
        let mut keep = vec![true; n];
        let mut pos_deleted = 0u64;
        while cursor < positions.len() && positions[cursor] < end {
            let p = positions[cursor];
            if p >= offset {
                keep[(p - offset) as usize] = false;
                pos_deleted += 1;
            }
            cursor += 1;
        }
        let mut eq_deleted = 0u64;
        if !job.equality.is_empty() {
            let probes = match &key_columns {
                Some(p) => p,
                None => key_columns.insert(equality_probes(&job, &batch)?),
            };
            for probe in probes {
                let cols: Vec<_> = probe
                    .columns
                    .iter()
                    .map(|&c| Arc::clone(batch.column(c)))
                    .collect();
                let rows = probe.converter.convert_columns(&cols).map_err(|e| {
                    Error::Internal(format!("{}: equality keys of {path}: {e}", job.table))
                })?;
                for (i, k) in keep.iter_mut().enumerate() {
                    if *k {
                        let key = rows.row(i);
                        if probe.sets.iter().any(|s| s.keys.contains(key.as_ref())) {
                            *k = false;
                            eq_deleted += 1;
                        }
                    }
                }
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
            filter_record_batch(&batch, &BooleanArray::from(keep))
                .map_err(|e| Error::Internal(format!("filter deleted rows: {e}")))?
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

fn equality_probes(job: &FileJob, batch: &RecordBatch) -> Result<Vec<EqualityProbe>> {
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
    for set in &job.equality {
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
                        "{}: equality field {id} missing from the rows of {}",
                        job.table, job.file.path
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
