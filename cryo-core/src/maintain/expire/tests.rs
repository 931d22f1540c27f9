use iceberg::spec::{MAIN_BRANCH, SnapshotReference, SnapshotRetention, TableMetadata};
use iceberg::{TableRequirement, TableUpdate};

use super::reach::key;
use super::select::{MAX_REF_AGE_MS, MAX_SNAPSHOT_AGE_MS, MIN_SNAPSHOTS_TO_KEEP};
use super::*;

const HOUR: i64 = 3_600_000;
const NOW: i64 = 1_767_225_600_000 + 100 * HOUR;

fn branch(
    id: i64,
    min_keep: Option<i32>,
    max_age: Option<i64>,
    max_ref_age: Option<i64>,
) -> SnapshotReference {
    SnapshotReference::new(
        id,
        SnapshotRetention::branch(min_keep, max_age, max_ref_age),
    )
}

fn tag(id: i64, max_ref_age: Option<i64>) -> SnapshotReference {
    SnapshotReference::new(
        id,
        SnapshotRetention::Tag {
            max_ref_age_ms: max_ref_age,
        },
    )
}

/// A linear main of snapshots 1..=n, snapshot i committed `n - i + 1` hours before NOW.
fn linear(n: i64) -> History {
    let mut h = History::default();
    for i in 1..=n {
        let parent = (i > 1).then(|| i - 1);
        h.snapshots.insert(i, (parent, NOW - (n - i + 1) * HOUR));
    }
    h.refs
        .insert(MAIN_BRANCH.into(), branch(n, None, None, None));
    h
}

fn retention(older_than: i64, retain_last: u32) -> Retention {
    Retention {
        now_ms: NOW,
        older_than_ms: older_than,
        retain_last,
        max_ref_age_ms: i64::MAX,
        snapshot_ids: BTreeSet::new(),
    }
}

#[test]
fn older_than_expires_strictly_older_snapshots_of_main() {
    let h = linear(10); // snapshot i at NOW - (11 - i) h
    // Snapshot 5 is at NOW - 6h: kept (>=), 1..4 go.
    let s = select_snapshots(&h, &retention(NOW - 6 * HOUR, 1)).unwrap();
    assert_eq!(s.expired, vec![1, 2, 3, 4]);
    assert_eq!(s.retained, (5..=10).collect::<Vec<_>>());
    assert!(s.removed_refs.is_empty());
    assert_eq!(s.retained_refs.get("main"), Some(&10));
}

#[test]
fn retain_last_keeps_the_newest_even_when_old() {
    let h = linear(10);
    let s = select_snapshots(&h, &retention(NOW, 3)).unwrap();
    assert_eq!(s.retained, vec![8, 9, 10]);
    assert_eq!(s.expired, (1..=7).collect::<Vec<_>>());
    // retain_last 1 with everything old: only the head stays.
    let s = select_snapshots(&h, &retention(NOW, 1)).unwrap();
    assert_eq!(s.retained, vec![10]);
    // retain_last beyond the history keeps everything.
    let s = select_snapshots(&h, &retention(NOW, 50)).unwrap();
    assert!(s.is_empty());
}

#[test]
fn branch_retention_keeps_its_ancestors_and_its_own_settings_win() {
    // main: 1..10; branch `audit` forks at 4 with 11, 12 (old); its own min-snapshots-to-keep 4.
    let mut h = linear(10);
    h.snapshots.insert(11, (Some(4), NOW - 50 * HOUR));
    h.snapshots.insert(12, (Some(11), NOW - 49 * HOUR));
    h.refs
        .insert("audit".into(), branch(12, Some(4), None, None));
    let s = select_snapshots(&h, &retention(NOW - 2 * HOUR, 1)).unwrap();
    // main keeps 9 (NOW-2h) and 10; audit keeps 12, 11, 4, 3 (four, whatever their age).
    assert_eq!(s.retained, vec![3, 4, 9, 10, 11, 12]);
    assert_eq!(s.expired, vec![1, 2, 5, 6, 7, 8]);

    // A branch's max-snapshot-age-ms overrides older_than: 12 is 49 h old, 11 is 50 h.
    h.refs.insert(
        "audit".into(),
        branch(12, Some(1), Some(49 * HOUR + 1), None),
    );
    let s = select_snapshots(&h, &retention(NOW - 2 * HOUR, 1)).unwrap();
    assert_eq!(s.retained, vec![9, 10, 12]);
}

#[test]
fn tags_keep_their_snapshot_until_their_ref_age_expires() {
    let mut h = linear(10);
    h.refs.insert("v1".into(), tag(2, None));
    h.refs.insert("stale".into(), tag(3, Some(HOUR))); // snapshot 3 is 8 h old
    let s = select_snapshots(&h, &retention(NOW, 1)).unwrap();
    assert_eq!(s.retained, vec![2, 10]);
    assert_eq!(s.removed_refs, vec!["stale".to_string()]);
    assert_eq!(s.retained_refs.keys().collect::<Vec<_>>(), ["main", "v1"]);
    // The table-wide default ref age applies to refs without their own.
    let mut r = retention(NOW, 1);
    r.max_ref_age_ms = 5 * HOUR; // snapshot 2 is 9 h old
    let s = select_snapshots(&h, &r).unwrap();
    assert_eq!(s.retained, vec![10]);
    assert_eq!(s.removed_refs, vec!["stale".to_string(), "v1".to_string()]);
    // main is never removed, however old.
    let mut old = linear(2);
    old.refs
        .insert(MAIN_BRANCH.into(), branch(2, None, None, Some(1)));
    let s = select_snapshots(&old, &retention(NOW, 1)).unwrap();
    assert!(s.removed_refs.is_empty());
    assert_eq!(s.retained, vec![2]);
}

#[test]
fn old_branch_expires_with_its_ref() {
    let mut h = linear(5);
    h.snapshots.insert(20, (Some(2), NOW - 40 * HOUR));
    h.refs
        .insert("dev".into(), branch(20, Some(5), None, Some(10 * HOUR)));
    let s = select_snapshots(&h, &retention(NOW, 1)).unwrap();
    assert_eq!(s.removed_refs, vec!["dev".to_string()]);
    assert_eq!(s.retained, vec![5]);
    assert!(s.expired.contains(&20));
}

#[test]
fn unreferenced_snapshots_stay_while_young() {
    // 1..5 on main; 30 and 31 are left over from a rolled-back commit (no ref reaches them).
    let mut h = linear(5);
    h.snapshots.insert(30, (Some(3), NOW - HOUR / 2));
    h.snapshots.insert(31, (Some(3), NOW - 30 * HOUR));
    let s = select_snapshots(&h, &retention(NOW - HOUR, 1)).unwrap();
    assert!(s.retained.contains(&30));
    assert!(s.expired.contains(&31));
}

#[test]
fn explicit_ids_go_unless_a_ref_points_at_them() {
    let mut h = linear(6);
    h.refs.insert("v1".into(), tag(2, None));
    let mut r = retention(NOW - 100 * HOUR, 1); // the age rule alone expires nothing
    r.snapshot_ids = [4, 5, 99].into();
    let s = select_snapshots(&h, &r).unwrap();
    // Java: an id in a branch's retention window still goes; only ref heads are refused.
    assert_eq!(s.expired, vec![4, 5]);
    assert_eq!(s.unknown_ids, vec![99]);
    r.snapshot_ids = [2].into();
    let e = select_snapshots(&h, &r).unwrap_err();
    assert!(matches!(e, Error::Validation { .. }), "{e}");
    assert!(e.to_string().contains("v1"), "{e}");
    r.snapshot_ids = [6].into();
    assert!(select_snapshots(&h, &r).is_err());
}

#[test]
fn corrupt_parent_cycles_end_the_walk() {
    let mut h = History::default();
    h.snapshots.insert(1, (Some(2), NOW - 10 * HOUR));
    h.snapshots.insert(2, (Some(1), NOW - 9 * HOUR));
    h.refs
        .insert(MAIN_BRANCH.into(), branch(2, None, None, None));
    let s = select_snapshots(&h, &retention(NOW, 1)).unwrap();
    assert_eq!(s.retained, vec![2]);
    assert_eq!(s.expired, vec![1]);
}

#[test]
fn resolve_uses_table_properties_and_the_clock() {
    let props = HashMap::from([
        (MAX_SNAPSHOT_AGE_MS.to_string(), "3600000".to_string()),
        (MIN_SNAPSHOTS_TO_KEEP.to_string(), "4".to_string()),
        (MAX_REF_AGE_MS.to_string(), "7200000".to_string()),
    ]);
    let r = Retention::resolve(&ExpireOptions::default(), &props, NOW).unwrap();
    assert_eq!(
        (r.older_than_ms, r.retain_last, r.max_ref_age_ms),
        (NOW - HOUR, 4, 2 * HOUR)
    );
    let r = Retention::resolve(&ExpireOptions::default(), &HashMap::new(), NOW).unwrap();
    assert_eq!(r.older_than_ms, NOW - DEFAULT_MAX_SNAPSHOT_AGE_MS);
    assert_eq!((r.retain_last, r.max_ref_age_ms), (1, i64::MAX));
    let opts = ExpireOptions {
        older_than_ms: Some(NOW - 5),
        retain_last: Some(2),
        ..ExpireOptions::default()
    };
    let r = Retention::resolve(&opts, &props, NOW).unwrap();
    assert_eq!((r.older_than_ms, r.retain_last), (NOW - 5, 2));
}

#[test]
fn bad_input_is_a_typed_error() {
    let future = ExpireOptions {
        older_than_ms: Some(NOW + 1),
        ..ExpireOptions::default()
    };
    let e = Retention::resolve(&future, &HashMap::new(), NOW).unwrap_err();
    assert!(matches!(e, Error::Validation { .. }), "{e}");
    for bad in [
        ExpireOptions {
            retain_last: Some(0),
            ..ExpireOptions::default()
        },
        ExpireOptions {
            older_than_ms: Some(-1),
            ..ExpireOptions::default()
        },
        ExpireOptions {
            max_concurrent_deletes: 0,
            ..ExpireOptions::default()
        },
    ] {
        assert!(matches!(bad.validate(), Err(Error::Validation { .. })));
    }
    for (k, v) in [
        (MAX_SNAPSHOT_AGE_MS, "5 days"),
        (MIN_SNAPSHOTS_TO_KEEP, "0"),
        (MAX_REF_AGE_MS, "x"),
    ] {
        let props = HashMap::from([(k.to_string(), v.to_string())]);
        let e = Retention::resolve(&ExpireOptions::default(), &props, NOW).unwrap_err();
        assert!(matches!(e, Error::Config { .. }), "{k}: {e}");
    }
}

#[test]
fn defaults_are_safe_and_serde_round_trips() {
    let d = ExpireOptions::default();
    assert!(d.dry_run && d.clean_files);
    let parsed: ExpireOptions = serde_json::from_str(r#"{"retain_last": 3}"#).unwrap();
    assert!(parsed.dry_run);
    assert_eq!(parsed.retain_last, Some(3));
    assert!(serde_json::from_str::<ExpireOptions>(r#"{"retainlast": 3}"#).is_err());
}

#[test]
fn history_from_metadata_reads_refs_and_changes_pin_them() {
    let md_json = r#"{"format-version":2,"table-uuid":"9c12d441-03fe-4693-9a96-a0705ddf69c1","location":"file:///w/t","last-sequence-number":3,"last-updated-ms":1,"last-column-id":1,"current-schema-id":0,"schemas":[{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"x","required":true,"type":"long"}]}],"default-spec-id":0,"partition-specs":[{"spec-id":0,"fields":[]}],"last-partition-id":999,"default-sort-order-id":0,"sort-orders":[{"order-id":0,"fields":[]}],"properties":{},
      "current-snapshot-id":3,
      "snapshots":[
        {"snapshot-id":1,"sequence-number":1,"timestamp-ms":1000,"manifest-list":"file:///w/t/metadata/snap-1.avro","summary":{"operation":"append"}},
        {"snapshot-id":2,"parent-snapshot-id":1,"sequence-number":2,"timestamp-ms":2000,"manifest-list":"file:///w/t/metadata/snap-2.avro","summary":{"operation":"append"}},
        {"snapshot-id":3,"parent-snapshot-id":2,"sequence-number":3,"timestamp-ms":3000,"manifest-list":"file:///w/t/metadata/snap-3.avro","summary":{"operation":"append"}}],
      "statistics":[{"snapshot-id":1,"statistics-path":"file:///w/t/metadata/1.stats","file-size-in-bytes":10,"file-footer-size-in-bytes":5,"blob-metadata":[]}],
      "refs":{"main":{"snapshot-id":3,"type":"branch"},"old":{"snapshot-id":2,"type":"tag","max-ref-age-ms":10}},
      "snapshot-log":[],"metadata-log":[]}"#;
    let md: TableMetadata = serde_json::from_str(md_json).unwrap();
    let h = History::of("t", &md).unwrap();
    assert_eq!(h.snapshots.len(), 3);
    assert_eq!(h.snapshots[&2], (Some(1), 2000));
    assert_eq!(h.refs.len(), 2);
    let s = select_snapshots(
        &h,
        &Retention {
            now_ms: 10_000,
            older_than_ms: 10_000,
            retain_last: 1,
            max_ref_age_ms: i64::MAX,
            snapshot_ids: BTreeSet::new(),
        },
    )
    .unwrap();
    assert_eq!(s.expired, vec![1, 2]);
    assert_eq!(s.removed_refs, vec!["old".to_string()]);
    let changes = expiry_changes(&md, &h, &s);
    assert!(
        changes
            .requirements
            .contains(&TableRequirement::RefSnapshotIdMatch {
                r#ref: "main".into(),
                snapshot_id: Some(3)
            })
    );
    assert!(
        changes
            .requirements
            .contains(&TableRequirement::RefSnapshotIdMatch {
                r#ref: "old".into(),
                snapshot_id: Some(2)
            })
    );
    assert!(matches!(
        changes.requirements[0],
        TableRequirement::UuidMatch { .. }
    ));
    assert_eq!(
        changes.updates,
        vec![
            TableUpdate::RemoveSnapshotRef {
                ref_name: "old".into()
            },
            TableUpdate::RemoveStatistics { snapshot_id: 1 },
            TableUpdate::RemoveSnapshots {
                snapshot_ids: vec![1, 2]
            },
        ]
    );
}

/// Commits a concurrent append through `inner` before forwarding the first commit, so that
/// commit finds `main` moved.
#[derive(Debug)]
struct Interfering {
    inner: Arc<dyn CatalogCommitter>,
    fired: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl CatalogCommitter for Interfering {
    async fn load_head(&self, base: &LoadedTable) -> Result<LoadedTable> {
        self.inner.load_head(base).await
    }

    async fn commit(&self, base: &LoadedTable, changes: TableChanges) -> Result<LoadedTable> {
        if !self.fired.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let head = self.inner.load_head(base).await?;
            let w = crate::commit::write_data_files(&head, [ids(100)]).await?;
            crate::commit::SnapshotProducer::new(&head)
                .add_data_files(w.files)
                .commit(self.inner.as_ref())
                .await?;
        }
        self.inner.commit(base, changes).await
    }
}

fn ids(first: i64) -> arrow_array::RecordBatch {
    let schema = Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
        "id",
        arrow_schema::DataType::Int64,
        false,
    )]));
    arrow_array::RecordBatch::try_new(
        schema,
        vec![
            Arc::new(arrow_array::Int64Array::from_iter_values(first..first + 5))
                as arrow_array::ArrayRef,
        ],
    )
    .unwrap()
}

/// A local catalog under `dir` with an empty table `name` of one `id: long` column.
async fn id_table(dir: &std::path::Path, name: &str) -> (Catalog, TableId, LoadedTable) {
    use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};

    use crate::catalog::{CatalogConfig, Namespace};
    use crate::commit::NewTable;

    let mut config = CatalogConfig::local("t", dir);
    config
        .properties
        .insert("init_catalog_tables".into(), "true".into());
    let catalog = Catalog::connect(config).await.unwrap();
    catalog
        .create_namespace(&Namespace::new(["db"]))
        .await
        .unwrap();
    let id = TableId::parse(name).unwrap();
    let schema = Schema::builder()
        .with_fields(vec![
            NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
        ])
        .build()
        .unwrap();
    let t = catalog
        .create_table(&id, NewTable::new(schema))
        .await
        .unwrap();
    (catalog, id, t)
}

/// A writer commits between Cryo's selection and its commit: the commit's requirement on
/// `main` fails, Cryo reloads, selects again on the new head (which now keeps the new
/// snapshot and lets the old head go) and commits.
#[tokio::test]
async fn a_concurrent_commit_is_retried_on_the_new_head() {
    use crate::commit::{SnapshotProducer, write_data_files};

    let dir = tempfile::tempdir().unwrap();
    let (catalog, id, mut t) = id_table(dir.path(), "db.busy").await;
    let committer = catalog.committer().unwrap();
    for i in 0..4 {
        let w = write_data_files(&t, [ids(i * 5)]).await.unwrap();
        t = SnapshotProducer::new(&t)
            .add_data_files(w.files)
            .commit(committer.as_ref())
            .await
            .unwrap()
            .table;
    }
    let old: Vec<i64> = t.metadata.snapshots().map(|s| s.snapshot_id()).collect();
    let interfering: Arc<dyn CatalogCommitter> = Arc::new(Interfering {
        inner: Arc::clone(&committer),
        fired: false.into(),
    });
    let out = ExpireSnapshots::new(&catalog, id.clone())
        .with_options(ExpireOptions {
            older_than_ms: Some(chrono::Utc::now().timestamp_millis() + 1),
            retain_last: Some(1),
            dry_run: false,
            retry: Some(RetryPolicy {
                min_backoff_ms: 1,
                max_backoff_ms: 5,
                ..RetryPolicy::default()
            }),
            ..ExpireOptions::default()
        })
        .with_clock(Arc::new(crate::clock::FixedClock(
            chrono::Utc::now().timestamp_millis() + 60_000,
        )))
        .run(Some(interfering))
        .await
        .unwrap();
    assert_eq!(out.retries, 1);
    let after = catalog.load_table(&id).await.unwrap();
    let head = after.metadata.current_snapshot_id().unwrap();
    assert!(!old.contains(&head), "the concurrent snapshot is the head");
    assert_eq!(out.retained_snapshot_ids, vec![head]);
    let mut expired = old.clone();
    expired.sort_unstable();
    assert_eq!(
        out.expired_snapshot_ids, expired,
        "all four old snapshots, the old head too"
    );
    assert_eq!(out.deleted.manifest_lists.files, 4);
    // The concurrent writer's rows and every earlier row are still there.
    let rows: usize = crate::commit::live_files(&after)
        .await
        .unwrap()
        .iter()
        .map(|f| f.file.record_count() as usize)
        .sum();
    assert_eq!(rows, 25);
    assert_eq!(out.deleted.data.files, 0);
}

/// Proofs made one after another with one cache (as an expiry's attempts are) find exactly
/// what proofs with a fresh cache find, while the expired set, the candidates and the
/// retained manifests change between them; every reuse path is taken: lists, expired-only
/// manifests, and the strikes of retained manifests (same candidates: reused; other
/// candidates: read again).
#[tokio::test]
#[allow(clippy::too_many_lines)] // Reason: one history, then the proofs over it.
async fn proofs_sharing_a_cache_find_what_fresh_proofs_find() {
    use crate::commit::{SnapshotProducer, write_data_files};
    use crate::maintain::{RewriteManifests, RewriteManifestsStatus};

    let dir = tempfile::tempdir().unwrap();
    let (catalog, id, mut t) = id_table(dir.path(), "db.proofs").await;
    let committer = catalog.committer().unwrap();
    let path_of = std::cell::RefCell::new(HashMap::new());
    let append = async |t: &LoadedTable, name: &str, first: i64| {
        let w = write_data_files(t, [ids(first)]).await.unwrap();
        path_of
            .borrow_mut()
            .insert(name.to_string(), w.files[0].file_path().to_string());
        SnapshotProducer::new(t)
            .add_data_files(w.files)
            .commit(committer.as_ref())
            .await
            .unwrap()
            .table
    };
    // s1: +A; s2: +B; s3: A and B's manifests rewritten into one; s4: A replaced by C;
    // s5: +D; s6: B replaced by E; s7: +F.
    t = append(&t, "A", 0).await;
    append(&t, "B", 5).await;
    let rewritten = RewriteManifests::new(&catalog, id.clone())
        .execute()
        .await
        .unwrap();
    assert_eq!(rewritten.status, RewriteManifestsStatus::Committed);
    t = catalog.load_table(&id).await.unwrap();
    let replace = async |t: &LoadedTable, old: &str, new: &str, first: i64| {
        let w = write_data_files(t, [ids(first)]).await.unwrap();
        let replaced = path_of.borrow()[old].clone();
        path_of
            .borrow_mut()
            .insert(new.to_string(), w.files[0].file_path().to_string());
        SnapshotProducer::replace(t)
            .delete_data_files([replaced])
            .add_data_files(w.files)
            .commit(committer.as_ref())
            .await
            .unwrap()
            .table
    };
    t = replace(&t, "A", "C", 0).await;
    t = append(&t, "D", 10).await;
    t = replace(&t, "B", "E", 5).await;
    t = append(&t, "F", 15).await;
    let mut s: Vec<(i64, i64)> = t
        .metadata
        .snapshots()
        .map(|s| (s.sequence_number(), s.snapshot_id()))
        .collect();
    s.sort_unstable();
    let s: Vec<i64> = s.into_iter().map(|(_, id)| id).collect();
    assert_eq!(s.len(), 7);

    let proof = async |expired: &[usize], cache: &mut ProofCache| {
        let expired: BTreeSet<i64> = expired.iter().map(|i| s[*i - 1]).collect();
        let changes = TableChanges::new(
            Vec::new(),
            vec![TableUpdate::RemoveSnapshots {
                snapshot_ids: expired.iter().copied().collect(),
            }],
        );
        let (md, _) = apply_locally(&t, &changes).unwrap();
        let after = LoadedTable {
            metadata: Arc::new(md),
            metadata_location: None,
            ..t.clone()
        };
        let found = unreachable_files(&t, &after, &expired, 4, cache)
            .await
            .unwrap();
        assert!(found.warnings.is_empty(), "{:?}", found.warnings);
        let mut files: Vec<(ExpiredFileKind, String)> =
            found.files.into_iter().map(|f| (f.kind, f.path)).collect();
        files.sort();
        files
    };
    let data = |files: &[(ExpiredFileKind, String)]| -> BTreeSet<String> {
        files
            .iter()
            .filter(|(k, _)| *k == ExpiredFileKind::Data)
            .map(|(_, p)| {
                path_of
                    .borrow()
                    .iter()
                    .find(|(_, v)| *v == p)
                    .map(|(k, _)| k.clone())
                    .unwrap()
            })
            .collect()
    };
    let set =
        |names: &[&str]| -> BTreeSet<String> { names.iter().map(|n| (*n).to_string()).collect() };
    let mut shared = ProofCache::default();
    let cases: [(&[usize], &[&str]); 8] = [
        // A is struck by nothing kept, B by s4's rewritten manifest.
        (&[1, 2, 3, 4], &["A"]),
        // The same candidates, other retained manifests: the strikes are reused.
        (&[1, 2, 3], &["A"]),
        // No expired-only manifest.
        (&[1], &[]),
        // The same candidates again; now s1 and s2 keep A and B live.
        (&[3], &[]),
        (&[1, 2, 3, 4, 5, 6], &["A", "B"]),
        // Other candidates ({B}): the strikes are read again.
        (&[2, 4], &[]),
        (&[1, 2, 3, 4], &["A"]),
        (&[1, 2, 3, 4, 5, 6], &["A", "B"]),
    ];
    let mut shared_full = ProofCache {
        full_only: true,
        ..ProofCache::default()
    };
    for (expired, want) in cases {
        let fresh = proof(expired, &mut ProofCache::default()).await;
        let reused = proof(expired, &mut shared).await;
        assert_eq!(reused, fresh, "expiring {expired:?}");
        assert_eq!(data(&fresh), set(want), "expiring {expired:?}");
        // The proof by reachability alone, fresh and with a cache of its own, finds the same.
        let mut full = ProofCache {
            full_only: true,
            ..ProofCache::default()
        };
        assert_eq!(
            proof(expired, &mut full).await,
            fresh,
            "expiring {expired:?}"
        );
        assert_eq!(
            proof(expired, &mut shared_full).await,
            fresh,
            "expiring {expired:?}"
        );
        // A prefix of the history is proved incrementally (from the files the expired
        // snapshots removed), a snapshot in the middle by reachability.
        let prefix = expired.iter().copied().eq(1..=expired.len());
        let mut alone = ProofCache::default();
        proof(expired, &mut alone).await;
        if prefix {
            assert!(alone.live.is_empty(), "expiring {expired:?}");
        } else {
            assert!(alone.deleted.is_empty(), "expiring {expired:?}");
        }
    }
    assert!(!shared.lists.is_empty() && !shared.live.is_empty() && !shared.deleted.is_empty());

    // Strikes found for other candidates are never reused: a manifest read while A was no
    // candidate says nothing of A. (Expiring s3 alone, s1 keeps A live and s2 keeps B.)
    let mut stale = ProofCache {
        strikes_for: [key(&path_of.borrow()["B"])].into(),
        ..ProofCache::default()
    };
    for list in shared.lists.values() {
        for &m in &list.manifests {
            let path = shared.manifests.refs[m as usize].path.clone();
            stale.strikes.insert(path, Arc::new(Vec::new()));
        }
    }
    assert!(data(&proof(&[3], &mut stale).await).is_empty());
}

/// The incremental proof stands on the manifest counts: when a snapshot's list does not account
/// for every file its parent listed (a writer that dropped files without `DELETED` entries),
/// or a ref besides `main` exists, the proof by reachability runs, and finds the same files.
#[tokio::test]
async fn counts_that_do_not_add_up_fall_back_to_reachability() {
    use crate::commit::{SnapshotProducer, write_data_files};

    let dir = tempfile::tempdir().unwrap();
    let (catalog, _id, mut t) = id_table(dir.path(), "db.counts").await;
    let committer = catalog.committer().unwrap();
    let mut paths = Vec::new();
    for i in 0..2 {
        let w = write_data_files(&t, [ids(i * 5)]).await.unwrap();
        paths.push(w.files[0].file_path().to_string());
        t = SnapshotProducer::new(&t)
            .add_data_files(w.files)
            .commit(committer.as_ref())
            .await
            .unwrap()
            .table;
    }
    // s3 removes the first file.
    t = SnapshotProducer::new(&t)
        .delete_data_files([paths[0].clone()])
        .commit(committer.as_ref())
        .await
        .unwrap()
        .table;
    let mut s: Vec<(i64, i64)> = t
        .metadata
        .snapshots()
        .map(|s| (s.sequence_number(), s.snapshot_id()))
        .collect();
    s.sort_unstable();
    let expired: BTreeSet<i64> = [s[0].1, s[1].1].into();
    let changes = TableChanges::new(
        Vec::new(),
        vec![TableUpdate::RemoveSnapshots {
            snapshot_ids: expired.iter().copied().collect(),
        }],
    );
    let (md, _) = apply_locally(&t, &changes).unwrap();
    let after = LoadedTable {
        metadata: Arc::new(md),
        metadata_location: None,
        ..t.clone()
    };
    let name = t.id.to_string();
    let data = |found: Unreachable| -> Vec<String> {
        found
            .files
            .into_iter()
            .filter(|f| f.kind == ExpiredFileKind::Data)
            .map(|f| f.path)
            .collect()
    };

    let mut cache = ProofCache::default();
    let found = unreachable_files(&t, &after, &expired, 4, &mut cache)
        .await
        .unwrap();
    assert_eq!(data(found), vec![paths[0].clone()]);
    let scope = super::reach::incremental_scope(&name, &t, &after, &expired, &mut cache).unwrap();
    assert_eq!(
        scope,
        Some([s[1].1, s[2].1].into()),
        "s2 and s3 have expired parents"
    );
    assert!(cache.live.is_empty() && !cache.deleted.is_empty());

    // The remover's manifest claims no deleted entry: the counts no longer add up.
    let remover = s[2].1;
    for m in &mut cache.manifests.refs {
        if m.added_snapshot_id == Some(remover) {
            m.counts.deleted = Some(0);
        }
    }
    assert_eq!(
        super::reach::incremental_scope(&name, &t, &after, &expired, &mut cache).unwrap(),
        None
    );
    cache.deleted.clear();
    let found = unreachable_files(&t, &after, &expired, 4, &mut cache)
        .await
        .unwrap();
    assert_eq!(data(found), vec![paths[0].clone()], "found by reachability");
    assert!(!cache.live.is_empty() && cache.deleted.is_empty());

    // A tag besides main: reachability.
    let tagged = LoadedTable {
        metadata: Arc::new(
            apply_locally(
                &t,
                &TableChanges::new(
                    Vec::new(),
                    vec![TableUpdate::SetSnapshotRef {
                        ref_name: "keep".into(),
                        reference: tag(s[2].1, None),
                    }],
                ),
            )
            .unwrap()
            .0,
        ),
        ..t.clone()
    };
    let mut fresh = ProofCache::default();
    assert_eq!(
        super::reach::incremental_scope(&name, &tagged, &after, &expired, &mut fresh).unwrap(),
        None
    );
}

#[test]
fn roots_and_containment_normalize() {
    let md_json = r#"{"format-version":2,"table-uuid":"9c12d441-03fe-4693-9a96-a0705ddf69c1","location":"s3a://bucket/wh/t/","last-sequence-number":0,"last-updated-ms":1,"last-column-id":1,"current-schema-id":0,"schemas":[{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"x","required":true,"type":"long"}]}],"default-spec-id":0,"partition-specs":[{"spec-id":0,"fields":[]}],"last-partition-id":999,"default-sort-order-id":0,"sort-orders":[{"order-id":0,"fields":[]}],"properties":{"write.data.path":"s3://other/data"},"snapshots":[],"snapshot-log":[],"metadata-log":[]}"#;
    let md: TableMetadata = serde_json::from_str(md_json).unwrap();
    let roots = table_roots(&md);
    assert!(within(&roots, "s3://bucket/wh/t/data/a.parquet"));
    assert!(within(&roots, "s3a://bucket//wh/t/metadata/m.avro"));
    assert!(within(&roots, "s3://other/data/x.parquet"));
    assert!(!within(&roots, "s3://bucket/wh/t2/data/a.parquet"));
    assert!(!within(&roots, "s3://bucket/wh/x.parquet"));
    assert_eq!(key("s3a://b//k/x"), key("s3://b/k/x"));
}
