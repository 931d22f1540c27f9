//! A small local lake whose tables decayed the way real ones do: for examples, tests,
//! benchmarks and first-time users.
//!
//! [`create_demo_lake`] builds (or reopens) a sqlite catalog (`<root>/catalog.db`, the `PyIceberg`
//! and Java `JdbcCatalog` schema) with a warehouse under `<root>/warehouse`, holding:
//!
//! | table | format | what went wrong |
//! |---|---|---|
//! | `lake.clickstream` | v2, `day(event_time)` | a streaming writer: hundreds of tiny appends, one small manifest each, hundreds of snapshots over ~10 days, late events landing in yesterday's partition |
//! | `lake.orders` | v2, merge-on-read, `day(order_date)` | daily loads, then cancellations and updates as position delete files on many partitions; a metadata-only `DELETE` of the two oldest days left their position deletes dangling |
//! | `lake.customers` | v2, unpartitioned, identifier `customer_id` | CDC upserts: an equality delete file per commit, deleted keys re-inserted later |
//! | `lake.metrics_v1` | v1, `day(ts)` | a legacy table: daily appends six months ago, gzip, no column statistics (`write.metadata.metrics.default=none`) |
//! | `lake.healthy` | v2 | the control: one snapshot of a few files near `write.target-file-size-bytes` (1 MiB), zstd, sorted |
//!
//! Data is deterministic (seeded; values are anchored at 2026-01-01, not at the wall clock), so
//! every build reads back to the same rows. Snapshot timestamps are the only time-dependent
//! part: each table's history ends shortly before the clock's "now", so age-based checks see
//! old snapshots. The expected figures (rows, files, snapshots, deletes) come from the
//! generator's own bookkeeping and are stored in `<root>/demo-lake.json` next to the catalog.
//!
//! The lake is about 15 MB and builds in a few seconds. A second call opens the existing lake
//! instead of rebuilding it (unless [`DemoOptions::force_rebuild`] is set or the options
//! differ); [`DemoLake::pristine`] says whether its tables are still as generated.
//!
//! ```no_run
//! # async fn demo() -> cryo_core::Result<()> {
//! let lake = cryo_core::demo::create_demo_lake(
//!     std::path::Path::new("/tmp/cryo-demo"),
//!     &cryo_core::demo::DemoOptions::default(),
//! )
//! .await?;
//! for table in lake.catalog.list_all_tables().await? {
//!     println!("{table}");
//! }
//! # Ok(()) }
//! ```

mod tables;

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::catalog::{Catalog, CatalogConfig, TableId};
use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};

/// Bump when the generated tables change, so old lakes are rebuilt instead of reopened.
const GENERATOR: &str = "cryo-demo-lake/1";
/// The manifest written last: its presence marks a complete lake.
const MANIFEST_FILE: &str = "demo-lake.json";
const CATALOG_FILE: &str = "catalog.db";
const WAREHOUSE_DIR: &str = "warehouse";

/// How to build the demo lake.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DemoOptions {
    /// Catalog name (the SQL catalog scopes its rows by it; Spark's catalog must use the same).
    pub catalog_name: String,
    /// Seed of the data generator.
    pub seed: u64,
    /// Appends (and snapshots) of `lake.clickstream`.
    pub clickstream_commits: u32,
    /// Rebuild even if a lake built with the same options exists.
    pub force_rebuild: bool,
}

impl Default for DemoOptions {
    fn default() -> Self {
        Self {
            catalog_name: "demo".to_string(),
            seed: 20_260_301,
            clickstream_commits: 200,
            force_rebuild: false,
        }
    }
}

impl DemoOptions {
    /// Reject options the lake cannot be built with.
    pub fn validate(&self) -> Result<()> {
        if self.catalog_name.is_empty()
            || !self
                .catalog_name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(Error::validation(format!(
                "demo catalog name `{}` must be non-empty ASCII letters, digits or `_` (it is also a Spark catalog name)",
                self.catalog_name
            )));
        }
        if !(1..=5000).contains(&self.clickstream_commits) {
            return Err(Error::validation(format!(
                "clickstream_commits must be between 1 and 5000, got {}",
                self.clickstream_commits
            )));
        }
        Ok(())
    }

    /// Whether a lake built with `other` has the same content as one built with `self`.
    fn same_lake(&self, other: &DemoOptions) -> bool {
        self.catalog_name == other.catalog_name
            && self.seed == other.seed
            && self.clickstream_commits == other.clickstream_commits
    }
}

/// What the generator made of one table: the figures a reader or a scan must find.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DemoTable {
    /// `namespace.name`.
    pub identifier: String,
    /// What the table shows.
    pub description: String,
    /// Iceberg format version.
    pub format_version: u8,
    /// Rows a reader returns (deletes applied).
    pub rows: u64,
    /// Snapshots.
    pub snapshots: u64,
    /// Live data files.
    pub data_files: u64,
    /// Live position delete files.
    pub position_delete_files: u64,
    /// Live equality delete files.
    pub equality_delete_files: u64,
    /// Delete files that no longer apply to any live data file.
    pub dangling_delete_files: u64,
    /// The table's `metadata.json` when the generator finished.
    pub metadata_location: String,
    /// Whether `PyIceberg` 0.12 can read it (it refuses equality deletes).
    pub pyiceberg_readable: bool,
}

impl DemoTable {
    /// The table identifier.
    pub fn id(&self) -> Result<TableId> {
        TableId::parse(&self.identifier)
    }
}

/// `<root>/demo-lake.json`: how the lake was built and what it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DemoManifest {
    /// Generator version; a lake from another version is rebuilt.
    pub generator: String,
    /// Options the lake was built with (`force_rebuild` is always false here).
    pub options: DemoOptions,
    /// Catalog name, `uri` and `warehouse`, as `PyIceberg` takes them.
    pub catalog: CatalogConfig,
    /// The clock's time when the build started (snapshot histories end before it).
    pub built_at_ms: i64,
    /// Wall time the build took.
    pub build_duration_ms: u64,
    /// Every table, by identifier order.
    pub tables: Vec<DemoTable>,
}

/// A demo lake, open.
#[derive(Debug)]
#[non_exhaustive]
pub struct DemoLake {
    /// Directory holding the catalog, the warehouse and the manifest.
    pub root: PathBuf,
    /// The connected catalog.
    pub catalog: Catalog,
    /// What was built.
    pub manifest: DemoManifest,
    /// True when this call built the lake, false when it reopened an existing one.
    pub built: bool,
    /// True when every table is still at the metadata the generator left (nobody committed to
    /// it since); the manifest's figures describe the tables only then.
    pub pristine: bool,
}

impl DemoLake {
    /// The manifest entry of one table.
    pub fn table(&self, identifier: &str) -> Option<&DemoTable> {
        self.manifest
            .tables
            .iter()
            .find(|t| t.identifier == identifier)
    }

    /// Path of `demo-lake.json`.
    pub fn manifest_path(&self) -> PathBuf {
        self.root.join(MANIFEST_FILE)
    }
}

/// Build the demo lake under `root`, or open it if a complete lake built with the same options
/// is already there. Snapshot timestamps end at the system clock's "now".
pub async fn create_demo_lake(root: &Path, options: &DemoOptions) -> Result<DemoLake> {
    create_demo_lake_at(root, options, &SystemClock).await
}

/// [`create_demo_lake`] with an injected clock (snapshot histories end at `clock`'s "now").
///
/// Only Cryo's own files under `root` are touched: `catalog.db`, `warehouse/` and
/// `demo-lake.json` (removed first when rebuilding).
pub async fn create_demo_lake_at(
    root: &Path,
    options: &DemoOptions,
    clock: &dyn Clock,
) -> Result<DemoLake> {
    options.validate()?;
    fs(root, "create", tokio::fs::create_dir_all(root).await)?;
    let root = fs(root, "resolve", tokio::fs::canonicalize(root).await)?;
    let manifest_path = root.join(MANIFEST_FILE);
    if !options.force_rebuild
        && let Some(manifest) = read_manifest(&manifest_path).await
    {
        if manifest.generator == GENERATOR
            && manifest.options.same_lake(options)
            && root.join(CATALOG_FILE).exists()
        {
            let catalog = Catalog::connect(manifest.catalog.clone()).await?;
            let pristine = is_pristine(&catalog, &manifest).await;
            return Ok(DemoLake {
                root,
                catalog,
                manifest,
                built: false,
                pristine,
            });
        }
        tracing::info!(root = %root.display(), "demo lake was built by another generator or with other options; rebuilding");
    }
    wipe(&root).await?;

    let started = Instant::now();
    let now_ms = clock.now_ms();
    let mut config = CatalogConfig::local(&options.catalog_name, &root);
    config
        .properties
        .insert("init_catalog_tables".into(), "true".into());
    let catalog = Catalog::connect(config.clone()).await?;
    // Boxed: the five table histories make a large future; keep it off the caller's stack.
    let tables = Box::pin(tables::build_all(&catalog, options, now_ms)).await?;
    // Reopen without `init_catalog_tables`: the manifest's config is what readers should use.
    config.properties.remove("init_catalog_tables");
    let manifest = DemoManifest {
        generator: GENERATOR.to_string(),
        options: DemoOptions {
            force_rebuild: false,
            ..options.clone()
        },
        catalog: config,
        built_at_ms: now_ms,
        build_duration_ms: started.elapsed().as_millis() as u64,
        tables,
    };
    let json =
        serde_json::to_vec_pretty(&manifest).map_err(|e| Error::compute("demo manifest", e))?;
    // Written under a temporary name and renamed: a crash never leaves a manifest that claims a
    // complete lake.
    let tmp = root.join(format!("{MANIFEST_FILE}.tmp"));
    fs(&tmp, "write", tokio::fs::write(&tmp, json).await)?;
    fs(
        &manifest_path,
        "write",
        tokio::fs::rename(&tmp, &manifest_path).await,
    )?;
    Ok(DemoLake {
        root,
        catalog,
        manifest,
        built: true,
        pristine: true,
    })
}

async fn read_manifest(path: &Path) -> Option<DemoManifest> {
    let bytes = tokio::fs::read(path).await.ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(m) => Some(m),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "unreadable demo lake manifest; rebuilding");
            None
        }
    }
}

async fn is_pristine(catalog: &Catalog, manifest: &DemoManifest) -> bool {
    for t in &manifest.tables {
        let Ok(id) = t.id() else { return false };
        match catalog.load_table(&id).await {
            Ok(loaded)
                if loaded.metadata_location.as_deref() == Some(t.metadata_location.as_str()) => {}
            _ => return false,
        }
    }
    true
}

/// Remove what a previous build left (only the demo's own files).
async fn wipe(root: &Path) -> Result<()> {
    for name in [
        MANIFEST_FILE,
        CATALOG_FILE,
        "catalog.db-wal",
        "catalog.db-shm",
    ] {
        let p = root.join(name);
        match tokio::fs::remove_file(&p).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return fs(&p, "remove", Err(e));
            }
            _ => {}
        }
    }
    let warehouse = root.join(WAREHOUSE_DIR);
    match tokio::fs::remove_dir_all(&warehouse).await {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => fs(&warehouse, "remove", Err(e)),
        _ => Ok(()),
    }
}

fn fs<T>(path: &Path, op: &str, r: std::io::Result<T>) -> Result<T> {
    r.map_err(|e| Error::Storage {
        path: path.display().to_string(),
        message: format!("{op}: {e}"),
        source: Some(Box::new(e)),
        retryable: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_validated() {
        assert!(DemoOptions::default().validate().is_ok());
        for bad in [
            DemoOptions {
                catalog_name: String::new(),
                ..DemoOptions::default()
            },
            DemoOptions {
                catalog_name: "a.b".into(),
                ..DemoOptions::default()
            },
            DemoOptions {
                clickstream_commits: 0,
                ..DemoOptions::default()
            },
        ] {
            assert!(
                matches!(bad.validate(), Err(Error::Validation { .. })),
                "{bad:?}"
            );
        }
        let forced = DemoOptions {
            force_rebuild: true,
            ..DemoOptions::default()
        };
        assert!(forced.same_lake(&DemoOptions::default()));
        let reseeded = DemoOptions {
            seed: 1,
            ..DemoOptions::default()
        };
        assert!(!reseeded.same_lake(&DemoOptions::default()));
    }
}
