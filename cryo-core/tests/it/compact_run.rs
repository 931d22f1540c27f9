//! `compact()`: plan → rewrite → commit as `replace` snapshots, under concurrent writers.

use std::collections::BTreeSet;

use cryo_core::commit::RewriteConflictKind;
use cryo_core::compact::{CompactOptions, Compaction, GroupStatus, RunOptions, compact};
use cryo_core::{Catalog, TableId};

use crate::replace::{
    DAY0, DAY1, append, by_day, data_files_in, delete_ids, delete_positions, expected, read_rows,
    schema, sql_catalog,
};

/// A table with two day partitions, each with `files` small files of 5 rows.
async fn fragmented(catalog: &Catalog, files: i64) -> (TableId, BTreeSet<i64>) {
    let id = TableId::parse("db.frag").unwrap();
    let mut table = catalog
        .create_table(
            &id,
            cryo_core::commit::NewTable::new(schema())
                .with_partition_spec(by_day())
                .with_property("write.target-file-size-bytes", "1048576"),
        )
        .await
        .unwrap();
    let committer = catalog.committer().unwrap();
    let mut ids = BTreeSet::new();
    for f in 0..files {
        let batch: Vec<i64> = (f * 10..f * 10 + 10).collect();
        ids.extend(batch.iter().copied());
        table = append(committer.as_ref(), &table, batch).await;
    }
    (id, ids)
}

#[tokio::test]
async fn compacts_commits_replace_and_keeps_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let (id, ids) = fragmented(&catalog, 12).await;
    let before = catalog.load_table(&id).await.unwrap();
    assert_eq!(read_rows(&before).await, expected(&ids));

    // The dry run names exactly what the real run rewrites, and changes nothing.
    let dry = Compaction::new(&catalog, id.clone())
        .dry_run(true)
        .execute()
        .await
        .unwrap();
    assert!(dry.dry_run);
    assert_eq!(dry.groups.len(), 2);
    assert!(dry.groups.iter().all(|g| g.status == GroupStatus::DryRun));
    let unchanged = catalog.load_table(&id).await.unwrap();
    assert_eq!(unchanged.metadata_location, before.metadata_location);

    let out = compact(&catalog, &id, &CompactOptions::default())
        .await
        .unwrap();
    assert_eq!(out.committed_groups(), 2, "{:?}", out.groups);
    assert_eq!(out.files_in(), 24);
    assert_eq!(out.files_out(), 2);
    assert_eq!(out.rows_deleted(), 0);
    for (d, r) in dry.groups.iter().zip(&out.groups) {
        assert_eq!(
            (d.group_id, d.data_files_in, d.bytes_in),
            (r.group_id, r.data_files_in, r.bytes_in)
        );
    }
    // Partial progress: each group commits on its own (at most `max_commits` snapshots).
    assert_eq!(out.snapshot_ids.len(), 2);
    let after = catalog.load_table(&id).await.unwrap();
    assert_eq!(
        after.metadata.current_snapshot_id(),
        out.snapshot_ids.last().copied()
    );
    assert_eq!(
        after
            .metadata
            .current_snapshot()
            .unwrap()
            .summary()
            .operation
            .as_str(),
        "replace"
    );
    assert_eq!(read_rows(&after).await, expected(&ids));
    assert_eq!(
        data_files_in(&after, DAY0).await.len() + data_files_in(&after, DAY1).await.len(),
        2
    );
    // New files carry S0's data sequence number.
    let s0_seq = before
        .metadata
        .current_snapshot()
        .unwrap()
        .sequence_number();
    assert_eq!(out.plan.base_sequence_number, s0_seq);

    // A second run finds nothing to do.
    let again = compact(&catalog, &id, &CompactOptions::default())
        .await
        .unwrap();
    assert!(again.groups.is_empty() && again.snapshot_ids.is_empty());
}

/// Scan, grade and compact a fragmented table on each object store: the rewrite reads and
/// writes through the store, commits, and every row is there after. (GCS: see
/// `tests/py/test_storage_gcs_azure.py`; the emulator serves no object writes through the API
/// `object_store` writes with.)
#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn scans_and_compacts_on_s3_and_azure() {
    use cryo_core::clock::SystemClock;
    use cryo_core::grade::{GradeOptions, grade};
    use cryo_core::scan::{ScanOptions, scan_table};
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
        let (id, ids) = fragmented(&catalog, 6).await;
        let before = catalog.load_table(&id).await.unwrap();
        assert!(before.metadata.location().starts_with(&prefix), "{name}");
        let scan = scan_table(&catalog, &id, &ScanOptions::default(), &SystemClock)
            .await
            .unwrap();
        assert_eq!(scan.data_files.count, 12, "{name}");
        assert_eq!(scan.data_files.small_count, 12, "{name}");
        let report = grade(&scan, &GradeOptions::default(), scan.scanned_at_ms).unwrap();
        assert!(
            report.findings.iter().any(|f| f.remedy
                == cryo_core::grade::Remedy::Operation {
                    operation: cryo_core::ops::Operation::RewriteDataFiles
                }),
            "{name}: {report:?}"
        );

        let out = compact(&catalog, &id, &CompactOptions::default())
            .await
            .unwrap();
        assert_eq!(out.committed_groups(), 2, "{name}: {:?}", out.groups);
        assert_eq!((out.files_in(), out.files_out()), (12, 2), "{name}");
        let after = catalog.load_table(&id).await.unwrap();
        assert_eq!(read_rows(&after).await, expected(&ids), "{name}");
        assert_eq!(data_files_in(&after, "").await.len(), 2, "{name}");
    }
}

#[tokio::test]
async fn max_commits_bounds_the_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let (id, ids) = fragmented(&catalog, 10).await;
    let out = Compaction::new(&catalog, id.clone())
        .with_run_options(RunOptions {
            max_commits: 1,
            ..RunOptions::default()
        })
        .execute()
        .await
        .unwrap();
    assert_eq!(out.committed_groups(), 2);
    assert_eq!(
        out.snapshot_ids.len(),
        1,
        "max_commits 1: every group in one replace"
    );
    let after = catalog.load_table(&id).await.unwrap();
    assert_eq!(read_rows(&after).await, expected(&ids));
}

#[tokio::test]
async fn a_concurrent_append_is_retried_over() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let (id, mut ids) = fragmented(&catalog, 8).await;
    let rewritten = Compaction::new(&catalog, id.clone())
        .rewrite()
        .await
        .unwrap();
    assert_eq!(rewritten.groups().len(), 2);

    // Another writer appends and deletes by equality between Cryo's plan and its commit.
    let committer = catalog.committer().unwrap();
    let head = catalog.load_table(&id).await.unwrap();
    let head = append(committer.as_ref(), &head, 1000..1005).await;
    delete_ids(committer.as_ref(), &head, &[3, 1001]).await;
    ids.extend(1000..1005);
    ids.remove(&3);
    ids.remove(&1001);

    let out = rewritten.commit().await.unwrap();
    assert_eq!(out.committed_groups(), 2, "{:?}", out.groups);
    // The first group's commit found the head moved and retried; the second staged on the new head.
    assert_eq!(out.retries(), 1, "{:?}", out.groups);
    let after = catalog.load_table(&id).await.unwrap();
    // The equality delete committed after S0 still hides row 3 in the rewritten file.
    assert_eq!(read_rows(&after).await, expected(&ids));
}

#[tokio::test]
async fn a_new_delete_on_a_replaced_file_aborts_only_its_group() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let (id, mut ids) = fragmented(&catalog, 8).await;
    let rewritten = Compaction::new(&catalog, id.clone())
        .rewrite()
        .await
        .unwrap();
    let day0_group = rewritten
        .groups()
        .iter()
        .find(|g| g.partition.path == DAY0)
        .unwrap();
    let day0_new: Vec<String> = day0_group.written_paths.clone();

    // Merge-on-read delete of the first row of a day-0 file Cryo is replacing.
    let committer = catalog.committer().unwrap();
    let head = catalog.load_table(&id).await.unwrap();
    let victim = data_files_in(&head, DAY0).await.remove(0);
    delete_positions(committer.as_ref(), &head, victim.file_path(), vec![0]).await;

    let out = rewritten.commit().await.unwrap();
    assert_eq!(out.committed_groups(), 1, "{:?}", out.groups);
    assert_eq!(out.conflicted_groups(), 1);
    let conflicted = out
        .groups
        .iter()
        .find(|g| matches!(g.status, GroupStatus::Conflicted { .. }))
        .unwrap();
    assert_eq!(conflicted.partition.path, DAY0);
    let GroupStatus::Conflicted {
        conflicts,
        files_deleted,
    } = &conflicted.status
    else {
        unreachable!()
    };
    assert_eq!(conflicts[0].kind, RewriteConflictKind::NewPositionDelete);
    assert_eq!(conflicts[0].data_file, victim.file_path());
    assert!(files_deleted, "no commit had an unknown outcome");
    // The aborted group's new files are gone right away.
    for p in &day0_new {
        assert!(
            !std::path::Path::new(p.trim_start_matches("file://")).exists(),
            "{p} left behind"
        );
    }
    let after = catalog.load_table(&id).await.unwrap();
    // The deleted row stays deleted; nothing else is lost.
    let rows = read_rows(&after).await;
    assert_eq!(rows.len(), ids.len() - 1);
    let kept: BTreeSet<i64> = rows.iter().map(|r| r.0).collect();
    let gone: Vec<i64> = ids.difference(&kept).copied().collect();
    assert_eq!(gone.len(), 1);
    ids.remove(&gone[0]);
    assert_eq!(rows, expected(&ids));
    // Day 0 keeps its small files (the group aborted); day 1 was compacted.
    assert_eq!(data_files_in(&after, DAY1).await.len(), 1);
    assert_eq!(data_files_in(&after, DAY0).await.len(), 8);
}

#[tokio::test]
async fn a_locked_catalog_fails_cleanly_and_stops_the_run() {
    use cryo_core::commit::RetryPolicy;
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let (id, ids) = fragmented(&catalog, 8).await;
    let before = catalog.load_table(&id).await.unwrap();
    let rewritten = Compaction::new(&catalog, id.clone())
        .with_run_options(RunOptions {
            retry: Some(RetryPolicy {
                max_attempts: 2,
                min_backoff_ms: 10,
                max_backoff_ms: 20,
                ..RetryPolicy::default()
            }),
            ..RunOptions::default()
        })
        .rewrite()
        .await
        .unwrap();
    let written: Vec<String> = rewritten
        .groups()
        .iter()
        .flat_map(|g| g.written_paths.clone())
        .collect();
    assert!(!written.is_empty());

    // Another process holds a read transaction on the catalog (as Spark's JdbcCatalog does).
    let db = dir.path().join("catalog.db");
    let mut holder = std::process::Command::new("python3")
        .arg("-c")
        .arg("import sqlite3,sys,time; c=sqlite3.connect(sys.argv[1], isolation_level=None); c.execute('BEGIN'); c.execute('SELECT * FROM iceberg_tables').fetchall(); print('locked', flush=True); time.sleep(120)")
        .arg(&db)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "locked");

    let out = rewritten.commit().await.unwrap();
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert_eq!(out.committed_groups(), 0);
    assert_eq!(out.failed_groups(), 2, "{:?}", out.groups);
    for g in &out.groups {
        let GroupStatus::Failed { files_deleted, .. } = &g.status else {
            panic!("{g:?}")
        };
        assert!(
            *files_deleted,
            "the lock refused the write: nothing committed, files can go"
        );
    }
    for p in &written {
        assert!(
            !std::path::Path::new(p.trim_start_matches("file://")).exists(),
            "{p} left behind"
        );
    }
    let after = catalog.load_table(&id).await.unwrap();
    assert_eq!(after.metadata_location, before.metadata_location);
    assert_eq!(read_rows(&after).await, expected(&ids));
    // Once the lock is gone, compaction works.
    let out = compact(&catalog, &id, &CompactOptions::default())
        .await
        .unwrap();
    assert_eq!(out.committed_groups(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines)] // Reason: three operations under one fence, each checked in turn.
async fn a_commit_fence_keeps_commits_out_of_writer_operations() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use cryo_core::govern::CommitFence;

    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let (id, mut ids) = fragmented(&catalog, 8).await;
    let mut fence = CommitFence::new(dir.path().join("fence"));
    let run = |fence: &CommitFence| RunOptions {
        commit_fence: Some(fence.clone()),
        ..RunOptions::default()
    };

    // A writer holding the fence for longer than the commit waits: nothing commits, the
    // rewritten files are deleted, and the run says why.
    fence.wait_ms = 200;
    let before = catalog.load_table(&id).await.unwrap();
    let files_before = data_files_in(&before, DAY0).await.len();
    let held = fence.enter_writer(catalog.name(), &id).unwrap();
    let out = Compaction::new(&catalog, id.clone())
        .with_run_options(run(&fence))
        .execute()
        .await
        .unwrap();
    assert_eq!(out.committed_groups(), 0, "{:?}", out.groups);
    let mut waited = 0;
    for g in &out.groups {
        let GroupStatus::Failed {
            code,
            message,
            files_deleted,
        } = &g.status
        else {
            panic!("{:?}", g.status)
        };
        // The first batch waited for the fence; the run then stopped committing.
        if code == "commit_conflict" {
            assert!(message.contains("held the commit fence"), "{message}");
            waited += 1;
        } else {
            assert!(message.contains("not attempted"), "{message}");
            assert!(message.contains("commit fence"), "{message}");
        }
        assert!(files_deleted);
    }
    assert_eq!(waited, 1, "one wait, then the run stops committing");
    let unchanged = catalog.load_table(&id).await.unwrap();
    assert_eq!(unchanged.metadata_location, before.metadata_location);
    assert_eq!(data_files_in(&unchanged, DAY0).await.len(), files_before);
    // Manifest rewrites and expiries commit under the fence as well.
    let err = cryo_core::maintain::RewriteManifests::new(&catalog, id.clone())
        .with_options(cryo_core::maintain::RewriteManifestsOptions {
            commit_fence: Some(fence.clone()),
            ..Default::default()
        })
        .execute()
        .await
        .unwrap_err();
    assert_eq!(err.code(), "commit_conflict", "{err}");
    assert!(err.to_string().contains("commit fence"), "{err}");
    let err = cryo_core::maintain::ExpireSnapshots::new(&catalog, id.clone())
        .with_options(cryo_core::maintain::ExpireOptions {
            dry_run: false,
            retain_last: Some(1),
            older_than_ms: Some(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_millis() as i64,
            ),
            commit_fence: Some(fence.clone()),
            ..Default::default()
        })
        .execute()
        .await
        .unwrap_err();
    assert_eq!(err.code(), "commit_conflict", "{err}");
    let unchanged = catalog.load_table(&id).await.unwrap();
    assert_eq!(unchanged.metadata_location, before.metadata_location);
    drop(held);

    // A writer operation (read, then a merge-on-read delete of a file Cryo is replacing) that
    // holds the fence: Cryo's commit waits for it, then its validation sees the delete and
    // aborts that group alone. The writer never meets Cryo's commit.
    fence.wait_ms = 30_000;
    let rewritten = Compaction::new(&catalog, id.clone())
        .with_run_options(run(&fence))
        .rewrite()
        .await
        .unwrap();
    let writer = fence.enter_writer(catalog.name(), &id).unwrap();
    let committed = Arc::new(AtomicBool::new(false));
    let commit = {
        let committed = Arc::clone(&committed);
        async move {
            let out = rewritten.commit().await.unwrap();
            committed.store(true, Ordering::SeqCst);
            out
        }
    };
    let write = async {
        let writer_commits = catalog.committer().unwrap();
        let base = catalog.load_table(&id).await.unwrap();
        let victim = data_files_in(&base, DAY0).await.remove(0);
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(
            !committed.load(Ordering::SeqCst),
            "Cryo committed inside a writer operation"
        );
        delete_positions(writer_commits.as_ref(), &base, victim.file_path(), vec![0]).await;
        drop(writer);
    };
    let (out, ()) = tokio::join!(commit, write);
    assert_eq!(out.committed_groups(), 1, "{:?}", out.groups);
    assert_eq!(out.conflicted_groups(), 1, "{:?}", out.groups);
    let after = catalog.load_table(&id).await.unwrap();
    let rows = read_rows(&after).await;
    assert_eq!(rows.len(), ids.len() - 1, "the writer's delete holds");
    let kept: BTreeSet<i64> = rows.iter().map(|r| r.0).collect();
    ids.retain(|i| kept.contains(i));
    assert_eq!(rows, expected(&ids));
}

/// Under the fence, a writer already inside it when Cryo arrives commits first, and each of
/// Cryo's commits (compaction, manifest rewrite, expiry with file clean-up) is then staged on
/// the writer's snapshot: it commits at its first attempt, on top of the writer's commit,
/// instead of failing on it and starting over (which starved expiries and manifest rewrites
/// when writers commit every second or two).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines)] // Reason: three operations under one fence, each checked in turn.
async fn under_the_fence_cryo_commits_on_the_snapshot_of_the_writer_inside() {
    use std::sync::Arc;

    use cryo_core::govern::CommitFence;
    use cryo_core::maintain::{
        ExpireOptions, ExpireSnapshots, RewriteManifests, RewriteManifestsOptions,
        RewriteManifestsStatus,
    };

    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let (id, mut ids) = fragmented(&catalog, 8).await;
    let mut fence = CommitFence::new(dir.path().join("fence"));
    fence.wait_ms = 30_000;
    let parent_of = |t: &cryo_core::LoadedTable, s: i64| {
        t.metadata
            .snapshot_by_id(s)
            .and_then(|s| s.parent_snapshot_id())
    };

    // Compaction.
    let rewritten = Compaction::new(&catalog, id.clone())
        .with_run_options(RunOptions {
            commit_fence: Some(fence.clone()),
            ..RunOptions::default()
        })
        .rewrite()
        .await
        .unwrap();
    let (out, written) = beside_a_writer(
        &catalog,
        &id,
        &fence,
        1000..1005,
        Box::pin(async { rewritten.commit().await.unwrap() }),
    )
    .await;
    ids.extend(1000..1005);
    assert_eq!(out.committed_groups(), 2, "{:?}", out.groups);
    assert_eq!(out.retries(), 0, "staged on the writer's snapshot at once");
    let t = catalog.load_table(&id).await.unwrap();
    assert_eq!(parent_of(&t, out.snapshot_ids[0]), Some(written));
    assert_eq!(read_rows(&t).await, expected(&ids));

    // Manifest rewrite.
    let manifests = RewriteManifests::new(&catalog, id.clone())
        .with_options(RewriteManifestsOptions {
            commit_fence: Some(fence.clone()),
            ..Default::default()
        })
        .execute();
    let (out, written) = beside_a_writer(
        &catalog,
        &id,
        &fence,
        2000..2005,
        Box::pin(async { manifests.await.unwrap() }),
    )
    .await;
    ids.extend(2000..2005);
    assert_eq!(out.status, RewriteManifestsStatus::Committed, "{out:?}");
    assert_eq!(out.retries, 0);
    // Among the manifests it replaces is the one compaction left with deleted entries only,
    // which the writer's append dropped: nothing of it is carried, so its absence is no conflict.
    assert!(
        out.plan
            .groups
            .iter()
            .flat_map(|g| &g.replaced)
            .any(|m| m.live_entries == 0)
    );
    let t = catalog.load_table(&id).await.unwrap();
    assert_eq!(parent_of(&t, out.snapshot_ids[0]), Some(written));
    assert_eq!(read_rows(&t).await, expected(&ids));

    // Expiry of every snapshot but the head, deleting what becomes unreachable: the writer's
    // snapshot becomes the head while Cryo waits, so it is kept, and the files it lists too.
    let now = chrono::Utc::now().timestamp_millis();
    let expiry = ExpireSnapshots::new(&catalog, id.clone())
        .with_options(ExpireOptions {
            dry_run: false,
            retain_last: Some(1),
            older_than_ms: Some(now + 60_000),
            commit_fence: Some(fence.clone()),
            ..Default::default()
        })
        .with_clock(Arc::new(cryo_core::clock::FixedClock(now + 120_000)))
        .execute();
    let (out, written) = beside_a_writer(
        &catalog,
        &id,
        &fence,
        3000..3005,
        Box::pin(async { expiry.await.unwrap() }),
    )
    .await;
    ids.extend(3000..3005);
    assert_eq!(out.retries, 0, "{out:?}");
    assert_eq!(out.retained_snapshot_ids, vec![written]);
    assert!(out.failures.is_empty(), "{:?}", out.failures);
    // The 16 small files compaction replaced are unreachable now; every live file is kept.
    assert_eq!(out.deleted.data.files, 16, "{:?}", out.deleted);
    let t = catalog.load_table(&id).await.unwrap();
    assert_eq!(t.metadata.snapshots().count(), 1);
    assert_eq!(read_rows(&t).await, expected(&ids));
}

/// `cryo` beside a writer operation inside `fence` that appends `rows` after a pause in which
/// Cryo reaches its commit and waits: Cryo's result and the writer's snapshot id. Cryo must not
/// finish inside the writer's operation.
async fn beside_a_writer<T>(
    catalog: &Catalog,
    id: &TableId,
    fence: &cryo_core::govern::CommitFence,
    rows: std::ops::Range<i64>,
    cryo: impl Future<Output = T>,
) -> (T, i64) {
    use std::sync::atomic::{AtomicBool, Ordering};

    let guard = fence.enter_writer(catalog.name(), id).unwrap();
    let done = AtomicBool::new(false);
    let cryo = async {
        let out = cryo.await;
        done.store(true, Ordering::SeqCst);
        out
    };
    let write = async {
        let head = catalog.load_table(id).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        assert!(
            !done.load(Ordering::SeqCst),
            "Cryo committed inside a writer operation"
        );
        let t = append(catalog.committer().unwrap().as_ref(), &head, rows).await;
        drop(guard);
        t.metadata.current_snapshot_id().unwrap()
    };
    tokio::join!(cryo, write)
}
