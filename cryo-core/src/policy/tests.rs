use std::collections::BTreeMap;

use super::*;
use crate::catalog::TableId;
use crate::clock::FixedClock;
use crate::demo::{DemoOptions, create_demo_lake};
use crate::error::Error;
use crate::grade::HealthReport;
use crate::ops::Operation;
use crate::plan::TableControl;
use crate::scan::{FleetScanOptions, TableScan, scan_fleet};

const HOUR: i64 = 3_600_000;

/// The demo lake's five tables, scanned and graded (with the default prices).
async fn demo() -> (tempfile::TempDir, Vec<(TableScan, HealthReport)>, i64) {
    let dir = tempfile::tempdir().unwrap();
    let lake = create_demo_lake(dir.path(), &DemoOptions::default())
        .await
        .unwrap();
    let now = 1_800_000_000_000; // 2027-01-15T08:00:00Z
    let fleet = scan_fleet(
        &lake.catalog,
        &FleetScanOptions::default(),
        &FixedClock(now),
    )
    .await
    .unwrap();
    let graded = Policy::from_yaml("", "empty.yaml")
        .unwrap()
        .grade(&fleet.tables)
        .unwrap();
    (dir, graded, now)
}

fn id(s: &str) -> TableId {
    TableId::parse(s).unwrap()
}

fn problems(text: &str) -> Vec<PolicyProblem> {
    match Policy::from_yaml(text, "p.yaml") {
        Err(Error::Policy { problems }) => problems,
        other => panic!("expected policy problems, got {other:?}"),
    }
}

#[tokio::test]
async fn override_beats_rules_first_rule_wins_and_the_rest_default() {
    let (_dir, graded, now) = demo().await;
    let policy = Policy::from_yaml(
        r#"
presets:
  hot: {every: 1h, destination: native}
  big: {every: 7d, destination: spark}
  v1: {destination: trino}
rules:
  - {name: clicks, preset: hot, match: {name: "click*"}}
  - {name: everything-in-lake, preset: big, match: {namespace: lake, min_files: 1}}
  - {name: never-reached, preset: hot, match: {name: "click*"}}
tables:
  lake.metrics_v1: {preset: v1}
"#,
        "p.yaml",
    )
    .unwrap();
    let fleet = policy.resolve_fleet(&graded, now);
    let by: BTreeMap<String, &ResolvedTable> = fleet
        .tables
        .iter()
        .map(|t| (t.table.to_string(), t))
        .collect();
    let clicks = by["lake.clickstream"];
    assert_eq!(clicks.preset, "hot");
    assert_eq!(
        clicks.assignment,
        Assignment::Rule {
            index: 0,
            name: "clicks".into()
        }
    );
    assert_eq!(by["lake.metrics_v1"].assignment, Assignment::Override);
    assert_eq!(by["lake.metrics_v1"].destination, DestinationKind::Trino);
    assert_eq!(by["lake.orders"].preset, "big");
    assert_eq!(by["lake.orders"].destination, DestinationKind::Spark);
    // Every table has files: nothing is left to the default.
    assert_eq!(fleet.defaulted, 0);
    assert_eq!(fleet.presets["big"], 3);
    assert_eq!(fleet.policy_fingerprint, policy.fingerprint());
}

#[tokio::test]
async fn every_condition_selects_on_the_stored_scan() {
    let (_dir, graded, now) = demo().await;
    let matching = |select: &str| -> Vec<String> {
        let text =
            format!("presets: {{p: {{}}}}\nrules:\n  - {{name: r, preset: p, match: {select}}}\n");
        let policy = Policy::from_yaml(&text, "p.yaml").unwrap();
        let mut out: Vec<String> = graded
            .iter()
            .filter(|(s, r)| {
                matches!(
                    policy.resolve(s, r, now).assignment,
                    Assignment::Rule { .. }
                )
            })
            .map(|(s, _)| s.table.name.clone())
            .collect();
        out.sort();
        out
    };
    let all = graded.len();
    assert_eq!(
        matching("{}").len(),
        all,
        "an empty match takes every table"
    );
    assert_eq!(matching("{table: lake.orders}"), ["orders"]);
    assert_eq!(matching("{namespace: nope}"), Vec::<String>::new());
    assert_eq!(matching("{format_versions: [1]}"), ["metrics_v1"]);
    let small =
        |t: &TableScan| t.data_files.small_count as f64 / (t.data_files.count.max(1)) as f64;
    let many_small: Vec<String> = {
        let mut v: Vec<String> = graded
            .iter()
            .filter(|(s, _)| small(s) >= 0.5)
            .map(|(s, _)| s.table.name.clone())
            .collect();
        v.sort();
        v
    };
    assert!(!many_small.is_empty() && many_small.len() < all);
    assert_eq!(matching("{min_small_file_ratio: 0.5}"), many_small);
    let biggest = graded
        .iter()
        .map(|(s, _)| s.data_files.bytes)
        .max()
        .unwrap();
    assert_eq!(matching(&format!("{{min_bytes: {biggest}}}")).len(), 1);
    assert_eq!(
        matching(&format!("{{max_bytes: {}}}", biggest - 1)).len(),
        all - 1
    );
    let most_files = graded
        .iter()
        .map(|(s, _)| s.data_files.count)
        .max()
        .unwrap();
    assert_eq!(matching(&format!("{{min_files: {most_files}}}")).len(), 1);
    let healthy = matching("{grades: [A]}");
    assert!(healthy.contains(&"healthy".to_string()), "{healthy:?}");
    let with_eq = matching("{findings: [equality_delete_files]}");
    assert_eq!(with_eq, ["customers"]);
    let (scan, _) = graded
        .iter()
        .find(|(s, _)| s.table.name == "orders")
        .unwrap();
    let (k, v) = scan
        .properties
        .iter()
        .next()
        .expect("orders has properties");
    assert!(
        matching(&format!("{{properties: {{\"{k}\": \"{v}\"}}}}")).contains(&"orders".to_string())
    );
    assert!(
        matching(&format!("{{properties: {{\"{k}\": \"*\"}}}}")).contains(&"orders".to_string())
    );
    assert!(
        !matching(&format!("{{properties: {{\"{k}\": \"{v}-not\"}}}}"))
            .contains(&"orders".to_string())
    );
}

#[tokio::test]
async fn a_plan_under_the_policy_records_it_and_follows_presets_pauses_and_cadence() {
    let (_dir, graded, now) = demo().await;
    let text = r#"
presets:
  deletes-only: {operations: [rewrite_position_deletes], every: 1d}
rules:
  - {name: orders, preset: deletes-only, match: {table: lake.orders}}
pauses:
  - {tables: "lake.click*", reason: "backfill running", until: 2027-02-01}
  - {tables: "lake.customers", reason: "over", until: 2027-01-01}
"#;
    let policy = Policy::from_yaml(text, "p.yaml").unwrap();
    let plan = policy.plan("demo", &graded, &BTreeMap::new(), now).unwrap();
    assert_eq!(plan.policy.as_deref(), Some(policy.fingerprint()));
    assert_eq!(plan.fingerprint, plan.compute_fingerprint().unwrap());
    let orders = plan
        .tables
        .iter()
        .find(|t| t.table == id("lake.orders"))
        .unwrap();
    let ops: Vec<Operation> = orders.steps.iter().map(|s| s.operation).collect();
    assert_eq!(ops, [Operation::RewritePositionDeletes]);
    let p = orders.policy.as_ref().unwrap();
    assert_eq!(
        (p.preset.as_str(), p.destination.as_str()),
        ("deletes-only", "native")
    );
    assert!(p.assignment.contains("rule `orders`"), "{}", p.assignment);
    let clicks = plan
        .skipped_tables
        .iter()
        .find(|t| t.table == id("lake.clickstream"))
        .expect("paused");
    assert!(
        clicks.reason.contains("backfill running"),
        "{}",
        clicks.reason
    );
    assert!(clicks.reason.contains("2027-02-01"), "{}", clicks.reason);
    // A pause that has ended holds nothing back.
    assert!(plan.tables.iter().any(|t| t.table == id("lake.customers")));

    // Ran an hour ago: the daily cadence holds it back, and explain says until when.
    let mut controls = BTreeMap::new();
    controls.insert(
        id("lake.orders"),
        TableControl {
            last_runs: [(Operation::RewritePositionDeletes, now - HOUR)].into(),
            ..TableControl::default()
        },
    );
    let plan = policy.plan("demo", &graded, &controls, now).unwrap();
    let orders = plan.tables.iter().find(|t| t.table == id("lake.orders"));
    assert!(orders.is_none_or(|t| t.steps.is_empty()), "{orders:?}");
    let explained = policy.explain("demo", &graded, &controls, now).unwrap();
    let e = explained
        .iter()
        .find(|e| e.resolved.table == id("lake.orders"))
        .unwrap();
    assert_eq!(e.next.len(), 1);
    let next = &e.next[0];
    assert!(!next.planned);
    assert_eq!(next.at_ms, now - HOUR + 24 * HOUR);
    assert!(next.reason.contains("cadence 1d"), "{}", next.reason);
    let clicks = explained
        .iter()
        .find(|e| e.resolved.table == id("lake.clickstream"))
        .unwrap();
    let until = Instant::parse("2027-02-01").unwrap().0;
    assert!(
        clicks.next.iter().all(|n| !n.planned && n.at_ms >= until),
        "{clicks:?}"
    );
}

#[tokio::test]
async fn a_window_defers_to_its_opening() {
    let (_dir, graded, now) = demo().await;
    // `now` is 08:00 UTC; the window opens at 22:00.
    let policy = Policy::from_yaml(
        "windows: {night: {start_hour: 22, end_hour: 4}}\npresets: {default: {window: night}}\n",
        "p.yaml",
    )
    .unwrap();
    let plan = policy.plan("demo", &graded, &BTreeMap::new(), now).unwrap();
    assert!(plan.tables.iter().all(|t| t.steps.is_empty()));
    let explained = policy
        .explain("demo", &graded, &BTreeMap::new(), now)
        .unwrap();
    for e in &explained {
        for n in &e.next {
            assert_eq!(n.at_ms, now + 14 * HOUR, "{n:?}");
        }
    }
}

#[test]
fn the_fingerprint_is_of_the_policy_not_its_spelling() {
    let a = Policy::from_yaml(
        "presets:\n  hot: {every: 60m, options: {chunk_budget_bytes: 1024}}\n  cold: {every: 7d}\nbudgets: {chunk: 1GiB}\n",
        "a.yaml",
    )
    .unwrap();
    let b = Policy::from_yaml(
        "budgets:\n  chunk: 1073741824\npresets:\n  cold: {every: 1w}\n  hot:\n    options: {chunk_budget_bytes: 1024}\n    every: 1h\n",
        "b.yaml",
    )
    .unwrap();
    assert_eq!(a.fingerprint(), b.fingerprint());
    let c = Policy::from_yaml(
        "presets:\n  hot: {every: 2h, options: {chunk_budget_bytes: 1024}}\n  cold: {every: 7d}\nbudgets: {chunk: 1GiB}\n",
        "c.yaml",
    )
    .unwrap();
    assert_ne!(a.fingerprint(), c.fingerprint());

    // Split over a directory: the same policy.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("10-presets.yaml"),
        "presets:\n  hot: {every: 1h, options: {chunk_budget_bytes: 1024}}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("20-more.yml"),
        "presets:\n  cold: {every: 7d}\nbudgets: {chunk: 1GiB}\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("README.md"), "not a policy").unwrap();
    let d = Policy::load(dir.path()).unwrap();
    assert_eq!(d.fingerprint(), a.fingerprint());
    assert_eq!(d.sources().len(), 2);
    // The cap holds over the preset's own budget.
    assert_eq!(a.presets()["cold"].options.chunk_budget_bytes, 1 << 30);
    assert_eq!(a.presets()["hot"].options.chunk_budget_bytes, 1024);
    assert_eq!(
        a.presets()["hot"].options.cooldowns_ms[&Operation::ExpireSnapshots],
        HOUR
    );
}

#[test]
fn every_problem_is_reported_with_file_line_and_field() {
    let got = problems(
        r#"version: 1
default_preset: missing
presets:
  hot:
    every: 1h
    window: nightly
    options:
      min_input_file: 3
      operations: [expire_snapshots]
      deleted_row_ratio: 2.0
rules:
  - name: a
    preset: hot
    match: {min_files: 10, max_files: 5, findings: [small_filez], format_versions: [4]}
  - name: a
    preset: lukewarm
tables:
  lake.orders: {preset: nope}
pauses:
  - {tables: "lake.*", reason: "migration"}
  - {tables: "lake.orders", reason: "audit", until: 2027-01-01}
  - {tables: "raw.*", reason: ""}
prices: {storage_usd_per_gb: 0.02}
"#,
    );
    let at = |field: &str| -> &PolicyProblem {
        got.iter()
            .find(|p| p.field == field)
            .unwrap_or_else(|| panic!("no problem at {field}: {got:#?}"))
    };
    assert_eq!(at("default_preset").line, 2);
    assert_eq!(at("presets.hot.window").line, 6);
    let unknown = at("presets.hot.options.min_input_file");
    assert_eq!(unknown.line, 8);
    assert!(unknown.message.contains("unknown option"), "{unknown}");
    assert_eq!(at("presets.hot.options.operations").line, 9);
    assert_eq!(at("rules[0].match.min_files").line, 14);
    assert_eq!(at("rules[0].match.findings[0]").line, 14);
    assert_eq!(at("rules[0].match.format_versions[0]").line, 14);
    assert_eq!(at("rules[1].name").line, 15);
    assert_eq!(at("rules[1].preset").line, 16);
    assert_eq!(at("tables.lake.orders.preset").line, 18);
    let overlap = at("pauses[1].tables");
    assert_eq!(overlap.line, 21);
    assert!(overlap.message.contains("overlaps pauses[0]"), "{overlap}");
    assert_eq!(at("pauses[2].reason").line, 22);
    assert_eq!(at("prices.storage_usd_per_gb").line, 23);
    assert!(
        got.iter().all(|p| p.file == "p.yaml" && p.column > 0),
        "{got:#?}"
    );
    // The error shows them all.
    let e = Policy::from_yaml(
        "presets: {a: {every: 0s}}\nrules: [{name: r, preset: b}]\n",
        "x.yaml",
    )
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("2 problems") && text.contains("x.yaml:1:"),
        "{text}"
    );
    assert_eq!(e.code(), "policy");
}

#[test]
fn an_invalid_option_value_names_its_field() {
    let got = problems("presets:\n  hot:\n    options:\n      min_input_files: many\n");
    assert_eq!(got.len(), 1, "{got:#?}");
    assert_eq!(got[0].field, "presets.hot.options.min_input_files");
    assert_eq!(got[0].line, 4);
    let got = problems("presets:\n  hot:\n    options:\n      min_input_files: 0\n");
    assert_eq!(got[0].field, "presets.hot.options");
    assert!(got[0].message.contains("at least 1"), "{got:#?}");
    let got = problems("presets:\n  hot:\n    options:\n      expire: {retain: 3}\n");
    assert_eq!(got[0].field, "presets.hot.options.expire.retain");
}

#[test]
fn files_of_a_directory_conflict_by_name() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.yaml"),
        "presets:\n  hot: {every: 1h}\nbudgets: {fleet: 1TiB}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("b.yaml"),
        "\npresets:\n  hot: {every: 2h}\nbudgets: {fleet: 2TiB}\nversion: 2\n",
    )
    .unwrap();
    let Err(Error::Policy { problems }) = Policy::load(dir.path()) else {
        panic!("a preset defined twice must be refused");
    };
    let b = dir.path().join("b.yaml").display().to_string();
    assert!(problems.iter().all(|p| p.file == b), "{problems:#?}");
    let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(
        fields,
        ["version", "budgets", "presets.hot"],
        "{problems:#?}"
    );
    assert_eq!(problems[2].line, 3);
    assert!(
        problems[2].message.contains("also defined in"),
        "{problems:#?}"
    );
    // An empty directory or a missing file is a configuration error, not a panic.
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(
        Policy::load(empty.path()),
        Err(Error::Config { .. })
    ));
    assert!(matches!(
        Policy::load(empty.path().join("none.yaml")),
        Err(Error::Config { .. })
    ));
}

#[tokio::test]
async fn an_override_without_a_preset_keeps_the_rules_choice_and_sets_options() {
    let (_dir, graded, now) = demo().await;
    let policy = Policy::from_yaml(
        "presets: {hot: {every: 1h}}\nrules: [{name: all, preset: hot}]\ntables:\n  lake.orders: {options: {min_input_files: 50}}\n",
        "p.yaml",
    )
    .unwrap();
    let (scan, report) = graded
        .iter()
        .find(|(s, _)| s.table == id("lake.orders"))
        .unwrap();
    let r = policy.resolve(scan, report, now);
    assert_eq!(r.preset, "hot");
    assert!(matches!(r.assignment, Assignment::Rule { .. }));
    assert!(r.options_override);
    let options = policy.plan_options(&r);
    assert_eq!(options.min_input_files, 50);
    assert_eq!(options.cooldowns_ms[&Operation::RewriteDataFiles], HOUR);
}

fn receipt(
    at: i64,
    table: &str,
    op: Operation,
    status: crate::receipt::ReceiptStatus,
) -> crate::receipt::Receipt {
    let mut r =
        crate::receipt::Receipt::new(at, "demo", id(table), Some(op), "native", status, "me");
    if status == crate::receipt::ReceiptStatus::Failed {
        r.reason = Some(format!("failure at {at}"));
    }
    r
}

#[tokio::test]
async fn due_follows_cadence_windows_pauses_and_backs_off_after_failures() {
    use crate::receipt::ReceiptStatus::{Failed, Succeeded};
    let (_dir, graded, now) = demo().await;
    let policy = Policy::from_yaml(
        r#"
presets:
  hourly: {operations: [rewrite_data_files, expire_snapshots], every: 1h}
  nightly: {window: {start_hour: 22, end_hour: 4}}
rules:
  - {name: orders, preset: hourly, match: {table: lake.orders}}
  - {name: rest, preset: nightly}
pauses:
  - {tables: lake.healthy, reason: "owned elsewhere"}
backoff: {after_failures: 3, delay: 1h, max_delay: 3h}
"#,
        "p.yaml",
    )
    .unwrap();
    let orders = id("lake.orders");
    let due_ops = |receipts: &[crate::receipt::Receipt]| {
        let due = policy.due(&graded, receipts, now);
        let ops = due
            .tables
            .iter()
            .find(|t| t.table == orders)
            .map(|t| t.operations.clone())
            .unwrap_or_default();
        (due, ops)
    };
    // Nothing ran yet: both operations; the nightly tables wait for 22:00 (now is 08:00); the
    // paused one is listed with its reason.
    let (due, ops) = due_ops(&[]);
    assert_eq!(
        ops,
        [Operation::RewriteDataFiles, Operation::ExpireSnapshots]
    );
    assert_eq!(due.tables.len(), 1, "{due:#?}");
    assert_eq!(due.next_due_ms, Some(now + 14 * HOUR));
    assert_eq!(due.paused.len(), 1);
    assert!(due.paused[0].1.contains("owned elsewhere"));

    // A compaction ten minutes ago: only expiry is due; ask again when the hour is up.
    let ran = receipt(
        now - 10 * 60_000,
        "lake.orders",
        Operation::RewriteDataFiles,
        Succeeded,
    );
    let (due, ops) = due_ops(std::slice::from_ref(&ran));
    assert_eq!(ops, [Operation::ExpireSnapshots]);
    assert_eq!(due.next_due_ms, Some(now + 50 * 60_000));

    // Expiry failed three times in a row (the log unsorted): it backs off an hour from the
    // last failure; a fourth failure doubles the wait; a success ends the streak.
    let fail = |minutes_ago: i64| {
        receipt(
            now - minutes_ago * 60_000,
            "lake.orders",
            Operation::ExpireSnapshots,
            Failed,
        )
    };
    let mut log = vec![fail(20), fail(40), fail(30)];
    let (due, ops) = due_ops(&log);
    assert_eq!(ops, [Operation::RewriteDataFiles]);
    let b = &due.backing_off[0];
    assert_eq!((b.operation, b.failures), (Operation::ExpireSnapshots, 3));
    assert_eq!(b.retry_at_ms, now - 20 * 60_000 + HOUR);
    assert_eq!(
        b.last_error.as_deref(),
        Some(format!("failure at {}", now - 20 * 60_000).as_str())
    );
    log.push(fail(5));
    let (due, _) = due_ops(&log);
    assert_eq!(due.backing_off[0].retry_at_ms, now - 5 * 60_000 + 2 * HOUR);
    let (due, _) = due_ops(&[
        fail(300),
        fail(200),
        fail(190),
        fail(180),
        fail(170),
        fail(160),
    ]);
    assert_eq!(
        due.backing_off[0].retry_at_ms,
        now - 160 * 60_000 + 3 * HOUR,
        "capped at max_delay"
    );
    // Two failures stay under the threshold; a success after three ends the streak.
    assert_eq!(due_ops(&[fail(20), fail(10)]).1.len(), 2);
    let ok = receipt(
        now - 2 * HOUR,
        "lake.orders",
        Operation::ExpireSnapshots,
        Succeeded,
    );
    let (due, ops) = due_ops(&[fail(200), fail(190), fail(180), ok]);
    assert!(due.backing_off.is_empty() && ops.contains(&Operation::ExpireSnapshots));
    let s = &streaks(&log)[&(orders.clone(), Operation::ExpireSnapshots)];
    assert_eq!(s.failures, 4);
}

#[tokio::test]
async fn planning_what_is_due_plans_only_that() {
    use crate::receipt::ReceiptStatus::Succeeded;
    let (_dir, graded, now) = demo().await;
    let policy = Policy::from_yaml(
        "presets:\n  hourly: {operations: [rewrite_data_files, expire_snapshots], every: 1h}\n  \
         nightly: {window: {start_hour: 22, end_hour: 4}}\n\
         rules: [{name: orders, preset: hourly, match: {table: lake.orders}}, {name: rest, preset: nightly}]\n",
        "p.yaml",
    )
    .unwrap();
    let orders = id("lake.orders");
    let ran = receipt(
        now - 10 * 60_000,
        "lake.orders",
        Operation::RewriteDataFiles,
        Succeeded,
    );
    let due = policy.due(&graded, std::slice::from_ref(&ran), now);
    let plan = policy
        .plan_due("demo", &graded, &due, &BTreeMap::new(), now)
        .unwrap();
    assert_eq!(plan.policy.as_deref(), Some(policy.fingerprint()));
    assert!(plan.tables.iter().all(|t| t.table == orders));
    assert!(plan.skipped_tables.is_empty(), "{:?}", plan.skipped_tables);
    let planned: Vec<Operation> = plan
        .tables
        .iter()
        .flat_map(|t| t.steps.iter().map(|s| s.operation))
        .collect();
    assert!(
        planned.iter().all(|op| *op == Operation::ExpireSnapshots),
        "{planned:?}"
    );
}

#[test]
fn backoff_settings_are_checked() {
    let got = problems("backoff: {after_failures: 0, delay: 2h, max_delay: 1h}\n");
    let fields: Vec<&str> = got.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(
        fields,
        ["backoff.after_failures", "backoff.max_delay"],
        "{got:#?}"
    );
    assert!(got.iter().all(|p| p.line == 1));
}

/// The advice for a catalog's tables as they are now.
async fn advise_now(catalog: &crate::catalog::Catalog) -> Advice {
    let fleet = scan_fleet(
        catalog,
        &FleetScanOptions::default(),
        &crate::clock::SystemClock,
    )
    .await
    .unwrap();
    let graded = Policy::from_yaml("", "p.yaml")
        .unwrap()
        .grade(&fleet.tables)
        .unwrap();
    advise(catalog.name(), &graded, fleet.scanned_at_ms).unwrap()
}

/// Another writer sets a property.
async fn set_property(catalog: &crate::catalog::Catalog, table: &TableId, key: &str, value: &str) {
    use crate::catalog::TableChanges;
    use iceberg::TableUpdate;
    let t = catalog.load_table(table).await.unwrap();
    let updates = [(key.to_string(), value.to_string())].into();
    let changes = TableChanges::new(vec![], vec![TableUpdate::SetProperties { updates }]);
    catalog
        .committer()
        .unwrap()
        .commit(&t, changes)
        .await
        .unwrap();
}

#[tokio::test]
async fn advice_is_applied_only_as_approved_and_only_from_what_it_saw() {
    let dir = tempfile::tempdir().unwrap();
    let lake = create_demo_lake(dir.path(), &DemoOptions::default())
        .await
        .unwrap();
    let catalog = &lake.catalog;
    let advice = advise_now(catalog).await;
    let metrics = id("lake.metrics_v1");
    let t = advice
        .tables
        .iter()
        .find(|t| t.table == metrics)
        .expect("metrics_v1 advised");
    let keys: Vec<(&str, Option<&str>, &str)> = t
        .changes
        .iter()
        .map(|c| (c.key.as_str(), c.from.as_deref(), c.to.as_str()))
        .collect();
    assert!(
        keys.contains(&("format-version", Some("1"), "2")),
        "{keys:?}"
    );
    assert!(
        keys.contains(&(
            "write.metadata.metrics.default",
            Some("none"),
            "truncate(16)"
        )),
        "{keys:?}"
    );
    assert!(t.changes.iter().any(|c| c.finding == "column_bounds"));
    // Stored and read back: the same advice; changed by hand: refused.
    let json = advice.to_json().unwrap();
    assert_eq!(Advice::from_json(&json).unwrap(), advice);
    assert!(Advice::from_json(&json.replace("truncate(16)", "full")).is_err());

    // Not the approved fingerprint: nothing is written.
    let before = catalog
        .load_table(&metrics)
        .await
        .unwrap()
        .metadata_location;
    let err = apply_advice(catalog, &advice, &"0".repeat(64), "me")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not the approved advice"), "{err}");
    assert_eq!(
        catalog
            .load_table(&metrics)
            .await
            .unwrap()
            .metadata_location,
        before
    );
}

#[tokio::test]
async fn advice_is_refused_when_the_table_moved_and_applied_once_when_advised_again() {
    let dir = tempfile::tempdir().unwrap();
    let lake = create_demo_lake(dir.path(), &DemoOptions::default())
        .await
        .unwrap();
    let catalog = &lake.catalog;
    let metrics = id("lake.metrics_v1");
    let advice = advise_now(catalog).await;
    // Someone sets one of the keys in between: the table is refused, nothing of its change set
    // is written (the format stays 1), and the receipt says why.
    set_property(
        catalog,
        &metrics,
        "write.metadata.metrics.default",
        "counts",
    )
    .await;
    let refused = apply_advice(catalog, &advice, &advice.fingerprint, "me")
        .await
        .unwrap();
    let m = refused.tables.iter().find(|a| a.table == metrics).unwrap();
    let AppliedStatus::Refused { reason } = &m.outcome else {
        panic!("{m:?}")
    };
    assert!(
        reason.contains("`counts`") && reason.contains("advise again"),
        "{reason}"
    );
    assert_eq!(refused.receipts.len(), advice.tables.len());
    assert_eq!(
        refused.receipts[0].status,
        crate::receipt::ReceiptStatus::Skipped
    );
    let table = catalog.load_table(&metrics).await.unwrap();
    assert_eq!(
        table.metadata.format_version(),
        iceberg::spec::FormatVersion::V1
    );

    // Advised again from what is there now, approved, applied: one commit with both changes.
    let advice = advise_now(catalog).await;
    let applied = apply_advice(catalog, &advice, &advice.fingerprint, "me")
        .await
        .unwrap();
    let m = applied.tables.iter().find(|a| a.table == metrics).unwrap();
    assert!(
        matches!(m.outcome, AppliedStatus::Committed { .. }),
        "{m:?}"
    );
    assert_eq!(
        m.changes
            .iter()
            .find(|c| c.key == "write.metadata.metrics.default")
            .and_then(|c| c.from.as_deref()),
        Some("counts")
    );
    let table = catalog.load_table(&metrics).await.unwrap();
    assert_eq!(
        table.metadata.format_version(),
        iceberg::spec::FormatVersion::V2
    );
    assert_eq!(
        table
            .metadata
            .properties()
            .get("write.metadata.metrics.default")
            .map(String::as_str),
        Some("truncate(16)")
    );
    // Applied again: every key is set already, nothing is written.
    let again = apply_advice(catalog, &advice, &advice.fingerprint, "me")
        .await
        .unwrap();
    let m = again.tables.iter().find(|a| a.table == metrics).unwrap();
    assert_eq!(m.outcome, AppliedStatus::AlreadySet);
    assert_eq!(
        catalog
            .load_table(&metrics)
            .await
            .unwrap()
            .metadata_location,
        table.metadata_location
    );
}
