//! Scanning tables written by PyIceberg and Spark.

use cryo_core::clock::SystemClock;
use cryo_core::io::PathKind;
use cryo_core::scan::{FleetScanOptions, ScanOptions, scan_fleet, scan_table};
use cryo_core::{Catalog, TableId};

use crate::common::{fixture_catalog, fixtures};

#[tokio::test]
async fn fleet_scan_matches_what_the_writers_report() {
    let Some(m) = fixtures() else { return };
    let catalog = Catalog::connect(fixture_catalog(&m, "fixtures")).await.unwrap();
    let fleet = scan_fleet(&catalog, &FleetScanOptions::default(), &SystemClock).await.unwrap();
    assert!(fleet.errors.is_empty(), "{:?}", fleet.errors);
    for (key, t) in m["tables"].as_object().unwrap() {
        if t["catalog"] != "fixtures" {
            continue;
        }
        let id = TableId::parse(t["identifier"].as_str().unwrap()).unwrap();
        let scan = fleet
            .tables
            .iter()
            .find(|s| s.table == id)
            .unwrap_or_else(|| panic!("{key} not scanned"));
        let live_rows = scan.data_files.records;
        assert_eq!(scan.snapshots.count as u64, t["snapshots"].as_u64().unwrap(), "{key} snapshots");
        assert_eq!(scan.data_files.count, t["data_files"].as_u64().unwrap(), "{key} data files");
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
        assert_eq!(scan.format_version as u64, t["format_version"].as_u64().unwrap(), "{key}");
        assert_eq!(scan.partitioning.specs.len() as u64, t["partition_specs"].as_u64().unwrap(), "{key}");
        // Rows in data files minus rows deleted by position can never be below the live row count.
        if scan.delete_files.files() == 0 {
            assert_eq!(live_rows, t["row_count"].as_u64().unwrap(), "{key} rows");
        } else {
            assert!(live_rows >= t["row_count"].as_u64().unwrap(), "{key} rows");
        }
        let part_files: u64 = scan.partitions.iter().map(|p| p.data_files.count).sum();
        assert_eq!(part_files, scan.data_files.count, "{key}: partitions add up");
    }
}

#[tokio::test]
async fn scanning_reads_metadata_only() {
    let Some(m) = fixtures() else { return };
    let catalog = Catalog::connect(fixture_catalog(&m, "fixtures")).await.unwrap();
    for name in ["pyiceberg.events", "spark.orders_mor", "spark.upserts_eq"] {
        let before = catalog.io_counters().snapshot();
        let scan = scan_table(&catalog, &TableId::parse(name).unwrap(), &ScanOptions::default(), &SystemClock)
            .await
            .unwrap();
        let after = catalog.io_counters().snapshot();
        // The scan's own storage counts, and the catalog's (metadata.json load).
        for snap in [&scan.io, &after] {
            assert_eq!(snap.reads_of(PathKind::DataFile), 0, "{name} read a data file: {snap:?}");
            assert_eq!(snap.reads_of(PathKind::Puffin), 0, "{name} read a puffin file: {snap:?}");
        }
        assert_eq!(after.reads_of(PathKind::MetadataJson) - before.reads_of(PathKind::MetadataJson), 1);
        assert_eq!(scan.io.reads_of(PathKind::ManifestList) as usize, scan.snapshots.count, "{name}");
        assert_eq!(scan.io.reads_of(PathKind::Manifest), scan.manifests.count, "{name}");
    }
}
