//! The commit fence: cooperating writers and Cryo's commits never overlap on one table.
//!
//! Iceberg's optimistic concurrency validates a merge-on-read writer's commit against the files
//! it read: a `MERGE`/`DELETE`/`UPDATE` that read data file `F` (or `F`'s delete file) and
//! commits after a compaction replaced it fails ("Cannot commit, missing data files"). A quiet
//! period keeps Cryo off the partitions writers are working in, but a late change to a cold
//! partition can still start while Cryo is committing that partition's compaction. The fence
//! closes that window for writers that take it:
//!
//! ```text
//! writer:  enter_writer (shared) ── read, write, commit ── drop
//! Cryo:    rewrite (no fence) ── enter_commit (exclusive, bounded wait) ── reload, validate, commit ── drop
//! ```
//!
//! Every commit under the fence reloads the head after entering it and stages on that head:
//! the writer that was inside when Cryo arrived has committed by then, and no cooperating
//! writer commits before Cryo does. What takes time (rewriting data, writing manifests, reading
//! manifests to prove files unreachable) happens before the fence; inside it, only what the
//! head added since is read.
//!
//! A writer's whole operation therefore lies either before Cryo's commit (its snapshot is seen
//! by Cryo's validation, which aborts the groups it conflicts with) or after it (it reads the
//! compacted files). Cryo never waits for writers longer than [`CommitFence::wait_ms`] and a
//! waiting commit closes a gate, so a stream of writers cannot starve it; writers wait at most
//! for one commit of Cryo's.
//!
//! Three implementations, the same protocol:
//!
//! - OS file locks under [`CommitFence::dir`]: every process on one host (or on a filesystem
//!   with working `flock`) that uses the same directory takes part;
//! - PostgreSQL advisory locks in [`CommitFence::database`] (the SQL catalog's own database,
//!   say): every process on any machine that reaches it takes part. The gate and the fence are
//!   two advisory keys per table; each holder has a session of its own;
//! - lease objects under [`CommitFence::location`] on object storage (beside the tables, say):
//!   every process that reaches the bucket takes part. A gate object per table (created only
//!   if absent) and an object per writer; a writer writes its own before it reads the gate,
//!   Cryo creates the gate before it lists the writers, so one of them always sees the other.
//!
//! A crashed holder releases the fence with its process (its file handle or its session
//! closes), or on object storage once its lease has run out ([`CommitFence::lease_ms`]).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::catalog::{LoadedTable, TableId};
use crate::commit::CatalogCommitter;
use crate::error::{Error, Result};
use crate::io::ObjectStorage;

use super::fence_objects::{self, Lease, ObjectFence};

/// Poll interval of Cryo's bounded wait.
const POLL: Duration = Duration::from_millis(10);

/// Where the fence of a table lives and how long Cryo waits for it.
#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CommitFence {
    /// Directory of the fence files, shared by the writers and Cryo (one host).
    pub dir: PathBuf,
    /// A PostgreSQL database shared by the writers and Cryo (any host), in any spelling the SQL
    /// catalog takes (`postgresql://user:password@host:5432/db`, SQLAlchemy's, JDBC's); when
    /// set, the fence is advisory locks there and [`Self::dir`] is not used.
    pub database: Option<String>,
    /// A location on object storage shared by the writers and Cryo (any host):
    /// `s3://bucket/cryo/fence`, `abfss://…`, `gs://…`; when set, the fence is lease objects
    /// there and [`Self::dir`] is not used.
    pub location: Option<String>,
    /// Storage properties for [`Self::location`] (PyIceberg's names: `s3.endpoint`,
    /// `adls.account-name`, …). Empty: Cryo's commits reach it with the table's own storage,
    /// writers with the defaults of their environment. Never serialized.
    #[serde(skip_serializing)]
    pub properties: BTreeMap<String, String>,
    /// Lease of a fence object on [`Self::location`]: how long a crashed holder keeps the
    /// others out (renewed every third of it while held; at least a second).
    pub lease_ms: u64,
    /// Longest Cryo waits for writers' operations in flight before giving the commit up
    /// (its groups fail, retryable, and their files are deleted).
    pub wait_ms: u64,
    /// The storage reaching [`Self::location`], given by [`Self::on_object_storage`].
    #[serde(skip)]
    storage: Option<ObjectStorage>,
}

impl PartialEq for CommitFence {
    fn eq(&self, other: &Self) -> bool {
        // The storage is how the location is reached, not which fence it is.
        (
            &self.dir,
            &self.database,
            &self.location,
            &self.properties,
            self.lease_ms,
            self.wait_ms,
        ) == (
            &other.dir,
            &other.database,
            &other.location,
            &other.properties,
            other.lease_ms,
            other.wait_ms,
        )
    }
}

impl Eq for CommitFence {}

impl Default for CommitFence {
    fn default() -> Self {
        Self {
            dir: PathBuf::new(),
            database: None,
            location: None,
            properties: BTreeMap::new(),
            lease_ms: crate::govern::DEFAULT_LEASE_MS,
            wait_ms: 60_000,
            storage: None,
        }
    }
}

impl std::fmt::Debug for CommitFence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The database URI may hold a password, the properties credentials: only whether the
        // one is set, and the other's keys.
        f.debug_struct("CommitFence")
            .field("dir", &self.dir)
            .field("database", &self.database.as_ref().map(|_| "<set>"))
            .field("location", &self.location)
            .field("property_keys", &self.properties.keys().collect::<Vec<_>>())
            .field("lease_ms", &self.lease_ms)
            .field("wait_ms", &self.wait_ms)
            .field("storage", &self.storage)
            .finish()
    }
}

/// A held fence (shared for a writer, exclusive for Cryo's commit); released when dropped.
#[derive(Debug)]
pub struct FenceGuard {
    _files: Vec<File>,
    _session: Option<PgSession>,
    _lease: Option<Lease>,
}

/// A PostgreSQL session holding advisory locks: closing it (dropping it) releases them.
struct PgSession(
    #[allow(dead_code, reason = "held for its session, never read")] sqlx::PgConnection,
);

impl std::fmt::Debug for PgSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PgSession")
    }
}

impl CommitFence {
    /// The fence under `dir`, with the default wait (60 s).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            ..Self::default()
        }
    }

    /// The fence in a PostgreSQL database (for writers and maintainers on many machines),
    /// with the default wait.
    pub fn in_database(uri: impl Into<String>) -> Self {
        Self {
            database: Some(uri.into()),
            ..Self::default()
        }
    }

    /// The fence as lease objects under `location` on object storage (for writers and
    /// maintainers that share only a bucket), reached through `storage` (a catalog's, with its
    /// credentials), with the default lease (a minute) and wait.
    pub fn on_object_storage(location: impl Into<String>, storage: ObjectStorage) -> Self {
        Self {
            location: Some(location.into()),
            storage: Some(storage),
            ..Self::default()
        }
    }

    /// Reject a fence without a directory, a database or a location, or with two of the
    /// latter, or a location on local files (they cannot create an object only if absent
    /// across machines: give a directory instead).
    pub fn validate(&self) -> Result<()> {
        match (&self.database, &self.location) {
            (Some(_), Some(_)) => Err(Error::validation(
                "commit_fence: give a database or a location, not both",
            )),
            (Some(db), None) if db.trim().is_empty() => {
                Err(Error::validation("commit_fence.database must not be empty"))
            }
            (None, Some(location)) => {
                let root = crate::io::normalize_location(location.trim())?;
                if root.starts_with("file:") {
                    return Err(Error::validation(format!(
                        "commit_fence.location `{root}` is on local files: give it as \
                         commit_fence.dir instead (the location is for object storage)"
                    )));
                }
                Ok(())
            }
            (None, None) if self.dir.as_os_str().is_empty() => Err(Error::validation(
                "commit_fence.dir must not be empty (or give commit_fence.database or \
                 commit_fence.location)",
            )),
            _ => Ok(()),
        }
    }

    /// The fence objects of `catalog`.`table` on [`Self::location`], reached through the
    /// fence's own storage, else `fallback` (the table's), else the environment's defaults.
    fn objects(
        &self,
        location: &str,
        catalog: &str,
        table: &TableId,
        fallback: Option<&ObjectStorage>,
    ) -> Result<ObjectFence> {
        let root = crate::io::normalize_location(location.trim())?;
        let storage = match (&self.storage, fallback) {
            (Some(s), _) => s.clone(),
            (None, Some(s)) if self.properties.is_empty() => s.clone(),
            (None, _) => crate::io::ObjectStorageFactory::new()
                .storage(self.properties.clone().into_iter().collect()),
        };
        Ok(ObjectFence {
            storage,
            prefix: format!(
                "{}/{}",
                root.trim_end_matches('/'),
                crate::govern::lock::table_file_stem(catalog, table)
            ),
            table: table.clone(),
            lease_ms: self.lease_ms.max(1_000),
        })
    }

    /// The advisory keys of `catalog`.`table`'s gate and fence.
    fn keys(catalog: &str, table: &TableId) -> (i64, i64) {
        let stem = crate::govern::lock::table_file_stem(catalog, table);
        let key = |what: &str| {
            use sha2::Digest;
            let d = sha2::Sha256::digest(format!("{stem}\u{0}{what}").as_bytes());
            i64::from_be_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
        };
        (key("gate"), key("fence"))
    }

    async fn session(&self) -> Result<sqlx::PgConnection> {
        use sqlx::Connection;
        let uri = self.database.as_deref().unwrap_or_default();
        let config = crate::catalog::CatalogConfig::new("commit-fence", [("uri", uri)]);
        let options = crate::catalog::sql::postgres_options(&config, uri)?.ok_or_else(|| {
            Error::config("commit_fence.database is not a PostgreSQL URI (postgresql://…)")
        })?;
        sqlx::PgConnection::connect_with(&options)
            .await
            .map_err(|e| db_err("connect", &e))
    }

    async fn enter_writer_in_database(&self, catalog: &str, table: &TableId) -> Result<FenceGuard> {
        let (gate, fence) = Self::keys(catalog, table);
        let mut conn = self.session().await?;
        for (sql, key) in [
            ("SELECT pg_advisory_lock_shared($1)", gate),
            ("SELECT pg_advisory_lock_shared($1)", fence),
            ("SELECT pg_advisory_unlock_shared($1)", gate),
        ] {
            sqlx::query(sql)
                .bind(key)
                .execute(&mut conn)
                .await
                .map_err(|e| db_err("advisory lock", &e))?;
        }
        Ok(FenceGuard {
            _files: Vec::new(),
            _session: Some(PgSession(conn)),
            _lease: None,
        })
    }

    async fn enter_commit_in_database(
        &self,
        catalog: &str,
        table: &TableId,
    ) -> Result<Option<FenceGuard>> {
        let (gate, fence) = Self::keys(catalog, table);
        let deadline = Instant::now() + Duration::from_millis(self.wait_ms);
        let mut conn = self.session().await?;
        for key in [gate, fence] {
            loop {
                let taken: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
                    .bind(key)
                    .fetch_one(&mut conn)
                    .await
                    .map_err(|e| db_err("advisory lock", &e))?;
                if taken {
                    break;
                }
                if Instant::now() >= deadline {
                    return Ok(None); // closing the session releases the gate
                }
                tokio::time::sleep(POLL.max(Duration::from_millis(50))).await;
            }
        }
        Ok(Some(FenceGuard {
            _files: Vec::new(),
            _session: Some(PgSession(conn)),
            _lease: None,
        }))
    }

    fn paths(&self, catalog: &str, table: &TableId) -> (PathBuf, PathBuf) {
        let name = crate::govern::lock::table_file_stem(catalog, table);
        (
            self.dir.join(format!("{name}.gate")),
            self.dir.join(format!("{name}.fence")),
        )
    }

    fn open(&self, path: &Path) -> Result<File> {
        std::fs::create_dir_all(&self.dir).map_err(|e| io_err(&self.dir, "create directory", e))?;
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| io_err(path, "open", e))
    }

    /// For a writer: blocks while a commit of Cryo's on `catalog`.`table` is in progress, then
    /// holds the fence (shared with other writers) until the guard is dropped. Hold it from
    /// before the operation reads the table until after it committed.
    pub fn enter_writer(&self, catalog: &str, table: &TableId) -> Result<FenceGuard> {
        self.validate()?;
        if let Some(location) = &self.location {
            let lease = fence_objects::enter_writer(self.objects(location, catalog, table, None)?)?;
            return Ok(FenceGuard {
                _files: Vec::new(),
                _session: None,
                _lease: Some(lease),
            });
        }
        if self.database.is_some() {
            // A runtime of its own, on a thread of its own (the caller may be on a runtime's
            // thread, where blocking on another is refused). The session outlives it: holding
            // the advisory lock needs no polling, and dropping the guard closes the socket.
            return std::thread::scope(|s| {
                s.spawn(|| {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| Error::compute("commit fence runtime", e))?
                        .block_on(self.enter_writer_in_database(catalog, table))
                })
                .join()
                .map_err(|_| Error::Internal("commit fence: the writer's thread panicked".into()))?
            });
        }
        let (gate_path, fence_path) = self.paths(catalog, table);
        let gate = self.open(&gate_path)?;
        gate.lock_shared()
            .map_err(|e| io_err(&gate_path, "lock", e))?;
        let fence = self.open(&fence_path)?;
        fence
            .lock_shared()
            .map_err(|e| io_err(&fence_path, "lock", e))?;
        // Passing the gate is enough: a commit that closes it now waits for this writer.
        drop(gate);
        Ok(FenceGuard {
            _files: vec![fence],
            _session: None,
            _lease: None,
        })
    }

    /// For Cryo's commit: closes the gate to new writers, waits (up to [`Self::wait_ms`]) for
    /// the writers in flight to finish, and holds the fence exclusively until the guard is
    /// dropped. `Ok(None)`: writers held it for the whole wait.
    pub async fn enter_commit(&self, catalog: &str, table: &TableId) -> Result<Option<FenceGuard>> {
        self.enter_commit_with(catalog, table, None).await
    }

    /// [`Self::enter_commit`], reaching a fence on object storage through `storage` unless the
    /// fence names its own.
    async fn enter_commit_with(
        &self,
        catalog: &str,
        table: &TableId,
        storage: Option<&ObjectStorage>,
    ) -> Result<Option<FenceGuard>> {
        self.validate()?;
        if let Some(location) = &self.location {
            let deadline = Instant::now() + Duration::from_millis(self.wait_ms);
            let objects = self.objects(location, catalog, table, storage)?;
            return Ok(fence_objects::enter_commit(objects, deadline)
                .await?
                .map(|lease| FenceGuard {
                    _files: Vec::new(),
                    _session: None,
                    _lease: Some(lease),
                }));
        }
        if self.database.is_some() {
            return self.enter_commit_in_database(catalog, table).await;
        }
        let (gate_path, fence_path) = self.paths(catalog, table);
        let deadline = Instant::now() + Duration::from_millis(self.wait_ms);
        let gate = self.open(&gate_path)?;
        if !try_exclusive(&gate, &gate_path, deadline).await? {
            return Ok(None);
        }
        let fence = self.open(&fence_path)?;
        if !try_exclusive(&fence, &fence_path, deadline).await? {
            return Ok(None);
        }
        Ok(Some(FenceGuard {
            _files: vec![fence, gate],
            _session: None,
            _lease: None,
        }))
    }
}

/// Enter `fence` for a commit of Cryo's on `head`'s table in `catalog`, and reload the head
/// through `committer` inside it: the writers in flight when Cryo arrived have committed, and no
/// cooperating writer moves the head until the guard is dropped. Writers holding the fence for
/// the whole wait is a commit conflict (nothing was committed, the caller deletes what it wrote).
pub(super) async fn enter_fence(
    fence: &CommitFence,
    catalog: &str,
    committer: &dyn CatalogCommitter,
    head: &LoadedTable,
) -> Result<(FenceGuard, LoadedTable)> {
    match fence
        .enter_commit_with(catalog, &head.id, Some(&head.storage))
        .await?
    {
        Some(g) => Ok((g, committer.load_head(head).await?)),
        None => Err(Error::CommitConflict {
            retryable: true,
            table: head.id.to_string(),
            message: format!(
                "writers held the commit fence for {} s; nothing was committed",
                fence.wait_ms / 1000
            ),
        }),
    }
}

/// Take `file`'s exclusive lock, polling until `deadline`; whether it was taken.
async fn try_exclusive(file: &File, path: &Path, deadline: Instant) -> Result<bool> {
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(true),
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(e)) => return Err(io_err(path, "lock", e)),
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(POLL).await;
    }
}

fn io_err(path: &Path, what: &str, e: std::io::Error) -> Error {
    Error::local_file(path, format_args!("commit fence: {what}"), e)
}

fn db_err(what: &str, e: &sqlx::Error) -> Error {
    // sqlx's errors carry the server's words, never the connection's password.
    Error::Catalog {
        catalog: "commit fence".to_string(),
        message: format!("commit fence: {what}: {e}"),
        source: None,
        retryable: true,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    fn table() -> TableId {
        TableId::parse("db.t").unwrap()
    }

    #[test]
    fn an_option_with_an_unknown_field_is_refused() {
        // `waitMs` from a binding that did not translate it must not silently mean 60 s.
        let given = serde_json::json!({ "dir": "/f", "waitMs": 5 });
        let err = serde_json::from_value::<CommitFence>(given).unwrap_err();
        assert!(err.to_string().contains("waitMs"), "{err}");
        let ok: CommitFence = serde_json::from_value(serde_json::json!({ "dir": "/f" })).unwrap();
        assert_eq!(ok, CommitFence::new("/f"));
    }

    #[tokio::test]
    async fn writers_share_and_exclude_commits() {
        let dir = tempfile::tempdir().unwrap();
        let mut fence = CommitFence::new(dir.path());
        fence.wait_ms = 100;
        let w1 = fence.enter_writer("c", &table()).unwrap();
        let w2 = fence.enter_writer("c", &table()).unwrap();
        // Writers in flight: the commit gives up after its wait.
        assert!(fence.enter_commit("c", &table()).await.unwrap().is_none());
        // Other tables and catalogs are independent.
        assert!(fence.enter_commit("c2", &table()).await.unwrap().is_some());
        drop(w1);
        assert!(fence.enter_commit("c", &table()).await.unwrap().is_none());
        drop(w2);
        let commit = fence.enter_commit("c", &table()).await.unwrap().unwrap();
        // A commit in progress holds a writer back until it ends.
        let entered = Arc::new(AtomicBool::new(false));
        let writer = {
            let (fence, entered) = (fence.clone(), Arc::clone(&entered));
            std::thread::spawn(move || {
                let g = fence.enter_writer("c", &table()).unwrap();
                entered.store(true, Ordering::SeqCst);
                drop(g);
            })
        };
        std::thread::sleep(Duration::from_millis(150));
        assert!(!entered.load(Ordering::SeqCst));
        drop(commit);
        writer.join().unwrap();
        assert!(entered.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn a_waiting_commit_closes_the_gate() {
        let dir = tempfile::tempdir().unwrap();
        let mut fence = CommitFence::new(dir.path());
        fence.wait_ms = 5_000;
        let w1 = fence.enter_writer("c", &table()).unwrap();
        let commit = {
            let fence = fence.clone();
            tokio::spawn(async move { fence.enter_commit("c", &table()).await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        // A writer arriving while the commit waits queues behind it.
        let late_in = Arc::new(AtomicBool::new(false));
        let late = {
            let (fence, late_in) = (fence.clone(), Arc::clone(&late_in));
            std::thread::spawn(move || {
                let g = fence.enter_writer("c", &table()).unwrap();
                late_in.store(true, Ordering::SeqCst);
                g
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(!late_in.load(Ordering::SeqCst));
        drop(w1);
        let guard = commit.await.unwrap().unwrap().expect("commit entered");
        assert!(!late_in.load(Ordering::SeqCst));
        drop(guard);
        drop(late.join().unwrap());
        assert!(late_in.load(Ordering::SeqCst));
    }

    fn memory_fence(wait_ms: u64, lease_ms: u64) -> CommitFence {
        let storage =
            crate::io::ObjectStorageFactory::new().storage(std::collections::HashMap::new());
        let mut fence = CommitFence::on_object_storage("memory://fence", storage);
        fence.wait_ms = wait_ms;
        fence.lease_ms = lease_ms;
        fence
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_object_storage_writers_share_and_exclude_commits() {
        let fence = memory_fence(300, 1_000);
        let writer = |f: &CommitFence| {
            let f = f.clone();
            std::thread::spawn(move || f.enter_writer("c", &table()).unwrap())
                .join()
                .unwrap()
        };
        let (w1, w2) = (writer(&fence), writer(&fence));
        assert!(fence.enter_commit("c", &table()).await.unwrap().is_none());
        assert!(fence.enter_commit("c2", &table()).await.unwrap().is_some());
        drop(w1);
        assert!(fence.enter_commit("c", &table()).await.unwrap().is_none());
        drop(w2);
        let commit = fence.enter_commit("c", &table()).await.unwrap().unwrap();
        // Held past its lease (renewed): a second commit and a writer stay out.
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        assert!(fence.enter_commit("c", &table()).await.unwrap().is_none());
        let entered = Arc::new(AtomicBool::new(false));
        let late = {
            let (fence, entered) = (fence.clone(), Arc::clone(&entered));
            std::thread::spawn(move || {
                let g = fence.enter_writer("c", &table()).unwrap();
                entered.store(true, Ordering::SeqCst);
                g
            })
        };
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(!entered.load(Ordering::SeqCst));
        drop(commit);
        let late = late.join().unwrap();
        assert!(entered.load(Ordering::SeqCst));
        // A commit now waits for that writer, and gives up: nothing of its gate is left.
        assert!(fence.enter_commit("c", &table()).await.unwrap().is_none());
        drop(late);
        assert!(fence.enter_commit("c", &table()).await.unwrap().is_some());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_object_storage_a_dead_writer_is_ignored_once_its_lease_ran_out() {
        let fence = memory_fence(5_000, 1_000);
        let objects = fence
            .objects("memory://fence", "c", &table(), None)
            .unwrap();
        // What a killed writer leaves: its object, no longer renewed.
        let record = serde_json::json!({
            "holder": "writer", "pid": 1, "since_ms": 0,
            "expires_ms": std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64 + 1_000,
            "table": "db.t",
        });
        let dead = format!("{}/writers/dead.json", objects.prefix);
        objects
            .storage
            .write_all(&dead, serde_json::to_vec(&record).unwrap().into())
            .await
            .unwrap();
        let started = Instant::now();
        let commit = fence.enter_commit("c", &table()).await.unwrap();
        assert!(commit.is_some());
        assert!(
            started.elapsed() >= Duration::from_millis(700),
            "{:?}",
            started.elapsed()
        );
        assert!(objects.storage.head(&dead).await.unwrap().is_none());
    }

    #[test]
    fn locations_are_checked() {
        let mut fence = memory_fence(1, 1);
        fence.database = Some("postgresql://h/db".into());
        assert!(
            fence
                .validate()
                .unwrap_err()
                .to_string()
                .contains("not both")
        );
        let local = CommitFence {
            location: Some("/var/lib/fence".into()),
            ..CommitFence::default()
        };
        let e = local.validate().unwrap_err().to_string();
        assert!(e.contains("commit_fence.dir"), "{e}");
        let secret = CommitFence {
            properties: [("s3.secret-access-key".to_string(), "hunter2".to_string())].into(),
            ..memory_fence(1, 1)
        };
        assert!(!format!("{secret:?}").contains("hunter2"));
        assert!(!serde_json::to_string(&secret).unwrap().contains("hunter2"));
    }

    #[test]
    fn empty_dir_is_refused() {
        let e = CommitFence::default()
            .enter_writer("c", &table())
            .unwrap_err();
        assert!(e.to_string().contains("commit_fence.dir"), "{e}");
    }
}
