//! Per-table locks. The local implementation uses OS file locks, so it works across processes
//! on one machine and a crashed holder releases its lock with its process.

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
pub trait TableLocks: Send + Sync + fmt::Debug {
    /// Take the lock of `catalog`/`table`, or report who holds it.
    fn try_acquire(
        &self,
        catalog: &str,
        table: &TableId,
        holder: &str,
        now_ms: i64,
    ) -> Result<std::result::Result<LockGuard, LockHolder>>;
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
    serde_json::from_str(&text).unwrap_or(LockHolder {
        holder: "unknown".to_string(),
        pid: 0,
        since_ms: 0,
    })
}

impl TableLocks for LocalLocks {
    fn try_acquire(
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
        let me = LockHolder {
            holder: holder.to_string(),
            pid: std::process::id(),
            since_ms: now_ms,
        };
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

    #[test]
    fn one_holder_at_a_time_and_release_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let locks = LocalLocks::new(dir.path());
        let t = TableId::parse("db.t").unwrap();
        let first = locks.try_acquire("c", &t, "worker-1", 10).unwrap().unwrap();
        let held = locks
            .try_acquire("c", &t, "worker-2", 11)
            .unwrap()
            .unwrap_err();
        assert_eq!(held.holder, "worker-1");
        assert_eq!(held.pid, std::process::id());
        // Other tables and catalogs are independent.
        let other = locks
            .try_acquire("c", &TableId::parse("db.u").unwrap(), "w", 12)
            .unwrap();
        assert!(other.is_ok());
        assert!(locks.try_acquire("c2", &t, "w", 12).unwrap().is_ok());
        drop(first);
        assert!(locks.try_acquire("c", &t, "worker-2", 13).unwrap().is_ok());
    }

    #[test]
    fn held_across_processes() {
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
        let held = locks.try_acquire("c", &t, "rust", 6).unwrap().unwrap_err();
        assert_eq!(held.holder, "py");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(locks.try_acquire("c", &t, "rust", 7).unwrap().is_ok());
    }
}
