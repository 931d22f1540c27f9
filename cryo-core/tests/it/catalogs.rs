//! Every catalog kind against tables other engines wrote: SQL (sqlite), Hadoop directories, a
//! single metadata.json, the SeaweedFS REST catalog (OAuth2 and bearer token) and S3 on moto.

use cryo_core::catalog::{CatalogKind, SqlSchemaVersion};
use cryo_core::clock::SystemClock;
use cryo_core::io::PathKind;
use cryo_core::scan::{FleetScanOptions, ScanOptions, scan_fleet, scan_table};
use cryo_core::{Catalog, CatalogConfig, Error, Namespace, TableId};

use crate::common::{fixture_catalog, fixtures, service_env};

fn table_entry<'a>(m: &'a serde_json::Value, key: &str) -> &'a serde_json::Value {
    &m["tables"][key]
}

#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn sql_catalog_lists_namespaces_and_tables() {
    let m = fixtures();
    let catalog = Catalog::connect(fixture_catalog(&m, "fixtures"))
        .await
        .unwrap();
    assert_eq!(catalog.kind(), CatalogKind::Sql);
    assert_eq!(
        catalog.as_sql().unwrap().schema_version().await.unwrap(),
        SqlSchemaVersion::V1
    );
    let ns = catalog.list_namespaces().await.unwrap();
    assert_eq!(
        ns,
        vec![Namespace::new(["pyiceberg"]), Namespace::new(["spark"])]
    );
    let tables = catalog.list_all_tables().await.unwrap();
    let expected: Vec<String> = m["tables"]
        .as_object()
        .unwrap()
        .values()
        .filter(|t| t["catalog"] == "fixtures")
        .map(|t| t["identifier"].as_str().unwrap().to_string())
        .collect();
    let mut expected = expected;
    expected.sort();
    assert_eq!(
        tables.iter().map(ToString::to_string).collect::<Vec<_>>(),
        expected
    );
    let err = catalog
        .load_table(&TableId::parse("pyiceberg.nope").unwrap())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
}

/// `close` waits until the connections are closed (bindings call it before a catalog is
/// dropped, so nothing is closing inside `SQLite` when the process forks); calls after it fail
/// with a catalog error, and the database opens again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_sql_catalog_refuses_calls_and_the_database_opens_again() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = crate::replace::sql_catalog(dir.path()).await;
    let namespaces = catalog.list_namespaces().await.unwrap();
    assert_eq!(namespaces, vec![Namespace::new(["db"])]);
    catalog.close().await;
    let err = catalog.list_namespaces().await.unwrap_err();
    assert!(matches!(err, Error::Catalog { .. }), "{err}");
    catalog.close().await; // twice is harmless
    let again = Catalog::connect(catalog.config().clone()).await.unwrap();
    assert_eq!(again.list_namespaces().await.unwrap(), namespaces);
}

#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn sql_catalog_reads_the_old_schema_and_upgrades_on_request() {
    let m = fixtures();
    let dir = tempfile::tempdir().unwrap();
    let src = m["catalogs"]["fixtures"]["uri"]
        .as_str()
        .unwrap()
        .trim_start_matches("sqlite:///");
    let db = dir.path().join("old.db");
    std::fs::copy(src, &db).unwrap();
    // Java's JdbcCatalog "V0" schema: no iceberg_type column.
    let conn = std::process::Command::new("python3")
        .args(["-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('ALTER TABLE iceberg_tables DROP COLUMN iceberg_type'); c.commit()"])
        .arg(&db)
        .status()
        .unwrap();
    assert!(conn.success());
    let config = CatalogConfig::new("fixtures", [("uri", format!("sqlite:///{}", db.display()))]);
    let catalog = Catalog::connect(config).await.unwrap();
    let sql = catalog.as_sql().unwrap();
    assert_eq!(sql.schema_version().await.unwrap(), SqlSchemaVersion::V0);
    assert_eq!(catalog.list_all_tables().await.unwrap().len(), 6);
    catalog
        .load_table(&TableId::parse("pyiceberg.events").unwrap())
        .await
        .unwrap();
    assert_eq!(sql.upgrade_schema().await.unwrap(), SqlSchemaVersion::V1);
    assert_eq!(sql.schema_version().await.unwrap(), SqlSchemaVersion::V1);
    assert_eq!(catalog.list_all_tables().await.unwrap().len(), 6);
}

#[tokio::test]
async fn sql_catalog_refuses_a_missing_database() {
    let config = CatalogConfig::new("c", [("uri", "sqlite:////nonexistent/dir/catalog.db")]);
    let err = Catalog::connect(config).await.unwrap_err();
    assert!(matches!(err, Error::Config { .. }), "{err}");
    assert!(err.to_string().contains("init_catalog_tables"), "{err}");
    let bad = CatalogConfig::new(
        "c",
        [
            ("uri", "sqlite:////tmp/x.db"),
            ("pool.max-connections", "lots"),
        ],
    );
    assert!(matches!(
        Catalog::connect(bad).await.unwrap_err(),
        Error::Config { .. }
    ));
}

#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn hadoop_catalog_follows_the_version_hint() {
    let m = fixtures();
    let catalog = Catalog::connect(fixture_catalog(&m, "hadoop"))
        .await
        .unwrap();
    assert_eq!(catalog.kind(), CatalogKind::Hadoop);
    let tables = catalog.list_all_tables().await.unwrap();
    assert_eq!(tables, vec![TableId::parse("db.hadoop_tbl").unwrap()]);
    let entry = table_entry(&m, "hadoop.db.hadoop_tbl");
    let t = catalog.load_table(&tables[0]).await.unwrap();
    let loc = t.metadata_location.clone().unwrap();
    assert!(
        loc.ends_with(
            entry["metadata_location"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
        ),
        "{loc}"
    );
    let scan = scan_table(&catalog, &tables[0], &ScanOptions::default(), &SystemClock)
        .await
        .unwrap();
    assert_eq!(scan.data_files.count, entry["data_files"].as_u64().unwrap());
    assert_eq!(
        scan.delete_files.position.files,
        entry["position_delete_files"].as_u64().unwrap()
    );
}

#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn static_tables_from_a_metadata_file_or_a_directory() {
    let m = fixtures();
    let entry = table_entry(&m, "fixtures.pyiceberg.events");
    let loc = entry["metadata_location"].as_str().unwrap();
    let catalog = Catalog::connect(CatalogConfig::new("one", [("metadata-location", loc)]))
        .await
        .unwrap();
    assert_eq!(catalog.kind(), CatalogKind::Static);
    let ids = catalog.list_all_tables().await.unwrap();
    assert_eq!(ids, vec![TableId::parse("pyiceberg.events").unwrap()]);
    let scan = scan_table(&catalog, &ids[0], &ScanOptions::default(), &SystemClock)
        .await
        .unwrap();
    assert_eq!(scan.data_files.count, entry["data_files"].as_u64().unwrap());

    let hadoop = table_entry(&m, "hadoop.db.hadoop_tbl");
    let dir = hadoop["location"].as_str().unwrap();
    let catalog = Catalog::connect(CatalogConfig::new(
        "one",
        [("type", "static"), ("metadata-location", dir)],
    ))
    .await
    .unwrap();
    let ids = catalog.list_all_tables().await.unwrap();
    let t = catalog.load_table(&ids[0]).await.unwrap();
    assert!(t.metadata_location.unwrap().ends_with(".metadata.json"));
}

#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn s3_tables_on_a_loopback_server() {
    let m = fixtures();
    // The table lives on moto S3: the services must be up.
    service_env("CRYO_MOTO_ENDPOINT");
    assert!(
        !m["tables"]["fixtures_s3.pyiceberg.s3_small"].is_null(),
        "the S3 fixture is missing: run make_fixtures.py --s3"
    );
    let catalog = Catalog::connect(fixture_catalog(&m, "fixtures_s3"))
        .await
        .unwrap();
    let fleet = scan_fleet(&catalog, &FleetScanOptions::default(), &SystemClock)
        .await
        .unwrap();
    assert!(fleet.errors.is_empty(), "{:?}", fleet.errors);
    let entry = table_entry(&m, "fixtures_s3.pyiceberg.s3_small");
    let scan = &fleet.tables[0];
    assert!(scan.location.starts_with("s3://"));
    assert_eq!(scan.data_files.count, entry["data_files"].as_u64().unwrap());
    assert_eq!(scan.io.reads_of(PathKind::DataFile), 0);

    // moto accepts any key, so check that configured keys never reach Debug output or scans.
    let mut secret = fixture_catalog(&m, "fixtures_s3");
    secret
        .properties
        .insert("s3.secret-access-key".into(), "planted-secret-value".into());
    let catalog = Catalog::connect(secret).await.unwrap();
    let scan = scan_table(&catalog, &scan.table, &ScanOptions::default(), &SystemClock)
        .await
        .unwrap();
    let shown = format!(
        "{catalog:?} {:?} {}",
        catalog.storage(),
        serde_json::to_string(&scan).unwrap()
    );
    assert!(!shown.contains("planted-secret-value"), "secret leaked");
}

fn rest_config(extra: &[(&str, String)]) -> CatalogConfig {
    let uri = service_env("CRYO_REST_URI");
    let warehouse = service_env("CRYO_REST_WAREHOUSE");
    let endpoint = service_env("CRYO_SEAWEED_S3_ENDPOINT");
    let key = service_env("CRYO_SEAWEED_ACCESS_KEY");
    let secret = service_env("CRYO_SEAWEED_SECRET_KEY");
    let mut props = vec![
        ("uri".to_string(), uri),
        ("warehouse".to_string(), warehouse),
        ("s3.endpoint".to_string(), endpoint),
        ("s3.access-key-id".to_string(), key),
        ("s3.secret-access-key".to_string(), secret),
        ("s3.path-style-access".to_string(), "true".to_string()),
    ];
    props.extend(extra.iter().map(|(k, v)| ((*k).to_string(), v.clone())));
    CatalogConfig::new("rest", props)
}

#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn rest_catalog_with_oauth2_client_credentials_and_bearer_token() {
    let m = fixtures();
    let credential = service_env("CRYO_REST_CREDENTIAL");
    let config = rest_config(&[("credential", credential.clone())]);
    assert!(
        !m["tables"]["rest.cryo_rest.small"].is_null(),
        "the REST fixture is missing: run make_fixtures.py --rest"
    );
    let catalog = Catalog::connect(config).await.unwrap();
    assert_eq!(catalog.kind(), CatalogKind::Rest);
    assert!(
        catalog
            .list_namespaces()
            .await
            .unwrap()
            .contains(&Namespace::new(["cryo_rest"]))
    );
    let id = TableId::parse("cryo_rest.small").unwrap();
    assert!(
        catalog
            .list_tables(&Namespace::new(["cryo_rest"]))
            .await
            .unwrap()
            .contains(&id)
    );
    let scan = scan_table(&catalog, &id, &ScanOptions::default(), &SystemClock)
        .await
        .unwrap();
    let entry = table_entry(&m, "rest.cryo_rest.small");
    assert_eq!(scan.data_files.count, entry["data_files"].as_u64().unwrap());
    assert_eq!(scan.io.reads_of(PathKind::DataFile), 0);

    // Bearer token: fetch one with the same client credentials, then configure only `token`.
    let uri = std::env::var("CRYO_REST_URI").unwrap();
    let (id_part, secret_part) = credential.split_once(':').unwrap();
    let token: serde_json::Value =
        reqwest_form(&format!("{uri}/v1/oauth/tokens"), id_part, secret_part);
    let token = token["access_token"].as_str().unwrap().to_string();
    let config = rest_config(&[("token", token)]);
    let catalog = Catalog::connect(config).await.unwrap();
    assert!(
        catalog
            .list_tables(&Namespace::new(["cryo_rest"]))
            .await
            .unwrap()
            .contains(&id)
    );

    // Wrong credentials: a catalog error that never shows the secret.
    let config = rest_config(&[("credential", format!("{id_part}:not-the-secret-x9"))]);
    let err = Catalog::connect(config).await.unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(matches!(err, Error::Catalog { .. }), "{err}");
    assert!(!text.contains("not-the-secret-x9"), "secret leaked: {text}");
}

fn reqwest_form(url: &str, id: &str, secret: &str) -> serde_json::Value {
    let body = format!(
        "grant_type=client_credentials&client_id={id}&client_secret={secret}&scope=catalog"
    );
    let out = std::process::Command::new("curl")
        .args([
            "-s",
            "-X",
            "POST",
            "-H",
            "Content-Type: application/x-www-form-urlencoded",
            "-d",
            &body,
            url,
        ])
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A REST catalog that is down: a typed, retryable catalog error naming the catalog, with no
/// secret in it.
#[tokio::test]
async fn a_rest_catalog_that_is_down_is_retryable() {
    let config = CatalogConfig::new(
        "down",
        [
            ("type", "rest"),
            ("uri", "http://127.0.0.1:9"),
            ("credential", "id:down-secret-5"),
        ],
    );
    let e = match Catalog::connect(config).await {
        Ok(c) => c.list_namespaces().await.unwrap_err(),
        Err(e) => e,
    };
    assert!(
        matches!(&e, cryo_core::Error::Catalog { catalog, retryable: true, .. } if catalog == "down"),
        "{e:?}"
    );
    assert!(!e.to_string().contains("down-secret-5"), "{e}");
}
