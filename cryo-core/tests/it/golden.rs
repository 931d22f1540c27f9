//! Golden files: grading docs, and grade reports and plans for the fixture tables.
//! `CRYO_BLESS=1` rewrites them; otherwise a mismatch fails with a diff.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use cryo_core::Catalog;
use cryo_core::clock::FixedClock;
use cryo_core::grade::{GradeOptions, checks_markdown, grade};
use cryo_core::plan::{PlanOptions, StepParams, plan_fleet};
use cryo_core::scan::{FleetScanOptions, scan_fleet};
use serde_json::{Value, json};

use crate::common::{fixture_catalog, fixtures, repo_root};

/// Compare `actual` with the golden file at `path` (relative to the repo root), or rewrite it.
pub fn check_golden(path: &str, actual: &str) {
    let file = repo_root().join(path);
    if std::env::var("CRYO_BLESS").as_deref() == Ok("1") {
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&file)
        .unwrap_or_else(|_| panic!("{path} is missing; run with CRYO_BLESS=1 to create it"));
    if expected != actual {
        let mut diff = String::new();
        for (i, (e, a)) in expected.lines().zip(actual.lines()).enumerate() {
            if e != a {
                let _ = writeln!(diff, "line {}:\n  - {e}\n  + {a}", i + 1);
            }
        }
        let (el, al) = (expected.lines().count(), actual.lines().count());
        if el != al {
            let _ = writeln!(diff, "{el} lines expected, {al} actual");
        }
        panic!("{path} differs (CRYO_BLESS=1 to accept):\n{diff}");
    }
}

#[test]
fn grading_docs_match_the_checks() {
    let doc = format!(
        "# Grading checks\n\n<!-- generated from cryo-core/src/grade/checks.rs by the `golden` tests; CRYO_BLESS=1 regenerates -->\n\n\
Every table starts at 100. A WARN costs 8 points, a CRIT 20. Bands: A >= 90, B >= 75, C >= 60, D >= 40, F below.\n\
Count limits are multiplied by the size factor: 1 up to 1 GiB of live data, then 1 + log2(GiB).\n\n{}",
        checks_markdown()
    );
    check_golden("docs/grading.md", &doc);
}

/// Keep what is stable across fixture regenerations: no ids, uuids, paths or wall-clock times.
fn normalize_step(params: &StepParams, now: i64) -> Value {
    let mut v = serde_json::to_value(params).unwrap();
    if let StepParams::ExpireSnapshots { older_than_ms, .. }
    | StepParams::RemoveOrphanFiles { older_than_ms, .. } = params
    {
        v["older_than_ms"] = json!(format!("now-{}ms", now - older_than_ms));
    }
    v
}

#[tokio::test]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn fixture_reports_and_plans() {
    let m = fixtures();
    let catalog = Catalog::connect(fixture_catalog(&m, "fixtures"))
        .await
        .unwrap();
    let probe = scan_fleet(&catalog, &FleetScanOptions::default(), &FixedClock(0))
        .await
        .unwrap();
    // "Now" is one hour after the newest commit of the fleet: ages are stable across regenerations.
    let now = probe
        .tables
        .iter()
        .map(|t| t.last_updated_ms)
        .max()
        .unwrap()
        + 3_600_000;
    let fleet = scan_fleet(&catalog, &FleetScanOptions::default(), &FixedClock(now))
        .await
        .unwrap();
    let mut pairs = Vec::new();
    let mut reports = BTreeMap::new();
    for scan in &fleet.tables {
        let r = grade(scan, &GradeOptions::default(), now).unwrap();
        reports.insert(
            scan.table.to_string(),
            json!({
                "grade": r.grade.to_string(),
                "score": r.score,
                "findings": r.findings.iter().map(|f| json!({
                    "code": f.code, "severity": f.severity, "points": f.points,
                    "measured": (f.measured * 100.0).round() / 100.0,
                    "threshold": f.threshold, "unit": f.unit,
                    "remedy": f.remedy.to_string(),
                })).collect::<Vec<_>>(),
                "passed": r.passed,
                "operations": r.operations(),
            }),
        );
        pairs.push((scan.clone(), r));
    }
    check_golden(
        "golden/grades/fixtures.json",
        &(serde_json::to_string_pretty(&reports).unwrap() + "\n"),
    );

    for (name, options) in [
        ("fixtures", PlanOptions::default()),
        // Small budgets force partition chunks, so predicates of every fixture spec show up.
        (
            "fixtures_chunked",
            PlanOptions {
                small_table_bytes: 0,
                chunk_budget_bytes: 64 << 10,
                max_partitions_per_chunk: 4,
                ..PlanOptions::default()
            },
        ),
    ] {
        check_plan(name, &pairs, &options, now);
    }
}

fn check_plan(
    name: &str,
    pairs: &[(cryo_core::scan::TableScan, cryo_core::grade::HealthReport)],
    options: &PlanOptions,
    now: i64,
) {
    let plan = plan_fleet("fixtures", pairs, options, &BTreeMap::new(), now).unwrap();
    let tables: Vec<Value> = plan
        .tables
        .iter()
        .map(|t| {
            json!({
                "table": t.table.to_string(),
                "grade": t.grade.to_string(),
                "steps": t.steps.iter().map(|s| json!({
                    "operation": s.operation,
                    "because": s.because,
                    "params": normalize_step(&s.params, now),
                    "chunks": s.chunks.iter().map(|c| json!({
                        "whole_table": c.whole_table,
                        "input_files": c.input_files,
                        "partitions": c.partitions.iter().map(|p| json!({
                            "path": p.path, "files": p.files, "predicate": p.predicate,
                        })).collect::<Vec<_>>(),
                    })).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
                "skipped": t.skipped,
            })
        })
        .collect();
    let skipped: Vec<Value> = plan
        .skipped_tables
        .iter()
        .map(|s| json!({"table": s.table.to_string(), "reason": s.reason}))
        .collect();
    check_golden(
        &format!("golden/plans/{name}.json"),
        &(serde_json::to_string_pretty(&json!({"tables": tables, "skipped_tables": skipped}))
            .unwrap()
            + "\n"),
    );
}
