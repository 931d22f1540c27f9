//! Shared helpers: the fixture tables written by PyIceberg and Spark (`tests/fixtures/make_fixtures.py`).

use std::path::PathBuf;

use cryo_core::CatalogConfig;
use serde_json::Value;

/// Repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The fixture manifest written by `make_fixtures.py`, or `None` when the fixtures were not
/// generated. With `CRYO_REQUIRE_PEERS=1` (set by `.ci/run`) missing fixtures fail the test.
pub fn fixtures() -> Option<Value> {
    fixture_manifest("manifest.json", "make_fixtures.py")
}

/// The manifest of the tables Spark 4.1 + Iceberg 1.12 wrote (`make_fixtures_spark4.py`, catalog
/// `fixtures_spark41`: format v3 with deletion vectors and row lineage, v2, equality deletes), or
/// `None` as [`fixtures`].
pub fn fixtures_spark41() -> Option<Value> {
    fixture_manifest("manifest-spark41.json", "make_fixtures_spark4.py")
}

fn fixture_manifest(name: &str, generator: &str) -> Option<Value> {
    let dir = std::env::var("CRYO_FIXTURES")
        .map_or_else(|_| repo_root().join("target/cryo-fixtures"), PathBuf::from);
    let path = dir.join(name);
    match std::fs::read(&path) {
        Ok(bytes) => Some(serde_json::from_slice(&bytes).expect("fixture manifest is JSON")),
        Err(e) if std::env::var("CRYO_REQUIRE_PEERS").as_deref() == Ok("1") => {
            panic!(
                "fixtures missing at {}: {e} (run tests/fixtures/{generator})",
                path.display()
            )
        }
        Err(_) => {
            eprintln!(
                "skipping: no fixtures at {} (run tests/fixtures/{generator})",
                path.display()
            );
            None
        }
    }
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

/// An environment variable the loopback services set (`scripts/services.sh`), or `None` when
/// the services are not running (fails instead with `CRYO_REQUIRE_PEERS=1`).
pub fn service_env(name: &str) -> Option<String> {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => Some(v),
        _ if std::env::var("CRYO_REQUIRE_PEERS").as_deref() == Ok("1") => {
            panic!("{name} is not set: start scripts/services.sh and source its services.env")
        }
        _ => {
            eprintln!("skipping: {name} not set (scripts/services.sh not running)");
            None
        }
    }
}
