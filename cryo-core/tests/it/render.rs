//! Golden files for rendered SQL: hand-built plans covering every operation, predicate kind,
//! literal type, version gate, retention floor and hostile identifier, rendered for Trino and
//! Spark into `golden/render/{trino,spark}/<case>.{sql,json}`.
//!
//! `CRYO_BLESS=1 cargo test -p cryo-core --test it render` rewrites them; otherwise they are
//! compared byte for byte. The `.json` files (the typed output) feed the peer checks in
//! `tests/py/test_render_*.py`: every Trino statement through trino-sql-validator, every Spark
//! statement through Spark's own parser and then run on real Spark against tables built from
//! `golden/render/plans/<case>.json` (the plan: column types and partition transforms).

#![allow(clippy::needless_pass_by_value)] // Reason: the plan builders take JSON values built inline.
#![allow(clippy::unwrap_used)] // Reason: a failed unwrap is the test failure.
#![allow(clippy::too_many_lines)] // Reason: each golden case reads best as one plan literal.

use cryo_core::plan::{MaintenancePlan, PLAN_FORMAT_VERSION};
use cryo_core::render::{
    Dialect, RenderedPlan, SparkDialect, SparkOptions, TrinoDialect, TrinoOptions, Version,
    render_plan,
};
use serde_json::{Value, json};

use crate::golden::check_golden;

const DAY: i64 = 86_400_000;
const HOUR: i64 = 3_600_000;
/// The plans' "now": 2026-06-01T00:00:00Z.
pub const NOW: i64 = 1_780_272_000_000;

// ---------------------------------------------------------------------------------------------
// Plan builders (plain JSON: the plan is a serde value, and `MaintenancePlan` is non-exhaustive)
// ---------------------------------------------------------------------------------------------

fn lit(kind: &str, value: Value) -> Value {
    json!({"type": kind, "value": value})
}

fn fp(column: &str, column_type: &str, transform: &str, kind: Value) -> Value {
    json!({"column": column, "column_type": column_type, "transform": transform, "kind": kind})
}

fn eq(column: &str, column_type: &str, value: Value) -> Value {
    fp(
        column,
        column_type,
        "identity",
        json!({"kind": "eq", "value": value}),
    )
}

fn is_null(column: &str, column_type: &str, transform: &str) -> Value {
    fp(column, column_type, transform, json!({"kind": "is_null"}))
}

fn range(column: &str, column_type: &str, transform: &str, lower: Value, upper: Value) -> Value {
    fp(
        column,
        column_type,
        transform,
        json!({"kind": "range", "lower": lower, "upper": upper}),
    )
}

fn day_tz(column: &str, lo: &str, hi: &str) -> Value {
    range(
        column,
        "timestamptz",
        "day",
        lit("timestamp_tz", json!(lo)),
        lit("timestamp_tz", json!(hi)),
    )
}

fn bucket(column: &str, n: u32, v: i64) -> Value {
    fp(
        column,
        "long",
        &format!("bucket[{n}]"),
        json!({"kind": "bucket", "buckets": n, "value": v}),
    )
}

fn string_eq(column: &str, v: &str) -> Value {
    eq(column, "string", lit("string", json!(v)))
}

fn part(spec_id: i32, path: &str, predicate: Vec<Value>) -> Value {
    json!({"spec_id": spec_id, "path": path, "predicate": predicate, "files": 6, "bytes": 6_000_000, "score": 1.0})
}

fn chunk(index: u32, partitions: Vec<Value>) -> Value {
    json!({
        "index": index, "whole_table": partitions.is_empty(), "partitions": partitions,
        "input_files": 6, "input_bytes": 6_000_000, "expected_output_files": 1
    })
}

fn whole() -> Vec<Value> {
    vec![chunk(0, vec![])]
}

fn step(params: Value, chunks: Vec<Value>) -> Value {
    json!({
        "operation": params["operation"], "params": params, "chunks": chunks,
        "because": ["golden"], "saving_usd_month": 0.0
    })
}

fn binpack() -> Value {
    rewrite(json!({"kind": "bin_pack"}))
}

fn rewrite(strategy: Value) -> Value {
    json!({
        "operation": "rewrite_data_files", "strategy": strategy,
        "target_file_size_bytes": 134_217_728u64, "min_file_size_bytes": 100_663_296u64,
        "max_file_size_bytes": 241_591_910u64, "min_input_files": 5, "delete_file_threshold": 1
    })
}

fn convert() -> Value {
    json!({"operation": "convert_equality_deletes"})
}

fn position_deletes(min_input_files: u32) -> Value {
    json!({"operation": "rewrite_position_deletes", "min_input_files": min_input_files})
}

fn statistics(columns: &[&str]) -> Value {
    json!({"operation": "compute_statistics", "columns": columns})
}

fn manifests() -> Value {
    json!({"operation": "rewrite_manifests", "target_manifest_size_bytes": 8_388_608})
}

fn expire(retention_ms: i64, retain_last: u32) -> Value {
    json!({"operation": "expire_snapshots", "older_than_ms": NOW - retention_ms, "retain_last": retain_last, "retention_ms": retention_ms})
}

fn orphans(retention_ms: i64, dry_run: bool) -> Value {
    json!({"operation": "remove_orphan_files", "older_than_ms": NOW - retention_ms, "retention_ms": retention_ms, "dry_run": dry_run})
}

fn table(namespace: &[&str], name: &str, steps: Vec<Value>) -> Value {
    json!({
        "table": {"namespace": namespace, "name": name}, "table_uuid": "00000000-0000-0000-0000-000000000000",
        "base_snapshot_id": 1, "base_metadata_location": null, "format_version": 2,
        "grade": "F", "score": 12, "steps": steps, "skipped": []
    })
}

fn plan(name: &str, tables: Vec<Value>) -> MaintenancePlan {
    let mut plan: MaintenancePlan = serde_json::from_value(json!({
        "format_version": PLAN_FORMAT_VERSION, "catalog": "source_catalog", "created_at_ms": NOW,
        "tables": tables, "skipped_tables": [], "fingerprint": ""
    }))
    .unwrap_or_else(|e| panic!("golden plan {name}: {e}"));
    plan.fingerprint = plan.compute_fingerprint().unwrap();
    plan
}

// ---------------------------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------------------------

fn operations() -> MaintenancePlan {
    let days = |d: u32| {
        day_tz(
            "ts",
            &format!("2026-05-{d:02} 00:00:00"),
            &format!("2026-05-{:02} 00:00:00", d + 1),
        )
    };
    plan(
        "operations",
        vec![
            table(
                &["sales"],
                "orders",
                vec![
                    step(
                        convert(),
                        vec![chunk(0, vec![part(0, "ts_day=2026-05-01", vec![days(1)])])],
                    ),
                    step(
                        position_deletes(2),
                        vec![chunk(0, vec![part(0, "ts_day=2026-05-02", vec![days(2)])])],
                    ),
                    step(
                        binpack(),
                        vec![
                            chunk(
                                0,
                                vec![
                                    part(0, "ts_day=2026-05-03", vec![days(3)]),
                                    part(0, "ts_day=2026-05-04", vec![days(4)]),
                                ],
                            ),
                            chunk(1, vec![part(0, "ts_day=2026-05-05", vec![days(5)])]),
                        ],
                    ),
                    step(statistics(&["order_id", "customer_id"]), whole()),
                    step(manifests(), whole()),
                    step(expire(7 * DAY, 5), whole()),
                    step(orphans(7 * DAY, true), whole()),
                ],
            ),
            table(
                &["sales"],
                "returns",
                vec![
                    step(convert(), whole()),
                    step(position_deletes(3), whole()),
                    step(binpack(), whole()),
                    step(statistics(&[]), whole()),
                    step(manifests(), whole()),
                    step(expire(14 * DAY, 1), whole()),
                    step(orphans(7 * DAY, false), whole()),
                ],
            ),
        ],
    )
}

fn predicates() -> MaintenancePlan {
    let single = |i: u32, path: &str, preds: Vec<Value>| chunk(i, vec![part(0, path, preds)]);
    let chunks = vec![
        single(
            0,
            "flag=true/small=-7/big=-9223372036854775808",
            vec![
                eq("flag", "boolean", lit("boolean", json!(true))),
                eq("small", "int", lit("integer", json!(-7))),
                eq("big", "long", lit("integer", json!(i64::MIN))),
            ],
        ),
        single(
            1,
            "ratio=0.5/score=-1.25/amount=1234.50",
            vec![
                eq("ratio", "float", lit("float", json!(0.5))),
                eq("score", "double", lit("float", json!(-1.25))),
                eq("amount", "decimal(12,2)", lit("decimal", json!("1234.50"))),
            ],
        ),
        single(
            2,
            "category=it's \\ a\nline/name=Ünïcödé 日本 🙂",
            vec![
                string_eq("category", "it's \\ a\nline"),
                string_eq("name", "Ünïcödé 日本 🙂"),
            ],
        ),
        single(
            3,
            "id=123e4567-e89b-12d3-a456-426614174000/blob=00ff/tag=cafe",
            vec![
                eq(
                    "id",
                    "uuid",
                    lit("string", json!("123e4567-e89b-12d3-a456-426614174000")),
                ),
                eq("blob", "binary", lit("string", json!("00ff"))),
                eq("tag", "fixed[2]", lit("string", json!("cafe"))),
            ],
        ),
        single(
            4,
            "d=2024-02-29/local=2024-02-29T10:15:30.5/instant=2024-02-29T10:15:30",
            vec![
                eq("d", "date", lit("date", json!("2024-02-29"))),
                eq(
                    "local",
                    "timestamp",
                    lit("timestamp", json!("2024-02-29 10:15:30.5")),
                ),
                eq(
                    "instant",
                    "timestamptz",
                    lit("timestamp_tz", json!("2024-02-29 10:15:30")),
                ),
            ],
        ),
        single(
            5,
            "category=null/ts_day=null",
            vec![
                is_null("category", "string", "identity"),
                is_null("ts", "timestamptz", "day"),
            ],
        ),
        single(
            6,
            "local_year=2024/d_month=2024-02/ts_day=2024-02-29/local_hour=2024-02-29-23",
            vec![
                range(
                    "local",
                    "timestamp",
                    "year",
                    lit("timestamp", json!("2024-01-01 00:00:00")),
                    lit("timestamp", json!("2025-01-01 00:00:00")),
                ),
                range(
                    "d",
                    "date",
                    "month",
                    lit("date", json!("2024-02-01")),
                    lit("date", json!("2024-03-01")),
                ),
                day_tz("ts", "2024-02-29 00:00:00", "2024-03-01 00:00:00"),
                range(
                    "local",
                    "timestamp",
                    "hour",
                    lit("timestamp", json!("2024-02-29 23:00:00")),
                    lit("timestamp", json!("2024-03-01 00:00:00")),
                ),
            ],
        ),
        single(
            7,
            "user_id_trunc=-20",
            vec![range(
                "user_id",
                "long",
                "truncate[10]",
                lit("integer", json!(-20)),
                lit("integer", json!(-10)),
            )],
        ),
        single(
            8,
            "category_trunc=ab%_/region_trunc=eu",
            vec![
                fp(
                    "category",
                    "string",
                    "truncate[4]",
                    json!({"kind": "starts_with", "prefix": "ab%_"}),
                ),
                fp(
                    "region",
                    "string",
                    "truncate[4]",
                    json!({"kind": "eq", "value": lit("string", json!("eu"))}),
                ),
            ],
        ),
        chunk(
            9,
            vec![
                part(
                    0,
                    "ts_day=2024-02-29/user_bucket=3",
                    vec![
                        day_tz("ts", "2024-02-29 00:00:00", "2024-03-01 00:00:00"),
                        bucket("user_id", 8, 3),
                    ],
                ),
                part(
                    0,
                    "ts_day=2024-03-01",
                    vec![day_tz("ts", "2024-03-01 00:00:00", "2024-03-02 00:00:00")],
                ),
            ],
        ),
        single(
            10,
            "at=10:30:00",
            vec![eq("at", "time", lit("string", json!("10:30:00")))],
        ),
        single(
            11,
            "address.zip=12345",
            vec![eq("address.zip", "int", lit("integer", json!(12345)))],
        ),
        single(
            12,
            "ts_day=2024-02-29 (misaligned)",
            vec![day_tz("ts", "2024-02-29 06:00:00", "2024-03-01 00:00:00")],
        ),
        single(
            13,
            "d=2024-13-40/category=a",
            vec![
                eq("d", "date", lit("date", json!("2024-13-40"))),
                string_eq("category", "a"),
            ],
        ),
        single(
            14,
            "nanos=2024-02-29T10:15:30.123456789",
            vec![eq(
                "nanos",
                "timestamptz_ns",
                lit("timestamp_tz", json!("2024-02-29 10:15:30.123456789")),
            )],
        ),
        single(15, "v=null", vec![is_null("v", "long", "void")]),
    ];
    plan(
        "predicates",
        vec![table(&["lake"], "events", vec![step(binpack(), chunks)])],
    )
}

fn chunks() -> MaintenancePlan {
    let d = |n: u32| {
        day_tz(
            "ts",
            &format!("2026-05-{n:02} 00:00:00"),
            &format!("2026-05-{:02} 00:00:00", n + 1),
        )
    };
    let p = |path: &str, preds: Vec<Value>| part(0, path, preds);
    let mut malformed_whole = chunk(7, vec![p("category=x", vec![string_eq("category", "x")])]);
    malformed_whole["whole_table"] = json!(true);
    let mut malformed_empty = chunk(8, vec![]);
    malformed_empty["whole_table"] = json!(false);
    plan(
        "chunks",
        vec![table(
            &["lake"],
            "clicks",
            vec![step(
                binpack(),
                vec![
                    // One column: a single OR for both engines.
                    chunk(
                        0,
                        vec![
                            p("ts_day=2026-05-01", vec![d(1)]),
                            p("ts_day=2026-05-02", vec![d(2)]),
                            p("ts_day=2026-05-03", vec![d(3)]),
                        ],
                    ),
                    // A full cross product: Trino writes an AND of per-column ORs.
                    chunk(
                        1,
                        vec![
                            p(
                                "ts_day=2026-05-04/category=a",
                                vec![d(4), string_eq("category", "a")],
                            ),
                            p(
                                "ts_day=2026-05-04/category=b",
                                vec![d(4), string_eq("category", "b")],
                            ),
                            p(
                                "ts_day=2026-05-05/category=a",
                                vec![d(5), string_eq("category", "a")],
                            ),
                            p(
                                "ts_day=2026-05-05/category=b",
                                vec![d(5), string_eq("category", "b")],
                            ),
                        ],
                    ),
                    // Not a product: Trino renders one statement per partition.
                    chunk(
                        2,
                        vec![
                            p(
                                "ts_day=2026-05-06/category=a",
                                vec![d(6), string_eq("category", "a")],
                            ),
                            p(
                                "ts_day=2026-05-07/category=b",
                                vec![d(7), string_eq("category", "b")],
                            ),
                            p(
                                "ts_day=2026-05-07/category=null",
                                vec![d(7), is_null("category", "string", "identity")],
                            ),
                        ],
                    ),
                    // Differ only in a bucket: one statement after Trino drops it.
                    chunk(
                        3,
                        vec![
                            p(
                                "ts_day=2026-05-08/user_bucket=1",
                                vec![d(8), bucket("user_id", 16, 1)],
                            ),
                            p(
                                "ts_day=2026-05-08/user_bucket=2",
                                vec![d(8), bucket("user_id", 16, 2)],
                            ),
                        ],
                    ),
                    // Bucket only: Trino has nothing left and skips the chunk (never a whole-table OPTIMIZE).
                    chunk(
                        4,
                        vec![
                            p("user_bucket=5", vec![bucket("user_id", 16, 5)]),
                            p("user_bucket=6", vec![bucket("user_id", 16, 6)]),
                        ],
                    ),
                    // Mixed: the bucket-only partition is left out on Trino, the other stays.
                    chunk(
                        5,
                        vec![
                            p("user_bucket=7", vec![bucket("user_id", 16, 7)]),
                            p("category=c", vec![string_eq("category", "c")]),
                        ],
                    ),
                    // The plan's own decision: the whole table.
                    chunk(6, vec![]),
                    malformed_whole,
                    malformed_empty,
                ],
            )],
        )],
    )
}

fn gates() -> MaintenancePlan {
    let local = eq(
        "local",
        "timestamp",
        lit("timestamp", json!("2026-05-01 00:00:00")),
    );
    let prefix = fp(
        "category",
        "string",
        "truncate[2]",
        json!({"kind": "starts_with", "prefix": "ab"}),
    );
    plan(
        "version_gates",
        vec![
            table(
                &["lake"],
                "gated",
                vec![
                    step(convert(), whole()),
                    step(position_deletes(2), whole()),
                    step(
                        binpack(),
                        vec![chunk(
                            0,
                            vec![part(
                                0,
                                "local=2026-05-01T00:00:00/category_trunc=ab/user_bucket=1",
                                vec![local, prefix, bucket("user_id", 4, 1)],
                            )],
                        )],
                    ),
                    step(statistics(&[]), whole()),
                    step(manifests(), whole()),
                    step(expire(7 * DAY, 5), whole()),
                ],
            ),
            table(
                &["lake"],
                "keep_one",
                vec![step(expire(7 * DAY, 1), whole())],
            ),
        ],
    )
}

fn floors() -> MaintenancePlan {
    let t = |name: &str, steps: Vec<Value>| table(&["lake"], name, steps);
    plan(
        "retention_floors",
        vec![
            t("expire_1d", vec![step(expire(DAY, 1), whole())]),
            t("expire_3d", vec![step(expire(3 * DAY, 2), whole())]),
            t("expire_7d", vec![step(expire(7 * DAY, 2), whole())]),
            t("expire_30d", vec![step(expire(30 * DAY, 2), whole())]),
            t("orphans_12h", vec![step(orphans(12 * HOUR, true), whole())]),
            t("orphans_1d", vec![step(orphans(DAY, false), whole())]),
            t(
                "orphans_3d_dry_run",
                vec![step(orphans(3 * DAY, true), whole())],
            ),
            t("orphans_7d", vec![step(orphans(7 * DAY, false), whole())]),
            t(
                "orphans_36h",
                vec![step(orphans(36 * HOUR, false), whole())],
            ),
        ],
    )
}

fn hostile() -> MaintenancePlan {
    let evil = "'; DROP TABLE x; --";
    let values = [
        evil,
        "back\\slash \\' \\\\",
        "quote\"double `tick`",
        "tab\there\r\nnewline",
        "{{ jinja }} {% raw %} $$ /* c */ -- ;",
    ];
    let parts: Vec<Value> = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            part(
                0,
                &format!("weird=#{i}"),
                vec![string_eq("col\"quote`tick'apos", v)],
            )
        })
        .collect();
    let s = |parts: Vec<Value>| {
        vec![
            step(binpack(), vec![chunk(0, parts)]),
            step(manifests(), whole()),
            step(statistics(&["col\"quote`tick'apos", "ÜBER"]), whole()),
        ]
    };
    plan(
        "hostile_identifiers",
        vec![
            table(&["my.ns"], "a\"b", s(parts)),
            table(
                &["we`ird", "nested"],
                "Ünïcödé 表",
                s(vec![part(0, "x=1", vec![string_eq("x", evil)])]),
            ),
            table(
                // Lower case: Trino refuses a name with upper-case letters (the table above).
                &["db"],
                "x; drop table y; --",
                s(vec![part(0, "x=1", vec![string_eq("x", "1")])]),
            ),
            table(
                &["db"],
                "line\nbreak",
                s(vec![part(0, "x=1", vec![string_eq("x", "1")])]),
            ),
        ],
    )
}

fn strategies() -> MaintenancePlan {
    let t = |name: &str, strategy: Value| {
        table(&["lake"], name, vec![step(rewrite(strategy), whole())])
    };
    plan(
        "strategies",
        vec![
            t("binpack", json!({"kind": "bin_pack"})),
            t("sort_table_order", json!({"kind": "sort", "columns": []})),
            t(
                "sort_columns",
                json!({"kind": "sort", "columns": ["customer_id DESC NULLS LAST", "address.zip", "order id asc nulls first"]}),
            ),
            // A backtick cannot reach Iceberg's Spark z-order: skipped there (with the reason).
            t(
                "zorder",
                json!({"kind": "z_order", "columns": ["lat", "lon`x"]}),
            ),
            t(
                "zorder_quoted",
                json!({"kind": "z_order", "columns": ["lat", "lon \"deg\""]}),
            ),
        ],
    )
}

fn trino(version: u32) -> TrinoOptions {
    TrinoOptions::new("lake", version)
}

fn spark(spark: (u32, u32, u32), iceberg: (u32, u32, u32)) -> SparkOptions {
    SparkOptions::new(
        "lake",
        Version::new(spark.0, spark.1, spark.2),
        Version::new(iceberg.0, iceberg.1, iceberg.2),
    )
}

/// Render for one engine and compare both goldens.
pub fn check_rendered(
    engine: &str,
    case: &str,
    plan: &MaintenancePlan,
    dialect: &dyn Dialect,
) -> RenderedPlan {
    let rendered = render_plan(plan, dialect).unwrap();
    check_golden(
        &format!("golden/render/{engine}/{case}.sql"),
        &rendered.to_script(),
    );
    check_golden(
        &format!("golden/render/{engine}/{case}.json"),
        &(serde_json::to_string_pretty(&rendered).unwrap() + "\n"),
    );
    rendered
}

/// Trino folds identifiers to lower case: a table named with upper-case letters is refused
/// (its statement would reach a lower-case twin or nothing) unless the catalog matches names
/// case-insensitively, when it renders with a note.
#[test]
fn trino_upper_case_names_need_case_insensitive_matching() {
    let plan = plan(
        "case_folding",
        vec![
            table(&["db"], "Events", vec![step(manifests(), whole())]),
            table(&["db"], "events", vec![step(manifests(), whole())]),
        ],
    );
    let strict = render_plan(&plan, &TrinoDialect::new(trino(480)).unwrap()).unwrap();
    let upper = &strict.tables[0];
    assert!(
        upper.steps.iter().all(|s| s.statements.is_empty()),
        "{upper:?}"
    );
    assert_eq!(upper.skipped.len(), 1, "{upper:?}");
    let reason = &upper.skipped[0].reason;
    assert!(
        reason.contains("unaddressable table name db.Events:")
            && reason.contains("case_insensitive_name_matching"),
        "{reason}"
    );
    // The lower-case twin renders as usual, and the script names it once.
    let script = strict.to_script();
    assert_eq!(
        script.matches("ALTER TABLE").count(),
        1,
        "only the twin is addressed: {script}"
    );
    assert!(script.contains(r#"ALTER TABLE "lake"."db"."events" EXECUTE optimize_manifests;"#));

    let matching = TrinoOptions {
        case_insensitive_name_matching: true,
        ..trino(480)
    };
    let lenient = render_plan(&plan, &TrinoDialect::new(matching).unwrap()).unwrap();
    let upper = &lenient.tables[0];
    assert!(upper.skipped.is_empty(), "{upper:?}");
    assert!(
        upper
            .notes
            .iter()
            .any(|n| n.contains("case-insensitive name matching")),
        "{:?}",
        upper.notes
    );
    assert!(
        lenient
            .to_script()
            .contains(r#"ALTER TABLE "lake"."db"."Events" EXECUTE optimize_manifests;"#)
    );
}

#[test]
fn render_goldens() {
    let current_trino = trino(480);
    let current_spark = spark((3, 5, 9), (1, 10, 2));
    let low_floors_trino = TrinoOptions {
        expire_snapshots_min_retention_ms: DAY,
        remove_orphan_files_min_retention_ms: 2 * DAY,
        ..trino(480)
    };
    let strict_spark = SparkOptions {
        expire_snapshots_min_retention_ms: 14 * DAY,
        remove_orphan_files_min_retention_ms: 3 * DAY,
        ..spark((3, 5, 9), (1, 10, 2))
    };
    let cases: Vec<(&str, MaintenancePlan, TrinoOptions, SparkOptions)> = vec![
        (
            "operations",
            operations(),
            current_trino.clone(),
            current_spark.clone(),
        ),
        (
            "predicates",
            predicates(),
            current_trino.clone(),
            current_spark.clone(),
        ),
        (
            "chunks",
            chunks(),
            current_trino.clone(),
            current_spark.clone(),
        ),
        (
            "version_gates_old",
            gates(),
            trino(469),
            spark((3, 2, 4), (1, 2, 1)),
        ),
        (
            "version_gates_new",
            gates(),
            trino(479),
            current_spark.clone(),
        ),
        (
            "retention_floors",
            floors(),
            current_trino.clone(),
            current_spark.clone(),
        ),
        (
            "retention_floors_custom",
            floors(),
            low_floors_trino,
            strict_spark,
        ),
        (
            "hostile_identifiers",
            hostile(),
            TrinoOptions::new("lake\"prod", 480),
            SparkOptions {
                catalog: "lake`prod".into(),
                ..current_spark.clone()
            },
        ),
        ("strategies", strategies(), current_trino, current_spark),
    ];
    for (case, plan, t, s) in &cases {
        // The plan itself: column types and transforms for the peer test that builds the tables.
        check_golden(
            &format!("golden/render/plans/{case}.json"),
            &(serde_json::to_string_pretty(plan).unwrap() + "\n"),
        );
        let tr = check_rendered("trino", case, plan, &TrinoDialect::new(t.clone()).unwrap());
        let sr = check_rendered("spark", case, plan, &SparkDialect::new(s.clone()).unwrap());
        for r in [&tr, &sr] {
            assert_eq!(
                r.tables.len(),
                plan.tables.len(),
                "{case}: every table is accounted for"
            );
            // Every planned chunk is rendered or skipped: nothing disappears silently.
            for (pt, rt) in plan.tables.iter().zip(&r.tables) {
                for ps in &pt.steps {
                    let rendered: Vec<u32> = rt
                        .steps
                        .iter()
                        .filter(|s| s.operation == ps.operation)
                        .flat_map(|s| s.statements.iter().map(|x| x.chunk))
                        .collect();
                    let skipped_step = rt
                        .skipped
                        .iter()
                        .any(|s| s.operation == ps.operation && s.chunk.is_none());
                    for c in &ps.chunks {
                        let chunk_skipped = rt
                            .skipped
                            .iter()
                            .any(|s| s.operation == ps.operation && s.chunk == Some(c.index));
                        assert!(
                            skipped_step || chunk_skipped || rendered.contains(&c.index),
                            "{case} {}: {} chunk {} vanished",
                            r.dialect,
                            pt.table,
                            c.index
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn render_gates_and_floors_say_why() {
    let old = render_plan(&gates(), &TrinoDialect::new(trino(469)).unwrap()).unwrap();
    let reasons: Vec<&str> = old.skipped().map(|(_, s)| s.reason.as_str()).collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("optimize_manifests (added in Trino 470)")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("retain_last")),
        "{reasons:?}"
    );
    let old_spark = render_plan(
        &gates(),
        &SparkDialect::new(spark((3, 2, 4), (1, 2, 1))).unwrap(),
    )
    .unwrap();
    let reasons: Vec<&str> = old_spark
        .skipped()
        .map(|(_, s)| s.reason.as_str())
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("rewrite_position_delete_files")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("compute_table_stats")),
        "{reasons:?}"
    );
    // Spark 3.2 can express none of the gated partition's fields: the chunk is skipped.
    assert!(
        !old_spark
            .statements()
            .any(|s| s.contains("rewrite_data_files") && s.contains("where"))
    );

    let trino_floors = render_plan(&floors(), &TrinoDialect::new(trino(480)).unwrap()).unwrap();
    for (table, s) in trino_floors.skipped() {
        assert!(
            s.reason.contains("min-retention") || s.reason.contains("dry run"),
            "{table}: {}",
            s.reason
        );
    }
    // Trino's 7d floors leave exactly the 7d and 30d expiries and the 7d orphan removal.
    assert_eq!(trino_floors.statements().count(), 3);
    let spark_floors = render_plan(
        &floors(),
        &SparkDialect::new(spark((3, 5, 9), (1, 10, 2))).unwrap(),
    )
    .unwrap();
    assert!(
        spark_floors
            .skipped()
            .all(|(t, s)| t.name == "orphans_12h" && s.reason.contains("24 hours"))
    );
}

#[test]
fn trino_leaves_out_partitions_keyed_by_a_fixed_column() {
    let tag = |v: &str| eq("tag", "fixed[2]", lit("string", json!(v)));
    let p = plan(
        "fixed",
        vec![table(
            &["db"],
            "t",
            vec![step(
                binpack(),
                vec![
                    // One partition keyed by the fixed column, one from a spec without it: the
                    // first is left out (no predicate to drop would make it scannable), the
                    // second renders.
                    chunk(
                        0,
                        vec![
                            part(
                                1,
                                "tag=cafe/category=a",
                                vec![tag("cafe"), string_eq("category", "a")],
                            ),
                            part(0, "category=b", vec![string_eq("category", "b")]),
                        ],
                    ),
                    // Only fixed partitions: the chunk is skipped, never widened.
                    chunk(1, vec![part(1, "tag=beef", vec![tag("beef")])]),
                    // A bucket of a fixed column is an int partition value: Trino reads it (its
                    // predicate is dropped as for any bucket, and the identity one stays).
                    chunk(
                        2,
                        vec![part(
                            2,
                            "tag_bucket=3/category=c",
                            vec![
                                fp(
                                    "tag",
                                    "fixed[2]",
                                    "bucket[8]",
                                    json!({"kind": "bucket", "buckets": 8, "value": 3}),
                                ),
                                string_eq("category", "c"),
                            ],
                        )],
                    ),
                ],
            )],
        )],
    );
    let r = render_plan(&p, &TrinoDialect::new(trino(483)).unwrap()).unwrap();
    let sql: Vec<(u32, &str)> = r.tables[0].steps[0]
        .statements
        .iter()
        .map(|s| (s.chunk, s.sql.as_str()))
        .collect();
    assert_eq!(sql.len(), 2, "{sql:?}");
    assert!(
        sql[0].0 == 0 && sql[0].1.ends_with(r#"WHERE "category" = 'b'"#),
        "{sql:?}"
    );
    assert!(
        sql[1].0 == 2 && sql[1].1.ends_with(r#"WHERE "category" = 'c'"#),
        "{sql:?}"
    );
    let skipped: Vec<(Option<u32>, &[String], &str)> = r
        .skipped()
        .map(|(_, s)| (s.chunk, s.partitions.as_slice(), s.reason.as_str()))
        .collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    for (chunk, partitions, reason) in &skipped {
        assert!(
            reason.contains("partitioned by tag (fixed[2])")
                && reason.contains("Unsupported iceberg type: fixed[2]"),
            "{reason}"
        );
        match chunk {
            Some(0) => assert_eq!(*partitions, ["tag=cafe/category=a"]),
            Some(1) => assert!(reason.contains("never turned into a whole-table statement")),
            other => panic!("{other:?}"),
        }
    }
    // Spark reads fixed partitions: nothing is left out there.
    let s = render_plan(
        &p,
        &SparkDialect::new(spark((3, 5, 6), (1, 10, 0))).unwrap(),
    )
    .unwrap();
    assert_eq!(s.skipped().count(), 0);
}
