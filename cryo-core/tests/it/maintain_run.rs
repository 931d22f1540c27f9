//! The maintenance run on the demo lake: dry run changes nothing, a real run improves grades and
//! keeps every row, a broken table or a held lock never fails the run, receipts carry no secrets.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use cryo_core::clock::SystemClock;
use cryo_core::demo::{DemoLake, DemoOptions, create_demo_lake};
use cryo_core::exec::{MaintenanceOptions, MaintenanceRun, controls_from_receipts};
use cryo_core::govern::{LocalLocks, TableLocks};
use cryo_core::grade::{GradeOptions, HealthReport, grade};
use cryo_core::ops::Operation;
use cryo_core::plan::{MaintenancePlan, PlanOptions, plan_fleet};
use cryo_core::receipt::{JsonLinesLog, ReceiptStatus, receipts_batch};
use cryo_core::scan::{FleetScanOptions, TableScan, scan_fleet};
use cryo_core::{Catalog, CatalogConfig, LoadedTable, TableId};

use crate::compact::fingerprint;

async fn lake(dir: &Path) -> DemoLake {
    create_demo_lake(dir, &DemoOptions::default())
        .await
        .unwrap()
}

pub(crate) async fn graded(catalog: &Catalog) -> Vec<(TableScan, HealthReport)> {
    let fleet = scan_fleet(catalog, &FleetScanOptions::default(), &SystemClock)
        .await
        .unwrap();
    fleet
        .tables
        .iter()
        .map(|s| {
            (
                s.clone(),
                grade(s, &GradeOptions::default(), fleet.scanned_at_ms).unwrap(),
            )
        })
        .collect()
}

async fn plan(catalog: &Catalog) -> (MaintenancePlan, Vec<(TableScan, HealthReport)>) {
    let g = graded(catalog).await;
    let now = g.first().map_or(0, |(s, _)| s.scanned_at_ms);
    let plan = plan_fleet(
        catalog.name(),
        &g,
        &PlanOptions::default(),
        &BTreeMap::new(),
        now,
    )
    .unwrap();
    (plan, g)
}

pub(crate) async fn rows(table: &LoadedTable) -> (usize, String) {
    fingerprint(&crate::common::scan_rows(table).await)
}

async fn state(catalog: &Catalog, plan: &MaintenancePlan) -> BTreeMap<TableId, Option<String>> {
    let mut out = BTreeMap::new();
    for t in &plan.tables {
        let loaded = catalog.load_table(&t.table).await.unwrap();
        out.insert(t.table.clone(), loaded.metadata_location.clone());
    }
    out
}

#[tokio::test]
async fn dry_run_changes_nothing_and_receipts_every_step() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(dir.path()).await;
    let (plan, _) = plan(&lake.catalog).await;
    let planned_steps: usize = plan.tables.iter().map(|t| t.steps.len()).sum();
    assert!(planned_steps >= 5, "the demo lake needs work: {plan:?}");
    let before = state(&lake.catalog, &plan).await;
    let log = JsonLinesLog::new(dir.path().join("receipts.jsonl"));

    let outcome = MaintenanceRun::new(&lake.catalog, &plan)
        .with_receipt_log(log.clone())
        .execute()
        .await
        .unwrap();

    assert!(outcome.dry_run, "a run is a dry run unless asked otherwise");
    assert_eq!(state(&lake.catalog, &plan).await, before, "nothing changed");
    for t in &plan.tables {
        for step in &t.steps {
            let r = outcome
                .receipts
                .iter()
                .find(|r| r.table == t.table && r.operation == Some(step.operation))
                .unwrap_or_else(|| panic!("no receipt for {} {}", t.table, step.operation));
            assert!(
                matches!(r.status, ReceiptStatus::DryRun | ReceiptStatus::Skipped),
                "{r:?}"
            );
            assert_eq!(
                r.plan_fingerprint.as_deref(),
                Some(plan.fingerprint.as_str())
            );
        }
    }
    // The dry run of a compaction says what it would rewrite.
    let compaction = outcome
        .receipts
        .iter()
        .find(|r| r.operation == Some(Operation::RewriteDataFiles))
        .unwrap();
    assert!(compaction.before.unwrap().files > 1, "{compaction:?}");
    // The log holds the same receipts, and reads as Arrow.
    assert_eq!(log.read().unwrap(), outcome.receipts);
    let batch = receipts_batch(&outcome.receipts).unwrap();
    assert_eq!(batch.num_rows(), outcome.receipts.len());
    // A plan changed after review is refused before anything runs.
    let mut tampered = plan.clone();
    tampered.tables.truncate(1);
    let err = MaintenanceRun::new(&lake.catalog, &tampered)
        .execute()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("fingerprint"), "{err}");
}

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one scenario: a broken table, a locked table, the rest maintained"
)]
async fn real_run_improves_grades_keeps_rows_and_isolates_failures() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(dir.path()).await;
    let (plan, graded_before) = plan(&lake.catalog).await;
    let compacts = |t: &&cryo_core::plan::TablePlan| {
        t.steps
            .iter()
            .any(|s| s.operation == Operation::RewriteDataFiles)
    };
    let others: Vec<&TableId> = plan
        .tables
        .iter()
        .filter(|t| !compacts(t) && !t.steps.is_empty())
        .map(|t| &t.table)
        .collect();
    assert!(plan.tables.iter().filter(compacts).count() >= 2, "{plan:?}");
    assert!(others.len() >= 2, "{plan:?}");
    let (broken, locked) = (others[0].clone(), others[1].clone());

    // Break one table: its current manifest list disappears.
    let loaded = lake.catalog.load_table(&broken).await.unwrap();
    let list = loaded
        .metadata
        .current_snapshot()
        .unwrap()
        .manifest_list()
        .to_string();
    std::fs::remove_file(list.strip_prefix("file://").unwrap_or(&list)).unwrap();
    // Another process holds a second table's lock.
    let locks = Arc::new(LocalLocks::new(dir.path().join("locks")));
    let _held = locks
        .try_acquire(lake.catalog.name(), &locked, "another-run", 0)
        .await
        .unwrap()
        .unwrap();

    let mut fingerprints = BTreeMap::new();
    for t in &plan.tables {
        if t.table != broken {
            let loaded = lake.catalog.load_table(&t.table).await.unwrap();
            fingerprints.insert(t.table.clone(), rows(&loaded).await);
        }
    }

    let outcome = MaintenanceRun::new(&lake.catalog, &plan)
        .with_options(MaintenanceOptions {
            dry_run: false,
            actor: "it-test".into(),
            ..MaintenanceOptions::default()
        })
        .with_locks(locks.clone())
        .execute()
        .await
        .unwrap();

    let of =
        |t: &TableId| -> Vec<_> { outcome.receipts.iter().filter(|r| &r.table == t).collect() };
    // The broken table failed and its later steps were skipped; the run went on.
    let broken_receipts = of(&broken);
    assert!(
        broken_receipts
            .iter()
            .any(|r| r.status == ReceiptStatus::Failed),
        "{broken_receipts:?}"
    );
    assert!(
        broken_receipts
            .iter()
            .all(|r| r.status != ReceiptStatus::Succeeded),
        "{broken_receipts:?}"
    );
    // The locked table was deferred, untouched.
    let locked_receipts = of(&locked);
    assert!(!locked_receipts.is_empty());
    for r in &locked_receipts {
        if r.operation.is_some_and(|op| {
            plan.tables
                .iter()
                .any(|t| t.table == locked && t.steps.iter().any(|s| s.operation == op))
        }) {
            assert_eq!(r.status, ReceiptStatus::Deferred, "{r:?}");
            assert!(
                r.reason.as_deref().unwrap().contains("another-run"),
                "{r:?}"
            );
        }
    }
    // Every other table: its compaction succeeded, rows are identical, the grade improved.
    let graded_after = graded(&lake.catalog).await;
    let score = |g: &[(TableScan, HealthReport)], t: &TableId| {
        g.iter()
            .find(|(s, _)| &s.table == t)
            .map(|(_, r)| r.score)
            .unwrap()
    };
    let mut improved = 0;
    for t in &plan.tables {
        if t.table == broken || t.table == locked {
            continue;
        }
        for step in &t.steps {
            let r = of(&t.table)
                .into_iter()
                .find(|r| r.operation == Some(step.operation))
                .unwrap();
            assert!(
                matches!(
                    r.status,
                    ReceiptStatus::Succeeded | ReceiptStatus::Skipped | ReceiptStatus::DryRun
                ),
                "{r:?}"
            );
            if step.operation == Operation::RewriteDataFiles {
                assert_eq!(r.status, ReceiptStatus::Succeeded, "{r:?}");
                assert!(!r.snapshots_after.is_empty(), "{r:?}");
                assert!(r.after.unwrap().files < r.before.unwrap().files, "{r:?}");
            }
        }
        let loaded = lake.catalog.load_table(&t.table).await.unwrap();
        assert_eq!(
            rows(&loaded).await,
            fingerprints[&t.table],
            "{} rows",
            t.table
        );
        if score(&graded_after, &t.table) > score(&graded_before, &t.table) {
            improved += 1;
        }
    }
    assert!(improved >= 1, "no grade improved");
    // The locked table is exactly as it was.
    let locked_now = lake.catalog.load_table(&locked).await.unwrap();
    assert_eq!(rows(&locked_now).await, fingerprints[&locked]);
    // Receipts feed the next plan's cooldowns: the compaction just ran.
    let controls = controls_from_receipts(&outcome.receipts);
    let done = plan
        .tables
        .iter()
        .find(|t| {
            t.table != broken
                && t.table != locked
                && t.steps
                    .iter()
                    .any(|s| s.operation == Operation::RewriteDataFiles)
        })
        .unwrap();
    assert!(
        controls[&done.table]
            .last_runs
            .contains_key(&Operation::RewriteDataFiles)
    );
}

/// `convert_equality_deletes` runs on the native engine: `lake.customers` (CDC upserts, an
/// equality delete file per commit) ends with none, the same rows, and a better grade.
#[tokio::test]
async fn native_run_applies_equality_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(dir.path()).await;
    let (plan, graded_before) = plan(&lake.catalog).await;
    let customers = TableId::parse("lake.customers").unwrap();
    let steps = &plan
        .tables
        .iter()
        .find(|t| t.table == customers)
        .unwrap()
        .steps;
    assert!(
        steps
            .iter()
            .any(|s| s.operation == Operation::ConvertEqualityDeletes),
        "{steps:?}"
    );
    let before = graded_before
        .iter()
        .find(|(s, _)| s.table == customers)
        .unwrap();
    let eq_before = before.0.delete_files.equality.files;
    assert!(eq_before >= 10, "{:?}", before.0.delete_files);
    let loaded = lake.catalog.load_table(&customers).await.unwrap();
    let rows_before = rows(&loaded).await;

    // The dry run says what it would rewrite and changes nothing.
    let dry = MaintenanceRun::new(&lake.catalog, &plan)
        .execute()
        .await
        .unwrap();
    let convert = |receipts: &[cryo_core::receipt::Receipt]| {
        receipts
            .iter()
            .find(|r| {
                r.table == customers && r.operation == Some(Operation::ConvertEqualityDeletes)
            })
            .cloned()
            .unwrap()
    };
    let r = convert(&dry.receipts);
    assert_eq!(r.status, ReceiptStatus::DryRun, "{r:?}");
    assert!(r.before.unwrap().files > 0, "{r:?}");
    assert_eq!(
        lake.catalog
            .load_table(&customers)
            .await
            .unwrap()
            .metadata_location,
        loaded.metadata_location
    );

    let outcome = MaintenanceRun::new(&lake.catalog, &plan)
        .dry_run(false)
        .execute()
        .await
        .unwrap();
    let r = convert(&outcome.receipts);
    assert_eq!(r.status, ReceiptStatus::Succeeded, "{r:?}");
    assert!(!r.snapshots_after.is_empty(), "{r:?}");
    assert!(
        r.details["delete_files_removed"].as_u64().unwrap() >= eq_before,
        "{r:?}"
    );
    let after = graded(&lake.catalog).await;
    let (scan, report) = after.iter().find(|(s, _)| s.table == customers).unwrap();
    assert_eq!(
        scan.delete_files.equality.files, 0,
        "{:?}",
        scan.delete_files
    );
    assert!(
        !report
            .findings
            .iter()
            .any(|f| f.code == "equality_delete_files"),
        "{report:?}"
    );
    assert!(report.score > before.1.score, "{report:?}");
    let loaded = lake.catalog.load_table(&customers).await.unwrap();
    assert_eq!(rows(&loaded).await, rows_before);
}

#[tokio::test]
async fn secrets_never_reach_receipts_errors_or_debug_output() {
    const SECRETS: [&str; 3] = [
        "AKIA-PLANTED-9Q7",
        "s3cr3t-PLANTED-value",
        "tok-PLANTED-1234",
    ];
    let dir = tempfile::tempdir().unwrap();
    let lake = lake(dir.path()).await;
    // The same catalog, configured with credentials (as a team's config would hold).
    let mut props: BTreeMap<String, String> = lake.catalog.config().properties.clone();
    props.insert("s3.access-key-id".into(), SECRETS[0].into());
    props.insert("s3.secret-access-key".into(), SECRETS[1].into());
    props.insert("token".into(), SECRETS[2].into());
    let config = CatalogConfig {
        properties: props,
        ..lake.catalog.config().clone()
    };
    let catalog = Catalog::connect(config.clone()).await.unwrap();
    let (plan, _) = plan(&catalog).await;
    // Break a table so that errors are produced too.
    let broken = &plan.tables[0].table;
    let loaded = catalog.load_table(broken).await.unwrap();
    let list = loaded
        .metadata
        .current_snapshot()
        .unwrap()
        .manifest_list()
        .to_string();
    std::fs::remove_file(list.strip_prefix("file://").unwrap_or(&list)).unwrap();
    let log = JsonLinesLog::new(dir.path().join("receipts.jsonl"));

    let outcome = MaintenanceRun::new(&catalog, &plan)
        .with_receipt_log(log.clone())
        .dry_run(false)
        .execute()
        .await
        .unwrap();
    assert!(outcome.count(ReceiptStatus::Failed) >= 1);
    let err = catalog
        .load_table(&TableId::parse("lake.no_such_table").unwrap())
        .await
        .unwrap_err();
    let texts = [
        std::fs::read_to_string(log.path()).unwrap(),
        serde_json::to_string(&outcome).unwrap(),
        format!("{outcome:?}"),
        format!("{catalog:?}"),
        format!("{config:?}"),
        format!("{err} {err:?}"),
        format!("{plan:?}"),
    ];
    for text in &texts {
        for s in SECRETS {
            assert!(
                !text.contains(s),
                "secret {s} leaked into: {}",
                &text[..text.len().min(400)]
            );
        }
    }
}

/// Every progress report of one stage, as (done, total, table).
type Seen = Arc<std::sync::Mutex<Vec<(&'static str, u64, u64, Option<String>)>>>;

fn recorder() -> (Seen, cryo_core::progress::ProgressSink) {
    let seen: Seen = Arc::default();
    let sink = {
        let seen = Arc::clone(&seen);
        cryo_core::progress::ProgressSink::new(move |p| {
            seen.lock()
                .unwrap()
                .push((p.stage, p.done, p.total, p.table.clone()));
        })
    };
    (seen, sink)
}

/// `done` counts 0, 1, …, total in order for `stage`.
fn counts_up(seen: &Seen, stage: &str, total: u64) {
    let dones: Vec<u64> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.0 == stage)
        .inspect(|s| assert_eq!(s.2, total, "{stage}: {s:?}"))
        .map(|s| s.1)
        .collect();
    assert_eq!(dones, (0..=total).collect::<Vec<_>>(), "{stage}");
}

#[tokio::test]
async fn progress_counts_tables_and_groups() {
    use cryo_core::compact::Compaction;
    use cryo_core::scan::scan_fleet_with_progress;

    let dir = tempfile::tempdir().unwrap();
    let lake = lake(dir.path()).await;
    let cat = &lake.catalog;

    let (seen, sink) = recorder();
    let fleet =
        scan_fleet_with_progress(cat, &FleetScanOptions::default(), &SystemClock, Some(&sink))
            .await
            .unwrap();
    counts_up(&seen, "scan", fleet.tables.len() as u64);
    let mut tables: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|s| s.3.clone())
        .collect();
    let mut expected: Vec<String> = lake
        .manifest
        .tables
        .iter()
        .map(|t| t.identifier.clone())
        .collect();
    tables.sort();
    expected.sort();
    assert_eq!(tables, expected);

    let (plan, _) = plan(cat).await;
    let (seen, sink) = recorder();
    MaintenanceRun::new(cat, &plan)
        .with_progress(sink)
        .execute()
        .await
        .unwrap();
    counts_up(&seen, "run", plan.tables.len() as u64);

    let (seen, sink) = recorder();
    let id = TableId::parse("lake.clickstream").unwrap();
    let out = Compaction::new(cat, id)
        .with_progress(sink)
        .execute()
        .await
        .unwrap();
    assert!(out.committed_groups() > 0);
    assert_eq!(
        seen.lock().unwrap()[0],
        ("plan", 1, 1, Some("lake.clickstream".to_string()))
    );
    counts_up(&seen, "rewrite", out.groups.len() as u64);
}

/// The run is the fleet loop paced one pass: the gate (window, deadline) holds a table back,
/// and what it holds back is deferred to the next run at once, never waited for; tables go one
/// after another, each with all its receipts together, and no admission receipts.
#[tokio::test]
async fn the_gate_defers_to_the_next_run_without_waiting() {
    use cryo_core::clock::Clock;
    use cryo_core::plan::Window;

    let dir = tempfile::tempdir().unwrap();
    let lake = lake(dir.path()).await;
    let (plan, _) = plan(&lake.catalog).await;
    let before = state(&lake.catalog, &plan).await;
    let now = SystemClock.now_ms();
    let hour = u8::try_from((now / 3_600_000).rem_euclid(24)).unwrap();
    // A window that opens in two hours: a run that waited would sleep past the test's limit.
    let closed = Window {
        start_hour: (hour + 2) % 24,
        end_hour: (hour + 3) % 24,
    };
    let cases = [
        (
            MaintenanceOptions {
                window: Some(closed),
                ..MaintenanceOptions::default()
            },
            "outside the off-peak window",
        ),
        (
            MaintenanceOptions {
                deadline_ms: Some(now - 1),
                ..MaintenanceOptions::default()
            },
            "deadline passed",
        ),
    ];
    for (options, why) in cases {
        let run = MaintenanceRun::new(&lake.catalog, &plan)
            .with_options(options)
            .dry_run(false)
            .execute();
        let outcome = tokio::time::timeout(std::time::Duration::from_mins(5), run)
            .await
            .expect("a one-pass run does not wait for the gate")
            .unwrap();
        assert_eq!(state(&lake.catalog, &plan).await, before, "nothing changed");
        assert_eq!(outcome.count(ReceiptStatus::Admitted), 0);
        for t in &plan.tables {
            for step in &t.steps {
                let r = outcome
                    .receipts
                    .iter()
                    .find(|r| r.table == t.table && r.operation == Some(step.operation))
                    .unwrap();
                assert_eq!(r.status, ReceiptStatus::Deferred, "{r:?}");
                assert!(r.reason.as_deref().unwrap().contains(why), "{r:?}");
            }
        }
        // Table after table, in plan order.
        let order: Vec<usize> = outcome
            .receipts
            .iter()
            .filter_map(|r| plan.tables.iter().position(|t| t.table == r.table))
            .collect();
        assert!(order.windows(2).all(|w| w[0] <= w[1]), "{order:?}");
    }
}
