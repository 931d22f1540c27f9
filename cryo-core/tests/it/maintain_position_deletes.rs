//! `rewrite_position_deletes()`: many small merge-on-read delete files combined per partition,
//! rows of data files no longer live dropped, dangling files removed, sequence numbers kept so
//! the same rows stay deleted; concurrent writers; a dry run on Spark's merge-on-read fixture.
#![allow(clippy::too_many_lines)] // Reason: each test walks one table history end to end.

use std::collections::{BTreeMap, BTreeSet};

use arrow_array::{Array, Int64Array, StringArray};
use cryo_core::commit::{
    CatalogCommitter, LiveFile, NewTable, POS_DELETE_FILE_PATH_FIELD_ID, POS_DELETE_POS_FIELD_ID,
    SnapshotProducer, live_files, write_position_deletes,
};
use cryo_core::compact::{CompactOptions, PartitionRef, compact};
use cryo_core::maintain::{
    DeleteGroupStatus, RewritePositionDeletes, RewritePositionDeletesOptions,
    rewrite_position_deletes,
};
use cryo_core::{Catalog, Error, LoadedTable, TableId};
use iceberg::spec::DataContentType;
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::common::{fixture_catalog, fixtures};
use crate::maintain_manifests::{append_rows, files_under, row_on};
use crate::replace::{Row, by_day, read_rows, schema, sql_catalog};

const DAYS: i64 = 4;

/// A v2 table by day: 6 appends with rows on every day (4 files each), then 6 merge-on-read
/// deletes, each deleting a few rows of several files in every day (one small delete file per
/// day per commit), and one that deletes from a single file only.
async fn table_with_deletes(catalog: &Catalog) -> (LoadedTable, String) {
    let id = TableId::parse("db.mor").unwrap();
    let mut table = catalog
        .create_table(&id, NewTable::new(schema()).with_partition_spec(by_day()))
        .await
        .unwrap();
    let committer = catalog.committer().unwrap();
    for a in 0..6 {
        let rows: Vec<Row> = (0..40).map(|i| row_on(a * 40 + i, i % DAYS)).collect();
        table = append_rows(committer.as_ref(), &table, &rows).await;
    }
    let data = data_files(&table).await;
    for d in 0..6_i64 {
        // Every data file loses its row at position d (each file has 10 rows).
        let deletes: Vec<(String, Vec<i64>)> = data.iter().map(|f| (f.clone(), vec![d])).collect();
        table = commit_deletes(committer.as_ref(), &table, &deletes).await;
    }
    // A delete file that references one data file only: dangling once that file goes.
    let lone = data[0].clone();
    table = commit_deletes(committer.as_ref(), &table, &[(lone.clone(), vec![7, 8])]).await;
    (table, lone)
}

async fn commit_deletes(
    committer: &dyn CatalogCommitter,
    table: &LoadedTable,
    deletes: &[(String, Vec<i64>)],
) -> LoadedTable {
    let written = write_position_deletes(table, deletes).await.unwrap();
    SnapshotProducer::new(table)
        .add_delete_files(written.files)
        .commit(committer)
        .await
        .unwrap()
        .table
}

async fn data_files(table: &LoadedTable) -> Vec<String> {
    let mut out: Vec<String> = live_files(table)
        .await
        .unwrap()
        .into_iter()
        .filter(|f| f.file.content_type() == DataContentType::Data)
        .map(|f| f.file.file_path().to_string())
        .collect();
    out.sort();
    out
}

fn position_deletes(files: &[LiveFile]) -> Vec<&LiveFile> {
    files
        .iter()
        .filter(|f| f.file.content_type() == DataContentType::PositionDeletes)
        .collect()
}

/// Position-delete files per partition directory (`ts_day=…`).
fn per_day(files: &[LiveFile]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for f in position_deletes(files) {
        let day = f
            .file
            .file_path()
            .split('/')
            .find(|s| s.starts_with("ts_day="))
            .unwrap()
            .to_string();
        *out.entry(day).or_default() += 1;
    }
    out
}

/// The rows of a position-delete file, with a check of its schema's field ids.
fn delete_rows(path: &str) -> Vec<(String, i64)> {
    let file = std::fs::File::open(path.trim_start_matches("file://")).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    let ids: Vec<String> = reader
        .schema()
        .fields()
        .iter()
        .map(|f| f.metadata()[PARQUET_FIELD_ID_META_KEY].clone())
        .collect();
    assert_eq!(
        ids,
        [
            POS_DELETE_FILE_PATH_FIELD_ID.to_string(),
            POS_DELETE_POS_FIELD_ID.to_string()
        ]
    );
    let mut out = Vec::new();
    for b in reader.build().unwrap() {
        let b = b.unwrap();
        let paths = b.column(0).as_any().downcast_ref::<StringArray>().unwrap();
        let pos = b.column(1).as_any().downcast_ref::<Int64Array>().unwrap();
        for i in 0..b.num_rows() {
            assert!(!paths.is_null(i));
            out.push((paths.value(i).to_string(), pos.value(i)));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_delete_files_are_combined_and_dangling_ones_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let (table, lone) = table_with_deletes(&catalog).await;
    let id = table.id.clone();
    let committer = catalog.committer().unwrap();
    // The lone delete's data file is removed (a metadata-only delete): its delete file now
    // applies to nothing, and the other delete files' rows for it to nothing either.
    let table = SnapshotProducer::new(&table)
        .delete_data_files([lone.clone()])
        .commit(committer.as_ref())
        .await
        .unwrap()
        .table;
    let rows = read_rows(&table).await;
    assert_eq!(
        rows.len(),
        240 - 10 - 23 * 6,
        "23 files left, 6 rows deleted in each"
    );
    let live = live_files(&table).await.unwrap();
    assert_eq!(
        per_day(&live).values().copied().collect::<Vec<_>>(),
        [7, 6, 6, 6]
    );
    let max_seq = position_deletes(&live)
        .iter()
        .filter(|f| f.file.file_path().contains("ts_day=2026-01-02"))
        .map(|f| f.sequence_number.unwrap())
        .max()
        .unwrap();
    let snapshots = table.metadata.snapshots().count();
    let on_disk = files_under(dir.path());

    // Dry run: the plan, nothing written.
    let dry = RewritePositionDeletes::new(&catalog, id.clone())
        .dry_run(true)
        .execute()
        .await
        .unwrap();
    assert!(dry.dry_run);
    assert_eq!(dry.plan.groups.len(), 4);
    assert_eq!(dry.plan.files_combined(), 24);
    assert_eq!(dry.plan.files_dangling(), 1);
    assert_eq!(dry.before().files, 25);
    assert_eq!(dry.after().files, 4, "one file per day expected");
    assert!(
        dry.groups
            .iter()
            .all(|g| g.status == DeleteGroupStatus::DryRun)
    );
    let dangling = dry
        .plan
        .groups
        .iter()
        .find(|g| !g.dangling.is_empty())
        .unwrap();
    assert_eq!(dangling.dangling[0].records, 2);
    assert_eq!(
        catalog.load_table(&id).await.unwrap().metadata_location,
        table.metadata_location
    );
    assert_eq!(files_under(dir.path()), on_disk, "dry run wrote nothing");

    let out = rewrite_position_deletes(&catalog, &id, &RewritePositionDeletesOptions::default())
        .await
        .unwrap();
    assert_eq!(out.committed_groups(), 4, "{:?}", out.groups);
    assert_eq!(out.snapshot_ids.len(), 1);
    assert_eq!((out.files_combined(), out.files_dangling()), (24, 1));
    assert_eq!(out.files_added(), 4);
    // The dangling file's 2 rows and the 6 rows the others held for the removed file.
    assert_eq!(out.rows_dropped(), 2 + 6);
    assert_eq!((out.before().files, out.after().files), (25, 4));

    let after = catalog.load_table(&id).await.unwrap();
    assert_eq!(after.metadata.snapshots().count(), snapshots + 1);
    let snap = after.metadata.current_snapshot().unwrap();
    assert_eq!(snap.summary().operation.as_str(), "replace");
    let s = &snap.summary().additional_properties;
    assert_eq!(s["removed-position-delete-files"], "25");
    assert_eq!(s["added-position-delete-files"], "4");
    assert_eq!(s["removed-position-deletes"], (6 * 24 + 2).to_string());
    assert_eq!(s["added-position-deletes"], (23 * 6).to_string());
    assert_eq!(s["total-position-deletes"], (23 * 6).to_string());
    assert_eq!(s["cryo.operation"], "rewrite_position_deletes");
    assert_eq!(read_rows(&after).await, rows, "the same rows are deleted");

    let live = live_files(&after).await.unwrap();
    assert_eq!(
        per_day(&live).values().copied().collect::<Vec<_>>(),
        [1, 1, 1, 1]
    );
    let data: BTreeSet<String> = data_files(&after).await.into_iter().collect();
    for f in position_deletes(&live) {
        // Sorted by (file_path, pos), naming live data files only, Iceberg's field ids.
        let rows = delete_rows(f.file.file_path());
        assert!(rows.windows(2).all(|w| w[0] < w[1]), "sorted and distinct");
        assert!(rows.iter().all(|(p, _)| data.contains(p) && p != &lone));
        assert_eq!(rows.len() as u64, f.file.record_count());
        // The highest data sequence number of the files replaced, not the new snapshot's.
        assert!(f.sequence_number.unwrap() < snap.sequence_number());
        assert_eq!(f.file_sequence_number, Some(snap.sequence_number()));
    }
    let day1 = position_deletes(&live)
        .into_iter()
        .find(|f| f.file.file_path().contains("ts_day=2026-01-02"))
        .unwrap();
    assert_eq!(day1.sequence_number, Some(max_seq));

    // Nothing left to combine.
    let again = rewrite_position_deletes(&catalog, &id, &RewritePositionDeletesOptions::default())
        .await
        .unwrap();
    assert!(again.plan.is_empty() && again.snapshot_ids.is_empty());

    // Newer data in a partition is not touched by the combined (older) deletes.
    let head = append_rows(
        committer.as_ref(),
        &after,
        &[row_on(9000, 1), row_on(9001, 1)],
    )
    .await;
    let mut expected = rows.clone();
    expected.extend([row_on(9000, 1), row_on(9001, 1)]);
    expected.sort();
    assert_eq!(read_rows(&head).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_partitions_and_thresholds() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let (table, _) = table_with_deletes(&catalog).await;
    let id = table.id.clone();
    let rows = read_rows(&table).await;
    // One partition only.
    let one = RewritePositionDeletesOptions {
        partitions: Some(BTreeSet::from([PartitionRef {
            spec_id: 0,
            path: "ts_day=2026-01-03".into(),
        }])),
        ..RewritePositionDeletesOptions::default()
    };
    let out = rewrite_position_deletes(&catalog, &id, &one).await.unwrap();
    assert_eq!(out.committed_groups(), 1);
    assert_eq!(out.files_combined(), 6);
    let live = live_files(&catalog.load_table(&id).await.unwrap())
        .await
        .unwrap();
    assert_eq!(
        per_day(&live).values().copied().collect::<Vec<_>>(),
        [7, 6, 1, 6]
    );
    // Files above the small size are left, and partitions under min_input_files skipped.
    let strict = RewritePositionDeletesOptions {
        small_file_size_bytes: Some(1),
        ..RewritePositionDeletesOptions::default()
    };
    let none = rewrite_position_deletes(&catalog, &id, &strict)
        .await
        .unwrap();
    assert!(none.plan.is_empty());
    let many = RewritePositionDeletesOptions {
        min_input_files: 7,
        ..RewritePositionDeletesOptions::default()
    };
    let plan = RewritePositionDeletes::new(&catalog, id.clone())
        .with_options(many)
        .dry_run(true)
        .execute()
        .await
        .unwrap()
        .plan;
    assert_eq!(plan.groups.len(), 1, "only day 0 has 7 small files");
    assert_eq!(plan.skipped.len(), 3, "{:?}", plan.skipped);
    assert!(plan.skipped[0].reason.contains("min_input_files"));
    // A quiet period: right after the writes every partition is left alone, saying why; an
    // hour later the plan is the one without it.
    let quiet = RewritePositionDeletesOptions {
        quiet_period_ms: Some(600_000),
        ..RewritePositionDeletesOptions::default()
    };
    let dry = |options: RewritePositionDeletesOptions, now_ms: i64| {
        RewritePositionDeletes::new(&catalog, id.clone())
            .with_options(options)
            .with_clock(std::sync::Arc::new(cryo_core::clock::FixedClock(now_ms)))
            .dry_run(true)
            .execute()
    };
    let now = chrono::Utc::now().timestamp_millis();
    let hot = dry(quiet.clone(), now).await.unwrap().plan;
    assert!(hot.groups.is_empty(), "{:?}", hot.groups);
    assert!(!hot.skipped.is_empty());
    assert!(
        hot.skipped
            .iter()
            .all(|s| s.reason.starts_with("quiet_period:"))
    );
    let later = dry(quiet, now + 3_600_000).await.unwrap().plan;
    let unquiet = dry(RewritePositionDeletesOptions::default(), now)
        .await
        .unwrap()
        .plan;
    assert_eq!(later.groups, unquiet.groups);
    assert!(!later.groups.is_empty());
    let bad = RewritePositionDeletesOptions {
        min_input_files: 1,
        ..RewritePositionDeletesOptions::default()
    };
    assert!(matches!(
        rewrite_position_deletes(&catalog, &id, &bad).await,
        Err(Error::Validation { .. })
    ));
    assert_eq!(
        read_rows(&catalog.load_table(&id).await.unwrap()).await,
        rows
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_retry_or_conflict_per_partition() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let (table, _) = table_with_deletes(&catalog).await;
    let id = table.id.clone();
    let committer = catalog.committer().unwrap();
    let mut rows = read_rows(&table).await;

    // An append between the rewrite and its commit: retried over, every group commits.
    let prepared = RewritePositionDeletes::new(&catalog, id.clone())
        .prepare()
        .await
        .unwrap();
    assert_eq!(prepared.written_files().len(), 4);
    let extra = [row_on(7000, 0), row_on(7001, 3)];
    append_rows(committer.as_ref(), &table, &extra).await;
    rows.extend(extra.iter().cloned());
    rows.sort();
    let out = prepared.commit().await.unwrap();
    assert_eq!(out.committed_groups(), 4, "{:?}", out.groups);
    assert!(out.groups.iter().all(|g| g.retries == 1));
    let after = catalog.load_table(&id).await.unwrap();
    assert_eq!(read_rows(&after).await, rows);

    // New small deletes in every day, then a rewrite prepared; meanwhile a compaction of day 2
    // rewrites the data files its rows name (and removes the delete files): that group
    // conflicts and its new file is deleted; the other days commit.
    // The original files (10 rows each), not the one-row appends.
    let data: Vec<String> = live_files(&after)
        .await
        .unwrap()
        .into_iter()
        .filter(|f| f.file.content_type() == DataContentType::Data && f.file.record_count() == 10)
        .map(|f| f.file.file_path().to_string())
        .collect();
    let mut head = after;
    for d in 0..2_i64 {
        let deletes: Vec<(String, Vec<i64>)> =
            data.iter().map(|f| (f.clone(), vec![8 + d])).collect();
        head = commit_deletes(committer.as_ref(), &head, &deletes).await;
    }
    let rows = read_rows(&head).await;
    let prepared = RewritePositionDeletes::new(&catalog, id.clone())
        .prepare()
        .await
        .unwrap();
    let written = prepared.written_files();
    let day2_file = written
        .iter()
        .find(|p| p.contains("ts_day=2026-01-03"))
        .unwrap()
        .clone();
    let compacted = compact(
        &catalog,
        &id,
        &CompactOptions {
            partitions: Some(BTreeSet::from([PartitionRef {
                spec_id: 0,
                path: "ts_day=2026-01-03".into(),
            }])),
            min_input_files: 1,
            ..CompactOptions::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(compacted.committed_groups(), 1);
    let out = prepared.commit().await.unwrap();
    assert_eq!(out.conflicted_groups(), 1, "{:?}", out.groups);
    assert_eq!(out.committed_groups(), 3);
    let conflicted = out
        .groups
        .iter()
        .find(|g| matches!(g.status, DeleteGroupStatus::Conflicted { .. }))
        .unwrap();
    assert_eq!(conflicted.partition.path, "ts_day=2026-01-03");
    assert!(
        !std::path::Path::new(day2_file.trim_start_matches("file://")).exists(),
        "the conflicted group's file is deleted"
    );
    for p in written.iter().filter(|p| **p != day2_file) {
        assert!(std::path::Path::new(p.trim_start_matches("file://")).exists());
    }
    assert_eq!(
        read_rows(&catalog.load_table(&id).await.unwrap()).await,
        rows
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn spark_merge_on_read_fixture_dry_run() {
    let m = fixtures();
    let catalog = Catalog::connect(fixture_catalog(&m, "fixtures"))
        .await
        .unwrap();
    let id = TableId::parse("spark.orders_mor").unwrap();
    let table = catalog.load_table(&id).await.unwrap();
    let entry = &m["tables"]["fixtures.spark.orders_mor"];
    let out = RewritePositionDeletes::new(&catalog, id.clone())
        .dry_run(true)
        .execute()
        .await
        .unwrap();
    assert_eq!(
        out.plan.position_delete_files,
        entry["position_delete_files"].as_u64().unwrap()
    );
    eprintln!(
        "spark.orders_mor: {} position-delete files, {} to combine in {} groups, {} dangling",
        out.plan.position_delete_files,
        out.plan.files_combined(),
        out.plan.groups.len(),
        out.plan.files_dangling()
    );
    // Spark's DELETE, UPDATE and MERGE each left a small delete file per month touched.
    assert!(out.plan.files_combined() >= 2, "{:?}", out.plan);
    for g in &out.plan.groups {
        let max = g.combined.iter().map(|f| f.data_sequence_number).max();
        assert_eq!(g.data_sequence_number, max);
    }
    assert_eq!(
        catalog.load_table(&id).await.unwrap().metadata_location,
        table.metadata_location,
        "the shared fixture is untouched"
    );
}
