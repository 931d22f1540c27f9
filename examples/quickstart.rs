//! Cryo's main job on the embedded default: a local demo lake (sqlite catalog + local warehouse,
//! created if absent), scanned, graded, planned and rendered for Trino and Spark.
//!
//! ```text
//! cargo run --release --example quickstart [-- <dir>]     # default dir: ./demo-lake
//! ```
//!
//! Scanning, grading, planning and rendering read metadata only. The plan is written to
//! `<dir>/plan.json`. The last step runs the plan's compaction of the worst table on Cryo's native
//! engine (a `replace` commit any Iceberg engine reads) and grades it again; the next run rebuilds
//! the decayed lake.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line example reports on the terminal"
)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use cryo_core::clock::SystemClock;
use cryo_core::compact::{CompactOptions, Compaction};
use cryo_core::demo::{DemoOptions, create_demo_lake};
use cryo_core::grade::HealthReport;
use cryo_core::grade::{GradeOptions, grade};
use cryo_core::ops::Operation;
use cryo_core::plan::MaintenancePlan;
use cryo_core::plan::{PlanOptions, plan_fleet};
use cryo_core::render::{
    SparkDialect, SparkOptions, TrinoDialect, TrinoOptions, Version, render_plan,
};
use cryo_core::scan::{FleetScanOptions, scan_fleet};
use cryo_core::scan::{ScanOptions, TableScan, scan_table};
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
    let mut graded = Vec::new();
    for scan in &fleet.tables {
        let report = grade(scan, &GradeOptions::default(), now)?;
        graded.push((scan.clone(), report));
    }
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

    let plan = plan_fleet(
        lake.catalog.name(),
        &graded,
        &PlanOptions::default(),
        &BTreeMap::new(),
        now,
    )?;
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
    compact_worst(&lake.catalog, &plan, &graded).await?;
    println!("done in {:.2} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Run the plan's compaction of the worst table on the native engine and show its grade move.
async fn compact_worst(
    catalog: &Catalog,
    plan: &MaintenancePlan,
    graded: &[(TableScan, HealthReport)],
) -> Result<()> {
    let Some((table, step)) = plan.tables.iter().find_map(|t| {
        t.steps
            .iter()
            .find(|s| s.operation == Operation::RewriteDataFiles)
            .map(|s| (t, s))
    }) else {
        return Ok(());
    };
    let before = graded
        .iter()
        .find(|(s, _)| s.table == table.table)
        .map(|(_, r)| r.clone());
    println!(
        "==== native compaction of {} (the worst table) ====",
        table.table
    );
    let mut outcome = None;
    for chunk in &step.chunks {
        let run = Compaction::new(catalog, table.table.clone())
            .with_options(CompactOptions::from_step(step, chunk)?)
            .execute()
            .await?;
        println!(
            "chunk {}: {} groups committed ({} conflicted, {} failed), {} data files / {} -> {} files / {}, {} deleted rows applied, {} delete files removed, snapshots {:?}, {} ms{}",
            chunk.index,
            run.committed_groups(),
            run.conflicted_groups(),
            run.failed_groups(),
            run.files_in(),
            report::bytes(run.bytes_in()),
            run.files_out(),
            report::bytes(run.bytes_out()),
            run.rows_deleted(),
            run.delete_files_removed(),
            run.snapshot_ids,
            run.duration_ms,
            if run.codec_defaulted {
                format!(
                    " (the table sets no codec: wrote {})",
                    run.codec.clone().unwrap_or_default()
                )
            } else {
                String::new()
            },
        );
        outcome = Some(run);
    }
    if outcome.is_some() {
        let scan = scan_table(catalog, &table.table, &ScanOptions::default(), &SystemClock).await?;
        let after = grade(&scan, &GradeOptions::default(), scan.scanned_at_ms)?;
        if let Some(before) = before {
            println!(
                "{}: grade {} ({}) -> {} ({}); data files {} -> {}",
                table.table,
                before.grade,
                before.score,
                after.grade,
                after.score,
                graded
                    .iter()
                    .find(|(s, _)| s.table == table.table)
                    .map_or(0, |(s, _)| s.data_files.count),
                scan.data_files.count
            );
        }
        println!("{}", report::health_report(&after));
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
