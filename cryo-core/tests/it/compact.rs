//! The compaction engine: plans from metadata, rewrites with deletes applied, rows fingerprinted
//! before and after every rewrite.
//!
//! "Before" is what upstream's reader returns for a group's files with their deletes (its own
//! delete handling, independent of Cryo's); "after" is the rows of the new files. Fixture tables
//! are rewritten into a temporary `write.data.path`, so the shared fixtures never change.

use std::collections::{BTreeSet, HashSet};
use std::path::Path;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_row::{RowConverter, SortField};
use cryo_core::compact::{
    CompactOptions, CompactionPlan, DeleteKind, PartitionRef, RewrittenGroup, cleanup_group,
    plan_compaction, rewrite_group,
};
use cryo_core::plan::RewriteStrategy;
use cryo_core::{Catalog, Error, LoadedTable, TableId};
use futures::TryStreamExt;
use iceberg::arrow::ArrowReaderBuilder;
use iceberg::scan::{FileScanTask, FileScanTaskStream};
use iceberg::spec::{DataFile, DataFileFormat, TableMetadataBuilder};
use sha2::{Digest, Sha256};

use crate::common::{fixture_catalog, fixtures};

/// Order-independent fingerprint: row count and SHA-256 over the sorted row encodings.
pub fn fingerprint(batches: &[RecordBatch]) -> (usize, String) {
    let Some(first) = batches.first() else {
        return (0, String::new());
    };
    let fields: Vec<SortField> = first
        .schema()
        .fields()
        .iter()
        .map(|f| SortField::new(f.data_type().clone()))
        .collect();
    let converter = RowConverter::new(fields).unwrap();
    let mut digests: Vec<[u8; 32]> = Vec::new();
    for b in batches {
        let rows = converter.convert_columns(b.columns()).unwrap();
        for r in &rows {
            digests.push(Sha256::digest(r.as_ref()).into());
        }
    }
    digests.sort_unstable();
    let mut h = Sha256::new();
    for d in &digests {
        h.update(d);
    }
    (digests.len(), format!("{:x}", h.finalize()))
}

/// The table with new data files going to `dir` (metadata untouched, nothing committed).
pub fn relocated(table: &LoadedTable, dir: &Path) -> LoadedTable {
    let md = table.metadata.as_ref().clone();
    let mut props = md.properties().clone();
    props.insert(
        "write.data.path".into(),
        format!("file://{}/data", dir.display()),
    );
    let md = TableMetadataBuilder::new_from_metadata(md, None)
        .set_properties(props)
        .unwrap()
        .build()
        .unwrap()
        .metadata;
    LoadedTable {
        metadata: Arc::new(md),
        ..table.clone()
    }
}

/// Upstream's rows (deletes applied by upstream) of the live data files in `paths`.
async fn upstream_rows(table: &LoadedTable, paths: &HashSet<String>) -> Vec<RecordBatch> {
    let t = table.to_iceberg().unwrap();
    let scan = t.scan().select_all().build().unwrap();
    let tasks: Vec<FileScanTask> = scan
        .plan_files()
        .await
        .unwrap()
        .try_filter(|t| futures::future::ready(paths.contains(t.data_file_path())))
        .try_collect()
        .await
        .unwrap();
    assert_eq!(tasks.len(), paths.len(), "every group file is live");
    read_tasks(table, tasks).await
}

async fn read_tasks(table: &LoadedTable, tasks: Vec<FileScanTask>) -> Vec<RecordBatch> {
    let reader = ArrowReaderBuilder::new(
        table.file_io.clone(),
        iceberg::Runtime::try_current().unwrap(),
    )
    .build();
    let stream: FileScanTaskStream = Box::pin(futures::stream::iter(tasks.into_iter().map(Ok)));
    reader
        .read(stream)
        .unwrap()
        .stream()
        .try_collect()
        .await
        .unwrap()
}

/// Rows of new data files, read by upstream in the current schema.
async fn file_rows(table: &LoadedTable, files: &[DataFile]) -> Vec<RecordBatch> {
    let schema = Arc::clone(table.metadata.current_schema());
    let ids: Vec<i32> = schema.as_struct().fields().iter().map(|f| f.id).collect();
    let tasks = files
        .iter()
        .map(|f| {
            FileScanTask::builder()
                .with_file_size_in_bytes(f.file_size_in_bytes())
                .with_start(0)
                .with_length(0)
                .with_data_file_path(f.file_path().to_string())
                .with_data_file_format(DataFileFormat::Parquet)
                .with_schema(Arc::clone(&schema))
                .with_project_field_ids(ids.clone())
                .with_case_sensitive(true)
                .build()
        })
        .collect();
    read_tasks(table, tasks).await
}

/// Rewrite every group of `plan`; check fingerprints group by group; clean up. Returns the
/// rewritten groups (files already deleted).
async fn rewrite_and_check(
    table: &LoadedTable,
    plan: &CompactionPlan,
    options: &CompactOptions,
) -> Vec<RewrittenGroup> {
    let mut out = Vec::new();
    for group in &plan.groups {
        let paths: HashSet<String> = group.data_files.iter().map(|f| f.path.clone()).collect();
        let before = fingerprint(&upstream_rows(table, &paths).await);
        let rewritten = rewrite_group(table, plan, group, options).await.unwrap();
        rewritten.check_rows().unwrap();
        let after = fingerprint(&file_rows(table, &rewritten.new_files).await);
        assert_eq!(before, after, "group {} of {}", group.id, plan.table);
        assert_eq!(rewritten.rows_written as usize, after.0);
        let default_fields = table.metadata.default_partition_spec().fields().len();
        for f in &rewritten.new_files {
            assert_eq!(f.partition().fields().len(), default_fields);
            assert!(f.record_count() > 0);
        }
        cleanup_group(table, &rewritten).await.unwrap();
        for p in &rewritten.written_paths {
            assert!(
                table.storage.head(p).await.unwrap().is_none(),
                "{p} deleted"
            );
        }
        out.push(rewritten);
    }
    out
}

async fn fixture_table(name: &str) -> (LoadedTable, serde_json::Value) {
    let manifest = fixtures();
    let entry = manifest["tables"][name].clone();
    assert!(
        !entry.is_null(),
        "fixture {name} missing: rerun tests/fixtures/make_fixtures.py"
    );
    let catalog_name = entry["catalog"].as_str().unwrap();
    let catalog = Catalog::connect(fixture_catalog(&manifest, catalog_name))
        .await
        .unwrap();
    let id = TableId::parse(entry["identifier"].as_str().unwrap()).unwrap();
    (catalog.load_table(&id).await.unwrap(), entry)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn pyiceberg_spec_and_schema_evolution() {
    let (table, entry) = fixture_table("fixtures.pyiceberg.events").await;
    let dir = tempfile::tempdir().unwrap();
    let table = relocated(&table, dir.path());
    // Every file is small (512 MiB target): each is planned or skipped for min_input_files.
    let defaults = plan_compaction(&table, &CompactOptions::default())
        .await
        .unwrap();
    let skipped: u64 = defaults.skipped.iter().map(|s| s.files).sum();
    assert_eq!(
        defaults.data_files() as u64 + skipped,
        entry["data_files"].as_u64().unwrap()
    );
    let options = CompactOptions {
        min_input_files: 1,
        ..CompactOptions::default()
    };
    let plan = plan_compaction(&table, &options).await.unwrap();
    assert_eq!(
        plan.data_files() as u64,
        entry["data_files"].as_u64().unwrap()
    );
    assert!(
        plan.groups
            .iter()
            .any(|g| g.reasons.contains(&"old_spec".to_string()))
    );
    // Serde round trip: a dry run is this value.
    let json = serde_json::to_string(&plan).unwrap();
    let back: CompactionPlan = serde_json::from_str(&json).unwrap();
    assert_eq!(back, plan);
    let groups = rewrite_and_check(&table, &plan, &options).await;
    let written: u64 = groups.iter().map(|g| g.rows_written).sum();
    assert_eq!(
        written,
        entry["row_count"].as_u64().unwrap(),
        "every live row once"
    );
    // Rows of an older spec fan out into several partitions of the current one; small output
    // stays one file per output partition (writers are not closed early for memory).
    for g in &groups {
        let partitions: HashSet<String> = g
            .new_files
            .iter()
            .map(|f| format!("{:?}", f.partition()))
            .collect();
        assert_eq!(g.new_files.len(), partitions.len(), "group {}", g.group_id);
    }
    // Old-spec rows were re-partitioned into the current spec (user_bucket added).
    assert!(
        groups
            .iter()
            .all(|g| g.codec == "zstd(3)" && g.codec_defaulted)
    );
    // Nothing written outside the temporary data path.
    for g in &groups {
        for p in &g.written_paths {
            assert!(
                p.starts_with(&format!("file://{}", dir.path().display())),
                "{p}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn spark_position_deletes() {
    let (table, entry) = fixture_table("fixtures.spark.orders_mor").await;
    let dir = tempfile::tempdir().unwrap();
    let table = relocated(&table, dir.path());
    let options = CompactOptions {
        min_input_files: 1,
        ..CompactOptions::default()
    };
    let plan = plan_compaction(&table, &options).await.unwrap();
    let groups = rewrite_and_check(&table, &plan, &options).await;
    let deleted: u64 = groups.iter().map(|g| g.rows_deleted.position).sum();
    assert!(deleted > 0, "merge-on-read deletes were applied");
    assert_eq!(
        groups.iter().map(|g| g.rows_deleted.equality).sum::<u64>(),
        0
    );
    let written: u64 = groups.iter().map(|g| g.rows_written).sum();
    assert_eq!(written, entry["row_count"].as_u64().unwrap());
    // Every data file is rewritten, so every position delete file goes with its group.
    let removable: usize = plan.removable_delete_files();
    let totals = plan.totals();
    assert_eq!(
        totals.data_files as u64,
        entry["data_files"].as_u64().unwrap()
    );
    assert_eq!(
        totals.delete_files as u64,
        entry["position_delete_files"].as_u64().unwrap()
    );
    assert_eq!(
        removable as u64,
        entry["position_delete_files"].as_u64().unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn spark_equality_deletes_respect_sequence_numbers() {
    let (table, entry) = fixture_table("fixtures.spark.upserts_eq").await;
    let dir = tempfile::tempdir().unwrap();
    let table = relocated(&table, dir.path());
    let options = CompactOptions {
        min_input_files: 1,
        ..CompactOptions::default()
    };
    let plan = plan_compaction(&table, &options).await.unwrap();
    assert_eq!(plan.groups.len(), 1, "unpartitioned: one group");
    let group = &plan.groups[0];
    // The first delete file applies to the first two appends only; re-inserted keys survive.
    let eq: Vec<_> = group
        .delete_files
        .iter()
        .filter(|d| d.kind == DeleteKind::Equality)
        .collect();
    assert_eq!(eq.len(), 2);
    let applied: Vec<usize> = group.data_files.iter().map(|f| f.deletes.len()).collect();
    assert!(applied.contains(&0) && applied.contains(&2), "{applied:?}");
    let groups = rewrite_and_check(&table, &plan, &options).await;
    let g = &groups[0];
    assert!(g.rows_deleted.equality > 0);
    // DuckDB's count (the fixture manifest) agrees with Cryo's.
    assert_eq!(g.rows_written, entry["row_count"].as_u64().unwrap());
    let mut removed = g.removed_delete_files.clone();
    removed.sort();
    assert_eq!(
        removed.len(),
        2,
        "both delete files apply to nothing afterwards"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn hadoop_and_v1_tables() {
    for name in ["hadoop.db.hadoop_tbl", "fixtures.spark.legacy_v1"] {
        let (table, entry) = fixture_table(name).await;
        let dir = tempfile::tempdir().unwrap();
        let table = relocated(&table, dir.path());
        let options = CompactOptions {
            min_input_files: 1,
            ..CompactOptions::default()
        };
        let plan = plan_compaction(&table, &options).await.unwrap();
        assert!(!plan.groups.is_empty(), "{name}");
        let groups = rewrite_and_check(&table, &plan, &options).await;
        let written: u64 = groups.iter().map(|g| g.rows_written).sum();
        assert_eq!(written, entry["row_count"].as_u64().unwrap(), "{name}");
    }
}

/// A Spark v3 table whose merge-on-read DELETE wrote deletion vectors (Puffin): upstream cannot
/// read it, so the expected rows come from the fixture (Spark's count, and ids that are
/// multiples of 7 deleted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn spark_v3_deletion_vectors() {
    let (table, entry) = fixture_table("fixtures_v3.spark.events_dv").await;
    let dir = tempfile::tempdir().unwrap();
    let table = relocated(&table, dir.path());
    let options = CompactOptions {
        min_input_files: 1,
        ..CompactOptions::default()
    };
    let plan = plan_compaction(&table, &options).await.unwrap();
    assert!(
        plan.groups
            .iter()
            .flat_map(|g| &g.delete_files)
            .any(|d| d.kind == DeleteKind::DeletionVector)
    );
    let mut written = 0;
    let mut ids = Vec::new();
    for group in &plan.groups {
        let g = rewrite_group(&table, &plan, group, &options).await.unwrap();
        g.check_rows().unwrap();
        assert_eq!(g.rows_deleted.position, 0, "a DV replaces position deletes");
        written += g.rows_written;
        for b in file_rows(&table, &g.new_files).await {
            let col = b
                .column_by_name("id")
                .unwrap()
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .clone();
            ids.extend(col.iter().flatten());
        }
        assert!(g.rows_deleted.deletion_vector > 0 || group.delete_files.is_empty());
        cleanup_group(&table, &g).await.unwrap();
    }
    assert_eq!(written, entry["row_count"].as_u64().unwrap());
    assert!(ids.iter().all(|i| i % 7 != 0), "deleted rows stay deleted");
    let distinct: BTreeSet<i64> = ids.iter().copied().collect();
    assert_eq!(distinct.len(), ids.len(), "no row twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn partition_filter_from_a_plan_chunk_and_thresholds() {
    let (table, _) = fixture_table("fixtures.pyiceberg.events").await;
    let all = plan_compaction(&table, &CompactOptions::default())
        .await
        .unwrap();
    let first = all.groups[0].partition.clone();
    let only = CompactOptions {
        partitions: Some(BTreeSet::from([first.clone()])),
        ..CompactOptions::default()
    };
    let plan = plan_compaction(&table, &only).await.unwrap();
    assert!(plan.groups.iter().all(|g| g.partition == first));
    assert!(!plan.groups.is_empty());
    // A partition path that does not exist selects nothing.
    let none = CompactOptions {
        partitions: Some(BTreeSet::from([PartitionRef {
            spec_id: 0,
            path: "nope=1".into(),
        }])),
        ..CompactOptions::default()
    };
    assert!(
        plan_compaction(&table, &none)
            .await
            .unwrap()
            .groups
            .is_empty()
    );
    // Files already at the target are left alone; a tiny target makes every file "large".
    let huge_min = CompactOptions {
        min_input_files: 1000,
        ..CompactOptions::default()
    };
    let plan = plan_compaction(&table, &huge_min).await.unwrap();
    assert!(
        plan.groups
            .iter()
            .all(|g| g.reasons.contains(&"old_spec".to_string())),
        "only old-spec files are forced in when min_input_files is out of reach"
    );
    assert!(!plan.skipped.is_empty());
    // Groups never exceed max_file_group_size_bytes unless a single file does.
    let small_groups = CompactOptions {
        max_file_group_size_bytes: 20_000,
        ..CompactOptions::default()
    };
    let plan = plan_compaction(&table, &small_groups).await.unwrap();
    for g in &plan.groups {
        assert!(g.input_bytes <= 20_000 || g.data_files.len() == 1);
    }
    let ids: Vec<u32> = plan.groups.iter().map(|g| g.id).collect();
    assert_eq!(ids, (0..plan.groups.len() as u32).collect::<Vec<_>>());
    // A stale plan is refused.
    let mut other = relocated(&table, Path::new("/tmp"));
    let md = TableMetadataBuilder::new_from_metadata(other.metadata.as_ref().clone(), None)
        .assign_uuid(uuid::Uuid::new_v4())
        .build()
        .unwrap()
        .metadata;
    other.metadata = Arc::new(md);
    let err = rewrite_group(&other, &plan, &plan.groups[0], &small_groups)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Validation { .. }), "{err}");
}

/// The demo lake lives in a temp dir: compact, commit `replace` snapshots with the commit
/// layer, read the whole table back with upstream's reader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_lake_compacts_and_reads_back() {
    use cryo_core::commit::SnapshotProducer;
    use cryo_core::demo::{DemoOptions, create_demo_lake};
    let dir = tempfile::tempdir().unwrap();
    let lake = create_demo_lake(dir.path(), &DemoOptions::default())
        .await
        .unwrap();
    for name in [
        "lake.orders",
        "lake.customers",
        "lake.metrics_v1",
        "lake.clickstream",
    ] {
        let id = TableId::parse(name).unwrap();
        let table = lake.catalog.load_table(&id).await.unwrap();
        let all: HashSet<String> = cryo_core::commit::live_files(&table)
            .await
            .unwrap()
            .into_iter()
            .filter(|f| f.file.content_type() == iceberg::spec::DataContentType::Data)
            .map(|f| f.file.file_path().to_string())
            .collect();
        let before = fingerprint(&upstream_rows(&table, &all).await);
        let options = CompactOptions {
            min_input_files: 1,
            ..CompactOptions::default()
        };
        let plan = plan_compaction(&table, &options).await.unwrap();
        assert!(!plan.groups.is_empty(), "{name}: {:?}", plan.skipped);
        let mut current = table.clone();
        for group in &plan.groups {
            let g = rewrite_group(&table, &plan, group, &options).await.unwrap();
            current = SnapshotProducer::replace(&current)
                .delete_data_files(g.removed_data_files.clone())
                .remove_delete_files(g.removed_delete_files.clone())
                .add_data_files(g.new_files.clone())
                .with_data_sequence_number(plan.base_sequence_number)
                .commit(lake.catalog.committer().unwrap().as_ref())
                .await
                .unwrap()
                .table;
        }
        let reloaded = lake.catalog.load_table(&id).await.unwrap();
        let live: HashSet<String> = cryo_core::commit::live_files(&reloaded)
            .await
            .unwrap()
            .into_iter()
            .filter(|f| f.file.content_type() == iceberg::spec::DataContentType::Data)
            .map(|f| f.file.file_path().to_string())
            .collect();
        let after = fingerprint(&upstream_rows(&reloaded, &live).await);
        assert_eq!(before, after, "{name}");
        assert!(live.len() <= all.len(), "{name}: no more files");
    }
}

/// A quiet period leaves alone the partitions changed within it (by the snapshot that gave
/// their files' data sequence numbers), and says so; long after the last change it plans
/// exactly what no quiet period plans.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_period_skips_recently_changed_partitions() {
    use cryo_core::compact::plan_compaction_at;
    use cryo_core::demo::{DemoOptions, create_demo_lake};
    let dir = tempfile::tempdir().unwrap();
    let lake = create_demo_lake(dir.path(), &DemoOptions::default())
        .await
        .unwrap();
    let table = lake
        .catalog
        .load_table(&TableId::parse("lake.orders").unwrap())
        .await
        .unwrap();
    let mut snaps: Vec<(i64, i64)> = table
        .metadata
        .snapshots()
        .map(|s| (s.sequence_number(), s.timestamp_ms()))
        .collect();
    snaps.sort_unstable();
    assert!(snaps.windows(2).all(|w| w[0].1 < w[1].1), "{snaps:?}");
    let (oldest, newest) = (snaps[0].1, snaps[snaps.len() - 1].1);
    let now = newest + 1000;
    // Every data file a candidate, so every partition with data is a group of the baseline.
    let plain = CompactOptions {
        min_input_files: 1,
        rewrite_all: true,
        ..CompactOptions::default()
    };
    let quiet = |ms: i64| CompactOptions {
        quiet_period_ms: Some(u64::try_from(ms).unwrap()),
        ..plain.clone()
    };
    let quiet_skips = |plan: &CompactionPlan| -> BTreeSet<PartitionRef> {
        plan.skipped
            .iter()
            .filter(|s| s.reason.starts_with("quiet_period:"))
            .map(|s| s.partition.clone())
            .collect()
    };
    let baseline = plan_compaction_at(&table, &plain, now).await.unwrap();
    assert!(baseline.groups.len() > 2);

    // A quiet period reaching past the first commit: every partition is hot.
    let all_hot = plan_compaction_at(&table, &quiet(now - oldest + 1), now)
        .await
        .unwrap();
    assert!(all_hot.groups.is_empty(), "{:?}", all_hot.groups);
    assert_eq!(all_hot.removable_delete_files(), 0);
    let skipped = quiet_skips(&all_hot);
    assert!(
        baseline
            .groups
            .iter()
            .all(|g| skipped.contains(&g.partition))
    );

    // Since the middle snapshot: the partitions with a file (data or delete) of a later
    // sequence number are hot, the others plan as before.
    let (mid_seq, mid_ts) = snaps[snaps.len() / 2];
    let split = plan_compaction_at(&table, &quiet(now - mid_ts), now)
        .await
        .unwrap();
    let hot = quiet_skips(&split);
    for g in &baseline.groups {
        let changed = g
            .data_files
            .iter()
            .map(|f| f.data_sequence_number)
            .chain(g.delete_files.iter().map(|d| d.data_sequence_number))
            .max()
            .unwrap();
        if changed > mid_seq {
            assert!(
                hot.contains(&g.partition),
                "{:?} changed at {changed}",
                g.partition
            );
        }
    }
    assert!(
        !hot.is_empty() && hot.len() < baseline.groups.len(),
        "{hot:?}"
    );
    let cold: Vec<_> = baseline
        .groups
        .iter()
        .filter(|g| !hot.contains(&g.partition))
        .map(|g| (&g.partition, &g.data_files))
        .collect();
    let planned: Vec<_> = split
        .groups
        .iter()
        .map(|g| (&g.partition, &g.data_files))
        .collect();
    assert_eq!(planned, cold);

    // Long after the last commit nothing is hot: the same plan as without a quiet period.
    let later = newest + 2 * 3_600_000;
    let calm = plan_compaction_at(&table, &quiet(3_600_000), later)
        .await
        .unwrap();
    assert_eq!(calm.groups, baseline.groups);
    assert!(quiet_skips(&calm).is_empty());
}

/// A failing rewrite leaves nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_rewrite_deletes_its_files() {
    use cryo_core::demo::{DemoOptions, create_demo_lake};
    let dir = tempfile::tempdir().unwrap();
    let lake = create_demo_lake(dir.path(), &DemoOptions::default())
        .await
        .unwrap();
    let table = lake
        .catalog
        .load_table(&TableId::parse("lake.clickstream").unwrap())
        .await
        .unwrap();
    let options = CompactOptions {
        min_input_files: 2,
        ..CompactOptions::default()
    };
    let plan = plan_compaction(&table, &options).await.unwrap();
    let mut group = plan.groups[0].clone();
    // Break the last file of the group: the first ones are read and written before it fails.
    let victim = group.data_files.last().unwrap().path.clone();
    table
        .storage
        .write_all(&victim, bytes::Bytes::from_static(b"not parquet"))
        .await
        .unwrap();
    group.data_files.last_mut().unwrap().size_bytes = 11;
    let mut plan2 = plan.clone();
    plan2.groups[0] = group.clone();
    let before: HashSet<String> = list_data(&table).await;
    let err = rewrite_group(&table, &plan2, &group, &options).await;
    assert!(err.is_err());
    assert_eq!(list_data(&table).await, before, "no new files left behind");

    // A file that is gone is the storage's answer, not a bug in Cryo.
    let mut group = plan.groups[0].clone();
    let gone = group.data_files[0].path.clone();
    std::fs::remove_file(gone.strip_prefix("file://").unwrap_or(&gone)).unwrap();
    group.data_files.truncate(1);
    let mut plan3 = plan.clone();
    plan3.groups[0] = group.clone();
    let err = rewrite_group(&table, &plan3, &group, &options)
        .await
        .err()
        .unwrap();
    assert_ne!(err.code(), "internal", "{err}");
    assert!(
        err.to_string().contains(gone.rsplit('/').next().unwrap()),
        "{err}"
    );
    assert_eq!(
        list_data(&table).await.len(),
        before.len() - 1,
        "only the removed file is gone"
    );
}

async fn list_data(table: &LoadedTable) -> HashSet<String> {
    table
        .storage
        .list(&format!("{}/data", table.metadata.location()))
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.location)
        .collect()
}

/// A table generated for memory tests: `rows` rows of (id, key, payload), unpartitioned.
async fn big_table(dir: &Path, rows: i64) -> LoadedTable {
    use cryo_core::commit::{NewTable, SnapshotProducer, write_data_files};
    use cryo_core::{CatalogConfig, Namespace};
    use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};
    let mut config = CatalogConfig::local("mem", dir);
    config
        .properties
        .insert("init_catalog_tables".into(), "true".into());
    let catalog = Catalog::connect(config).await.unwrap();
    catalog
        .create_namespace(&Namespace::new(["db"]))
        .await
        .unwrap();
    let schema = Schema::builder()
        .with_fields(vec![
            NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::optional(2, "key", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::optional(3, "payload", Type::Primitive(PrimitiveType::String)).into(),
        ])
        .build()
        .unwrap();
    let id = TableId::parse("db.big").unwrap();
    let mut table = catalog
        .create_table(&id, NewTable::new(schema))
        .await
        .unwrap();
    let arrow = Arc::new(arrow_schema::Schema::new(vec![
        arrow_schema::Field::new("id", arrow_schema::DataType::Int64, false),
        arrow_schema::Field::new("key", arrow_schema::DataType::Int64, true),
        arrow_schema::Field::new("payload", arrow_schema::DataType::Utf8, true),
    ]));
    let per_file = rows / 8;
    for f in 0..8 {
        let ids: Vec<i64> = (f * per_file..(f + 1) * per_file).collect();
        // A pseudo-random key so that sorting moves rows across files.
        let keys: Vec<i64> = ids
            .iter()
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 7) % 1_000_003)
            .collect();
        let payload: Vec<String> = ids
            .iter()
            .map(|i| format!("payload-{i:012}-{}", i % 97))
            .collect();
        let batch = RecordBatch::try_new(
            Arc::clone(&arrow),
            vec![
                Arc::new(Int64Array::from(ids)) as ArrayRef,
                Arc::new(Int64Array::from(keys)),
                Arc::new(StringArray::from(payload)),
            ],
        )
        .unwrap();
        let written = write_data_files(&table, [batch]).await.unwrap();
        table = SnapshotProducer::new(&table)
            .add_data_files(written.files)
            .commit(catalog.committer().unwrap().as_ref())
            .await
            .unwrap()
            .table;
    }
    table
}

/// Bin-pack under the smallest budget: the group (~60 MB of rows in memory form) streams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binpack_group_larger_than_the_memory_budget() {
    let dir = tempfile::tempdir().unwrap();
    let table = big_table(dir.path(), 1_200_000).await;
    let options = CompactOptions {
        memory_budget_bytes: cryo_core::compact::MIN_MEMORY_BUDGET_BYTES,
        ..CompactOptions::default()
    };
    let plan = plan_compaction(&table, &options).await.unwrap();
    assert_eq!(plan.groups.len(), 1);
    let groups = rewrite_and_check(&table, &plan, &options).await;
    assert_eq!(groups[0].rows_written, 1_200_000);
    assert_eq!(
        groups[0].row_group_bytes,
        4 << 20,
        "row group capped by the budget"
    );
}

#[cfg(not(feature = "datafusion"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sort_without_the_feature_plans_but_refuses_to_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let table = big_table(dir.path(), 8_000).await;
    let options = CompactOptions {
        strategy: RewriteStrategy::Sort {
            columns: vec!["key".into()],
        },
        ..CompactOptions::default()
    };
    let plan = plan_compaction(&table, &options).await.unwrap();
    let err = rewrite_group(&table, &plan, &plan.groups[0], &options)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");

    // Names are taken exactly: a padded name is not the column it resembles.
    for (strategy, bad) in [
        (
            RewriteStrategy::Sort {
                columns: vec![" key".into()],
            },
            " key",
        ),
        (
            RewriteStrategy::Sort {
                columns: vec!["key DESC ".into()],
            },
            "key DESC ",
        ),
        (
            RewriteStrategy::ZOrder {
                columns: vec!["key ".into()],
            },
            "key ",
        ),
    ] {
        let options = CompactOptions {
            strategy,
            ..CompactOptions::default()
        };
        let err = plan_compaction(&table, &options).await.unwrap_err();
        assert!(matches!(err, Error::Validation { .. }), "{err}");
        assert!(err.to_string().contains(&format!("`{bad}`")), "{err}");
    }
    let options = CompactOptions {
        strategy: RewriteStrategy::Sort {
            columns: vec!["key desc nulls last".into()],
        },
        ..CompactOptions::default()
    };
    assert!(plan_compaction(&table, &options).await.is_ok());
}

#[cfg(feature = "datafusion")]
mod ordered {
    use super::*;

    fn column_i64(batches: &[RecordBatch], name: &str) -> Vec<i64> {
        batches
            .iter()
            .flat_map(|b| {
                b.column_by_name(name)
                    .unwrap()
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .iter()
                    .map(|v| v.unwrap_or(i64::MIN))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// A sorted rewrite larger than its memory budget spills, and every file is sorted.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sort_spills_and_orders_each_file() {
        let dir = tempfile::tempdir().unwrap();
        let table = big_table(dir.path(), 1_200_000).await;
        let options = CompactOptions {
            strategy: RewriteStrategy::Sort {
                columns: vec!["key DESC".into()],
            },
            memory_budget_bytes: cryo_core::compact::MIN_MEMORY_BUDGET_BYTES,
            target_file_size_bytes: Some(8 << 20),
            ..CompactOptions::default()
        };
        let plan = plan_compaction(&table, &options).await.unwrap();
        let g = rewrite_group(&table, &plan, &plan.groups[0], &options)
            .await
            .unwrap();
        g.check_rows().unwrap();
        assert!(g.spilled_bytes > 0, "the sort spilled");
        let mut all = Vec::new();
        for f in &g.new_files {
            let rows = file_rows(&table, std::slice::from_ref(f)).await;
            let keys = column_i64(&rows, "key");
            assert!(
                keys.windows(2).all(|w| w[0] >= w[1]),
                "{} sorted",
                f.file_path()
            );
            all.extend(rows);
        }
        let paths: HashSet<String> = plan.groups[0]
            .data_files
            .iter()
            .map(|f| f.path.clone())
            .collect();
        assert_eq!(
            fingerprint(&upstream_rows(&table, &paths).await),
            fingerprint(&all)
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn zorder_keeps_rows_and_clusters() {
        let dir = tempfile::tempdir().unwrap();
        let table = big_table(dir.path(), 200_000).await;
        let options = CompactOptions {
            strategy: RewriteStrategy::ZOrder {
                columns: vec!["key".into(), "id".into()],
            },
            target_file_size_bytes: Some(1 << 20),
            ..CompactOptions::default()
        };
        let plan = plan_compaction(&table, &options).await.unwrap();
        let groups = rewrite_and_check(&table, &plan, &options).await;
        assert!(groups[0].new_files.len() > 1);
        // Each output file covers a narrower key range than the whole table.
        let ranges: Vec<i64> = groups[0]
            .new_files
            .iter()
            .map(|f| {
                let lo = f.lower_bounds().get(&2).unwrap().literal().clone();
                let hi = f.upper_bounds().get(&2).unwrap().literal().clone();
                match (lo, hi) {
                    (
                        iceberg::spec::PrimitiveLiteral::Long(a),
                        iceberg::spec::PrimitiveLiteral::Long(b),
                    ) => b - a,
                    _ => panic!("long bounds"),
                }
            })
            .collect();
        assert!(ranges.iter().any(|r| *r < 900_000), "{ranges:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
    async fn pyiceberg_sorted_by_column() {
        let (table, _) = fixture_table("fixtures.pyiceberg.events").await;
        let dir = tempfile::tempdir().unwrap();
        let table = relocated(&table, dir.path());
        let options = CompactOptions {
            strategy: RewriteStrategy::Sort {
                columns: vec!["user_id".into()],
            },
            ..CompactOptions::default()
        };
        let plan = plan_compaction(&table, &options).await.unwrap();
        let groups = rewrite_and_check(&table, &plan, &options).await;
        assert!(!groups.is_empty());
    }
}

#[test]
fn options_from_a_plan_step() {
    use cryo_core::ops::Operation;
    use cryo_core::plan::{Chunk, PartitionTarget, PlannedStep, StepParams};
    let chunk = Chunk {
        index: 0,
        whole_table: false,
        partitions: vec![PartitionTarget {
            spec_id: 1,
            path: "ts_day=2026-03-01/category=click".into(),
            predicate: vec![],
            files: 3,
            bytes: 100,
            score: 1.0,
        }],
        input_files: 3,
        input_bytes: 100,
        expected_output_files: 1,
    };
    let step = PlannedStep {
        operation: Operation::RewriteDataFiles,
        params: StepParams::RewriteDataFiles {
            strategy: RewriteStrategy::BinPack,
            target_file_size_bytes: 1000,
            min_file_size_bytes: 750,
            max_file_size_bytes: 1800,
            min_input_files: 2,
            delete_file_threshold: 1,
        },
        chunks: vec![chunk.clone()],
        because: vec![],
        saving_usd_month: 0.0,
    };
    let o = CompactOptions::from_step(&step, &chunk).unwrap();
    assert_eq!(o.target_file_size_bytes, Some(1000));
    assert_eq!(
        o.partitions,
        Some(BTreeSet::from([PartitionRef {
            spec_id: 1,
            path: "ts_day=2026-03-01/category=click".into()
        }]))
    );
    let mut other = chunk.clone();
    other.index = 9;
    assert!(CompactOptions::from_step(&step, &other).is_err());

    // Equality deletes are converted by rewriting every file of the chunk's partitions.
    let convert = PlannedStep {
        operation: Operation::ConvertEqualityDeletes,
        params: StepParams::ConvertEqualityDeletes {
            method: cryo_core::plan::EqualityDeleteMethod::Rewrite,
            why: String::new(),
        },
        chunks: vec![chunk.clone()],
        because: vec![],
        saving_usd_month: 0.0,
    };
    let o = CompactOptions::from_step(&convert, &chunk).unwrap();
    assert!(o.rewrite_all && o.min_input_files == 1 && o.delete_file_threshold == 1);
    assert_eq!(o.strategy, RewriteStrategy::BinPack);
    assert_eq!(o.partitions.unwrap().len(), 1);
    // Other operations are not compactions.
    let expire = PlannedStep {
        operation: Operation::ExpireSnapshots,
        params: StepParams::ExpireSnapshots {
            older_than_ms: 0,
            retain_last: 1,
            retention_ms: 0,
        },
        chunks: vec![chunk.clone()],
        because: vec![],
        saving_usd_month: 0.0,
    };
    assert!(CompactOptions::from_step(&expire, &chunk).is_err());
}

/// Demo-lake tables compacted by Cryo and committed group by group as `replace` snapshots (new
/// files at the base snapshot's data sequence number, applied delete files removed), left in `target/cryo-compacted` with their metadata before and after, for
/// `tests/py/test_compact_peers.py` to read back with `PyIceberg` and `DuckDB`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compacted_tables_for_peers() {
    use cryo_core::commit::SnapshotProducer;
    use cryo_core::demo::{DemoOptions, create_demo_lake};
    let dir = crate::common::repo_root().join("target/cryo-compacted");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let dir = std::fs::canonicalize(&dir).unwrap();
    let lake = create_demo_lake(&dir.join("lake"), &DemoOptions::default())
        .await
        .unwrap();
    let mut tables = Vec::new();
    for name in [
        "lake.orders",
        "lake.customers",
        "lake.metrics_v1",
        "lake.clickstream",
    ] {
        let id = TableId::parse(name).unwrap();
        let before = lake.catalog.load_table(&id).await.unwrap();
        let options = CompactOptions {
            min_input_files: 1,
            ..CompactOptions::default()
        };
        let plan = plan_compaction(&before, &options).await.unwrap();
        let mut current = before.clone();
        let (mut read, mut deleted, mut written) = (0, 0, 0);
        for group in &plan.groups {
            let g = rewrite_group(&before, &plan, group, &options)
                .await
                .unwrap();
            g.check_rows().unwrap();
            read += g.rows_read;
            deleted += g.rows_deleted.total();
            written += g.rows_written;
            current = SnapshotProducer::replace(&current)
                .delete_data_files(g.removed_data_files.clone())
                .remove_delete_files(g.removed_delete_files.clone())
                .add_data_files(g.new_files.clone())
                .with_data_sequence_number(plan.base_sequence_number)
                .commit(lake.catalog.committer().unwrap().as_ref())
                .await
                .unwrap()
                .table;
        }
        tables.push(serde_json::json!({
            "identifier": name,
            "before_metadata": before.metadata_location,
            "before_snapshot_id": before.metadata.current_snapshot_id(),
            "after_metadata": current.metadata_location,
            "after_snapshot_id": current.metadata.current_snapshot_id(),
            "groups": plan.groups.len(),
            "data_files_before": plan.data_files(),
            "rows_read": read,
            "rows_deleted": deleted,
            "rows_written": written,
            "delete_files_after": cryo_core::commit::live_files(&current)
                .await
                .unwrap()
                .iter()
                .filter(|f| f.file.content_type() != iceberg::spec::DataContentType::Data)
                .count(),
        }));
    }
    let catalog = serde_json::to_value(&lake.manifest.catalog).unwrap();
    std::fs::write(
        dir.join("compacted.json"),
        serde_json::to_string_pretty(&serde_json::json!({"catalog": catalog, "tables": tables}))
            .unwrap(),
    )
    .unwrap();
}

/// The planner's `rewrite_data_files` chunks name partitions exactly as `plan_compaction`
/// groups them: each chunk selects its own groups, and the chunks together cover the plan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn planner_chunks_select_compaction_groups() {
    use cryo_core::grade::{GradeOptions, grade};
    use cryo_core::ops::Operation;
    use cryo_core::plan::{PlanOptions, TableControl, plan_table};
    use cryo_core::scan::{ScanOptions, scan_loaded};
    let mut checked = 0;
    for name in ["fixtures.pyiceberg.events", "fixtures.spark.orders_mor"] {
        let (table, _) = fixture_table(name).await;
        let now = 1_900_000_000_000;
        let scan = scan_loaded(&table, "fixtures", &ScanOptions::default(), now)
            .await
            .unwrap();
        let report = grade(&scan, &GradeOptions::default(), now).unwrap();
        let plan = plan_table(
            &scan,
            &report,
            &PlanOptions::default(),
            &TableControl::default(),
            now,
        )
        .unwrap();
        let Some(step) = plan
            .steps
            .iter()
            .find(|s| s.operation == Operation::RewriteDataFiles)
        else {
            continue;
        };
        for chunk in &step.chunks {
            checked += 1;
            let options = CompactOptions::from_step(step, chunk).unwrap();
            let compaction = plan_compaction(&table, &options).await.unwrap();
            if let Some(parts) = &options.partitions {
                assert!(
                    compaction
                        .groups
                        .iter()
                        .all(|g| parts.contains(&g.partition)),
                    "{name}: chunk {}",
                    chunk.index
                );
                let found: BTreeSet<&PartitionRef> =
                    compaction.groups.iter().map(|g| &g.partition).collect();
                let skipped: BTreeSet<&PartitionRef> =
                    compaction.skipped.iter().map(|s| &s.partition).collect();
                for p in parts {
                    assert!(
                        found.contains(p) || skipped.contains(p),
                        "{name}: chunk partition {p:?} is neither planned nor skipped"
                    );
                }
            }
        }
    }
    assert!(checked > 0, "the planner asked for rewrite_data_files");
}
