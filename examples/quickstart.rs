//! Cryo's main job on the embedded default: a local demo lake (sqlite catalog + local warehouse,
//! created if absent), scanned, graded, planned and rendered for Trino and Spark.
//!
//! ```text
//! cargo run --release --example quickstart [-- <dir>]     # default dir: ./demo-lake
//! ```
//!
//! Nothing is changed: Cryo only reads metadata here. The plan is written to `<dir>/plan.json`
//! (review it, then hand its fingerprint to the run that executes it).

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
use cryo_core::demo::{DemoOptions, create_demo_lake};
use cryo_core::grade::{GradeOptions, grade};
use cryo_core::plan::{PlanOptions, plan_fleet};
use cryo_core::render::{
    SparkDialect, SparkOptions, TrinoDialect, TrinoOptions, Version, render_plan,
};
use cryo_core::scan::{FleetScanOptions, scan_fleet};
use cryo_core::{Result, report};

/// The engines the rendered SQL targets: a recent Trino and Spark 3.5 with Iceberg 1.10.
const TRINO_VERSION: u32 = 478;

async fn run(dir: PathBuf) -> Result<()> {
    let started = Instant::now();
    let lake = create_demo_lake(&dir, &DemoOptions::default()).await?;
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
    println!("done in {:.2} s", started.elapsed().as_secs_f64());
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
