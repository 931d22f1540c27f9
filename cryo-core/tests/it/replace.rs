//! `replace` snapshots, rewrite validation and the commit retry loop, on SQL and Hadoop tables.
//!
//! Rows follow one generator (`row(i)`): id `i`, a timestamp on day `i % 2` (the partition), a
//! name. Every test tracks the ids the writers' history leaves and compares the table, read by
//! upstream's reader with deletes applied, row for row.
#![allow(clippy::too_many_lines)] // Reason: each test walks one commit history end to end.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow_schema::{DataType, Field, Schema as ArrowSchema, TimeUnit};
use cryo_core::commit::{
    CatalogCommitter, CommitRetry, ManifestClusters, NewTable, RetryPolicy, RewriteConflictKind,
    SnapshotProducer, certainly_not_committed, is_ancestor, live_files, live_subset,
    validate_rewrite, write_data_files, write_equality_deletes, write_position_deletes,
};
use cryo_core::io::PathKind;
use cryo_core::{Catalog, CatalogConfig, Error, LoadedTable, Namespace, TableId};
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, FormatVersion, Manifest,
    ManifestContentType, ManifestFile, ManifestList, ManifestStatus, NestedField, PrimitiveType,
    Schema, Transform, Type, UnboundPartitionSpec,
};

pub const DAY_US: i64 = 86_400_000_000;
/// 2026-01-01T00:00:00Z in microseconds.
pub const T0_US: i64 = 1_767_225_600_000_000;
pub const DAY0: &str = "ts_day=2026-01-01";
pub const DAY1: &str = "ts_day=2026-01-02";

pub async fn sql_catalog(dir: &std::path::Path) -> Catalog {
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

pub async fn hadoop_catalog(dir: &std::path::Path) -> Catalog {
    let config = CatalogConfig::new(
        "hadoop",
        [
            ("type", "hadoop".to_string()),
            ("warehouse", format!("file://{}/hadoop", dir.display())),
        ],
    );
    Catalog::connect(config).await.unwrap()
}

pub fn schema() -> Schema {
    Schema::builder()
        .with_fields(vec![
            NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::required(2, "ts", Type::Primitive(PrimitiveType::Timestamptz)).into(),
            NestedField::optional(3, "name", Type::Primitive(PrimitiveType::String)).into(),
        ])
        .build()
        .unwrap()
}

pub fn by_day() -> UnboundPartitionSpec {
    UnboundPartitionSpec::builder()
        .add_partition_field(2, "ts_day", Transform::Day)
        .unwrap()
        .build()
}

/// One generated row: id, timestamp (day `id % 2`), name (null for multiples of 7).
pub type Row = (i64, i64, Option<String>);

pub fn row(i: i64) -> Row {
    (
        i,
        T0_US + (i % 2) * DAY_US + i,
        (i % 7 != 0).then(|| format!("name-{i}")),
    )
}

pub fn batch(rows: &[Row]) -> RecordBatch {
    let schema = Arc::new(ArrowSchema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
        Field::new("name", DataType::Utf8, true),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))) as ArrayRef,
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(rows.iter().map(|r| r.1))
                    .with_timezone("UTC"),
            ),
            Arc::new(rows.iter().map(|r| r.2.clone()).collect::<StringArray>()),
        ],
    )
    .unwrap()
}

pub fn rows(ids: impl IntoIterator<Item = i64>) -> RecordBatch {
    batch(&ids.into_iter().map(row).collect::<Vec<_>>())
}

/// Every row of the table as upstream's reader returns it (deletes applied), sorted.
pub async fn read_rows(table: &LoadedTable) -> Vec<Row> {
    let batches = crate::common::scan_rows(table).await;
    let mut out = Vec::new();
    for b in &batches {
        let ids = b
            .column_by_name("id")
            .unwrap()
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        let ts = b
            .column_by_name("ts")
            .unwrap()
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .unwrap();
        let names = b
            .column_by_name("name")
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        for i in 0..b.num_rows() {
            out.push((
                ids.value(i),
                ts.value(i),
                (!names.is_null(i)).then(|| names.value(i).to_string()),
            ));
        }
    }
    out.sort();
    out
}

/// The rows the ids imply.
pub fn expected(ids: &BTreeSet<i64>) -> Vec<Row> {
    ids.iter().copied().map(row).collect()
}

pub async fn append(
    committer: &dyn CatalogCommitter,
    table: &LoadedTable,
    ids: impl IntoIterator<Item = i64>,
) -> LoadedTable {
    let written = write_data_files(table, [rows(ids)]).await.unwrap();
    SnapshotProducer::new(table)
        .add_data_files(written.files)
        .commit(committer)
        .await
        .unwrap()
        .table
}

/// Equality deletes on `id` for `ids` (keys carry `ts` so they land in their partitions).
pub async fn delete_ids(
    committer: &dyn CatalogCommitter,
    table: &LoadedTable,
    ids: &[i64],
) -> LoadedTable {
    let eq = write_equality_deletes(table, &["id"], [equality_keys(ids)])
        .await
        .unwrap();
    SnapshotProducer::new(table)
        .add_delete_files(eq.files)
        .commit(committer)
        .await
        .unwrap()
        .table
}

/// Equality-delete keys on `id` for `ids`, with `ts` so that they land in their partitions.
pub fn equality_keys(ids: &[i64]) -> RecordBatch {
    RecordBatch::try_new(
        Arc::new(ArrowSchema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                false,
            ),
        ])),
        vec![
            Arc::new(Int64Array::from_iter_values(ids.iter().copied())) as ArrayRef,
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(ids.iter().map(|i| row(*i).1))
                    .with_timezone("UTC"),
            ),
        ],
    )
    .unwrap()
}

/// Position deletes on the data file at `path`.
pub async fn delete_positions(
    committer: &dyn CatalogCommitter,
    table: &LoadedTable,
    path: &str,
    positions: Vec<i64>,
) -> LoadedTable {
    let pos = write_position_deletes(table, &[(path.to_string(), positions)])
        .await
        .unwrap();
    SnapshotProducer::new(table)
        .add_delete_files(pos.files)
        .commit(committer)
        .await
        .unwrap()
        .table
}

/// Live data files whose path contains `needle` (a partition directory).
pub async fn data_files_in(table: &LoadedTable, needle: &str) -> Vec<DataFile> {
    let mut out: Vec<DataFile> = live_files(table)
        .await
        .unwrap()
        .into_iter()
        .filter(|f| f.file.content_type() == DataContentType::Data)
        .filter(|f| f.file.file_path().contains(needle))
        .map(|f| f.file)
        .collect();
    out.sort_by(|a, b| a.file_path().cmp(b.file_path()));
    out
}

/// Live delete files in the partition directory `needle`.
pub async fn delete_files_in(table: &LoadedTable, needle: &str) -> BTreeSet<String> {
    live_files(table)
        .await
        .unwrap()
        .into_iter()
        .filter(|f| f.file.content_type() != DataContentType::Data)
        .filter(|f| f.file.file_path().contains(needle))
        .map(|f| f.file.file_path().to_string())
        .collect()
}

pub fn paths(files: &[DataFile]) -> BTreeSet<String> {
    files.iter().map(|f| f.file_path().to_string()).collect()
}

/// The manifests (with their entries) of the table's current snapshot.
async fn manifests(table: &LoadedTable) -> Vec<(ManifestFile, Manifest)> {
    let snapshot = table.metadata.current_snapshot().unwrap();
    let bytes = table
        .storage
        .read_all(snapshot.manifest_list())
        .await
        .unwrap();
    let list = ManifestList::parse_with_version(&bytes, table.metadata.format_version()).unwrap();
    let mut out = Vec::new();
    for mf in list.entries() {
        let m = mf.load_manifest(&table.file_io).await.unwrap();
        out.push((mf.clone(), m));
    }
    out
}

/// A rewrite group: the files it replaces, the delete files it drops, the files it wrote.
pub struct Group {
    pub data: Vec<DataFile>,
    pub deletes: BTreeSet<String>,
    pub new_files: Vec<DataFile>,
}

/// Rewrite one partition of `s0` (its rows as read at `s0`, deletes applied) into new files.
pub async fn rewrite_partition(s0: &LoadedTable, needle: &str, day: i64) -> Group {
    let live: Vec<Row> = read_rows(s0)
        .await
        .into_iter()
        .filter(|r| (r.1 - T0_US) / DAY_US == day)
        .collect();
    let written = write_data_files(s0, [batch(&live)]).await.unwrap();
    Group {
        data: data_files_in(s0, needle).await,
        deletes: delete_files_in(s0, needle).await,
        new_files: written.files,
    }
}

/// The table of the retry-loop test: two appends over two days, position deletes in both
/// days, an equality delete in day 0. Returns the table and the ids it holds.
async fn seed(
    catalog: &Catalog,
    id: &TableId,
    version: FormatVersion,
) -> (LoadedTable, BTreeSet<i64>) {
    let committer = catalog.committer().unwrap();
    let t = catalog
        .create_table(
            id,
            NewTable::new(schema())
                .with_partition_spec(by_day())
                .with_format_version(version),
        )
        .await
        .unwrap();
    let t = append(committer.as_ref(), &t, 0..20).await;
    let t = append(committer.as_ref(), &t, 20..40).await;
    let mut ids: BTreeSet<i64> = (0..40).collect();
    if version != FormatVersion::V2 {
        return (t, ids);
    }
    // Position deletes on two rows of one day-0 file and one row of a day-1 file (which ids
    // depends on which append wrote the file: read them), and an equality delete of id 4, which
    // neither position delete can hit (it is the third row of its file).
    let f0 = data_files_in(&t, DAY0).await[0].file_path().to_string();
    let f1 = data_files_in(&t, DAY1).await[1].file_path().to_string();
    for (path, positions) in [(&f0, vec![0, 1]), (&f1, vec![0])] {
        let in_file = read_file_ids(&t, path).await;
        for p in &positions {
            ids.remove(&in_file[*p as usize]);
        }
    }
    let t = delete_positions(committer.as_ref(), &t, &f0, vec![0, 1]).await;
    let t = delete_positions(committer.as_ref(), &t, &f1, vec![0]).await;
    let t = delete_ids(committer.as_ref(), &t, &[4]).await;
    ids.remove(&4);
    (t, ids)
}

#[tokio::test]
async fn replace_rewrites_data_and_delete_manifests() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let committer = catalog.committer().unwrap();
    let id = TableId::parse("db.replace").unwrap();
    let (s0, mut ids) = seed(&catalog, &id, FormatVersion::V2).await;
    // Which file holds which ids depends on file names; check the seed by content.
    assert_eq!(read_rows(&s0).await, expected(&ids));
    let s0_seq = s0.metadata.current_snapshot().unwrap().sequence_number();
    let before = s0
        .metadata
        .current_snapshot()
        .unwrap()
        .summary()
        .additional_properties
        .clone();

    let g0 = rewrite_partition(&s0, DAY0, 0).await;
    assert_eq!(g0.data.len(), 2);
    assert_eq!(
        g0.deletes.len(),
        2,
        "a position delete and an equality delete in day 0"
    );
    let out = SnapshotProducer::replace(&s0)
        .delete_data_files(paths(&g0.data))
        .remove_delete_files(g0.deletes.clone())
        .add_data_files(g0.new_files.clone())
        .with_data_sequence_number(s0_seq)
        .commit(committer.as_ref())
        .await
        .unwrap();
    assert_eq!(out.operation, "replace");
    assert_eq!((out.removed_data_files, out.removed_delete_files), (2, 2));
    let s = &out.summary;
    assert_eq!(s["deleted-data-files"], "2");
    assert_eq!(s["added-data-files"], "1");
    assert_eq!(s["removed-delete-files"], "2");
    assert_eq!(s["removed-position-delete-files"], "1");
    assert_eq!(s["removed-equality-delete-files"], "1");
    assert_eq!(s["removed-position-deletes"], "2");
    assert_eq!(s["removed-equality-deletes"], "1");
    let total =
        |k: &str, m: &std::collections::HashMap<String, String>| -> i64 { m[k].parse().unwrap() };
    assert_eq!(
        total("total-data-files", s),
        total("total-data-files", &before) - 1
    );
    assert_eq!(
        total("total-delete-files", s),
        total("total-delete-files", &before) - 2
    );
    assert_eq!(
        total("total-position-deletes", s),
        1,
        "day 1's delete stays"
    );
    assert_eq!(total("total-equality-deletes", s), 0);
    // Records count physical rows: day 0 had 20 rows, 3 of them deleted and now gone.
    assert_eq!(
        total("total-records", s),
        total("total-records", &before) - 3
    );
    assert_eq!(read_rows(&out.table).await, expected(&ids));
    assert_eq!(
        catalog.load_table(&id).await.unwrap().metadata_location,
        out.table.metadata_location
    );

    // The manifests: new data at S0's sequence number; touched manifests rewritten with their
    // kept files EXISTING; the removed files in one DELETED-only manifest per content type.
    let snap = out.table.metadata.current_snapshot().unwrap();
    let ms = manifests(&out.table).await;
    let mut added = 0;
    let mut deleted_only = [0, 0];
    for (mf, m) in &ms {
        let statuses: BTreeSet<u8> = m.entries().iter().map(|e| e.status() as u8).collect();
        if mf.added_snapshot_id == snap.snapshot_id() {
            assert_eq!(
                statuses.len(),
                1,
                "{}: one status per new manifest",
                mf.manifest_path
            );
        }
        if mf.added_snapshot_id != snap.snapshot_id() {
            continue;
        }
        for e in m.entries() {
            match e.status() {
                ManifestStatus::Added => {
                    added += 1;
                    assert_eq!(
                        e.sequence_number(),
                        Some(s0_seq),
                        "data sequence number of S0"
                    );
                    assert_eq!(e.file_sequence_number, Some(snap.sequence_number()));
                }
                ManifestStatus::Deleted => {
                    assert!(e.sequence_number().unwrap() < s0_seq + 1);
                    assert_eq!(e.snapshot_id(), Some(snap.snapshot_id()));
                }
                ManifestStatus::Existing => {
                    assert!(e.sequence_number().unwrap() <= s0_seq);
                    assert!(e.file_sequence_number.is_some());
                }
            }
        }
        if statuses == BTreeSet::from([ManifestStatus::Deleted as u8]) {
            deleted_only[usize::from(mf.content == ManifestContentType::Deletes)] += 1;
        }
    }
    assert_eq!(added, 1);
    assert_eq!(
        deleted_only,
        [1, 1],
        "one DELETED-only manifest per content type"
    );

    // The next commit drops the DELETED-only manifests (Java's merging producers do the same).
    let next = append(committer.as_ref(), &out.table, 100..102).await;
    ids.extend(100..102);
    let ms = manifests(&next).await;
    assert!(
        ms.iter()
            .all(|(mf, _)| mf.added_files_count != Some(0) || mf.existing_files_count != Some(0))
    );
    assert_eq!(ms.len(), manifests(&out.table).await.len() - 2 + 1);
    assert_eq!(read_rows(&next).await, expected(&ids));
}

#[tokio::test]
async fn replace_refuses_what_would_change_rows() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let committer = catalog.committer().unwrap();
    let id = TableId::parse("db.refuse").unwrap();
    let (s0, _) = seed(&catalog, &id, FormatVersion::V2).await;
    let seq = s0.metadata.current_snapshot().unwrap().sequence_number();
    let g0 = rewrite_partition(&s0, DAY0, 0).await;
    let data = paths(&g0.data);
    let err = |e: Error| {
        assert!(matches!(e, Error::Validation { .. }), "{e}");
        assert!(certainly_not_committed(&e));
        e.to_string()
    };

    let e = SnapshotProducer::replace(&s0)
        .add_data_files(g0.new_files.clone())
        .stage()
        .await
        .unwrap_err();
    assert!(err(e).contains("must remove"));
    // Removing delete files and explicit data sequence numbers belong to a replace: on any
    // other producer they do not compile (SnapshotProducer's compile_fail doc tests).
    let e = SnapshotProducer::replace(&s0)
        .delete_data_files(data.clone())
        .add_data_files(g0.new_files.clone())
        .with_data_sequence_number(seq + 1)
        .stage()
        .await
        .unwrap_err();
    assert!(err(e).contains("outside"));
    // Below the sequence number of a removed file: equality deletes in between would apply to
    // the new rows only.
    let e = SnapshotProducer::replace(&s0)
        .delete_data_files(data.clone())
        .add_data_files(g0.new_files.clone())
        .with_data_sequence_number(1)
        .stage()
        .await
        .unwrap_err();
    assert!(err(e).contains("below"));
    let pos = write_position_deletes(&s0, &[(g0.data[0].file_path().to_string(), vec![3])])
        .await
        .unwrap();
    let e = SnapshotProducer::replace(&s0)
        .delete_data_files(data.clone())
        .add_delete_files(pos.files)
        .stage()
        .await
        .unwrap_err();
    assert!(err(e).contains("delete files only when"));
    let e = SnapshotProducer::replace(&s0)
        .delete_data_files(data.clone())
        .remove_delete_files(["file:///nowhere/x.parquet"])
        .stage()
        .await
        .unwrap_err();
    assert!(err(e).contains("not live delete files"));
    // Nothing was committed, and the table is as it was.
    assert_eq!(
        catalog.load_table(&id).await.unwrap().metadata_location,
        s0.metadata_location
    );
    drop(committer);
}

#[tokio::test]
async fn validation_reports_removed_files_and_new_position_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let committer = catalog.committer().unwrap();
    let c = committer.as_ref();
    let id = TableId::parse("db.validate").unwrap();
    let t = catalog
        .create_table(&id, NewTable::new(schema()).with_partition_spec(by_day()))
        .await
        .unwrap();
    for k in 0..4 {
        // Four appends, each a day-0 and a day-1 file.
        append(
            c,
            &catalog.load_table(&id).await.unwrap(),
            k * 10..k * 10 + 10,
        )
        .await;
    }
    drop(t);
    let s0 = catalog.load_table(&id).await.unwrap();
    let day0 = data_files_in(&s0, DAY0).await;
    let day1 = data_files_in(&s0, DAY1).await;
    let all: BTreeSet<String> = paths(&day0).union(&paths(&day1)).cloned().collect();
    assert!(validate_rewrite(&s0, &s0, &all).await.unwrap().is_empty());

    // After S0: an append and an equality delete (no conflict); a metadata-only delete of
    // day0[0]; position deletes for day0[1] (one file: referenced_data_file) and for day1[0] and
    // day1[1] together (one file per partition with path bounds).
    let h = append(c, &s0, 100..104).await;
    let h = delete_ids(c, &h, &[10, 11]).await;
    let h = SnapshotProducer::new(&h)
        .delete_data_files([day0[0].file_path()])
        .commit(c)
        .await
        .unwrap();
    let removed_by = h.snapshot_id;
    let h = delete_positions(c, &h.table, day0[1].file_path(), vec![0]).await;
    let by_file = h.metadata.current_snapshot_id().unwrap();
    let pos = write_position_deletes(
        &h,
        &[
            (day1[0].file_path().to_string(), vec![0]),
            (day1[1].file_path().to_string(), vec![1]),
        ],
    )
    .await
    .unwrap();
    assert_eq!(pos.files.len(), 1);
    assert!(pos.files[0].referenced_data_file().is_none());
    let h = SnapshotProducer::new(&h)
        .add_delete_files(pos.files.clone())
        .commit(c)
        .await
        .unwrap()
        .table;
    let by_bounds = h.metadata.current_snapshot_id().unwrap();

    let conflicts = validate_rewrite(&s0, &h, &all).await.unwrap();
    let found: Vec<(String, RewriteConflictKind, Option<i64>)> = conflicts
        .iter()
        .map(|c| (c.data_file.clone(), c.kind, c.by_snapshot))
        .collect();
    let mut want = vec![
        (
            day0[0].file_path().to_string(),
            RewriteConflictKind::Removed,
            Some(removed_by),
        ),
        (
            day0[1].file_path().to_string(),
            RewriteConflictKind::NewPositionDelete,
            Some(by_file),
        ),
        (
            day1[0].file_path().to_string(),
            RewriteConflictKind::NewPositionDelete,
            Some(by_bounds),
        ),
        (
            day1[1].file_path().to_string(),
            RewriteConflictKind::NewPositionDelete,
            Some(by_bounds),
        ),
    ];
    want.sort();
    assert_eq!(found, want, "{conflicts:#?}");
    assert!(conflicts.iter().skip(1).all(|c| c.delete_file.is_some()));
    assert!(conflicts[0].to_string().contains("no longer live"));

    // A position delete that records neither its data file nor path bounds conflicts with every
    // replaced file of its partition, and only those.
    let vague = write_position_deletes(&h, &[(day1[2].file_path().to_string(), vec![0])])
        .await
        .unwrap()
        .files
        .remove(0);
    let vague = strip_references(&vague);
    let h2 = SnapshotProducer::new(&h)
        .add_delete_files([vague])
        .commit(c)
        .await
        .unwrap()
        .table;
    let rest: BTreeSet<String> = [
        day0[2].file_path(),
        day0[3].file_path(),
        day1[2].file_path(),
        day1[3].file_path(),
    ]
    .into_iter()
    .map(str::to_string)
    .collect();
    let conflicts = validate_rewrite(&s0, &h2, &rest).await.unwrap();
    let flagged: BTreeSet<&str> = conflicts.iter().map(|c| c.data_file.as_str()).collect();
    assert_eq!(
        flagged,
        BTreeSet::from([day1[2].file_path(), day1[3].file_path()])
    );

    // A head that does not descend from the base (here: an older state) cannot be checked.
    let conflicts = validate_rewrite(&h2, &s0, &rest).await.unwrap();
    assert_eq!(conflicts.len(), rest.len());
    assert!(
        conflicts
            .iter()
            .all(|c| c.kind == RewriteConflictKind::HistoryDiverged)
    );
    let now = catalog.load_table(&id).await.unwrap();
    assert!(is_ancestor(
        &now,
        s0.metadata.current_snapshot_id().unwrap()
    ));
    assert!(!is_ancestor(&s0, by_bounds));

    // Delete files still live, for a rewrite that also drops some.
    let live = live_subset(
        &h2,
        &BTreeSet::from([
            pos.files[0].file_path().to_string(),
            "file:///gone.parquet".to_string(),
        ]),
    )
    .await
    .unwrap();
    assert_eq!(live, BTreeSet::from([pos.files[0].file_path().to_string()]));
}

/// Partition evolution as a writer commits it: `spec` added and made the default; the table after.
async fn set_default_spec(
    c: &dyn CatalogCommitter,
    table: &LoadedTable,
    spec: UnboundPartitionSpec,
) -> LoadedTable {
    let changes = cryo_core::commit::TableChanges::new(
        vec![iceberg::TableRequirement::DefaultSpecIdMatch {
            default_spec_id: table.metadata.default_partition_spec_id(),
        }],
        vec![
            iceberg::TableUpdate::AddSpec { spec },
            iceberg::TableUpdate::SetDefaultSpec { spec_id: -1 },
        ],
    );
    c.commit(table, changes).await.unwrap()
}

/// A rewrite into a new default spec moves rows out of the reach of equality deletes scoped to
/// their old partition: one added after the base conflicts (the simulator's seed 13926 found
/// this: a writer's upsert planned before the partitioning was dropped, committed after Cryo
/// planned a compaction into the unpartitioned spec, and its deleted rows came back).
#[tokio::test]
async fn validation_reports_partition_equality_deletes_a_new_spec_leaves() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let committer = catalog.committer().unwrap();
    let c = committer.as_ref();
    let id = TableId::parse("db.respec").unwrap();
    let t = catalog
        .create_table(&id, NewTable::new(schema()).with_partition_spec(by_day()))
        .await
        .unwrap();
    let partitioned = append(c, &t, 0..20).await;
    let day0 = data_files_in(&partitioned, DAY0).await;
    let day1 = data_files_in(&partitioned, DAY1).await;
    let all: BTreeSet<String> = paths(&day0).union(&paths(&day1)).cloned().collect();

    // A writer working on the partitioned table writes equality deletes of day 0 (spec 0);
    // meanwhile the partitioning is dropped, and the rewrite plans on that (S0).
    let s0 = set_default_spec(c, &partitioned, UnboundPartitionSpec::builder().build()).await;
    assert_ne!(s0.metadata.default_partition_spec_id(), 0);
    assert!(validate_rewrite(&s0, &s0, &all).await.unwrap().is_empty());
    let eq = write_equality_deletes(&partitioned, &["id"], [equality_keys(&[0, 2])])
        .await
        .unwrap();
    // Staged on the table the writer read; the retry after the spec change commits it.
    let head = SnapshotProducer::new(&partitioned)
        .add_delete_files(eq.files)
        .commit(c)
        .await
        .unwrap()
        .table;
    assert_eq!(
        head.metadata
            .current_snapshot()
            .unwrap()
            .parent_snapshot_id(),
        s0.metadata.current_snapshot_id()
    );

    // Rewritten into the unpartitioned spec, day 0's files would leave those deletes' reach.
    let conflicts = validate_rewrite(&s0, &head, &all).await.unwrap();
    assert_eq!(paths_of(&conflicts), paths(&day0));
    assert!(
        conflicts
            .iter()
            .all(|c| c.kind == RewriteConflictKind::NewEqualityDelete && c.by_snapshot.is_some())
    );

    // A rewrite planned before the spec changed writes into spec 0, where they still apply.
    let head2 = catalog.load_table(&id).await.unwrap();
    assert!(
        validate_rewrite(&partitioned, &head2, &all)
            .await
            .unwrap()
            .iter()
            .all(|c| c.kind != RewriteConflictKind::NewEqualityDelete)
    );
}

/// The other way round: rows rewritten from an old spec into the default one enter the reach of
/// the default spec's partition-scoped equality deletes, which did not apply to them before.
#[tokio::test]
async fn validation_reports_equality_deletes_rows_would_enter_in_a_new_spec() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let committer = catalog.committer().unwrap();
    let c = committer.as_ref();
    let id = TableId::parse("db.respec_month").unwrap();
    let t = catalog
        .create_table(&id, NewTable::new(schema()).with_partition_spec(by_day()))
        .await
        .unwrap();
    let by_day_table = append(c, &t, 0..20).await;
    let old: BTreeSet<String> = paths(&data_files_in(&by_day_table, DAY0).await)
        .union(&paths(&data_files_in(&by_day_table, DAY1).await))
        .cloned()
        .collect();
    // Partitioned by month from now on; one file written in the new spec.
    let by_month = UnboundPartitionSpec::builder()
        .add_partition_field(2, "ts_month", Transform::Month)
        .unwrap()
        .build();
    let respec = set_default_spec(c, &by_day_table, by_month).await;
    let s0 = append(c, &respec, 100..102).await;
    let new: BTreeSet<String> = live_files(&s0)
        .await
        .unwrap()
        .iter()
        .map(|f| f.file.file_path().to_string())
        .filter(|p| !old.contains(p))
        .collect();
    assert_eq!(new.len(), 1);
    let all: BTreeSet<String> = old.union(&new).cloned().collect();

    // After S0, an upsert's equality deletes in the month spec.
    let head = delete_ids(c, &s0, &[0, 100]).await;
    let conflicts = validate_rewrite(&s0, &head, &all).await.unwrap();
    // The day files would join the month partition those deletes are scoped to; the month
    // file stays where it is, in reach of the same deletes before and after.
    assert_eq!(paths_of(&conflicts), old);
    assert!(
        conflicts
            .iter()
            .all(|c| c.kind == RewriteConflictKind::NewEqualityDelete)
    );
}

fn paths_of(conflicts: &[cryo_core::commit::RewriteConflict]) -> BTreeSet<String> {
    conflicts.iter().map(|c| c.data_file.clone()).collect()
}

/// `file` without `referenced_data_file` or column bounds, as some writers record position
/// deletes.
fn strip_references(file: &DataFile) -> DataFile {
    DataFileBuilder::default()
        .content(file.content_type())
        .file_path(file.file_path().to_string())
        .file_format(file.file_format())
        .partition(file.partition().clone())
        .record_count(file.record_count())
        .file_size_in_bytes(file.file_size_in_bytes())
        .build()
        .unwrap()
}

/// The orchestrator's loop, exactly: load head → validate → drop conflicting groups → stage a
/// replace on the head → commit → on a conflict, back off, reload and go again. A concurrent
/// writer commits between the first stage and its commit: an append and an equality delete
/// (the retry goes through) and a position delete against a file of group 1 (validation drops
/// that group).
async fn retry_loop_keeps_every_row(catalog: &Catalog, id: &TableId) {
    let committer = catalog.committer().unwrap();
    let c = committer.as_ref();
    let (s0, mut ids) = seed(catalog, id, FormatVersion::V2).await;
    assert_eq!(read_rows(&s0).await, expected(&ids));
    let s0_seq = s0.metadata.current_snapshot().unwrap().sequence_number();
    let mut groups = vec![
        rewrite_partition(&s0, DAY0, 0).await,
        rewrite_partition(&s0, DAY1, 1).await,
    ];
    let doomed: Vec<String> = groups[1]
        .new_files
        .iter()
        .map(|f| f.file_path().to_string())
        .collect();
    let victim = groups[1].data[0].clone();

    let mut retry = CommitRetry::new(RetryPolicy {
        max_attempts: 4,
        min_backoff_ms: 1,
        max_backoff_ms: 10,
        ..RetryPolicy::default()
    })
    .unwrap();
    let mut head = c.load_head(&s0).await.unwrap();
    let mut first_staged = Vec::new();
    let mut dropped = Vec::new();
    let outcome = loop {
        let replaced: BTreeSet<String> = groups.iter().flat_map(|g| paths(&g.data)).collect();
        let conflicts = validate_rewrite(&s0, &head, &replaced).await.unwrap();
        let bad: BTreeSet<&str> = conflicts.iter().map(|c| c.data_file.as_str()).collect();
        let (keep, lose): (Vec<Group>, Vec<Group>) = groups
            .into_iter()
            .partition(|g| g.data.iter().all(|f| !bad.contains(f.file_path())));
        for g in lose {
            // A group that will not commit deletes what it wrote right away.
            for f in &g.new_files {
                head.storage.delete(f.file_path()).await.unwrap();
            }
            dropped.push((g, conflicts.clone()));
        }
        groups = keep;
        let mut producer = SnapshotProducer::replace(&head).with_data_sequence_number(s0_seq);
        for g in &groups {
            producer = producer
                .delete_data_files(paths(&g.data))
                .remove_delete_files(g.deletes.clone())
                .add_data_files(g.new_files.clone());
        }
        let staged = producer.stage().await.unwrap();
        retry.staged(&staged);
        if retry.failed_attempts() == 0 {
            first_staged = staged.written_files.clone();
            // The concurrent writer.
            let w = c.load_head(&s0).await.unwrap();
            let w = append(c, &w, 100..110).await;
            let w = delete_ids(c, &w, &[6]).await;
            delete_positions(c, &w, victim.file_path(), vec![0]).await;
        }
        match staged.commit(c).await {
            Ok(outcome) => break outcome,
            Err(e) => {
                assert!(matches!(e, Error::CommitConflict { .. }), "{e}");
                head = retry.reload_after(c, &head, e).await.unwrap();
                assert_eq!(retry.landed(&head), None);
            }
        }
    };
    assert_eq!(retry.failed_attempts(), 1);
    assert_eq!(outcome.operation, "replace");
    assert_eq!(outcome.removed_data_files, 2);
    assert_eq!(dropped.len(), 1);
    let (_, conflicts) = &dropped[0];
    assert_eq!(conflicts.len(), 1);
    assert_eq!(conflicts[0].data_file, victim.file_path());
    assert_eq!(conflicts[0].kind, RewriteConflictKind::NewPositionDelete);
    assert_eq!(retry.landed(&outcome.table), Some(outcome.snapshot_id));

    // The writers' history: the seed, the append, the equality delete of id 6 (committed after
    // S0: it must still hide the rewritten row), and the position delete of the victim's first
    // row, the smallest id of that file.
    ids.extend(100..110);
    ids.remove(&6);
    let victim_first = read_file_ids(&s0, victim.file_path()).await[0];
    ids.remove(&victim_first);
    let reloaded = catalog.load_table(id).await.unwrap();
    assert_eq!(reloaded.metadata_location, outcome.table.metadata_location);
    assert_eq!(read_rows(&reloaded).await, expected(&ids));

    // Nothing of the dropped group or the lost attempt is left behind.
    for f in doomed.iter().chain(&first_staged) {
        assert!(
            reloaded.storage.head(f).await.unwrap().is_none(),
            "{f} left behind"
        );
    }
    // Group 1's files are still live; group 0's are replaced.
    let live: BTreeSet<String> = live_files(&reloaded)
        .await
        .unwrap()
        .into_iter()
        .map(|f| f.file.file_path().to_string())
        .collect();
    assert!(live.contains(victim.file_path()));
    assert!(groups[0].data.iter().all(|f| !live.contains(f.file_path())));
    assert!(
        groups[0]
            .new_files
            .iter()
            .all(|f| live.contains(f.file_path()))
    );
}

/// The ids in one data file, in file order.
pub async fn read_file_ids(table: &LoadedTable, path: &str) -> Vec<i64> {
    let bytes = table.storage.read_all(path).await.unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
        .unwrap()
        .build()
        .unwrap();
    let mut out = Vec::new();
    for b in reader {
        let b = b.unwrap();
        let ids = b
            .column_by_name("id")
            .unwrap()
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap()
            .clone();
        out.extend(ids.values().iter().copied());
    }
    out
}

#[tokio::test]
async fn retry_loop_on_sql_tables() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    retry_loop_keeps_every_row(&catalog, &TableId::parse("db.loop").unwrap()).await;
}

#[tokio::test]
async fn retry_loop_on_hadoop_tables() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = hadoop_catalog(dir.path()).await;
    retry_loop_keeps_every_row(&catalog, &TableId::parse("db.loop").unwrap()).await;
}

#[tokio::test]
async fn retries_stop_when_the_policy_is_spent() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let committer = catalog.committer().unwrap();
    let id = TableId::parse("db.spent").unwrap();
    let t = catalog
        .create_table(&id, NewTable::new(schema()))
        .await
        .unwrap();
    let t = append(committer.as_ref(), &t, 0..4).await;
    let mut retry = CommitRetry::new(RetryPolicy {
        max_attempts: 2,
        min_backoff_ms: 1,
        max_backoff_ms: 1,
        ..RetryPolicy::default()
    })
    .unwrap();
    let conflict = || Error::CommitConflict {
        table: id.to_string(),
        message: "lost".into(),
        retryable: true,
    };
    let head = retry
        .reload_after(committer.as_ref(), &t, conflict())
        .await
        .unwrap();
    assert_eq!(head.metadata_location, t.metadata_location);
    let e = retry
        .reload_after(committer.as_ref(), &head, conflict())
        .await
        .unwrap_err();
    assert!(matches!(e, Error::CommitConflict { .. }));
    assert!(retry.next_wait(conflict()).is_err());
}

/// v3: rewritten manifests keep each file's row ids; deletion vectors go with their data file.
#[tokio::test]
async fn v3_replace_keeps_row_lineage_and_drops_deletion_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let committer = catalog.committer().unwrap();
    let c = committer.as_ref();
    let id = TableId::parse("db.v3").unwrap();
    let (t, ids) = seed(&catalog, &id, FormatVersion::V3).await;
    assert_eq!(read_rows(&t).await, expected(&ids));
    let day0 = data_files_in(&t, DAY0).await;
    let day1 = data_files_in(&t, DAY1).await;

    // Row ids as the spec assigns them: per manifest, in entry order, from the manifest's
    // first_row_id.
    let mut row_ids = std::collections::HashMap::new();
    for (mf, m) in manifests(&t).await {
        let mut next = mf.first_row_id.expect("v3 data manifests have row ids") as i64;
        for e in m.entries() {
            let f = e.data_file();
            let first = f.first_row_id().unwrap_or_else(|| {
                let id = next;
                next += f.record_count() as i64;
                id
            });
            row_ids.insert(f.file_path().to_string(), first);
        }
    }

    // A deletion vector for day0[0] (metadata only: it is never read here), committed as a
    // v3 table's position deletes are.
    let dv = DataFileBuilder::default()
        .content(DataContentType::PositionDeletes)
        .file_path(format!("{}/data/dv-test.puffin", t.metadata.location()))
        .file_format(DataFileFormat::Puffin)
        .partition(day0[0].partition().clone())
        .record_count(1)
        .file_size_in_bytes(64)
        .referenced_data_file(Some(day0[0].file_path().to_string()))
        .content_offset(Some(4))
        .content_size_in_bytes(Some(40))
        .build()
        .unwrap();
    let t = SnapshotProducer::new(&t)
        .add_delete_files([dv.clone()])
        .commit(c)
        .await
        .unwrap();
    assert_eq!(t.summary["added-dvs"], "1");
    assert!(!t.summary.contains_key("added-position-delete-files"));
    let s0 = t.table;
    let s0_seq = s0.metadata.current_snapshot().unwrap().sequence_number();

    // A second DV after S0, on a day-1 file: validation sees it.
    let dv1 = DataFileBuilder::default()
        .content(DataContentType::PositionDeletes)
        .file_path(format!("{}/data/dv-test-1.puffin", s0.metadata.location()))
        .file_format(DataFileFormat::Puffin)
        .partition(day1[0].partition().clone())
        .record_count(1)
        .file_size_in_bytes(64)
        .referenced_data_file(Some(day1[0].file_path().to_string()))
        .content_offset(Some(4))
        .content_size_in_bytes(Some(40))
        .build()
        .unwrap();
    let h = SnapshotProducer::new(&s0)
        .add_delete_files([dv1])
        .commit(c)
        .await
        .unwrap()
        .table;
    let conflicts = validate_rewrite(&s0, &h, &paths(&day1)).await.unwrap();
    assert_eq!(conflicts.len(), 1);
    assert_eq!(conflicts[0].kind, RewriteConflictKind::NewDeletionVector);
    assert_eq!(conflicts[0].data_file, day1[0].file_path());

    // Replace day0[0] alone (its rows, DV applied, are the test's business, not the commit's):
    // its DV goes with it, every other file keeps its row ids.
    let new = write_data_files(&h, [rows([1000])]).await.unwrap();
    let out = SnapshotProducer::replace(&h)
        .delete_data_files([day0[0].file_path()])
        .add_data_files(new.files)
        .with_data_sequence_number(s0_seq)
        .commit(c)
        .await
        .unwrap();
    assert_eq!(out.removed_delete_files, 1);
    assert_eq!(out.summary["removed-dvs"], "1");
    let live = live_files(&out.table).await.unwrap();
    assert!(live.iter().all(|f| f.file.file_path() != dv.file_path()));
    assert!(
        live.iter()
            .any(|f| f.file.file_path().ends_with("dv-test-1.puffin"))
    );
    let mut checked = 0;
    for (mf, m) in manifests(&out.table).await {
        if mf.content != ManifestContentType::Data || mf.added_snapshot_id != out.snapshot_id {
            continue;
        }
        for e in m.entries() {
            let f = e.data_file();
            if e.status() == ManifestStatus::Added {
                // New rows get new ids from the manifest list.
                assert_eq!(f.first_row_id(), None);
            } else {
                assert_eq!(
                    f.first_row_id(),
                    row_ids.get(f.file_path()).copied(),
                    "{}",
                    f.file_path()
                );
                checked += 1;
            }
        }
    }
    assert_eq!(
        checked, 2,
        "the removed file (DELETED) and its manifest-mate (EXISTING)"
    );
    assert!(out.table.metadata.next_row_id() > h.metadata.next_row_id());
}

#[tokio::test]
async fn create_table_refuses_dot_segments() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let wh = url::Url::from_directory_path(dir.path()).unwrap();
    let id = TableId::parse("db.t").unwrap();
    for location in [
        format!("{wh}db/../escape"),
        format!("{wh}db/%2E%2E/escape"),
        format!("{wh}./t"),
    ] {
        let err = catalog
            .create_table(&id, NewTable::new(schema()).with_location(location.clone()))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Validation { .. }), "{location}: {err}");
    }
    // A name that is a dot segment would put the default location above the namespace.
    let dots = TableId::new(Namespace::new(["db"]), "..");
    let err = catalog
        .create_table(&dots, NewTable::new(schema()))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Validation { .. }), "{err}");
    assert!(
        catalog
            .list_tables(&Namespace::new(["db"]))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(!dir.path().join("escape").exists());
}

/// New files holding the rows of `files` that `live` still has.
async fn rewrite_files(t: &LoadedTable, files: &[DataFile], live: &BTreeSet<i64>) -> Vec<DataFile> {
    let mut kept = Vec::new();
    for f in files {
        let ids = read_file_ids(t, f.file_path()).await;
        kept.extend(ids.into_iter().filter(|i| live.contains(i)).map(row));
    }
    write_data_files(t, [batch(&kept)]).await.unwrap().files
}

/// A run that commits in several snapshots with a cluster layout: each later snapshot reads
/// only the manifests listing its own cluster's files, every row stays, and a layout that hides
/// a removed file stops the commit (nothing changes) instead of dropping or keeping a file.
#[tokio::test]
async fn clustered_snapshots_read_only_their_own_manifests() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = sql_catalog(dir.path()).await;
    let committer = catalog.committer().unwrap();
    let id = TableId::parse("db.clusters").unwrap();
    let mut t = catalog
        .create_table(&id, NewTable::new(schema()).with_partition_spec(by_day()))
        .await
        .unwrap();
    // Six appends: six manifests, each listing one file of each day.
    for a in 0..6 {
        t = append(committer.as_ref(), &t, a * 10..a * 10 + 10).await;
    }
    let mut ids: BTreeSet<i64> = (0..60).collect();
    let day0 = data_files_in(&t, DAY0).await;
    let day1 = data_files_in(&t, DAY1).await;
    assert_eq!((day0.len(), day1.len()), (6, 6));
    // A position delete on the first day-1 file, removed with it.
    let f1 = day1[0].file_path().to_string();
    ids.remove(&read_file_ids(&t, &f1).await[0]);
    t = delete_positions(committer.as_ref(), &t, &f1, vec![0]).await;
    let pos = delete_files_in(&t, DAY1).await;
    assert_eq!(pos.len(), 1);

    // Clusters: day 0 (0), the first three day-1 files and the delete (1), the others (2).
    let (first, second) = day1.split_at(3);
    let layout = |c1: usize| {
        ManifestClusters::new(
            day0.iter()
                .map(|f| (f.file_path().to_string(), 0))
                .chain(first.iter().map(|f| (f.file_path().to_string(), c1)))
                .chain(pos.iter().map(|p| (p.clone(), c1)))
                .chain(second.iter().map(|f| (f.file_path().to_string(), 2))),
        )
    };
    let mut clusters = layout(1);
    let reads = || {
        catalog
            .io_counters()
            .snapshot()
            .reads_of(PathKind::Manifest)
    };
    let replace =
        |t: &LoadedTable, clusters: &ManifestClusters, files: &[DataFile], new: Vec<DataFile>| {
            SnapshotProducer::replace(t)
                .with_clusters(clusters.clone())
                .delete_data_files(paths(files))
                .add_data_files(new)
        };

    // Day 0: every data manifest lists a day-0 file, so all six are read; their day-1 entries
    // are written to one manifest per cluster.
    let new = rewrite_files(&t, &day0, &ids).await;
    let staged = replace(&t, &clusters, &day0, new).stage().await.unwrap();
    clusters.record(&staged);
    let recorded = staged.clone();
    t = staged.commit(committer.as_ref()).await.unwrap().table;
    assert_eq!(read_rows(&t).await, expected(&ids));

    // A layout that puts the first day-1 files in the wrong cluster: the manifest listing them
    // is skipped, they are not found, and the snapshot is refused.
    let mut wrong = layout(0);
    wrong.record(&recorded);
    let new = rewrite_files(&t, first, &ids).await;
    let err = replace(&t, &wrong, first, new)
        .remove_delete_files(pos.clone())
        .stage()
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("not live data files"),
        "unexpected error: {err}"
    );
    assert_eq!(
        catalog
            .load_table(&id)
            .await
            .unwrap()
            .metadata
            .current_snapshot_id(),
        t.metadata.current_snapshot_id()
    );

    // Cluster 1: its data manifest and the (unrecorded) delete manifest are read; cluster 2's
    // manifest and the added one are carried over unread.
    let before = reads();
    let new = rewrite_files(&t, first, &ids).await;
    let staged = replace(&t, &clusters, first, new)
        .remove_delete_files(pos.clone())
        .stage()
        .await
        .unwrap();
    assert_eq!(
        reads() - before,
        2,
        "cluster 1's data manifest and the delete manifest"
    );
    clusters.record(&staged);
    t = staged.commit(committer.as_ref()).await.unwrap().table;
    assert_eq!(read_rows(&t).await, expected(&ids));
    assert!(delete_files_in(&t, DAY1).await.is_empty());

    // Cluster 2: its own manifest only.
    let before = reads();
    let new = rewrite_files(&t, second, &ids).await;
    let staged = replace(&t, &clusters, second, new).stage().await.unwrap();
    assert_eq!(reads() - before, 1, "cluster 2's manifest only");
    t = staged.commit(committer.as_ref()).await.unwrap().table;
    assert_eq!(read_rows(&t).await, expected(&ids));

    // Every live data file is listed once: the three rewrites' outputs.
    let live = live_files(&t).await.unwrap();
    let data: Vec<_> = live
        .iter()
        .filter(|f| f.file.content_type() == DataContentType::Data)
        .map(|f| f.file.file_path().to_string())
        .collect();
    assert_eq!(data.len(), 3);
    assert_eq!(data.iter().collect::<BTreeSet<_>>().len(), 3);
}
