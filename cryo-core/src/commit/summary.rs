//! Snapshot summaries with Iceberg's keys, as Java's `SnapshotProducer` writes them.

use std::collections::HashMap;

use iceberg::spec::{
    DataContentType, DataFile, DataFileFormat, Operation, PartitionSpecRef, SchemaRef,
    SnapshotSummaryCollector, Summary,
};

/// Check that a committed snapshot's summary counts what the operation counted: each of
/// `expected`'s `(summary key, count)`; `operation` names the operation in the error.
pub(crate) fn expect_counts(
    summary: &HashMap<String, String>,
    expected: &[(&str, u64)],
    operation: &str,
) -> crate::error::Result<()> {
    let get = |k: &str| {
        summary
            .get(k)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    if expected.iter().all(|(k, n)| get(k) == *n) {
        return Ok(());
    }
    let line = |f: &dyn Fn(&str, u64) -> String| {
        expected
            .iter()
            .map(|(k, n)| f(k, *n))
            .collect::<Vec<_>>()
            .join(" ")
    };
    Err(crate::error::Error::Internal(format!(
        "committed summary counts {}; the {operation} counted {}",
        line(&|k, _| format!("{k}={}", get(k))),
        line(&|k, n| format!("{k}={n}"))
    )))
}

/// Java's cap on per-partition `partitions.<path>` entries (0 by default: none are written).
const PARTITION_SUMMARY_LIMIT: &str = "write.summary.partition-limit";

/// `(total key, added key, removed key)`: every total Java maintains.
const TOTALS: [(&str, &str, &str); 6] = [
    ("total-data-files", "added-data-files", "deleted-data-files"),
    (
        "total-delete-files",
        "added-delete-files",
        "removed-delete-files",
    ),
    ("total-records", "added-records", "deleted-records"),
    ("total-files-size", "added-files-size", "removed-files-size"),
    (
        "total-position-deletes",
        "added-position-deletes",
        "removed-position-deletes",
    ),
    (
        "total-equality-deletes",
        "added-equality-deletes",
        "removed-equality-deletes",
    ),
];

/// Collects what a snapshot adds and removes, then writes the summary with running totals.
pub(crate) struct SummaryBuilder {
    collector: SnapshotSummaryCollector,
    schema: SchemaRef,
    /// Deletion vectors added and removed: upstream's collector counts them as position delete
    /// files, Java's summary counts them apart (`added-dvs`, `removed-dvs`).
    added_dvs: u64,
    removed_dvs: u64,
}

/// Whether a delete file is a deletion vector (a Puffin blob), as Java's `ContentFileUtil.isDV`.
pub(crate) fn is_deletion_vector(file: &DataFile) -> bool {
    file.content_type() == DataContentType::PositionDeletes
        && file.file_format() == DataFileFormat::Puffin
}

impl SummaryBuilder {
    pub(crate) fn new(schema: SchemaRef, properties: &HashMap<String, String>) -> Self {
        let mut collector = SnapshotSummaryCollector::default();
        collector.set_partition_summary_limit(
            properties
                .get(PARTITION_SUMMARY_LIMIT)
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0),
        );
        Self {
            collector,
            schema,
            added_dvs: 0,
            removed_dvs: 0,
        }
    }

    /// A file this snapshot adds (data or delete).
    pub(crate) fn added(&mut self, file: &DataFile, spec: &PartitionSpecRef) {
        self.added_dvs += u64::from(is_deletion_vector(file));
        self.collector.add_file(
            file,
            SchemaRef::clone(&self.schema),
            PartitionSpecRef::clone(spec),
        );
    }

    /// A file this snapshot removes.
    pub(crate) fn removed(&mut self, file: &DataFile, spec: &PartitionSpecRef) {
        self.removed_dvs += u64::from(is_deletion_vector(file));
        self.collector.remove_file(
            file,
            SchemaRef::clone(&self.schema),
            PartitionSpecRef::clone(spec),
        );
    }

    /// The summary: caller properties first, then the computed figures (which callers cannot
    /// shadow), then totals carried from the previous snapshot.
    ///
    /// Like Java, totals start from zero for a table's first snapshot and are left out when the
    /// previous snapshot's summary lacks them (a writer that never kept them): a wrong total is
    /// worse than none.
    pub(crate) fn build(
        &self,
        operation: Operation,
        previous: Option<&Summary>,
        properties: &HashMap<String, String>,
    ) -> Summary {
        let mut out: HashMap<String, String> = properties.clone();
        out.insert("engine-name".into(), "cryo".into());
        out.insert("engine-version".into(), env!("CARGO_PKG_VERSION").into());
        let mut added = self.collector.build();
        for (dvs, dv_key, files_key) in [
            (self.added_dvs, "added-dvs", "added-position-delete-files"),
            (
                self.removed_dvs,
                "removed-dvs",
                "removed-position-delete-files",
            ),
        ] {
            if dvs > 0 {
                let files = added
                    .get(files_key)
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0)
                    .saturating_sub(dvs);
                if files > 0 {
                    added.insert(files_key.to_string(), files.to_string());
                } else {
                    added.remove(files_key);
                }
                added.insert(dv_key.to_string(), dvs.to_string());
            }
        }
        let get = |key: &str| -> u64 { added.get(key).and_then(|v| v.parse().ok()).unwrap_or(0) };
        for (total, plus, minus) in TOTALS {
            let base = match previous {
                None => Some(0),
                Some(p) => p
                    .additional_properties
                    .get(total)
                    .and_then(|v| v.trim().parse::<u64>().ok()),
            };
            if let Some(value) = base
                .and_then(|b| b.checked_add(get(plus)))
                .and_then(|v| v.checked_sub(get(minus)))
            {
                out.insert(total.to_string(), value.to_string());
            } else {
                out.remove(total);
            }
        }
        out.extend(added);
        Summary {
            operation,
            additional_properties: out,
        }
    }
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{
        DataContentType, DataFileBuilder, DataFileFormat, NestedField, PartitionSpec,
        PrimitiveType, Schema, Type,
    };

    use super::*;

    fn file(content: DataContentType, records: u64, size: u64) -> DataFile {
        DataFileBuilder::default()
            .content(content)
            .file_path(format!("/t/data/{records}-{size}.parquet"))
            .file_format(DataFileFormat::Parquet)
            .record_count(records)
            .file_size_in_bytes(size)
            .equality_ids((content == DataContentType::EqualityDeletes).then(|| vec![1]))
            .build()
            .unwrap()
    }

    #[test]
    fn totals_follow_java() {
        let schema: SchemaRef = Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            ])
            .build()
            .unwrap()
            .into();
        let spec: PartitionSpecRef = PartitionSpec::unpartition_spec().into();
        let mut b = SummaryBuilder::new(schema.clone(), &HashMap::new());
        b.added(&file(DataContentType::Data, 10, 100), &spec);
        b.added(&file(DataContentType::PositionDeletes, 2, 30), &spec);
        b.added(&file(DataContentType::EqualityDeletes, 3, 40), &spec);
        let first = b.build(Operation::Overwrite, None, &HashMap::new());
        let p = &first.additional_properties;
        assert_eq!(p["added-data-files"], "1");
        assert_eq!(p["added-delete-files"], "2");
        assert_eq!(p["added-position-delete-files"], "1");
        assert_eq!(p["added-equality-delete-files"], "1");
        assert_eq!(p["added-position-deletes"], "2");
        assert_eq!(p["added-equality-deletes"], "3");
        assert_eq!(p["added-files-size"], "170");
        assert_eq!(p["total-records"], "10");
        assert_eq!(p["total-delete-files"], "2");
        assert_eq!(p["total-files-size"], "170");

        let mut b = SummaryBuilder::new(schema.clone(), &HashMap::new());
        b.removed(&file(DataContentType::Data, 10, 100), &spec);
        let second = b.build(Operation::Delete, Some(&first), &HashMap::new());
        let p = &second.additional_properties;
        assert_eq!(p["deleted-data-files"], "1");
        assert_eq!(p["total-data-files"], "0");
        assert_eq!(p["total-records"], "0");
        assert_eq!(p["total-files-size"], "70");
        assert_eq!(p["total-position-deletes"], "2");

        // A previous summary without totals: leave them out rather than guess.
        let bare = Summary {
            operation: Operation::Append,
            additional_properties: HashMap::new(),
        };
        let third = SummaryBuilder::new(schema, &HashMap::new()).build(
            Operation::Append,
            Some(&bare),
            &HashMap::from([("total-records".to_string(), "7".to_string())]),
        );
        assert!(!third.additional_properties.contains_key("total-records"));
    }
}
