//! The catalog side of a commit: requirements checked against the current head, updates applied,
//! the next `metadata.json` written, and the table's pointer swapped atomically.

use std::fmt;
use std::io::Write;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use iceberg::spec::TableMetadata;
use iceberg::{TableRequirement, TableUpdate};

use crate::catalog::{LoadedTable, SqlCatalog, TableId};
use crate::error::iceberg_error;
use crate::error::{Error, Result};
use crate::format::read_table_metadata;
use crate::io::ObjectStorage;

/// Java's switch for deleting metadata files that fall out of the metadata log.
const DELETE_AFTER_COMMIT: &str = "write.metadata.delete-after-commit.enabled";
/// Where metadata files go, if not `<table location>/metadata`.
const METADATA_PATH: &str = "write.metadata.path";
/// `none` (default) or `gzip`.
const METADATA_CODEC: &str = "write.metadata.compression-codec";

/// What one commit asks of the catalog: checks against the current head, then changes to apply.
///
/// This is the REST catalog's commit request without the identifier; every backend accepts the
/// same value, so a commit can be built once and sent to any catalog.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TableChanges {
    /// Conditions the current head must meet (checked after reloading it, never against a cache).
    pub requirements: Vec<TableRequirement>,
    /// Changes applied in order with `TableMetadataBuilder`.
    pub updates: Vec<TableUpdate>,
}

impl TableChanges {
    /// Changes with their requirements.
    pub fn new(requirements: Vec<TableRequirement>, updates: Vec<TableUpdate>) -> Self {
        Self {
            requirements,
            updates,
        }
    }
}

/// Commits metadata changes to one kind of catalog.
///
/// Two contracts share this trait:
///
/// - **Pointer catalogs** (SQL, Hadoop; Glue and HMS would be the same): the client writes the
///   next `metadata.json`. They implement [`load_head`](CatalogCommitter::load_head) and
///   [`publish`](CatalogCommitter::publish); the default [`commit`](CatalogCommitter::commit)
///   reloads the head, checks the requirements, applies the updates with upstream's
///   `TableMetadataBuilder`, and lets `publish` write the file and swap the pointer.
/// - **Server-side catalogs** (REST, [`RestCommitter`](super::RestCommitter)): the server checks
///   the requirements, applies the updates and writes the metadata file. They implement
///   `load_head` and override `commit` to send the [`TableChanges`] as they are; `publish` keeps
///   its default, which refuses.
///
/// Either way `commit` has one meaning for callers: the changes are applied atomically to the
/// current head if its requirements hold, else [`Error::CommitConflict`].
#[async_trait]
pub trait CatalogCommitter: Send + Sync + fmt::Debug {
    /// The current head of `base`'s table, freshly read from the catalog.
    async fn load_head(&self, base: &LoadedTable) -> Result<LoadedTable>;

    /// Write `metadata` as the successor of `head` and swap the table's pointer to it atomically.
    ///
    /// Returns the new metadata location, or [`Error::CommitConflict`] when another writer moved
    /// the head after it was loaded (nothing is left behind in that case).
    ///
    /// Only catalogs that store a pointer implement it; the default refuses, for catalogs that
    /// write metadata themselves and override [`commit`](CatalogCommitter::commit) instead.
    async fn publish(&self, head: &LoadedTable, metadata: &TableMetadata) -> Result<String> {
        let _ = metadata;
        Err(Error::unsupported(format!(
            "{}: this catalog writes table metadata itself; commit through CatalogCommitter::commit",
            head.id
        )))
    }

    /// Apply `changes` to the table `base` was loaded from.
    ///
    /// Requirements are checked against the head as it is now, not against `base`: a commit
    /// built on a stale base fails with [`Error::CommitConflict`] exactly when its requirements
    /// (e.g. "main is still at snapshot S0") no longer hold. On success the returned table is
    /// the new head.
    async fn commit(&self, base: &LoadedTable, changes: TableChanges) -> Result<LoadedTable> {
        let head = self.load_head(base).await?;
        let table = head.id.to_string();
        for requirement in &changes.requirements {
            requirement
                .check(Some(head.metadata.as_ref()))
                .map_err(|e| Error::CommitConflict {
                    table: table.clone(),
                    message: format!("the table changed since it was loaded: {}", e.message()),
                    // Another table under the same name: no reload makes this commit fit it.
                    retryable: !matches!(requirement, TableRequirement::UuidMatch { .. }),
                })?;
        }
        let metadata = apply_updates(&head, changes.updates)?;
        let location = self.publish(&head, &metadata.metadata).await?;
        if metadata
            .metadata
            .properties()
            .get(DELETE_AFTER_COMMIT)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        {
            // Java deletes metadata files that fell out of the log once the commit is durable;
            // failing to do so only leaves orphans, never breaks the commit.
            for expired in &metadata.expired_metadata_logs {
                if let Err(e) = head.storage.delete(&expired.metadata_file).await {
                    tracing::warn!(table, file = expired.metadata_file, error = %e, "could not delete expired metadata file");
                }
            }
        }
        Ok(LoadedTable {
            id: head.id.clone(),
            metadata_location: Some(location),
            metadata: Arc::new(metadata.metadata),
            storage: head.storage.clone(),
            file_io: head.file_io.clone(),
        })
    }
}

fn apply_updates(
    head: &LoadedTable,
    updates: Vec<TableUpdate>,
) -> Result<iceberg::spec::TableMetadataBuildResult> {
    let table = head.id.to_string();
    let mut builder = head
        .metadata
        .as_ref()
        .clone()
        .into_builder(head.metadata_location.clone());
    for update in updates {
        builder = update
            .apply(builder)
            .map_err(|e| iceberg_error(&table, "apply metadata update", e))?;
    }
    builder
        .build()
        .map_err(|e| iceberg_error(&table, "build metadata", e))
}

/// Serialize metadata the way the table asks (`write.metadata.compression-codec`): the bytes and
/// the file-name suffix (`.metadata.json` or `.gz.metadata.json`, Java's spelling).
pub(crate) fn encode_metadata(
    table: &str,
    metadata: &TableMetadata,
) -> Result<(Bytes, &'static str)> {
    let json = serde_json::to_vec(metadata)
        .map_err(|e| Error::compute(format!("{table}: cannot serialize metadata"), e))?;
    let codec = metadata
        .properties()
        .get(METADATA_CODEC)
        .map_or("none", String::as_str)
        .to_ascii_lowercase();
    match codec.as_str() {
        "" | "none" => Ok((Bytes::from(json), ".metadata.json")),
        "gzip" => {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            enc.write_all(&json)
                .and_then(|()| enc.finish())
                .map(|gz| (Bytes::from(gz), ".gz.metadata.json"))
                .map_err(|e| Error::compute(format!("{table}: gzip metadata"), e))
        }
        other => Err(Error::unsupported(format!(
            "{table}: {METADATA_CODEC}={other} (Cryo writes none or gzip)"
        ))),
    }
}

/// The directory new metadata files go to.
pub(crate) fn metadata_dir(metadata: &TableMetadata) -> String {
    match metadata.properties().get(METADATA_PATH) {
        Some(p) if !p.trim().is_empty() => p.trim_end_matches('/').to_string(),
        _ => format!("{}/metadata", metadata.location().trim_end_matches('/')),
    }
}

/// The version number in a PyIceberg/Java metadata file name (`00042-<uuid>.metadata.json`).
fn sql_metadata_version(location: &str) -> Option<u64> {
    let name = location.rsplit('/').next()?;
    let (digits, _) = name.split_once('-')?;
    digits.parse().ok()
}

/// The version number in a Hadoop metadata file name (`v7.metadata.json`, `v7.gz.metadata.json`).
pub(crate) fn hadoop_metadata_version(location: &str) -> Option<u64> {
    let name = location.rsplit('/').next()?;
    name.strip_prefix('v')?
        .strip_suffix(".metadata.json")?
        .trim_end_matches(".gz")
        .parse()
        .ok()
}

/// Commits to a SQL catalog (the schema `PyIceberg` and Java's `JdbcCatalog` share).
///
/// The new metadata file is named like `PyIceberg` and Java name it (`NNNNN-<uuid>.metadata.json`,
/// one more than the head's number) and created only if absent; the swap is
/// `UPDATE iceberg_tables … WHERE metadata_location = <head>`, which succeeds for exactly one
/// writer.
#[derive(Debug, Clone)]
pub struct SqlCommitter {
    catalog: SqlCatalog,
}

impl SqlCommitter {
    /// A committer on a connected SQL catalog.
    pub fn new(catalog: SqlCatalog) -> Self {
        Self { catalog }
    }
}

#[async_trait]
impl CatalogCommitter for SqlCommitter {
    async fn load_head(&self, base: &LoadedTable) -> Result<LoadedTable> {
        let location = self.catalog.metadata_location(&base.id).await?;
        load_at(base, location).await
    }

    async fn publish(&self, head: &LoadedTable, metadata: &TableMetadata) -> Result<String> {
        let table = head.id.to_string();
        let expected = head.metadata_location.as_deref().ok_or_else(|| {
            Error::Internal(format!("{table}: SQL head without a metadata location"))
        })?;
        let location = write_next_metadata(head, expected, metadata).await?;
        match self
            .catalog
            .swap_metadata_location(&head.id, expected, &location)
            .await
        {
            Ok(true) => Ok(location),
            Ok(false) => {
                discard(&head.storage, &location).await;
                Err(conflict(
                    &head.id,
                    format!("another writer replaced {expected} first"),
                ))
            }
            Err(e) if sql_lock_error(&e) => {
                // sqlite statements are atomic: an UPDATE refused because another process holds
                // the database lock did not happen. Say so as a conflict, so the caller retries
                // with backoff and may clean up what it wrote.
                discard(&head.storage, &location).await;
                Err(conflict(
                    &head.id,
                    "the catalog database is locked by another process".to_string(),
                ))
            }
            Err(e) => {
                // The swap may or may not have happened (e.g. the connection dropped after the
                // UPDATE): keep the file, it may now be the table's head.
                Err(e)
            }
        }
    }
}

/// Commits to an AWS Glue catalog: the next `metadata.json` is written beside the head (named as
/// on SQL catalogs, created only if absent), then the table's `metadata_location` parameter is
/// swapped by `UpdateTable` with the `VersionId` read together with the checked head
/// ([`glue`](super::glue)).
#[derive(Debug, Clone)]
pub struct GlueCommitter {
    client: Arc<super::glue::GlueClient>,
}

impl GlueCommitter {
    pub(crate) fn new(client: Arc<super::glue::GlueClient>) -> Self {
        Self { client }
    }
}

#[async_trait]
impl CatalogCommitter for GlueCommitter {
    async fn load_head(&self, base: &LoadedTable) -> Result<LoadedTable> {
        let location = self.client.metadata_location(&base.id).await?;
        load_at(base, location).await
    }

    async fn publish(&self, head: &LoadedTable, metadata: &TableMetadata) -> Result<String> {
        let table = head.id.to_string();
        let expected = head.metadata_location.as_deref().ok_or_else(|| {
            Error::Internal(format!("{table}: Glue head without a metadata location"))
        })?;
        let location = write_next_metadata(head, expected, metadata).await?;
        match self
            .client
            .swap_metadata_location(&head.id, expected, &location)
            .await
        {
            Ok(true) => Ok(location),
            Ok(false) => {
                discard(&head.storage, &location).await;
                Err(conflict(
                    &head.id,
                    format!("another writer replaced {expected} first"),
                ))
            }
            // Unknown outcome (a timeout, a 5xx after the request was sent): keep the file, it
            // may be the table's head now; the commit driver looks before it deletes anything.
            Err(e) => Err(e),
        }
    }
}

/// Commits to a Hive Metastore: the next `metadata.json` is written beside the head (named as on
/// SQL catalogs, created only if absent), then, under the metastore's exclusive table lock, the
/// table's `metadata_location` is checked and altered (the protocol of Java's
/// `HiveTableOperations`).
#[derive(Debug, Clone)]
pub struct HiveCommitter {
    client: Arc<super::hive::HiveClient>,
}

impl HiveCommitter {
    pub(crate) fn new(client: Arc<super::hive::HiveClient>) -> Self {
        Self { client }
    }
}

#[async_trait]
impl CatalogCommitter for HiveCommitter {
    async fn load_head(&self, base: &LoadedTable) -> Result<LoadedTable> {
        let location = self.client.metadata_location(&base.id).await?;
        load_at(base, location).await
    }

    async fn publish(&self, head: &LoadedTable, metadata: &TableMetadata) -> Result<String> {
        let table = head.id.to_string();
        let expected = head.metadata_location.as_deref().ok_or_else(|| {
            Error::Internal(format!(
                "{table}: metastore head without a metadata location"
            ))
        })?;
        let location = write_next_metadata(head, expected, metadata).await?;
        match self
            .client
            .swap_metadata_location(&head.id, expected, &location)
            .await
        {
            Ok(true) => Ok(location),
            Ok(false) => {
                discard(&head.storage, &location).await;
                Err(conflict(
                    &head.id,
                    format!("another writer replaced {expected} first"),
                ))
            }
            Err(e @ Error::CommitConflict { .. }) => {
                // The lock was not granted: nothing was altered.
                discard(&head.storage, &location).await;
                Err(e)
            }
            // Unknown outcome: keep the file (see GlueCommitter).
            Err(e) => Err(e),
        }
    }
}

/// Write `metadata` as the successor of the head at `expected`, named as PyIceberg and Java name
/// files in pointer catalogs (`NNNNN-<uuid>.metadata.json`), only if absent.
async fn write_next_metadata(
    head: &LoadedTable,
    expected: &str,
    metadata: &TableMetadata,
) -> Result<String> {
    let table = head.id.to_string();
    let version = sql_metadata_version(expected).map_or(0, |v| v + 1);
    let (bytes, suffix) = encode_metadata(&table, metadata)?;
    let location = format!(
        "{}/{version:05}-{}{suffix}",
        metadata_dir(metadata),
        crate::random::uuid()
    );
    if !head.storage.write_if_absent(&location, bytes).await? {
        return Err(conflict(&head.id, format!("{location} already exists")));
    }
    Ok(location)
}

/// Whether a catalog error is sqlite refusing a write because another process holds its lock.
fn sql_lock_error(e: &Error) -> bool {
    matches!(e, Error::Catalog { source: Some(src), .. }
    if src.downcast_ref::<sqlx::Error>().and_then(sqlx::Error::as_database_error).is_some_and(|d| {
        let m = d.message().to_ascii_lowercase();
        m.contains("database is locked") || m.contains("database table is locked") || m.contains("busy")
    }))
}

/// Commits to a Hadoop-style table (`metadata/vN.metadata.json` + `version-hint.text`).
///
/// Creating `v{N+1}.metadata.json` only if it does not exist is the atomic step (object stores'
/// conditional PUT, `link` on local disks): two writers racing for the same version cannot both
/// win. The version hint is written afterwards and is only a hint; readers fall back to listing.
#[derive(Debug, Clone, Default)]
pub struct HadoopCommitter;

impl HadoopCommitter {
    /// A committer for Hadoop-style tables.
    pub fn new() -> Self {
        Self
    }

    fn table_dir(head: &LoadedTable) -> Result<String> {
        let location = head.metadata_location.as_deref().unwrap_or_default();
        location
            .rsplit_once('/')
            .and_then(|(dir, _)| dir.strip_suffix("/metadata"))
            .map(str::to_string)
            .ok_or_else(|| {
                Error::unsupported(format!(
                    "{}: metadata file {location} is not in a Hadoop table's metadata/ directory",
                    head.id
                ))
            })
    }
}

#[async_trait]
impl CatalogCommitter for HadoopCommitter {
    async fn load_head(&self, base: &LoadedTable) -> Result<LoadedTable> {
        let dir = Self::table_dir(base)?;
        let location = crate::catalog::hadoop::current_metadata_file(
            &base.storage,
            &base.id.to_string(),
            &dir,
        )
        .await?;
        load_at(base, location).await
    }

    async fn publish(&self, head: &LoadedTable, metadata: &TableMetadata) -> Result<String> {
        let table = head.id.to_string();
        let dir = Self::table_dir(head)?;
        let current = head.metadata_location.as_deref().unwrap_or_default();
        let version = hadoop_metadata_version(current).ok_or_else(|| {
            Error::unsupported(format!(
                "{table}: {current} is not named vN.metadata.json; cannot pick the next version"
            ))
        })? + 1;
        let (bytes, suffix) = encode_metadata(&table, metadata)?;
        let location = format!("{dir}/metadata/v{version}{suffix}");
        if !head.storage.write_if_absent(&location, bytes).await? {
            return Err(conflict(
                &head.id,
                format!("another writer created v{version} first"),
            ));
        }
        let hint = format!("{dir}/metadata/version-hint.text");
        if let Err(e) = head
            .storage
            .write_all(&hint, Bytes::from(version.to_string()))
            .await
        {
            // The commit is durable once vN exists; readers list metadata/ when the hint is stale.
            tracing::warn!(table, error = %e, "committed v{version} but could not update version-hint.text");
        }
        Ok(location)
    }
}

async fn load_at(base: &LoadedTable, location: String) -> Result<LoadedTable> {
    let metadata = read_table_metadata(&base.storage, &base.id.to_string(), &location).await?;
    Ok(LoadedTable {
        id: base.id.clone(),
        metadata_location: Some(location),
        metadata,
        storage: base.storage.clone(),
        file_io: base.file_io.clone(),
    })
}

fn conflict(id: &TableId, message: String) -> Error {
    Error::CommitConflict {
        table: id.to_string(),
        message,
        retryable: true,
    }
}

/// Delete a file this commit wrote and will not use; a failure only leaves an orphan.
pub(crate) async fn discard(storage: &ObjectStorage, location: &str) {
    if let Err(e) = storage.delete(location).await {
        tracing::warn!(file = location, error = %e, "could not delete an uncommitted file");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_versions_from_names() {
        assert_eq!(
            sql_metadata_version("file:///w/t/metadata/00042-ab-cd.metadata.json"),
            Some(42)
        );
        assert_eq!(
            sql_metadata_version("s3://b/t/metadata/v3.metadata.json"),
            None
        );
        assert_eq!(
            hadoop_metadata_version("/w/t/metadata/v7.metadata.json"),
            Some(7)
        );
        assert_eq!(
            hadoop_metadata_version("/w/t/metadata/v7.gz.metadata.json"),
            Some(7)
        );
        assert_eq!(
            hadoop_metadata_version("/w/t/metadata/00001-x.metadata.json"),
            None
        );
    }
}
