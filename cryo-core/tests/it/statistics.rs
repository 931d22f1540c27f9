//! Native table statistics on the demo lake: the distinct counts are the rows' (deletes
//! applied), the Puffin file is registered on the snapshot, a dry run changes nothing, and the
//! next computation replaces the file.

use std::collections::{BTreeMap, HashSet};

use arrow_array::Array;
use arrow_row::{RowConverter, SortField};
use cryo_core::TableId;
use cryo_core::demo::{DemoOptions, create_demo_lake};
use cryo_core::maintain::{
    ComputeStatistics, ComputeStatisticsOptions, ComputeStatisticsStatus, NDV_PROPERTY,
    THETA_BLOB_TYPE,
};

/// Distinct non-null values per top-level column of the table's rows (deletes applied by
/// upstream's reader), by name.
async fn distinct_counts(table: &cryo_core::LoadedTable) -> BTreeMap<String, u64> {
    let batches = crate::common::scan_rows(table).await;
    let mut out = BTreeMap::new();
    let Some(first) = batches.first() else {
        return out;
    };
    for (i, field) in first.schema().fields().iter().enumerate() {
        let converter = RowConverter::new(vec![SortField::new(field.data_type().clone())]).unwrap();
        let mut seen: HashSet<Vec<u8>> = HashSet::new();
        for b in &batches {
            let col = b.column(i);
            let rows = converter
                .convert_columns(std::slice::from_ref(col))
                .unwrap();
            for (r, row) in rows.iter().enumerate() {
                // Nulls and empty strings are not counted (DataSketches ignores empty input).
                let empty = col
                    .as_any()
                    .downcast_ref::<arrow_array::StringArray>()
                    .is_some_and(|s| s.is_valid(r) && s.value(r).is_empty());
                if col.is_valid(r) && !empty {
                    seen.insert(row.as_ref().to_vec());
                }
            }
        }
        out.insert(field.name().clone(), seen.len() as u64);
    }
    out
}

#[tokio::test]
async fn statistics_count_the_live_rows_and_register_on_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let lake = create_demo_lake(dir.path(), &DemoOptions::default())
        .await
        .unwrap();
    // Position deletes on many partitions: the counts must see them applied.
    let id = TableId::parse("lake.orders").unwrap();
    let before = lake.catalog.load_table(&id).await.unwrap();
    let truth = distinct_counts(&before).await;

    let dry = ComputeStatistics::new(&lake.catalog, id.clone())
        .dry_run(true)
        .execute()
        .await
        .unwrap();
    assert_eq!(dry.status, ComputeStatisticsStatus::DryRun);
    assert!(dry.data_files > 0 && dry.columns.iter().all(|c| c.ndv.is_none()));
    let unchanged = lake.catalog.load_table(&id).await.unwrap();
    assert_eq!(unchanged.metadata_location, before.metadata_location);

    let outcome = ComputeStatistics::new(&lake.catalog, id.clone())
        .execute()
        .await
        .unwrap();
    assert_eq!(outcome.status, ComputeStatisticsStatus::Committed);
    assert_eq!(outcome.data_files, dry.data_files);
    let ndv: BTreeMap<String, u64> = outcome
        .columns
        .iter()
        .map(|c| (c.name.clone(), c.ndv.unwrap()))
        .collect();
    assert_eq!(
        ndv.keys().collect::<Vec<_>>(),
        truth.keys().collect::<Vec<_>>()
    );
    for (name, &n) in &truth {
        if n < 4096 {
            assert_eq!(ndv[name], n, "{name}: exact below k");
        } else {
            let err = (ndv[name] as f64 - n as f64).abs() / n as f64;
            assert!(err < 0.05, "{name}: {} against {n}", ndv[name]);
        }
    }

    // Registered on the snapshot it describes, one blob per column, no new snapshot.
    let after = lake.catalog.load_table(&id).await.unwrap();
    assert_eq!(
        after.metadata.current_snapshot_id(),
        before.metadata.current_snapshot_id()
    );
    assert_eq!(
        after.metadata.snapshots().count(),
        before.metadata.snapshots().count()
    );
    let snapshot = outcome.snapshot_id.unwrap();
    let stats = after.metadata.statistics_for_snapshot(snapshot).unwrap();
    assert_eq!(
        Some(&stats.statistics_path),
        outcome.statistics_path.as_ref()
    );
    assert_eq!(stats.blob_metadata.len(), outcome.columns.len());
    for (blob, col) in stats.blob_metadata.iter().zip(&outcome.columns) {
        assert_eq!(blob.r#type, THETA_BLOB_TYPE);
        assert_eq!(blob.fields, vec![col.field_id]);
        assert_eq!(blob.snapshot_id, snapshot);
        assert_eq!(blob.properties[NDV_PROPERTY], col.ndv.unwrap().to_string());
    }
    let path = stats.statistics_path.strip_prefix("file://").unwrap();
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(bytes.len() as i64, stats.file_size_in_bytes);
    assert_eq!(&bytes[..4], b"PFA1");

    // Again, two columns only: the file is replaced, the old one named and left on storage.
    let again = ComputeStatistics::new(&lake.catalog, id.clone())
        .with_options(ComputeStatisticsOptions {
            columns: vec!["order_id".into(), "status".into()],
            ..ComputeStatisticsOptions::default()
        })
        .execute()
        .await
        .unwrap();
    assert_eq!(again.replaced_path, outcome.statistics_path);
    assert!(std::path::Path::new(path).exists());
    let after = lake.catalog.load_table(&id).await.unwrap();
    let stats = after.metadata.statistics_for_snapshot(snapshot).unwrap();
    assert_eq!(Some(&stats.statistics_path), again.statistics_path.as_ref());
    assert_eq!(stats.blob_metadata.len(), 2);
    assert_eq!(after.metadata.statistics_iter().count(), 1);

    // Columns that are not there, or not primitive, are refused before anything is read.
    for bad in ["no_such_column"] {
        let err = ComputeStatistics::new(&lake.catalog, id.clone())
            .with_options(ComputeStatisticsOptions {
                columns: vec![bad.into()],
                ..ComputeStatisticsOptions::default()
            })
            .execute()
            .await
            .unwrap_err();
        assert!(err.to_string().contains(bad), "{err}");
    }
}
