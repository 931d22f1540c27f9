//! Scan results as Arrow record batches (per partition, per file), for bindings and analytics.

use std::sync::Arc;

use arrow_array::builder::{
    Int32Builder, Int64Builder, StringBuilder, TimestampMillisecondBuilder, UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

use super::{FileEntry, TableScan};
use crate::catalog::TableId;
use crate::error::{Error, Result};

fn batch(schema: SchemaRef, columns: Vec<ArrayRef>) -> Result<RecordBatch> {
    RecordBatch::try_new(schema, columns).map_err(|e| Error::compute("arrow", e))
}

/// Schema of [`partitions_batch`].
pub fn partitions_schema() -> SchemaRef {
    let u = |n: &str| Field::new(n, DataType::UInt64, false);
    Arc::new(Schema::new(vec![
        Field::new("catalog", DataType::Utf8, false),
        Field::new("table", DataType::Utf8, false),
        Field::new("spec_id", DataType::Int32, false),
        Field::new("partition", DataType::Utf8, false),
        u("data_files"),
        u("data_bytes"),
        u("records"),
        u("small_files"),
        u("small_bytes"),
        Field::new("min_file_bytes", DataType::UInt64, true),
        Field::new("max_file_bytes", DataType::UInt64, true),
        u("position_delete_files"),
        u("position_delete_records"),
        u("equality_delete_files"),
        u("equality_delete_records"),
        u("deletion_vector_files"),
        u("deletion_vector_records"),
        u("delete_bytes"),
        u("dangling_delete_files"),
        Field::new(
            "last_modified",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            true,
        ),
    ]))
}

/// One row per partition of every scan.
pub fn partitions_batch(scans: &[TableScan]) -> Result<RecordBatch> {
    let mut catalog = StringBuilder::new();
    let mut table = StringBuilder::new();
    let mut spec = Int32Builder::new();
    let mut part = StringBuilder::new();
    let mut cols: Vec<UInt64Builder> = (0..15).map(|_| UInt64Builder::new()).collect();
    let mut modified = TimestampMillisecondBuilder::new().with_timezone("UTC");
    for s in scans {
        for p in &s.partitions {
            catalog.append_value(&s.catalog);
            table.append_value(s.table.to_string());
            spec.append_value(p.spec_id);
            part.append_value(&p.path);
            let d = &p.data_files;
            let del = &p.delete_files;
            let values = [
                Some(d.count),
                Some(d.bytes),
                Some(d.records),
                Some(d.small_count),
                Some(d.small_bytes),
                d.min_bytes,
                d.max_bytes,
                Some(del.position.files),
                Some(del.position.records),
                Some(del.equality.files),
                Some(del.equality.records),
                Some(del.deletion_vectors.files),
                Some(del.deletion_vectors.records),
                Some(del.bytes()),
                Some(del.position.dangling + del.equality.dangling + del.deletion_vectors.dangling),
            ];
            for (b, v) in cols.iter_mut().zip(values) {
                b.append_option(v);
            }
            modified.append_option(p.last_modified_ms);
        }
    }
    let mut arrays: Vec<ArrayRef> = vec![
        Arc::new(catalog.finish()),
        Arc::new(table.finish()),
        Arc::new(spec.finish()),
        Arc::new(part.finish()),
    ];
    arrays.extend(cols.iter_mut().map(|b| Arc::new(b.finish()) as ArrayRef));
    arrays.push(Arc::new(modified.finish()));
    batch(partitions_schema(), arrays)
}

/// Schema of [`files_batch`].
pub fn files_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("table", DataType::Utf8, false),
        Field::new("path", DataType::Utf8, false),
        Field::new("content", DataType::Utf8, false),
        Field::new("format", DataType::Utf8, false),
        Field::new("spec_id", DataType::Int32, false),
        Field::new("partition", DataType::Utf8, false),
        Field::new("records", DataType::UInt64, false),
        Field::new("size_bytes", DataType::UInt64, false),
        Field::new("sequence_number", DataType::Int64, true),
        Field::new("snapshot_id", DataType::Int64, true),
        Field::new("manifest", DataType::Utf8, false),
        Field::new("referenced_data_file", DataType::Utf8, true),
    ]))
}

/// One row per live file.
pub fn files_batch(table: &TableId, files: &[FileEntry]) -> Result<RecordBatch> {
    let name = table.to_string();
    let mut t = StringBuilder::new();
    let mut path = StringBuilder::new();
    let mut content = StringBuilder::new();
    let mut format = StringBuilder::new();
    let mut spec = Int32Builder::new();
    let mut part = StringBuilder::new();
    let mut records = UInt64Builder::new();
    let mut size = UInt64Builder::new();
    let mut seq = Int64Builder::new();
    let mut snap = Int64Builder::new();
    let mut manifest = StringBuilder::new();
    let mut refd = StringBuilder::new();
    for f in files {
        t.append_value(&name);
        path.append_value(&f.path);
        content.append_value(&f.content);
        format.append_value(&f.format);
        spec.append_value(f.spec_id);
        part.append_value(&f.partition);
        records.append_value(f.records);
        size.append_value(f.size_bytes);
        seq.append_option(f.sequence_number);
        snap.append_option(f.snapshot_id);
        manifest.append_value(&f.manifest);
        refd.append_option(f.referenced_data_file.as_deref());
    }
    batch(
        files_schema(),
        vec![
            Arc::new(t.finish()),
            Arc::new(path.finish()),
            Arc::new(content.finish()),
            Arc::new(format.finish()),
            Arc::new(spec.finish()),
            Arc::new(part.finish()),
            Arc::new(records.finish()),
            Arc::new(size.finish()),
            Arc::new(seq.finish()),
            Arc::new(snap.finish()),
            Arc::new(manifest.finish()),
            Arc::new(refd.finish()),
        ],
    )
}
