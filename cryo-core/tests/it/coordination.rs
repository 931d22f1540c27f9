//! Coordination across machines: maintainers that share only the catalog (PostgreSQL) and the
//! bucket (Azurite), each in a working directory of its own with a lock configuration of its
//! own, never maintain one table at once; a holder killed with SIGKILL does not block forever;
//! receipts go to the bucket.
//!
//! The other maintainers are child processes: this test binary run again, entering
//! [`child_process_entry`] with its orders in `CRYO_IT_LOCK_CHILD`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cryo_core::clock::SystemClock;
use cryo_core::exec::{MaintenanceOptions, MaintenanceRun};
use cryo_core::govern::{CommitFence, LockHolder, ObjectLocks, TableLocks, open_locks};
use cryo_core::grade::{GradeOptions, grade};
use cryo_core::ops::Operation;
use cryo_core::plan::{MaintenancePlan, PlanOptions, plan_fleet};
use cryo_core::receipt::{ReceiptLog, ReceiptStatus};
use cryo_core::scan::{ScanOptions, scan_table};
use cryo_core::{Catalog, CatalogConfig, Namespace, TableId};
use serde::{Deserialize, Serialize};

use crate::common::{azurite_props, azurite_root, service_env};
use crate::replace::{append, expected, read_rows, schema};

const CHILD_ENV: &str = "CRYO_IT_LOCK_CHILD";
const REPORT_MARK: &str = "cryo-child-report: ";

/// What a child process is told to do.
#[derive(Serialize, Deserialize)]
struct Orders {
    catalog: CatalogConfig,
    /// `catalog` or an object-store location.
    locks: String,
    /// Lease of object-store locks.
    lease_ms: u64,
    table: String,
    holder: String,
    /// Try to take the lock at this instant (ms since the epoch), so that racers start together.
    start_at_ms: i64,
    /// Hold a lock it took this long (then release it and exit), or until killed.
    hold_ms: u64,
    /// Instead of a table lock: enter the commit fence as a writer, in the catalog's database
    /// (`database`) or under this location on object storage.
    #[serde(default)]
    fence_writer: Option<String>,
}

/// What a child reports on its first line.
#[derive(Debug, Serialize, Deserialize)]
enum Report {
    Locked { pid: u32, host: String },
    Busy { holder: LockHolder },
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A catalog in the PostgreSQL server's database (rows scoped by a fresh catalog name) whose
/// warehouse is a fresh prefix of Azurite's container; `locks_root` is beside it.
fn shared_config() -> (CatalogConfig, String) {
    let run = uuid::Uuid::new_v4().simple().to_string();
    let root = format!("{}/cryo-coord-{run}", azurite_root());
    let mut props = vec![
        ("uri", service_env("CRYO_POSTGRES_URI")),
        ("warehouse", format!("{root}/wh")),
        ("init_catalog_tables", "true".to_string()),
    ];
    props.extend(azurite_props());
    (CatalogConfig::new(format!("coord_{run}"), props), root)
}

/// Entry point of the child processes (not a test of its own: without orders it returns).
#[test]
#[ignore = "the entry point of coordination's child processes"]
fn child_process_entry() {
    let Ok(text) = std::env::var(CHILD_ENV) else {
        return;
    };
    let orders: Orders = serde_json::from_str(&text).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    if let Some(at) = &orders.fence_writer {
        let fence = if at == "database" {
            CommitFence::in_database(orders.catalog.get("uri").unwrap())
        } else {
            let catalog = rt
                .block_on(Catalog::connect(orders.catalog.clone()))
                .unwrap();
            let mut fence = CommitFence::on_object_storage(at, catalog.storage());
            fence.lease_ms = orders.lease_ms;
            fence
        };
        let table = TableId::parse(&orders.table).unwrap();
        let guard = fence.enter_writer(&orders.catalog.name, &table).unwrap();
        let report = Report::Locked {
            pid: std::process::id(),
            host: String::new(),
        };
        println!("{REPORT_MARK}{}", serde_json::to_string(&report).unwrap());
        std::thread::sleep(Duration::from_millis(orders.hold_ms));
        drop(guard);
        return;
    }
    rt.block_on(async move {
        let catalog = Catalog::connect(orders.catalog.clone()).await.unwrap();
        let locks: Arc<dyn TableLocks> = if orders.locks == "catalog" {
            open_locks(&catalog, "catalog").await.unwrap()
        } else {
            Arc::new(
                ObjectLocks::new(catalog.storage(), &orders.locks)
                    .unwrap()
                    .with_lease_ms(orders.lease_ms),
            )
        };
        let table = TableId::parse(&orders.table).unwrap();
        let wait = orders.start_at_ms - now_ms();
        if wait > 0 {
            tokio::time::sleep(Duration::from_millis(wait as u64)).await;
        }
        let got = locks
            .try_acquire(catalog.name(), &table, &orders.holder, now_ms())
            .await
            .unwrap();
        let report = match &got {
            Ok(g) => Report::Locked {
                pid: g.holder.pid,
                host: g.holder.host.clone(),
            },
            Err(holder) => Report::Busy {
                holder: holder.clone(),
            },
        };
        // The harness prints the test's name on the same line: the report follows a marker.
        println!("{REPORT_MARK}{}", serde_json::to_string(&report).unwrap());
        if got.is_ok() {
            tokio::time::sleep(Duration::from_millis(orders.hold_ms)).await;
        }
        drop(got);
        // Let the release (an object deleted in the background) finish.
        tokio::time::sleep(Duration::from_millis(300)).await;
    });
}

fn spawn_child(orders: &Orders) -> (Child, tempfile::TempDir) {
    // A working directory of its own: nothing is shared through the filesystem.
    let cwd = tempfile::tempdir().unwrap();
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "coordination::child_process_entry",
            "--exact",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, serde_json::to_string(orders).unwrap())
        .current_dir(cwd.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (child, cwd)
}

/// The child's report (the first line of its output that is one).
fn report_of(child: &mut Child) -> Report {
    let out = child.stdout.take().unwrap();
    let mut lines = BufReader::new(out).lines();
    loop {
        let Some(Ok(line)) = lines.next() else {
            panic!("the child exited without a report");
        };
        let Some((_, json)) = line.split_once(REPORT_MARK) else {
            continue;
        };
        if let Ok(r) = serde_json::from_str::<Report>(json.trim()) {
            // Keep reading the pipe in the background, so the child never blocks on it.
            std::thread::spawn(move || for _ in lines {});
            return r;
        }
    }
}

/// A table of six small files, so a plan compacts it.
async fn fragmented(catalog: &Catalog) -> TableId {
    let id = TableId::parse("db.events").unwrap();
    catalog
        .create_namespace(&Namespace::new(["db"]))
        .await
        .unwrap();
    let mut t = catalog
        .create_table(
            &id,
            cryo_core::commit::NewTable::new(schema())
                .with_property("write.target-file-size-bytes", "1048576"),
        )
        .await
        .unwrap();
    let committer = catalog.committer().unwrap();
    for f in 0..6 {
        t = append(committer.as_ref(), &t, f * 10..f * 10 + 10).await;
    }
    id
}

async fn compaction_plan(catalog: &Catalog, id: &TableId) -> MaintenancePlan {
    let scan = scan_table(catalog, id, &ScanOptions::default(), &SystemClock)
        .await
        .unwrap();
    let report = grade(&scan, &GradeOptions::default(), scan.scanned_at_ms).unwrap();
    let now = scan.scanned_at_ms;
    let plan = plan_fleet(
        catalog.name(),
        &[(scan, report)],
        &PlanOptions::default(),
        &BTreeMap::new(),
        now,
    )
    .unwrap();
    assert!(
        plan.tables[0]
            .steps
            .iter()
            .any(|s| s.operation == Operation::RewriteDataFiles),
        "{plan:?}"
    );
    plan
}

/// Locks named by `locks` (`catalog` or an object-store location): a maintainer defers to a
/// child process holding the table's lock, with the child's identity in its receipt; the child
/// is killed with SIGKILL; the table is free again (at once for the catalog's locks, when the
/// lease runs out for lock objects) and the maintainer compacts it. Receipts go to the bucket.
async fn a_killed_holder_and_a_deferring_maintainer(
    locks: &str,
    root: &str,
    config: CatalogConfig,
) {
    let catalog = Catalog::connect(config.clone()).await.unwrap();
    let id = fragmented(&catalog).await;
    let rows = read_rows(&catalog.load_table(&id).await.unwrap()).await;
    assert_eq!(rows, expected(&(0..60).collect()));
    let plan = compaction_plan(&catalog, &id).await;

    let lease_ms = 2_000;
    let (mut child, _cwd) = spawn_child(&Orders {
        catalog: config.clone(),
        locks: locks.to_string(),
        lease_ms,
        table: id.to_string(),
        holder: "maintainer-b".into(),
        start_at_ms: 0,
        hold_ms: 600_000,
        fence_writer: None,
    });
    let Report::Locked { pid, host } = report_of(&mut child) else {
        panic!("the child did not get the lock");
    };
    assert_eq!(pid, child.id());

    // This process's own lock configuration (a new object, its own connection or client).
    let mine: Arc<dyn TableLocks> = open_locks(&catalog, locks).await.unwrap();
    let receipts = ReceiptLog::open(&catalog, &format!("{root}/receipts")).unwrap();
    let run = |dry_run: bool| {
        MaintenanceRun::new(&catalog, &plan)
            .with_options(MaintenanceOptions {
                dry_run,
                actor: "maintainer-a".into(),
                ..MaintenanceOptions::default()
            })
            .with_locks(Arc::clone(&mine))
            .with_receipt_log(receipts.clone())
    };
    let deferred = run(false).execute().await.unwrap();
    let mut saw_holder = false;
    for r in deferred.receipts.iter().filter(|r| r.operation.is_some()) {
        assert_eq!(r.status, ReceiptStatus::Deferred, "{r:?}");
        let reason = r.reason.as_deref().unwrap_or_default();
        assert!(
            reason.contains("maintainer-b") && reason.contains(&pid.to_string()),
            "{reason}"
        );
        if !host.is_empty() {
            assert!(reason.contains(&host), "{reason}");
        }
        saw_holder = true;
    }
    assert!(saw_holder, "{:?}", deferred.receipts);
    let head = catalog.load_table(&id).await.unwrap();
    assert_eq!(
        head.metadata.snapshots().count(),
        6,
        "deferred: nothing ran"
    );

    // SIGKILL: no release, no clean-up.
    child.kill().unwrap();
    child.wait().unwrap();
    let free_by = Instant::now() + Duration::from_millis(lease_ms + 10_000);
    loop {
        match mine
            .try_acquire(catalog.name(), &id, "probe", now_ms())
            .await
            .unwrap()
        {
            Ok(g) => {
                drop(g);
                break;
            }
            Err(holder) => {
                assert_eq!(holder.holder, "maintainer-b");
                assert!(
                    Instant::now() < free_by,
                    "the killed holder's lock never freed"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await; // the probe's release
    let done = run(false).execute().await.unwrap();
    let compacted = done
        .receipts
        .iter()
        .find(|r| r.operation == Some(Operation::RewriteDataFiles))
        .unwrap();
    assert_eq!(compacted.status, ReceiptStatus::Succeeded, "{compacted:?}");
    let after = catalog.load_table(&id).await.unwrap();
    assert_eq!(read_rows(&after).await, rows);

    // The bucket holds both runs' receipts: the deferral naming the holder, then the work.
    let logged = receipts.read().await.unwrap();
    assert!(logged.iter().any(|r| r.status == ReceiptStatus::Deferred
        && r.details.get("lock_holder").and_then(|v| v.as_str()) == Some("maintainer-b")));
    assert!(logged.iter().any(|r| r.status == ReceiptStatus::Succeeded
        && r.operation == Some(Operation::RewriteDataFiles)));
    assert_eq!(logged.len(), deferred.receipts.len() + done.receipts.len());
}

#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn catalog_locks_across_processes_survive_a_killed_holder() {
    let (config, root) = shared_config();
    a_killed_holder_and_a_deferring_maintainer("catalog", &root, config).await;
}

#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn object_locks_across_processes_survive_a_killed_holder() {
    let (config, root) = shared_config();
    let locks = format!("{root}/locks");
    a_killed_holder_and_a_deferring_maintainer(&locks, &root, config).await;
}

/// Two maintainers racing for one table, rounds of them: exactly one takes it, the other is
/// told who did.
fn racing_maintainers(locks: &str, config: &CatalogConfig) {
    for round in 0..3 {
        let table = format!("db.race_{round}");
        let start_at_ms = now_ms() + 1_500;
        let orders = |holder: &str| Orders {
            catalog: config.clone(),
            locks: locks.to_string(),
            lease_ms: 10_000,
            table: table.clone(),
            holder: holder.to_string(),
            start_at_ms,
            hold_ms: 3_000,
            fence_writer: None,
        };
        let (mut a, _a_cwd) = spawn_child(&orders("racer-a"));
        let (mut b, _b_cwd) = spawn_child(&orders("racer-b"));
        let (ra, rb) = (report_of(&mut a), report_of(&mut b));
        let (winner_pid, loser_saw) = match (ra, rb) {
            (Report::Locked { pid, .. }, Report::Busy { holder })
            | (Report::Busy { holder }, Report::Locked { pid, .. }) => (pid, holder),
            other => panic!("round {round}: not exactly one winner: {other:?}"),
        };
        assert_eq!(loser_saw.pid, winner_pid, "round {round}");
        assert!(loser_saw.holder.starts_with("racer-"), "round {round}");
        assert!(a.wait().unwrap().success() && b.wait().unwrap().success());
    }
}

#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn racing_maintainers_on_catalog_locks() {
    let (config, _) = shared_config();
    // The catalog's tables exist before the racers connect (each creates them if absent).
    let _ = Catalog::connect(config.clone()).await.unwrap();
    racing_maintainers("catalog", &config);
}

#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn racing_maintainers_on_object_locks() {
    let (config, root) = shared_config();
    racing_maintainers(&format!("{root}/locks"), &config);
}

/// The commit fence in the catalog's PostgreSQL database: a writer in another process (another
/// working directory, nothing shared but the database) keeps Cryo's commit out; other writers
/// share it; killed with SIGKILL, it lets the commit in at once.
#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn the_commit_fence_spans_processes_in_the_catalog_database() {
    let (config, _) = shared_config();
    let fence = CommitFence::in_database(config.get("uri").unwrap());
    the_commit_fence_spans_processes(&config, fence, "database", Duration::from_secs(5)).await;
}

/// The same on Azurite's blob storage, sharing nothing but the bucket: the killed writer's
/// object keeps the commit out until its lease (3 s here) has run out.
#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn the_commit_fence_spans_processes_on_object_storage() {
    let (config, root) = shared_config();
    let catalog = Catalog::connect(config.clone()).await.unwrap();
    let at = format!("{root}/fence");
    let mut fence = CommitFence::on_object_storage(&at, catalog.storage());
    fence.lease_ms = 3_000;
    the_commit_fence_spans_processes(&config, fence, &at, Duration::from_secs(8)).await;
}

async fn the_commit_fence_spans_processes(
    config: &CatalogConfig,
    mut fence: CommitFence,
    writer_fence: &str,
    released_within: Duration,
) {
    let table = TableId::parse("db.fenced").unwrap();
    let (mut writer, _cwd) = spawn_child(&Orders {
        catalog: config.clone(),
        locks: String::new(),
        lease_ms: fence.lease_ms,
        table: table.to_string(),
        holder: "writer".into(),
        start_at_ms: 0,
        hold_ms: 600_000,
        fence_writer: Some(writer_fence.to_string()),
    });
    assert!(matches!(report_of(&mut writer), Report::Locked { .. }));
    fence.wait_ms = 800;
    let started = Instant::now();
    assert!(
        fence
            .enter_commit(&config.name, &table)
            .await
            .unwrap()
            .is_none()
    );
    assert!(started.elapsed() >= Duration::from_millis(800));
    // Other tables are free; writers share the fence.
    let other = TableId::parse("db.other").unwrap();
    assert!(
        fence
            .enter_commit(&config.name, &other)
            .await
            .unwrap()
            .is_some()
    );
    let shared = {
        let (fence, name, table) = (fence.clone(), config.name.clone(), table.clone());
        tokio::task::spawn_blocking(move || fence.enter_writer(&name, &table))
            .await
            .unwrap()
            .unwrap()
    };
    drop(shared);
    writer.kill().unwrap();
    writer.wait().unwrap();
    fence.wait_ms = 10_000;
    let started = Instant::now();
    let guard = fence.enter_commit(&config.name, &table).await.unwrap();
    assert!(guard.is_some() && started.elapsed() < released_within);
    // While Cryo's commit holds it, a writer waits.
    let entered = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let late = {
        let (fence, name, table, entered) = (
            fence.clone(),
            config.name.clone(),
            table.clone(),
            Arc::clone(&entered),
        );
        std::thread::spawn(move || {
            let g = fence.enter_writer(&name, &table).unwrap();
            entered.store(true, std::sync::atomic::Ordering::SeqCst);
            drop(g);
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!entered.load(std::sync::atomic::Ordering::SeqCst));
    drop(guard);
    late.join().unwrap();
    assert!(entered.load(std::sync::atomic::Ordering::SeqCst));
}
