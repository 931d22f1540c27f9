//! Table locks in the SQL catalog's own PostgreSQL database: session-level advisory locks.
//!
//! Each held lock owns one connection of its own (taken out of the pool, never returned): the
//! lock lives exactly as long as that session. Dropping the guard closes the connection; a
//! holder killed mid-run closes it too (its socket), and the server releases the lock at once,
//! so no lease, renewal or expiry is needed. Who holds a lock is recorded beside it in
//! `cryo_lock_holders`, written by each new holder once it has the lock with the server process
//! of its session; a maintainer that finds the lock held reads the row whose session holds it
//! now (`pg_locks`), never a previous holder's.

use sqlx::{Connection, PgPool, Row};

use super::lock::{LockGuard, LockHolder, TableLocks, table_file_stem};
use crate::catalog::{Catalog, TableId};
use crate::error::{Error, Result};

const HOLDERS_DDL: &str = "CREATE TABLE IF NOT EXISTS cryo_lock_holders (
    lock_key BIGINT PRIMARY KEY,
    catalog_name VARCHAR(255) NOT NULL,
    table_ident VARCHAR(1000) NOT NULL,
    holder VARCHAR(1000) NOT NULL,
    host VARCHAR(255) NOT NULL,
    pid BIGINT NOT NULL,
    since_ms BIGINT NOT NULL,
    backend_pid INTEGER NOT NULL
)";

/// Per-table locks held as PostgreSQL advisory locks in the catalog's database.
#[derive(Clone)]
pub struct CatalogLocks {
    pool: PgPool,
    catalog: String,
}

impl std::fmt::Debug for CatalogLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogLocks")
            .field("catalog", &self.catalog)
            .finish_non_exhaustive()
    }
}

impl CatalogLocks {
    /// Locks in `catalog`'s database: a SQL catalog on PostgreSQL. A sqlite catalog is one
    /// machine's file: its maintainers share a directory, and [`super::LocalLocks`] serves them.
    pub async fn new(catalog: &Catalog) -> Result<Self> {
        let pool = catalog
            .as_sql()
            .and_then(|s| s.pg_pool())
            .ok_or_else(|| {
                Error::config(format!(
                    "catalog `{}`: locks in the catalog's database need a SQL catalog on \
                     PostgreSQL; give a lock directory (one machine) or an object-store \
                     location (s3://…, abfss://…, gs://…) instead",
                    catalog.name()
                ))
            })?
            .clone();
        for ddl in [
            HOLDERS_DDL,
            "ALTER TABLE cryo_lock_holders ADD COLUMN IF NOT EXISTS backend_pid INTEGER NOT NULL DEFAULT 0",
        ] {
            sqlx::query(ddl)
                .execute(&pool)
                .await
                .map_err(|e| db_err(catalog.name(), "create cryo_lock_holders", &e))?;
        }
        Ok(Self {
            pool,
            catalog: catalog.name().to_string(),
        })
    }

    /// Who holds `key` now: the holder row written by the session holding the advisory lock.
    /// A holder that has the lock and has not written its row yet is waited for (briefly).
    /// `None`: nobody holds it any more (its holder released it, or died, meanwhile).
    async fn holder_of(&self, key: i64) -> Result<Option<LockHolder>> {
        let bits = key as u64;
        let (classid, objid) = (i64::from((bits >> 32) as u32), i64::from(bits as u32));
        let mut row = None;
        for _ in 0..40 {
            row = sqlx::query(
                "SELECT h.holder, h.host, h.pid, h.since_ms FROM cryo_lock_holders h
                 JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted
                   AND l.pid = h.backend_pid AND l.classid::bigint = $2
                   AND l.objid::bigint = $3 AND l.objsubid = 1
                 WHERE h.lock_key = $1",
            )
            .bind(key)
            .bind(classid)
            .bind(objid)
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| db_err(&self.catalog, "read the lock holder", &e))?;
            if row.is_some() {
                break;
            }
            let held: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
                   AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 1)",
            )
            .bind(classid)
            .bind(objid)
            .fetch_one(&self.pool)
            .await
            .map_err(|e| db_err(&self.catalog, "read the lock holder", &e))?;
            if !held {
                return Ok(None);
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        Ok(Some(match row {
            Some(r) => LockHolder {
                holder: r.try_get("holder").unwrap_or_default(),
                host: r.try_get("host").unwrap_or_default(),
                pid: r
                    .try_get::<i64, _>("pid")
                    .ok()
                    .and_then(|p| u32::try_from(p).ok())
                    .unwrap_or(0),
                since_ms: r.try_get("since_ms").unwrap_or(0),
            },
            None => LockHolder::unknown(),
        }))
    }
}

/// The advisory lock key of a table: the first 8 bytes of sha256(`catalog` NUL `table`).
fn lock_key(catalog: &str, table: &TableId) -> i64 {
    let stem = table_file_stem(catalog, table);
    // 16 hex digits = 8 bytes.
    u64::from_str_radix(&stem[..16], 16).map_or(0, |k| k as i64)
}

fn db_err(catalog: &str, what: &str, e: &sqlx::Error) -> Error {
    // sqlx's errors carry the server's words, never the connection's password.
    Error::Catalog {
        catalog: catalog.to_string(),
        message: format!("table lock: {what}: {e}"),
        source: None,
        retryable: true,
    }
}

#[async_trait::async_trait]
impl TableLocks for CatalogLocks {
    async fn try_acquire(
        &self,
        catalog: &str,
        table: &TableId,
        holder: &str,
        now_ms: i64,
    ) -> Result<std::result::Result<LockGuard, LockHolder>> {
        let key = lock_key(catalog, table);
        // A session of the lock's own: the advisory lock is the session's.
        let mut conn = self
            .pool
            .acquire()
            .await
            .map_err(|e| db_err(&self.catalog, "connect", &e))?
            .detach();
        // A lock freed while its holder was being read is tried again (a few times).
        for attempt in 0..3 {
            let taken: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
                .bind(key)
                .fetch_one(&mut conn)
                .await
                .map_err(|e| db_err(&self.catalog, "pg_try_advisory_lock", &e))?;
            if taken {
                break;
            }
            let holder = match self.holder_of(key).await? {
                Some(h) => Some(h),
                None if attempt == 2 => Some(LockHolder::unknown()),
                None => None,
            };
            if let Some(h) = holder {
                let _ = conn.close().await;
                return Ok(Err(h));
            }
        }
        let me = LockHolder::this_process(holder, now_ms);
        sqlx::query(
            "INSERT INTO cryo_lock_holders
               (lock_key, catalog_name, table_ident, holder, host, pid, since_ms, backend_pid)
             VALUES ($1, $2, $3, $4, $5, $6, $7, pg_backend_pid())
             ON CONFLICT (lock_key) DO UPDATE SET catalog_name = EXCLUDED.catalog_name,
               table_ident = EXCLUDED.table_ident, holder = EXCLUDED.holder, host = EXCLUDED.host,
               pid = EXCLUDED.pid, since_ms = EXCLUDED.since_ms,
               backend_pid = EXCLUDED.backend_pid",
        )
        .bind(key)
        .bind(catalog)
        .bind(table.to_string())
        .bind(&me.holder)
        .bind(&me.host)
        .bind(i64::from(me.pid))
        .bind(me.since_ms)
        .execute(&mut conn)
        .await
        .map_err(|e| db_err(&self.catalog, "record the lock holder", &e))?;
        // Dropping the connection closes its socket: the server ends the session and releases
        // the lock (an explicit unlock would need a runtime in `drop`).
        Ok(Ok(LockGuard::new(me, move || drop(conn))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_and_differ_by_catalog_and_table() {
        let t = TableId::parse("db.t").unwrap();
        assert_eq!(lock_key("c", &t), lock_key("c", &t));
        assert_ne!(lock_key("c", &t), lock_key("c2", &t));
        assert_ne!(
            lock_key("c", &t),
            lock_key("c", &TableId::parse("db.u").unwrap())
        );
    }
}
