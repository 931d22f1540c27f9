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
    let mut rows = FileRows::new(table.to_string());
    for f in files {
        rows.push(&FileRow {
            path: &f.path,
            content: &f.content,
            format: &f.format,
            spec_id: f.spec_id,
            partition: &f.partition,
            records: f.records,
            size_bytes: f.size_bytes,
            sequence_number: f.sequence_number,
            snapshot_id: f.snapshot_id,
            manifest: &f.manifest,
            referenced_data_file: f.referenced_data_file.as_deref(),
        });
    }
    rows.finish()
}

/// One row of [`files_schema`], borrowed.
pub(crate) struct FileRow<'a> {
    pub(crate) path: &'a str,
    pub(crate) content: &'a str,
    pub(crate) format: &'a str,
    pub(crate) spec_id: i32,
    pub(crate) partition: &'a str,
    pub(crate) records: u64,
    pub(crate) size_bytes: u64,
    pub(crate) sequence_number: Option<i64>,
    pub(crate) snapshot_id: Option<i64>,
    pub(crate) manifest: &'a str,
    pub(crate) referenced_data_file: Option<&'a str>,
}

/// Rows of [`files_schema`] being built.
pub(crate) struct FileRows {
    table: String,
    t: StringBuilder,
    path: StringBuilder,
    content: StringBuilder,
    format: StringBuilder,
    spec: Int32Builder,
    part: StringBuilder,
    records: UInt64Builder,
    size: UInt64Builder,
    seq: Int64Builder,
    snap: Int64Builder,
    manifest: StringBuilder,
    refd: StringBuilder,
}

impl FileRows {
    pub(crate) fn new(table: String) -> Self {
        Self {
            table,
            t: StringBuilder::new(),
            path: StringBuilder::new(),
            content: StringBuilder::new(),
            format: StringBuilder::new(),
            spec: Int32Builder::new(),
            part: StringBuilder::new(),
            records: UInt64Builder::new(),
            size: UInt64Builder::new(),
            seq: Int64Builder::new(),
            snap: Int64Builder::new(),
            manifest: StringBuilder::new(),
            refd: StringBuilder::new(),
        }
    }

    pub(crate) fn push(&mut self, f: &FileRow<'_>) {
        self.t.append_value(&self.table);
        self.path.append_value(f.path);
        self.content.append_value(f.content);
        self.format.append_value(f.format);
        self.spec.append_value(f.spec_id);
        self.part.append_value(f.partition);
        self.records.append_value(f.records);
        self.size.append_value(f.size_bytes);
        self.seq.append_option(f.sequence_number);
        self.snap.append_option(f.snapshot_id);
        self.manifest.append_value(f.manifest);
        self.refd.append_option(f.referenced_data_file);
    }

    pub(crate) fn finish(mut self) -> Result<RecordBatch> {
        batch(
            files_schema(),
            vec![
                Arc::new(self.t.finish()),
                Arc::new(self.path.finish()),
                Arc::new(self.content.finish()),
                Arc::new(self.format.finish()),
                Arc::new(self.spec.finish()),
                Arc::new(self.part.finish()),
                Arc::new(self.records.finish()),
                Arc::new(self.size.finish()),
                Arc::new(self.seq.finish()),
                Arc::new(self.snap.finish()),
                Arc::new(self.manifest.finish()),
                Arc::new(self.refd.finish()),
            ],
        )
    }
}
