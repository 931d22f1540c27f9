//! scan → grade → plan on tables written by PyIceberg and Spark.

use std::collections::BTreeMap;

use cryo_core::clock::SystemClock;
use cryo_core::grade::{Grade, GradeOptions, HealthReport, grade};
use cryo_core::ops::Operation;
use cryo_core::plan::{MaintenancePlan, PlanOptions, plan_fleet};
use cryo_core::scan::{FleetScanOptions, scan_fleet};
use cryo_core::{Catalog, report};

use serde_json::Value;

use crate::common::{fixture_catalog, fixtures, fixtures_spark41};

#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn fixture_fleet_grades_and_plans() {
    let m = fixtures();
    let (reports, plan) = scan_grade_plan(&m, "fixtures").await;
    for r in &reports {
        eprintln!("{}", report::health_report(r));
    }
    let by = |name: &str| {
        reports
            .iter()
            .find(|r| r.table.to_string() == name)
            .unwrap()
    };

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

/// The same stages on the tables Spark 4.1 + Iceberg 1.12 wrote (format v3 with deletion vectors
/// and row lineage, and v2): each delete kind gets the finding and the step that removes it.
#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn spark41_fleet_grades_and_plans() {
    let m = fixtures_spark41();
    let (reports, plan) = scan_grade_plan(&m, "fixtures_spark41").await;
    let by = |name: &str| {
        reports
            .iter()
            .find(|r| r.table.to_string() == name)
            .unwrap_or_else(|| panic!("{name} not graded"))
    };
    for name in ["spark41.events_v3", "spark41.events_v2"] {
        let r = by(name);
        assert!(r.has("position_delete_files"), "{name}: {:?}", r.findings);
        assert!(r.has("small_file_share"), "{name}: {:?}", r.findings);
        assert!(r.grade > Grade::A, "{name}: {:?}", r.grade);
    }
    // Deletion vectors and position-delete files weigh the same: one grade for the same decay.
    assert_eq!(by("spark41.events_v3").grade, by("spark41.events_v2").grade);
    for name in ["spark41.upserts_eq_v3", "spark41.upserts_eq_v2"] {
        assert!(by(name).has("equality_delete_files"), "{name}");
    }

    let steps = |name: &str| -> Vec<Operation> {
        plan.tables
            .iter()
            .find(|t| t.table.to_string() == name)
            .map(|t| t.steps.iter().map(|s| s.operation).collect())
            .unwrap_or_default()
    };
    for name in ["spark41.events_v3", "spark41.events_v2"] {
        assert!(steps(name).contains(&Operation::RewriteDataFiles), "{name}");
    }
    for name in ["spark41.upserts_eq_v3", "spark41.upserts_eq_v2"] {
        assert!(
            steps(name).contains(&Operation::ConvertEqualityDeletes),
            "{name}"
        );
    }
    plan.verify().unwrap();
}

/// Scans the fixture catalog `catalog` of `m`, grades every table and plans the fleet with the
/// defaults (no scan errors allowed); prints the fleet table and the plan.
async fn scan_grade_plan(m: &Value, catalog: &str) -> (Vec<HealthReport>, MaintenancePlan) {
    let handle = Catalog::connect(fixture_catalog(m, catalog)).await.unwrap();
    let fleet = scan_fleet(&handle, &FleetScanOptions::default(), &SystemClock)
        .await
        .unwrap();
    assert!(fleet.errors.is_empty(), "{:?}", fleet.errors);
    let now = fleet.scanned_at_ms;
    let reports: Vec<_> = fleet
        .tables
        .iter()
        .map(|s| grade(s, &GradeOptions::default(), now).unwrap())
        .collect();
    eprintln!("{}", report::fleet_table(&fleet.tables, &reports));
    let pairs: Vec<_> = fleet
        .tables
        .iter()
        .cloned()
        .zip(reports.iter().cloned())
        .collect();
    let plan = plan_fleet(
        catalog,
        &pairs,
        &PlanOptions::default(),
        &BTreeMap::new(),
        now,
    )
    .unwrap();
    eprintln!("{}", report::plan_text(&plan));
    (reports, plan)
}
