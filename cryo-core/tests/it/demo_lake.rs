//! The demo lake: what the generator says it built is what a scan and a reader find.

use std::sync::Arc;

use cryo_core::clock::{FixedClock, SystemClock};
use cryo_core::commit::{SnapshotProducer, write_data_files};
use cryo_core::demo::{DemoLake, DemoOptions, create_demo_lake, create_demo_lake_at};
use cryo_core::scan::{ScanOptions, scan_table};
use cryo_core::{LoadedTable, TableId};
use futures::TryStreamExt;

async fn read_rows(table: &LoadedTable) -> usize {
    let batches = crate::common::scan_rows(table).await;
    batches.iter().map(arrow_array::RecordBatch::num_rows).sum()
}

async fn check_tables(lake: &DemoLake) {
    let names: Vec<&str> = lake
        .manifest
        .tables
        .iter()
        .map(|t| t.identifier.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "lake.clickstream",
            "lake.customers",
            "lake.healthy",
            "lake.metrics_v1",
            "lake.orders"
        ]
    );
    for t in &lake.manifest.tables {
        let id = t.id().unwrap();
        let scan = scan_table(&lake.catalog, &id, &ScanOptions::default(), &SystemClock)
            .await
            .unwrap();
        let name = &t.identifier;
        assert_eq!(scan.format_version, t.format_version, "{name}");
        assert_eq!(scan.snapshots.count as u64, t.snapshots, "{name} snapshots");
        assert_eq!(scan.data_files.count, t.data_files, "{name} data files");
        assert_eq!(
            scan.delete_files.position.files, t.position_delete_files,
            "{name} position deletes"
        );
        assert_eq!(
            scan.delete_files.equality.files, t.equality_delete_files,
            "{name} equality deletes"
        );
        assert_eq!(
            scan.delete_files.position.dangling + scan.delete_files.equality.dangling,
            t.dangling_delete_files,
            "{name} dangling deletes"
        );
        assert_eq!(
            scan.metadata_location.as_deref(),
            Some(t.metadata_location.as_str()),
            "{name}"
        );
        // Rows through upstream's reader, deletes applied.
        let loaded = lake.catalog.load_table(&id).await.unwrap();
        assert_eq!(read_rows(&loaded).await as u64, t.rows, "{name} rows");
        if scan.delete_files.files() == 0 {
            assert_eq!(scan.data_files.records, t.rows, "{name} records");
        }
    }
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one build of the lake, checked end to end"
)]
async fn demo_lake_is_what_it_says_and_decayed_as_promised() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("lake");
    let lake = create_demo_lake(&root, &DemoOptions::default())
        .await
        .unwrap();
    assert!(lake.built && lake.pristine);
    check_tables(&lake).await;

    let scan = |name: &str| {
        let catalog = &lake.catalog;
        let id = TableId::parse(name).unwrap();
        async move {
            scan_table(catalog, &id, &ScanOptions::default(), &SystemClock)
                .await
                .unwrap()
        }
    };
    let clicks = scan("lake.clickstream").await;
    assert_eq!(clicks.snapshots.count, 200);
    assert!(
        clicks.manifests.count >= 200,
        "one small manifest per append"
    );
    assert!(clicks.data_files.count >= 300);
    assert!(clicks.partitions.len() >= 10, "day partitions");
    assert_eq!(
        clicks.data_files.small_count, clicks.data_files.count,
        "every file is tiny"
    );
    let week_ms = 7 * 86_400_000;
    assert!(clicks.snapshots.oldest_ms.unwrap() < clicks.scanned_at_ms - week_ms);

    let orders = scan("lake.orders").await;
    assert_eq!(orders.write.delete_mode, "merge-on-read");
    let with_deletes = orders
        .partitions
        .iter()
        .filter(|p| p.delete_files.position.files > 0)
        .count();
    assert!(
        with_deletes >= 10,
        "position deletes on many partitions, got {with_deletes}"
    );
    assert!(orders.delete_files.position.dangling > 0);

    let customers = scan("lake.customers").await;
    assert!(customers.delete_files.equality.files >= 10);

    let v1 = scan("lake.metrics_v1").await;
    assert_eq!(v1.format_version, 1);
    assert_eq!(v1.column_stats.files_with_bounds, 0, "no column statistics");
    assert_eq!(v1.write.parquet_codec.as_deref(), Some("gzip"));
    assert!(v1.snapshots.newest_ms.unwrap() < v1.scanned_at_ms - 100 * 86_400_000);

    let healthy = scan("lake.healthy").await;
    assert_eq!(healthy.snapshots.count, 1);
    assert_eq!(healthy.write.target_file_size_bytes, 1 << 20);
    assert_eq!(
        healthy.data_files.small_count, 0,
        "{:?}",
        healthy.data_files
    );
    assert!(healthy.data_files.count <= 4);
    assert_eq!(
        healthy.column_stats.files_with_bounds,
        healthy.data_files.count
    );
    assert_eq!(healthy.sort_order.fields.len(), 1);

    // Reopening does not rebuild; a commit makes the lake no longer pristine; force rebuilds.
    let manifest = lake.manifest.clone();
    drop(lake);
    let again = create_demo_lake(&root, &DemoOptions::default())
        .await
        .unwrap();
    assert!(!again.built && again.pristine);
    assert_eq!(again.manifest, manifest);
    let healthy = again
        .catalog
        .load_table(&TableId::parse("lake.healthy").unwrap())
        .await
        .unwrap();
    let batch = arrow_array::RecordBatch::try_from_iter([
        (
            "reading_id",
            Arc::new(arrow_array::Int64Array::from(vec![-1])) as arrow_array::ArrayRef,
        ),
        (
            "sensor",
            Arc::new(arrow_array::StringArray::from(vec!["x"])),
        ),
        (
            "read_at",
            Arc::new(arrow_array::TimestampMicrosecondArray::from(vec![0]).with_timezone("UTC")),
        ),
        (
            "value",
            Arc::new(arrow_array::Float64Array::from(vec![0.0])),
        ),
        ("checksum", Arc::new(arrow_array::Int64Array::from(vec![0]))),
    ])
    .unwrap();
    let written = write_data_files(&healthy, [batch]).await.unwrap();
    SnapshotProducer::new(&healthy)
        .add_data_files(written.files)
        .commit(again.catalog.committer().unwrap().as_ref())
        .await
        .unwrap();
    drop(again);
    let touched = create_demo_lake(&root, &DemoOptions::default())
        .await
        .unwrap();
    assert!(!touched.built && !touched.pristine);
    drop(touched);
    let forced = create_demo_lake(
        &root,
        &DemoOptions {
            force_rebuild: true,
            ..DemoOptions::default()
        },
    )
    .await
    .unwrap();
    assert!(forced.built && forced.pristine);
    assert_eq!(
        forced.table("lake.healthy").unwrap().rows,
        manifest.tables[2].rows
    );
}

#[tokio::test]
async fn other_options_rebuild_and_the_data_does_not_depend_on_the_clock() {
    let dir = tempfile::tempdir().unwrap();
    let options = DemoOptions {
        clickstream_commits: 5,
        catalog_name: "small".into(),
        ..DemoOptions::default()
    };
    let a = create_demo_lake_at(dir.path(), &options, &FixedClock(1_800_000_000_000))
        .await
        .unwrap();
    assert!(a.built);
    assert_eq!(a.manifest.built_at_ms, 1_800_000_000_000);
    check_tables(&a).await;
    let figures = |lake: &DemoLake| -> Vec<(u64, u64, u64, u64, u64, u64)> {
        lake.manifest
            .tables
            .iter()
            .map(|t| {
                (
                    t.rows,
                    t.snapshots,
                    t.data_files,
                    t.position_delete_files,
                    t.equality_delete_files,
                    t.dangling_delete_files,
                )
            })
            .collect()
    };
    let figures_a = figures(&a);
    let clicks = a
        .catalog
        .load_table(&TableId::parse("lake.clickstream").unwrap())
        .await
        .unwrap();
    let newest = clicks.metadata.current_snapshot().unwrap().timestamp_ms();
    assert!(newest < 1_800_000_000_000 && newest > 1_800_000_000_000 - 86_400_000);
    drop(a);

    // Same options, another clock: reopened, not rebuilt.
    let b = create_demo_lake_at(dir.path(), &options, &FixedClock(1_900_000_000_000))
        .await
        .unwrap();
    assert!(!b.built);
    drop(b);
    // Another seed changes the data; going back to the first seed gives the same rows again.
    let reseeded = DemoOptions {
        seed: 7,
        ..options.clone()
    };
    let c = create_demo_lake_at(dir.path(), &reseeded, &FixedClock(1_900_000_000_000))
        .await
        .unwrap();
    assert!(c.built);
    assert_ne!(figures(&c), figures_a);
    drop(c);
    let d = create_demo_lake_at(dir.path(), &options, &FixedClock(1_950_000_000_000))
        .await
        .unwrap();
    assert!(d.built);
    assert_eq!(figures(&d), figures_a, "same seed, same lake");
    check_tables(&d).await;
}

/// What lets a scan reach lake scale, through the storage counters (not timings): every manifest
/// list and every current manifest is read once, never a data file, and no more reads are under
/// way at once than the scan's concurrency.
#[tokio::test]
async fn a_scan_reads_each_manifest_once_with_bounded_reads_in_flight() {
    use cryo_core::io::PathKind;

    let dir = tempfile::tempdir().unwrap();
    let lake = create_demo_lake(dir.path(), &DemoOptions::default())
        .await
        .unwrap();
    for t in &lake.manifest.tables {
        let id = TableId::parse(&t.identifier).unwrap();
        for concurrency in [1, 3] {
            let options = ScanOptions {
                concurrency,
                ..ScanOptions::default()
            };
            let scan = scan_table(&lake.catalog, &id, &options, &SystemClock)
                .await
                .unwrap();
            let io = &scan.io;
            assert_eq!(io.reads_of(PathKind::DataFile), 0, "{id}: {io:?}");
            assert_eq!(
                io.reads_of(PathKind::ManifestList) as usize,
                scan.snapshots.count,
                "{id}: one read per manifest list"
            );
            assert_eq!(
                io.reads_of(PathKind::Manifest),
                scan.manifests.count,
                "{id}: one read per current manifest"
            );
            assert!(
                (1..=concurrency as u64).contains(&io.max_in_flight_reads),
                "{id}: {} reads at once with concurrency {concurrency}",
                io.max_in_flight_reads
            );
        }
    }
}

#[tokio::test]
async fn a_file_listing_streams_one_batch_per_manifest() {
    use cryo_core::scan::{arrow, file_batches, list_files};

    let dir = tempfile::tempdir().unwrap();
    let lake = create_demo_lake(dir.path(), &DemoOptions::default())
        .await
        .unwrap();
    for t in &lake.manifest.tables {
        let id = TableId::parse(&t.identifier).unwrap();
        let table = lake.catalog.load_table(&id).await.unwrap();
        let scan = scan_table(&lake.catalog, &id, &ScanOptions::default(), &SystemClock)
            .await
            .unwrap();
        for concurrency in [1, 4] {
            let options = ScanOptions {
                concurrency,
                ..ScanOptions::default()
            };
            let batches: Vec<_> = file_batches(&table, &options)
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            // One batch per manifest of the current snapshot, in list order.
            assert_eq!(batches.len() as u64, scan.manifests.count, "{id}");
            assert!(batches.iter().all(|b| b.schema() == arrow::files_schema()));
            let rows: usize = batches.iter().map(arrow_array::RecordBatch::num_rows).sum();
            assert_eq!(
                rows as u64,
                scan.data_files.count + scan.delete_files.files(),
                "{id}: every live file once"
            );
            let whole =
                arrow::files_batch(&id, &list_files(&table, &options).await.unwrap()).unwrap();
            let streamed =
                arrow_select::concat::concat_batches(&arrow::files_schema(), &batches).unwrap();
            assert_eq!(streamed, whole, "{id}: the stream is the listing");
        }
    }
}
