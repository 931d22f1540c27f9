//! SQL catalog on sqlite, with the schema PyIceberg 0.12 and Java's `JdbcCatalog` share:
//!
//! ```text
//! iceberg_tables(catalog_name, table_namespace, table_name, metadata_location,
//!                previous_metadata_location, iceberg_type)        -- iceberg_type: 'TABLE' | 'VIEW' | NULL
//! iceberg_namespace_properties(catalog_name, namespace, property_key, property_value)
//! ```
//!
//! The older ("V0") schema has no `iceberg_type` column; every row is then a table, which is
//! how Java reads it too. Cryo reads it as is and never alters a schema implicitly;
//! [`SqlCatalog::upgrade_schema`] adds the column the way `JdbcCatalog` does when asked.
//! Upstream `iceberg-catalog-sql` is not used: it panics on malformed pool properties, creates
//! tables on connect and offers no compare-and-swap that Cryo's commit layer can call.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqlitePool, SqlitePoolOptions};
use sqlx::{Connection, Row};

use super::{CatalogConfig, Namespace, TableId, props};
use crate::error::{Error, Result};

/// Whether the catalog tables carry the `iceberg_type` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlSchemaVersion {
    /// No catalog tables yet.
    Empty,
    /// `iceberg_tables` without `iceberg_type`.
    V0,
    /// `iceberg_tables` with `iceberg_type` (PyIceberg 0.12, Java `JdbcCatalog` V1).
    V1,
}

/// A sqlite SQL catalog.
#[derive(Debug, Clone)]
pub struct SqlCatalog {
    name: String,
    pool: SqlitePool,
    path: PathBuf,
}

/// Translate SQLAlchemy (`sqlite:////abs.db`, `sqlite+pysqlite:///rel.db`), JDBC
/// (`jdbc:sqlite:/abs.db`) and plain (`sqlite:/abs.db`, `sqlite:///abs.db` in sqlx style) URIs.
pub(crate) fn sqlite_path(uri: &str) -> Result<PathBuf> {
    let rest = uri
        .strip_prefix("jdbc:")
        .unwrap_or(uri)
        .strip_prefix("sqlite")
        .ok_or_else(|| Error::config(format!("`{uri}` is not a sqlite URI")))?;
    let rest = match rest.strip_prefix('+') {
        Some(driver) => driver
            .split_once(':')
            .map(|(_, r)| r)
            .ok_or_else(|| Error::config(format!("`{uri}` is not a sqlite URI")))?,
        None => rest
            .strip_prefix(':')
            .ok_or_else(|| Error::config(format!("`{uri}` is not a sqlite URI")))?,
    };
    let rest = rest.split('?').next().unwrap_or(rest);
    // SQLAlchemy: `sqlite:///rel` is relative, `sqlite:////abs` is absolute.
    let path = if let Some(p) = rest.strip_prefix("///") {
        p.to_string()
    } else if let Some(p) = rest.strip_prefix("//") {
        p.to_string()
    } else {
        rest.to_string()
    };
    if path.is_empty() || path == ":memory:" {
        return Err(Error::config(format!(
            "`{uri}`: an in-memory sqlite catalog cannot be shared with other engines; give a file"
        )));
    }
    Ok(PathBuf::from(path))
}

fn db_err(catalog: &str, what: &str, e: sqlx::Error) -> Error {
    let retryable = matches!(&e, sqlx::Error::PoolTimedOut | sqlx::Error::Io(_))
        || e.as_database_error()
            .is_some_and(|d| d.message().contains("locked") || d.message().contains("busy"));
    Error::Catalog {
        catalog: catalog.to_string(),
        message: format!("{what}: {e}"),
        source: Some(Box::new(e)),
        retryable,
    }
}

impl SqlCatalog {
    /// Connect to the sqlite database named by `uri`.
    ///
    /// The file must exist unless `init_catalog_tables=true` (PyIceberg's property), in which
    /// case the file and the catalog tables are created.
    pub async fn connect(config: &CatalogConfig) -> Result<Self> {
        let uri = config.require(props::URI)?;
        if uri.starts_with("postgres") || uri.starts_with("jdbc:postgres") {
            return Err(Error::unsupported(
                "PostgreSQL SQL catalogs are not supported yet; sqlite is",
            ));
        }
        let path = sqlite_path(uri)?;
        let init = config
            .get("init_catalog_tables")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        if !init && !path.exists() {
            return Err(Error::config(format!(
                "catalog `{}`: sqlite database {} does not exist (set init_catalog_tables=true to create it)",
                config.name,
                path.display()
            )));
        }
        let max_connections = match config.get("pool.max-connections") {
            Some(v) => v.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
                Error::config(format!(
                    "catalog `{}`: pool.max-connections must be a positive integer, got `{v}`",
                    config.name
                ))
            })?,
            None => 4,
        };
        let options = SqliteConnectOptions::from_str("sqlite://")
            .map_err(|e| db_err(&config.name, "sqlite options", e))?
            .filename(&path)
            .create_if_missing(init)
            // PyIceberg, Spark and Cryo share this file; wait for their locks instead of failing,
            // but not so long that a writer holding the lock for a whole session (Spark's
            // JdbcCatalog leaks a read cursor) stalls a commit loop for minutes: commits retry
            // with backoff on top of this.
            .busy_timeout(Duration::from_secs(5));
        let pool = SqlitePoolOptions::new()
            .max_connections(max_connections)
            // Connections to a local file never go stale, and a pool that closes idle ones in
            // the background can be closing one (inside SQLite, holding its global locks) at the
            // moment the process forks: the child then hangs on its first SQLite call.
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options)
            .await
            .map_err(|e| db_err(&config.name, &format!("open {}", path.display()), e))?;
        let catalog = SqlCatalog {
            name: config.name.clone(),
            pool,
            path,
        };
        if init {
            catalog.create_schema().await?;
        }
        Ok(catalog)
    }

    /// Run `work` on one pooled connection, returning only once that connection's worker thread
    /// is out of `SQLite`.
    ///
    /// sqlx hands back a statement's last result before its worker thread resets the statement.
    /// A process that forks in that window (Python's `os.fork()` right after a call returns)
    /// copies the locks `SQLite` holds there, and the child hangs on its first `SQLite` call. A
    /// ping is served by the same worker after that tail, so its answer means the worker is idle.
    async fn with_conn<T>(
        &self,
        what: &str,
        work: impl AsyncFnOnce(&mut SqliteConnection) -> std::result::Result<T, sqlx::Error>,
    ) -> Result<T> {
        let mut conn = self
            .pool
            .acquire()
            .await
            .map_err(|e| db_err(&self.name, what, e))?;
        let out = work(&mut conn).await;
        // An error here leaves the connection broken; the pool drops it on release.
        let _ = conn.ping().await;
        out.map_err(|e| db_err(&self.name, what, e))
    }

    /// Close every pooled connection, waiting until each is closed (and for connections in use
    /// to come back first). Later calls through this catalog fail.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// The database file.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Catalog name.
    pub fn name(&self) -> &str {
        &self.name
    }

    async fn create_schema(&self) -> Result<()> {
        for ddl in [
            "CREATE TABLE IF NOT EXISTS iceberg_tables (
                catalog_name VARCHAR(255) NOT NULL,
                table_namespace VARCHAR(255) NOT NULL,
                table_name VARCHAR(255) NOT NULL,
                metadata_location VARCHAR(1000),
                previous_metadata_location VARCHAR(1000),
                iceberg_type VARCHAR(5),
                PRIMARY KEY (catalog_name, table_namespace, table_name))",
            "CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
                catalog_name VARCHAR(255) NOT NULL,
                namespace VARCHAR(255) NOT NULL,
                property_key VARCHAR(255) NOT NULL,
                property_value VARCHAR(1000),
                PRIMARY KEY (catalog_name, namespace, property_key))",
        ] {
            self.with_conn("create catalog tables", async |conn| {
                sqlx::query(ddl).execute(conn).await
            })
            .await?;
        }
        Ok(())
    }

    /// Which schema the database has.
    pub async fn schema_version(&self) -> Result<SqlSchemaVersion> {
        let rows = self
            .with_conn("inspect schema", async |conn| {
                sqlx::query("SELECT name FROM pragma_table_info('iceberg_tables')")
                    .fetch_all(conn)
                    .await
            })
            .await?;
        if rows.is_empty() {
            return Ok(SqlSchemaVersion::Empty);
        }
        let has_type = rows.iter().any(|r| {
            r.try_get::<String, _>(0)
                .is_ok_and(|n| n.eq_ignore_ascii_case("iceberg_type"))
        });
        Ok(if has_type {
            SqlSchemaVersion::V1
        } else {
            SqlSchemaVersion::V0
        })
    }

    /// Add `iceberg_type` to a V0 schema (existing rows stay tables: NULL means table).
    pub async fn upgrade_schema(&self) -> Result<SqlSchemaVersion> {
        match self.schema_version().await? {
            SqlSchemaVersion::V0 => {
                self.with_conn("upgrade schema", async |conn| {
                    sqlx::query("ALTER TABLE iceberg_tables ADD COLUMN iceberg_type VARCHAR(5)")
                        .execute(conn)
                        .await
                })
                .await?;
                Ok(SqlSchemaVersion::V1)
            }
            v => Ok(v),
        }
    }

    fn table_filter(version: SqlSchemaVersion) -> &'static str {
        match version {
            SqlSchemaVersion::V1 => " AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)",
            _ => "",
        }
    }

    /// Every namespace that holds a table or has properties (PyIceberg's notion of existence).
    pub async fn list_namespaces(&self) -> Result<Vec<Namespace>> {
        let version = self.schema_version().await?;
        if version == SqlSchemaVersion::Empty {
            return Ok(Vec::new());
        }
        let has_props = self
            .with_conn("inspect schema", async |conn| {
                sqlx::query("SELECT 1 FROM pragma_table_info('iceberg_namespace_properties')")
                    .fetch_optional(conn)
                    .await
            })
            .await?
            .is_some();
        let sql = if has_props {
            "SELECT table_namespace FROM iceberg_tables WHERE catalog_name = ?1
             UNION SELECT namespace FROM iceberg_namespace_properties WHERE catalog_name = ?1"
        } else {
            "SELECT DISTINCT table_namespace FROM iceberg_tables WHERE catalog_name = ?1"
        };
        let rows = self
            .with_conn("list namespaces", async |conn| {
                sqlx::query(sql).bind(&self.name).fetch_all(conn).await
            })
            .await?;
        let mut out: Vec<Namespace> = rows
            .iter()
            .filter_map(|r| r.try_get::<String, _>(0).ok())
            .map(|s| Namespace::parse_dotted(&s))
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// Tables (not views) in one namespace.
    pub async fn list_tables(&self, ns: &Namespace) -> Result<Vec<TableId>> {
        let version = self.schema_version().await?;
        if version == SqlSchemaVersion::Empty {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT table_name FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ?{} ORDER BY table_name",
            Self::table_filter(version)
        );
        let rows = self
            .with_conn("list tables", async |conn| {
                sqlx::query(&sql)
                    .bind(&self.name)
                    .bind(ns.dotted())
                    .fetch_all(conn)
                    .await
            })
            .await?;
        Ok(rows
            .iter()
            .filter_map(|r| r.try_get::<String, _>(0).ok())
            .map(|name| TableId::new(ns.clone(), name))
            .collect())
    }

    /// The current metadata location of a table.
    pub async fn metadata_location(&self, id: &TableId) -> Result<String> {
        let version = self.schema_version().await?;
        if version == SqlSchemaVersion::Empty {
            return Err(Error::NotFound {
                what: format!("table {id} in catalog `{}`", self.name),
            });
        }
        let sql = format!(
            "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?{}",
            Self::table_filter(version)
        );
        let row = self
            .with_conn("load table", async |conn| {
                sqlx::query(&sql)
                    .bind(&self.name)
                    .bind(id.namespace.dotted())
                    .bind(&id.name)
                    .fetch_optional(conn)
                    .await
            })
            .await?;
        match row.and_then(|r| r.try_get::<Option<String>, _>(0).ok()) {
            Some(Some(loc)) => Ok(loc),
            Some(None) => Err(Error::metadata(
                id,
                "<catalog>",
                "catalog row has no metadata_location",
            )),
            None => Err(Error::NotFound {
                what: format!("table {id} in catalog `{}`", self.name),
            }),
        }
    }

    /// Register a table row (used when Cryo creates a table).
    pub(crate) async fn insert_table(&self, id: &TableId, metadata_location: &str) -> Result<()> {
        let version = self.schema_version().await?;
        let sql = if version == SqlSchemaVersion::V0 {
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location) VALUES (?, ?, ?, ?, NULL)"
        } else {
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location, iceberg_type) VALUES (?, ?, ?, ?, NULL, 'TABLE')"
        };
        self.with_conn(&format!("create table {id}"), async |conn| {
            sqlx::query(sql)
                .bind(&self.name)
                .bind(id.namespace.dotted())
                .bind(&id.name)
                .bind(metadata_location)
                .execute(conn)
                .await
        })
        .await?;
        Ok(())
    }

    /// Record a namespace (PyIceberg writes an `exists` property).
    pub(crate) async fn create_namespace(&self, ns: &Namespace) -> Result<()> {
        self.with_conn(&format!("create namespace {ns}"), async |conn| {
sqlx::query(
            "INSERT OR IGNORE INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value) VALUES (?, ?, 'exists', 'true')",
        )
        .bind(&self.name)
        .bind(ns.dotted()).execute(conn).await
})
.await?;
        Ok(())
    }

    /// Compare-and-swap the metadata pointer: succeeds only if the row still points at `expected`.
    ///
    /// Returns `Ok(false)` when another writer moved the pointer first.
    pub(crate) async fn swap_metadata_location(
        &self,
        id: &TableId,
        expected: &str,
        new: &str,
    ) -> Result<bool> {
        let res = self.with_conn(&format!("commit {id}"), async |conn| {
sqlx::query(
            "UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ?
             WHERE catalog_name = ? AND table_namespace = ? AND table_name = ? AND metadata_location = ?",
        )
        .bind(new)
        .bind(expected)
        .bind(&self.name)
        .bind(id.namespace.dotted())
        .bind(&id.name)
        .bind(expected).execute(conn).await
})
.await?;
        Ok(res.rows_affected() == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_uris() {
        assert_eq!(
            sqlite_path("sqlite:////tmp/c.db").unwrap(),
            PathBuf::from("/tmp/c.db")
        );
        assert_eq!(
            sqlite_path("sqlite:///rel/c.db").unwrap(),
            PathBuf::from("rel/c.db")
        );
        assert_eq!(
            sqlite_path("sqlite+pysqlite:////tmp/c.db").unwrap(),
            PathBuf::from("/tmp/c.db")
        );
        assert_eq!(
            sqlite_path("jdbc:sqlite:/tmp/c.db").unwrap(),
            PathBuf::from("/tmp/c.db")
        );
        assert_eq!(
            sqlite_path("sqlite:/tmp/c.db?mode=ro").unwrap(),
            PathBuf::from("/tmp/c.db")
        );
        assert!(sqlite_path("sqlite:///:memory:").is_err());
        assert!(sqlite_path("postgresql://x").is_err());
    }
}
