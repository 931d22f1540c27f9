//! Maintenance outcomes as Arrow record batches: the file lists the bindings hand to pyarrow and
//! `apache-arrow`, with one schema each, defined here.

use std::sync::Arc;

use arrow_array::builder::{StringBuilder, TimestampMillisecondBuilder, UInt64Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

use super::{ExpireOutcome, MissingFilesOutcome, RemoveOrphanFilesOutcome};
use crate::error::{Error, Result};

/// Schema of a file listing: `path`, `size` (bytes), `last_modified` (UTC, null when unknown).
pub fn file_listing_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("path", DataType::Utf8, false),
        Field::new("size", DataType::UInt64, false),
        Field::new(
            "last_modified",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            true,
        ),
    ]))
}

/// Schema of [`MissingFilesOutcome::missing_batch`]: `path`, `kind` (the serde spelling of
/// [`super::MissingKind`]), `records`, `bytes`, `snapshots` (how many snapshots reference it).
pub fn missing_files_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("path", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("records", DataType::UInt64, false),
        Field::new("bytes", DataType::UInt64, false),
        Field::new("snapshots", DataType::UInt64, false),
    ]))
}

fn listing<'a>(rows: impl IntoIterator<Item = (&'a str, u64, Option<i64>)>) -> Result<RecordBatch> {
    let mut path = StringBuilder::new();
    let mut size = UInt64Builder::new();
    let mut modified = TimestampMillisecondBuilder::new().with_timezone("UTC");
    for (p, s, m) in rows {
        path.append_value(p);
        size.append_value(s);
        modified.append_option(m);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(path.finish()),
        Arc::new(size.finish()),
        Arc::new(modified.finish()),
    ];
    RecordBatch::try_new(file_listing_schema(), columns)
        .map_err(|e| Error::compute("file listing", e))
}

impl ExpireOutcome {
    /// The files the expiry deleted (or, in a dry run, would delete) as a
    /// [file listing](file_listing_schema) (`last_modified` null).
    pub fn files_batch(&self) -> Result<RecordBatch> {
        listing(self.files.iter().map(|f| (f.path.as_str(), f.bytes, None)))
    }
}

impl RemoveOrphanFilesOutcome {
    /// The orphan files as a [file listing](file_listing_schema).
    pub fn orphans_batch(&self) -> Result<RecordBatch> {
        listing(
            self.orphans
                .iter()
                .map(|f| (f.path.as_str(), f.size, Some(f.last_modified_ms))),
        )
    }
}

impl MissingFilesOutcome {
    /// The missing files as Arrow ([`missing_files_schema`]).
    pub fn missing_batch(&self) -> Result<RecordBatch> {
        let mut path = StringBuilder::new();
        let mut kind = StringBuilder::new();
        let mut records = UInt64Builder::new();
        let mut bytes = UInt64Builder::new();
        let mut snapshots = UInt64Builder::new();
        for m in &self.missing {
            path.append_value(&m.path);
            match serde_json::to_value(m.kind).map_err(|e| Error::compute("missing kind", e))? {
                serde_json::Value::String(k) => kind.append_value(k),
                other => kind.append_value(other.to_string()),
            }
            records.append_value(m.records);
            bytes.append_value(m.bytes);
            snapshots.append_value(m.snapshot_ids.len() as u64);
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(path.finish()),
            Arc::new(kind.finish()),
            Arc::new(records.finish()),
            Arc::new(bytes.finish()),
            Arc::new(snapshots.finish()),
        ];
        RecordBatch::try_new(missing_files_schema(), columns)
            .map_err(|e| Error::compute("missing files", e))
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::{Array, StringArray, TimestampMillisecondArray, UInt64Array};

    use super::*;

    #[test]
    fn a_listing_keeps_every_row_in_the_one_schema() {
        let batch = listing([
            ("s3://b/t/a.parquet", 10, Some(1_000)),
            ("s3://b/t/b", 0, None),
        ])
        .unwrap();
        assert_eq!(batch.schema(), file_listing_schema());
        let col = |i: usize| batch.column(i).as_any();
        let paths = col(0).downcast_ref::<StringArray>().unwrap();
        assert_eq!(paths.value(1), "s3://b/t/b");
        assert_eq!(col(1).downcast_ref::<UInt64Array>().unwrap().value(0), 10);
        let modified = col(2).downcast_ref::<TimestampMillisecondArray>().unwrap();
        assert_eq!(modified.value(0), 1_000);
        assert!(modified.is_null(1));
    }
}
