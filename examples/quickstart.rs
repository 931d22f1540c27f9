//! Cryo's main job on the embedded default: a local demo lake (sqlite catalog + local warehouse,
//! created if absent), scanned, graded, planned and rendered for Trino and Spark.
//!
//! ```text
//! cargo run --release --example quickstart [-- <dir>]     # default dir: ./demo-lake
//! ```
//!
//! Scanning, grading, planning and rendering read metadata only. The plan is made under the
//! demo lake's policy file (`examples/policy.yaml`: which preset each table gets, and why) and
//! written to `<dir>/plan.json`. The last step runs the whole plan on Cryo's native engine: first as a dry
//! run (what would change), then for real under per-table locks, with a receipt for every
//! decision in `<dir>/receipts.jsonl`, and grades the fleet again. The next run rebuilds the
//! decayed lake.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line example reports on the terminal"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use cryo_core::clock::SystemClock;
use cryo_core::demo::{DemoOptions, create_demo_lake};
use cryo_core::exec::MaintenanceRun;
use cryo_core::govern::LocalLocks;
use cryo_core::grade::{Grade, HealthReport, Remedy};
use cryo_core::grade::{GradeOptions, grade};
use cryo_core::plan::MaintenancePlan;
use cryo_core::policy::{AppliedStatus, Policy, advise, apply_advice};
use cryo_core::receipt::{JsonLinesLog, ReceiptStatus};
use cryo_core::render::{
    SparkDialect, SparkOptions, TrinoDialect, TrinoOptions, Version, render_plan,
};
use cryo_core::scan::TableScan;
use cryo_core::scan::{FleetScanOptions, scan_fleet};
use cryo_core::{Catalog, Result, report};

/// The engines the rendered SQL targets: a recent Trino and Spark 3.5 with Iceberg 1.10.
const TRINO_VERSION: u32 = 478;

async fn run(dir: PathBuf) -> Result<()> {
    let started = Instant::now();
    let mut lake = create_demo_lake(&dir, &DemoOptions::default()).await?;
    if !lake.pristine {
        // An earlier run compacted a table: start again from the decayed lake.
        lake = create_demo_lake(
            &dir,
            &DemoOptions {
                force_rebuild: true,
                ..DemoOptions::default()
            },
        )
        .await?;
    }
    println!(
        "{} demo lake at {} ({} tables, catalog `{}`)",
        if lake.built { "built" } else { "reopened" },
        lake.root.display(),
        lake.manifest.tables.len(),
        lake.catalog.name()
    );

    let fleet = scan_fleet(&lake.catalog, &FleetScanOptions::default(), &SystemClock).await?;
    let now = fleet.scanned_at_ms;
    // The demo lake's maintenance policy, kept beside this example (compiled in, so the
    // example runs from any directory).
    let policy = Policy::from_yaml(
        include_str!("policy.yaml"),
        concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/policy.yaml"),
    )?;
    let graded = policy.grade(&fleet.tables)?;
    let reports: Vec<_> = graded.iter().map(|(_, r)| r.clone()).collect();
    println!(
        "scanned {} tables from metadata alone in {} ms\n",
        fleet.tables.len(),
        fleet.duration_ms
    );
    print!("{}", report::fleet_table(&fleet.tables, &reports));
    print!("{}", report::scan_errors(&fleet));
    println!();
    for r in &reports {
        println!("{}", report::health_report(r));
    }

    settings_advice(&lake.catalog, &graded, now).await?;
    // Graded again with the new settings: the plan now rewrites what they apply to.
    let fleet = scan_fleet(&lake.catalog, &FleetScanOptions::default(), &SystemClock).await?;
    let now = fleet.scanned_at_ms;
    let graded = policy.grade(&fleet.tables)?;
    println!();

    let resolved = policy.resolve_fleet(&graded, now);
    println!(
        "policy examples/policy.yaml ({}): {}; {} got the default preset",
        &policy.fingerprint()[..12],
        resolved
            .presets
            .iter()
            .map(|(p, n)| format!("{n} {p}"))
            .collect::<Vec<_>>()
            .join(", "),
        resolved.defaulted
    );
    let plan = policy.plan(lake.catalog.name(), &graded, &BTreeMap::new(), now)?;
    print!("{}", report::plan_text(&plan));
    let plan_path = dir.join("plan.json");
    std::fs::write(&plan_path, plan.to_json()?).map_err(|e| cryo_core::Error::Storage {
        path: plan_path.display().to_string(),
        message: "cannot write the plan".to_string(),
        source: Some(Box::new(e)),
        retryable: false,
    })?;
    println!("plan written to {}\n", plan_path.display());

    let trino = TrinoDialect::new(TrinoOptions::new("iceberg", TRINO_VERSION))?;
    let spark = SparkDialect::new(SparkOptions::new(
        "demo",
        Version {
            major: 3,
            minor: 5,
            patch: 9,
        },
        Version {
            major: 1,
            minor: 10,
            patch: 2,
        },
    ))?;
    for (title, rendered) in [
        (
            format!("Trino {TRINO_VERSION} (catalog `iceberg`)"),
            render_plan(&plan, &trino)?,
        ),
        (
            "Spark 3.5 + Iceberg 1.10 (catalog `demo`)".to_string(),
            render_plan(&plan, &spark)?,
        ),
    ] {
        println!("==== SQL for {title} ====");
        println!("{}", rendered.to_script());
    }
    maintain(&lake.catalog, &dir, &plan, &graded).await?;
    println!("done in {:.2} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// The settings advisor: the property changes the grades recommend, as a change set with a
/// fingerprint. A person reviews it and approves that fingerprint; this example stands in for
/// the reviewer and approves its own advice. Nothing is written without it.
async fn settings_advice(
    catalog: &Catalog,
    graded: &[(TableScan, HealthReport)],
    now: i64,
) -> Result<()> {
    let advice = advise(catalog.name(), graded, now)?;
    println!(
        "==== settings advice {} ({} changes; applied only with its fingerprint) ====",
        &advice.fingerprint[..12],
        advice.change_count()
    );
    for t in &advice.tables {
        for c in &t.changes {
            println!(
                "  {}: {} {} -> {} [{}]",
                t.table,
                c.key,
                c.from.as_deref().unwrap_or("unset"),
                c.to,
                c.finding
            );
        }
    }
    let applied = apply_advice(catalog, &advice, &advice.fingerprint, "quickstart").await?;
    for t in &applied.tables {
        let how = match &t.outcome {
            AppliedStatus::Committed { .. } => "committed".to_string(),
            AppliedStatus::AlreadySet => "already set".to_string(),
            AppliedStatus::Refused { reason } => format!("refused: {reason}"),
            AppliedStatus::Failed { reason } => format!("failed: {reason}"),
        };
        println!("  {}: {how}", t.table);
    }
    Ok(())
}

/// Run the whole plan on the native engine: first as a dry run (what would change), then for
/// real under table locks, with receipts in `receipts.jsonl`; then grade the fleet again.
async fn maintain(
    catalog: &Catalog,
    dir: &Path,
    plan: &MaintenancePlan,
    graded: &[(TableScan, HealthReport)],
) -> Result<()> {
    println!("==== maintenance run, dry run (the default): what would change ====");
    let dry = MaintenanceRun::new(catalog, plan).execute().await?;
    print!("{}", report::receipts_text(&dry.receipts));
    println!();
    println!("==== maintenance run on the native engine ====");
    let log = JsonLinesLog::new(dir.join("receipts.jsonl"));
    let run = MaintenanceRun::new(catalog, plan)
        .dry_run(false)
        .with_locks(Arc::new(LocalLocks::new(dir.join("locks"))))
        .with_receipt_log(log.clone())
        .execute()
        .await?;
    print!("{}", report::receipts_text(&run.receipts));
    println!(
        "{} receipts ({} succeeded, {} dry run, {} skipped, {} deferred, {} failed) appended to {}\n",
        run.receipts.len(),
        run.count(ReceiptStatus::Succeeded),
        run.count(ReceiptStatus::DryRun),
        run.count(ReceiptStatus::Skipped),
        run.count(ReceiptStatus::Deferred),
        run.count(ReceiptStatus::Failed),
        log.path().display()
    );
    let fleet = scan_fleet(catalog, &FleetScanOptions::default(), &SystemClock).await?;
    let mut after = Vec::new();
    for scan in &fleet.tables {
        after.push(grade(scan, &GradeOptions::default(), fleet.scanned_at_ms)?);
    }
    println!("==== the fleet after the run ====");
    print!("{}", report::fleet_table(&fleet.tables, &after));
    println!();
    for (scan, before) in graded {
        if let Some((now, r)) = fleet
            .tables
            .iter()
            .zip(&after)
            .find(|(s, _)| s.table == scan.table)
        {
            println!(
                "{}: grade {} ({}) -> {} ({}); data files {} -> {}, snapshots {} -> {}",
                scan.table,
                before.grade,
                before.score,
                r.grade,
                r.score,
                scan.data_files.count,
                now.data_files.count,
                scan.snapshots.count,
                now.snapshots.count
            );
        }
    }
    // Below B after a native run: what is left, and who can fix it.
    for r in after
        .iter()
        .filter(|r| !matches!(r.grade, Grade::A | Grade::B))
    {
        println!(
            "{} stays at {} ({}): what is left",
            r.table, r.grade, r.score
        );
        for f in &r.findings {
            let who = match &f.remedy {
                Remedy::Operation { .. } => {
                    "the next run (its thresholds, budgets or retention held it back)"
                }
                Remedy::TableProperty { .. } => {
                    "a person: a table property no maintenance sets on its own"
                }
                Remedy::Repartition { .. } => "a person: a change of partitioning",
            };
            println!("  {}: {}; fix: {} ({who})", f.code, f.reason, f.remedy);
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let dir = std::env::args()
        .nth(1)
        .map_or_else(|| PathBuf::from("demo-lake"), PathBuf::from);
    match run(dir).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
