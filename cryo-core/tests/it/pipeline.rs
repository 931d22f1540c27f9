//! scan → grade → plan on tables written by PyIceberg and Spark.

use std::collections::BTreeMap;

use cryo_core::clock::SystemClock;
use cryo_core::grade::{Grade, GradeOptions, grade};
use cryo_core::ops::Operation;
use cryo_core::plan::{PlanOptions, plan_fleet};
use cryo_core::scan::{FleetScanOptions, scan_fleet};
use cryo_core::{Catalog, report};

use crate::common::{fixture_catalog, fixtures};

#[tokio::test]
async fn fixture_fleet_grades_and_plans() {
    let Some(m) = fixtures() else { return };
    let catalog = Catalog::connect(fixture_catalog(&m, "fixtures"))
        .await
        .unwrap();
    let fleet = scan_fleet(&catalog, &FleetScanOptions::default(), &SystemClock)
        .await
        .unwrap();
    let now = fleet.scanned_at_ms;
    let reports: Vec<_> = fleet
        .tables
        .iter()
        .map(|s| grade(s, &GradeOptions::default(), now).unwrap())
        .collect();
    let by = |name: &str| {
        reports
            .iter()
            .find(|r| r.table.to_string() == name)
            .unwrap()
    };
    eprintln!("{}", report::fleet_table(&fleet.tables, &reports));
    for r in &reports {
        eprintln!("{}", report::health_report(r));
    }

    assert_eq!(
        by("pyiceberg.healthy").grade,
        Grade::A,
        "{:?}",
        by("pyiceberg.healthy").findings
    );
    assert!(by("pyiceberg.events").has("small_file_share"));
    assert!(by("pyiceberg.events").has("files_in_old_specs"));
    assert!(by("pyiceberg.unpartitioned").has("mean_file_size"));
    assert!(by("spark.orders_mor").has("position_delete_files"));
    assert!(by("spark.upserts_eq").has("equality_delete_files"));
    assert!(by("spark.legacy_v1").has("format_version"));

    let pairs: Vec<_> = fleet
        .tables
        .iter()
        .cloned()
        .zip(reports.iter().cloned())
        .collect();
    let plan = plan_fleet(
        "fixtures",
        &pairs,
        &PlanOptions::default(),
        &BTreeMap::new(),
        now,
    )
    .unwrap();
    eprintln!("{}", report::plan_text(&plan));
    let steps = |name: &str| -> Vec<Operation> {
        plan.tables
            .iter()
            .find(|t| t.table.to_string() == name)
            .map(|t| t.steps.iter().map(|s| s.operation).collect())
            .unwrap_or_default()
    };
    assert!(steps("pyiceberg.events").contains(&Operation::RewriteDataFiles));
    assert!(steps("spark.upserts_eq").contains(&Operation::ConvertEqualityDeletes));
    assert!(steps("pyiceberg.healthy").is_empty());
    plan.verify().unwrap();
}
