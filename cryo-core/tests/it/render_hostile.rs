//! A generated corpus of hostile identifiers and values, rendered for Trino and Spark into
//! `golden/inject/{trino,spark}.jsonl` (and the Trino script, `trino.sql`) for the engines' own parsers (`tests/py/test_inject.py`:
//! Trino's `SqlParser` from the Trino install, Spark's parser with Iceberg's SQL extensions).
//!
//! Every hostile string (quotes, semicolons, comment markers, backslash escapes, control
//! characters, NUL, bidi and zero-width marks, homoglyphs, combining characters, emoji, reserved
//! words, a long name, an empty name) is used as a table name, a namespace, a nested namespace
//! level, a column name, a partition value, a sort / z-order / statistics column and an engine
//! catalog. Each rendered statement is recorded with what it must address and select (catalog,
//! namespace, table, partition values, columns); each step that did not render is recorded with
//! its reason. Here: nothing vanishes (every step renders or is skipped with a reason) and the
//! names Cryo cannot render safely are refused, never emitted.
//!
//! `CRYO_BLESS=1 cargo test -p cryo-core --test it render_hostile` rewrites the goldens.

#![allow(clippy::unwrap_used)] // Reason: a failed unwrap is the test failure.
#![allow(clippy::needless_pass_by_value)] // Reason: the plan builders take JSON values built inline.

use cryo_core::Error;
use cryo_core::plan::{MaintenancePlan, PLAN_FORMAT_VERSION};
use cryo_core::render::{
    Dialect, RenderedPlan, SparkDialect, SparkOptions, TrinoDialect, TrinoOptions, Version,
    render_plan,
};
use serde_json::{Value, json};

use crate::golden::check_golden;

const DAY: i64 = 86_400_000;
/// The plans' "now": 2026-06-01T00:00:00Z.
const NOW: i64 = 1_780_272_000_000;

/// The hostile strings. Each is a table name, namespace, column, value and catalog below.
fn hostile_strings() -> Vec<String> {
    let mut out: Vec<String> = [
        // Quotes of every dialect, closing a literal or an identifier early.
        "'; DROP TABLE x; --",
        "\"; DROP TABLE x; --",
        "`; DROP TABLE x; --",
        "a'b\"c`d",
        "''",
        "\"\"",
        "``",
        "semi;colon",
        // Comments: line, block, an unterminated one, Spark's nested block comments.
        "-- line comment",
        "/* open comment",
        "close */ comment",
        "/* /* nested */ still open",
        // Control characters: line breaks (a raw one would end a `--` note), NUL, escape codes.
        "new\nline",
        "cr\r\nlf",
        "tab\tbed",
        "nul\0byte",
        "bell\u{7}esc\u{1b}[31m",
        "nel\u{85}next",
        "line\u{2028}sep\u{2029}para",
        // Backslash escapes (Spark's strings have them, Trino's do not).
        "back\\slash",
        "\\'",
        "\\\\'; DROP TABLE x; --",
        "\\u0027; DROP TABLE x; --",
        "\\n",
        "\\",
        "U&'\\0027'",
        "X'27'",
        // Template and dollar quoting of other tools.
        "$$; DROP TABLE x; $$",
        "${jndi:ldap://x/a}",
        "{{ jinja }} {% raw %}",
        // Unicode: bidi overrides and marks, zero-width, homoglyphs, combining marks, emoji.
        "\u{202E}fdp.exe\u{202C}",
        "\u{200F}\u{200E}marks",
        "zero\u{200B}width\u{FEFF}",
        "\u{043E}rders",
        "\u{FF4F}\u{FF52}\u{FF44}\u{FF45}\u{FF52}\u{FF53}",
        "e\u{301}",
        "\u{E9}",
        "\u{1F9CA}\u{2744}\u{FE0F}",
        "\u{1F469}\u{200D}\u{1F469}\u{200D}\u{1F467}",
        "表 テーブル",
        // Reserved words and dots.
        "select",
        "table",
        "from",
        "system",
        "where",
        "null",
        "true",
        "call",
        "a.b",
        " padded ",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    out.push("long_".repeat(60));
    out.push(String::new());
    out
}

fn string_eq(column: &str, value: &str) -> Value {
    json!({"column": column, "column_type": "string", "transform": "identity",
           "kind": {"kind": "eq", "value": {"type": "string", "value": value}}})
}

fn one_partition(column: &str, value: &str) -> Vec<Value> {
    vec![json!({
        "index": 0, "whole_table": false,
        "partitions": [{"spec_id": 0, "path": "p=0", "predicate": [string_eq(column, value)],
                        "files": 6, "bytes": 6_000_000, "score": 1.0}],
        "input_files": 6, "input_bytes": 6_000_000, "expected_output_files": 1
    })]
}

fn whole() -> Vec<Value> {
    vec![json!({
        "index": 0, "whole_table": true, "partitions": [],
        "input_files": 6, "input_bytes": 6_000_000, "expected_output_files": 1
    })]
}

fn step(params: Value, chunks: Vec<Value>) -> Value {
    json!({"operation": params["operation"], "params": params, "chunks": chunks,
           "because": ["hostile corpus"], "saving_usd_month": 0.0})
}

fn rewrite(strategy: Value) -> Value {
    json!({
        "operation": "rewrite_data_files", "strategy": strategy,
        "target_file_size_bytes": 134_217_728u64, "min_file_size_bytes": 100_663_296u64,
        "max_file_size_bytes": 241_591_910u64, "min_input_files": 5, "delete_file_threshold": 1
    })
}

fn table(namespace: &[&str], name: &str, steps: Vec<Value>) -> Value {
    json!({
        "table": {"namespace": namespace, "name": name},
        "table_uuid": "00000000-0000-0000-0000-000000000000",
        "base_snapshot_id": 1, "base_metadata_location": null, "format_version": 2,
        "grade": "F", "score": 12, "steps": steps, "skipped": []
    })
}

fn plan(tables: Vec<Value>) -> MaintenancePlan {
    let mut plan: MaintenancePlan = serde_json::from_value(json!({
        "format_version": PLAN_FORMAT_VERSION, "catalog": "source", "created_at_ms": NOW,
        "tables": tables, "skipped_tables": [], "fingerprint": ""
    }))
    .unwrap();
    plan.fingerprint = plan.compute_fingerprint().unwrap();
    plan
}

/// Every operation on a table named `s`, selecting the partition `c = s`; the statistics
/// columns include `s`.
fn table_named(s: &str) -> Value {
    let part = || one_partition("c", s);
    table(
        &["db"],
        s,
        vec![
            step(json!({"operation": "convert_equality_deletes"}), part()),
            step(
                json!({"operation": "rewrite_position_deletes", "min_input_files": 2}),
                part(),
            ),
            step(rewrite(json!({"kind": "bin_pack"})), part()),
            step(
                json!({"operation": "compute_statistics", "columns": ["c", s]}),
                whole(),
            ),
            step(
                json!({"operation": "rewrite_manifests", "target_manifest_size_bytes": 8_388_608}),
                whole(),
            ),
            step(
                json!({"operation": "expire_snapshots", "older_than_ms": NOW - 7 * DAY, "retain_last": 2, "retention_ms": 7 * DAY}),
                whole(),
            ),
            step(
                json!({"operation": "remove_orphan_files", "older_than_ms": NOW - 7 * DAY, "retention_ms": 7 * DAY, "dry_run": false}),
                whole(),
            ),
        ],
    )
}

/// A table in the namespace `s`: a sort rewrite on the column `s` selecting `s = s`.
fn in_namespace(i: usize, s: &str) -> Value {
    table(
        &[s],
        &format!("t{i}"),
        vec![step(
            rewrite(json!({"kind": "sort", "columns": [format!("{s} DESC NULLS LAST")]})),
            one_partition(s, s),
        )],
    )
}

/// A table `s` in the nested namespace `n1.s`: a z-order rewrite over `s` and `c`, and an expiry.
fn nested(s: &str) -> Value {
    table(
        &["n1", s],
        s,
        vec![
            step(
                rewrite(json!({"kind": "z_order", "columns": [s, "c"]})),
                whole(),
            ),
            step(
                json!({"operation": "expire_snapshots", "older_than_ms": NOW - 7 * DAY, "retain_last": 1, "retention_ms": 7 * DAY}),
                whole(),
            ),
        ],
    )
}

/// What a statement must address and select, from the plan step it renders.
fn expectation(catalog: &str, plan_table: &Value, step: &Value) -> Value {
    let params = &step["params"];
    let values: Vec<&Value> = step["chunks"][0]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["predicate"].as_array().unwrap())
        .collect();
    let sort_columns: Vec<Value> = match params["strategy"]["kind"].as_str() {
        Some("sort") => params["strategy"]["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| json!(c.as_str().unwrap().trim_end_matches(" DESC NULLS LAST")))
            .collect(),
        Some("z_order") => params["strategy"]["columns"].as_array().unwrap().clone(),
        _ => Vec::new(),
    };
    json!({
        "catalog": catalog,
        "namespace": plan_table["table"]["namespace"],
        "name": plan_table["table"]["name"],
        "strategy": params["strategy"]["kind"],
        "where_columns": values.iter().map(|p| p["column"].clone()).collect::<Vec<_>>(),
        "where_values": values.iter().map(|p| p["kind"]["value"]["value"].clone()).collect::<Vec<_>>(),
        "sort_columns": sort_columns,
        "stat_columns": params.get("columns").cloned().unwrap_or(json!([])),
    })
}

/// One record per statement (with its expectation) and per skip, one JSON object a line.
fn records(plan: &MaintenancePlan, rendered: &RenderedPlan) -> Vec<Value> {
    let plan_json = serde_json::to_value(plan).unwrap();
    let mut out = Vec::new();
    for (pt, rt) in plan_json["tables"]
        .as_array()
        .unwrap()
        .iter()
        .zip(&rendered.tables)
    {
        for ps in pt["steps"].as_array().unwrap() {
            let op = ps["operation"].as_str().unwrap();
            let rs = rt.steps.iter().find(|s| s.operation.to_string() == op);
            let skipped: Vec<&str> = rt
                .skipped
                .iter()
                .filter(|s| s.operation.to_string() == op)
                .map(|s| s.reason.as_str())
                .collect();
            let statements: Vec<&str> = rs
                .map(|s| s.statements.iter().map(|st| st.sql.as_str()).collect())
                .unwrap_or_default();
            assert!(
                !statements.is_empty() || !skipped.is_empty(),
                "{} {op} on {}: neither rendered nor skipped",
                rendered.dialect,
                rt.table
            );
            let expect = expectation(&rendered.engine_catalog, pt, ps);
            for sql in statements {
                out.push(json!({"operation": op, "sql": sql, "expect": expect}));
            }
            for reason in skipped {
                out.push(json!({"operation": op, "table": rt.table, "skipped": reason}));
            }
        }
    }
    out
}

fn lines(records: &[Value]) -> String {
    let mut out = String::new();
    for r in records {
        out.push_str(&serde_json::to_string(r).unwrap());
        out.push('\n');
    }
    out
}

fn trino_options(catalog: &str) -> TrinoOptions {
    TrinoOptions::new(catalog, 480)
}

fn spark_options(catalog: &str) -> SparkOptions {
    SparkOptions::new(catalog, Version::new(3, 5, 9), Version::new(1, 10, 2))
}

/// The corpus plan: each hostile string as a table, a namespace and a nested namespace level.
fn corpus_plan(hostile: &[String]) -> MaintenancePlan {
    let mut tables = Vec::new();
    for (i, s) in hostile.iter().enumerate() {
        tables.push(table_named(s));
        tables.push(in_namespace(i, s));
        tables.push(nested(s));
    }
    plan(tables)
}

/// A small plan rendered once per hostile engine catalog.
fn catalog_plan() -> MaintenancePlan {
    plan(vec![table(
        &["db"],
        "t",
        vec![
            step(
                rewrite(json!({"kind": "bin_pack"})),
                one_partition("c", "v"),
            ),
            step(
                json!({"operation": "compute_statistics", "columns": ["c"]}),
                whole(),
            ),
            step(
                json!({"operation": "expire_snapshots", "older_than_ms": NOW - 7 * DAY, "retain_last": 1, "retention_ms": 7 * DAY}),
                whole(),
            ),
        ],
    )])
}

#[test]
fn render_hostile_corpus() {
    let hostile = hostile_strings();
    let corpus = corpus_plan(&hostile);
    let per_catalog = catalog_plan();
    for engine in ["trino", "spark"] {
        let dialect = |catalog: &str| -> cryo_core::Result<Box<dyn Dialect>> {
            Ok(if engine == "trino" {
                Box::new(TrinoDialect::new(trino_options(catalog))?)
            } else {
                Box::new(SparkDialect::new(spark_options(catalog))?)
            })
        };
        let main = dialect("lake").unwrap();
        let rendered = render_plan(&corpus, main.as_ref()).unwrap();
        let mut all = records(&corpus, &rendered);
        let mut script = rendered.to_script();
        for s in &hostile {
            match dialect(s) {
                Ok(d) => {
                    let r = render_plan(&per_catalog, d.as_ref()).unwrap();
                    all.extend(records(&per_catalog, &r));
                    script.push_str(&r.to_script());
                }
                // A catalog the options refuse is a validation error naming no statement.
                Err(e) => {
                    assert!(
                        matches!(e, Error::Validation { .. }),
                        "{engine} catalog {s:?}: {e}"
                    );
                    all.push(json!({"catalog": s, "refused": e.to_string()}));
                }
            }
        }
        // Names no engine can address (an empty part) are refused, never emitted.
        for r in &all {
            if let Some(expect) = r.get("expect") {
                let parts = std::iter::once(&expect["catalog"])
                    .chain(expect["namespace"].as_array().unwrap())
                    .chain(std::iter::once(&expect["name"]));
                for p in parts {
                    assert_ne!(
                        p, "",
                        "{engine}: an empty name part was emitted: {}",
                        r["sql"]
                    );
                }
            }
        }
        let statements = all.iter().filter(|r| r.get("sql").is_some()).count();
        assert!(statements > 400, "{engine}: only {statements} statements");
        check_golden(&format!("golden/inject/{engine}.jsonl"), &lines(&all));
        // The reviewable script too (Trino's lexer splits it back into the statements).
        if engine == "trino" {
            check_golden("golden/inject/trino.sql", &script);
        }
    }
}
