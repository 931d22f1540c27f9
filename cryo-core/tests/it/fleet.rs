//! The fleet run loop on the demo lake with the native engine as destination: the governor admits
//! each step, receipts record every decision, a dry run changes nothing, a real run keeps every row
//! and improves grades. (Trino and Spark destinations: `tests/it/fleet_trino.rs`, `tests/py`.)

use std::collections::BTreeMap;
use std::path::Path;

use cryo_core::clock::SystemClock;
use cryo_core::demo::{DemoLake, DemoOptions, create_demo_lake};
use cryo_core::exec::{FleetOptions, FleetRun, MaintenanceOptions, TableStatus};
use cryo_core::grade::{GradeOptions, grade};
use cryo_core::plan::{MaintenancePlan, PlanOptions, plan_fleet};
use cryo_core::receipt::ReceiptStatus;
use cryo_core::scan::{FleetScanOptions, scan_fleet};
use cryo_core::{Catalog, TableId};

async fn lake(dir: &Path) -> DemoLake {
    create_demo_lake(dir, &DemoOptions::default())
        .await
        .unwrap()
}

pub(crate) async fn plan(catalog: &Catalog) -> MaintenancePlan {
    let fleet = scan_fleet(catalog, &FleetScanOptions::default(), &SystemClock)
        .await
        .unwrap();
    let graded: Vec<_> = fleet
        .tables
        .iter()
        .map(|s| {
            (
                s.clone(),
                grade(s, &GradeOptions::default(), fleet.scanned_at_ms).unwrap(),
            )
        })
        .collect();
    plan_fleet(
        catalog.name(),
        &graded,
        &PlanOptions::default(),
        &BTreeMap::new(),
        fleet.scanned_at_ms,
    )
    .unwrap()
}

pub(crate) async fn scores(catalog: &Catalog) -> BTreeMap<TableId, u32> {
    let fleet = scan_fleet(catalog, &FleetScanOptions::default(), &SystemClock)
        .await
        .unwrap();
    fleet
        .tables
        .iter()
        .map(|s| {
            (
                s.table.clone(),
                grade(s, &GradeOptions::default(), fleet.scanned_at_ms)
                    .unwrap()
                    .score,
            )
        })
        .collect()
}

async fn metadata(catalog: &Catalog, plan: &MaintenancePlan) -> Vec<Option<String>> {
    let mut out = Vec::new();
    for t in &plan.tables {
        out.push(
            catalog
                .load_table(&t.table)
                .await
                .unwrap()
                .metadata_location,
        );
    }
    out
}

#[tokio::test]
async fn native_fleet_run_dry_then_real() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(dir.path()).await;
    let plan = plan(&lake.catalog).await;
    let steps: usize = plan.tables.iter().map(|t| t.steps.len()).sum();
    assert!(steps >= 5, "the demo lake needs work");
    let before = metadata(&lake.catalog, &plan).await;

    let dry = FleetRun::new(&lake.catalog, &plan).execute().await.unwrap();
    assert!(
        dry.dry_run,
        "a fleet run is a dry run unless asked otherwise"
    );
    assert_eq!(
        metadata(&lake.catalog, &plan).await,
        before,
        "nothing changed"
    );
    assert_eq!(
        dry.count(ReceiptStatus::Admitted),
        steps,
        "one admission per step"
    );
    assert_eq!(dry.count(ReceiptStatus::Failed), 0, "{:#?}", dry.receipts);
    for t in &dry.tables {
        assert_eq!(t.destination, "native");
    }

    let scores_before = scores(&lake.catalog).await;
    let real = FleetRun::new(&lake.catalog, &plan)
        .dry_run(false)
        .execute()
        .await
        .unwrap();
    assert_eq!(real.count(ReceiptStatus::Failed), 0, "{:#?}", real.receipts);
    assert!(real.count(ReceiptStatus::Succeeded) >= 5);
    for t in &real.tables {
        if plan
            .tables
            .iter()
            .any(|p| p.table == t.table && !p.steps.is_empty())
        {
            assert!(
                matches!(t.status, TableStatus::Done),
                "{t:?}: {:#?}",
                real.receipts
            );
        }
    }
    // Every admission precedes its step's outcome.
    for (i, r) in real.receipts.iter().enumerate() {
        if r.status == ReceiptStatus::Succeeded {
            assert!(
                real.receipts[..i]
                    .iter()
                    .any(|a| a.status == ReceiptStatus::Admitted
                        && a.table == r.table
                        && a.operation == r.operation),
                "{r:?} ran without an admission"
            );
        }
    }
    let scores_after = scores(&lake.catalog).await;
    let improved = plan
        .tables
        .iter()
        .filter(|t| scores_after[&t.table] > scores_before[&t.table])
        .count();
    assert!(improved >= 2, "{scores_before:?} -> {scores_after:?}");
}

/// The governor's pause and cooldown checks fire in a real run: a table paused after the plan
/// was made is left alone, an operation the receipt log says ran within its cooldown is
/// deferred, and the table's other steps still run.
#[tokio::test]
async fn pauses_and_cooldowns_given_after_planning_hold_in_the_run() {
    use cryo_core::exec::ControlSources;
    use cryo_core::plan::TableControl;
    use cryo_core::receipt::{JsonLinesLog, Receipt};

    let dir = tempfile::tempdir().unwrap();
    let lake = lake(dir.path()).await;
    let plan = plan(&lake.catalog).await;
    let mut busy = plan.tables.iter().filter(|t| t.steps.len() >= 2);
    let paused = busy.next().expect("a table with two steps").table.clone();
    let cooling = busy.next().expect("another table with two steps");
    let cooled_op = cooling.steps[0].operation;
    let before = metadata(&lake.catalog, &plan).await;

    // What an earlier run on another host left in the shared log: `cooled_op` ran a minute ago.
    let log = JsonLinesLog::new(dir.path().join("receipts.jsonl"));
    let now = cryo_core::clock::Clock::now_ms(&SystemClock);
    log.append(&[Receipt::new(
        now - 60_000,
        lake.catalog.name(),
        cooling.table.clone(),
        Some(cooled_op),
        "native",
        ReceiptStatus::Succeeded,
        "elsewhere",
    )])
    .unwrap();
    let controls = ControlSources {
        tables: BTreeMap::from([(
            paused.to_string(),
            TableControl {
                paused: true,
                pause_reason: Some("owner asked: month-end close".into()),
                ..TableControl::default()
            },
        )]),
        receipt_log: None,
    }
    .load()
    .unwrap();

    let run = FleetRun::new(&lake.catalog, &plan)
        .dry_run(false)
        .with_controls(controls)
        .with_receipt_log(log.clone())
        .execute()
        .await
        .unwrap();
    assert_eq!(run.count(ReceiptStatus::Failed), 0, "{:#?}", run.receipts);
    let of = |t: &TableId| -> Vec<_> { run.receipts.iter().filter(|r| &r.table == t).collect() };

    // The paused table: every step deferred, naming the pause; nothing admitted or committed.
    let receipts = of(&paused);
    assert!(!receipts.is_empty());
    assert!(
        receipts.iter().all(|r| r.status == ReceiptStatus::Deferred
            && r.reason
                .as_deref()
                .unwrap_or("")
                .contains("month-end close")),
        "{receipts:#?}"
    );
    let i = plan.tables.iter().position(|t| t.table == paused).unwrap();
    assert_eq!(
        metadata(&lake.catalog, &plan).await[i],
        before[i],
        "the paused table is untouched"
    );

    // The cooling table: that operation deferred with the cooldown's end; the others ran.
    let receipts = of(&cooling.table);
    let cooled: Vec<_> = receipts
        .iter()
        .filter(|r| r.operation == Some(cooled_op))
        .collect();
    assert!(
        cooled.iter().all(|r| r.status == ReceiptStatus::Deferred)
            && cooled
                .iter()
                .any(|r| r.reason.as_deref().unwrap_or("").contains("cool")),
        "{cooled:#?}"
    );
    for step in &cooling.steps[1..] {
        assert!(
            receipts.iter().any(
                |r| r.operation == Some(step.operation) && r.status == ReceiptStatus::Succeeded
            ),
            "{:?} should have run: {receipts:#?}",
            step.operation
        );
    }
    // Other tables are not held back.
    assert!(run.count(ReceiptStatus::Succeeded) > cooling.steps.len() - 1);
}

#[tokio::test]
async fn a_route_to_an_unknown_destination_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(dir.path()).await;
    let plan = plan(&lake.catalog).await;
    let err = FleetRun::new(&lake.catalog, &plan)
        .with_options(FleetOptions {
            default_destination: "trino".into(),
            ..FleetOptions::default()
        })
        .dry_run(false)
        .execute()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not a destination"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// The loop against a scripted SQL destination: what the governor decides from a load the test
// controls (busy, unreachable, two coordinators). The statements are recorded, not run: these
// tests are about admission, retries, caps and deadlines; real Trino and Spark runs are in
// fleet_trino.rs and tests/py/test_fleet_spark.py.
// ---------------------------------------------------------------------------------------------

mod scripted {
    use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use async_trait::async_trait;
    use cryo_core::clock::Clock;
    use cryo_core::exec::{SqlEngine, StatementOutcome};
    use cryo_core::govern::{CoordinatorLoad, LoadSnapshot, Probe, ProbeFailure};
    use cryo_core::render::{Dialect, SparkDialect, SparkOptions, Version};

    /// The system clock, offset to the plan's `now` (cooldowns and retention as planned).
    #[derive(Debug)]
    pub struct TokioClock {
        base_ms: i64,
        start: std::time::Instant,
    }

    impl TokioClock {
        pub fn new(base_ms: i64) -> Self {
            Self {
                base_ms,
                start: std::time::Instant::now(),
            }
        }
    }

    impl Clock for TokioClock {
        fn now_ms(&self) -> i64 {
            self.base_ms + self.start.elapsed().as_millis() as i64
        }
    }

    /// What the probe reports: `busy_probes` busy answers first, then idle; or unreachable.
    #[derive(Debug)]
    pub struct Scripted {
        pub dialect: SparkDialect,
        pub coordinators: Vec<String>,
        pub busy_probes: AtomicU32,
        pub unreachable: bool,
        pub probes: AtomicU32,
        pub running: AtomicUsize,
        pub peak: AtomicUsize,
        pub statements: Mutex<Vec<(String, String)>>,
        pub clock: Arc<TokioClock>,
    }

    impl Scripted {
        pub fn new(
            coordinators: &[&str],
            busy_probes: u32,
            unreachable: bool,
            clock: Arc<TokioClock>,
        ) -> Self {
            let dialect = SparkDialect::new(SparkOptions {
                catalog: "demo".into(),
                spark_version: Version::new(3, 5, 0),
                iceberg_version: Version::new(1, 10, 0),
                ..SparkOptions::default()
            })
            .unwrap();
            Self {
                dialect,
                coordinators: coordinators.iter().map(ToString::to_string).collect(),
                busy_probes: AtomicU32::new(busy_probes),
                unreachable,
                probes: AtomicU32::new(0),
                running: AtomicUsize::new(0),
                peak: AtomicUsize::new(0),
                statements: Mutex::new(Vec::new()),
                clock,
            }
        }
    }

    #[async_trait]
    impl SqlEngine for Scripted {
        fn kind(&self) -> &'static str {
            "spark"
        }
        fn dialect(&self) -> &dyn Dialect {
            &self.dialect
        }
        fn coordinators(&self) -> Vec<String> {
            self.coordinators.clone()
        }
        async fn probe(&self, destination: &str, now_ms: i64) -> Probe {
            self.probes.fetch_add(1, Ordering::SeqCst);
            if self.unreachable {
                return Err(ProbeFailure {
                    destination: destination.into(),
                    reason: "connection refused (scripted)".into(),
                });
            }
            let busy = self
                .busy_probes
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            let own = self.running.load(Ordering::SeqCst) as u32;
            Ok(LoadSnapshot {
                destination: destination.into(),
                taken_at_ms: now_ms,
                coordinators: self
                    .coordinators
                    .iter()
                    .map(|c| CoordinatorLoad {
                        coordinator: c.clone(),
                        running_queries: if busy { 50 } else { own },
                        queued_queries: 0,
                        maintenance_running: 0,
                    })
                    .collect(),
            })
        }
        async fn execute(
            &self,
            coordinator: &str,
            sql: &str,
        ) -> cryo_core::Result<StatementOutcome> {
            let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(now, Ordering::SeqCst);
            self.statements
                .lock()
                .unwrap()
                .push((coordinator.to_string(), sql.to_string()));
            // A statement takes 150 ms of engine time.
            tokio::time::sleep(std::time::Duration::from_millis(150)).await;
            self.running.fetch_sub(1, Ordering::SeqCst);
            let _ = self.clock.now_ms();
            Ok(StatementOutcome::new(Some(format!("q{now}")), 0, 150))
        }
    }
}

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use cryo_core::clock::Clock;
use cryo_core::govern::{Governor, Limits};
use scripted::{Scripted, TokioClock};

fn governor(limits: Limits) -> Arc<Mutex<Governor>> {
    let mut g = Governor::default();
    g.set_limits("cluster", limits).unwrap();
    Arc::new(Mutex::new(g))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_engine_defers_then_admits_when_load_drops() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(dir.path()).await;
    let plan = plan(&lake.catalog).await;
    let clock = Arc::new(TokioClock::new(plan.created_at_ms));
    let engine = Arc::new(Scripted::new(&["c1"], 3, false, Arc::clone(&clock)));
    let limits = Limits {
        backoff_ms: 400,
        ..Limits::default()
    };
    let out = FleetRun::new(&lake.catalog, &plan)
        .with_clock(clock.clone())
        .with_engine("cluster", engine.clone())
        .with_governor(governor(limits))
        .with_options(FleetOptions {
            default_destination: "cluster".into(),
            min_retry_ms: 100,
            ..FleetOptions::default()
        })
        .dry_run(false)
        .execute()
        .await
        .unwrap();
    let busy: Vec<_> = out
        .receipts
        .iter()
        .filter(|r| r.status == ReceiptStatus::Deferred)
        .collect();
    assert!(!busy.is_empty(), "{:#?}", out.receipts);
    assert!(
        busy.iter()
            .all(|r| r.reason.as_deref().unwrap_or("").contains("busy")),
        "{busy:#?}"
    );
    // Each deferral names when to ask again: the backoff, not sooner.
    for r in &busy {
        let retry = r.details["retry_after_ms"].as_i64().unwrap();
        assert!(retry >= r.at_ms + 400, "{r:?}");
    }
    // Then the load dropped and every statement ran, one maintenance statement at a time per
    // coordinator (the default cap), and every table finished.
    assert_eq!(out.count(ReceiptStatus::Failed), 0, "{:#?}", out.receipts);
    assert!(
        out.tables.iter().all(|t| t.status != TableStatus::Deferred),
        "{:#?}",
        out.tables
    );
    assert_eq!(engine.peak.load(Ordering::SeqCst), 1);
    let ran = engine.statements.lock().unwrap().len();
    assert!(ran >= 5, "{ran}");
    // Every admission is followed by its step's outcome.
    for (i, a) in out.receipts.iter().enumerate() {
        if a.status == ReceiptStatus::Admitted {
            assert!(
                out.receipts[i + 1..].iter().any(|r| r.table == a.table
                    && r.operation == a.operation
                    && matches!(r.status, ReceiptStatus::Succeeded | ReceiptStatus::Skipped)),
                "{a:?} has no outcome"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_probe_never_admits_and_the_deadline_ends_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(dir.path()).await;
    let plan = plan(&lake.catalog).await;
    let clock = Arc::new(TokioClock::new(plan.created_at_ms));
    let engine = Arc::new(Scripted::new(&["c1"], 0, true, Arc::clone(&clock)));
    let started = std::time::Instant::now();
    let out = FleetRun::new(&lake.catalog, &plan)
        .with_clock(clock.clone())
        .with_engine("cluster", engine.clone())
        .with_governor(governor(Limits {
            backoff_ms: 500,
            ..Limits::default()
        }))
        .with_options(FleetOptions {
            default_destination: "cluster".into(),
            run: MaintenanceOptions {
                deadline_ms: Some(clock.now_ms() + 3_000),
                ..MaintenanceOptions::default()
            },
            min_retry_ms: 100,
            ..FleetOptions::default()
        })
        .dry_run(false)
        .execute()
        .await
        .unwrap();
    assert_eq!(out.count(ReceiptStatus::Admitted), 0, "{:#?}", out.receipts);
    assert!(engine.statements.lock().unwrap().is_empty());
    // It kept asking (every backoff) until the deadline, then stopped.
    let probes = engine.probes.load(Ordering::SeqCst);
    assert!((3..=12).contains(&probes), "{probes}: {:#?}", out.receipts);
    let reasons: Vec<&str> = out
        .receipts
        .iter()
        .filter(|r| r.status == ReceiptStatus::Deferred)
        .filter_map(|r| r.reason.as_deref())
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("connection refused (scripted)")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("deadline")),
        "{reasons:?}"
    );
    assert!(
        out.tables
            .iter()
            .all(|t| matches!(t.status, TableStatus::Deferred | TableStatus::Skipped))
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "stopped at the deadline"
    );
}

/// A deferral whose retry falls after the deadline (a long backoff here; a maintenance window
/// that opens tomorrow in production) does not hold the run past the deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deadline_ends_the_run_before_a_later_retry() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(dir.path()).await;
    let plan = plan(&lake.catalog).await;
    let clock = Arc::new(TokioClock::new(plan.created_at_ms));
    let engine = Arc::new(Scripted::new(&["c1"], 0, true, Arc::clone(&clock)));
    let started = std::time::Instant::now();
    let out = FleetRun::new(&lake.catalog, &plan)
        .with_clock(clock.clone())
        .with_engine("cluster", engine.clone())
        .with_governor(governor(Limits {
            backoff_ms: 60_000,
            ..Limits::default()
        }))
        .with_options(FleetOptions {
            default_destination: "cluster".into(),
            run: MaintenanceOptions {
                deadline_ms: Some(clock.now_ms() + 1_000),
                ..MaintenanceOptions::default()
            },
            min_retry_ms: 100,
            ..FleetOptions::default()
        })
        .dry_run(false)
        .execute()
        .await
        .unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "the run waited for a retry after its deadline: {:?}",
        started.elapsed()
    );
    assert_eq!(out.count(ReceiptStatus::Admitted), 0, "{:#?}", out.receipts);
    assert!(
        out.receipts
            .iter()
            .any(|r| r.reason.as_deref().is_some_and(|r| r.contains("deadline"))),
        "{:#?}",
        out.receipts
    );
    assert!(
        out.tables
            .iter()
            .all(|t| matches!(t.status, TableStatus::Deferred | TableStatus::Skipped))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caps_bound_parallel_steps_and_coordinators_take_turns() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(dir.path()).await;
    let plan = plan(&lake.catalog).await;
    let clock = Arc::new(TokioClock::new(plan.created_at_ms));
    let engine = Arc::new(Scripted::new(&["c1", "c2"], 0, false, Arc::clone(&clock)));
    let out = FleetRun::new(&lake.catalog, &plan)
        .with_clock(clock.clone())
        .with_engine("cluster", engine.clone())
        .with_governor(governor(Limits {
            max_maintenance_per_coordinator: 1,
            max_maintenance_per_destination: 2,
            ..Limits::default()
        }))
        .with_options(FleetOptions {
            default_destination: "cluster".into(),
            ..FleetOptions::default()
        })
        .dry_run(false)
        .execute()
        .await
        .unwrap();
    assert_eq!(out.count(ReceiptStatus::Failed), 0, "{:#?}", out.receipts);
    assert_eq!(
        engine.peak.load(Ordering::SeqCst),
        2,
        "two coordinators, one step each: {:#?}",
        out.receipts
    );
    let statements = engine.statements.lock().unwrap().clone();
    let on = |c: &str| statements.iter().filter(|(co, _)| co == c).count();
    assert!(on("c1") > 0 && on("c2") > 0, "{statements:?}");
    assert!(on("c1").abs_diff(on("c2")) <= 2, "{statements:?}");
}
