//! Broken tables get typed errors naming the table and file; a fleet scan survives them.
//!
//! The corpus (`corpus`, issue 8 point 3): a healthy table built per case and operation, then
//! broken one way (see `corpus::Case`), then scanned, graded and planned, compacted, expired,
//! its manifests and position deletes rewritten (all for real), its orphans found (dry run),
//! its missing files checked, and its maintenance plan run (for real), each in a Tokio task.
//! Every cell must be a typed error naming table and file with nothing changed (metadata
//! location and a recursive listing of names and sizes), or a success the matrix allows
//! explicitly; never a panic. `--nocapture` prints the matrix.

use std::fmt::Write as _;

use cryo_core::clock::SystemClock;
use cryo_core::scan::{FleetScanOptions, ScanOptions, scan_fleet, scan_table};
use cryo_core::{Catalog, CatalogConfig, Error, TableId};
use serde_json::Value;

use crate::common::fixtures;

fn register(db: &std::path::Path, rows: &[(&str, String)]) {
    let mut script = String::from("import sqlite3,sys\nc=sqlite3.connect(sys.argv[1])\n");
    for (name, loc) in rows {
        let _ = writeln!(
            script,
            "c.execute(\"INSERT INTO iceberg_tables VALUES ('broken','db',?,?,NULL,'TABLE')\", ({name:?}, {loc:?}))"
        );
    }
    script.push_str("c.commit()\n");
    let ok = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(db)
        .status()
        .unwrap();
    assert!(ok.success());
}

#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario: the fleet scan at the end runs over every broken table built above"
)]
async fn broken_tables_get_typed_errors_and_do_not_fail_the_fleet() {
    let m = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let good = m["tables"]["fixtures.pyiceberg.healthy"]["metadata_location"]
        .as_str()
        .unwrap();
    let good_json: Value =
        serde_json::from_slice(&std::fs::read(good.trim_start_matches("file://")).unwrap())
            .unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let p = root.join(name);
        std::fs::write(&p, bytes).unwrap();
        format!("file://{}", p.display())
    };
    let truncated = {
        let full = serde_json::to_vec(&good_json).unwrap();
        write("truncated.metadata.json", &full[..full.len() / 2])
    };
    let future = {
        let mut v = good_json.clone();
        v["format-version"] = Value::from(9);
        write("future.metadata.json", &serde_json::to_vec(&v).unwrap())
    };
    let no_list = {
        let mut v = good_json.clone();
        for s in v["snapshots"].as_array_mut().unwrap() {
            s["manifest-list"] = Value::from(format!("file://{}/gone/snap-1.avro", root.display()));
        }
        write("nolist.metadata.json", &serde_json::to_vec(&v).unwrap())
    };
    let garbage_list = {
        let list = write("snap-garbage.avro", b"this is not avro at all");
        let mut v = good_json.clone();
        for s in v["snapshots"].as_array_mut().unwrap() {
            s["manifest-list"] = Value::from(list.clone());
        }
        write("garbage.metadata.json", &serde_json::to_vec(&v).unwrap())
    };
    let missing = format!("file://{}/never-written.metadata.json", root.display());

    let db = root.join("catalog.db");
    let catalog = Catalog::connect(CatalogConfig::new(
        "broken",
        [
            ("uri", format!("sqlite:///{}", db.display())),
            ("init_catalog_tables", "true".into()),
        ],
    ))
    .await
    .unwrap();
    register(
        &db,
        &[
            ("good", good.to_string()),
            ("truncated", truncated.clone()),
            ("future", future.clone()),
            ("no_list", no_list.clone()),
            ("garbage_list", garbage_list.clone()),
            ("missing", missing.clone()),
        ],
    );

    let scan = |name: &str| {
        let id = TableId::parse(&format!("db.{name}")).unwrap();
        let catalog = &catalog;
        async move { scan_table(catalog, &id, &ScanOptions::default(), &SystemClock).await }
    };
    let e = scan("truncated").await.unwrap_err();
    assert!(
        matches!(&e, Error::Metadata { table, location, .. } if table == "db.truncated" && *location == truncated),
        "{e}"
    );
    let e = scan("future").await.unwrap_err();
    assert!(
        matches!(e, Error::Unsupported { .. }) && e.to_string().contains("format version 9"),
        "{e}"
    );
    let e = scan("no_list").await.unwrap_err();
    assert!(
        matches!(&e, Error::Metadata { location, .. } if location.ends_with("gone/snap-1.avro")),
        "{e}"
    );
    assert!(e.to_string().contains("cannot read manifest list"), "{e}");
    let e = scan("garbage_list").await.unwrap_err();
    assert!(
        matches!(&e, Error::Metadata { location, .. } if location.ends_with("snap-garbage.avro")),
        "{e}"
    );
    let e = scan("missing").await.unwrap_err();
    assert!(
        matches!(&e, Error::Metadata { location, .. } if *location == missing),
        "{e}"
    );
    assert!(e.to_string().contains("not found"), "{e}");

    let listing = || {
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file() && !p.to_string_lossy().contains("catalog.db"))
            .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
            .collect();
        v.sort();
        v
    };
    let before = listing();
    let fleet = scan_fleet(&catalog, &FleetScanOptions::default(), &SystemClock)
        .await
        .unwrap();
    assert_eq!(fleet.tables.len(), 1);
    assert_eq!(fleet.tables[0].table.to_string(), "db.good");
    let codes: Vec<(&str, &str)> = fleet
        .errors
        .iter()
        .map(|e| (e.target.as_str(), e.code.as_str()))
        .collect();
    assert_eq!(
        codes,
        vec![
            ("db.future", "unsupported"),
            ("db.garbage_list", "metadata"),
            ("db.missing", "metadata"),
            ("db.no_list", "metadata"),
            ("db.truncated", "metadata"),
        ]
    );
    // Nothing was written: scanning never changes a table.
    assert_eq!(listing(), before);
    let rows = std::process::Command::new("python3")
        .arg("-c")
        .arg("import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from iceberg_tables where metadata_location in (?,?)', (sys.argv[2], sys.argv[3])).fetchone()[0])")
        .arg(&db)
        .arg(&truncated)
        .arg(&future)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&rows.stdout).trim(), "2");
}

// ------------------------------------------------------------------------------------------
// The corpus: every operation on every kind of broken table
// ------------------------------------------------------------------------------------------

mod corpus {
    use std::collections::BTreeMap;
    use std::fmt::Write as _;
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use cryo_core::clock::{Clock, FixedClock, SystemClock};
    use cryo_core::commit::{
        NewTable, SnapshotProducer, live_files, write_data_files, write_position_deletes,
    };
    use cryo_core::compact::{Compaction, RunOptions};
    use cryo_core::exec::{MaintenanceOptions, MaintenanceRun};
    use cryo_core::grade::{GradeOptions, grade};
    use cryo_core::maintain::{
        ExpireSnapshots, FindMissingFiles, RemoveOrphanFiles, RewriteManifests,
        RewritePositionDeletes,
    };
    use cryo_core::plan::TableControl;
    use cryo_core::plan::{MaintenancePlan, PlanOptions, plan_fleet, plan_table};
    use cryo_core::receipt::ReceiptStatus;
    use cryo_core::scan::{ScanOptions, scan_table};
    use cryo_core::{Catalog, CatalogConfig, Error, LoadedTable, Namespace, TableId};
    use futures::TryStreamExt;
    use iceberg::spec::DataContentType;

    use crate::replace::{rows, schema};

    const DAY_MS: i64 = 86_400_000;

    /// How a healthy table is broken (the file named is what the errors must name).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    enum Case {
        /// The current metadata.json cut in half.
        MetadataTruncated,
        /// An HTML error page in place of the current metadata.json.
        MetadataNotJson,
        /// Valid JSON against the spec: the current schema id names no schema.
        MetadataInvalid,
        /// `format-version` 4.
        FormatVersion4,
        /// Snapshot, log and update timestamps at `i64::MAX` / `i64::MIN`.
        ExtremeTimestamps,
        /// Snapshot summaries with negative, overflowing and non-numeric counts.
        BogusSummaries,
        /// Table properties a writer should never set (sizes of 0 and -1, an unknown codec,
        /// negative retries, `gc.enabled=perhaps`) and `i64::MAX` ref retention.
        HostileProperties,
        /// The current manifest list: Avro magic, then noise.
        ManifestListGarbage,
        /// The current manifest list cut in half.
        ManifestListTruncated,
        /// The current manifest list replaced by a symbolic link to nowhere (unreadable:
        /// the tests run as root, so permissions cannot make a file unreadable).
        ManifestListDanglingSymlink,
        /// A data manifest every snapshot carries: Avro magic, then noise.
        ManifestGarbage,
        /// That manifest cut in half.
        ManifestTruncated,
        /// A live data file cut in half.
        DataTruncated,
        /// A live data file overwritten with noise of the same size.
        DataNotParquet,
        /// A live data file with Parquet magic at both ends and noise for a footer.
        DataBadFooter,
        /// A live data file deleted.
        DataMissing,
        /// A live data file replaced by a directory of the same name.
        DataIsDirectory,
        /// Quotes, dots, spaces, `--`, `;`, `%41`, `#1` and non-ASCII in the namespace and the
        /// name (and so in every path), with the garbage manifest.
        OddIdentifier,
    }

    const CASES: [Case; 18] = [
        Case::MetadataTruncated,
        Case::MetadataNotJson,
        Case::MetadataInvalid,
        Case::FormatVersion4,
        Case::ExtremeTimestamps,
        Case::BogusSummaries,
        Case::HostileProperties,
        Case::ManifestListGarbage,
        Case::ManifestListTruncated,
        Case::ManifestListDanglingSymlink,
        Case::ManifestGarbage,
        Case::ManifestTruncated,
        Case::DataTruncated,
        Case::DataNotParquet,
        Case::DataBadFooter,
        Case::DataMissing,
        Case::DataIsDirectory,
        Case::OddIdentifier,
    ];

    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    enum Op {
        Scan,
        GradePlan,
        Compact,
        Expire,
        RewriteManifests,
        RewritePositionDeletes,
        RemoveOrphansDryRun,
        MissingFiles,
        MaintenanceRun,
    }

    const OPS: [Op; 9] = [
        Op::Scan,
        Op::GradePlan,
        Op::Compact,
        Op::Expire,
        Op::RewriteManifests,
        Op::RewritePositionDeletes,
        Op::RemoveOrphansDryRun,
        Op::MissingFiles,
        Op::MaintenanceRun,
    ];

    /// What an operation did.
    #[derive(Debug, Clone)]
    enum Got {
        /// It returned this error.
        Err(String, String),
        /// It returned an outcome that carries a typed failure (a compaction group, a receipt).
        Failed(String, String),
        /// It succeeded; what it did.
        Ok(String),
        /// The task panicked.
        Panic(String),
    }

    /// A healthy table, then broken.
    struct Broken {
        catalog: Arc<Catalog>,
        id: TableId,
        table_dir: PathBuf,
        /// The file broken (or removed, or replaced).
        file: PathBuf,
        /// The maintenance plan made while the table was healthy.
        plan: MaintenancePlan,
    }

    fn local(location: &str) -> PathBuf {
        PathBuf::from(
            location
                .strip_prefix("file://")
                .or_else(|| location.strip_prefix("file:"))
                .unwrap_or(location),
        )
    }

    /// Unpartitioned v2: three appends and two position-delete commits ten days ago (expirable,
    /// compactable, manifests to merge, two delete files on one data file), one recent append.
    async fn healthy(root: &Path, id: &TableId) -> (Arc<Catalog>, LoadedTable) {
        let mut config = CatalogConfig::local("corpus", root);
        config
            .properties
            .insert("init_catalog_tables".into(), "true".into());
        let catalog = Catalog::connect(config).await.unwrap();
        catalog.create_namespace(&id.namespace).await.unwrap();
        let now = SystemClock.now_ms();
        let old = now - 10 * DAY_MS;
        let mut t = catalog
            .create_table(
                id,
                NewTable::new(schema()).with_clock(Arc::new(FixedClock(old - DAY_MS))),
            )
            .await
            .unwrap();
        let committer = catalog.committer().unwrap();
        let mut first_file = None;
        for (i, ids) in [0..40, 40..80, 80..120].into_iter().enumerate() {
            let w = write_data_files(&t, [rows(ids)]).await.unwrap();
            if first_file.is_none() {
                first_file = Some(w.files[0].file_path().to_string());
            }
            t = SnapshotProducer::new(&t)
                .add_data_files(w.files)
                .with_clock(Arc::new(FixedClock(old + i as i64 * 60_000)))
                .commit(committer.as_ref())
                .await
                .unwrap()
                .table;
        }
        let first = first_file.unwrap();
        for (i, positions) in [vec![0, 5], vec![7]].into_iter().enumerate() {
            let pos = write_position_deletes(&t, &[(first.clone(), positions)])
                .await
                .unwrap();
            t = SnapshotProducer::new(&t)
                .add_delete_files(pos.files)
                .with_clock(Arc::new(FixedClock(old + (10 + i as i64) * 60_000)))
                .commit(committer.as_ref())
                .await
                .unwrap()
                .table;
        }
        let w = write_data_files(&t, [rows(120..130)]).await.unwrap();
        t = SnapshotProducer::new(&t)
            .add_data_files(w.files)
            .with_clock(Arc::new(FixedClock(now - 3_600_000)))
            .commit(committer.as_ref())
            .await
            .unwrap()
            .table;
        (Arc::new(catalog), t)
    }

    #[allow(
        clippy::too_many_lines,
        reason = "one arm per case: how each table is broken reads best side by side"
    )]
    async fn build(root: &Path, case: Case) -> Broken {
        let id = if case == Case::OddIdentifier {
            TableId::new(
                Namespace::new(["odd ns; --", "ünï \"cödé\""]),
                "t.'x' %41 #1 ✓",
            )
        } else {
            TableId::new(Namespace::new(["db"]), format!("{case:?}").to_lowercase())
        };
        let (catalog, t) = healthy(root, &id).await;
        let scan = scan_table(&catalog, &id, &ScanOptions::default(), &SystemClock)
            .await
            .unwrap();
        let report = grade(&scan, &GradeOptions::default(), scan.scanned_at_ms).unwrap();
        let options = PlanOptions {
            small_table_bytes: 0,
            min_input_files: 2,
            ..PlanOptions::default()
        };
        let plan = plan_fleet(
            catalog.name(),
            &[(scan.clone(), report)],
            &options,
            &BTreeMap::new(),
            scan.scanned_at_ms,
        )
        .unwrap();
        let table_dir = local(t.metadata.location());
        let metadata = local(t.metadata_location.as_deref().unwrap());
        let list = local(t.metadata.current_snapshot().unwrap().manifest_list());
        let live = live_files(&t).await.unwrap();
        let data = live
            .iter()
            .filter(|f| f.file.content_type() == DataContentType::Data)
            .map(|f| local(f.file.file_path()))
            .nth(1)
            .unwrap();
        let manifest = live
            .iter()
            .find(|f| f.file.content_type() == DataContentType::Data)
            .map(|f| local(&f.manifest))
            .unwrap();
        let garbage = |len: usize, head: &[u8]| -> Vec<u8> {
            let mut v = head.to_vec();
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            while v.len() < len.max(head.len() + 16) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                v.push((x >> 24) as u8);
            }
            v
        };
        let truncate = |p: &Path| {
            let b = std::fs::read(p).unwrap();
            std::fs::write(p, &b[..b.len() / 2]).unwrap();
        };
        let file = match case {
            Case::MetadataTruncated => {
                truncate(&metadata);
                metadata
            }
            Case::MetadataNotJson => {
                std::fs::write(&metadata, b"<html>503 Service Unavailable</html>").unwrap();
                metadata
            }
            Case::MetadataInvalid => {
                let mut v: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&metadata).unwrap()).unwrap();
                v["current-schema-id"] = 99.into();
                std::fs::write(&metadata, serde_json::to_vec(&v).unwrap()).unwrap();
                metadata
            }
            Case::FormatVersion4 => {
                let mut v: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&metadata).unwrap()).unwrap();
                v["format-version"] = 4.into();
                std::fs::write(&metadata, serde_json::to_vec(&v).unwrap()).unwrap();
                metadata
            }
            Case::ExtremeTimestamps => {
                let mut v: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&metadata).unwrap()).unwrap();
                for (i, s) in v["snapshots"]
                    .as_array_mut()
                    .unwrap()
                    .iter_mut()
                    .enumerate()
                {
                    s["timestamp-ms"] = if i % 2 == 0 { i64::MAX } else { i64::MIN }.into();
                }
                v["last-updated-ms"] = i64::MAX.into();
                for e in v["snapshot-log"].as_array_mut().unwrap() {
                    e["timestamp-ms"] = i64::MIN.into();
                }
                std::fs::write(&metadata, serde_json::to_vec(&v).unwrap()).unwrap();
                metadata
            }
            Case::BogusSummaries => {
                let mut v: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&metadata).unwrap()).unwrap();
                for s in v["snapshots"].as_array_mut().unwrap() {
                    let summary = s["summary"].as_object_mut().unwrap();
                    for (k, val) in summary.iter_mut() {
                        if k != "operation" {
                            *val = "-9223372036854775808".into();
                        }
                    }
                    summary.insert("total-records".into(), "18446744073709551615".into());
                    summary.insert("total-files-size".into(), "lots".into());
                    summary.insert("added-data-files".into(), "-1".into());
                }
                std::fs::write(&metadata, serde_json::to_vec(&v).unwrap()).unwrap();
                metadata
            }
            Case::HostileProperties => {
                let mut v: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&metadata).unwrap()).unwrap();
                if !v["properties"].is_object() {
                    v["properties"] = serde_json::json!({});
                }
                let props = v["properties"].as_object_mut().unwrap();
                for (k, val) in [
                    ("write.target-file-size-bytes", "0"),
                    ("commit.manifest.target-size-bytes", "-1"),
                    ("history.expire.max-snapshot-age-ms", "9223372036854775807"),
                    ("history.expire.min-snapshots-to-keep", "4294967296"),
                    ("history.expire.max-ref-age-ms", "-9223372036854775808"),
                    ("commit.retry.num-retries", "-5"),
                    ("commit.retry.min-wait-ms", "99999999999999999999"),
                    ("write.parquet.compression-codec", "lz77-of-the-future"),
                    ("write.parquet.compression-level", "-999"),
                    ("write.parquet.row-group-size-bytes", "0"),
                    ("write.metadata.previous-versions-max", "-1"),
                    ("write.delete.mode", "sideways"),
                    ("gc.enabled", "perhaps"),
                ] {
                    props.insert(k.into(), val.into());
                }
                let main = &mut v["refs"]["main"];
                main["max-ref-age-ms"] = i64::MAX.into();
                main["max-snapshot-age-ms"] = i64::MAX.into();
                main["min-snapshots-to-keep"] = i32::MAX.into();
                std::fs::write(&metadata, serde_json::to_vec(&v).unwrap()).unwrap();
                metadata
            }
            Case::ManifestListGarbage => {
                let len = std::fs::metadata(&list).unwrap().len() as usize;
                std::fs::write(&list, garbage(len, b"Obj\x01")).unwrap();
                list
            }
            Case::ManifestListTruncated => {
                truncate(&list);
                list
            }
            Case::ManifestListDanglingSymlink => {
                std::fs::remove_file(&list).unwrap();
                std::os::unix::fs::symlink(table_dir.join("nowhere/snap.avro"), &list).unwrap();
                list
            }
            Case::ManifestGarbage | Case::OddIdentifier => {
                let len = std::fs::metadata(&manifest).unwrap().len() as usize;
                std::fs::write(&manifest, garbage(len, b"Obj\x01")).unwrap();
                manifest
            }
            Case::ManifestTruncated => {
                truncate(&manifest);
                manifest
            }
            Case::DataTruncated => {
                truncate(&data);
                data
            }
            Case::DataNotParquet => {
                let len = std::fs::metadata(&data).unwrap().len() as usize;
                std::fs::write(&data, garbage(len, b"")).unwrap();
                data
            }
            Case::DataBadFooter => {
                // Magic at both ends, garbage in between: the footer length and the
                // footer itself are nonsense.
                let len = std::fs::metadata(&data).unwrap().len() as usize;
                let mut b = garbage(len - 4, b"PAR1");
                b.extend_from_slice(b"PAR1");
                std::fs::write(&data, b).unwrap();
                data
            }
            Case::DataMissing => {
                std::fs::remove_file(&data).unwrap();
                data
            }
            Case::DataIsDirectory => {
                std::fs::remove_file(&data).unwrap();
                std::fs::create_dir(&data).unwrap();
                data
            }
        };
        Broken {
            catalog,
            id,
            table_dir,
            file,
            plan,
        }
    }

    /// Names and sizes (and kinds) of everything under `dir`.
    fn listing(dir: &Path) -> BTreeMap<String, String> {
        fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                let m = std::fs::symlink_metadata(&p).unwrap();
                if m.is_symlink() {
                    out.insert(
                        rel,
                        format!("link {}", std::fs::read_link(&p).unwrap().display()),
                    );
                } else if m.is_dir() {
                    out.insert(rel.clone(), "dir".into());
                    walk(&p, root, out);
                } else {
                    out.insert(rel, format!("{} bytes", m.len()));
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(dir, dir, &mut out);
        out
    }

    fn err(e: &Error) -> Got {
        Got::Err(e.code().to_string(), e.to_string())
    }

    /// Run `op` on the broken table in its own task: a panic is caught, not propagated (and
    /// every operation's future must be `Send` to compile here).
    #[allow(
        clippy::too_many_lines,
        reason = "one arm per operation, each turning its outcome into a `Got`"
    )]
    async fn run(b: &Broken, op: Op) -> Got {
        let catalog = Arc::clone(&b.catalog);
        let id = b.id.clone();
        let plan = b.plan.clone();
        let task = tokio::spawn(async move {
            let c = catalog.as_ref();
            match op {
                Op::Scan => match scan_table(c, &id, &ScanOptions::default(), &SystemClock).await {
                    Ok(s) => Got::Ok(format!("scanned: {} data files", s.data_files.count)),
                    Err(e) => err(&e),
                },
                Op::GradePlan => {
                    let scan = match scan_table(c, &id, &ScanOptions::default(), &SystemClock).await
                    {
                        Ok(s) => s,
                        Err(e) => return err(&e),
                    };
                    let report = match grade(&scan, &GradeOptions::default(), scan.scanned_at_ms) {
                        Ok(r) => r,
                        Err(e) => return err(&e),
                    };
                    match plan_table(
                        &scan,
                        &report,
                        &PlanOptions::default(),
                        &TableControl::default(),
                        scan.scanned_at_ms,
                    ) {
                        Ok(p) => {
                            Got::Ok(format!("grade {:?}, {} steps", report.grade, p.steps.len()))
                        }
                        Err(e) => err(&e),
                    }
                }
                Op::Compact => match Compaction::new(c, id.clone())
                    .with_run_options(RunOptions {
                        dry_run: false,
                        ..RunOptions::default()
                    })
                    .execute()
                    .await
                {
                    Err(e) => err(&e),
                    Ok(o) => {
                        let failed = o.groups.iter().find_map(|g| match &g.status {
                            cryo_core::compact::GroupStatus::Failed { code, message, .. } => {
                                Some((code.clone(), message.clone()))
                            }
                            _ => None,
                        });
                        match failed {
                            Some((code, message)) => Got::Failed(code, message),
                            None => Got::Ok(format!("{} groups committed", o.committed_groups())),
                        }
                    }
                },
                Op::Expire => match ExpireSnapshots::new(c, id.clone())
                    .dry_run(false)
                    .execute()
                    .await
                {
                    Err(e) => err(&e),
                    Ok(o) => Got::Ok(format!(
                        "expired {} snapshots, deleted {} files, cleanup_error {:?}, failures {}",
                        o.expired_snapshot_ids.len(),
                        o.deleted.total().files,
                        o.cleanup_error,
                        o.failures.len()
                    )),
                },
                Op::RewriteManifests => match RewriteManifests::new(c, id.clone())
                    .dry_run(false)
                    .execute()
                    .await
                {
                    Err(e) => err(&e),
                    Ok(o) => Got::Ok(format!(
                        "{:?}: {} -> {} manifests",
                        o.status, o.manifests_before, o.manifests_after
                    )),
                },
                Op::RewritePositionDeletes => match RewritePositionDeletes::new(c, id.clone())
                    .dry_run(false)
                    .execute()
                    .await
                {
                    Err(e) => err(&e),
                    Ok(o) => {
                        let failed = o.groups.iter().find_map(|g| match &g.status {
                            cryo_core::maintain::DeleteGroupStatus::Failed {
                                code,
                                message,
                                ..
                            } => Some((code.clone(), message.clone())),
                            _ => None,
                        });
                        match failed {
                            Some((code, message)) => Got::Failed(code, message),
                            None => Got::Ok(format!("{} groups committed", o.committed_groups())),
                        }
                    }
                },
                Op::RemoveOrphansDryRun => {
                    match RemoveOrphanFiles::new(c, id.clone()).execute().await {
                        Err(e) => err(&e),
                        Ok(o) => Got::Ok(format!("{} orphans", o.orphans.len())),
                    }
                }
                Op::MissingFiles => match FindMissingFiles::new(c, id.clone()).execute().await {
                    Err(e) => err(&e),
                    Ok(o) => Got::Ok(format!(
                        "missing {:?}, unreadable {:?}",
                        o.missing
                            .iter()
                            .map(|m| m.path.rsplit('/').next().unwrap_or_default().to_string())
                            .collect::<Vec<_>>(),
                        o.unreadable
                            .iter()
                            .map(|m| m.message.clone())
                            .collect::<Vec<_>>()
                    )),
                },
                Op::MaintenanceRun => match MaintenanceRun::new(c, &plan)
                    .with_options(MaintenanceOptions {
                        dry_run: false,
                        actor: "bad-input".into(),
                        ..MaintenanceOptions::default()
                    })
                    .execute()
                    .await
                {
                    Err(e) => err(&e),
                    Ok(o) => {
                        let failed = o
                            .receipts
                            .iter()
                            .find(|r| r.status == ReceiptStatus::Failed);
                        match failed {
                            Some(r) => Got::Failed(
                                r.details
                                    .get("error_code")
                                    .and_then(|v| v.as_str())
                                    .unwrap_or("?")
                                    .to_string(),
                                format!(
                                    "{:?}: {}",
                                    r.operation,
                                    r.reason.clone().unwrap_or_default()
                                ),
                            ),
                            None => Got::Ok(
                                o.receipts
                                    .iter()
                                    .map(|r| format!("{:?}={:?}", r.operation, r.status))
                                    .collect::<Vec<_>>()
                                    .join(","),
                            ),
                        }
                    }
                },
            }
        });
        match task.await {
            Ok(g) => g,
            Err(e) if e.is_panic() => {
                let p = e.into_panic();
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_string()))
                    .unwrap_or_default();
                Got::Panic(msg)
            }
            Err(e) => Got::Panic(format!("cancelled: {e}")),
        }
    }

    /// What a case × operation must give.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Want {
        /// A typed error with this code (returned, or carried by a group or a receipt), naming
        /// the table and the broken file; nothing changed.
        Fails(&'static str),
        /// Success that changes nothing (reads only, or nothing to do).
        Unchanged,
        /// Success with a commit: the operation never needs the broken file. The broken file
        /// and every data file stay as they were, and the table reads as before.
        Commits,
    }

    fn want(case: Case, op: Op) -> Want {
        use Op as O;
        use Want::{Commits, Fails, Unchanged};
        match case {
            Case::MetadataTruncated
            | Case::MetadataNotJson
            | Case::MetadataInvalid
            | Case::ExtremeTimestamps => Fails("metadata"),
            Case::FormatVersion4 => Fails("unsupported"),
            // Summaries are informational: Cryo counts from manifests.
            Case::BogusSummaries => match op {
                O::Scan | O::GradePlan | O::RemoveOrphansDryRun | O::MissingFiles => Unchanged,
                _ => Commits,
            },
            Case::HostileProperties => match op {
                O::Scan | O::GradePlan | O::MissingFiles => Unchanged,
                O::Compact | O::RewriteManifests | O::MaintenanceRun => Fails("config"),
                O::Expire | O::RemoveOrphansDryRun => Fails("refused"),
                O::RewritePositionDeletes => Fails("unsupported"),
            },
            Case::ManifestListGarbage
            | Case::ManifestListTruncated
            | Case::ManifestListDanglingSymlink => match op {
                O::MissingFiles => Unchanged,
                _ => Fails("metadata"),
            },
            // The broken manifest is carried by every snapshot, kept ones too: expiry has no
            // reason to open it (its dry run agrees).
            Case::ManifestGarbage | Case::ManifestTruncated | Case::OddIdentifier => match op {
                O::MissingFiles => Unchanged,
                O::Expire => Commits,
                _ => Fails("metadata"),
            },
            Case::DataTruncated
            | Case::DataNotParquet
            | Case::DataBadFooter
            | Case::DataMissing
            | Case::DataIsDirectory => match op {
                O::Scan | O::GradePlan | O::RemoveOrphansDryRun | O::MissingFiles => Unchanged,
                O::Compact | O::MaintenanceRun => Fails("storage"),
                O::Expire | O::RewriteManifests | O::RewritePositionDeletes => Commits,
            },
        }
    }

    /// Which properties the hostile-properties case set (its errors name one of them).
    const HOSTILE: [&str; 5] = [
        "write.target-file-size-bytes",
        "gc.enabled",
        "commit.manifest.target-size-bytes",
        "write.parquet.compression-codec",
        "commit.retry.num-retries",
    ];

    /// The rows the table reads (upstream's reader, deletes applied), or, when a data file is
    /// broken, its live data files; `None` when even the manifests cannot be read.
    async fn readback(b: &Broken) -> Option<String> {
        let t = b.catalog.load_table(&b.id).await.ok()?;
        let rows = async {
            let batches: Vec<arrow_array::RecordBatch> = t
                .to_iceberg()
                .ok()?
                .scan()
                .select_all()
                .build()
                .ok()?
                .to_arrow()
                .await
                .ok()?
                .try_collect()
                .await
                .ok()?;
            Some(crate::compact::fingerprint(&batches))
        }
        .await;
        if let Some((n, digest)) = rows {
            return Some(format!("{n} rows {digest}"));
        }
        let mut files: Vec<String> = live_files(&t)
            .await
            .ok()?
            .into_iter()
            .filter(|f| f.file.content_type() == DataContentType::Data)
            .map(|f| f.file.file_path().to_string())
            .collect();
        files.sort();
        Some(format!("unreadable rows; data files {files:?}"))
    }

    /// Every operation on every broken table, each in its own task: a typed error naming the
    /// table and the file (or an outcome that explicitly may succeed), never a panic, and the
    /// table's metadata location and files as they were (docs/architecture.md, "Deletion safety").
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[allow(
        clippy::too_many_lines,
        reason = "one matrix: every check for every cell, then the report"
    )]
    async fn every_operation_on_every_broken_table_is_typed_and_changes_nothing() {
        let mut matrix = String::new();
        let mut wrong = Vec::new();
        for case in CASES {
            let _ = write!(matrix, "{:<28}", format!("{case:?}"));
            for op in OPS {
                let dir = tempfile::tempdir().unwrap();
                let b = build(dir.path(), case).await;
                let sql = b.catalog.as_sql().unwrap();
                let location = sql.metadata_location(&b.id).await.unwrap();
                let files = listing(&b.table_dir);
                let rows = readback(&b).await;
                let got = run(&b, op).await;
                let location_after = sql.metadata_location(&b.id).await.unwrap();
                let files_after = listing(&b.table_dir);
                let unchanged = location_after == location && files_after == files;
                let broken = b.file.file_name().unwrap().to_string_lossy().to_string();
                let table = b.id.to_string();
                let names = |m: &str| {
                    m.contains(&table)
                        && if case == Case::HostileProperties {
                            HOSTILE.iter().any(|k| m.contains(k))
                        } else {
                            m.contains(&broken)
                        }
                };
                let mut problem = |what: String| wrong.push(format!("{case:?} × {op:?}: {what}"));
                let cell = match (&got, want(case, op)) {
                    (Got::Panic(m), _) => {
                        problem(format!("PANICKED: {m}"));
                        "PANIC".to_string()
                    }
                    (Got::Err(code, m) | Got::Failed(code, m), Want::Fails(expected)) => {
                        if code != expected {
                            problem(format!("error code {code}, want {expected}: {m}"));
                        }
                        if !names(m) {
                            problem(format!(
                                "the error does not name `{table}` and `{broken}`: {m}"
                            ));
                        }
                        if !unchanged {
                            problem(format!("failed but changed the table: {m}"));
                        }
                        let how = if matches!(got, Got::Err(..)) {
                            "err"
                        } else {
                            "fail"
                        };
                        format!("{how}:{code}")
                    }
                    (Got::Ok(note), Want::Unchanged) => {
                        if !unchanged {
                            problem(format!("changed the table: {note}"));
                        }
                        if op == Op::MissingFiles {
                            // The check reports what it can see: missing and unreadable files.
                            let sees = matches!(
                                case,
                                Case::ManifestListGarbage
                                    | Case::ManifestListTruncated
                                    | Case::ManifestListDanglingSymlink
                                    | Case::ManifestGarbage
                                    | Case::ManifestTruncated
                                    | Case::OddIdentifier
                                    | Case::DataMissing
                                    | Case::DataIsDirectory
                            );
                            if sees != note.contains(&broken) {
                                problem(format!(
                                    "the report should{} name {broken}: {note}",
                                    if sees { "" } else { " not" }
                                ));
                            }
                            if sees { "ok:reported" } else { "ok" }.to_string()
                        } else {
                            "ok".to_string()
                        }
                    }
                    (Got::Ok(note), Want::Commits) => {
                        if location_after == location {
                            problem(format!("expected a commit: {note}"));
                        }
                        let rel = b
                            .file
                            .strip_prefix(&b.table_dir)
                            .unwrap()
                            .display()
                            .to_string();
                        if files.get(&rel) != files_after.get(&rel) {
                            problem(format!("touched the broken file: {note}"));
                        }
                        for (path, what) in &files {
                            if path.starts_with("data/") && files_after.get(path) != Some(what) {
                                problem(format!("removed or changed data file {path}: {note}"));
                            }
                        }
                        if readback(&b).await != rows {
                            problem(format!("the table reads differently: {note}"));
                        }
                        "ok:commit".to_string()
                    }
                    (other, w) => {
                        problem(format!("got {other:?}, want {w:?}"));
                        "WRONG".to_string()
                    }
                };
                let _ = write!(matrix, " {cell:<13}");
            }
            matrix.push('\n');
        }
        let mut header = format!("{:<28}", "case \\ operation");
        for o in OPS {
            let name: String = format!("{o:?}").chars().take(13).collect();
            let _ = write!(header, " {name:<13}");
        }
        eprintln!("{header}\n{matrix}");
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    /// The expiry fix this corpus found: a real run fails where its dry run fails, before any
    /// commit, instead of expiring the snapshots of a table whose current manifest list cannot
    /// be read (they are what a person would roll it back to).
    #[tokio::test]
    async fn expiry_proves_reachability_before_it_commits() {
        let dir = tempfile::tempdir().unwrap();
        let b = build(dir.path(), Case::ManifestListGarbage).await;
        let sql = b.catalog.as_sql().unwrap();
        let location = sql.metadata_location(&b.id).await.unwrap();
        let dry = ExpireSnapshots::new(&b.catalog, b.id.clone())
            .execute()
            .await
            .unwrap_err();
        let real = ExpireSnapshots::new(&b.catalog, b.id.clone())
            .dry_run(false)
            .execute()
            .await
            .unwrap_err();
        assert_eq!(dry.to_string(), real.to_string());
        assert!(matches!(real, Error::Metadata { .. }), "{real}");
        assert_eq!(sql.metadata_location(&b.id).await.unwrap(), location);
        let t = b.catalog.load_table(&b.id).await.unwrap();
        assert_eq!(t.metadata.snapshots().count(), 6, "nothing expired");
    }
}
