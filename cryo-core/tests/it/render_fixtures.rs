//! The runnable golden case: real planner output for fixture tables written by `PyIceberg` and
//! Spark, rendered for Spark (catalog `fixtures`) and Trino into
//! `golden/render/{spark,trino}/fixtures_<table>.{sql,json}`.
//!
//! `tests/py/test_render_spark.py` runs every Spark statement of these files, in order, on a
//! real local Spark against a fresh copy of the fixtures (regenerated with `make_fixtures.py
//! --out <tmp>`), then reads the tables back with `DuckDB` and `PyIceberg`.
//!
//! Plans come from `plan::plan_fleet` on the scanned fixtures, with three adjustments so the
//! golden is stable and covers every operation Spark runs:
//! - times are rebased to a fixed instant (`NOW`): `older_than` literals do not depend on when
//!   the fixtures were written, and lie before any fresh copy (so Spark's 24-hour orphan check
//!   passes and expiry removes nothing a later read needs);
//! - `spark.orders_mor` gets its position-delete rewrite from a second planning pass limited to
//!   that operation (the full pass covers those partitions by rewriting their data);
//! - `pyiceberg.events` gets a `compute_statistics` step by hand: no fixture's findings call
//!   for statistics, so the planner never plans one.

#![allow(clippy::unwrap_used)] // Reason: a failed unwrap is the test failure.
#![allow(clippy::too_many_lines)] // Reason: each golden case reads best as one plan literal.
use std::collections::BTreeMap;

use cryo_core::clock::FixedClock;
use cryo_core::grade::{GradeOptions, grade};
use cryo_core::ops::Operation;
use cryo_core::ops::Operation::{
    ComputeStatistics, ConvertEqualityDeletes, ExpireSnapshots, RemoveOrphanFiles,
    RewriteDataFiles, RewriteManifests, RewritePositionDeletes,
};
use cryo_core::plan::{
    Chunk, ExpirePolicy, MaintenancePlan, OrphanPolicy, PlanOptions, PlannedStep, RewriteStrategy,
    StepParams, plan_fleet,
};
use cryo_core::render::{SparkDialect, SparkOptions, TrinoDialect, TrinoOptions, Version};
use cryo_core::scan::{ScanOptions, TableScan, scan_table};
use cryo_core::{Catalog, TableId};

use crate::common::{fixture_catalog, fixtures};
use crate::render::{NOW, check_rendered};

const DAY: i64 = 86_400_000;

fn options(strategy: RewriteStrategy, chunked: bool) -> PlanOptions {
    let mut o = PlanOptions {
        strategy,
        expire: ExpirePolicy {
            retention_ms: Some(DAY),
            retain_last: Some(2),
            min_retention_ms: DAY,
        },
        orphans: OrphanPolicy {
            enabled: true,
            retention_ms: 3 * DAY,
            dry_run: true,
        },
        ..PlanOptions::default()
    };
    if chunked {
        // Small budgets force chunks of a few partitions, with predicates of every fixture spec.
        o.small_table_bytes = 0;
        o.chunk_budget_bytes = 1 << 20;
        o.max_partitions_per_chunk = 4;
    }
    o
}

fn plan_one(scan: &TableScan, options: &PlanOptions, now: i64) -> MaintenancePlan {
    let report = grade(scan, &GradeOptions::default(), now).unwrap();
    plan_fleet(
        "fixtures",
        &[(scan.clone(), report)],
        options,
        &BTreeMap::new(),
        now,
    )
    .unwrap()
}

/// Fixed instants, no uuids or snapshot ids: the golden does not change with each fixture run.
fn normalize(plan: &mut MaintenancePlan) {
    plan.created_at_ms = NOW;
    plan.fingerprint =
        "(fixture plan, rebased to a fixed now, without the ids and uuids of one fixture run)"
            .to_string();
    for t in &mut plan.tables {
        t.table_uuid.clear();
        t.base_snapshot_id = None;
        t.base_metadata_location = None;
        for s in &mut t.steps {
            match &mut s.params {
                StepParams::ExpireSnapshots {
                    older_than_ms,
                    retention_ms,
                    ..
                }
                | StepParams::RemoveOrphanFiles {
                    older_than_ms,
                    retention_ms,
                    ..
                } => *older_than_ms = NOW - *retention_ms,
                _ => {}
            }
        }
    }
}

fn ops(plan: &MaintenancePlan) -> Vec<Operation> {
    plan.tables
        .iter()
        .flat_map(|t| t.steps.iter().map(|s| s.operation))
        .collect()
}

#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn render_fixture_plans() {
    let m = fixtures();
    let catalog = Catalog::connect(fixture_catalog(&m, "fixtures"))
        .await
        .unwrap();
    let names = [
        "pyiceberg.events",
        "spark.orders_mor",
        "spark.upserts_eq",
        "pyiceberg.unpartitioned",
    ];
    let mut newest = 0;
    for n in names {
        let s = scan_table(
            &catalog,
            &TableId::parse(n).unwrap(),
            &ScanOptions::default(),
            &FixedClock(0),
        )
        .await
        .unwrap();
        newest = newest.max(s.last_updated_ms);
    }
    // Two days after the newest commit: snapshots are past a one-day retention.
    let now = newest + 2 * DAY;
    let mut scans = BTreeMap::new();
    for n in names {
        let s = scan_table(
            &catalog,
            &TableId::parse(n).unwrap(),
            &ScanOptions::default(),
            &FixedClock(now),
        )
        .await
        .unwrap();
        scans.insert(n, s);
    }

    let mut events = plan_one(
        &scans["pyiceberg.events"],
        &options(RewriteStrategy::BinPack, true),
        now,
    );
    events.tables[0].steps.push(PlannedStep {
        operation: Operation::ComputeStatistics,
        params: StepParams::ComputeStatistics {
            columns: vec!["event_id".into(), "category".into()],
        },
        chunks: vec![Chunk {
            index: 0,
            whole_table: true,
            partitions: vec![],
            input_files: 0,
            input_bytes: 0,
            expected_output_files: 0,
        }],
        because: vec!["golden: added by hand, no fixture's findings call for statistics".into()],
        saving_usd_month: 0.0,
    });
    events.tables[0].steps.sort_by_key(|s| s.operation);

    let zorder = RewriteStrategy::ZOrder {
        columns: vec!["customer_id".into(), "order_id".into()],
    };
    let mut orders = plan_one(
        &scans["spark.orders_mor"],
        &options(zorder.clone(), true),
        now,
    );
    let positions_only = PlanOptions {
        operations: Some(vec![Operation::RewritePositionDeletes]),
        ..options(zorder, true)
    };
    let positions = plan_one(&scans["spark.orders_mor"], &positions_only, now);
    orders.tables[0]
        .steps
        .extend(positions.tables[0].steps.iter().cloned());
    orders.tables[0].steps.sort_by_key(|s| s.operation);

    let upserts = plan_one(
        &scans["spark.upserts_eq"],
        &options(RewriteStrategy::BinPack, false),
        now,
    );
    let sorted = RewriteStrategy::Sort {
        columns: vec!["k DESC NULLS LAST".into(), "id".into()],
    };
    let unpartitioned = plan_one(
        &scans["pyiceberg.unpartitioned"],
        &options(sorted, false),
        now,
    );

    // The planner's choices this case relies on.
    assert_eq!(
        ops(&events),
        vec![
            RewriteDataFiles,
            ComputeStatistics,
            RewriteManifests,
            ExpireSnapshots,
            RemoveOrphanFiles
        ]
    );
    assert_eq!(
        ops(&orders),
        vec![
            RewritePositionDeletes,
            RewriteDataFiles,
            RewriteManifests,
            ExpireSnapshots,
            RemoveOrphanFiles
        ]
    );
    assert!(ops(&upserts).starts_with(&[ConvertEqualityDeletes]));
    assert!(ops(&unpartitioned).contains(&RewriteDataFiles));
    assert!(
        events.tables[0].steps[0]
            .chunks
            .iter()
            .all(|c| !c.whole_table),
        "events is chunked"
    );

    let spark = SparkDialect::new(SparkOptions::new(
        "fixtures",
        Version::new(3, 5, 9),
        Version::new(1, 10, 2),
    ))
    .unwrap();
    // The fixtures' own catalog name on a Trino with lowered floors (the plans keep 1 and 3 days).
    let trino = TrinoDialect::new(TrinoOptions {
        expire_snapshots_min_retention_ms: DAY,
        remove_orphan_files_min_retention_ms: DAY,
        ..TrinoOptions::new("fixtures", 480)
    })
    .unwrap();
    for (case, mut plan) in [
        ("fixtures_events", events),
        ("fixtures_orders_mor", orders),
        ("fixtures_upserts_eq", upserts),
        ("fixtures_unpartitioned", unpartitioned),
    ] {
        normalize(&mut plan);
        let s = check_rendered("spark", case, &plan, &spark);
        let t = check_rendered("trino", case, &plan, &trino);
        // Spark runs every planned step of these fixtures; nothing is skipped.
        assert_eq!(
            s.skipped().count(),
            0,
            "{case}: {:?}",
            s.skipped().collect::<Vec<_>>()
        );
        let planned_chunks: usize = plan.tables[0].steps.iter().map(|st| st.chunks.len()).sum();
        assert_eq!(
            s.statements().count(),
            planned_chunks,
            "{case}: one Spark statement per chunk"
        );
        assert!(
            s.statements()
                .all(|q| q.starts_with("CALL `fixtures`.system."))
        );
        // Trino: what it cannot run (dry-run orphans, position deletes, z-order, sort) is a skip.
        assert!(
            t.statements()
                .all(|q| q.starts_with("ALTER TABLE \"fixtures\".")
                    || q.starts_with("ANALYZE \"fixtures\"."))
        );
        assert!(
            t.skipped()
                .any(|(_, sk)| sk.operation == RemoveOrphanFiles && sk.reason.contains("dry run")),
            "{case}"
        );
    }
}
