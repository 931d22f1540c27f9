//! Per-table locks. Three backends, chosen by [`open_locks`]:
//!
//! - [`LocalLocks`]: OS file locks under a directory, for processes on one machine (or on a
//!   filesystem with working `flock`); a crashed holder releases its lock with its process.
//! - [`CatalogLocks`]: PostgreSQL advisory locks in the SQL catalog's own database, held by a
//!   connection of the holder's own; a crashed holder's connection closes and the lock with it.
//! - [`ObjectLocks`]: a lock object per table on object storage, created only if absent and
//!   held under a lease the holder renews; a crashed holder's lease expires and the next
//!   maintainer takes the lock over (compare-and-swap on the object's version).

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::catalog::TableId;
use crate::error::{Error, Result};

/// Who holds a lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockHolder {
    /// Free-form holder name (actor, task id).
    pub holder: String,
    /// Process id.
    pub pid: u32,
    /// Since when (ms since epoch).
    pub since_ms: i64,
    /// The holder's machine (its host name), where locks span machines.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
}

impl LockHolder {
    /// This process, as `holder`, since `now_ms`.
    pub fn this_process(holder: &str, now_ms: i64) -> Self {
        Self {
            holder: holder.to_string(),
            pid: std::process::id(),
            since_ms: now_ms,
            host: this_host(),
        }
    }

    /// A holder that could not be read (a lock whose record is missing or torn).
    pub fn unknown() -> Self {
        Self {
            holder: "unknown".to_string(),
            pid: 0,
            since_ms: 0,
            host: String::new(),
        }
    }
}

/// Now, in milliseconds since the epoch (0 if the clock is before it): leases' clock.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// This machine's host name (`""` if it cannot be read).
pub(crate) fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// A lock that is held until dropped.
pub struct LockGuard {
    release: Option<Box<dyn FnOnce() + Send>>,
    /// The holder recorded for this lock.
    pub holder: LockHolder,
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("holder", &self.holder)
            .finish_non_exhaustive()
    }
}

impl LockGuard {
    /// A guard that runs `release` when dropped.
    pub fn new(holder: LockHolder, release: impl FnOnce() + Send + 'static) -> Self {
        Self {
            release: Some(Box::new(release)),
            holder,
        }
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if let Some(release) = self.release.take() {
            release();
        }
    }
}

/// Per-table mutual exclusion. `try_acquire` never waits: a held lock is `Err(holder)` so the
/// caller can defer with a reason.
#[async_trait::async_trait]
pub trait TableLocks: Send + Sync + fmt::Debug {
    /// Take the lock of `catalog`/`table`, or report who holds it.
    async fn try_acquire(
        &self,
        catalog: &str,
        table: &TableId,
        holder: &str,
        now_ms: i64,
    ) -> Result<std::result::Result<LockGuard, LockHolder>>;
}

/// The table locks `spec` names, for maintainers of `catalog`:
///
/// - `catalog`: advisory locks in the SQL catalog's PostgreSQL database ([`super::CatalogLocks`]);
/// - a location on object storage (`s3://…`, `abfss://…`, `gs://…`): lock objects under it,
///   reached with the catalog's storage properties ([`super::ObjectLocks`], default lease);
/// - anything else: a local directory of file locks ([`LocalLocks`]), `file://` or a path.
pub async fn open_locks(
    catalog: &crate::catalog::Catalog,
    spec: &str,
) -> Result<std::sync::Arc<dyn TableLocks>> {
    let spec = spec.trim();
    if spec.is_empty() {
        return Err(Error::validation("the table locks' location is empty"));
    }
    if spec.eq_ignore_ascii_case("catalog") {
        return Ok(std::sync::Arc::new(
            super::CatalogLocks::new(catalog).await?,
        ));
    }
    if spec.contains("://") && !spec.starts_with("file:") {
        return Ok(std::sync::Arc::new(super::ObjectLocks::new(
            catalog.storage(),
            spec,
        )?));
    }
    let path = spec.strip_prefix("file://").unwrap_or(spec);
    Ok(std::sync::Arc::new(LocalLocks::new(path)))
}

/// File locks under a directory: one file per table (`<dir>/<sha256(catalog.table)>.lock`).
#[derive(Debug, Clone)]
pub struct LocalLocks {
    dir: PathBuf,
}

impl LocalLocks {
    /// Locks under `dir` (created on first use).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    fn path(&self, catalog: &str, table: &TableId) -> PathBuf {
        self.dir
            .join(format!("{}.lock", table_file_stem(catalog, table)))
    }
}

/// The file name (without extension) a table's lock files share: the first 16 bytes of
/// sha256(`catalog` NUL `table`), in hex.
pub(crate) fn table_file_stem(catalog: &str, table: &TableId) -> String {
    let digest = Sha256::digest(format!("{catalog}\u{0}{table}").as_bytes());
    digest.iter().take(16).fold(String::new(), |mut s, b| {
        use std::fmt::Write as _;
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn io_err(path: &std::path::Path, what: &str, e: std::io::Error) -> Error {
    Error::local_file(path, format_args!("table lock: {what}"), e)
}

fn read_holder(file: &mut File) -> LockHolder {
    let mut text = String::new();
    let _ = file
        .seek(SeekFrom::Start(0))
        .and_then(|_| file.read_to_string(&mut text));
    serde_json::from_str(&text).unwrap_or_else(|_| LockHolder::unknown())
}

#[async_trait::async_trait]
impl TableLocks for LocalLocks {
    async fn try_acquire(
        &self,
        catalog: &str,
        table: &TableId,
        holder: &str,
        now_ms: i64,
    ) -> Result<std::result::Result<LockGuard, LockHolder>> {
        std::fs::create_dir_all(&self.dir).map_err(|e| io_err(&self.dir, "create directory", e))?;
        let path = self.path(catalog, table);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| io_err(&path, "open", e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Ok(Err(read_holder(&mut file))),
            Err(std::fs::TryLockError::Error(e)) => return Err(io_err(&path, "lock", e)),
        }
        let me = LockHolder::this_process(holder, now_ms);
        let body = serde_json::to_vec(&me).map_err(|e| Error::compute("lock holder", e))?;
        file.set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)).map(|_| ()))
            .and_then(|()| file.write_all(&body))
            .map_err(|e| io_err(&path, "record holder", e))?;
        // The OS lock lives as long as the file handle: the guard owns it and closes it on drop.
        Ok(Ok(LockGuard::new(me, move || {
            let _ = file.set_len(0);
            let _ = file.unlock();
            drop(file);
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_holder_at_a_time_and_release_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let locks = LocalLocks::new(dir.path());
        let t = TableId::parse("db.t").unwrap();
        let first = locks
            .try_acquire("c", &t, "worker-1", 10)
            .await
            .unwrap()
            .unwrap();
        let held = locks
            .try_acquire("c", &t, "worker-2", 11)
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(held.holder, "worker-1");
        assert_eq!(held.pid, std::process::id());
        // Other tables and catalogs are independent.
        let other = locks
            .try_acquire("c", &TableId::parse("db.u").unwrap(), "w", 12)
            .await
            .unwrap();
        assert!(other.is_ok());
        assert!(locks.try_acquire("c2", &t, "w", 12).await.unwrap().is_ok());
        drop(first);
        assert!(
            locks
                .try_acquire("c", &t, "worker-2", 13)
                .await
                .unwrap()
                .is_ok()
        );
    }

    #[tokio::test]
    async fn held_across_processes() {
        // A child process holds the lock until it is killed; the lock dies with it.
        let dir = tempfile::tempdir().unwrap();
        let locks = LocalLocks::new(dir.path());
        let t = TableId::parse("db.t").unwrap();
        let path = locks.path("c", &t);
        std::fs::create_dir_all(dir.path()).unwrap();
        std::fs::write(&path, b"").unwrap();
        let mut child = std::process::Command::new("python3")
            .arg("-c")
            .arg("import fcntl,sys,time; f=open(sys.argv[1],'r+'); fcntl.flock(f, fcntl.LOCK_EX); f.write('{\"holder\":\"py\",\"pid\":1,\"since_ms\":5}'); f.flush(); print('locked', flush=True); time.sleep(60)")
            .arg(&path)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line.trim(), "locked");
        let held = locks
            .try_acquire("c", &t, "rust", 6)
            .await
            .unwrap()
            .unwrap_err();
        assert_eq!(held.holder, "py");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(locks.try_acquire("c", &t, "rust", 7).await.unwrap().is_ok());
    }
}
