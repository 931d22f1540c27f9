//! Scanning tables written by PyIceberg and Spark.

use cryo_core::clock::SystemClock;
use cryo_core::io::PathKind;
use cryo_core::scan::{FleetScan, FleetScanOptions, ScanOptions, scan_fleet, scan_table};
use cryo_core::{Catalog, TableId};

use crate::common::{fixture_catalog, fixtures, fixtures_spark41};

#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn fleet_scan_matches_what_the_writers_report() {
    let m = fixtures();
    assert_fleet_scan_matches(&m, "fixtures").await;
}

/// The tables Spark 4.1 + Iceberg 1.12 wrote: v3 with deletion vectors and row lineage, v2 with
/// position deletes, equality deletes on both.
#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn fleet_scan_matches_spark41_and_iceberg_1_12() {
    let m = fixtures_spark41();
    let fleet = assert_fleet_scan_matches(&m, "fixtures_spark41").await;
    let by = |name: &str| {
        fleet
            .tables
            .iter()
            .find(|s| s.table.to_string() == name)
            .unwrap_or_else(|| panic!("{name} not scanned"))
    };
    let (v3, v2) = (by("spark41.events_v3"), by("spark41.events_v2"));
    assert_eq!((v3.format_version, v2.format_version), (3, 2));
    // The same deletes: as deletion vectors on v3, as position-delete files on v2.
    assert!(v3.delete_files.deletion_vectors.files > 0);
    assert_eq!(v3.delete_files.position.files, 0);
    assert_eq!(v2.delete_files.deletion_vectors.files, 0);
    assert_eq!(
        v2.delete_files.position.files,
        v3.delete_files.deletion_vectors.files
    );
    assert_eq!(
        v2.delete_files.position.records,
        v3.delete_files.deletion_vectors.records
    );
    assert_eq!(v3.data_files.records, v2.data_files.records);
}

/// Scans the fixture catalog `catalog` and checks every table of `m` in it against what its writer
/// recorded.
async fn assert_fleet_scan_matches(m: &serde_json::Value, catalog: &str) -> FleetScan {
    let catalog_handle = Catalog::connect(fixture_catalog(m, catalog)).await.unwrap();
    let fleet = scan_fleet(&catalog_handle, &FleetScanOptions::default(), &SystemClock)
        .await
        .unwrap();
    assert!(fleet.errors.is_empty(), "{:?}", fleet.errors);
    let mut seen = 0;
    for (key, t) in m["tables"].as_object().unwrap() {
        if t["catalog"] != catalog {
            continue;
        }
        seen += 1;
        let id = TableId::parse(t["identifier"].as_str().unwrap()).unwrap();
        let scan = fleet
            .tables
            .iter()
            .find(|s| s.table == id)
            .unwrap_or_else(|| panic!("{key} not scanned"));
        let live_rows = scan.data_files.records;
        assert_eq!(
            scan.snapshots.count as u64,
            t["snapshots"].as_u64().unwrap(),
            "{key} snapshots"
        );
        assert_eq!(
            scan.data_files.count,
            t["data_files"].as_u64().unwrap(),
            "{key} data files"
        );
        assert_eq!(
            scan.delete_files.position.files + scan.delete_files.deletion_vectors.files,
            t["position_delete_files"].as_u64().unwrap(),
            "{key} position deletes"
        );
        assert_eq!(
            scan.delete_files.equality.files,
            t["equality_delete_files"].as_u64().unwrap(),
            "{key} equality deletes"
        );
        assert_eq!(
            u64::from(scan.format_version),
            t["format_version"].as_u64().unwrap(),
            "{key}"
        );
        assert_eq!(
            scan.partitioning.specs.len() as u64,
            t["partition_specs"].as_u64().unwrap(),
            "{key}"
        );
        // Rows in data files minus rows deleted by position can never be below the live row count.
        if scan.delete_files.files() == 0 {
            assert_eq!(live_rows, t["row_count"].as_u64().unwrap(), "{key} rows");
        } else {
            assert!(live_rows >= t["row_count"].as_u64().unwrap(), "{key} rows");
        }
        let part_files: u64 = scan.partitions.iter().map(|p| p.data_files.count).sum();
        assert_eq!(
            part_files, scan.data_files.count,
            "{key}: partitions add up"
        );
    }
    assert!(seen > 0, "no table of catalog {catalog} in the manifest");
    fleet
}

#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn scanning_reads_metadata_only() {
    let m = fixtures();
    let catalog = Catalog::connect(fixture_catalog(&m, "fixtures"))
        .await
        .unwrap();
    for name in ["pyiceberg.events", "spark.orders_mor", "spark.upserts_eq"] {
        let before = catalog.io_counters().snapshot();
        let scan = scan_table(
            &catalog,
            &TableId::parse(name).unwrap(),
            &ScanOptions::default(),
            &SystemClock,
        )
        .await
        .unwrap();
        let after = catalog.io_counters().snapshot();
        // The scan's own storage counts, and the catalog's (metadata.json load).
        for snap in [&scan.io, &after] {
            assert_eq!(
                snap.reads_of(PathKind::DataFile),
                0,
                "{name} read a data file: {snap:?}"
            );
            assert_eq!(
                snap.reads_of(PathKind::Puffin),
                0,
                "{name} read a puffin file: {snap:?}"
            );
        }
        assert_eq!(
            after.reads_of(PathKind::MetadataJson) - before.reads_of(PathKind::MetadataJson),
            1
        );
        assert_eq!(
            scan.io.reads_of(PathKind::ManifestList) as usize,
            scan.snapshots.count,
            "{name}"
        );
        assert_eq!(
            scan.io.reads_of(PathKind::Manifest),
            scan.manifests.count,
            "{name}"
        );
    }
}

#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn partitions_and_files_as_arrow() {
    use arrow_array::{Array, StringArray, UInt64Array};
    use cryo_core::scan::{arrow, list_files};

    let m = fixtures();
    let catalog = Catalog::connect(fixture_catalog(&m, "fixtures"))
        .await
        .unwrap();
    let id = TableId::parse("spark.orders_mor").unwrap();
    let table = catalog.load_table(&id).await.unwrap();
    let scan = cryo_core::scan::scan_loaded(&table, "fixtures", &ScanOptions::default(), 0)
        .await
        .unwrap();

    let parts = arrow::partitions_batch(std::slice::from_ref(&scan)).unwrap();
    assert_eq!(parts.num_rows(), scan.partitions.len());
    assert_eq!(parts.schema(), arrow::partitions_schema());
    let col = |name: &str| {
        parts
            .column_by_name(name)
            .unwrap()
            .as_any()
            .downcast_ref::<UInt64Array>()
            .unwrap()
            .clone()
    };
    assert_eq!(
        col("data_files").iter().flatten().sum::<u64>(),
        scan.data_files.count
    );
    assert_eq!(
        col("position_delete_files").iter().flatten().sum::<u64>(),
        scan.delete_files.position.files
    );
    assert_eq!(
        col("records").iter().flatten().sum::<u64>(),
        scan.data_files.records
    );

    let files = list_files(&table, &ScanOptions::default()).await.unwrap();
    let batch = arrow::files_batch(&id, &files).unwrap();
    // Streamed, one batch per manifest, it is the same listing.
    let streamed: Vec<_> = futures::TryStreamExt::try_collect(
        cryo_core::scan::file_batches(&table, &ScanOptions::default())
            .await
            .unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(streamed.len() as u64, scan.manifests.count);
    assert_eq!(
        arrow_select::concat::concat_batches(&arrow::files_schema(), &streamed).unwrap(),
        batch
    );
    assert_eq!(
        batch.num_rows() as u64,
        scan.data_files.count + scan.delete_files.files()
    );
    let content = batch
        .column_by_name("content")
        .unwrap()
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap();
    let deletes = content
        .iter()
        .flatten()
        .filter(|c| *c == "position_deletes")
        .count() as u64;
    assert_eq!(deletes, scan.delete_files.position.files);
    let referenced = batch.column_by_name("referenced_data_file").unwrap();
    // Spark writes file-scoped position deletes: each names its data file, and that file is live.
    assert_eq!(
        referenced.null_count() as u64,
        batch.num_rows() as u64 - deletes
    );
    let sizes = batch
        .column_by_name("size_bytes")
        .unwrap()
        .as_any()
        .downcast_ref::<UInt64Array>()
        .unwrap();
    assert_eq!(
        sizes.iter().flatten().sum::<u64>(),
        scan.data_files.bytes + scan.delete_files.bytes()
    );
}
