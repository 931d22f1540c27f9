//! `rewrite_manifests()`: many small, overlapping manifests (one per append) clustered by
//! partition into few, on format v1, v2 and v3; rows, files, snapshot ids and sequence numbers
//! unchanged; partition-filtered planning reads fewer manifests; concurrent commits.
#![allow(clippy::too_many_lines)] // Reason: each test walks one table history end to end.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use cryo_core::commit::{
    CatalogCommitter, LiveFile, NewTable, RetryPolicy, SnapshotProducer, live_files,
    write_data_files, write_position_deletes,
};
use cryo_core::io::PathKind;
use cryo_core::maintain::{
    ManifestKind, ReplaceReason, RewriteManifests, RewriteManifestsOptions, RewriteManifestsStatus,
    rewrite_manifests,
};
use cryo_core::{Catalog, Error, LoadedTable, TableId};
use futures::TryStreamExt;
use iceberg::expr::Reference;
use iceberg::spec::{
    DataContentType, Datum, FormatVersion, ManifestContentType, ManifestFile, ManifestList,
    ManifestStatus,
};

use crate::replace::{DAY_US, Row, T0_US, batch, by_day, read_rows, schema, sql_catalog};

/// A row on day `day` (0-based from 2026-01-01).
pub fn row_on(id: i64, day: i64) -> Row {
    (id, T0_US + day * DAY_US + id, Some(format!("n{id}")))
}

/// Append `rows` as one snapshot (one new manifest).
pub async fn append_rows(
    committer: &dyn CatalogCommitter,
    table: &LoadedTable,
    rows: &[Row],
) -> LoadedTable {
    let written = write_data_files(table, [batch(rows)]).await.unwrap();
    SnapshotProducer::new(table)
        .add_data_files(written.files)
        .commit(committer)
        .await
        .unwrap()
        .table
}

/// A table partitioned by day with `appends` appends, each with two rows on each of two days
/// far apart (so the manifests' partition ranges overlap).
async fn appended(
    catalog: &Catalog,
    name: &str,
    version: FormatVersion,
    appends: i64,
    days: i64,
    properties: &[(&str, &str)],
) -> LoadedTable {
    let id = TableId::parse(name).unwrap();
    let mut new = NewTable::new(schema())
        .with_partition_spec(by_day())
        .with_format_version(version);
    for (k, v) in properties {
        new = new.with_property(*k, *v);
    }
    let mut table = catalog.create_table(&id, new).await.unwrap();
    let committer = catalog.committer().unwrap();
    for k in 0..appends {
        let (d1, d2) = (k % days, (k * 7 + days / 2) % days);
        let rows: Vec<Row> = (0..4)
            .map(|i| row_on(k * 4 + i, if i < 2 { d1 } else { d2 }))
            .collect();
        table = append_rows(committer.as_ref(), &table, &rows).await;
    }
    table
}

/// The manifests of the table's current snapshot.
pub async fn manifest_list(table: &LoadedTable) -> Vec<ManifestFile> {
    let Some(snapshot) = table.metadata.current_snapshot() else {
        return Vec::new();
    };
    let bytes = table
        .storage
        .read_all(snapshot.manifest_list())
        .await
        .unwrap();
    ManifestList::parse_with_version(&bytes, table.metadata.format_version())
        .unwrap()
        .consume_entries()
        .into_iter()
        .collect()
}

/// Files in a directory tree (paths relative to it).
pub fn files_under(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out
}

/// What a live file keeps through a manifest rewrite: path → (content, spec, snapshot id, data
/// and file sequence numbers).
type Kept = BTreeMap<String, (DataContentType, i32, Option<i64>, Option<i64>, Option<i64>)>;

fn kept(files: &[LiveFile]) -> Kept {
    files
        .iter()
        .map(|f| {
            (
                f.file.file_path().to_string(),
                (
                    f.file.content_type(),
                    f.spec_id,
                    f.snapshot_id,
                    f.sequence_number,
                    f.file_sequence_number.or(f.sequence_number),
                ),
            )
        })
        .collect()
}

/// The day range (partition summary bounds) of a manifest of the by-day spec.
fn day_range(mf: &ManifestFile) -> (i32, i32) {
    let summary = &mf.partitions.as_ref().unwrap()[0];
    let day = |b: Option<&Vec<u8>>| i32::from_le_bytes(b.unwrap().as_slice().try_into().unwrap());
    (
        day(summary.lower_bound.as_deref()),
        day(summary.upper_bound.as_deref()),
    )
}

/// Manifests a scan planned with `ts` on day `day` reads (storage reads, counted).
async fn manifests_read_for_day(catalog: &Catalog, table: &LoadedTable, day: i64) -> u64 {
    let lo = T0_US + day * DAY_US;
    let filter = Reference::new("ts")
        .greater_than_or_equal_to(Datum::timestamptz_micros(lo))
        .and(Reference::new("ts").less_than(Datum::timestamptz_micros(lo + DAY_US)));
    let before = catalog.io_counters().snapshot();
    let t = table.to_iceberg().unwrap();
    let tasks: Vec<_> = t
        .scan()
        .with_filter(filter)
        .build()
        .unwrap()
        .plan_files()
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert!(!tasks.is_empty(), "day {day} has files");
    let after = catalog.io_counters().snapshot();
    after.reads_of(PathKind::Manifest) - before.reads_of(PathKind::Manifest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_appends_cluster_into_one_manifest_on_every_format_version() {
    for version in [FormatVersion::V1, FormatVersion::V2, FormatVersion::V3] {
        let dir = tempfile::tempdir().unwrap();
        let catalog = sql_catalog(dir.path()).await;
        let table = appended(&catalog, "db.appends", version, 40, 10, &[]).await;
        let id = table.id.clone();
        let rows = read_rows(&table).await;
        assert_eq!(rows.len(), 160);
        let files_before = kept(&live_files(&table).await.unwrap());
        assert_eq!(
            files_before.len(),
            80,
            "{version}: two day files per append"
        );
        assert_eq!(manifest_list(&table).await.len(), 40, "{version}");
        let snapshots = table.metadata.snapshots().count();
        let on_disk = files_under(dir.path());

        // Dry run: exactly what would be replaced, the expected count after; nothing changes.
        let dry = RewriteManifests::new(&catalog, id.clone())
            .dry_run(true)
            .execute()
            .await
            .unwrap();
        assert_eq!(dry.status, RewriteManifestsStatus::DryRun, "{version}");
        assert_eq!(dry.plan.manifests_replaced(), 40, "{version}");
        assert_eq!(dry.plan.groups.len(), 1);
        let group = &dry.plan.groups[0];
        assert_eq!((group.kind, group.spec_id), (ManifestKind::Data, 0));
        assert_eq!(group.entries, 80);
        assert_eq!(
            group.expected_manifests, 1,
            "{version}: 80 entries fit 8 MiB"
        );
        assert_eq!(dry.plan.expected_manifests_after(), 1);
        assert_eq!((dry.manifests_before, dry.manifests_after), (40, 1));
        assert!(
            group
                .replaced
                .iter()
                .all(|m| m.reasons.contains(&ReplaceReason::Overlapping)
                    && m.reasons.contains(&ReplaceReason::Small)),
            "{version}: {:?}",
            group.replaced
        );
        let listed: BTreeSet<String> = manifest_list(&table)
            .await
            .into_iter()
            .map(|m| m.manifest_path)
            .collect();
        assert_eq!(dry.plan.replaced_paths(), listed, "{version}");
        let unchanged = catalog.load_table(&id).await.unwrap();
        assert_eq!(unchanged.metadata_location, table.metadata_location);
        assert_eq!(
            files_under(dir.path()),
            on_disk,
            "{version}: dry run wrote nothing"
        );

        // The real run.
        let out = rewrite_manifests(&catalog, &id, &RewriteManifestsOptions::default())
            .await
            .unwrap();
        assert_eq!(out.status, RewriteManifestsStatus::Committed, "{version}");
        assert_eq!(out.snapshot_ids.len(), 1);
        assert_eq!(
            (
                out.manifests_replaced,
                out.manifests_created,
                out.manifests_kept
            ),
            (40, 1, 0)
        );
        assert_eq!(out.entries_processed, 80);
        assert_eq!((out.before().files, out.after().files), (40, 1));
        assert!(out.after().bytes > 0 && out.before().bytes > 0);

        let after = catalog.load_table(&id).await.unwrap();
        assert_eq!(after.metadata.snapshots().count(), snapshots + 1);
        let snap = after.metadata.current_snapshot().unwrap();
        assert_eq!(snap.snapshot_id(), out.snapshot_ids[0]);
        assert_eq!(snap.summary().operation.as_str(), "replace");
        let summary = &snap.summary().additional_properties;
        let prev = &table
            .metadata
            .current_snapshot()
            .unwrap()
            .summary()
            .additional_properties;
        for (k, v) in [
            ("manifests-created", "1"),
            ("manifests-replaced", "40"),
            ("manifests-kept", "0"),
            ("entries-processed", "80"),
            ("cryo.operation", "rewrite_manifests"),
        ] {
            assert_eq!(summary.get(k).map(String::as_str), Some(v), "{version} {k}");
        }
        for k in ["total-records", "total-data-files", "total-files-size"] {
            assert_eq!(summary[k], prev[k], "{version}: {k} carried over");
        }
        assert!(!summary.contains_key("added-data-files"));
        let list = manifest_list(&after).await;
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].added_snapshot_id, snap.snapshot_id());
        assert_eq!(list[0].existing_files_count, Some(80));
        assert_eq!(list[0].added_files_count, Some(0));

        // Same files with the snapshot ids and sequence numbers they were committed with, now
        // EXISTING; the same rows.
        let files_after = live_files(&after).await.unwrap();
        assert!(
            files_after
                .iter()
                .all(|f| f.status == ManifestStatus::Existing)
        );
        assert_eq!(kept(&files_after), files_before, "{version}");
        if version == FormatVersion::V3 {
            // Row lineage: every file keeps the first row id it inherited, made explicit.
            let ids: BTreeSet<i64> = files_after
                .iter()
                .map(|f| f.file.first_row_id().unwrap())
                .collect();
            assert_eq!(ids.len(), 80);
            assert!(ids.iter().all(|id| *id < 160), "{ids:?}");
        }
        assert_eq!(read_rows(&after).await, rows, "{version}");

        // Nothing left to do: no new snapshot.
        let again = rewrite_manifests(&catalog, &id, &RewriteManifestsOptions::default())
            .await
            .unwrap();
        assert_eq!(again.status, RewriteManifestsStatus::NothingToDo);
        assert!(again.snapshot_ids.is_empty() && again.plan.is_empty());
        assert_eq!(
            catalog.load_table(&id).await.unwrap().metadata_location,
            after.metadata_location
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_filtered_planning_reads_fewer_manifests() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    // A small target, so the 120 entries go into several clustered manifests.
    let table = appended(
        &catalog,
        "db.filtered",
        FormatVersion::V2,
        60,
        20,
        &[("commit.manifest.target-size-bytes", "32768")],
    )
    .await;
    let id = table.id.clone();
    let rows = read_rows(&table).await;
    // One at a time: the catalog's counters are shared.
    let mut before = Vec::new();
    for d in [3, 11, 17] {
        before.push(manifests_read_for_day(&catalog, &table, d).await);
    }

    let out = rewrite_manifests(&catalog, &id, &RewriteManifestsOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RewriteManifestsStatus::Committed);
    assert_eq!(out.plan.target_size_bytes, 32768);
    let after = catalog.load_table(&id).await.unwrap();
    let list = manifest_list(&after).await;
    assert_eq!(list.len(), out.manifests_after);
    assert!(
        list.len() > 1 && list.len() < 60,
        "{} manifests after",
        list.len()
    );
    assert_eq!(
        list.len(),
        out.plan.expected_manifests_after(),
        "the plan's count holds"
    );
    // Clustered: the new manifests' day ranges meet at most at an end point, and none is
    // bigger than the target by more than the estimate's error.
    let mut ranges: Vec<(i32, i32)> = list.iter().map(day_range).collect();
    ranges.sort_unstable();
    for w in ranges.windows(2) {
        assert!(w[0].1 <= w[1].0, "overlapping ranges {ranges:?}");
    }
    for m in &list {
        assert!(
            m.manifest_length < 32768 * 5 / 4,
            "{} bytes",
            m.manifest_length
        );
    }
    let mut after_reads = Vec::new();
    for d in [3, 11, 17] {
        after_reads.push(manifests_read_for_day(&catalog, &after, d).await);
    }
    for (b, a) in before.iter().zip(&after_reads) {
        assert!(
            a < b && *a <= 2,
            "manifest reads before {before:?}, after {after_reads:?}"
        );
    }
    eprintln!(
        "manifests read for one day: before {before:?}, after {after_reads:?} (60 -> {})",
        list.len()
    );
    assert_eq!(read_rows(&after).await, rows);

    // A second run keeps the well-sized, clustered manifests.
    let again = rewrite_manifests(&catalog, &id, &RewriteManifestsOptions::default())
        .await
        .unwrap();
    assert_eq!(
        again.status,
        RewriteManifestsStatus::NothingToDo,
        "{:?}",
        again.plan
    );

    // New appends on new days: only the small manifests are merged; the clustered ones stay.
    let committer = catalog.committer().unwrap();
    let mut head = after;
    for k in 0..3 {
        head = append_rows(
            committer.as_ref(),
            &head,
            &[row_on(1000 + k, 30 + k), row_on(1100 + k, 30 + k)],
        )
        .await;
    }
    let third = rewrite_manifests(&catalog, &id, &RewriteManifestsOptions::default())
        .await
        .unwrap();
    assert_eq!(third.status, RewriteManifestsStatus::Committed);
    let kept_paths: BTreeSet<String> = list.iter().map(|m| m.manifest_path.clone()).collect();
    let replaced = third.plan.replaced_paths();
    assert_eq!(replaced.len(), 3, "{:?}", third.plan);
    assert!(
        replaced.iter().all(|p| !kept_paths.contains(p)),
        "only the three appends' manifests are merged"
    );
    assert_eq!(
        (third.manifests_created, third.manifests_kept),
        (1, list.len())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_manifests_stay_apart_and_deleted_entries_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let mut table = appended(&catalog, "db.deletes", FormatVersion::V2, 12, 4, &[]).await;
    let id = table.id.clone();
    let committer = catalog.committer().unwrap();
    // Six merge-on-read deletes (six delete manifests), then a metadata-only delete of a whole
    // file (a manifest rewritten, and a DELETED-only manifest).
    let data: Vec<String> = live_files(&table)
        .await
        .unwrap()
        .into_iter()
        .map(|f| f.file.file_path().to_string())
        .collect();
    for (i, path) in data.iter().take(6).enumerate() {
        let pos = write_position_deletes(&table, &[(path.clone(), vec![i as i64 % 2])])
            .await
            .unwrap();
        table = SnapshotProducer::new(&table)
            .add_delete_files(pos.files)
            .commit(committer.as_ref())
            .await
            .unwrap()
            .table;
    }
    table = SnapshotProducer::new(&table)
        .delete_data_files([data[10].clone()])
        .commit(committer.as_ref())
        .await
        .unwrap()
        .table;
    let rows = read_rows(&table).await;
    assert_eq!(rows.len(), 48 - 6 - 2);
    let before = manifest_list(&table).await;
    let deleted_only = before
        .iter()
        .filter(|m| m.added_files_count == Some(0) && m.existing_files_count == Some(0))
        .count();
    assert_eq!(deleted_only, 1);
    let files_before = kept(&live_files(&table).await.unwrap());

    let out = rewrite_manifests(&catalog, &id, &RewriteManifestsOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RewriteManifestsStatus::Committed);
    let kinds: BTreeSet<ManifestKind> = out.plan.groups.iter().map(|g| g.kind).collect();
    assert_eq!(
        kinds,
        BTreeSet::from([ManifestKind::Data, ManifestKind::Deletes])
    );
    let reasons: BTreeSet<ReplaceReason> = out
        .plan
        .groups
        .iter()
        .flat_map(|g| g.replaced.iter().flat_map(|m| m.reasons.clone()))
        .collect();
    assert!(
        reasons.contains(&ReplaceReason::NoLiveEntries),
        "{reasons:?}"
    );
    assert_eq!(out.manifests_replaced, before.len());
    assert_eq!(out.entries_processed, files_before.len() as u64);

    let after = catalog.load_table(&id).await.unwrap();
    let list = manifest_list(&after).await;
    assert_eq!(list.len(), 2, "one data and one delete manifest");
    for m in &list {
        let manifest = m.load_manifest(&after.file_io).await.unwrap();
        for e in manifest.entries() {
            assert_eq!(e.status(), ManifestStatus::Existing);
            let is_data = e.data_file().content_type() == DataContentType::Data;
            assert_eq!(
                is_data,
                m.content == ManifestContentType::Data,
                "never mixed"
            );
        }
    }
    // Delete files keep their sequence numbers, so they still apply: the same rows.
    assert_eq!(kept(&live_files(&after).await.unwrap()), files_before);
    assert_eq!(read_rows(&after).await, rows);

    // Only delete manifests, by option: nothing (they are one manifest already).
    let only_deletes = RewriteManifestsOptions {
        rewrite_data_manifests: false,
        ..RewriteManifestsOptions::default()
    };
    let none = rewrite_manifests(&catalog, &id, &only_deletes)
        .await
        .unwrap();
    assert_eq!(none.status, RewriteManifestsStatus::NothingToDo);
    let bad = RewriteManifestsOptions {
        rewrite_data_manifests: false,
        rewrite_delete_manifests: false,
        ..RewriteManifestsOptions::default()
    };
    assert!(matches!(
        rewrite_manifests(&catalog, &id, &bad).await,
        Err(Error::Validation { .. })
    ));
    let tiny = RewriteManifestsOptions {
        target_size_bytes: Some(10),
        ..RewriteManifestsOptions::default()
    };
    assert!(matches!(tiny.validate(), Err(Error::Validation { .. })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrent_append_is_kept_and_a_lost_manifest_aborts() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let table = appended(&catalog, "db.race", FormatVersion::V2, 20, 5, &[]).await;
    let id = table.id.clone();
    let committer = catalog.committer().unwrap();
    let mut rows = read_rows(&table).await;

    // Another writer appends between Cryo's plan and its commit: the commit retries on the new
    // head and keeps the new manifest as it is.
    let prepared = RewriteManifests::new(&catalog, id.clone())
        .prepare()
        .await
        .unwrap();
    assert_eq!(prepared.plan().manifests_replaced(), 20);
    let extra = [row_on(500, 2), row_on(501, 2)];
    let head = append_rows(committer.as_ref(), &table, &extra).await;
    let appended_manifest = manifest_list(&head)
        .await
        .into_iter()
        .find(|m| m.added_snapshot_id == head.metadata.current_snapshot_id().unwrap())
        .unwrap();
    rows.extend(extra.iter().cloned());
    rows.sort();
    let out = prepared.commit().await.unwrap();
    assert_eq!(out.status, RewriteManifestsStatus::Committed);
    assert_eq!(out.retries, 1, "{out:?}");
    assert_eq!((out.manifests_replaced, out.manifests_kept), (20, 1));
    let after = catalog.load_table(&id).await.unwrap();
    let list = manifest_list(&after).await;
    assert_eq!(list.len(), 2);
    assert!(
        list.iter()
            .any(|m| m.manifest_path == appended_manifest.manifest_path)
    );
    assert_eq!(
        after
            .metadata
            .current_snapshot()
            .unwrap()
            .parent_snapshot_id(),
        head.metadata.current_snapshot_id()
    );
    assert_eq!(read_rows(&after).await, rows);

    // Another rewrite replaces the manifests this one planned to replace. With one retry only
    // (spent on finding them gone, none left to plan again): abort, keep nothing.
    let mut head = after;
    for k in 0..4 {
        head = append_rows(committer.as_ref(), &head, &[row_on(600 + k, k)]).await;
    }
    let one_retry = RewriteManifestsOptions {
        retry: Some(RetryPolicy {
            max_attempts: 2,
            min_backoff_ms: 1,
            max_backoff_ms: 1,
            ..RetryPolicy::default()
        }),
        ..RewriteManifestsOptions::default()
    };
    let prepared = RewriteManifests::new(&catalog, id.clone())
        .with_options(one_retry.clone())
        .prepare()
        .await
        .unwrap();
    assert!(prepared.plan().manifests_replaced() >= 4);
    let other = rewrite_manifests(&catalog, &id, &RewriteManifestsOptions::default())
        .await
        .unwrap();
    assert_eq!(other.status, RewriteManifestsStatus::Committed);
    let on_disk = files_under(dir.path());
    let err = prepared.commit().await.unwrap_err();
    assert!(matches!(err, Error::CommitConflict { .. }), "{err}");
    assert!(err.to_string().contains("no longer listed"), "{err}");
    assert_eq!(
        files_under(dir.path()),
        on_disk,
        "the aborted attempt's manifests are gone"
    );
    let final_head = catalog.load_table(&id).await.unwrap();
    assert_eq!(
        final_head.metadata.current_snapshot_id(),
        other.snapshot_ids.first().copied()
    );

    // With retries, it plans again on the new head: here the other commit is a writer's delete,
    // which rewrote one of the manifests the plan replaces (with the file marked deleted).
    let mut head = final_head;
    for k in 0..4 {
        head = append_rows(committer.as_ref(), &head, &[row_on(700 + k, k)]).await;
    }
    let prepared = RewriteManifests::new(&catalog, id.clone())
        .prepare()
        .await
        .unwrap();
    let planned_on = prepared.plan().base_snapshot_id;
    let victim = live_files(&head)
        .await
        .unwrap()
        .into_iter()
        .find(|f| f.file.record_count() == 1)
        .unwrap();
    let head = SnapshotProducer::new(&head)
        .delete_data_files([victim.file.file_path().to_string()])
        .commit(committer.as_ref())
        .await
        .unwrap()
        .table;
    let out = prepared.commit().await.unwrap();
    assert_eq!(out.status, RewriteManifestsStatus::Committed, "{out:?}");
    // The stale attempt failed, then the reload found a replaced manifest rewritten.
    assert_eq!(out.retries, 2, "{out:?}");
    assert_ne!(out.base_snapshot_id, planned_on);
    assert_eq!(out.base_snapshot_id, head.metadata.current_snapshot_id());
    let after = catalog.load_table(&id).await.unwrap();
    assert_eq!(
        after
            .metadata
            .current_snapshot()
            .unwrap()
            .parent_snapshot_id(),
        head.metadata.current_snapshot_id()
    );
    assert_eq!(read_rows(&after).await, read_rows(&head).await);
    assert_eq!(manifest_list(&after).await.len(), out.manifests_after);
}

/// Whether a commit of Cryo's has closed the gate of the fence under `dir` (it holds the gate
/// while it waits for the writers in flight and while it commits).
fn gate_closed(dir: &Path) -> bool {
    let Some(gate) = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "gate"))
    else {
        return false;
    };
    let file = std::fs::File::open(&gate).unwrap();
    match file.try_lock_shared() {
        Ok(()) => false,
        Err(std::fs::TryLockError::WouldBlock) => true,
        Err(std::fs::TryLockError::Error(e)) => panic!("{e}"),
    }
}

async fn until_gate_closed(dir: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_mins(1);
    while !gate_closed(dir) {
        assert!(
            std::time::Instant::now() < deadline,
            "Cryo never closed the gate"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// Under the commit fence, writers that rewrite the manifests a rewrite replaces (as PyIceberg's
/// overwrites do) on every commit cannot use up its retries: after planning again once outside
/// the fence, it plans again inside it and commits before the next writer gets in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_the_fence_a_rewrite_plans_again_inside_it_and_commits_before_the_next_writer() {
    use cryo_core::govern::CommitFence;

    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let table = appended(&catalog, "db.fenced", FormatVersion::V2, 12, 5, &[]).await;
    let id = table.id.clone();
    let committer = catalog.committer().unwrap();
    let fence_dir = dir.path().join("fence");
    let fence = CommitFence::new(&fence_dir);
    let options = RewriteManifestsOptions {
        commit_fence: Some(fence.clone()),
        // Three attempts: the two the writers' rewrites cost, then the commit.
        retry: Some(RetryPolicy {
            max_attempts: 3,
            min_backoff_ms: 200,
            max_backoff_ms: 200,
            ..RetryPolicy::default()
        }),
        ..RewriteManifestsOptions::default()
    };
    let prepared = RewriteManifests::new(&catalog, id.clone())
        .with_options(options)
        .prepare()
        .await
        .unwrap();
    assert_eq!(prepared.plan().manifests_replaced(), 12);

    // A writer's operation that rewrites every manifest, then appends (so there is work left).
    let writer_op = |k: i64| {
        let (catalog, id, committer) = (&catalog, &id, committer.as_ref());
        async move {
            let out = rewrite_manifests(catalog, id, &RewriteManifestsOptions::default())
                .await
                .unwrap();
            assert_eq!(out.status, RewriteManifestsStatus::Committed);
            let mut head = catalog.load_table(id).await.unwrap();
            for d in 0..3 {
                head = append_rows(committer, &head, &[row_on(1000 * k + d, d)]).await;
            }
            head
        }
    };
    let enter = |fence: &CommitFence| {
        let (fence, catalog, id) = (fence.clone(), catalog.name().to_string(), id.clone());
        tokio::task::spawn_blocking(move || fence.enter_writer(&catalog, &id).unwrap())
    };

    let w1 = fence.enter_writer(catalog.name(), &id).unwrap();
    let writers = async {
        // Cryo waits for W1, which rewrites the manifests Cryo's plan replaces.
        until_gate_closed(&fence_dir).await;
        writer_op(1).await;
        let w2 = enter(&fence);
        drop(w1);
        // Cryo finds them rewritten and leaves the fence to plan again; W2 gets in meanwhile.
        let w2 = w2.await.unwrap();
        // Cryo has planned again and waits for W2, which rewrites them once more.
        until_gate_closed(&fence_dir).await;
        let written = writer_op(2).await;
        let w3 = enter(&fence);
        drop(w2);
        // W3 gets in only once Cryo has committed.
        let w3 = w3.await.unwrap();
        let seen = catalog.load_table(&id).await.unwrap();
        drop(w3);
        (written, seen)
    };
    let (out, (written, seen)) = tokio::join!(prepared.commit(), writers);
    let out = out.unwrap();
    assert_eq!(out.status, RewriteManifestsStatus::Committed, "{out:?}");
    assert_eq!(out.retries, 2, "{out:?}");
    assert_eq!(out.base_snapshot_id, written.metadata.current_snapshot_id());
    // The rewrite replaced what W2 left: its rewritten manifest and its three appends.
    assert_eq!(out.manifests_replaced, 4, "{out:?}");
    let cryo_snapshot = out.snapshot_ids[0];
    assert_eq!(
        seen.metadata.current_snapshot_id(),
        Some(cryo_snapshot),
        "the next writer saw Cryo's commit"
    );
    assert_eq!(
        seen.metadata
            .current_snapshot()
            .unwrap()
            .parent_snapshot_id(),
        written.metadata.current_snapshot_id()
    );
    assert_eq!(read_rows(&seen).await, read_rows(&written).await);
    assert_eq!(manifest_list(&seen).await.len(), out.manifests_after);
}
