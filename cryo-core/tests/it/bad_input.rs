//! Broken tables get typed errors naming the table and file; a fleet scan survives them.

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
#[allow(
    clippy::too_many_lines,
    reason = "one scenario: the fleet scan at the end runs over every broken table built above"
)]
async fn broken_tables_get_typed_errors_and_do_not_fail_the_fleet() {
    let Some(m) = fixtures() else { return };
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
