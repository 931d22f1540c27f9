//! `expire_snapshots()`: a history of appends, deletes, an overwrite, a rewrite, branches, tags
//! and statistics built through Cryo's commit layer, expired twice under a fixed clock, on SQL
//! and Hadoop tables.
//!
//! After each expiry: every snapshot left reads exactly the rows it read before; the files under
//! the table's location are exactly the files the remaining snapshots reach (no referenced file
//! was deleted, no unreachable one was left), and exactly the files the outcome lists are gone;
//! the dry run before names exactly those snapshots and files and changes nothing.
#![allow(clippy::too_many_lines)] // Reason: each test walks one commit history end to end.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch};
use bytes::Bytes;
use cryo_core::clock::FixedClock;
use cryo_core::commit::{CatalogCommitter, NewTable, SnapshotProducer, TableChanges};
use cryo_core::io::{PathKind, normalize_location};
use cryo_core::maintain::{
    ExpireOptions, ExpireOutcome, ExpireSnapshots, ExpiredFileKind, expire_snapshots,
};
use cryo_core::{Catalog, Error, LoadedTable, TableId};
use futures::TryStreamExt;
use iceberg::spec::{
    DataContentType, Manifest, ManifestList, PartitionStatisticsFile, SnapshotReference,
    SnapshotRetention, StatisticsFile,
};
use iceberg::{TableRequirement, TableUpdate};

use cryo_core::commit::{write_equality_deletes, write_position_deletes};

use crate::replace::{
    DAY0, by_day, data_files_in, hadoop_catalog, read_file_ids, rows, schema, sql_catalog,
};

const HOUR: i64 = 3_600_000;
/// 2026-01-01T00:00:00Z in milliseconds: snapshot `i` of the history is committed at `T0 + i h`.
const T0: i64 = 1_767_225_600_000;

fn at(hours: i64) -> Arc<FixedClock> {
    Arc::new(FixedClock(T0 + hours * HOUR))
}

async fn commit(
    committer: &dyn CatalogCommitter,
    table: &LoadedTable,
    updates: Vec<TableUpdate>,
) -> LoadedTable {
    let changes = TableChanges::new(
        vec![TableRequirement::UuidMatch {
            uuid: table.metadata.uuid(),
        }],
        updates,
    );
    committer.commit(table, changes).await.unwrap()
}

/// Ids a snapshot reads (upstream's reader, deletes applied), sorted.
async fn ids_at(table: &LoadedTable, snapshot_id: i64) -> Vec<i64> {
    let t = table.to_iceberg().unwrap();
    let batches: Vec<RecordBatch> = t
        .scan()
        .snapshot_id(snapshot_id)
        .select(["id"])
        .build()
        .unwrap()
        .to_arrow()
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut ids: Vec<i64> = batches
        .iter()
        .flat_map(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect();
    ids.sort_unstable();
    ids
}

async fn rows_by_snapshot(table: &LoadedTable) -> BTreeMap<i64, Vec<i64>> {
    let mut out = BTreeMap::new();
    for s in table.metadata.snapshots() {
        out.insert(s.snapshot_id(), ids_at(table, s.snapshot_id()).await);
    }
    out
}

fn norm(p: &str) -> String {
    normalize_location(p).unwrap()
}

/// Every file under the table's location except metadata JSON and the version hint.
async fn listed(table: &LoadedTable) -> BTreeSet<String> {
    table
        .storage
        .list(table.metadata.location())
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.location)
        .filter(|p| !p.ends_with(".metadata.json") && !p.ends_with("version-hint.text"))
        .map(|p| norm(&p))
        .collect()
}

/// Every file the table's snapshots reach: manifest lists, manifests, their live entries,
/// statistics files.
async fn reachable(table: &LoadedTable) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for s in table.metadata.snapshots() {
        out.insert(norm(s.manifest_list()));
        let bytes = table.storage.read_all(s.manifest_list()).await.unwrap();
        let list =
            ManifestList::parse_with_version(&bytes, table.metadata.format_version()).unwrap();
        for mf in list.entries() {
            out.insert(norm(&mf.manifest_path));
            let m = Manifest::parse_avro(&table.storage.read_all(&mf.manifest_path).await.unwrap())
                .unwrap();
            for e in m.entries().iter().filter(|e| e.is_alive()) {
                out.insert(norm(e.file_path()));
            }
        }
    }
    for s in table.metadata.statistics_iter() {
        out.insert(norm(&s.statistics_path));
    }
    for s in table.metadata.partition_statistics_iter() {
        out.insert(norm(&s.statistics_path));
    }
    out
}

/// The metadata files the table's log and pointer name.
fn logged_metadata(table: &LoadedTable) -> Vec<String> {
    table
        .metadata
        .metadata_log()
        .iter()
        .map(|m| m.metadata_file.clone())
        .chain(table.metadata_location.clone())
        .collect()
}

fn snapshot_ids(table: &LoadedTable) -> Vec<i64> {
    let mut ids: Vec<i64> = table
        .metadata
        .snapshots()
        .map(|s| s.snapshot_id())
        .collect();
    ids.sort_unstable();
    ids
}

fn ref_names(table: &LoadedTable) -> BTreeSet<String> {
    let json = serde_json::to_value(table.metadata.as_ref()).unwrap();
    json["refs"]
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

/// The history (snapshot `Sᵢ` at `T0 + i h`):
///
/// | | change | files |
/// |---|---|---|
/// | S1–S3 | append ids 0–9, 10–19, 20–29 | two data files each (one per day) |
/// | S4 | position deletes: the first two rows of S3's day-0 file | |
/// | S5 | equality delete of ids 11, 12 | |
/// | S6 | overwrite: S1's files out, ids 100–109 in | S1's files: DELETED entries |
/// | S7 | replace S3's day-0 file and S4's position deletes by a rewritten file | |
/// | S8–S11 | append ids 200–203, 210–213, … | |
/// | S12 | delete S2's day-0 file (ids 10, 12, …, 18) | a DELETED entry, live nowhere after |
///
/// Refs: `audit` (branch at S3, keeps 2 snapshots, ref age 25 h), `v1` (tag at S1, ref age
/// 25 h), `stale` (tag at S4, ref age 1 h). Statistics for S5, partition statistics for S6.
async fn build_history(catalog: &Catalog, id: &TableId) -> LoadedTable {
    let committer = catalog.committer().unwrap();
    let c = committer.as_ref();
    let t = catalog
        .create_table(
            id,
            NewTable::new(schema())
                .with_partition_spec(by_day())
                .with_property("write.metadata.delete-after-commit.enabled", "true")
                .with_property("write.metadata.previous-versions-max", "4")
                .with_clock(at(0)),
        )
        .await
        .unwrap();
    let mut snaps = Vec::new();
    let mut t = t;
    let append = |t: LoadedTable, ids: Vec<i64>, h: i64| async move {
        let written = cryo_core::commit::write_data_files(&t, [rows(ids)])
            .await
            .unwrap();
        SnapshotProducer::new(&t)
            .with_clock(at(h))
            .add_data_files(written.files)
            .commit(c)
            .await
            .unwrap()
            .table
    };
    for (h, first) in [(1, 0), (2, 10), (3, 20)] {
        t = append(t, (first..first + 10).collect(), h).await;
        snaps.push(t.metadata.current_snapshot_id().unwrap());
    }
    let s1_files: Vec<String> = {
        // S1's files are the ones holding ids 0..10.
        let mut v = Vec::new();
        for f in data_files_in(&t, "").await {
            let ids = read_file_ids(&t, f.file_path()).await;
            if ids.iter().all(|i| *i < 10) {
                v.push(f.file_path().to_string());
            }
        }
        v
    };
    assert_eq!(s1_files.len(), 2);
    let s3_day0 = {
        let mut found = None;
        for f in data_files_in(&t, DAY0).await {
            if read_file_ids(&t, f.file_path()).await.contains(&20) {
                found = Some(f.file_path().to_string());
            }
        }
        found.unwrap()
    };
    // S4: position deletes on the first two rows of S3's day-0 file; S5: equality deletes.
    let pos = write_position_deletes(&t, &[(s3_day0.clone(), vec![0, 1])])
        .await
        .unwrap();
    t = SnapshotProducer::new(&t)
        .with_clock(at(4))
        .add_delete_files(pos.files)
        .commit(c)
        .await
        .unwrap()
        .table;
    snaps.push(t.metadata.current_snapshot_id().unwrap());
    let eq = write_equality_deletes(&t, &["id"], [id_keys(&[11, 12])])
        .await
        .unwrap();
    t = SnapshotProducer::new(&t)
        .with_clock(at(5))
        .add_delete_files(eq.files)
        .commit(c)
        .await
        .unwrap()
        .table;
    snaps.push(t.metadata.current_snapshot_id().unwrap());
    // S6: overwrite.
    let written = cryo_core::commit::write_data_files(&t, [rows(100..110)])
        .await
        .unwrap();
    t = SnapshotProducer::new(&t)
        .with_clock(at(6))
        .delete_data_files(s1_files.clone())
        .add_data_files(written.files)
        .commit(c)
        .await
        .unwrap()
        .table;
    snaps.push(t.metadata.current_snapshot_id().unwrap());
    // S7: replace S3's day-0 file and the position deletes on it by the rows they leave.
    let pos_deletes: Vec<String> = cryo_core::commit::live_files(&t)
        .await
        .unwrap()
        .into_iter()
        .filter(|f| f.file.content_type() == DataContentType::PositionDeletes)
        .map(|f| f.file.file_path().to_string())
        .collect();
    assert_eq!(pos_deletes.len(), 1);
    let left: Vec<i64> = read_file_ids(&t, &s3_day0)
        .await
        .into_iter()
        .skip(2)
        .collect();
    let written = cryo_core::commit::write_data_files(&t, [rows(left)])
        .await
        .unwrap();
    t = SnapshotProducer::replace(&t)
        .with_clock(at(7))
        .delete_data_files([s3_day0.clone()])
        .remove_delete_files(pos_deletes)
        .add_data_files(written.files)
        .commit(c)
        .await
        .unwrap()
        .table;
    snaps.push(t.metadata.current_snapshot_id().unwrap());
    for h in 8..=11 {
        let first = 200 + (h - 8) * 10;
        t = append(t, (first..first + 4).collect(), h).await;
        snaps.push(t.metadata.current_snapshot_id().unwrap());
    }
    // S12: delete S2's day-0 file.
    let s2_day0 = {
        let mut found = None;
        for f in data_files_in(&t, DAY0).await {
            if read_file_ids(&t, f.file_path()).await.contains(&10) {
                found = Some(f.file_path().to_string());
            }
        }
        found.unwrap()
    };
    t = SnapshotProducer::new(&t)
        .with_clock(at(12))
        .delete_data_files([s2_day0])
        .commit(c)
        .await
        .unwrap()
        .table;
    snaps.push(t.metadata.current_snapshot_id().unwrap());
    assert_eq!(snaps.len(), 12);

    // Refs and statistics (after the snapshots: a metadata-only commit stamps the table with
    // the real time, and snapshots older than that would be refused).
    let puffin = |name: &str| format!("{}/metadata/{name}", t.metadata.location());
    let stats = puffin("s5.stats.puffin");
    let pstats = puffin("s6.partition-stats.parquet");
    t.storage
        .write_all(&stats, Bytes::from_static(b"PFA1-stats"))
        .await
        .unwrap();
    t.storage
        .write_all(&pstats, Bytes::from_static(b"PAR1-partition-stats"))
        .await
        .unwrap();
    let tag = |id: i64, age: i64| SnapshotReference {
        snapshot_id: id,
        retention: SnapshotRetention::Tag {
            max_ref_age_ms: Some(age),
        },
    };
    t = commit(
        c,
        &t,
        vec![
            TableUpdate::SetSnapshotRef {
                ref_name: "audit".into(),
                reference: SnapshotReference {
                    snapshot_id: snaps[2],
                    retention: SnapshotRetention::branch(Some(2), None, Some(25 * HOUR)),
                },
            },
            TableUpdate::SetSnapshotRef {
                ref_name: "v1".into(),
                reference: tag(snaps[0], 25 * HOUR),
            },
            TableUpdate::SetSnapshotRef {
                ref_name: "stale".into(),
                reference: tag(snaps[3], HOUR),
            },
            TableUpdate::SetStatistics {
                statistics: StatisticsFile {
                    snapshot_id: snaps[4],
                    statistics_path: stats,
                    file_size_in_bytes: 10,
                    file_footer_size_in_bytes: 4,
                    key_metadata: None,
                    blob_metadata: Vec::new(),
                },
            },
            TableUpdate::SetPartitionStatistics {
                partition_statistics: PartitionStatisticsFile {
                    snapshot_id: snaps[5],
                    statistics_path: pstats,
                    file_size_in_bytes: 20,
                },
            },
        ],
    )
    .await;
    t
}

/// Equality-delete keys (`id`, `ts`) for generated rows.
fn id_keys(ids: &[i64]) -> RecordBatch {
    let full = rows(ids.iter().copied());
    full.project(&[0, 1]).unwrap()
}

/// The snapshots, oldest first.
fn history_ids(table: &LoadedTable) -> Vec<i64> {
    let mut v: Vec<(i64, i64, i64)> = table
        .metadata
        .snapshots()
        .map(|s| (s.sequence_number(), s.timestamp_ms(), s.snapshot_id()))
        .collect();
    v.sort_unstable();
    v.into_iter().map(|(_, _, id)| id).collect()
}

/// The checks every expiry must pass.
async fn check_expiry(
    before: &LoadedTable,
    rows_before: &BTreeMap<i64, Vec<i64>>,
    listed_before: &BTreeSet<String>,
    after: &LoadedTable,
    out: &ExpireOutcome,
) {
    // Snapshots: exactly the outcome's.
    assert_eq!(snapshot_ids(after), out.retained_snapshot_ids);
    let mut all: Vec<i64> = out
        .retained_snapshot_ids
        .iter()
        .chain(&out.expired_snapshot_ids)
        .copied()
        .collect();
    all.sort_unstable();
    assert_eq!(all, snapshot_ids(before));
    // Every remaining snapshot reads what it read before.
    for id in &out.retained_snapshot_ids {
        assert_eq!(&ids_at(after, *id).await, &rows_before[id], "snapshot {id}");
    }
    // Storage holds exactly what the remaining snapshots reach.
    let listed_after = listed(after).await;
    assert_eq!(listed_after, reachable(after).await);
    // Exactly the outcome's files are gone (metadata JSON separately).
    let gone: BTreeSet<String> = listed_before.difference(&listed_after).cloned().collect();
    let reported: BTreeSet<String> = out
        .files
        .iter()
        .filter(|f| f.kind != ExpiredFileKind::MetadataJson)
        .map(|f| norm(&f.path))
        .collect();
    assert_eq!(gone, reported);
    assert!(out.failures.is_empty(), "{:?}", out.failures);
    assert!(out.cleanup_error.is_none());
    // Metadata files: the log's all exist; the dropped ones do not.
    for m in logged_metadata(after) {
        assert!(after.storage.head(&m).await.unwrap().is_some(), "{m}");
    }
    for f in out
        .files
        .iter()
        .filter(|f| f.kind == ExpiredFileKind::MetadataJson)
    {
        assert!(after.storage.head(&f.path).await.unwrap().is_none());
        assert!(f.bytes > 0);
    }
    // Counts agree with the list.
    let total = out.deleted.total();
    assert_eq!(total.files as usize, out.files.len());
    assert_eq!(total.bytes, out.files.iter().map(|f| f.bytes).sum::<u64>());
    assert_eq!(out.before(), total);
    assert_eq!(out.after().files, 0);
}

async fn expire_history(catalog: &Catalog, id: &TableId) {
    let t = build_history(catalog, id).await;
    let s = history_ids(&t);
    assert_eq!(s.len(), 12);
    let ts = |i: usize| t.metadata.snapshot_by_id(s[i]).unwrap().timestamp_ms();
    let rows_before = rows_by_snapshot(&t).await;
    let listed_before = listed(&t).await;
    assert_eq!(listed_before, reachable(&t).await);

    // Run 1, 20 h after T0: older than S10, keep 2. main keeps S10–S12; `audit` keeps S3 and
    // S2; `v1` keeps S1; `stale` (1 h) goes. S4–S9 go.
    let now1 = at(20);
    let options = ExpireOptions {
        older_than_ms: Some(ts(9)),
        retain_last: Some(2),
        ..ExpireOptions::default()
    };
    let dry = ExpireSnapshots::new(catalog, id.clone())
        .with_options(options.clone())
        .with_clock(now1.clone())
        .execute()
        .await
        .unwrap();
    assert!(dry.dry_run);
    let unchanged = catalog.load_table(id).await.unwrap();
    assert_eq!(unchanged.metadata_location, t.metadata_location);
    assert_eq!(listed(&unchanged).await, listed_before);
    assert_eq!(dry.metadata_location, None);

    let io_before = catalog.io_counters().snapshot();
    let out = ExpireSnapshots::new(catalog, id.clone())
        .with_options(options.clone())
        .dry_run(false)
        .with_clock(now1.clone())
        .execute()
        .await
        .unwrap();
    assert!(!out.dry_run);
    // The proof (made once outside the commit fence and again inside it) reads each manifest
    // list at most once per run, and each manifest at most once: what it read is kept.
    let io = catalog.io_counters().snapshot();
    let reads = |kind| io.reads_of(kind) - io_before.reads_of(kind);
    assert!(reads(PathKind::ManifestList) <= 12, "{io:?}");
    let manifests = listed_before
        .iter()
        .filter(|p| PathKind::of(p) == PathKind::Manifest)
        .count() as u64;
    assert!(reads(PathKind::Manifest) <= manifests, "{io:?}");
    assert_eq!(out.expired_snapshot_ids, dry.expired_snapshot_ids);
    assert_eq!(out.files, dry.files, "the dry run names exactly the files");
    assert_eq!(out.deleted, dry.deleted);
    let mut expect: Vec<i64> = s[3..9].to_vec();
    expect.sort_unstable();
    assert_eq!(out.expired_snapshot_ids, expect);
    assert_eq!(out.removed_refs, vec!["stale".to_string()]);
    let after = catalog.load_table(id).await.unwrap();
    assert_eq!(out.metadata_location, after.metadata_location);
    assert_eq!(after.metadata.current_snapshot_id(), Some(s[11]));
    assert_eq!(
        ref_names(&after),
        ["audit", "main", "v1"].map(String::from).into()
    );
    check_expiry(&t, &rows_before, &listed_before, &after, &out).await;
    // What went: S4's position deletes (replaced in S7), S4–S9's manifest lists and the
    // manifests only they listed, S5's statistics, S6's partition statistics; S1's data files
    // stay (the tag `v1` reads them), S3's day-0 file stays (`audit`).
    assert_eq!(out.deleted.position_deletes.files, 1);
    assert_eq!(out.deleted.data.files, 0);
    assert_eq!(out.deleted.equality_deletes.files, 0);
    assert_eq!(out.deleted.manifest_lists.files, 6);
    // Manifests only S4–S9 list: S4's delete manifest (its file was removed in S7) and the
    // DELETED-only manifests S6 and S7 wrote (later commits drop them): S6's data, S7's data
    // and S7's deletes.
    assert_eq!(out.deleted.manifests.files, 4);
    assert_eq!(out.deleted.statistics.files, 2);
    assert_eq!(out.deleted.statistics.bytes, 30);
    assert_eq!(after.metadata.statistics_iter().len(), 0);
    assert_eq!(after.metadata.partition_statistics_iter().len(), 0);
    // The table keeps 4 previous metadata files: the commit dropped the oldest one.
    assert_eq!(out.deleted.metadata_json.files, 1);
    assert_eq!(after.metadata.metadata_log().len(), 4);

    // Run 2, 30 h after T0: `audit` and `v1` are older than their 25 h; keep only S12 (older
    // than S12, keep 1). S12 lists S2's day-0 file as DELETED only: it goes, with S1's files
    // (DELETED in S6, gone), S3's day-0 file (replaced in S7).
    let rows_mid = rows_by_snapshot(&after).await;
    let listed_mid = listed(&after).await;
    let now2 = at(30);
    let out2 = ExpireSnapshots::new(catalog, id.clone())
        .with_options(ExpireOptions {
            older_than_ms: Some(ts(11)),
            retain_last: Some(1),
            dry_run: false,
            ..ExpireOptions::default()
        })
        .with_clock(now2)
        .execute()
        .await
        .unwrap();
    let after2 = catalog.load_table(id).await.unwrap();
    assert_eq!(out2.retained_snapshot_ids, vec![s[11]]);
    let mut removed = out2.removed_refs.clone();
    removed.sort();
    assert_eq!(removed, ["audit", "v1"].map(String::from));
    assert_eq!(ref_names(&after2), ["main"].map(String::from).into());
    check_expiry(&after, &rows_mid, &listed_mid, &after2, &out2).await;
    // S1's two files, S2's day-0 file, S3's day-0 file.
    assert_eq!(out2.deleted.data.files, 4);
    assert_eq!(out2.deleted.manifest_lists.files, 5);
    let data: BTreeSet<&str> = out2
        .files
        .iter()
        .filter(|f| f.kind == ExpiredFileKind::Data)
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(data.len(), 4);
    // The rows S12 reads never changed.
    assert_eq!(ids_at(&after2, s[11]).await, rows_before[&s[11]]);

    // Nothing left to expire: a no-op that commits nothing.
    let again = ExpireSnapshots::new(catalog, id.clone())
        .with_options(ExpireOptions {
            older_than_ms: Some(ts(11)),
            retain_last: Some(1),
            dry_run: false,
            ..ExpireOptions::default()
        })
        .with_clock(at(30))
        .execute()
        .await
        .unwrap();
    assert!(again.expired_snapshot_ids.is_empty() && again.files.is_empty());
    assert_eq!(
        catalog.load_table(id).await.unwrap().metadata_location,
        after2.metadata_location
    );
}

#[tokio::test]
async fn expires_history_on_sql_tables() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    expire_history(&catalog, &TableId::parse("db.history").unwrap()).await;
}

#[tokio::test]
async fn expires_history_on_hadoop_tables() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = hadoop_catalog(dir.path()).await;
    catalog
        .create_namespace(&cryo_core::Namespace::new(["db"]))
        .await
        .unwrap();
    expire_history(&catalog, &TableId::parse("db.history").unwrap()).await;
}

#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn expires_history_on_s3_and_azure() {
    let dir = tempfile::tempdir().unwrap();
    for (name, (catalog, prefix)) in [
        (
            "s3",
            crate::common::s3_catalog(&dir.path().join("s3")).await,
        ),
        (
            "azure",
            crate::common::azure_catalog(&dir.path().join("azure")).await,
        ),
    ] {
        let id = TableId::parse("db.history").unwrap();
        expire_history(&catalog, &id).await;
        let t = catalog.load_table(&id).await.unwrap();
        assert!(t.metadata.location().starts_with(&prefix), "{name}");
    }
}

#[tokio::test]
async fn refuses_bad_input_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let id = TableId::parse("db.bad").unwrap();
    let committer = catalog.committer().unwrap();
    let mut t = catalog
        .create_table(&id, NewTable::new(schema()).with_partition_spec(by_day()))
        .await
        .unwrap();
    for i in 0..3 {
        t = crate::replace::append(committer.as_ref(), &t, i * 10..i * 10 + 10).await;
    }
    let head = t.metadata.current_snapshot_id().unwrap();
    let listed_before = listed(&t).await;
    let now = chrono::Utc::now().timestamp_millis();
    let run = |options: ExpireOptions| {
        let catalog = &catalog;
        let id = id.clone();
        async move {
            expire_snapshots(
                catalog,
                &id,
                &ExpireOptions {
                    dry_run: false,
                    ..options
                },
            )
            .await
        }
    };
    let cases = [
        ExpireOptions {
            retain_last: Some(0),
            ..ExpireOptions::default()
        },
        ExpireOptions {
            older_than_ms: Some(now + 3_600_000),
            ..ExpireOptions::default()
        },
        ExpireOptions {
            older_than_ms: Some(-5),
            ..ExpireOptions::default()
        },
        ExpireOptions {
            snapshot_ids: vec![head],
            ..ExpireOptions::default()
        },
    ];
    for options in cases {
        let e = run(options.clone()).await.unwrap_err();
        assert!(matches!(e, Error::Validation { .. }), "{options:?}: {e}");
    }
    // gc.enabled=false: the table's files may belong to another table.
    let t = commit(
        committer.as_ref(),
        &t,
        vec![TableUpdate::SetProperties {
            updates: [("gc.enabled".to_string(), "false".to_string())].into(),
        }],
    )
    .await;
    let e = run(ExpireOptions {
        older_than_ms: Some(now),
        ..ExpireOptions::default()
    })
    .await
    .unwrap_err();
    assert!(matches!(e, Error::Refused { .. }), "{e}");
    assert!(e.to_string().contains("gc.enabled"), "{e}");
    // A malformed retention property is a configuration error.
    let t = commit(
        committer.as_ref(),
        &t,
        vec![TableUpdate::SetProperties {
            updates: [
                ("gc.enabled".to_string(), "true".to_string()),
                (
                    "history.expire.max-snapshot-age-ms".to_string(),
                    "5d".to_string(),
                ),
            ]
            .into(),
        }],
    )
    .await;
    let e = run(ExpireOptions::default()).await.unwrap_err();
    assert!(matches!(e, Error::Config { .. }), "{e}");
    // Nothing changed: same snapshots, same files.
    let now_table = catalog.load_table(&id).await.unwrap();
    assert_eq!(now_table.metadata_location, t.metadata_location);
    assert_eq!(now_table.metadata.snapshots().len(), 3);
    assert_eq!(listed(&now_table).await, listed_before);
}

#[tokio::test]
async fn clean_files_false_only_changes_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let id = TableId::parse("db.keep_files").unwrap();
    let committer = catalog.committer().unwrap();
    let mut t = catalog
        .create_table(&id, NewTable::new(schema()))
        .await
        .unwrap();
    for i in 0..4 {
        t = crate::replace::append(committer.as_ref(), &t, i * 10..i * 10 + 10).await;
    }
    let listed_before = listed(&t).await;
    let out = expire_snapshots(
        &catalog,
        &id,
        &ExpireOptions {
            older_than_ms: Some(chrono::Utc::now().timestamp_millis()),
            retain_last: Some(1),
            clean_files: false,
            dry_run: false,
            ..ExpireOptions::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(out.expired_snapshot_ids.len(), 3);
    assert!(out.files.is_empty());
    let after = catalog.load_table(&id).await.unwrap();
    assert_eq!(after.metadata.snapshots().len(), 1);
    assert_eq!(listed(&after).await, listed_before);
    assert_eq!(
        ids_at(&after, out.retained_snapshot_ids[0]).await,
        (0..40).collect::<Vec<_>>()
    );
}

/// Spark's reachability, recomputed here with upstream's Avro readers: files of the `expired`
/// snapshots that no `retained` snapshot reaches (live entries only), statistics included.
async fn reference_unreachable(
    t: &LoadedTable,
    expired: &[i64],
    retained: &[i64],
) -> BTreeSet<String> {
    async fn side(t: &LoadedTable, ids: &[i64]) -> (BTreeSet<String>, BTreeMap<String, String>) {
        let (mut lists, mut manifests) = (BTreeSet::new(), BTreeMap::new());
        for id in ids {
            let s = t.metadata.snapshot_by_id(*id).unwrap();
            lists.insert(norm(s.manifest_list()));
            let bytes = t.storage.read_all(s.manifest_list()).await.unwrap();
            let list =
                ManifestList::parse_with_version(&bytes, t.metadata.format_version()).unwrap();
            for mf in list.entries() {
                manifests.insert(norm(&mf.manifest_path), mf.manifest_path.clone());
            }
        }
        (lists, manifests)
    }
    async fn live(t: &LoadedTable, path: &str) -> BTreeSet<String> {
        let m = Manifest::parse_avro(&t.storage.read_all(path).await.unwrap()).unwrap();
        m.entries()
            .iter()
            .filter(|e| e.is_alive())
            .map(|e| norm(e.file_path()))
            .collect()
    }
    let (e_lists, e_manifests) = side(t, expired).await;
    let (r_lists, r_manifests) = side(t, retained).await;
    let mut out: BTreeSet<String> = e_lists.difference(&r_lists).cloned().collect();
    let mut candidates = BTreeSet::new();
    for (k, raw) in &e_manifests {
        if !r_manifests.contains_key(k) {
            out.insert(k.clone());
            candidates.extend(live(t, raw).await);
        }
    }
    let mut valid = BTreeSet::new();
    for raw in r_manifests.values() {
        valid.extend(live(t, raw).await);
    }
    out.extend(candidates.difference(&valid).cloned());
    let stats = |ids: &[i64]| -> BTreeSet<String> {
        t.metadata
            .statistics_iter()
            .map(|s| (s.snapshot_id, &s.statistics_path))
            .chain(
                t.metadata
                    .partition_statistics_iter()
                    .map(|s| (s.snapshot_id, &s.statistics_path)),
            )
            .filter(|(id, _)| ids.contains(id))
            .map(|(_, p)| norm(p))
            .collect()
    };
    out.extend(stats(expired).difference(&stats(retained)).cloned());
    out
}

/// On the tables PyIceberg and Spark wrote (`tests/fixtures/make_fixtures.py`: Java's and
/// PyIceberg's deflated Avro, format v1 and v2, position and equality deletes), a dry run that
/// expires all but the newest snapshot names exactly the files upstream's readers find
/// unreachable, and changes nothing.
#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn dry_run_on_peer_tables_agrees_with_upstream_reachability() {
    let m = crate::common::fixtures();
    let mut checked_files = 0;
    for catalog_name in ["fixtures", "hadoop"] {
        let catalog = Catalog::connect(crate::common::fixture_catalog(&m, catalog_name))
            .await
            .unwrap();
        for (_, t) in m["tables"].as_object().unwrap() {
            if t["catalog"] != catalog_name {
                continue;
            }
            let id = TableId::parse(t["identifier"].as_str().unwrap()).unwrap();
            let table = catalog.load_table(&id).await.unwrap();
            let out = expire_snapshots(
                &catalog,
                &id,
                &ExpireOptions {
                    older_than_ms: Some(chrono::Utc::now().timestamp_millis()),
                    retain_last: Some(1),
                    ..ExpireOptions::default()
                },
            )
            .await
            .unwrap();
            assert!(out.dry_run);
            let expect = reference_unreachable(
                &table,
                &out.expired_snapshot_ids,
                &out.retained_snapshot_ids,
            )
            .await;
            let got: BTreeSet<String> = out
                .files
                .iter()
                .filter(|f| f.kind != ExpiredFileKind::MetadataJson)
                .map(|f| norm(&f.path))
                .collect();
            assert_eq!(got, expect, "{id}");
            checked_files += got.len();
            let again = catalog.load_table(&id).await.unwrap();
            assert_eq!(again.metadata_location, table.metadata_location, "{id}");
        }
    }
    assert!(
        checked_files > 10,
        "the fixtures expire too little to compare: {checked_files}"
    );
}
