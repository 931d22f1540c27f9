//! The commit layer: create tables, write and commit files, reload, scan, read back, conflicts.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
use arrow_schema::{DataType, Field, Schema as ArrowSchema, TimeUnit};
use cryo_core::clock::{FixedClock, SystemClock};
use cryo_core::commit::{
    NewTable, SnapshotProducer, live_files, write_data_files, write_deletion_vectors,
    write_equality_deletes, write_position_deletes,
};
use cryo_core::io::PathKind;
use cryo_core::scan::{ScanOptions, scan_table};
use cryo_core::{Catalog, CatalogConfig, Error, LoadedTable, Namespace, TableId};
use iceberg::spec::{
    FormatVersion, NestedField, PrimitiveType, Schema, Transform, Type, UnboundPartitionSpec,
};

const DAY_US: i64 = 86_400_000_000;
/// 2026-01-01T00:00:00Z in microseconds.
const T0_US: i64 = 1_767_225_600_000_000;

async fn sql_catalog(dir: &std::path::Path) -> Catalog {
    let mut config = CatalogConfig::local("it", dir);
    config
        .properties
        .insert("init_catalog_tables".into(), "true".into());
    let catalog = Catalog::connect(config).await.unwrap();
    catalog
        .create_namespace(&Namespace::new(["db"]))
        .await
        .unwrap();
    catalog
}

async fn hadoop_catalog(dir: &std::path::Path) -> Catalog {
    let config = CatalogConfig::new(
        "hadoop",
        [
            ("type", "hadoop".to_string()),
            ("warehouse", format!("file://{}/hadoop", dir.display())),
        ],
    );
    Catalog::connect(config).await.unwrap()
}

fn schema() -> Schema {
    Schema::builder()
        .with_fields(vec![
            NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::required(2, "ts", Type::Primitive(PrimitiveType::Timestamptz)).into(),
            NestedField::optional(3, "name", Type::Primitive(PrimitiveType::String)).into(),
        ])
        .build()
        .unwrap()
}

fn by_day() -> UnboundPartitionSpec {
    UnboundPartitionSpec::builder()
        .add_partition_field(2, "ts_day", Transform::Day)
        .unwrap()
        .build()
}

/// `n` rows with ids from `first`, spread over `days` days from 2026-01-01.
fn rows(first: i64, n: i64, days: i64) -> RecordBatch {
    let schema = Arc::new(ArrowSchema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        Field::new("name", DataType::Utf8, true),
    ]));
    let ids: Vec<i64> = (first..first + n).collect();
    let ts: Vec<i64> = ids
        .iter()
        .map(|i| T0_US + (i % days) * DAY_US + i)
        .collect();
    let names: Vec<Option<String>> = ids
        .iter()
        .map(|i| (i % 7 != 0).then(|| format!("name-{i}")))
        .collect();
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(ids)) as ArrayRef,
            Arc::new(TimestampMicrosecondArray::from(ts).with_timezone("UTC")),
            Arc::new(StringArray::from(names)),
        ],
    )
    .unwrap()
}

/// Rows as the upstream reader returns them (deletes applied).
async fn read_rows(table: &LoadedTable) -> usize {
    let batches = crate::common::scan_rows(table).await;
    batches.iter().map(RecordBatch::num_rows).sum()
}

async fn append(catalog: &Catalog, table: &LoadedTable, batch: RecordBatch) -> LoadedTable {
    let written = write_data_files(table, [batch]).await.unwrap();
    SnapshotProducer::new(table)
        .add_data_files(written.files)
        .commit(catalog.committer().unwrap().as_ref())
        .await
        .unwrap()
        .table
}

#[tokio::test]
async fn create_append_reload_and_scan_every_format_version() {
    for version in [FormatVersion::V1, FormatVersion::V2, FormatVersion::V3] {
        let dir = tempfile::tempdir().unwrap();
        let catalog = sql_catalog(dir.path()).await;
        let id = TableId::parse(&format!("db.events_{version}")).unwrap();
        let created = catalog
            .create_table(
                &id,
                NewTable::new(schema())
                    .with_partition_spec(by_day())
                    .with_format_version(version),
            )
            .await
            .unwrap();
        assert!(
            created
                .metadata_location
                .as_deref()
                .unwrap()
                .contains("/metadata/00000-")
        );
        assert!(created.metadata.current_snapshot().is_none());

        let t1 = append(&catalog, &created, rows(0, 30, 3)).await;
        let t2 = append(&catalog, &t1, rows(30, 20, 2)).await;
        assert!(
            t2.metadata_location
                .as_deref()
                .unwrap()
                .contains("/metadata/00002-")
        );

        let reloaded = catalog.load_table(&id).await.unwrap();
        assert_eq!(reloaded.metadata_location, t2.metadata_location);
        let scan = scan_table(&catalog, &id, &ScanOptions::default(), &SystemClock)
            .await
            .unwrap();
        assert_eq!(scan.snapshots.count, 2, "{version}");
        assert_eq!(scan.data_files.count, 5, "{version}: 3 + 2 day partitions");
        assert_eq!(scan.data_files.records, 50, "{version}");
        assert_eq!(scan.partitions.len(), 3, "{version}");
        assert_eq!(
            scan.manifests.count, 2,
            "{version}: one per append, carried over"
        );
        assert_eq!(scan.format_version, version as u8);
        assert_eq!(read_rows(&reloaded).await, 50, "{version}");

        let snap = reloaded.metadata.current_snapshot().unwrap();
        let summary = &snap.summary().additional_properties;
        assert_eq!(summary["total-records"], "50", "{version}");
        assert_eq!(summary["total-data-files"], "5", "{version}");
        assert_eq!(summary["added-records"], "20", "{version}");
        let expected_seq = if version == FormatVersion::V1 { 0 } else { 2 };
        assert_eq!(snap.sequence_number(), expected_seq, "{version}");
        if version == FormatVersion::V3 {
            assert_eq!(snap.first_row_id(), Some(30));
            assert_eq!(reloaded.metadata.next_row_id(), 50);
        }
        // Codec: the table sets none, so zstd, and the writer says so.
        let w = write_data_files(&reloaded, [rows(100, 1, 1)])
            .await
            .unwrap();
        assert!(w.codec_defaulted && w.codec.starts_with("zstd"));
        for f in &w.files {
            reloaded.storage.delete(f.file_path()).await.unwrap();
        }
    }
}

#[tokio::test]
async fn deletes_are_applied_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let id = TableId::parse("db.mor").unwrap();
    let table = catalog
        .create_table(&id, NewTable::new(schema()).with_partition_spec(by_day()))
        .await
        .unwrap();
    let table = append(&catalog, &table, rows(0, 40, 2)).await;
    let data = live_files(&table).await.unwrap();
    assert_eq!(data.len(), 2);
    // `a` holds the even ids (day 0), `b` the odd ones (day 1), in id order.
    let path_of = |day: &str| {
        data.iter()
            .map(|f| f.file.file_path().to_string())
            .find(|p| p.contains(day))
            .unwrap()
    };
    let (a, b) = (path_of("ts_day=2026-01-01"), path_of("ts_day=2026-01-02"));

    // Position deletes: 3 rows of one file (one duplicate), 1 of the other.
    let pos = write_position_deletes(
        &table,
        &[(a.clone(), vec![0, 5, 5, 7]), (b.clone(), vec![1])],
    )
    .await
    .unwrap();
    assert_eq!(pos.files.len(), 2, "one delete file per partition");
    assert_eq!(pos.records, 4);
    assert!(pos.files.iter().all(|f| f.referenced_data_file().is_some()));
    let out = SnapshotProducer::new(&table)
        .add_delete_files(pos.files)
        .commit(catalog.committer().unwrap().as_ref())
        .await
        .unwrap();
    assert_eq!(out.operation, "delete");
    assert_eq!(out.summary["added-position-deletes"], "4");
    assert_eq!(out.summary["total-position-deletes"], "4");
    let table = out.table;
    assert_eq!(read_rows(&table).await, 36);

    // Equality deletes for ids 20, 21, 22 (none of them position-deleted) and id 20 inserted
    // again in the same commit: an overwrite.
    let keys = RecordBatch::try_new(
        Arc::new(ArrowSchema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
                false,
            ),
        ])),
        vec![
            Arc::new(Int64Array::from(vec![20, 21, 22])) as ArrayRef,
            Arc::new(
                TimestampMicrosecondArray::from(vec![T0_US + 20, T0_US + DAY_US + 21, T0_US + 22])
                    .with_timezone("+00:00"),
            ),
        ],
    )
    .unwrap();
    let eq = write_equality_deletes(&table, &["id"], [keys])
        .await
        .unwrap();
    assert_eq!(eq.files.len(), 2, "keys land in their partitions");
    assert!(eq.files.iter().all(|f| f.equality_ids() == Some(vec![1])));
    let new_rows = write_data_files(&table, [rows(20, 1, 2)]).await.unwrap();
    let out = SnapshotProducer::new(&table)
        .add_delete_files(eq.files)
        .add_data_files(new_rows.files)
        .commit(catalog.committer().unwrap().as_ref())
        .await
        .unwrap();
    assert_eq!(out.operation, "overwrite");
    assert_eq!(out.summary["added-equality-delete-files"], "2");
    let table = out.table;
    // 36 - 3 deleted keys + 1 re-inserted key (same commit: the delete does not apply to it).
    assert_eq!(read_rows(&table).await, 34);

    // A metadata-only delete of file `a` leaves its position delete dangling.
    let out = SnapshotProducer::new(&table)
        .delete_data_files([a.clone()])
        .commit(catalog.committer().unwrap().as_ref())
        .await
        .unwrap();
    assert_eq!(out.operation, "delete");
    assert_eq!(out.summary["deleted-data-files"], "1");
    assert_eq!(out.summary["total-data-files"], "2");
    let scan = scan_table(&catalog, &id, &ScanOptions::default(), &SystemClock)
        .await
        .unwrap();
    assert_eq!(scan.data_files.count, 2);
    assert_eq!(scan.delete_files.position.files, 2);
    assert_eq!(scan.delete_files.position.dangling, 1);
    assert_eq!(scan.delete_files.equality.files, 2);
    assert_eq!(scan.snapshots.count, 4);
    let live = live_files(&out.table).await.unwrap();
    assert!(live.iter().all(|f| f.file.file_path() != a));
    // Rows of `b` (20, one position-deleted, one key deleted) + the new row.
    assert_eq!(read_rows(&out.table).await, 19);

    // Removing a file that is not live is refused before anything is committed.
    let err = SnapshotProducer::new(&out.table)
        .delete_data_files([a])
        .commit(catalog.committer().unwrap().as_ref())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Validation { .. }), "{err}");
    assert_eq!(
        catalog.load_table(&id).await.unwrap().metadata_location,
        out.table.metadata_location
    );
}

#[tokio::test]
async fn v1_and_v3_refuse_what_they_cannot_hold() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    for (name, version) in [("v1", FormatVersion::V1), ("v3", FormatVersion::V3)] {
        let id = TableId::new(Namespace::new(["db"]), name);
        let t = catalog
            .create_table(&id, NewTable::new(schema()).with_format_version(version))
            .await
            .unwrap();
        let t = append(&catalog, &t, rows(0, 5, 1)).await;
        let path = live_files(&t).await.unwrap()[0]
            .file
            .file_path()
            .to_string();
        let err = write_position_deletes(&t, &[(path.clone(), vec![0])])
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Unsupported { .. }), "{name}: {err}");
        if version == FormatVersion::V1 {
            // Nor deletion vectors below v3.
            let err = write_deletion_vectors(&t, &[(path, vec![0])])
                .await
                .unwrap_err();
            assert!(matches!(err, Error::Unsupported { .. }), "{name}: {err}");
        }
    }
}

/// v3 row-level deletes are deletion vectors, one per data file (v1 refuses them: see above): a second delete on a data file
/// merges the live vector into its own and supersedes it in the same commit; a vector beside the
/// live one, or a supersede of a vector that is not live, is refused; compaction applies them.
#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one table's story, delete after delete"
)]
async fn v3_deletes_are_deletion_vectors_merged_per_data_file() {
    use cryo_core::commit::DeletionVectors;
    use cryo_core::compact::{CompactOptions, Compaction};
    use iceberg::spec::{DataContentType, DataFileFormat};
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let committer = catalog.committer().unwrap();
    let id = TableId::new(Namespace::new(["db"]), "dv");
    let t = catalog
        .create_table(
            &id,
            NewTable::new(schema()).with_format_version(FormatVersion::V3),
        )
        .await
        .unwrap();
    let t = append(&catalog, &t, rows(0, 5, 1)).await;
    let path = live_files(&t).await.unwrap()[0]
        .file
        .file_path()
        .to_string();
    let vectors = |t: LoadedTable| async move {
        live_files(&t)
            .await
            .unwrap()
            .into_iter()
            .filter(|f| f.file.content_type() == DataContentType::PositionDeletes)
            .map(|f| {
                (
                    f.file.referenced_data_file(),
                    f.file.record_count(),
                    f.file.file_format(),
                )
            })
            .collect::<Vec<_>>()
    };

    let first = write_deletion_vectors(&t, &[(path.clone(), vec![0, 2])])
        .await
        .unwrap();
    assert!(first.superseded.is_empty());
    assert_eq!((first.files.len(), first.records), (1, 2));
    let stale = t.clone();
    let t = SnapshotProducer::new(&t)
        .add_deletion_vectors(first)
        .commit(committer.as_ref())
        .await
        .unwrap()
        .table;

    let second = write_deletion_vectors(&t, &[(path.clone(), vec![2, 4])])
        .await
        .unwrap();
    assert_eq!(second.superseded, vec![path.clone()]);
    assert_eq!(second.records, 3, "{second:?}");
    // The same vector added beside the live one, not superseding it: refused.
    let err = SnapshotProducer::new(&t)
        .add_delete_files(second.files.clone())
        .commit(committer.as_ref())
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Validation { .. }) && err.to_string().contains("at most one"),
        "{err}"
    );
    // A supersede of a vector the base does not have: refused.
    let mut misplaced = DeletionVectors::default();
    misplaced.files.clone_from(&second.files);
    misplaced.superseded.push(path.clone());
    let err = SnapshotProducer::new(&stale)
        .add_deletion_vectors(misplaced)
        .commit(committer.as_ref())
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Validation { .. }) && err.to_string().contains("not live"),
        "{err}"
    );
    let t = SnapshotProducer::new(&t)
        .add_deletion_vectors(second)
        .commit(committer.as_ref())
        .await
        .unwrap()
        .table;
    assert_eq!(
        vectors(t.clone()).await,
        vec![(Some(path.clone()), 3, DataFileFormat::Puffin)]
    );
    let summary = &t
        .metadata
        .current_snapshot()
        .unwrap()
        .summary()
        .additional_properties;
    assert_eq!(
        summary.get("total-position-deletes").map(String::as_str),
        Some("3")
    );
    assert_eq!(
        summary.get("total-delete-files").map(String::as_str),
        Some("1")
    );

    // Compaction applies the vector: two rows are left, and no vector.
    Compaction::new(&catalog, id.clone())
        .with_options(CompactOptions {
            delete_file_threshold: 1,
            rewrite_all: true,
            ..CompactOptions::default()
        })
        .execute()
        .await
        .unwrap();
    let t = catalog.load_table(&id).await.unwrap();
    assert!(vectors(t.clone()).await.is_empty());
    assert_eq!(read_rows(&t).await, 2);
}

/// Two writers build on the same base; the second must lose cleanly.
async fn second_writer_conflicts(catalog: &Catalog, id: &TableId) {
    let base = catalog.load_table(id).await.unwrap();
    let committer = catalog.committer().unwrap();
    let a = write_data_files(&base, [rows(1000, 3, 1)]).await.unwrap();
    let b = write_data_files(&base, [rows(2000, 3, 1)]).await.unwrap();
    let staged_a = SnapshotProducer::new(&base)
        .add_data_files(a.files)
        .stage()
        .await
        .unwrap();
    let staged_b = SnapshotProducer::new(&base)
        .add_data_files(b.files)
        .stage()
        .await
        .unwrap();
    let b_files = staged_b.written_files.clone();
    let after_a = staged_a.commit(committer.as_ref()).await.unwrap().table;

    let err = staged_b.commit(committer.as_ref()).await.unwrap_err();
    assert!(matches!(err, Error::CommitConflict { .. }), "{err}");
    assert!(err.is_retryable());
    assert_eq!(err.code(), "commit_conflict");
    let head = catalog.load_table(id).await.unwrap();
    assert_eq!(
        head.metadata_location, after_a.metadata_location,
        "the table did not change"
    );
    assert_eq!(
        head.metadata.snapshots().count(),
        after_a.metadata.snapshots().count()
    );
    for f in &b_files {
        assert!(
            head.storage.head(f).await.unwrap().is_none(),
            "{f} left behind"
        );
    }

    // The raw committer: a stale base whose requirement no longer holds.
    let changes = cryo_core::commit::TableChanges::new(
        vec![iceberg::TableRequirement::RefSnapshotIdMatch {
            r#ref: "main".into(),
            snapshot_id: base.metadata.current_snapshot_id(),
        }],
        vec![iceberg::TableUpdate::SetProperties {
            updates: [("k".to_string(), "v".to_string())].into(),
        }],
    );
    let err = committer.commit(&base, changes.clone()).await.unwrap_err();
    assert!(matches!(err, Error::CommitConflict { .. }), "{err}");
    assert_eq!(
        catalog.load_table(id).await.unwrap().metadata_location,
        after_a.metadata_location
    );
    // Against the current head it goes through.
    let head = committer
        .commit(
            &after_a,
            cryo_core::commit::TableChanges {
                requirements: vec![iceberg::TableRequirement::RefSnapshotIdMatch {
                    r#ref: "main".into(),
                    snapshot_id: after_a.metadata.current_snapshot_id(),
                }],
                ..changes
            },
        )
        .await
        .unwrap();
    assert_eq!(
        head.metadata.properties().get("k").map(String::as_str),
        Some("v")
    );
    assert_eq!(
        head.metadata
            .metadata_log()
            .last()
            .map(|l| l.metadata_file.clone()),
        after_a.metadata_location
    );
}

#[tokio::test]
async fn concurrent_commit_conflicts_on_sql_catalogs() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let id = TableId::parse("db.race").unwrap();
    let t = catalog
        .create_table(&id, NewTable::new(schema()))
        .await
        .unwrap();
    append(&catalog, &t, rows(0, 5, 1)).await;
    second_writer_conflicts(&catalog, &id).await;
}

/// The same compare-and-swap on a PostgreSQL catalog database (`scripts/services.sh` starts the
/// server); each run scopes its rows by a catalog name of its own.
#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn concurrent_commit_conflicts_on_postgres_catalogs() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!("it_{}", uuid::Uuid::new_v4().simple());
    let uri = crate::common::service_env("CRYO_POSTGRES_URI");
    let config = CatalogConfig::new(
        name.clone(),
        [
            ("uri", uri.clone()),
            ("warehouse", format!("file://{}/wh", dir.path().display())),
            ("init_catalog_tables", "true".to_string()),
        ],
    );
    let catalog = Catalog::connect(config).await.unwrap();
    assert_eq!(
        catalog.as_sql().unwrap().dialect(),
        cryo_core::catalog::SqlDialect::Postgres
    );
    catalog
        .create_namespace(&Namespace::new(["db"]))
        .await
        .unwrap();
    let id = TableId::parse("db.race").unwrap();
    let t = catalog
        .create_table(&id, NewTable::new(schema()))
        .await
        .unwrap();
    append(&catalog, &t, rows(0, 5, 1)).await;
    assert_eq!(catalog.list_all_tables().await.unwrap(), vec![id.clone()]);
    second_writer_conflicts(&catalog, &id).await;
    let scan = scan_table(&catalog, &id, &ScanOptions::default(), &SystemClock)
        .await
        .unwrap();
    assert_eq!(scan.data_files.records, 5 + 3);

    // The JDBC spelling with credentials in jdbc.user/jdbc.password reaches the same rows.
    let url = url::Url::parse(&uri).unwrap();
    let jdbc = CatalogConfig::new(
        name.clone(),
        [
            (
                "uri",
                format!(
                    "jdbc:postgresql://{}:{}{}",
                    url.host_str().unwrap(),
                    url.port().unwrap(),
                    url.path()
                ),
            ),
            ("jdbc.user", url.username().to_string()),
            ("jdbc.password", url.password().unwrap().to_string()),
        ],
    );
    let again = Catalog::connect(jdbc).await.unwrap();
    assert_eq!(
        again.load_table(&id).await.unwrap().metadata_location,
        catalog.load_table(&id).await.unwrap().metadata_location
    );

    // A wrong password is a typed catalog error that shows neither password.
    let mut wrong = url.clone();
    wrong.set_password(Some("not-the-password")).unwrap();
    let err = Catalog::connect(CatalogConfig::new(name, [("uri", wrong.to_string())]))
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Catalog { .. }), "{msg}");
    assert!(msg.contains("password authentication failed"), "{msg}");
    assert!(
        !msg.contains("not-the-password") && !msg.contains(url.password().unwrap()),
        "{msg}"
    );
}

/// One Glue call to moto's server, the way a test sets a table up (moto routes a request by the
/// service in its credential scope and does not check signatures).
async fn glue_call(endpoint: &str, op: &str, body: serde_json::Value) -> serde_json::Value {
    let response = reqwest::Client::new()
        .post(endpoint)
        .header("content-type", "application/x-amz-json-1.1")
        .header("x-amz-target", format!("AWSGlue.{op}"))
        .header(
            "authorization",
            "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/glue/aws4_request, SignedHeaders=host, Signature=00",
        )
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    assert!(status.is_success(), "{op}: {status} {text}");
    serde_json::from_str(&text).unwrap()
}

/// A table written through a sqlite catalog under `dir`, registered in a new Glue database
/// (Glue only holds the pointer): the database and the table as written.
async fn register_in_glue(endpoint: &str, dir: &std::path::Path) -> (String, LoadedTable) {
    let sql = sql_catalog(dir).await;
    let sid = TableId::parse("db.race").unwrap();
    let t = sql
        .create_table(&sid, NewTable::new(schema()))
        .await
        .unwrap();
    let t = append(&sql, &t, rows(0, 5, 1)).await;
    let db = format!("it_{}", uuid::Uuid::new_v4().simple());
    glue_call(
        endpoint,
        "CreateDatabase",
        serde_json::json!({ "DatabaseInput": { "Name": db } }),
    )
    .await;
    glue_call(
        endpoint,
        "CreateTable",
        serde_json::json!({
            "DatabaseName": db,
            "TableInput": {
                "Name": "race",
                "Description": "kept across commits",
                "TableType": "EXTERNAL_TABLE",
                "Parameters": { "table_type": "ICEBERG", "metadata_location": t.metadata_location, "owner-team": "data" },
                "StorageDescriptor": { "Location": t.metadata.location(), "Columns": [{ "Name": "id", "Type": "bigint" }] },
            }
        }),
    )
    .await;
    (db, t)
}

/// Glue (moto's server implements its API): a table registered in Glue commits through Cryo's
/// compare-and-swap (the `metadata_location` check, then `UpdateTable` with the `VersionId` read),
/// a second writer from the same base conflicts and changes nothing, the table's other Glue
/// fields survive the update, and a table dropped under a loaded one is `NotFound`.
#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn concurrent_commit_conflicts_on_glue_catalogs() {
    let endpoint = crate::common::service_env("CRYO_MOTO_ENDPOINT");
    let dir = tempfile::tempdir().unwrap();
    let (db, t) = register_in_glue(&endpoint, dir.path()).await;
    let config = CatalogConfig::new(
        "glue",
        [
            ("type", "glue".to_string()),
            ("glue.endpoint", endpoint.clone()),
            ("glue.region", "us-east-1".to_string()),
            ("glue.access-key-id", "testing".to_string()),
            ("glue.secret-access-key", "planted-secret-g".to_string()),
        ],
    );
    let glue = Catalog::connect(config).await.unwrap();
    let ns = Namespace::new([db.clone()]);
    let id = TableId::new(ns.clone(), "race");
    assert_eq!(glue.list_tables(&ns).await.unwrap(), vec![id.clone()]);
    assert!(glue.list_namespaces().await.unwrap().contains(&ns));
    let before = glue.load_table(&id).await.unwrap();
    assert_eq!(before.metadata_location, t.metadata_location);

    second_writer_conflicts(&glue, &id).await;
    let head = glue.load_table(&id).await.unwrap();
    let raw = glue_call(
        &endpoint,
        "GetTable",
        serde_json::json!({ "DatabaseName": db, "Name": "race" }),
    )
    .await;
    let params = &raw["Table"]["Parameters"];
    assert_eq!(
        params["metadata_location"].as_str(),
        head.metadata_location.as_deref()
    );
    // The previous location is the head's predecessor (the last entry of its metadata log).
    let previous = head
        .metadata
        .metadata_log()
        .last()
        .map(|l| l.metadata_file.clone());
    assert_eq!(
        params["previous_metadata_location"].as_str(),
        previous.as_deref()
    );
    assert_eq!(params["table_type"], "ICEBERG");
    assert_eq!(params["owner-team"], "data");
    assert_eq!(raw["Table"]["Description"], "kept across commits");
    assert_eq!(
        raw["Table"]["StorageDescriptor"]["Location"],
        t.metadata.location()
    );

    // Dropped between load and commit: the commit is refused as NotFound, and changes nothing.
    glue_call(
        &endpoint,
        "DeleteTable",
        serde_json::json!({ "DatabaseName": db, "Name": "race" }),
    )
    .await;
    let staged = SnapshotProducer::new(&head)
        .add_data_files(
            write_data_files(&head, [rows(9000, 2, 1)])
                .await
                .unwrap()
                .files,
        )
        .stage()
        .await
        .unwrap();
    let err = staged
        .commit(glue.committer().unwrap().as_ref())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    assert!(!err.to_string().contains("planted-secret-g"), "{err}");
    let err = glue.load_table(&id).await.unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
}

/// Hive Metastore (the standalone metastore `scripts/services.sh` starts): a table registered in
/// the metastore commits through Cryo under the metastore's table lock, a second writer from the
/// same base conflicts and changes nothing, and the table's parameters record the previous head.
#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn concurrent_commit_conflicts_on_hive_catalogs() {
    let uri = crate::common::service_env("CRYO_HMS_URI");
    let dir = tempfile::tempdir().unwrap();
    let sql = sql_catalog(dir.path()).await;
    let sid = TableId::parse("db.race").unwrap();
    let t = sql
        .create_table(&sid, NewTable::new(schema()))
        .await
        .unwrap();
    let t = append(&sql, &t, rows(0, 5, 1)).await;
    let hive = Catalog::connect(CatalogConfig::new(
        "hive",
        [("type", "hive".to_string()), ("uri", uri)],
    ))
    .await
    .unwrap();
    let ns = Namespace::new([format!("it_{}", uuid::Uuid::new_v4().simple())]);
    hive.create_namespace(&ns).await.unwrap();
    hive.create_namespace(&ns).await.unwrap();
    let id = TableId::new(ns.clone(), "race");
    let registered = hive
        .register_table(&id, t.metadata_location.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(registered.metadata_location, t.metadata_location);
    let err = hive
        .register_table(&id, t.metadata_location.as_deref().unwrap())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("AlreadyExists"), "{err}");
    assert_eq!(hive.list_tables(&ns).await.unwrap(), vec![id.clone()]);
    assert!(hive.list_namespaces().await.unwrap().contains(&ns));

    second_writer_conflicts(&hive, &id).await;
    let head = hive.load_table(&id).await.unwrap();
    assert_ne!(head.metadata_location, t.metadata_location);
    let scan = scan_table(&hive, &id, &ScanOptions::default(), &SystemClock)
        .await
        .unwrap();
    assert_eq!(scan.data_files.records, 5 + 3);
    let err = hive
        .load_table(&TableId::new(ns, "absent"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
}

/// A Glue that does not answer is a retryable catalog error that shows no credential.
#[tokio::test]
async fn a_glue_catalog_that_is_down_is_a_retryable_error() {
    let down = CatalogConfig::new(
        "glue",
        [
            ("type", "glue"),
            ("glue.endpoint", "http://127.0.0.1:9"),
            ("glue.region", "us-east-1"),
            ("glue.access-key-id", "testing"),
            ("glue.secret-access-key", "planted-secret-g"),
        ],
    );
    let err = Catalog::connect(down).await.unwrap_err();
    assert!(
        matches!(err, Error::Catalog { .. }) && err.is_retryable(),
        "{err}"
    );
    assert!(!err.to_string().contains("planted-secret-g"), "{err}");
}

#[tokio::test]
async fn hadoop_tables_commit_with_version_files() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = hadoop_catalog(dir.path()).await;
    let id = TableId::parse("db.events").unwrap();
    catalog.create_namespace(&id.namespace).await.unwrap();
    let t = catalog
        .create_table(
            &id,
            NewTable::new(schema())
                .with_partition_spec(by_day())
                .with_clock(Arc::new(FixedClock(1_700_000_000_000))),
        )
        .await
        .unwrap();
    assert!(
        t.metadata_location
            .as_deref()
            .unwrap()
            .ends_with("/db/events/metadata/v1.metadata.json")
    );
    assert_eq!(t.metadata.last_updated_ms(), 1_700_000_000_000);
    let err = catalog
        .create_table(&id, NewTable::new(schema()))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Catalog { .. }) && err.to_string().contains("already exists"),
        "{err}"
    );

    let t = append(&catalog, &t, rows(0, 10, 2)).await;
    assert!(
        t.metadata_location
            .as_deref()
            .unwrap()
            .ends_with("/metadata/v2.metadata.json")
    );
    let hint = dir
        .path()
        .join("hadoop/db/events/metadata/version-hint.text");
    assert_eq!(std::fs::read_to_string(&hint).unwrap(), "2");
    assert_eq!(catalog.list_all_tables().await.unwrap(), vec![id.clone()]);
    second_writer_conflicts(&catalog, &id).await;
    let scan = scan_table(&catalog, &id, &ScanOptions::default(), &SystemClock)
        .await
        .unwrap();
    assert_eq!(scan.data_files.records, 13);
    let head = catalog.load_table(&id).await.unwrap();
    assert_eq!(read_rows(&head).await, 13);

    // A commit whose hint was not updated (the hint is written after the version, and that
    // write may fail): loaders find the newer versions after the hint, as Java's do.
    std::fs::write(&hint, "1").unwrap();
    let stale = catalog.load_table(&id).await.unwrap();
    assert_eq!(stale.metadata_location, head.metadata_location);
    assert_eq!(read_rows(&stale).await, 13);
}

#[tokio::test]
async fn snapshot_timestamps_come_from_the_clock_and_io_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let id = TableId::parse("db.old").unwrap();
    let day_ms = 86_400_000;
    let t = catalog
        .create_table(
            &id,
            NewTable::new(schema()).with_clock(Arc::new(FixedClock(1_600_000_000_000))),
        )
        .await
        .unwrap();
    let before = catalog.io_counters().snapshot();
    let w = write_data_files(&t, [rows(0, 3, 1)]).await.unwrap();
    let out = SnapshotProducer::new(&t)
        .add_data_files(w.files)
        .set_snapshot_property("cryo.test", "yes")
        .with_clock(Arc::new(FixedClock(1_600_000_000_000 + day_ms)))
        .commit(catalog.committer().unwrap().as_ref())
        .await
        .unwrap();
    assert_eq!(out.timestamp_ms, 1_600_000_000_000 + day_ms);
    assert_eq!(out.summary["cryo.test"], "yes");
    assert_eq!(out.table.metadata.last_updated_ms(), out.timestamp_ms);
    let after = catalog.io_counters().snapshot();
    let writes = |s: &cryo_core::io::IoSnapshot, k: PathKind| {
        s.writes
            .iter()
            .find(|(kind, _)| *kind == k)
            .map_or(0, |(_, n)| *n)
    };
    assert_eq!(
        writes(&after, PathKind::ManifestList) - writes(&before, PathKind::ManifestList),
        1
    );
    assert_eq!(
        writes(&after, PathKind::Manifest) - writes(&before, PathKind::Manifest),
        1
    );
    assert_eq!(
        writes(&after, PathKind::MetadataJson) - writes(&before, PathKind::MetadataJson),
        1
    );

    // A snapshot far older than the table's last update is refused by the metadata builder.
    let w = write_data_files(&out.table, [rows(5, 1, 1)]).await.unwrap();
    let err = SnapshotProducer::new(&out.table)
        .add_data_files(w.files)
        .with_clock(Arc::new(FixedClock(1_500_000_000_000)))
        .commit(catalog.committer().unwrap().as_ref())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Validation { .. }), "{err}");
}

#[tokio::test]
async fn tables_in_memory_storage() {
    // A Hadoop-style warehouse on the in-memory object store: created, appended, listed, scanned.
    let config = CatalogConfig::new(
        "mem",
        [("type", "hadoop"), ("warehouse", "memory://cryo-it-mem/wh")],
    );
    let catalog = Catalog::connect(config).await.unwrap();
    let id = TableId::parse("db.events").unwrap();
    let created = catalog
        .create_table(&id, NewTable::new(schema()).with_partition_spec(by_day()))
        .await
        .unwrap();
    assert!(
        created
            .metadata_location
            .as_deref()
            .unwrap()
            .starts_with("memory://cryo-it-mem/wh/db/events/metadata/")
    );
    let mut table = created;
    for i in 0..3 {
        table = append(&catalog, &table, rows(i * 10, 10, 2)).await;
    }
    assert_eq!(catalog.list_all_tables().await.unwrap(), vec![id.clone()]);
    assert_eq!(read_rows(&table).await, 30);
    let scan = scan_table(&catalog, &id, &ScanOptions::default(), &SystemClock)
        .await
        .unwrap();
    assert_eq!(scan.snapshots.count, 3);
    assert_eq!(scan.data_files.records, 30);
    assert_eq!(scan.partitions.len(), 2);
    assert_eq!(scan.io.reads_of(PathKind::DataFile), 0);
    // Nothing reached the local disk.
    assert!(!std::path::Path::new("/cryo-it-mem").exists());
}
