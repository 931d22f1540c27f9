//! Commits through the SeaweedFS Iceberg REST catalog (`scripts/services.sh`): appends and
//! replaces applied by the server, read back through the REST catalog, a stale base refused
//! with a conflict, and the retry loop across a concurrent append.
//!
//! `rest_table_written_by_pyiceberg` is driven by `tests/py/test_commit_rest.py`: PyIceberg
//! writes a table, this test compacts it through the retry loop, PyIceberg reads it back.
#![allow(clippy::too_many_lines)] // Reason: each test walks one commit history end to end.

use std::collections::BTreeSet;

use cryo_core::commit::{
    CatalogCommitter, CommitRetry, NewTable, RestCommitter, RetryPolicy, SnapshotProducer,
    TableChanges, live_files, validate_rewrite,
};
use cryo_core::{Catalog, CatalogConfig, Error, LoadedTable, Namespace, TableId};
use iceberg::spec::{DataContentType, FormatVersion};

use crate::common::service_env;
use crate::replace::{
    DAY0, DAY1, Group, append, by_day, expected, paths, read_rows, rewrite_partition, schema,
};

fn rest_config(name: &str, extra: &[(&str, String)]) -> CatalogConfig {
    let mut props = vec![
        ("type".to_string(), "rest".to_string()),
        ("uri".to_string(), service_env("CRYO_REST_URI")),
        ("warehouse".to_string(), service_env("CRYO_REST_WAREHOUSE")),
        (
            "credential".to_string(),
            service_env("CRYO_REST_CREDENTIAL"),
        ),
        (
            "s3.endpoint".to_string(),
            service_env("CRYO_SEAWEED_S3_ENDPOINT"),
        ),
        (
            "s3.access-key-id".to_string(),
            service_env("CRYO_SEAWEED_ACCESS_KEY"),
        ),
        (
            "s3.secret-access-key".to_string(),
            service_env("CRYO_SEAWEED_SECRET_KEY"),
        ),
        ("s3.path-style-access".to_string(), "true".to_string()),
        ("s3.region".to_string(), "us-east-1".to_string()),
    ];
    props.extend(extra.iter().map(|(k, v)| ((*k).to_string(), v.clone())));
    CatalogConfig::new(name, props)
}

/// A fresh table in the REST catalog (a unique name: the catalog outlives the test).
async fn fresh_table(catalog: &Catalog, ns: &str) -> (TableId, LoadedTable) {
    let ns = Namespace::new([ns]);
    catalog.create_namespace(&ns).await.unwrap();
    let name = format!("t_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let id = TableId::new(ns, name);
    let t = catalog
        .create_table(&id, NewTable::new(schema()).with_partition_spec(by_day()))
        .await
        .unwrap();
    (id, t)
}

/// Compact `groups` (rewritten from `s0`) through the orchestrator's loop; `between` runs once,
/// after the first stage and before its commit (a concurrent writer).
async fn compact_with_retries(
    committer: &dyn CatalogCommitter,
    s0: &LoadedTable,
    groups: &[Group],
    between: impl AsyncFnOnce(),
) -> (cryo_core::commit::CommitOutcome, u32) {
    let s0_seq = s0.metadata.current_snapshot().unwrap().sequence_number();
    let replaced: BTreeSet<String> = groups.iter().flat_map(|g| paths(&g.data)).collect();
    let mut retry = CommitRetry::new(RetryPolicy {
        min_backoff_ms: 10,
        max_backoff_ms: 100,
        ..RetryPolicy::default()
    })
    .unwrap();
    let mut head = committer.load_head(s0).await.unwrap();
    let mut between = Some(between);
    loop {
        let conflicts = validate_rewrite(s0, &head, &replaced).await.unwrap();
        assert!(conflicts.is_empty(), "{conflicts:?}");
        let mut producer = SnapshotProducer::replace(&head).with_data_sequence_number(s0_seq);
        for g in groups {
            producer = producer
                .delete_data_files(paths(&g.data))
                .remove_delete_files(g.deletes.clone())
                .add_data_files(g.new_files.clone());
        }
        let staged = producer.stage().await.unwrap();
        retry.staged(&staged);
        if let Some(f) = between.take() {
            f().await;
        }
        match staged.commit(committer).await {
            Ok(outcome) => return (outcome, retry.failed_attempts()),
            Err(e) => {
                assert!(matches!(e, Error::CommitConflict { .. }), "{e}");
                head = retry.reload_after(committer, &head, e).await.unwrap();
            }
        }
    }
}

#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn rest_append_replace_and_stale_commits() {
    let config = rest_config("rest", &[]);
    let catalog = Catalog::connect(config.clone()).await.unwrap();
    let committer = catalog.committer().unwrap();
    let c = committer.as_ref();
    let (id, t) = fresh_table(&catalog, "cryo_commit_it").await;
    assert!(t.metadata.current_snapshot().is_none());

    // Appends: the server applies them and returns its head.
    let t1 = append(c, &t, 0..20).await;
    let t2 = append(c, &t1, 20..40).await;
    let reloaded = catalog.load_table(&id).await.unwrap();
    assert_eq!(reloaded.metadata_location, t2.metadata_location);
    assert_eq!(reloaded.metadata.snapshots().count(), 2);
    let mut ids: BTreeSet<i64> = (0..40).collect();
    assert_eq!(read_rows(&reloaded).await, expected(&ids));

    // A stale base: an append staged on S0 loses to a replace committed first.
    let s0 = reloaded;
    let stale = SnapshotProducer::new(&s0)
        .add_data_files(
            cryo_core::commit::write_data_files(&s0, [crate::replace::rows(500..502)])
                .await
                .unwrap()
                .files,
        )
        .stage()
        .await
        .unwrap();
    let stale_files = stale.written_files.clone();
    let group = rewrite_partition(&s0, DAY0, 0).await;
    assert_eq!(group.data.len(), 2);
    let (outcome, failed) = compact_with_retries(c, &s0, &[group], async || {}).await;
    assert_eq!(failed, 0);
    assert_eq!(outcome.operation, "replace");
    assert_eq!(outcome.summary["deleted-data-files"], "2");
    let err = stale.commit(c).await.unwrap_err();
    assert!(matches!(err, Error::CommitConflict { .. }), "{err}");
    for f in &stale_files {
        assert!(
            s0.storage.head(f).await.unwrap().is_none(),
            "{f} left behind"
        );
    }
    // The raw committer: requirements the server checks.
    let changes = TableChanges::new(
        vec![iceberg::TableRequirement::RefSnapshotIdMatch {
            r#ref: "main".into(),
            snapshot_id: s0.metadata.current_snapshot_id(),
        }],
        vec![iceberg::TableUpdate::SetProperties {
            updates: [("cryo.test".to_string(), "stale".to_string())].into(),
        }],
    );
    let err = c.commit(&s0, changes).await.unwrap_err();
    assert!(matches!(err, Error::CommitConflict { .. }), "{err}");
    // Publishing a metadata file is not how REST catalogs commit.
    let err = c.publish(&s0, &s0.metadata).await.unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");

    // Through the REST catalog again: the replace is the head, the rows are the same.
    let head = catalog.load_table(&id).await.unwrap();
    assert_eq!(head.metadata_location, outcome.table.metadata_location);
    let ops: Vec<String> = {
        let mut snaps: Vec<_> = head.metadata.snapshots().collect();
        snaps.sort_by_key(|s| s.sequence_number());
        snaps
            .iter()
            .map(|s| s.summary().operation.as_str().to_string())
            .collect()
    };
    assert_eq!(ops, ["append", "append", "replace"]);
    assert_eq!(read_rows(&head).await, expected(&ids));

    // The retry loop across a concurrent append: the server refuses the stale replace (409),
    // the loop reloads, validates and commits on the new head.
    let s0 = head;
    let group = rewrite_partition(&s0, DAY1, 1).await;
    let writer = catalog.committer().unwrap();
    let (outcome, failed) = compact_with_retries(c, &s0, &[group], async || {
        let w = writer.load_head(&s0).await.unwrap();
        append(writer.as_ref(), &w, 100..104).await;
    })
    .await;
    ids.extend(100..104);
    assert_eq!(failed, 1);
    let head = catalog.load_table(&id).await.unwrap();
    assert_eq!(head.metadata_location, outcome.table.metadata_location);
    assert_eq!(read_rows(&head).await, expected(&ids));
    let data_files = live_files(&head)
        .await
        .unwrap()
        .into_iter()
        .filter(|f| f.file.content_type() == DataContentType::Data)
        .count();
    assert_eq!(
        data_files, 4,
        "one file per day from the rewrites, two from the append"
    );

    // The committer never shows the credential.
    let rest = RestCommitter::new(&config).unwrap();
    let secret = service_env("CRYO_SEAWEED_SECRET_KEY");
    assert!(!rest.prefix().await.unwrap().is_empty());
    assert!(!format!("{rest:?}").contains(&secret));
    let bad = rest_config(
        "rest",
        &[("credential", "admin:not-the-secret-x9".to_string())],
    );
    let err = RestCommitter::new(&bad)
        .unwrap()
        .load_head(&s0)
        .await
        .unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(
        matches!(
            err,
            Error::Catalog {
                retryable: false,
                ..
            }
        ),
        "{shown}"
    );
    assert!(!shown.contains("not-the-secret-x9"), "{shown}");
}

/// Driven by `tests/py/test_commit_rest.py` with `CRYO_REST_PEER_TABLE=<ns>.<table>`: compact a
/// table PyIceberg wrote (one file per day), with an append committed between stage and commit.
#[tokio::test]
#[ignore = "run by tests/py/test_commit_rest.py, which writes the table (cargo test -- --ignored)"]
async fn rest_table_written_by_pyiceberg() {
    let table = std::env::var("CRYO_REST_PEER_TABLE").expect(
        "CRYO_REST_PEER_TABLE is not set: tests/py/test_commit_rest.py writes the table and runs this test",
    );
    let config = rest_config("rest", &[]);
    let catalog = Catalog::connect(config).await.unwrap();
    let committer = catalog.committer().unwrap();
    let c = committer.as_ref();
    let id = TableId::parse(&table).unwrap();
    let s0 = catalog.load_table(&id).await.unwrap();
    assert_eq!(s0.metadata.format_version(), FormatVersion::V2);
    let groups = [
        rewrite_partition(&s0, DAY0, 0).await,
        rewrite_partition(&s0, DAY1, 1).await,
    ];
    let (outcome, failed) = compact_with_retries(c, &s0, &groups, async || {
        let w = c.load_head(&s0).await.unwrap();
        append(c, &w, 1000..1010).await;
    })
    .await;
    assert_eq!(failed, 1);
    eprintln!(
        "peer-table: ok snapshot={} replaced={} added={}",
        outcome.snapshot_id, outcome.removed_data_files, outcome.added_data_files
    );
}

/// The native compactor on an object store (SeaweedFS S3 behind the REST catalog): its files go
/// through the table's file I/O (upstream's rolling writers), not the local direct writer; every
/// row stays, every new file is on S3 with its metrics.
#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn rest_table_compacted_natively_on_s3() {
    let config = rest_config("rest", &[]);
    let catalog = Catalog::connect(config).await.unwrap();
    let committer = catalog.committer().unwrap();
    let c = committer.as_ref();
    let (id, mut t) = fresh_table(&catalog, "cryo_compact_it").await;
    let mut ids = BTreeSet::new();
    for f in 0..6i64 {
        let batch: Vec<i64> = (f * 10..f * 10 + 10).collect();
        ids.extend(batch.iter().copied());
        t = append(c, &t, batch).await;
    }
    let out = cryo_core::compact::compact(
        &catalog,
        &id,
        &cryo_core::compact::CompactOptions::default(),
    )
    .await
    .unwrap();
    assert!(out.committed_groups() >= 1, "{:?}", out.groups);
    assert!(out.files_out() < out.files_in());
    eprintln!(
        "s3 compaction: {} groups committed, {} files -> {}",
        out.committed_groups(),
        out.files_in(),
        out.files_out()
    );
    let after = catalog.load_table(&id).await.unwrap();
    assert_eq!(read_rows(&after).await, expected(&ids));
    let live = live_files(&after).await.unwrap();
    let data: Vec<_> = live
        .iter()
        .map(|f| &f.file)
        .filter(|f| f.content_type() == DataContentType::Data)
        .collect();
    assert!(!data.is_empty());
    for f in data {
        assert!(f.file_path().starts_with("s3://"), "{}", f.file_path());
        assert!(!f.lower_bounds().is_empty() && !f.column_sizes().is_empty());
    }
}
