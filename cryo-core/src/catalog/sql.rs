//! SQL catalog on sqlite or PostgreSQL, with the schema PyIceberg 0.12 and Java's `JdbcCatalog`
//! share:
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
//!
//! Statements are written once for both databases: parameters as `$1`, `$2`, … in order of first
//! use (sqlite reads them as named parameters bound by position), `ON CONFLICT DO NOTHING`.

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};
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

/// A SQL catalog on sqlite or PostgreSQL.
#[derive(Debug, Clone)]
pub struct SqlCatalog {
    name: String,
    pool: Pool,
}

#[derive(Debug, Clone)]
enum Pool {
    /// The database file and its pool.
    Sqlite(SqlitePool, PathBuf),
    Postgres(PgPool),
}

/// Which database serves the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SqlDialect {
    /// A sqlite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

/// A PostgreSQL URI in any of the spellings users paste: SQLAlchemy's
/// (`postgresql+psycopg2://user:pw@host:5432/db`), libpq's (`postgresql://`, `postgres://`) and
/// JDBC's (`jdbc:postgresql://host:5432/db`, credentials in `jdbc.user`/`jdbc.password`, as
/// Java's `JdbcCatalog` takes them). `None` if `uri` is not a PostgreSQL URI.
pub(crate) fn postgres_options(
    config: &CatalogConfig,
    uri: &str,
) -> Result<Option<PgConnectOptions>> {
    let rest = uri.strip_prefix("jdbc:").unwrap_or(uri);
    let Some((scheme, tail)) = rest.split_once("://") else {
        return Ok(None);
    };
    let base = scheme.split('+').next().unwrap_or(scheme);
    if !matches!(base, "postgres" | "postgresql") {
        return Ok(None);
    }
    let mut options = PgConnectOptions::from_str(&format!("postgresql://{tail}")).map_err(|e| {
        // sqlx's parse errors do not echo the URI; the catalog's redaction covers the rest.
        Error::config(config.redact(&format!(
            "catalog `{}`: `uri` is not a PostgreSQL URI: {e}",
            config.name
        )))
    })?;
    if let Some(user) = config.get("jdbc.user") {
        options = options.username(user);
    }
    if let Some(password) = config.get("jdbc.password") {
        options = options.password(password);
    }
    Ok(Some(options.application_name("cryo")))
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
    /// Connect to the database named by `uri`: a sqlite file or a PostgreSQL server.
    ///
    /// A sqlite file must exist unless `init_catalog_tables=true` (PyIceberg's property), in
    /// which case the file is created. With `init_catalog_tables=true` the catalog tables are
    /// created if absent (on PostgreSQL too); Cryo never creates them otherwise.
    pub async fn connect(config: &CatalogConfig) -> Result<Self> {
        let uri = config.require(props::URI)?;
        let init = config
            .get("init_catalog_tables")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let max_connections = match config.get("pool.max-connections") {
            Some(v) => v.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
                Error::config(format!(
                    "catalog `{}`: pool.max-connections must be a positive integer, got `{v}`",
                    config.name
                ))
            })?,
            None => 4,
        };
        let pool = if let Some(options) = postgres_options(config, uri)? {
            let pool = PgPoolOptions::new()
                .max_connections(max_connections)
                .acquire_timeout(Duration::from_secs(10))
                .connect_with(options)
                .await
                .map_err(|e| db_err(&config.name, "connect to PostgreSQL", e))?;
            Pool::Postgres(pool)
        } else {
            Self::connect_sqlite(config, uri, init, max_connections).await?
        };
        let catalog = SqlCatalog {
            name: config.name.clone(),
            pool,
        };
        if init {
            catalog.create_schema().await?;
        }
        Ok(catalog)
    }

    async fn connect_sqlite(
        config: &CatalogConfig,
        uri: &str,
        init: bool,
        max_connections: u32,
    ) -> Result<Pool> {
        let path = sqlite_path(uri)?;
        if !init && !path.exists() {
            return Err(Error::config(format!(
                "catalog `{}`: sqlite database {} does not exist (set init_catalog_tables=true to create it)",
                config.name,
                path.display()
            )));
        }
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
        Ok(Pool::Sqlite(pool, path))
    }

    /// Run one statement, returning the first column of every row (`NULL` as `None`).
    ///
    /// On sqlite, returns only once the connection's worker thread is out of `SQLite`: sqlx
    /// hands back a statement's last result before its worker resets the statement, and a
    /// process that forks in that window (Python's `os.fork()` right after a call returns)
    /// copies the locks `SQLite` holds there, leaving the child hung on its first `SQLite`
    /// call. A ping is served by the same worker after that tail, so its answer means the
    /// worker is idle.
    async fn column(&self, what: &str, sql: &str, binds: &[&str]) -> Result<Vec<Option<String>>> {
        let err = |e| db_err(&self.name, what, e);
        match &self.pool {
            Pool::Sqlite(pool, _) => {
                let mut conn = pool.acquire().await.map_err(err)?;
                let mut q = sqlx::query(sql);
                for b in binds {
                    q = q.bind(*b);
                }
                let out = q.fetch_all(&mut *conn).await.map(|rows| {
                    rows.iter()
                        .map(|r| r.try_get::<Option<String>, _>(0).ok().flatten())
                        .collect()
                });
                // An error here leaves the connection broken; the pool drops it on release.
                let _ = conn.ping().await;
                out.map_err(err)
            }
            Pool::Postgres(pool) => {
                let mut q = sqlx::query(sql);
                for b in binds {
                    q = q.bind(*b);
                }
                let rows = q.fetch_all(pool).await.map_err(err)?;
                Ok(rows
                    .iter()
                    .map(|r| r.try_get::<Option<String>, _>(0).ok().flatten())
                    .collect())
            }
        }
    }

    /// Run one statement, returning the number of rows it changed (see [`Self::column`]).
    async fn execute(&self, what: &str, sql: &str, binds: &[&str]) -> Result<u64> {
        let err = |e| db_err(&self.name, what, e);
        match &self.pool {
            Pool::Sqlite(pool, _) => {
                let mut conn = pool.acquire().await.map_err(err)?;
                let mut q = sqlx::query(sql);
                for b in binds {
                    q = q.bind(*b);
                }
                let out = q.execute(&mut *conn).await.map(|r| r.rows_affected());
                let _ = conn.ping().await;
                out.map_err(err)
            }
            Pool::Postgres(pool) => {
                let mut q = sqlx::query(sql);
                for b in binds {
                    q = q.bind(*b);
                }
                Ok(q.execute(pool).await.map_err(err)?.rows_affected())
            }
        }
    }

    /// Close every pooled connection, waiting until each is closed (and for connections in use
    /// to come back first). Later calls through this catalog fail.
    pub async fn close(&self) {
        match &self.pool {
            Pool::Sqlite(pool, _) => pool.close().await,
            Pool::Postgres(pool) => pool.close().await,
        }
    }

    /// The database file (`None` on PostgreSQL).
    pub fn path(&self) -> Option<&std::path::Path> {
        match &self.pool {
            Pool::Sqlite(_, path) => Some(path),
            Pool::Postgres(_) => None,
        }
    }

    /// The PostgreSQL pool (`None` on sqlite): coordination across machines
    /// ([`crate::govern::CatalogLocks`]) uses the catalog's own database.
    pub(crate) fn pg_pool(&self) -> Option<&PgPool> {
        match &self.pool {
            Pool::Postgres(pool) => Some(pool),
            Pool::Sqlite(..) => None,
        }
    }

    /// Which database serves the catalog.
    pub fn dialect(&self) -> SqlDialect {
        match &self.pool {
            Pool::Sqlite(..) => SqlDialect::Sqlite,
            Pool::Postgres(_) => SqlDialect::Postgres,
        }
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
            self.execute("create catalog tables", ddl, &[]).await?;
        }
        Ok(())
    }

    /// The columns of a catalog table (lowercased), empty if it does not exist.
    async fn columns(&self, table: &str) -> Result<Vec<String>> {
        let sql = match self.dialect() {
            SqlDialect::Sqlite => "SELECT name FROM pragma_table_info($1)",
            SqlDialect::Postgres => {
                "SELECT column_name::text FROM information_schema.columns
                 WHERE table_schema = current_schema() AND table_name = $1"
            }
        };
        Ok(self
            .column("inspect schema", sql, &[table])
            .await?
            .into_iter()
            .flatten()
            .map(|c| c.to_ascii_lowercase())
            .collect())
    }

    /// Which schema the database has.
    pub async fn schema_version(&self) -> Result<SqlSchemaVersion> {
        let columns = self.columns("iceberg_tables").await?;
        Ok(if columns.is_empty() {
            SqlSchemaVersion::Empty
        } else if columns.iter().any(|c| c == "iceberg_type") {
            SqlSchemaVersion::V1
        } else {
            SqlSchemaVersion::V0
        })
    }

    /// Add `iceberg_type` to a V0 schema (existing rows stay tables: NULL means table).
    pub async fn upgrade_schema(&self) -> Result<SqlSchemaVersion> {
        match self.schema_version().await? {
            SqlSchemaVersion::V0 => {
                self.execute(
                    "upgrade schema",
                    "ALTER TABLE iceberg_tables ADD COLUMN iceberg_type VARCHAR(5)",
                    &[],
                )
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
        let has_props = !self
            .columns("iceberg_namespace_properties")
            .await?
            .is_empty();
        let sql = if has_props {
            "SELECT table_namespace FROM iceberg_tables WHERE catalog_name = $1
             UNION SELECT namespace FROM iceberg_namespace_properties WHERE catalog_name = $1"
        } else {
            "SELECT DISTINCT table_namespace FROM iceberg_tables WHERE catalog_name = $1"
        };
        let mut out: Vec<Namespace> = self
            .column("list namespaces", sql, &[&self.name])
            .await?
            .into_iter()
            .flatten()
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
            "SELECT table_name FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2{} ORDER BY table_name",
            Self::table_filter(version)
        );
        Ok(self
            .column("list tables", &sql, &[&self.name, &ns.dotted()])
            .await?
            .into_iter()
            .flatten()
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
            "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3{}",
            Self::table_filter(version)
        );
        let rows = self
            .column(
                "load table",
                &sql,
                &[&self.name, &id.namespace.dotted(), &id.name],
            )
            .await?;
        match rows.into_iter().next() {
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
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location) VALUES ($1, $2, $3, $4, NULL)"
        } else {
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location, iceberg_type) VALUES ($1, $2, $3, $4, NULL, 'TABLE')"
        };
        self.execute(
            &format!("create table {id}"),
            sql,
            &[
                &self.name,
                &id.namespace.dotted(),
                &id.name,
                metadata_location,
            ],
        )
        .await?;
        Ok(())
    }

    /// Record a namespace (PyIceberg writes an `exists` property).
    pub(crate) async fn create_namespace(&self, ns: &Namespace) -> Result<()> {
        self.execute(
            &format!("create namespace {ns}"),
            "INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value)
             VALUES ($1, $2, 'exists', 'true') ON CONFLICT DO NOTHING",
            &[&self.name, &ns.dotted()],
        )
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
        let changed = self
            .execute(
                &format!("commit {id}"),
                "UPDATE iceberg_tables SET metadata_location = $1, previous_metadata_location = $2
                 WHERE catalog_name = $3 AND table_namespace = $4 AND table_name = $5 AND metadata_location = $2",
                &[new, expected, &self.name, &id.namespace.dotted(), &id.name],
            )
            .await?;
        Ok(changed == 1)
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
