//! Shared helpers: the fixture tables written by PyIceberg and Spark (`tests/fixtures/make_fixtures.py`).

use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use cryo_core::{Catalog, CatalogConfig, LoadedTable, Namespace};
use futures::TryStreamExt;
use serde_json::Value;

/// Repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The fixture manifest written by `make_fixtures.py`. A test calling it needs the peers: it is
/// `#[ignore]`d, and run by `scripts/test.sh` (`--include-ignored`), where a missing manifest fails it.
pub fn fixtures() -> Value {
    fixture_manifest("manifest.json", "make_fixtures.py")
}

/// The manifest of the tables Spark 4.1 + Iceberg 1.12 wrote (`make_fixtures_spark4.py`, catalog
/// `fixtures_spark41`: format v3 with deletion vectors and row lineage, v2, equality deletes), as
/// [`fixtures`].
pub fn fixtures_spark41() -> Value {
    fixture_manifest("manifest-spark41.json", "make_fixtures_spark4.py")
}

fn fixture_manifest(name: &str, generator: &str) -> Value {
    let dir = std::env::var("CRYO_FIXTURES")
        .map_or_else(|_| repo_root().join("target/cryo-fixtures"), PathBuf::from);
    let path = dir.join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "this test needs the peers' fixtures, missing at {}: {e}. Run scripts/test.sh (it \
             writes them and runs these tests), or write them with tests/fixtures/{generator} \
             (scripts/README.md) into target/cryo-fixtures or $CRYO_FIXTURES",
            path.display()
        )
    });
    serde_json::from_slice(&bytes).expect("fixture manifest is JSON")
}

/// The catalog config of one fixture catalog.
pub fn fixture_catalog(manifest: &Value, name: &str) -> CatalogConfig {
    let c = &manifest["catalogs"][name];
    let mut props: Vec<(String, String)> = Vec::new();
    for key in ["type", "uri", "warehouse"] {
        if let Some(v) = c[key].as_str() {
            props.push((key.to_string(), v.to_string()));
        }
    }
    if let Some(extra) = c["properties"].as_object() {
        for (k, v) in extra {
            if let Some(v) = v.as_str() {
                props.push((k.clone(), v.to_string()));
            }
        }
    }
    CatalogConfig::new(name, props)
}

/// An environment variable the loopback services set (`scripts/services.sh`). A test calling it
/// needs the services: it is `#[ignore]`d, and run by `scripts/test.sh`, where a missing variable
/// fails it.
pub fn service_env(name: &str) -> String {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!(
            "this test needs the loopback services, and {name} is not set. Run scripts/test.sh (it \
             starts them and runs these tests), or start scripts/services.sh and source its \
             services.env"
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// Object stores on loopback: SeaweedFS's S3 and Azurite
// ---------------------------------------------------------------------------------------------

/// A SQL catalog (sqlite here) whose warehouse is a fresh prefix of `root` (a bucket or
/// container of one of the loopback object stores), configured with `props`.
pub async fn object_store_catalog(
    dir: &Path,
    root: &str,
    props: Vec<(&str, String)>,
) -> (Catalog, String) {
    let prefix = format!(
        "{root}/cryo-it-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    std::fs::create_dir_all(dir).unwrap();
    let mut config = CatalogConfig::local("objects", dir);
    config.properties.insert("warehouse".into(), prefix.clone());
    config
        .properties
        .insert("init_catalog_tables".into(), "true".into());
    for (k, v) in props {
        config.properties.insert(k.into(), v);
    }
    let catalog = Catalog::connect(config).await.unwrap();
    catalog
        .create_namespace(&Namespace::new(["db"]))
        .await
        .unwrap();
    (catalog, prefix)
}

/// SeaweedFS's S3.
pub async fn s3_catalog(dir: &Path) -> (Catalog, String) {
    let bucket = service_env("CRYO_SEAWEED_BUCKET");
    let props = vec![
        ("s3.endpoint", service_env("CRYO_SEAWEED_S3_ENDPOINT")),
        ("s3.access-key-id", service_env("CRYO_SEAWEED_ACCESS_KEY")),
        (
            "s3.secret-access-key",
            service_env("CRYO_SEAWEED_SECRET_KEY"),
        ),
        ("s3.path-style-access", "true".into()),
        ("s3.region", "us-east-1".into()),
    ];
    object_store_catalog(dir, &format!("s3://{bucket}"), props).await
}

/// PyIceberg's (PyArrow's) properties for Azurite's blob service: the account, its key and the
/// blob storage authority (path-style, plain HTTP).
pub fn azurite_props() -> Vec<(&'static str, String)> {
    vec![
        ("adls.account-name", service_env("CRYO_AZURITE_ACCOUNT")),
        ("adls.account-key", service_env("CRYO_AZURITE_KEY")),
        (
            "adls.blob-storage-authority",
            service_env("CRYO_AZURITE_AUTHORITY"),
        ),
        ("adls.blob-storage-scheme", "http".into()),
    ]
}

/// Azurite's container as an ADLS Gen2 location, the way Spark and PyIceberg write them
/// (`abfss://container@account.dfs.core.windows.net`).
pub fn azurite_root() -> String {
    format!(
        "abfss://{}@{}.dfs.core.windows.net",
        service_env("CRYO_AZURITE_CONTAINER"),
        service_env("CRYO_AZURITE_ACCOUNT")
    )
}

/// A catalog whose warehouse is on Azurite ([`azurite_props`], [`azurite_root`]).
pub async fn azure_catalog(dir: &Path) -> (Catalog, String) {
    object_store_catalog(dir, &azurite_root(), azurite_props()).await
}

/// Every row of the table's current snapshot as upstream's reader returns them (deletes
/// applied): what the tests compare Cryo's results with.
pub async fn scan_rows(table: &LoadedTable) -> Vec<RecordBatch> {
    table
        .to_iceberg()
        .unwrap()
        .scan()
        .select_all()
        .build()
        .unwrap()
        .to_arrow()
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}
