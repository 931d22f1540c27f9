//! Equality deletes turned into position deletes (v2) and deletion vectors (v3): the data files
//! stay, the rows do not change, the equality delete files leave in a `replace` snapshot; a
//! concurrent append still commits, a concurrent rewrite of the data files read conflicts and
//! leaves nothing behind. Spark (both lines), `DuckDB` and `PyIceberg` read the results in
//! `tests/py/test_native_run_peers.py` and `tests/py/test_lineage_spark41.py`.

use std::collections::{BTreeMap, BTreeSet};

use cryo_core::commit::{LiveFile, NewTable, live_files};
use cryo_core::compact::{CompactOptions, CompactionOutcome, compact};
use cryo_core::demo::{DemoOptions, create_demo_lake};
use cryo_core::exec::MaintenanceRun;
use cryo_core::maintain::{ConvertEqualityDeletes, ConvertEqualityDeletesStatus};
use cryo_core::ops::Operation;
use cryo_core::plan::{EqualityDeleteMethod, PlanOptions, StepParams, plan_fleet};
use cryo_core::receipt::ReceiptStatus;
use cryo_core::{Catalog, LoadedTable, TableId};
use iceberg::spec::{DataContentType, DataFileFormat};

use crate::compact_lineage::{assert_lineage_kept, rows as lineage_rows, v3_appended, v3_table};
use crate::maintain_run::graded;
use crate::replace::{append, by_day, delete_ids, read_rows, schema, sql_catalog};

/// Live files by content: (data paths, equality delete files, position delete files).
async fn by_content(table: &LoadedTable) -> (BTreeSet<String>, Vec<LiveFile>, Vec<LiveFile>) {
    let mut data = BTreeSet::new();
    let (mut eq, mut pos) = (Vec::new(), Vec::new());
    for f in live_files(table).await.unwrap() {
        match f.file.content_type() {
            DataContentType::Data => {
                data.insert(f.file.file_path().to_string());
            }
            DataContentType::EqualityDeletes => eq.push(f),
            DataContentType::PositionDeletes => pos.push(f),
        }
    }
    (data, eq, pos)
}

/// The run's `convert_equality_deletes` receipt.
fn convert_receipt(run: &cryo_core::exec::MaintenanceOutcome) -> &cryo_core::receipt::Receipt {
    run.receipts
        .iter()
        .find(|r| r.operation == Some(Operation::ConvertEqualityDeletes))
        .unwrap()
}

/// Cryo's bin-pack of every data file (every delete applied).
async fn rewrite_everything(catalog: &Catalog, id: &TableId) -> CompactionOutcome {
    compact(
        catalog,
        id,
        &CompactOptions {
            rewrite_all: true,
            min_input_files: 1,
            ..CompactOptions::default()
        },
    )
    .await
    .unwrap()
}

/// A v2 table partitioned by day: six appends of ten rows, then equality deletes of four ids
/// (each in its own partition).
async fn v2_table(catalog: &Catalog) -> (TableId, LoadedTable) {
    let id = TableId::parse("db.upserts").unwrap();
    let mut table = catalog
        .create_table(&id, NewTable::new(schema()).with_partition_spec(by_day()))
        .await
        .unwrap();
    let committer = catalog.committer().unwrap();
    for f in 0..6 {
        table = append(committer.as_ref(), &table, f * 10..f * 10 + 10).await;
    }
    table = delete_ids(committer.as_ref(), &table, &[3, 14, 25, 52]).await;
    table = delete_ids(committer.as_ref(), &table, &[7, 40]).await;
    (id, table)
}

#[tokio::test]
async fn v2_equality_deletes_become_position_deletes_and_the_data_files_stay() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let (id, table) = v2_table(&catalog).await;
    let rows = read_rows(&table).await;
    assert_eq!(rows.len(), 54);
    let (data, eq, pos) = by_content(&table).await;
    assert_eq!(
        (eq.len(), pos.len()),
        (4, 0),
        "two commits, two partitions each"
    );

    // The dry run says what it would do and changes nothing.
    let dry = ConvertEqualityDeletes::new(&catalog, id.clone())
        .dry_run(true)
        .execute()
        .await
        .unwrap();
    assert_eq!(dry.status, ConvertEqualityDeletesStatus::DryRun);
    assert_eq!((dry.files_converted, dry.equality_delete_files), (4, 4));
    assert_eq!(
        dry.data_files_read, 12,
        "every data file is older than the deletes"
    );
    assert!(!dry.deletion_vectors);
    assert_eq!(
        catalog.load_table(&id).await.unwrap().metadata_location,
        table.metadata_location
    );

    let out = ConvertEqualityDeletes::new(&catalog, id.clone())
        .execute()
        .await
        .unwrap();
    let ConvertEqualityDeletesStatus::Committed { snapshot_id } = out.status else {
        panic!("{out:?}");
    };
    assert_eq!(out.positions, 6, "{out:?}");
    assert!(out.left.is_empty(), "{:?}", out.left);
    let after = catalog.load_table(&id).await.unwrap();
    let snapshot = after.metadata.current_snapshot().unwrap();
    assert_eq!(snapshot.snapshot_id(), snapshot_id);
    assert_eq!(snapshot.summary().operation.as_str(), "replace");
    let (data_after, eq_after, pos_after) = by_content(&after).await;
    assert_eq!(data_after, data, "the data files stay");
    assert!(eq_after.is_empty());
    assert_eq!(pos_after.len(), 2, "one position delete file per partition");
    assert_eq!(
        pos_after.iter().map(|f| f.file.record_count()).sum::<u64>(),
        6
    );
    assert!(
        pos_after
            .iter()
            .all(|f| f.file.file_format() == DataFileFormat::Parquet)
    );
    assert_eq!(read_rows(&after).await, rows, "the same rows");

    // Nothing left to convert.
    let again = ConvertEqualityDeletes::new(&catalog, id.clone())
        .execute()
        .await
        .unwrap();
    assert_eq!(again.status, ConvertEqualityDeletesStatus::Nothing);
    assert_eq!(again.equality_delete_files, 0);
}

#[tokio::test]
async fn a_concurrent_append_commits_and_a_concurrent_rewrite_conflicts() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let committer = catalog.committer().unwrap();
    let (id, table) = v2_table(&catalog).await;

    // An append between the read and the commit: its rows were never subject to the deletes.
    let prepared = ConvertEqualityDeletes::new(&catalog, id.clone())
        .prepare()
        .await
        .unwrap();
    let written = prepared.written_files();
    assert_eq!(written.len(), 2);
    let head = append(committer.as_ref(), &table, [3, 14, 100]).await;
    let expected = read_rows(&head).await;
    assert_eq!(
        expected.len(),
        57,
        "3 and 14 are back: appended after the deletes"
    );
    let out = prepared.commit().await.unwrap();
    assert!(
        matches!(out.status, ConvertEqualityDeletesStatus::Committed { .. }),
        "{out:?}"
    );
    assert_eq!(out.retries, 1);
    let after = catalog.load_table(&id).await.unwrap();
    assert_eq!(read_rows(&after).await, expected);
    assert!(by_content(&after).await.1.is_empty());

    // A rewrite of the data files read, committed first (it applies the deletes itself): the
    // conversion conflicts and deletes what it wrote; no row is lost or brought back.
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let (id, table) = v2_table(&catalog).await;
    let rows = read_rows(&table).await;
    let prepared = ConvertEqualityDeletes::new(&catalog, id.clone())
        .prepare()
        .await
        .unwrap();
    let written = prepared.written_files();
    let rewrite = rewrite_everything(&catalog, &id).await;
    assert!(rewrite.committed_groups() > 0);
    let out = prepared.commit().await.unwrap();
    let ConvertEqualityDeletesStatus::Conflicted {
        reason,
        files_deleted,
    } = &out.status
    else {
        panic!("{out:?}");
    };
    assert!(reason.contains("no longer live"), "{reason}");
    assert!(files_deleted, "no commit had an unknown outcome");
    assert!(out.snapshot_ids.is_empty());
    for p in &written {
        assert!(
            !std::path::Path::new(p.trim_start_matches("file://")).exists(),
            "{p} was left behind"
        );
    }
    assert_eq!(
        read_rows(&catalog.load_table(&id).await.unwrap()).await,
        rows
    );
}

#[tokio::test]
async fn v3_equality_deletes_become_deletion_vectors_and_lineage_holds() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let (id, table) = v3_table(&catalog).await;
    let before = lineage_rows(&table).await;
    let (data, ..) = by_content(&table).await;

    let out = ConvertEqualityDeletes::new(&catalog, id.clone())
        .execute()
        .await
        .unwrap();
    assert!(
        matches!(out.status, ConvertEqualityDeletesStatus::Committed { .. }),
        "{out:?}"
    );
    assert!(out.deletion_vectors);
    assert_eq!(out.positions, 4);
    let after = catalog.load_table(&id).await.unwrap();
    let (data_after, eq, vectors) = by_content(&after).await;
    assert_eq!(data_after, data);
    assert!(eq.is_empty());
    // One vector per data file hit, each an entry of its own in its partition's Puffin file.
    assert_eq!(vectors.len(), 4, "{vectors:?}");
    let mut referenced = BTreeSet::new();
    for v in &vectors {
        let f = &v.file;
        assert_eq!(f.file_format(), DataFileFormat::Puffin);
        assert_eq!(f.record_count(), 1);
        assert!(f.content_offset().is_some() && f.content_size_in_bytes().is_some());
        assert!(referenced.insert(f.referenced_data_file().unwrap()));
    }
    let puffins: BTreeSet<&str> = vectors.iter().map(|v| v.file.file_path()).collect();
    assert_eq!(puffins.len(), 2, "one Puffin file per partition");

    // Cryo's reader applies the vectors: a rewrite of everything leaves exactly the rows that
    // survived, each with the lineage it had.
    rewrite_everything(&catalog, &id).await;
    let rewritten = catalog.load_table(&id).await.unwrap();
    let (_, eq, deletes) = by_content(&rewritten).await;
    assert!(eq.is_empty() && deletes.is_empty(), "{deletes:?}");
    let survivors = lineage_rows(&rewritten).await;
    assert_eq!(survivors.rows.len(), 56);
    assert_lineage_kept(&rewritten, &before, &survivors);
}

/// The planner converts on a table that is not small and needs no compaction, and rewrites
/// where it is small; the native run does what the plan says.
#[tokio::test]
async fn the_plan_chooses_the_method_and_the_native_run_follows_it() {
    let dir = tempfile::tempdir().unwrap();
    let lake = create_demo_lake(dir.path(), &DemoOptions::default())
        .await
        .unwrap();
    let customers = TableId::parse("lake.customers").unwrap();
    let method = |plan: &cryo_core::plan::MaintenancePlan| {
        plan.tables
            .iter()
            .find(|t| t.table == customers)
            .and_then(|t| {
                t.steps
                    .iter()
                    .find(|s| s.operation == Operation::ConvertEqualityDeletes)
            })
            .map(|s| match &s.params {
                StepParams::ConvertEqualityDeletes { method, why } => (*method, why.clone()),
                p => panic!("{p:?}"),
            })
            .unwrap()
    };
    let g = graded(&lake.catalog).await;
    let now = g[0].0.scanned_at_ms;
    let plan = |options: &PlanOptions| {
        plan_fleet(lake.catalog.name(), &g, options, &BTreeMap::new(), now).unwrap()
    };
    let (m, why) = method(&plan(&PlanOptions::default()));
    assert_eq!(m, EqualityDeleteMethod::Rewrite);
    assert!(why.contains("small"), "{why}");
    // Were it a large table (nothing counts as small), its small files would still call for a
    // rewrite; with files that need no compaction, it converts.
    let (m, why) = method(&plan(&PlanOptions {
        small_table_bytes: 0,
        ..PlanOptions::default()
    }));
    assert_eq!(m, EqualityDeleteMethod::Rewrite);
    assert!(why.contains("need compacting too"), "{why}");
    let large = plan(&PlanOptions {
        small_table_bytes: 0,
        min_input_files: 1000,
        operations: Some(vec![Operation::ConvertEqualityDeletes]),
        ..PlanOptions::default()
    });
    let (m, why) = method(&large);
    assert_eq!(m, EqualityDeleteMethod::PositionDeletes, "{why}");
    assert!(why.contains("key columns"), "{why}");

    let table = lake.catalog.load_table(&customers).await.unwrap();
    let rows = crate::maintain_run::rows(&table).await;
    let (data, eq, _) = by_content(&table).await;
    assert_eq!(eq.len(), 14);
    let run = MaintenanceRun::new(&lake.catalog, &large)
        .dry_run(false)
        .execute()
        .await
        .unwrap();
    let r = convert_receipt(&run);
    assert_eq!(r.status, ReceiptStatus::Succeeded, "{r:?}");
    assert_eq!(r.details["method"], "position_deletes");
    assert_eq!(r.details["equality_delete_files_converted"], 14);
    assert!(r.details["why"].as_str().unwrap().contains("key columns"));
    let after = lake.catalog.load_table(&customers).await.unwrap();
    let (data_after, eq_after, pos_after) = by_content(&after).await;
    assert!(eq_after.is_empty());
    assert!(!pos_after.is_empty());
    assert_eq!(data_after, data, "no data file is rewritten");
    assert_eq!(crate::maintain_run::rows(&after).await, rows);
}

/// On v3, a data file that already has a deletion vector takes no second one: the conversion
/// leaves its partition, says why, and the native step rewrites that partition instead; no
/// equality delete stays.
#[tokio::test]
async fn v3_files_with_a_vector_are_left_to_the_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let (id, table) = v3_appended(&catalog, 4).await;
    let committer = catalog.committer().unwrap();
    // Deletes in day 1 (odd ids) become vectors; then deletes in both days.
    delete_ids(committer.as_ref(), &table, &[3]).await;
    ConvertEqualityDeletes::new(&catalog, id.clone())
        .execute()
        .await
        .unwrap();
    let table = delete_ids(committer.as_ref(), &table_now(&catalog, &id).await, &[5, 8]).await;
    let rows = lineage_rows(&table).await;
    assert_eq!(rows.rows.len(), 40, "every row of every data file");

    let dry = ConvertEqualityDeletes::new(&catalog, id.clone())
        .dry_run(true)
        .execute()
        .await
        .unwrap();
    assert_eq!(dry.left.len(), 1, "{:?}", dry.left);
    assert!(
        dry.left[0].reason.contains("deletion vector"),
        "{:?}",
        dry.left
    );
    assert_eq!(
        dry.files_converted, 1,
        "day 0's delete converts; day 1's stays"
    );

    // The plan's step, made to convert (the planner itself would rewrite here).
    let g = graded(&catalog).await;
    let mut plan = plan_fleet(
        catalog.name(),
        &g,
        &PlanOptions {
            small_table_bytes: 0,
            min_input_files: 1000,
            operations: Some(vec![Operation::ConvertEqualityDeletes]),
            ..PlanOptions::default()
        },
        &BTreeMap::new(),
        g[0].0.scanned_at_ms,
    )
    .unwrap();
    let step = &mut plan.tables[0].steps[0];
    let StepParams::ConvertEqualityDeletes { method, why } = &mut step.params else {
        panic!("{step:?}");
    };
    assert_eq!(*method, EqualityDeleteMethod::Rewrite);
    assert!(why.contains("deletion vectors"), "{why}");
    *method = EqualityDeleteMethod::PositionDeletes;
    plan.fingerprint = plan.compute_fingerprint().unwrap();
    let run = MaintenanceRun::new(&catalog, &plan)
        .dry_run(false)
        .execute()
        .await
        .unwrap();
    let r = convert_receipt(&run);
    assert_eq!(r.status, ReceiptStatus::Succeeded, "{r:?}");
    assert_eq!(r.details["equality_delete_files_converted"], 1, "{r:?}");
    assert_eq!(
        r.details["left_for_rewrite"].as_object().unwrap().len(),
        1,
        "{r:?}"
    );
    assert_eq!(r.details["rewrite"]["committed_groups"], 1, "{r:?}");
    let after = table_now(&catalog, &id).await;
    assert!(
        by_content(&after).await.1.is_empty(),
        "no equality delete stays"
    );
    // Day 1 was rewritten (its deletes applied), day 0 keeps its files and gains a vector.
    let (_, _, vectors) = by_content(&after).await;
    assert_eq!(vectors.len(), 1, "{vectors:?}");
    let survivors = lineage_rows(&after).await;
    assert_eq!(
        survivors.rows.len(),
        40 - 2,
        "day 1's rewrite drops ids 3 and 5"
    );
    assert_lineage_kept(&after, &rows, &survivors);
}

async fn table_now(catalog: &Catalog, id: &TableId) -> LoadedTable {
    catalog.load_table(id).await.unwrap()
}
