//! Orphan files and missing files on local SQL and Hadoop tables and on the SeaweedFS S3 peer:
//! planted orphans with old mtimes found (and only they), young ones kept, referenced files
//! never listed, shared and nested locations refused, unreadable metadata refused, the dry run
//! deleting nothing, a real run leaving the table readable; missing files reported per snapshot
//! with their rows and bytes.
#![allow(clippy::too_many_lines)] // Reason: each test walks one table's history end to end.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use cryo_core::clock::FixedClock;
use cryo_core::commit::{NewTable, live_files};
use cryo_core::maintain::{
    FindMissingFiles, FindMissingFilesOptions, MissingKind, PrefixMismatchMode, RemoveOrphanFiles,
    RemoveOrphanFilesOptions, SharedLocationMode, find_missing_files, remove_orphan_files,
};
use cryo_core::{Catalog, Error, LoadedTable, Namespace, TableId};
use iceberg::spec::DataContentType;

use crate::common::{azure_catalog, s3_catalog};
use crate::replace::{
    append, by_day, delete_ids, expected, hadoop_catalog, read_rows, schema, sql_catalog,
};

const DAY: Duration = Duration::from_hours(24);

fn local(location: &str) -> PathBuf {
    PathBuf::from(
        location
            .strip_prefix("file://")
            .or_else(|| location.strip_prefix("file:"))
            .unwrap_or(location),
    )
}

fn walk(dir: &Path, out: &mut BTreeSet<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.insert(p);
        }
    }
}

fn files_under(dir: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    walk(dir, &mut out);
    out
}

fn age(path: &Path, by: Duration) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - by).unwrap();
}

fn plant(path: &Path, bytes: &[u8], old: bool) -> PathBuf {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
    if old {
        age(path, 10 * DAY);
    }
    path.to_path_buf()
}

fn orphan_paths(out: &cryo_core::maintain::RemoveOrphanFilesOutcome) -> BTreeSet<PathBuf> {
    out.orphans.iter().map(|o| local(&o.path)).collect()
}

/// A partitioned table with three appends and an equality delete (data, delete files,
/// manifests, manifest lists, four metadata.json files).
async fn seeded(catalog: &Catalog, name: &str) -> (TableId, LoadedTable) {
    let id = TableId::new(Namespace::new(["db"]), name);
    let committer = catalog.committer().unwrap();
    let t = catalog
        .create_table(&id, NewTable::new(schema()).with_partition_spec(by_day()))
        .await
        .unwrap();
    let t = append(committer.as_ref(), &t, 0..10).await;
    let t = append(committer.as_ref(), &t, 10..20).await;
    let t = delete_ids(committer.as_ref(), &t, &[3, 4]).await;
    let t = append(committer.as_ref(), &t, 20..30).await;
    (id, t)
}

fn ids_after_seed() -> BTreeSet<i64> {
    (0..30).filter(|i| *i != 3 && *i != 4).collect()
}

#[tokio::test]
async fn orphans_found_kept_and_deleted_on_a_local_table() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let (id, t) = seeded(&catalog, "events").await;
    let root = local(t.metadata.location());
    let referenced = files_under(&root);
    assert!(referenced.len() >= 12, "{referenced:?}");
    // Everything the table references is old: age alone must not protect it.
    for f in &referenced {
        age(f, 30 * DAY);
    }
    let clean = RemoveOrphanFiles::new(&catalog, id.clone())
        .execute()
        .await
        .unwrap();
    assert!(clean.dry_run);
    assert!(clean.orphans.is_empty(), "{:?}", clean.orphans);
    assert_eq!(clean.listed_files, referenced.len() as u64);

    // Plant: an old data file in a partition, a stray manifest, a stray metadata.json, files in
    // nested directories (also outside data/ and metadata/), a young orphan, and hidden files.
    let some_data = live_files(&t).await.unwrap()[0]
        .file
        .file_path()
        .to_string();
    let data_bytes = std::fs::read(local(&some_data)).unwrap();
    let manifest = referenced
        .iter()
        .find(|p| {
            p.to_string_lossy().ends_with("-m0.avro") || p.extension().is_some_and(|e| e == "avro")
        })
        .unwrap()
        .clone();
    let old: BTreeSet<PathBuf> = [
        plant(
            &root.join("data/ts_day=2026-01-01/orphan-old.parquet"),
            &data_bytes,
            true,
        ),
        plant(
            &root.join("metadata/stray-m0.avro"),
            &std::fs::read(&manifest).unwrap(),
            true,
        ),
        plant(
            &root.join("metadata/00099-stray.metadata.json"),
            b"{}",
            true,
        ),
        plant(
            &root.join("data/nested/deeper/x.parquet"),
            &data_bytes,
            true,
        ),
        plant(&root.join("elsewhere/notes.txt"), b"left behind", true),
    ]
    .into();
    let young = plant(
        &root.join("data/ts_day=2026-01-02/young.parquet"),
        &data_bytes,
        false,
    );
    let hidden = [
        plant(
            &root.join("data/ts_day=2026-01-01/.orphan-old.parquet.crc"),
            b"crc",
            true,
        ),
        plant(&root.join("_staging/part-0.parquet"), &data_bytes, true),
    ];
    // A file next to the table (a sibling whose name starts with the table's) is not listed.
    let sibling = plant(
        &root.with_file_name("events_backup/data/x.parquet"),
        b"x",
        true,
    );

    let dry = RemoveOrphanFiles::new(&catalog, id.clone())
        .execute()
        .await
        .unwrap();
    assert_eq!(orphan_paths(&dry), old);
    assert_eq!(dry.young_unreferenced_files, 1);
    assert_eq!(dry.hidden_files, 2);
    assert!(
        dry.orphans
            .iter()
            .all(|o| o.size > 0 && o.last_modified_ms > 0)
    );
    assert_eq!(
        dry.orphan_bytes,
        dry.orphans.iter().map(|o| o.size).sum::<u64>()
    );
    assert_eq!(dry.listed_files, referenced.len() as u64 + 6);
    assert_eq!(dry.after().files, referenced.len() as u64 + 1);
    assert_eq!(dry.before().bytes - dry.after().bytes, dry.orphan_bytes);
    assert_eq!(dry.deleted_files, 0);
    // The dry run deleted nothing.
    for p in old.iter().chain([&young, &sibling]).chain(hidden.iter()) {
        assert!(p.exists(), "{}", p.display());
    }

    // The free function with the same defaults is a dry run too.
    let again = remove_orphan_files(&catalog, &id, &RemoveOrphanFilesOptions::default())
        .await
        .unwrap();
    assert_eq!(orphan_paths(&again), old);

    let real = RemoveOrphanFiles::new(&catalog, id.clone())
        .dry_run(false)
        .execute()
        .await
        .unwrap();
    assert!(!real.dry_run);
    assert_eq!(orphan_paths(&real), old);
    assert_eq!(real.deleted_files, old.len() as u64);
    assert_eq!(real.deleted_bytes, real.orphan_bytes);
    assert!(real.failures.is_empty(), "{:?}", real.failures);
    for p in &old {
        assert!(!p.exists(), "{}", p.display());
    }
    for p in referenced
        .iter()
        .chain([&young, &sibling])
        .chain(hidden.iter())
    {
        assert!(p.exists(), "{}", p.display());
    }
    let reloaded = catalog.load_table(&id).await.unwrap();
    assert_eq!(read_rows(&reloaded).await, expected(&ids_after_seed()));
    let after = RemoveOrphanFiles::new(&catalog, id.clone())
        .execute()
        .await
        .unwrap();
    assert!(after.orphans.is_empty());
}

/// A writer killed mid-write (Cryo's own compaction among them, see
/// `tests/py/test_crash_safety.py`) leaves the local staging file `object_store` streams into
/// before the rename: `<name>#<digits>`. `object_store` hides such names from listings and
/// refuses to delete them; the orphan finder must still find and remove them.
#[tokio::test]
async fn orphans_include_staging_files_of_interrupted_local_writes() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let (id, t) = seeded(&catalog, "events").await;
    let root = local(t.metadata.location());
    let referenced = files_under(&root);
    let some_data = live_files(&t).await.unwrap()[0]
        .file
        .file_path()
        .to_string();
    let data_bytes = std::fs::read(local(&some_data)).unwrap();
    let staged: BTreeSet<PathBuf> = [
        plant(
            &root.join("data/ts_day=2026-01-01/00000-0-killed.parquet#1"),
            &data_bytes[..data_bytes.len() / 2],
            true,
        ),
        plant(&root.join("metadata/killed-m0.avro#12"), b"Obj\x01", true),
        plant(
            &root.join("metadata/00009-killed.metadata.json#3"),
            b"{",
            true,
        ),
    ]
    .into();
    // Names with a `#` that are not staging files are ordinary files (listed all along).
    let ordinary: BTreeSet<PathBuf> = [
        plant(&root.join("data/a#b.parquet"), b"x", true),
        plant(&root.join("data/c#1x.parquet"), b"x", true),
    ]
    .into();
    // A write in progress right now: young, so kept.
    let young = plant(
        &root.join("data/ts_day=2026-01-02/00001-0-writing.parquet#1"),
        b"PAR1",
        false,
    );
    let all: BTreeSet<PathBuf> = staged.union(&ordinary).cloned().collect();

    let dry = RemoveOrphanFiles::new(&catalog, id.clone())
        .execute()
        .await
        .unwrap();
    assert_eq!(orphan_paths(&dry), all);
    assert_eq!(dry.young_unreferenced_files, 1);
    assert_eq!(dry.listed_files, referenced.len() as u64 + 6);
    assert!(staged.iter().all(|p| p.exists()), "the dry run deleted");

    let real = RemoveOrphanFiles::new(&catalog, id.clone())
        .dry_run(false)
        .execute()
        .await
        .unwrap();
    assert!(real.failures.is_empty(), "{:?}", real.failures);
    assert_eq!(real.deleted_files, all.len() as u64);
    for p in &all {
        assert!(!p.exists(), "{} not deleted", p.display());
    }
    assert!(young.exists());
    let mut left = referenced.clone();
    left.insert(young);
    assert_eq!(files_under(&root), left);
    let reloaded = catalog.load_table(&id).await.unwrap();
    assert_eq!(read_rows(&reloaded).await, expected(&ids_after_seed()));
}

#[tokio::test]
async fn orphans_on_a_hadoop_table_keep_the_version_hint_and_every_metadata_file() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = hadoop_catalog(dir.path()).await;
    let (id, t) = seeded(&catalog, "hits").await;
    let root = local(t.metadata.location());
    let all = files_under(&root);
    assert!(
        all.iter()
            .any(|p| p.ends_with("metadata/version-hint.text"))
    );
    assert!(
        all.iter()
            .filter(|p| p.to_string_lossy().ends_with(".metadata.json"))
            .count()
            >= 5
    );
    for f in &all {
        age(f, 30 * DAY);
    }
    let stray = plant(&root.join("metadata/v999.metadata.json.tmp"), b"{}", true);
    let out = RemoveOrphanFiles::new(&catalog, id.clone())
        .execute()
        .await
        .unwrap();
    assert_eq!(orphan_paths(&out), BTreeSet::from([stray]));
}

#[tokio::test]
async fn orphans_refuse_shared_and_nested_locations() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let (a, ta) = seeded(&catalog, "a").await;
    let a_loc = ta.metadata.location().trim_end_matches('/').to_string();
    let committer = catalog.committer().unwrap();
    catalog
        .create_namespace(&Namespace::new(["other"]))
        .await
        .unwrap();

    // A table nested inside a's location, in another namespace, spelled with a trailing slash.
    let nested = TableId::new(Namespace::new(["other"]), "nested");
    let tn = catalog
        .create_table(
            &nested,
            NewTable::new(schema())
                .with_partition_spec(by_day())
                .with_location(format!("{a_loc}/sub/")),
        )
        .await
        .unwrap();
    let tn = append(committer.as_ref(), &tn, 100..110).await;
    for f in files_under(&local(&a_loc)) {
        age(&f, 30 * DAY);
    }
    let orphan = plant(&local(&a_loc).join("data/orphan.parquet"), b"x", true);

    for (table, other) in [(&a, &nested), (&nested, &a)] {
        let e = RemoveOrphanFiles::new(&catalog, table.clone())
            .dry_run(false)
            .execute()
            .await
            .unwrap_err();
        match &e {
            Error::Refused { reason, .. } => {
                assert!(reason.contains(&other.to_string()), "{reason}");
            }
            other => panic!("expected a refusal, got {other}"),
        }
        assert_eq!(e.code(), "refused");
    }
    assert!(orphan.exists());

    // Asked to protect the other table's files: none of nested's files is an orphan of a.
    let out = RemoveOrphanFiles::new(&catalog, a.clone())
        .with_options(RemoveOrphanFilesOptions {
            shared_location: SharedLocationMode::ProtectReferenced,
            ..RemoveOrphanFilesOptions::default()
        })
        .execute()
        .await
        .unwrap();
    assert_eq!(out.shared_with, vec![nested.clone()]);
    assert_eq!(orphan_paths(&out), BTreeSet::from([orphan.clone()]));
    assert!(files_under(&local(tn.metadata.location())).len() > 3);

    // The same location, and a location containing a's: refused as well.
    let same = TableId::new(Namespace::new(["other"]), "same");
    catalog
        .create_table(
            &same,
            NewTable::new(schema()).with_location(local(&a_loc).to_string_lossy()),
        )
        .await
        .unwrap();
    let parent = TableId::new(Namespace::new(["other"]), "parent");
    let parent_loc = local(&a_loc)
        .parent()
        .unwrap()
        .to_string_lossy()
        .to_string();
    catalog
        .create_table(&parent, NewTable::new(schema()).with_location(parent_loc))
        .await
        .unwrap();
    let Error::Refused { reason, .. } = RemoveOrphanFiles::new(&catalog, a.clone())
        .execute()
        .await
        .unwrap_err()
    else {
        panic!("expected a refusal")
    };
    assert!(
        reason.contains("other.parent") && reason.contains("contains it"),
        "{reason}"
    );

    // `/db/a` and `/db/ab` do not overlap.
    let dir2 = tempfile::tempdir().unwrap();
    let catalog2 = sql_catalog(dir2.path()).await;
    let (x, tx) = seeded(&catalog2, "x").await;
    let x_loc = tx.metadata.location().trim_end_matches('/').to_string();
    catalog2
        .create_table(
            &TableId::new(Namespace::new(["db"]), "xy"),
            NewTable::new(schema()).with_location(format!("{x_loc}y")),
        )
        .await
        .unwrap();
    let out = RemoveOrphanFiles::new(&catalog2, x)
        .execute()
        .await
        .unwrap();
    assert!(out.shared_with.is_empty());
}

#[tokio::test]
async fn orphans_refuse_when_metadata_cannot_be_read() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let (id, t) = seeded(&catalog, "broken").await;
    let root = local(t.metadata.location());
    for f in files_under(&root) {
        age(&f, 30 * DAY);
    }
    let orphan = plant(&root.join("data/orphan.parquet"), b"x", true);
    // A manifest of the first snapshot (it is still referenced by every later one).
    let first = t
        .metadata
        .snapshots()
        .min_by_key(|s| s.sequence_number())
        .unwrap();
    let list = t.storage.read_all(first.manifest_list()).await.unwrap();
    let mf = iceberg::spec::ManifestList::parse_with_version(&list, t.metadata.format_version())
        .unwrap()
        .entries()[0]
        .manifest_path
        .clone();
    let saved = std::fs::read(local(&mf)).unwrap();

    std::fs::write(local(&mf), b"not avro").unwrap();
    age(&local(&mf), 30 * DAY);
    let e = RemoveOrphanFiles::new(&catalog, id.clone())
        .dry_run(false)
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Metadata { .. }), "{e}");
    assert!(e.to_string().contains("corrupt manifest"), "{e}");

    std::fs::remove_file(local(&mf)).unwrap();
    let e = RemoveOrphanFiles::new(&catalog, id.clone())
        .dry_run(false)
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Metadata { .. }), "{e}");
    assert!(
        orphan.exists(),
        "nothing may be deleted when the metadata is incomplete"
    );

    std::fs::write(local(&mf), saved).unwrap();
    age(&local(&mf), 30 * DAY);
    let out = RemoveOrphanFiles::new(&catalog, id)
        .execute()
        .await
        .unwrap();
    assert_eq!(orphan_paths(&out), BTreeSet::from([orphan]));
}

#[tokio::test]
async fn orphans_retention_floor_gc_flag_and_prefix_modes() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let (id, t) = seeded(&catalog, "young").await;
    let root = local(t.metadata.location());
    let fresh = plant(&root.join("data/just-written.parquet"), b"x", false);
    let now = chrono::Utc::now().timestamp_millis();

    // Default window: a file written a moment ago is young.
    let out = RemoveOrphanFiles::new(&catalog, id.clone())
        .execute()
        .await
        .unwrap();
    assert!(out.orphans.is_empty());
    assert_eq!(out.young_unreferenced_files, 1);
    assert!(out.older_than_ms <= now - 3 * 86_400_000 + 60_000);

    // A window under a day is refused, unless overridden.
    let short = RemoveOrphanFilesOptions {
        older_than_ms: Some(now + 1_000),
        ..RemoveOrphanFilesOptions::default()
    };
    let e = remove_orphan_files(&catalog, &id, &short)
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Refused { .. }), "{e}");
    let forced = RemoveOrphanFilesOptions {
        allow_short_retention: true,
        ..short
    };
    let out = remove_orphan_files(&catalog, &id, &forced).await.unwrap();
    assert_eq!(orphan_paths(&out), BTreeSet::from([fresh.clone()]));

    // A clock four days ahead makes the fresh file old under the default window.
    let out = RemoveOrphanFiles::new(&catalog, id.clone())
        .with_clock(Arc::new(FixedClock(now + 4 * 86_400_000)))
        .execute()
        .await
        .unwrap();
    assert_eq!(orphan_paths(&out), BTreeSet::from([fresh.clone()]));

    // Tables that turn garbage collection off are refused.
    let gc_off = TableId::new(Namespace::new(["db"]), "gc_off");
    catalog
        .create_table(
            &gc_off,
            NewTable::new(schema()).with_property("gc.enabled", "false"),
        )
        .await
        .unwrap();
    let e = RemoveOrphanFiles::new(&catalog, gc_off)
        .execute()
        .await
        .unwrap_err();
    assert!(
        matches!(&e, Error::Refused { reason, .. } if reason.contains("gc.enabled")),
        "{e}"
    );

    // Invalid options are rejected before anything is read.
    let e = remove_orphan_files(
        &catalog,
        &id,
        &RemoveOrphanFilesOptions {
            concurrency: 0,
            prefix_mismatch: PrefixMismatchMode::Ignore,
            ..RemoveOrphanFilesOptions::default()
        },
    )
    .await
    .unwrap_err();
    assert!(matches!(e, Error::Validation { .. }), "{e}");
}

#[tokio::test]
async fn missing_files_reported_per_snapshot_with_rows_and_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let (id, t) = seeded(&catalog, "lossy").await;
    let clean = find_missing_files(&catalog, &id, &FindMissingFilesOptions::default())
        .await
        .unwrap();
    assert!(clean.is_clean(), "{clean:?}");
    assert!(clean.checked_files >= 12);
    assert_eq!(clean.head_requests, 0, "everything is under the location");

    // Snapshots oldest first: append, append, delete, append.
    let mut snaps: Vec<_> = t.metadata.snapshots().cloned().collect();
    snaps.sort_by_key(|s| s.sequence_number());
    let ids: Vec<i64> = snaps.iter().map(|s| s.snapshot_id()).collect();
    let files = live_files(&t).await.unwrap();
    // A data file the first append wrote: live in every snapshot.
    let lost = files
        .iter()
        .find(|f| f.snapshot_id == Some(ids[0]) && f.file.content_type() == DataContentType::Data)
        .unwrap();
    std::fs::remove_file(local(lost.file.file_path())).unwrap();
    // The manifest the last append wrote (only the last snapshot lists it).
    let last_manifest = files
        .iter()
        .find(|f| f.snapshot_id == Some(ids[3]))
        .unwrap()
        .manifest
        .clone();
    let in_last: Vec<_> = files
        .iter()
        .filter(|f| f.manifest == last_manifest)
        .collect();
    let last_rows: u64 = in_last.iter().map(|f| f.file.record_count()).sum();
    std::fs::remove_file(local(&last_manifest)).unwrap();

    let out = FindMissingFiles::new(&catalog, id.clone())
        .execute()
        .await
        .unwrap();
    assert!(!out.is_clean());
    assert_eq!(out.missing.len(), 2, "{:?}", out.missing);
    let data = out
        .missing
        .iter()
        .find(|m| m.kind == MissingKind::DataFile)
        .unwrap();
    assert_eq!(data.path, lost.file.file_path());
    assert_eq!(data.records, lost.file.record_count());
    assert_eq!(data.bytes, lost.file.file_size_in_bytes());
    assert_eq!(data.snapshot_ids, {
        let mut v = ids.clone();
        v.sort_unstable();
        v
    });
    let manifest = out
        .missing
        .iter()
        .find(|m| m.kind == MissingKind::Manifest)
        .unwrap();
    assert_eq!(manifest.path, last_manifest);
    assert_eq!(manifest.records, last_rows);
    assert_eq!(manifest.snapshot_ids, vec![ids[3]]);
    assert!(out.current_affected);
    assert_eq!(out.affected_snapshot_ids.len(), 4);
    let cur = out.snapshots.iter().find(|d| d.is_current).unwrap();
    assert_eq!(cur.snapshot_id, ids[3]);
    assert_eq!(cur.refs, vec!["main".to_string()]);
    assert_eq!(cur.missing_manifests, 1);
    assert_eq!(cur.missing_data_files, 1);
    assert_eq!(cur.rows_at_risk, lost.file.record_count() + last_rows);
    assert_eq!(out.rows_at_risk, cur.rows_at_risk);
    assert_eq!(
        out.bytes_at_risk,
        lost.file.file_size_in_bytes() + manifest.bytes
    );
    let first = out
        .snapshots
        .iter()
        .find(|d| d.snapshot_id == ids[0])
        .unwrap();
    assert!(!first.is_current);
    assert_eq!(first.rows_at_risk, lost.file.record_count());
    assert_eq!(out.before(), out.after());
    assert_eq!(out.before().files, 2);

    // The first snapshot's manifest list gone: the whole snapshot is at risk.
    std::fs::remove_file(local(snaps[0].manifest_list())).unwrap();
    let out = find_missing_files(&catalog, &id, &FindMissingFilesOptions::default())
        .await
        .unwrap();
    let first = out
        .snapshots
        .iter()
        .find(|d| d.snapshot_id == ids[0])
        .unwrap();
    assert!(first.manifest_list_missing);
    assert_eq!(first.rows_at_risk, 10);
    assert!(
        out.missing
            .iter()
            .any(|m| m.kind == MissingKind::ManifestList)
    );

    // Orphan removal refuses this table: its metadata is incomplete.
    let e = RemoveOrphanFiles::new(&catalog, id)
        .execute()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Metadata { .. }), "{e}");
}

// ---------------------------------------------------------------------------------------------
// SeaweedFS S3
// ---------------------------------------------------------------------------------------------

#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn orphans_and_missing_files_on_seaweedfs_s3() {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, prefix) = s3_catalog(dir.path()).await;
    // The table location spelled `s3a://` by another table nested inside.
    orphans_and_missing_files_on(&catalog, &prefix, Some(s3a)).await;
}

#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn orphans_and_missing_files_on_azure() {
    let dir = tempfile::tempdir().unwrap();
    let (catalog, prefix) = azure_catalog(dir.path()).await;
    orphans_and_missing_files_on(&catalog, &prefix, Some(str::to_string)).await;
}

/// `s3://…` spelled `s3a://…`.
fn s3a(loc: &str) -> String {
    format!("s3a{}", &loc[2..])
}

/// Orphans found, kept while young and deleted when old, and missing files found with one
/// listing, on a table under `prefix`; `respell` writes the table's location the way a nested
/// table might (another spelling of the scheme), which must not hide it.
async fn orphans_and_missing_files_on(
    catalog: &Catalog,
    prefix: &str,
    respell: Option<fn(&str) -> String>,
) {
    let (id, t) = seeded(catalog, "events").await;
    let loc = t.metadata.location().trim_end_matches('/').to_string();
    assert!(loc.starts_with(prefix));
    let storage = catalog.storage();
    let referenced: BTreeSet<String> = storage
        .list(&format!("{loc}/"))
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.location)
        .collect();
    let planted: BTreeSet<String> = [
        format!("{loc}/data/ts_day=2026-01-01/orphan.parquet"),
        format!("{loc}/metadata/stray-m0.avro"),
        format!("{loc}/metadata/00042-stray.metadata.json"),
        format!("{loc}/data/nested/deeper/x.parquet"),
    ]
    .into();
    for p in &planted {
        storage
            .write_all(p, Bytes::from_static(b"orphan bytes"))
            .await
            .unwrap();
    }
    // Next to the table, not under it.
    let sibling = format!("{loc}_backup/data/x.parquet");
    storage
        .write_all(&sibling, Bytes::from_static(b"x"))
        .await
        .unwrap();

    // Object mtimes cannot be backdated: the objects are young now...
    let now = chrono::Utc::now().timestamp_millis();
    let out = RemoveOrphanFiles::new(catalog, id.clone())
        .execute()
        .await
        .unwrap();
    assert!(out.orphans.is_empty());
    assert_eq!(out.young_unreferenced_files, planted.len() as u64);
    // ...and old for a clock four days ahead.
    let future: Arc<dyn cryo_core::clock::Clock> = Arc::new(FixedClock(now + 4 * 86_400_000));
    let dry = RemoveOrphanFiles::new(catalog, id.clone())
        .with_clock(Arc::clone(&future))
        .execute()
        .await
        .unwrap();
    let found: BTreeSet<String> = dry.orphans.iter().map(|o| o.path.clone()).collect();
    assert_eq!(found, planted);
    assert_eq!(
        dry.listed_files,
        referenced.len() as u64 + planted.len() as u64
    );
    assert_eq!(dry.orphan_bytes, 12 * planted.len() as u64);

    let real = RemoveOrphanFiles::new(catalog, id.clone())
        .with_clock(Arc::clone(&future))
        .dry_run(false)
        .execute()
        .await
        .unwrap();
    assert_eq!(real.deleted_files, planted.len() as u64);
    let left: BTreeSet<String> = storage
        .list(&format!("{loc}/"))
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.location)
        .collect();
    assert_eq!(left, referenced);
    assert!(storage.head(&sibling).await.unwrap().is_some());
    let reloaded = catalog.load_table(&id).await.unwrap();
    assert_eq!(read_rows(&reloaded).await, expected(&ids_after_seed()));

    // Missing files: one LIST answers for everything under the location.
    let lost = live_files(&reloaded).await.unwrap()[0].file.clone();
    storage.delete(lost.file_path()).await.unwrap();
    let missing = find_missing_files(catalog, &id, &FindMissingFilesOptions::default())
        .await
        .unwrap();
    assert_eq!(missing.head_requests, 0);
    assert_eq!(missing.missing.len(), 1);
    assert_eq!(missing.missing[0].path, lost.file_path());
    assert_eq!(missing.missing[0].records, lost.record_count());
    assert_eq!(missing.rows_at_risk, lost.record_count());
    assert!(missing.current_affected);

    // A table nested inside, whatever the spelling of its location: refused.
    if let Some(respell) = respell {
        let nested = TableId::new(Namespace::new(["db"]), "nested");
        catalog
            .create_table(
                &nested,
                NewTable::new(schema()).with_location(format!("{}/sub", respell(&loc))),
            )
            .await
            .unwrap();
        let e = RemoveOrphanFiles::new(catalog, id.clone())
            .with_clock(Arc::clone(&future))
            .dry_run(false)
            .execute()
            .await
            .unwrap_err();
        assert!(
            matches!(&e, Error::Refused { reason, .. } if reason.contains("db.nested")),
            "{e}"
        );
    }
    for o in storage.list(&format!("{prefix}/")).await.unwrap() {
        storage.delete(&o.location).await.ok();
    }
}
