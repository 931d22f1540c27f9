//! Loading a group's delete files: position delete files and deletion vectors into sorted
//! position lists per data file, equality delete files into hash sets of encoded keys.
//!
//! Upstream's reader applies position and equality deletes but cannot read deletion vectors
//! (Puffin blobs) and does not say which kind removed a row, so Cryo applies all three itself.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_row::{RowConverter, SortField};
use futures::{StreamExt, TryStreamExt};
use iceberg::arrow::ArrowFileReader;
use iceberg::io::FileMetadata;
use iceberg::spec::SchemaRef;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::arrow::{PARQUET_FIELD_ID_META_KEY, ParquetRecordBatchStreamBuilder, ProjectionMask};
use parquet::schema::types::SchemaDescriptor;
use roaring::RoaringTreemap;

use super::plan::{DeleteKind, FileGroup, GroupDeleteFile};
use super::read::{DataReader, READ_BATCH_ROWS, WHOLE_FILE_BYTES, decode, storage_err};
use crate::catalog::LoadedTable;
use crate::error::{Error, Result};

/// Magic bytes of a `deletion-vector-v1` blob.
const DV_MAGIC: [u8; 4] = [0xD1, 0xD3, 0x39, 0x64];

/// The deletes of one group, loaded.
pub(crate) struct GroupDeletes {
    /// Data file path → deleted positions (sorted, distinct), from position delete files and
    /// deletion vectors that apply to it.
    pub(crate) positions: HashMap<String, Arc<Vec<u64>>>,
    /// Equality delete sets, by index into the group's delete files.
    pub(crate) equality: HashMap<usize, Arc<EqualitySet>>,
}

/// The keys of one equality delete file.
pub(crate) struct EqualitySet {
    /// Equality field ids, in the order the keys are encoded.
    pub(crate) ids: Vec<i32>,
    /// Row-encoded keys (nulls compare equal, as in Java's `StructLikeSet`).
    pub(crate) keys: HashSet<Box<[u8]>>,
    /// Encoder for data rows (same column types as the keys).
    pub(crate) converter: Arc<RowConverter>,
}

impl GroupDeletes {
    /// Load every delete file of `group` (the position ones filtered to the group's data
    /// files and to the files each one applies to).
    pub(crate) async fn load(
        table: &LoadedTable,
        group: &FileGroup,
        reader: &DataReader,
        schema: &SchemaRef,
    ) -> Result<Self> {
        // Position deletes: which data files each position file / vector may touch.
        let mut wanted: BTreeMap<usize, HashSet<&str>> = BTreeMap::new();
        for f in &group.data_files {
            for &d in &f.deletes {
                wanted.entry(d).or_default().insert(f.path.as_str());
            }
        }
        let mut positions: HashMap<String, RoaringTreemap> = HashMap::new();
        let mut equality = HashMap::new();
        for (d, files) in wanted {
            let del = group.delete_files.get(d).ok_or_else(|| {
                Error::Internal(format!(
                    "{}: group {} lists delete file {d} it does not have",
                    table.id, group.id
                ))
            })?;
            match del.kind {
                DeleteKind::Position => {
                    for (path, set) in read_position_file(table, del, &files).await? {
                        *positions.entry(path).or_default() |= set;
                    }
                }
                DeleteKind::DeletionVector => {
                    let target = del.referenced_data_file.as_deref().ok_or_else(|| {
                        Error::metadata(
                            &table.id,
                            &del.path,
                            "deletion vector without a referenced data file",
                        )
                    })?;
                    let set = read_deletion_vector(table, del).await?;
                    *positions.entry(target.to_string()).or_default() |= set;
                }
                DeleteKind::Equality => {
                    equality.insert(
                        d,
                        Arc::new(read_equality_file(table, del, reader, schema).await?),
                    );
                }
            }
        }
        Ok(Self {
            positions: positions
                .into_iter()
                .map(|(k, v)| (k, Arc::new(v.iter().collect())))
                .collect(),
            equality,
        })
    }
}

/// Rows of a Parquet position delete file for the data files in `files`.
pub(crate) async fn read_position_file(
    table: &LoadedTable,
    del: &GroupDeleteFile,
    files: &HashSet<&str>,
) -> Result<HashMap<String, RoaringTreemap>> {
    let input = table
        .file_io
        .new_input(&del.path)
        .map_err(|e| storage_err(&del.path, "open position delete file", e))?;
    let bad = |m: String| Error::metadata(&table.id, &del.path, m);
    let mut out: HashMap<String, RoaringTreemap> = HashMap::new();
    if del.size_bytes <= WHOLE_FILE_BYTES {
        // One read, decoded from memory.
        let bytes = input
            .read()
            .await
            .map_err(|e| storage_err(&del.path, "open position delete file", e))?;
        let meta = ArrowReaderMetadata::load(&bytes, ArrowReaderOptions::new())
            .map_err(|e| bad(format!("cannot read position delete file: {e}")))?;
        let (mask, p, q) = position_columns(meta.parquet_schema(), &bad)?;
        let batches = decode(bytes, meta, mask)
            .map_err(|e| bad(format!("cannot read position delete file: {e}")))?;
        for batch in batches {
            let batch = batch.map_err(|e| bad(format!("cannot read position delete file: {e}")))?;
            add_positions(&batch, p, q, files, &mut out, &bad)?;
        }
        return Ok(out);
    }
    let read = input
        .reader()
        .await
        .map_err(|e| storage_err(&del.path, "open position delete file", e))?;
    let reader = ArrowFileReader::new(
        FileMetadata {
            size: del.size_bytes,
        },
        read,
    );
    let builder = ParquetRecordBatchStreamBuilder::new(reader)
        .await
        .map_err(|e| bad(format!("cannot read position delete file: {e}")))?;
    let (mask, p, q) = position_columns(builder.parquet_schema(), &bad)?;
    let mut stream = builder
        .with_projection(mask)
        .with_batch_size(READ_BATCH_ROWS)
        .build()
        .map_err(|e| bad(format!("cannot read position delete file: {e}")))?;
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(|e| bad(format!("cannot read position delete file: {e}")))?;
        add_positions(&batch, p, q, files, &mut out, &bad)?;
    }
    Ok(out)
}

/// The projection of a position delete file's `file_path` and `pos` columns, and their
/// positions in the decoded batches.
fn position_columns(
    schema: &SchemaDescriptor,
    bad: &dyn Fn(String) -> Error,
) -> Result<(ProjectionMask, usize, usize)> {
    // The spec fixes the names and order: file_path, pos (and optionally row).
    let roots = schema.root_schema().get_fields();
    let col = |name: &str| roots.iter().position(|f| f.name() == name);
    let (Some(path_col), Some(pos_col)) = (col("file_path"), col("pos")) else {
        return Err(bad(
            "position delete file without file_path/pos columns".into()
        ));
    };
    let mask = ProjectionMask::roots(schema, [path_col, pos_col]);
    let (p, q) = if path_col < pos_col { (0, 1) } else { (1, 0) };
    Ok((mask, p, q))
}

/// Add the positions of one batch of a position delete file that fall in `files`.
fn add_positions(
    batch: &RecordBatch,
    p: usize,
    q: usize,
    files: &HashSet<&str>,
    out: &mut HashMap<String, RoaringTreemap>,
    bad: &dyn Fn(String) -> Error,
) -> Result<()> {
    let paths = string_column(batch.column(p))
        .ok_or_else(|| bad("file_path is not a string column".into()))?;
    let pos = batch
        .column(q)
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(|| bad("pos is not a long column".into()))?;
    // Position delete files are sorted by path (the spec requires it, writers do it), so rows
    // come in runs of one path: look the path up once per run, not once per row.
    let mut run: Option<(&str, Option<RoaringTreemap>)> = None;
    for i in 0..batch.num_rows() {
        if paths.is_null(i) || pos.is_null(i) {
            return Err(bad("null file_path or pos".into()));
        }
        let path = paths.value(i);
        if run.as_ref().is_none_or(|(p, _)| *p != path) {
            flush_run(run.take(), out);
            run = Some((path, files.contains(path).then(RoaringTreemap::new)));
        }
        let Some((_, Some(set))) = run.as_mut() else {
            continue;
        };
        let p = pos.value(i);
        if p < 0 {
            return Err(bad(format!("negative position {p}")));
        }
        // Sorted positions append; others (an unsorted file) insert.
        if set.try_push(p as u64).is_err() {
            set.insert(p as u64);
        }
    }
    flush_run(run, out);
    Ok(())
}

fn flush_run(
    run: Option<(&str, Option<RoaringTreemap>)>,
    out: &mut HashMap<String, RoaringTreemap>,
) {
    if let Some((path, Some(set))) = run {
        match out.get_mut(path) {
            Some(all) => *all |= set,
            None => {
                out.insert(path.to_string(), set);
            }
        }
    }
}

fn string_column(a: &ArrayRef) -> Option<StringArray> {
    match a.data_type() {
        arrow_schema::DataType::Utf8 => a.as_any().downcast_ref::<StringArray>().cloned(),
        arrow_schema::DataType::LargeUtf8 | arrow_schema::DataType::Utf8View => {
            arrow_cast_string(a)
        }
        _ => None,
    }
}

fn arrow_cast_string(a: &ArrayRef) -> Option<StringArray> {
    use arrow_array::cast::AsArray;
    match a.data_type() {
        arrow_schema::DataType::LargeUtf8 => {
            Some(a.as_string::<i64>().iter().collect::<StringArray>())
        }
        arrow_schema::DataType::Utf8View => Some(a.as_string_view().iter().collect()),
        _ => None,
    }
}

/// A `deletion-vector-v1` blob: 4-byte big-endian length of magic + vector, the magic
/// `D1 D3 39 64`, the vector as a portable 64-bit Roaring bitmap, and a big-endian CRC-32 of
/// magic + vector. Blobs of this type are never compressed.
async fn read_deletion_vector(
    table: &LoadedTable,
    del: &GroupDeleteFile,
) -> Result<RoaringTreemap> {
    read_deletion_vector_at(
        table,
        &del.path,
        del.content_offset,
        del.content_size_in_bytes,
    )
    .await
}

/// The positions of the deletion vector whose blob is `len` bytes at `offset` of the Puffin
/// file `path` (only the blob is read).
pub(crate) async fn read_deletion_vector_at(
    table: &LoadedTable,
    path: &str,
    offset: Option<i64>,
    len: Option<i64>,
) -> Result<RoaringTreemap> {
    let bad = |m: String| Error::metadata(&table.id, path, m);
    let (Some(offset), Some(len)) = (offset, len) else {
        return Err(bad(
            "deletion vector without content_offset/content_size_in_bytes".into(),
        ));
    };
    if offset < 0 || len < 12 {
        return Err(bad(format!(
            "deletion vector at {offset}+{len} is too small"
        )));
    }
    let input = table
        .file_io
        .new_input(path)
        .map_err(|e| storage_err(path, "open deletion vector", e))?;
    let read = input
        .reader()
        .await
        .map_err(|e| storage_err(path, "open deletion vector", e))?;
    let start = offset as u64;
    let blob = read
        .read(start..start + len as u64)
        .await
        .map_err(|e| storage_err(path, "read deletion vector", e))?;
    decode_deletion_vector(&blob).map_err(bad)
}

/// Decode a `deletion-vector-v1` blob.
pub(crate) fn decode_deletion_vector(blob: &[u8]) -> std::result::Result<RoaringTreemap, String> {
    if blob.len() < 12 {
        return Err("deletion vector blob is too short".into());
    }
    let declared = u32::from_be_bytes([blob[0], blob[1], blob[2], blob[3]]) as usize;
    if declared + 8 != blob.len() {
        return Err(format!(
            "deletion vector length {declared} does not match the blob ({} bytes)",
            blob.len()
        ));
    }
    let body = &blob[4..4 + declared];
    if body[..4] != DV_MAGIC {
        return Err("deletion vector magic mismatch".into());
    }
    let crc = u32::from_be_bytes([
        blob[4 + declared],
        blob[5 + declared],
        blob[6 + declared],
        blob[7 + declared],
    ]);
    if crc32fast::hash(body) != crc {
        return Err("deletion vector checksum mismatch".into());
    }
    RoaringTreemap::deserialize_from(&body[4..])
        .map_err(|e| format!("corrupt deletion vector bitmap: {e}"))
}

/// Encode positions as a `deletion-vector-v1` blob: the 4-byte big-endian length of magic and
/// bitmap, the magic, the bitmap (Roaring's portable 64-bit format), the CRC-32 of magic and
/// bitmap.
pub(crate) fn encode_deletion_vector(set: &RoaringTreemap) -> Vec<u8> {
    let mut body = DV_MAGIC.to_vec();
    set.serialize_into(&mut body).unwrap_or_default();
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    out.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
    out
}

/// Keys of an equality delete file, read and projected like data (by field id, to the current
/// schema's types) so they compare with data rows.
async fn read_equality_file(
    table: &LoadedTable,
    del: &GroupDeleteFile,
    reader: &DataReader,
    schema: &SchemaRef,
) -> Result<EqualitySet> {
    if del.equality_ids.is_empty() {
        return Err(Error::metadata(
            &table.id,
            &del.path,
            "equality delete file without equality field ids",
        ));
    }
    for id in &del.equality_ids {
        if schema.field_by_id(*id).is_none() {
            return Err(Error::unsupported(format!(
                "{}: equality delete file {} uses field {id}, which the current schema dropped",
                table.id, del.path
            )));
        }
    }
    let batches: Vec<RecordBatch> = reader
        .stream(&del.path, del.size_bytes, &del.equality_ids)
        .await?
        .try_collect()
        .await?;
    let fields = equality_sort_fields(schema, reader, &del.equality_ids)?;
    let converter =
        RowConverter::new(fields).map_err(|e| Error::compute("equality key encoder", e))?;
    let mut keys = HashSet::new();
    for b in &batches {
        // Key columns in equality-id order, found by field id.
        let columns = del
            .equality_ids
            .iter()
            .map(|id| {
                b.schema()
                    .fields()
                    .iter()
                    .position(|f| {
                        f.metadata()
                            .get(PARQUET_FIELD_ID_META_KEY)
                            .is_some_and(|v| v == &id.to_string())
                    })
                    .map(|i| Arc::clone(b.column(i)))
                    .ok_or_else(|| {
                        Error::metadata(
                            &table.id,
                            &del.path,
                            format!("equality field {id} missing from the delete rows"),
                        )
                    })
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        let rows = converter
            .convert_columns(&columns)
            .map_err(|e| Error::compute(format!("equality keys of {}", del.path), e))?;
        for r in &rows {
            keys.insert(Box::<[u8]>::from(r.as_ref()));
        }
    }
    Ok(EqualitySet {
        ids: del.equality_ids.clone(),
        keys,
        converter: Arc::new(converter),
    })
}

/// The key encoding of equality fields `ids`, in the types `reader` delivers them in (the
/// delete rows and the data rows are both read by it).
fn equality_sort_fields(
    schema: &SchemaRef,
    reader: &DataReader,
    ids: &[i32],
) -> Result<Vec<SortField>> {
    ids.iter()
        .map(|id| {
            let name = &schema
                .field_by_id(*id)
                .ok_or_else(|| Error::Internal(format!("field {id} vanished")))?
                .name;
            reader
                .field_type(*id)
                .map(|t| SortField::new(t.clone()))
                .ok_or_else(|| Error::Internal(format!("field {id} ({name}) is not top-level")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletion_vectors_round_trip_and_corruption_is_caught() {
        let mut set = RoaringTreemap::new();
        for p in [0u64, 3, 7, 1 << 33] {
            set.insert(p);
        }
        let blob = encode_deletion_vector(&set);
        assert_eq!(decode_deletion_vector(&blob).unwrap(), set);
        let mut bad = blob.clone();
        let last = bad.len() - 6;
        bad[last] ^= 0xff;
        assert!(decode_deletion_vector(&bad).is_err());
        assert!(decode_deletion_vector(&blob[..10]).is_err());
    }

    fn position_batch(rows: &[(&str, i64)]) -> RecordBatch {
        use arrow_array::StringArray;
        use arrow_schema::{DataType, Field, Schema};
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("file_path", DataType::Utf8, false),
                Field::new("pos", DataType::Int64, false),
            ])),
            vec![
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            ],
        )
        .expect("batch")
    }

    #[test]
    fn positions_gather_by_path_in_and_out_of_order() {
        let bad = |m: String| Error::Internal(m);
        let files: HashSet<&str> = ["a", "b"].into_iter().collect();
        let mut out = HashMap::new();
        // Runs of one path, a path that comes back, unsorted positions, a file of another
        // group (its rows, even a negative position, are not this group's business).
        let batch = position_batch(&[
            ("a", 1),
            ("a", 3),
            ("b", 2),
            ("x", -1),
            ("a", 0),
            ("a", 3),
            ("b", 9),
            ("b", 4),
        ]);
        add_positions(&batch, 0, 1, &files, &mut out, &bad).expect("positions");
        add_positions(&position_batch(&[("b", 7)]), 0, 1, &files, &mut out, &bad)
            .expect("positions");
        let got = |p: &str| out[p].iter().collect::<Vec<u64>>();
        assert_eq!(got("a"), vec![0, 1, 3]);
        assert_eq!(got("b"), vec![2, 4, 7, 9]);
        assert_eq!(out.len(), 2);
        let negative = position_batch(&[("a", 5), ("a", -2)]);
        assert!(add_positions(&negative, 0, 1, &files, &mut out, &bad).is_err());
    }
}
