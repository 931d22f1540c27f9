//! Streaming output: rows split by the table's default partition spec into rolling Parquet
//! writers with the table's write properties: on object stores upstream's rolling
//! `ParquetWriter`s (field ids and column metrics come with the files), on local filesystems
//! [`LocalRolling`], which writes the same files and entries without their copies.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow_array::RecordBatch;
use iceberg::arrow::RecordBatchPartitionSplitter;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, PartitionKey, PartitionSpecRef,
    SchemaRef, Struct,
};
use iceberg::writer::CurrentFileStatus;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{
    DefaultFileNameGenerator, DefaultLocationGenerator, LocationGenerator,
};
use iceberg::writer::file_writer::rolling_writer::{RollingFileWriter, RollingFileWriterBuilder};
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

use super::local_out::LocalRolling;
use crate::catalog::LoadedTable;
use crate::commit::write::{
    MetricsMode, default_metrics_mode, metrics_mode, parquet_codec, positive_size,
};
use crate::error::{Error, Result};

const ROW_GROUP_BYTES: &str = "write.parquet.row-group-size-bytes";
const PAGE_BYTES: &str = "write.parquet.page-size-bytes";
const DICT_BYTES: &str = "write.parquet.dict-size-bytes";
const METRICS_COLUMN: &str = "write.metadata.metrics.column.";
/// Java's defaults.
const DEFAULT_ROW_GROUP_BYTES: u64 = 128 << 20;
const DEFAULT_PAGE_BYTES: u64 = 1 << 20;
/// Java's default for `write.parquet.dict-size-bytes`.
const DEFAULT_DICT_BYTES: u64 = 2 << 20;
/// Rows of a group's first batch that decide which columns are written without a dictionary.
const DICTIONARY_SAMPLE_ROWS: usize = 8192;
/// Rows whose partition values are computed to find that input of one partition of the default
/// spec is what it says (the rest of the group's rows are not split again).
const PARTITION_PROBE_ROWS: usize = 8192;
/// Fixed buffers of one open Parquet writer, as budgeted (column and page buffers).
const WRITER_FLOOR_BYTES: u64 = 4 << 20;

/// The table's write settings, resolved once per rewrite.
#[derive(Debug, Clone)]
pub(crate) struct WriteSettings {
    pub(crate) properties: WriterProperties,
    pub(crate) codec: String,
    pub(crate) codec_defaulted: bool,
    pub(crate) target_file_size: u64,
    pub(crate) row_group_bytes: u64,
    /// Field id → metrics mode, for every field of the current schema.
    metrics: HashMap<i32, MetricsMode>,
}

/// Codec, level, row-group and page sizes and metrics modes from the table's properties.
///
/// The row group is capped at half of `writer_budget` so that one in-progress row group per
/// open writer fits the memory budget (the cap is the only deviation from the table's value).
pub(crate) fn write_settings(
    table: &LoadedTable,
    target_file_size: u64,
    writer_budget: u64,
) -> Result<WriteSettings> {
    let p = table.metadata.properties();
    let codec = parquet_codec(table)?;
    let row_group_bytes = positive_size(table, ROW_GROUP_BYTES, DEFAULT_ROW_GROUP_BYTES)?
        .min((writer_budget / 2).max(1 << 20));
    let page_bytes = positive_size(table, PAGE_BYTES, DEFAULT_PAGE_BYTES)?;
    let dict_bytes = positive_size(table, DICT_BYTES, DEFAULT_DICT_BYTES)?;
    let default_mode = default_metrics_mode(table);
    let schema = table.metadata.current_schema();
    let mut metrics = HashMap::new();
    for f in schema.as_struct().fields() {
        let mode = p
            .get(&format!("{METRICS_COLUMN}{}", f.name))
            .map_or(default_mode, |m| metrics_mode(m));
        metrics.insert(f.id, mode);
        // Nested fields follow their top-level column (Java resolves them by full name; a
        // per-nested-column setting is rare enough to take the parent's).
        let mut stack = vec![f.field_type.as_ref().clone()];
        while let Some(t) = stack.pop() {
            if let iceberg::spec::Type::Struct(s) = &t {
                for c in s.fields() {
                    metrics.insert(c.id, mode);
                    stack.push(c.field_type.as_ref().clone());
                }
            } else if let iceberg::spec::Type::List(l) = &t {
                metrics.insert(l.element_field.id, mode);
                stack.push(l.element_field.field_type.as_ref().clone());
            } else if let iceberg::spec::Type::Map(m) = &t {
                metrics.insert(m.key_field.id, mode);
                metrics.insert(m.value_field.id, mode);
                stack.push(m.key_field.field_type.as_ref().clone());
                stack.push(m.value_field.field_type.as_ref().clone());
            }
        }
    }
    let properties = WriterProperties::builder()
        .set_compression(codec.compression)
        .set_max_row_group_row_count(None)
        .set_max_row_group_bytes(Some(row_group_bytes as usize))
        .set_data_page_size_limit(page_bytes as usize)
        .set_dictionary_page_size_limit(dict_bytes as usize)
        .set_created_by(crate::commit::write::CREATED_BY.to_string())
        .build();
    Ok(WriteSettings {
        properties,
        codec: codec.label,
        codec_defaulted: codec.defaulted,
        target_file_size,
        row_group_bytes,
        metrics,
    })
}

/// The top-level columns of `sample` that a dictionary would not make smaller, to be written
/// plain from the start.
///
/// Java's writer (parquet-mr) tries a dictionary and drops it after a column's first page when
/// dictionary and indices together are not smaller than the plain values; the Parquet crate
/// keeps it until the dictionary reaches its size limit. A column of (nearly) unique values
/// then spends its first megabytes hashing values into a dictionary it discards, and leaves
/// dictionary-encoded pages that compress worse than plain ones. The same test as Java's, on
/// the group's first rows: `distinct × width + rows × index bits / 8 ≥ rows × width`.
fn plain_columns(sample: &RecordBatch) -> Vec<String> {
    use arrow_array::Array;
    use arrow_array::types::{BinaryType, LargeBinaryType, LargeUtf8Type, Utf8Type};
    use arrow_schema::DataType;

    let mut plain = Vec::new();
    for (field, column) in sample.schema().fields().iter().zip(sample.columns()) {
        // Plain byte arrays carry a 4-byte length each.
        let prefix = usize::from(matches!(
            field.data_type(),
            DataType::Utf8
                | DataType::Utf8View
                | DataType::LargeUtf8
                | DataType::Binary
                | DataType::LargeBinary
        )) * 4;
        let data = column.to_data();
        let values: Vec<&[u8]> = match field.data_type() {
            DataType::Utf8 => byte_values::<Utf8Type>(column),
            DataType::Utf8View => {
                use arrow_array::cast::AsArray;
                column
                    .as_string_view()
                    .iter()
                    .flatten()
                    .map(str::as_bytes)
                    .collect()
            }
            DataType::LargeUtf8 => byte_values::<LargeUtf8Type>(column),
            DataType::Binary => byte_values::<BinaryType>(column),
            DataType::LargeBinary => byte_values::<LargeBinaryType>(column),
            t => match t.primitive_width() {
                // Booleans are never dictionary-encoded; nested columns keep the default.
                Some(width) if width >= 4 && !matches!(t, DataType::Boolean) => {
                    let Some(buffer) = data.buffers().first() else {
                        continue;
                    };
                    let start = data.offset() * width;
                    let Some(bytes) = buffer.as_slice().get(start..start + data.len() * width)
                    else {
                        continue;
                    };
                    bytes
                        .chunks_exact(width)
                        .enumerate()
                        .filter(|(i, _)| column.is_valid(*i))
                        .map(|(_, v)| v)
                        .collect()
                }
                _ => continue,
            },
        };
        let rows = values.len();
        if rows < 1024 {
            continue;
        }
        let plain_bytes: usize = values.iter().map(|v| v.len() + prefix).sum();
        let distinct: HashSet<&[u8]> = values.iter().copied().collect();
        let dictionary_bytes: usize = distinct.iter().map(|v| v.len() + prefix).sum();
        let index_bits = usize::BITS - distinct.len().leading_zeros();
        let indices = rows * index_bits as usize / 8;
        if dictionary_bytes + indices >= plain_bytes {
            plain.push(field.name().clone());
        }
    }
    plain
}

/// `batch` with its string-view columns as plain strings (a copy; see
/// [`DataReader::with_string_views`](super::read::DataReader::with_string_views)).
pub(crate) fn plain_strings(batch: &RecordBatch) -> Result<RecordBatch> {
    use arrow_array::cast::AsArray;
    use arrow_array::{ArrayRef, StringArray};
    use arrow_schema::{DataType, Schema};
    let schema = batch.schema();
    if !schema
        .fields()
        .iter()
        .any(|f| f.data_type() == &DataType::Utf8View)
    {
        return Ok(batch.clone());
    }
    let fields: Vec<_> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Utf8View => Arc::new(f.as_ref().clone().with_data_type(DataType::Utf8)),
            _ => Arc::clone(f),
        })
        .collect();
    let columns = batch
        .columns()
        .iter()
        .map(|c| match c.data_type() {
            DataType::Utf8View => {
                Arc::new(c.as_string_view().iter().collect::<StringArray>()) as ArrayRef
            }
            _ => Arc::clone(c),
        })
        .collect();
    RecordBatch::try_new(
        Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone())),
        columns,
    )
    .map_err(|e| Error::compute("plain strings", e))
}

/// The non-null values of a string or binary column, as bytes.
fn byte_values<T: arrow_array::types::ByteArrayType>(column: &dyn arrow_array::Array) -> Vec<&[u8]>
where
    T::Native: AsRef<[u8]>,
{
    use arrow_array::cast::AsArray;
    column
        .as_bytes::<T>()
        .iter()
        .flatten()
        .map(AsRef::as_ref)
        .collect()
}

type Rolling =
    RollingFileWriter<ParquetWriterBuilder, DefaultLocationGenerator, DefaultFileNameGenerator>;

/// Where one partition's files go: straight to local files, or through upstream's writers (and
/// the table's file I/O) for object stores.
enum Files {
    Local(Box<LocalRolling>),
    Upstream(Box<Rolling>),
}

impl Files {
    async fn write(
        &mut self,
        key: Option<&PartitionKey>,
        batch: &RecordBatch,
        table: &str,
    ) -> Result<()> {
        match self {
            Self::Local(w) => w.write(key, batch),
            Self::Upstream(w) => w
                .write(&key.cloned(), batch)
                .await
                .map_err(|e| write_err(table, &e)),
        }
    }

    fn current_file_path(&self) -> String {
        match self {
            Self::Local(w) => w.current_file_path(),
            Self::Upstream(w) => w.current_file_path(),
        }
    }

    fn current_written_size(&self) -> u64 {
        match self {
            Self::Local(w) => w.current_written_size(),
            Self::Upstream(w) => w.current_written_size() as u64,
        }
    }

    async fn close(self, table: &str) -> Result<Vec<DataFileBuilder>> {
        match self {
            Self::Local(w) => w.close(),
            Self::Upstream(w) => w.close().await.map_err(|e| write_err(table, &e)),
        }
    }
}

struct OpenWriter {
    key: Option<PartitionKey>,
    data: Struct,
    writer: Files,
    wrote: bool,
}

/// Writes a group's rows into the current spec at the target size.
pub(crate) struct GroupWriter {
    table: LoadedTable,
    settings: WriteSettings,
    schema: SchemaRef,
    spec: PartitionSpecRef,
    splitter: Option<RecordBatchPartitionSplitter>,
    writers: HashMap<String, OpenWriter>,
    /// Open writers allowed before the fullest is closed (each has fixed buffers).
    max_open: usize,
    /// Bytes the open writers may hold together before the fullest is closed.
    writer_budget: u64,
    prefix: String,
    next_writer: u32,
    sort_order_id: Option<i32>,
    files: Vec<DataFile>,
    paths: HashSet<String>,
    /// Whether the input is one partition of the default spec.
    same_spec: bool,
    /// Whether the columns a dictionary would not pay for have been chosen (on the first batch).
    dictionaries_chosen: bool,
    /// Its partition, once seen.
    single: Option<PartitionKey>,
}

impl GroupWriter {
    pub(crate) fn new(
        table: &LoadedTable,
        settings: WriteSettings,
        group_id: u32,
        writer_budget: u64,
        sort_order_id: Option<i32>,
        same_spec: bool,
    ) -> Result<Self> {
        let md = table.metadata.as_ref();
        // v3: the files carry every row's lineage columns (see `lineage`); partition values
        // come from the table's own columns.
        let schema = super::lineage::write_schema(&table.id.to_string(), md)?;
        let spec = Arc::clone(md.default_partition_spec());
        let splitter = if spec.is_unpartitioned() {
            None
        } else {
            Some(
                RecordBatchPartitionSplitter::try_new_with_computed_values(
                    Arc::clone(md.current_schema()),
                    Arc::clone(&spec),
                )
                .map_err(|e| Error::compute(format!("{}: partition splitter", table.id), e))?,
            )
        };
        let max_open = (writer_budget / WRITER_FLOOR_BYTES).max(2) as usize;
        Ok(Self {
            table: table.clone(),
            settings,
            schema,
            spec,
            splitter,
            writers: HashMap::new(),
            max_open,
            writer_budget,
            // Java's naming: <partition>-<task>-<operation uuid>-<file>.parquet.
            prefix: format!("{group_id:05}"),
            next_writer: 0,
            sort_order_id,
            files: Vec::new(),
            paths: HashSet::new(),
            same_spec,
            single: None,
            dictionaries_chosen: false,
        })
    }

    /// Write one batch (in the current schema's Arrow form).
    pub(crate) async fn write(&mut self, batch: RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if !self.dictionaries_chosen {
            self.dictionaries_chosen = true;
            let plain =
                plain_columns(&batch.slice(0, batch.num_rows().min(DICTIONARY_SAMPLE_ROWS)));
            if !plain.is_empty() {
                let mut b = self.settings.properties.clone().into_builder();
                for name in plain {
                    b = b.set_column_dictionary_enabled(ColumnPath::from(name), false);
                }
                self.settings.properties = b.build();
            }
        }
        let parts: Vec<(Option<PartitionKey>, RecordBatch)> = match (&self.splitter, &self.single) {
            (None, _) => vec![(None, batch)],
            (Some(_), Some(key)) => vec![(Some(key.clone()), batch)],
            (Some(s), None) => {
                let split = |b: &RecordBatch| -> Result<Vec<(Option<PartitionKey>, RecordBatch)>> {
                    // Partition transforms take plain strings.
                    Ok(s.split(&plain_strings(b)?)
                        .map_err(|e| {
                            Error::compute(format!("{}: partition rows", self.table.id), e)
                        })?
                        .into_iter()
                        .map(|(k, b)| (Some(k), b))
                        .collect())
                };
                // Input of one partition of the default spec stays in that partition: computing
                // partition values for the first rows is enough (it is most of the splitter's
                // cost, and staging batches are large).
                if self.same_spec {
                    let probe = batch.num_rows().min(PARTITION_PROBE_ROWS);
                    let first = split(&batch.slice(0, probe))?;
                    if let [(Some(key), _)] = first.as_slice() {
                        self.single = Some(key.clone());
                        vec![(Some(key.clone()), batch)]
                    } else if probe == batch.num_rows() {
                        first
                    } else {
                        split(&batch)?
                    }
                } else {
                    split(&batch)?
                }
            }
        };
        for (key, part) in parts {
            // Keyed by the partition values, not by Iceberg's path: a null and the string `null`
            // share a path, and their rows must not share a file (or its partition tuple).
            let path = key
                .as_ref()
                .map_or_else(String::new, |k| format!("{:?}", k.data()));
            if !self.writers.contains_key(&path) {
                if self.writers.len() >= self.max_open {
                    self.close_fullest().await?;
                }
                let w = self.open(key)?;
                self.writers.insert(path.clone(), w);
            }
            let name = self.table.id.to_string();
            let w = self
                .writers
                .get_mut(&path)
                .ok_or_else(|| Error::Internal("writer vanished".into()))?;
            w.writer.write(w.key.as_ref(), &part, &name).await?;
            w.wrote = true;
            let current = w.writer.current_file_path();
            if !self.paths.contains(&current) {
                self.paths.insert(current);
            }
        }
        // Rows fanning out into many partitions: keep what the open writers hold (the bytes of
        // their current files, an upper bound of their buffers) within the writers' share.
        while self.writers.len() > 1 && self.open_bytes() > self.writer_budget {
            self.close_fullest().await?;
        }
        Ok(())
    }

    fn open_bytes(&self) -> u64 {
        self.writers
            .values()
            .filter(|w| w.wrote)
            .map(|w| w.writer.current_written_size())
            .sum()
    }

    fn open(&mut self, key: Option<PartitionKey>) -> Result<OpenWriter> {
        let md = self.table.metadata.as_ref();
        let locations = DefaultLocationGenerator::new(md)
            .map_err(|e| Error::compute(format!("{}: data location", self.table.id), e))?;
        let names = DefaultFileNameGenerator::new(
            format!(
                "{}-{}-{}",
                self.prefix,
                self.next_writer,
                crate::random::uuid()
            ),
            None,
            DataFileFormat::Parquet,
        );
        self.next_writer += 1;
        let writer = if LocalRolling::serves(&locations.generate_location(key.as_ref(), "probe")) {
            Files::Local(Box::new(LocalRolling::new(
                Arc::clone(&self.schema),
                self.settings.properties.clone(),
                self.settings.target_file_size,
                locations,
                names,
            )?))
        } else {
            Files::Upstream(Box::new(
                RollingFileWriterBuilder::new(
                    ParquetWriterBuilder::new(
                        self.settings.properties.clone(),
                        Arc::clone(&self.schema),
                    ),
                    self.settings.target_file_size as usize,
                    self.table.file_io.clone(),
                    locations,
                    names,
                )
                .build(),
            ))
        };
        Ok(OpenWriter {
            data: key
                .as_ref()
                .map_or_else(Struct::empty, |k| k.data().clone()),
            key,
            writer,
            wrote: false,
        })
    }

    async fn close_fullest(&mut self) -> Result<()> {
        let fullest = self
            .writers
            .iter()
            .filter(|(_, w)| w.wrote)
            .max_by_key(|(_, w)| w.writer.current_written_size())
            .map(|(k, _)| k.clone());
        if let Some(k) = fullest
            && let Some(w) = self.writers.remove(&k)
        {
            self.close_one(w).await?;
        }
        Ok(())
    }

    async fn close_one(&mut self, w: OpenWriter) -> Result<()> {
        let name = self.table.id.to_string();
        let builders = w.writer.close(&name).await?;
        for mut b in builders {
            b.partition(w.data.clone())
                .partition_spec_id(self.spec.spec_id())
                .content(DataContentType::Data);
            if let Some(id) = self.sort_order_id {
                b.sort_order_id(id);
            }
            let file = self.finish_metrics(b)?;
            self.paths.insert(file.file_path().to_string());
            self.files.push(file);
        }
        Ok(())
    }

    /// Drop the metrics the table's metrics modes do not keep (Java keeps column sizes always,
    /// counts unless `none`, bounds only for `truncate`/`full`).
    fn finish_metrics(&self, mut b: DataFileBuilder) -> Result<DataFile> {
        let name = &self.table.id;
        let built = b
            .clone()
            .build()
            .map_err(|e| Error::compute(format!("{name}: data file entry"), e))?;
        let mode = |id: &i32| {
            self.settings
                .metrics
                .get(id)
                .copied()
                .unwrap_or(MetricsMode::Bounds)
        };
        if self
            .settings
            .metrics
            .values()
            .all(|m| *m == MetricsMode::Bounds)
        {
            return Ok(built);
        }
        let counts = |m: &HashMap<i32, u64>| {
            m.iter()
                .filter(|(id, _)| mode(id) != MetricsMode::None)
                .map(|(k, v)| (*k, *v))
                .collect::<HashMap<_, _>>()
        };
        let bounds = |m: &HashMap<i32, iceberg::spec::Datum>| {
            m.iter()
                .filter(|(id, _)| mode(id) == MetricsMode::Bounds)
                .map(|(k, v)| (*k, v.clone()))
                .collect::<HashMap<_, _>>()
        };
        b.value_counts(counts(built.value_counts()))
            .null_value_counts(counts(built.null_value_counts()))
            .nan_value_counts(counts(built.nan_value_counts()))
            .lower_bounds(bounds(built.lower_bounds()))
            .upper_bounds(bounds(built.upper_bounds()));
        b.build()
            .map_err(|e| Error::compute(format!("{name}: data file entry"), e))
    }

    /// Close every writer; the files written and every path created, in path order. On
    /// failure, the error and every path created so far (for cleanup).
    pub(crate) async fn finish(
        mut self,
    ) -> std::result::Result<(Vec<DataFile>, Vec<String>), (Error, Vec<String>)> {
        let mut keys: Vec<String> = self.writers.keys().cloned().collect();
        keys.sort();
        for k in keys {
            if let Some(w) = self.writers.remove(&k)
                && w.wrote
                && let Err(e) = self.close_one(w).await
            {
                return Err((e, self.written_paths()));
            }
        }
        let paths = self.written_paths();
        let mut files = std::mem::take(&mut self.files);
        files.sort_by(|a, b| a.file_path().cmp(b.file_path()));
        Ok((files, paths))
    }

    /// Every file this writer has created so far (finished or not), for cleanup.
    pub(crate) fn written_paths(&self) -> Vec<String> {
        let mut p: Vec<String> = self.paths.iter().cloned().collect();
        p.sort();
        p
    }
}

fn write_err(table: &str, e: &iceberg::Error) -> Error {
    Error::Storage {
        path: table.to_string(),
        message: format!("write Parquet: {}", e.message()),
        source: None,
        retryable: e.retryable(),
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::{ArrayRef, Float64Array, Int32Array, Int64Array, StringArray};

    use super::*;

    #[test]
    fn columns_a_dictionary_would_not_shrink_are_written_plain() {
        let rows = 8192;
        let batch = RecordBatch::try_from_iter([
            // Unique: plain.
            (
                "id",
                Arc::new(Int64Array::from_iter_values(0..rows)) as ArrayRef,
            ),
            (
                "amount",
                Arc::new(Float64Array::from_iter_values(
                    (0..rows).map(|i| i as f64 * 0.37),
                )),
            ),
            (
                "payload",
                Arc::new(StringArray::from_iter_values(
                    (0..rows).map(|i| format!("event-{i:08}")),
                )),
            ),
            // Few distinct values: dictionary.
            (
                "qty",
                Arc::new(Int32Array::from_iter_values(
                    (0..rows).map(|i| (i % 9) as i32),
                )),
            ),
            (
                "category",
                Arc::new(StringArray::from_iter_values(
                    (0..rows).map(|i| format!("c{}", i % 40)),
                )),
            ),
            // Half the values repeat: index bits + dictionary still beat 8-byte values.
            (
                "user_id",
                Arc::new(Int64Array::from_iter_values((0..rows).map(|i| i / 2))),
            ),
            // Mostly null: too few values to judge, the default stays.
            (
                "rare",
                Arc::new(
                    (0..rows)
                        .map(|i| (i % 100 == 0).then_some(i))
                        .collect::<Int64Array>(),
                ),
            ),
        ])
        .expect("batch");
        assert_eq!(plain_columns(&batch), ["id", "amount", "payload"]);
        // A slice reads its own rows (offsets into shared buffers).
        let tail = batch.slice(4096, 2048);
        assert_eq!(plain_columns(&tail), ["id", "amount", "payload"]);
        assert!(plain_columns(&batch.slice(0, 100)).is_empty());
    }
}
