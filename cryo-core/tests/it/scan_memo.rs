//! A scan memo (`ScanOptions::cache_dir`): a scan reads only the manifest lists and manifests
//! written since the last one, and its result is always that of a scan without it.

use std::collections::BTreeSet;

use cryo_core::clock::FixedClock;
use cryo_core::commit::NewTable;
use cryo_core::demo::{DemoOptions, create_demo_lake};
use cryo_core::io::PathKind;
use cryo_core::maintain::{ExpireOptions, expire_snapshots};
use cryo_core::scan::{ScanOptions, TableScan, list_files, scan_table};
use cryo_core::{Catalog, TableId};

use crate::replace::{append, by_day, delete_ids, schema, sql_catalog};

const NOW: i64 = 1_900_000_000_000;

/// The scan's figures, without what says how it ran (reads, time).
fn figures(scan: &TableScan) -> serde_json::Value {
    let mut v = serde_json::to_value(scan).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("io");
    o.remove("duration_ms");
    v
}

async fn scan(catalog: &Catalog, id: &TableId, cache: Option<&std::path::Path>) -> TableScan {
    let options = ScanOptions {
        cache_dir: cache.map(std::path::Path::to_path_buf),
        ..ScanOptions::default()
    };
    scan_table(catalog, id, &options, &FixedClock(NOW))
        .await
        .unwrap()
}

/// Scans `id` without a memo and with the one in `cache`: the same figures. The memo scan's
/// reads of manifest lists and manifests.
async fn both(catalog: &Catalog, id: &TableId, cache: &std::path::Path) -> (TableScan, u64, u64) {
    let fresh = scan(catalog, id, None).await;
    let memo = scan(catalog, id, Some(cache)).await;
    assert_eq!(
        figures(&memo),
        figures(&fresh),
        "{id}: a memo changed the scan"
    );
    let io = &memo.io;
    let reads = (
        io.reads_of(PathKind::ManifestList),
        io.reads_of(PathKind::Manifest),
    );
    (fresh, reads.0, reads.1)
}

#[tokio::test]
async fn a_memo_reads_only_what_changed_and_never_changes_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let cache = dir.path().join("scan-cache");
    let id = TableId::parse("db.events").unwrap();
    let committer = catalog.committer().unwrap();
    let mut t = catalog
        .create_table(&id, NewTable::new(schema()).with_partition_spec(by_day()))
        .await
        .unwrap();
    for i in 0..4 {
        t = append(committer.as_ref(), &t, i * 10..i * 10 + 10).await;
    }
    // Equality deletes: the scan keeps live data paths (in the memo's bulk).
    t = delete_ids(committer.as_ref(), &t, &[3, 14]).await;

    // The first scan reads everything and writes the memo.
    let (fresh, lists, manifests) = both(&catalog, &id, &cache).await;
    assert_eq!(lists as usize, fresh.snapshots.count);
    assert_eq!(manifests, fresh.manifests.count);
    assert!(fresh.delete_files.files() > 0);
    assert_eq!(
        std::fs::read_dir(&cache).unwrap().count(),
        1,
        "one memo per table"
    );

    // Nothing changed: only the current snapshot's list is read (it names the manifests).
    let (_, lists, manifests) = both(&catalog, &id, &cache).await;
    assert_eq!((lists, manifests), (1, 0));

    // A new snapshot: its list and the manifests it wrote, nothing else.
    let before: BTreeSet<String> = manifest_paths(&catalog, &id).await;
    t = append(committer.as_ref(), &t, 100..110).await;
    let new = manifest_paths(&catalog, &id)
        .await
        .difference(&before)
        .count();
    assert!(new > 0);
    let (fresh, lists, manifests) = both(&catalog, &id, &cache).await;
    assert_eq!((lists, manifests), (1, new as u64));
    assert_eq!(fresh.snapshots.count, 6);

    // Expiry: the folds date partitions by snapshots now gone, so the manifests are read
    // again (and the result is still the fresh one).
    let expired = expire_snapshots(
        &catalog,
        &id,
        &ExpireOptions {
            older_than_ms: Some(chrono::Utc::now().timestamp_millis()),
            retain_last: Some(2),
            dry_run: false,
            ..ExpireOptions::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(expired.expired_snapshots(), 4);
    let (fresh, lists, manifests) = both(&catalog, &id, &cache).await;
    assert_eq!(fresh.snapshots.count, 2);
    assert_eq!((lists, manifests), (1, fresh.manifests.count));
    let (_, lists, manifests) = both(&catalog, &id, &cache).await;
    assert_eq!((lists, manifests), (1, 0));

    // Another option changes the folds (the small-file threshold): not reused.
    let options = ScanOptions {
        cache_dir: Some(cache.clone()),
        target_file_size_bytes: Some(1024),
        ..ScanOptions::default()
    };
    let other = scan_table(&catalog, &id, &options, &FixedClock(NOW))
        .await
        .unwrap();
    assert_eq!(other.io.reads_of(PathKind::Manifest), other.manifests.count);
    assert_eq!(other.data_files.small_count, 0);

    // A memo that is not one (torn, overwritten, another version) is ignored and rewritten.
    for garbage in [&b"CRYOSCAN\x01\x00\x00\x00\xff\xff"[..], b"not a memo", b""] {
        for f in std::fs::read_dir(&cache).unwrap() {
            std::fs::write(f.unwrap().path(), garbage).unwrap();
        }
        let (fresh, lists, manifests) = both(&catalog, &id, &cache).await;
        assert_eq!(
            (lists as usize, manifests),
            (fresh.snapshots.count, fresh.manifests.count)
        );
        let (_, lists, manifests) = both(&catalog, &id, &cache).await;
        assert_eq!((lists, manifests), (1, 0));
    }
    // A cache directory that cannot be one (a file is in the way): the scan goes on without.
    let blocked = dir.path().join("a-file");
    std::fs::write(&blocked, b"x").unwrap();
    for _ in 0..2 {
        let (fresh, lists, manifests) = both(&catalog, &id, &blocked).await;
        assert_eq!(
            (lists as usize, manifests),
            (fresh.snapshots.count, fresh.manifests.count)
        );
    }
    drop(t);
}

async fn manifest_paths(catalog: &Catalog, id: &TableId) -> BTreeSet<String> {
    let table = catalog.load_table(id).await.unwrap();
    list_files(&table, &ScanOptions::default())
        .await
        .unwrap()
        .into_iter()
        .map(|f| f.manifest)
        .collect()
}

/// Every table of the demo lake (v1 and v2, position and equality deletes, deletion vectors,
/// partition evolution): scanned twice with a memo, the same figures as without.
#[tokio::test]
async fn a_memo_gives_every_demo_table_its_fresh_scan() {
    let dir = tempfile::tempdir().unwrap();
    let lake = create_demo_lake(dir.path(), &DemoOptions::default())
        .await
        .unwrap();
    let cache = dir.path().join("scan-cache");
    for t in &lake.manifest.tables {
        let id = TableId::parse(&t.identifier).unwrap();
        let (fresh, lists, manifests) = both(&lake.catalog, &id, &cache).await;
        assert_eq!(
            (lists as usize, manifests),
            (fresh.snapshots.count, fresh.manifests.count)
        );
        let (_, lists, manifests) = both(&lake.catalog, &id, &cache).await;
        assert_eq!((lists, manifests), (1, 0), "{id}");
    }
    assert_eq!(
        std::fs::read_dir(&cache).unwrap().count(),
        lake.manifest.tables.len()
    );
}
