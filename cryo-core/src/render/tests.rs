//! Unit tests of the render rules: quoting, literals, predicates, combination, gates, floors.
#![allow(clippy::unwrap_used)] // Reason: a failed unwrap is the test failure.
#![allow(clippy::needless_pass_by_value)] // Reason: predicates are built inline at each call.
#![allow(clippy::too_many_lines)] // Reason: table-driven tests read best in one piece.

use super::*;
use crate::catalog::Namespace;
use crate::grade::Grade;
use crate::plan::{
    Chunk, EqualityDeleteMethod, Literal, PartitionTarget, PredicateKind, RewriteStrategy,
    TablePlan,
};

const DAY: i64 = 86_400_000;
const NOW: i64 = 1_780_272_000_000; // 2026-06-01T00:00:00Z

fn trino(version: u32) -> TrinoDialect {
    TrinoDialect::new(TrinoOptions::new("lake", version)).unwrap()
}

fn spark_v(spark: (u32, u32), iceberg: (u32, u32, u32)) -> SparkDialect {
    SparkDialect::new(SparkOptions::new(
        "lake",
        Version::new(spark.0, spark.1, 0),
        Version::new(iceberg.0, iceberg.1, iceberg.2),
    ))
    .unwrap()
}

fn spark() -> SparkDialect {
    spark_v((3, 5), (1, 10, 2))
}

fn fp(column: &str, column_type: &str, transform: &str, kind: PredicateKind) -> FieldPredicate {
    FieldPredicate {
        column: column.into(),
        column_type: column_type.into(),
        transform: transform.into(),
        kind,
    }
}

fn eq(column: &str, column_type: &str, value: Literal) -> FieldPredicate {
    fp(column, column_type, "identity", PredicateKind::Eq { value })
}

fn day(column: &str, lo: &str, hi: &str) -> FieldPredicate {
    fp(
        column,
        "timestamptz",
        "day",
        PredicateKind::Range {
            lower: Literal::TimestampTz(lo.into()),
            upper: Literal::TimestampTz(hi.into()),
        },
    )
}

fn part(path: &str, predicate: Vec<FieldPredicate>) -> PartitionTarget {
    PartitionTarget {
        spec_id: 0,
        path: path.into(),
        predicate,
        files: 3,
        bytes: 300,
        score: 1.0,
    }
}

fn chunk(index: u32, partitions: Vec<PartitionTarget>) -> Chunk {
    Chunk {
        index,
        whole_table: partitions.is_empty(),
        partitions,
        input_files: 3,
        input_bytes: 300,
        expected_output_files: 1,
    }
}

fn step(params: StepParams, chunks: Vec<Chunk>) -> PlannedStep {
    PlannedStep {
        operation: params.operation(),
        params,
        chunks,
        because: vec![],
        saving_usd_month: 0.0,
    }
}

fn binpack() -> StepParams {
    StepParams::RewriteDataFiles {
        strategy: RewriteStrategy::BinPack,
        target_file_size_bytes: 128 << 20,
        min_file_size_bytes: 96 << 20,
        max_file_size_bytes: 230 << 20,
        min_input_files: 5,
        delete_file_threshold: 1,
    }
}

fn table(name: &str, steps: Vec<PlannedStep>) -> TablePlan {
    TablePlan {
        table: TableId::new(Namespace::new(["db"]), name),
        table_uuid: "u".into(),
        base_snapshot_id: Some(1),
        base_metadata_location: None,
        format_version: 2,
        grade: Grade::F,
        score: 10,
        steps,
        skipped: vec![],
        policy: None,
    }
}

fn render_one(d: &dyn Dialect, steps: Vec<PlannedStep>) -> RenderedTable {
    render_table(&table("t", steps), d, NOW)
}

fn sqls(t: &RenderedTable) -> Vec<&str> {
    t.steps
        .iter()
        .flat_map(|s| s.statements.iter().map(|x| x.sql.as_str()))
        .collect()
}

fn notes(t: &RenderedTable) -> Vec<&str> {
    t.steps
        .iter()
        .flat_map(|s| s.notes.iter().map(String::as_str))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Quoting and escaping
// ---------------------------------------------------------------------------------------------

#[test]
fn trino_quotes_identifiers_and_strings() {
    let d = trino(480);
    assert_eq!(d.quote_ident("a\"b"), "\"a\"\"b\"");
    assert_eq!(d.quote_ident("x`y.z"), "\"x`y.z\"");
    assert_eq!(d.quote_string("it's"), "'it''s'");
    assert_eq!(
        d.quote_string("'; DROP TABLE x; --"),
        "'''; DROP TABLE x; --'"
    );
    // Backslashes are ordinary characters in Trino strings.
    assert_eq!(d.quote_string("a\\b"), "'a\\b'");
    // Control characters switch to a Unicode literal, so no statement spans lines.
    assert_eq!(d.quote_string("a\nb'\\"), "U&'a\\000Ab''\\\\'");
    assert_eq!(d.quote_string("été 日本 🙂"), "'été 日本 🙂'");
    let t = TableId::new(Namespace::new(["my.ns"]), "a\"b");
    assert_eq!(d.table_name(&t), "\"lake\".\"my.ns\".\"a\"\"b\"");
    let nested = TableId::new(Namespace::new(["a", "b"]), "T");
    assert_eq!(d.table_name(&nested), "\"lake\".\"a.b\".\"T\"");
    let n = d.table_notes(&nested);
    assert!(n.iter().any(|s| s.contains("single Trino schema")), "{n:?}");
    // "T" is refused unless the catalog matches names case-insensitively; then it gets a note.
    assert!(!n.iter().any(|s| s.contains("lower case")), "{n:?}");
    assert!(
        d.unaddressable(&nested)
            .is_some_and(|r| r.contains("lower case"))
    );
    let lenient = TrinoDialect::new(TrinoOptions {
        case_insensitive_name_matching: true,
        ..TrinoOptions::new("lake", 480)
    })
    .unwrap();
    assert!(lenient.unaddressable(&nested).is_none());
    let n = lenient.table_notes(&nested);
    assert!(n.iter().any(|s| s.contains("lower case")), "{n:?}");
    assert!(
        d.table_notes(&TableId::new(Namespace::new(["db"]), "t"))
            .is_empty()
    );
}

#[test]
fn spark_quotes_identifiers_and_strings() {
    let d = spark();
    assert_eq!(d.quote_ident("we`ird"), "`we``ird`");
    // Never `''`: Spark reads 'it''s' as two adjacent literals ('its').
    assert_eq!(d.quote_string("it's"), "'it\\'s'");
    assert_eq!(d.quote_string("a\\b"), "'a\\\\b'");
    assert_eq!(
        d.quote_string("l1\nl2\tx\r\u{1}"),
        "'l1\\nl2\\tx\\r\\u0001'"
    );
    assert_eq!(
        d.quote_string("'; DROP TABLE x; --"),
        "'\\'; DROP TABLE x; --'"
    );
    let t = TableId::new(Namespace::new(["my.ns"]), "a`b\"c");
    assert_eq!(d.table_name(&t), "`lake`.`my.ns`.`a``b\"c`");
    assert_eq!(d.column("a.b"), "`a`.`b`");
}

#[test]
fn spark_where_is_escaped_twice() {
    let d = spark();
    let t = render_one(
        &d,
        vec![step(
            binpack(),
            vec![chunk(
                0,
                vec![part(
                    "c=x",
                    vec![eq(
                        "c",
                        "string",
                        Literal::String("it's \\ '; DROP TABLE x; --".into()),
                    )],
                )],
            )],
        )],
    );
    let sql = sqls(&t)[0];
    // Inner literal: 'it\'s \\ \'; DROP…'; then the whole where is escaped again.
    assert!(
        sql.contains(r"where => '`c` = \'it\\\'s \\\\ \\\'; DROP TABLE x; --\''"),
        "{sql}"
    );
    assert!(sql.starts_with("CALL `lake`.system.rewrite_data_files(table => '`lake`.`db`.`t`', strategy => 'binpack', where => "));
}

// ---------------------------------------------------------------------------------------------
// Literals
// ---------------------------------------------------------------------------------------------

fn trino_term(p: FieldPredicate) -> std::result::Result<String, String> {
    trino(480).field_predicate(&p).map(|t| t.sql)
}

fn spark_term(p: FieldPredicate) -> std::result::Result<String, String> {
    spark().field_predicate(&p).map(|t| t.sql)
}

#[test]
fn literals_per_type() {
    let cases: Vec<(FieldPredicate, &str, &str)> = vec![
        (
            eq("b", "boolean", Literal::Boolean(true)),
            "\"b\" = true",
            "`b` = true",
        ),
        (
            eq("i", "int", Literal::Integer(-42)),
            "\"i\" = -42",
            "`i` = -42",
        ),
        (
            eq("l", "long", Literal::Integer(i64::MIN)),
            "\"l\" = -9223372036854775808",
            "`l` = -9223372036854775808",
        ),
        (
            eq("f", "float", Literal::Float(1.5)),
            "\"f\" = REAL '1.5'",
            "`f` = 1.5F",
        ),
        (
            eq("d", "double", Literal::Float(-0.25)),
            "\"d\" = DOUBLE '-0.25'",
            "`d` = -0.25D",
        ),
        (
            eq("m", "decimal(12,2)", Literal::Decimal("-123.40".into())),
            "\"m\" = DECIMAL '-123.40'",
            "`m` = -123.40BD",
        ),
        (
            eq("s", "string", Literal::String("a'b".into())),
            "\"s\" = 'a''b'",
            "`s` = 'a\\'b'",
        ),
        (
            eq(
                "u",
                "uuid",
                Literal::String("123E4567-e89b-12d3-a456-426614174000".into()),
            ),
            "\"u\" = UUID '123e4567-e89b-12d3-a456-426614174000'",
            "`u` = '123e4567-e89b-12d3-a456-426614174000'",
        ),
        (
            eq("bin", "binary", Literal::String("00ff".into())),
            "\"bin\" = X'00FF'",
            "`bin` = X'00FF'",
        ),
        (
            eq("fx", "fixed[2]", Literal::String("abcd".into())),
            "\"fx\" = X'ABCD'",
            "`fx` = X'ABCD'",
        ),
        (
            eq("dt", "date", Literal::Date("2024-02-29".into())),
            "\"dt\" = DATE '2024-02-29'",
            "`dt` = DATE '2024-02-29'",
        ),
        (
            eq(
                "ts",
                "timestamp",
                Literal::Timestamp("2024-01-31 10:00:00.5".into()),
            ),
            "\"ts\" = TIMESTAMP '2024-01-31 10:00:00.500000'",
            "`ts` = TIMESTAMP_NTZ '2024-01-31 10:00:00.5'",
        ),
        (
            eq(
                "tz",
                "timestamptz",
                Literal::TimestampTz("2024-01-31 10:00:00".into()),
            ),
            "\"tz\" = TIMESTAMP '2024-01-31 10:00:00.000000 UTC'",
            "`tz` = TIMESTAMP '2024-01-31 10:00:00+00:00'",
        ),
    ];
    for (p, t, s) in cases {
        assert_eq!(trino_term(p.clone()).unwrap(), t);
        assert_eq!(spark_term(p).unwrap(), s);
    }
    // Types only one engine has.
    let time = eq("tm", "time", Literal::String("10:30:00".into()));
    assert_eq!(
        trino_term(time.clone()).unwrap(),
        "\"tm\" = TIME '10:30:00.000000'"
    );
    assert!(spark_term(time).unwrap_err().contains("no TIME type"));
    let ns = eq(
        "n",
        "timestamptz_ns",
        Literal::TimestampTz("2024-01-31 10:00:00.123456789".into()),
    );
    assert_eq!(
        trino_term(ns.clone()).unwrap(),
        "\"n\" = TIMESTAMP '2024-01-31 10:00:00.123456789 UTC'"
    );
    assert!(spark_term(ns).unwrap_err().contains("nanosecond"));
}

#[test]
fn malformed_or_mismatched_literals_are_dropped_not_rendered() {
    for p in [
        eq("d", "date", Literal::Date("2024-13-01".into())),
        eq("d", "date", Literal::Date("2024-01-01' OR 1=1 --".into())),
        eq(
            "m",
            "decimal(5,2)",
            Literal::Decimal("1; DROP TABLE t".into()),
        ),
        eq("u", "uuid", Literal::String("not-a-uuid".into())),
        eq("b", "binary", Literal::String("xyz".into())),
        eq(
            "t",
            "timestamp",
            Literal::TimestampTz("2024-01-01 00:00:00".into()),
        ),
        eq(
            "t",
            "timestamp",
            Literal::Timestamp("2024-01-01 00:00:00.1234567".into()),
        ),
        eq("i", "int", Literal::String("1".into())),
        eq("f", "double", Literal::Float(f64::NAN)),
        eq("f", "double", Literal::Float(f64::INFINITY)),
        eq("x", "struct<a:int>", Literal::Integer(1)),
    ] {
        let t = trino_term(p.clone()).unwrap_err();
        let s = spark_term(p).unwrap_err();
        assert!(t.starts_with("predicate on ") && t == s, "{t} / {s}");
    }
}

// ---------------------------------------------------------------------------------------------
// Predicate kinds
// ---------------------------------------------------------------------------------------------

#[test]
fn predicate_kinds() {
    let null = fp("c", "string", "identity", PredicateKind::IsNull);
    assert_eq!(trino_term(null.clone()).unwrap(), "\"c\" IS NULL");
    assert_eq!(spark_term(null).unwrap(), "`c` IS NULL");
    // A null partition of a time transform is still enforceable by Trino.
    assert_eq!(
        trino_term(fp("ts", "timestamptz", "day", PredicateKind::IsNull)).unwrap(),
        "\"ts\" IS NULL"
    );

    let d = day("ts", "2024-01-31 00:00:00", "2024-02-01 00:00:00");
    assert_eq!(
        trino_term(d.clone()).unwrap(),
        "\"ts\" >= TIMESTAMP '2024-01-31 00:00:00.000000 UTC' AND \"ts\" < TIMESTAMP '2024-02-01 00:00:00.000000 UTC'"
    );
    assert_eq!(
        spark_term(d).unwrap(),
        "`ts` >= TIMESTAMP '2024-01-31 00:00:00+00:00' AND `ts` < TIMESTAMP '2024-02-01 00:00:00+00:00'"
    );
    let month = fp(
        "d",
        "date",
        "month",
        PredicateKind::Range {
            lower: Literal::Date("2024-02-01".into()),
            upper: Literal::Date("2024-03-01".into()),
        },
    );
    assert_eq!(
        trino_term(month.clone()).unwrap(),
        "\"d\" >= DATE '2024-02-01' AND \"d\" < DATE '2024-03-01'"
    );
    assert_eq!(
        spark_term(month).unwrap(),
        "`d` >= DATE '2024-02-01' AND `d` < DATE '2024-03-01'"
    );
    let trunc = fp(
        "n",
        "long",
        "truncate[10]",
        PredicateKind::Range {
            lower: Literal::Integer(-10),
            upper: Literal::Integer(0),
        },
    );
    assert_eq!(
        trino_term(trunc.clone()).unwrap(),
        "\"n\" >= -10 AND \"n\" < 0"
    );
    assert_eq!(spark_term(trunc).unwrap(), "`n` >= -10 AND `n` < 0");

    let prefix = fp(
        "s",
        "string",
        "truncate[3]",
        PredicateKind::StartsWith {
            prefix: "ab'%_".into(),
        },
    );
    assert!(trino_term(prefix.clone()).unwrap_err().contains("prefix"));
    // startswith, not LIKE: '%' and '_' in the value stay literal.
    assert_eq!(spark_term(prefix).unwrap(), "startswith(`s`, 'ab\\'%_')");

    let bucket = fp(
        "user_id",
        "long",
        "bucket[8]",
        PredicateKind::Bucket {
            buckets: 8,
            value: 3,
        },
    );
    assert!(
        trino_term(bucket.clone())
            .unwrap_err()
            .contains("bucket[8]")
    );
    assert_eq!(
        spark_term(bucket.clone()).unwrap(),
        "`lake`.system.bucket(8, `user_id`) = 3"
    );
    assert!(
        spark_v((3, 5), (1, 9, 0))
            .field_predicate(&bucket)
            .unwrap_err()
            .contains("bucket")
    );

    let void = fp("v", "long", "void", PredicateKind::IsNull);
    assert!(trino_term(void.clone()).is_err() && spark_term(void).is_err());

    let nested = eq("a.b", "int", Literal::Integer(1));
    assert!(trino_term(nested.clone()).unwrap_err().contains("nested"));
    assert_eq!(spark_term(nested).unwrap(), "`a`.`b` = 1");
}

#[test]
fn trino_refuses_what_it_cannot_enforce() {
    // Misaligned bounds.
    let off = day("ts", "2024-01-31 00:00:00.000001", "2024-02-01 00:00:00");
    assert!(
        trino_term(off.clone())
            .unwrap_err()
            .contains("partition boundaries")
    );
    // Spark's where is a row filter: any range is fine.
    assert!(spark_term(off).is_ok());
    let month_mid = fp(
        "d",
        "date",
        "month",
        PredicateKind::Range {
            lower: Literal::Date("2024-02-02".into()),
            upper: Literal::Date("2024-03-01".into()),
        },
    );
    assert!(trino_term(month_mid).is_err());
    let trunc_off = fp(
        "n",
        "int",
        "truncate[10]",
        PredicateKind::Range {
            lower: Literal::Integer(5),
            upper: Literal::Integer(15),
        },
    );
    assert!(trino_term(trunc_off).is_err());
    let trunc_dec = fp(
        "m",
        "decimal(9,2)",
        "truncate[100]",
        PredicateKind::Range {
            lower: Literal::Decimal("1.00".into()),
            upper: Literal::Decimal("2.00".into()),
        },
    );
    assert!(trino_term(trunc_dec).unwrap_err().contains("integer"));
    // Equality through a non-identity transform is a point, never a partition.
    let eq_trunc = fp(
        "s",
        "string",
        "truncate[4]",
        PredicateKind::Eq {
            value: Literal::String("ab".into()),
        },
    );
    assert!(
        trino_term(eq_trunc.clone())
            .unwrap_err()
            .contains("identity")
    );
    assert_eq!(spark_term(eq_trunc).unwrap(), "`s` = 'ab'");
    // A range through an identity partition is enforceable as is.
    let id_range = fp(
        "n",
        "int",
        "identity",
        PredicateKind::Range {
            lower: Literal::Integer(3),
            upper: Literal::Integer(7),
        },
    );
    assert_eq!(trino_term(id_range).unwrap(), "\"n\" >= 3 AND \"n\" < 7");
}

// ---------------------------------------------------------------------------------------------
// Chunks: combination, drops, skips
// ---------------------------------------------------------------------------------------------

fn cat(v: &str) -> FieldPredicate {
    eq("category", "string", Literal::String(v.into()))
}

fn d1() -> FieldPredicate {
    day("ts", "2024-01-01 00:00:00", "2024-01-02 00:00:00")
}

fn d2() -> FieldPredicate {
    day("ts", "2024-01-02 00:00:00", "2024-01-03 00:00:00")
}

#[test]
fn single_column_chunks_are_one_or() {
    let s = step(
        binpack(),
        vec![chunk(
            0,
            vec![part("c=a", vec![cat("a")]), part("c=b", vec![cat("b")])],
        )],
    );
    let t = render_one(&trino(480), vec![s.clone()]);
    assert_eq!(
        sqls(&t),
        vec![
            "ALTER TABLE \"lake\".\"db\".\"t\" EXECUTE optimize(file_size_threshold => '96MB') WHERE \"category\" = 'a' OR \"category\" = 'b'"
        ]
    );
    assert_eq!(t.steps[0].statements[0].partitions, vec!["c=a", "c=b"]);
    let t = render_one(&spark(), vec![s]);
    assert!(
        sqls(&t)[0].contains("where => '`category` = \\'a\\' OR `category` = \\'b\\''"),
        "{}",
        sqls(&t)[0]
    );
}

#[test]
fn trino_cross_products_become_and_of_ors() {
    let parts = vec![
        part("d1/a", vec![d1(), cat("a")]),
        part("d1/b", vec![d1(), cat("b")]),
        part("d2/a", vec![d2(), cat("a")]),
        part("d2/b", vec![d2(), cat("b")]),
    ];
    let t = render_one(
        &trino(480),
        vec![step(binpack(), vec![chunk(0, parts.clone())])],
    );
    assert_eq!(sqls(&t).len(), 1);
    assert!(
        sqls(&t)[0].ends_with(
            "WHERE ((\"ts\" >= TIMESTAMP '2024-01-01 00:00:00.000000 UTC' AND \"ts\" < TIMESTAMP '2024-01-02 00:00:00.000000 UTC') OR (\"ts\" >= TIMESTAMP '2024-01-02 00:00:00.000000 UTC' AND \"ts\" < TIMESTAMP '2024-01-03 00:00:00.000000 UTC')) AND (\"category\" = 'a' OR \"category\" = 'b')"
        ),
        "{}",
        sqls(&t)[0]
    );
    // Spark: one OR of the four conjunctions.
    let t = render_one(&spark(), vec![step(binpack(), vec![chunk(0, parts)])]);
    assert_eq!(sqls(&t).len(), 1);
    assert_eq!(sqls(&t)[0].matches(" OR ").count(), 3);
}

#[test]
fn trino_splits_what_is_not_a_cross_product() {
    let parts = vec![
        part("d1/a", vec![d1(), cat("a")]),
        part("d2/b", vec![d2(), cat("b")]),
    ];
    let t = render_one(
        &trino(480),
        vec![step(binpack(), vec![chunk(4, parts.clone())])],
    );
    let st = &t.steps[0].statements;
    assert_eq!(st.len(), 2);
    assert!(st.iter().all(|s| s.chunk == 4 && !s.sql.contains(" OR ")));
    assert_eq!(st[0].partitions, vec!["d1/a"]);
    assert!(notes(&t).iter().any(|n| n.contains("one statement each")));
    // Spark keeps one statement per chunk.
    let t = render_one(&spark(), vec![step(binpack(), vec![chunk(4, parts)])]);
    assert_eq!(sqls(&t).len(), 1);
    // Same columns, different sets: {d1,a}, {d1,b}, {d2,a} is not a product either.
    let three = vec![
        part("d1/a", vec![d1(), cat("a")]),
        part("d1/b", vec![d1(), cat("b")]),
        part("d2/a", vec![d2(), cat("a")]),
    ];
    let t = render_one(&trino(480), vec![step(binpack(), vec![chunk(0, three)])]);
    assert_eq!(sqls(&t).len(), 3);
}

#[test]
fn dropped_predicates_select_a_superset_and_merge() {
    let b = |v| {
        fp(
            "user_id",
            "long",
            "bucket[8]",
            PredicateKind::Bucket {
                buckets: 8,
                value: v,
            },
        )
    };
    let parts = vec![
        part("d1/a/b=1", vec![d1(), cat("a"), b(1)]),
        part("d1/a/b=2", vec![d1(), cat("a"), b(2)]),
    ];
    let t = render_one(&trino(480), vec![step(binpack(), vec![chunk(0, parts)])]);
    assert_eq!(sqls(&t).len(), 1, "identical after the drop: one statement");
    assert!(!sqls(&t)[0].contains("bucket"));
    assert_eq!(
        t.steps[0].statements[0].partitions,
        vec!["d1/a/b=1", "d1/a/b=2"]
    );
    let n = notes(&t);
    assert!(
        n.iter()
            .any(|n| n.contains("bucket[8] predicate on user_id")
                && n.contains("superset of partitions (safe)")),
        "{n:?}"
    );
    assert!(n.iter().any(|n| n.contains("share one statement")), "{n:?}");
    assert_eq!(
        n.iter().filter(|n| n.contains("bucket[8]")).count(),
        1,
        "notes are deduplicated"
    );
}

#[test]
fn nothing_expressible_never_becomes_whole_table() {
    let b = |v| {
        fp(
            "user_id",
            "long",
            "bucket[8]",
            PredicateKind::Bucket {
                buckets: 8,
                value: v,
            },
        )
    };
    // One partition keeps a predicate, the bucket-only one is left out.
    let parts = vec![part("b=1", vec![b(1)]), part("c=a", vec![cat("a")])];
    let t = render_one(&trino(480), vec![step(binpack(), vec![chunk(0, parts)])]);
    assert_eq!(sqls(&t).len(), 1);
    assert!(sqls(&t)[0].ends_with("WHERE \"category\" = 'a'"));
    assert_eq!(t.skipped.len(), 1);
    assert_eq!(t.skipped[0].partitions, vec!["b=1"]);
    assert!(
        t.skipped[0]
            .reason
            .contains("whole-table statement is never substituted"),
        "{}",
        t.skipped[0].reason
    );
    // A chunk of bucket-only partitions is skipped entirely; other chunks still render.
    let t = render_one(
        &trino(480),
        vec![step(
            binpack(),
            vec![
                chunk(0, vec![part("b=1", vec![b(1)]), part("b=2", vec![b(2)])]),
                chunk(1, vec![part("c=a", vec![cat("a")])]),
            ],
        )],
    );
    assert_eq!(sqls(&t).len(), 1);
    assert!(sqls(&t).iter().all(|s| s.contains(" WHERE ")));
    assert_eq!(
        t.skipped.len(),
        1,
        "one skip for the chunk, not one per partition as well"
    );
    assert!(t.skipped[0].chunk == Some(0) && t.skipped[0].partitions == vec!["b=1", "b=2"]);
    assert!(
        t.skipped[0]
            .reason
            .contains("never turned into a whole-table statement"),
        "{}",
        t.skipped[0].reason
    );
    // A partition without any predicate is never selected by a bare statement either.
    let t = render_one(
        &spark(),
        vec![step(binpack(), vec![chunk(0, vec![part("?", vec![])])])],
    );
    assert!(sqls(&t).is_empty());
    assert!(
        t.skipped
            .iter()
            .any(|s| s.reason.contains("gives it no predicate")),
        "{:?}",
        t.skipped
    );
}

#[test]
fn trino_filters_only_on_columns_every_spec_partitions_alike() {
    let spec = |id: i32, mut p: PartitionTarget| {
        p.spec_id = id;
        p
    };
    // Spec 0 partitions by day(ts) and category, spec 1 adds a bucket on user_id: fine.
    let b = fp(
        "user_id",
        "long",
        "bucket[8]",
        PredicateKind::Bucket {
            buckets: 8,
            value: 1,
        },
    );
    let parts = vec![
        spec(0, part("d1/a", vec![d1(), cat("a")])),
        spec(1, part("d2/a/1", vec![d2(), cat("a"), b])),
    ];
    let t = render_one(&trino(480), vec![step(binpack(), vec![chunk(0, parts)])]);
    assert_eq!(sqls(&t).len(), 1);
    assert!(sqls(&t)[0].contains("\"category\" = 'a'") && sqls(&t)[0].contains("\"ts\" >="));
    assert!(
        notes(&t)
            .iter()
            .any(|n| n.contains("several partition specs (0, 1)"))
    );
    // Spec 0 unpartitioned, spec 1 by category: Trino would refuse any WHERE on category.
    let parts = vec![
        spec(0, part("", vec![])),
        spec(1, part("c=a", vec![cat("a")])),
    ];
    let t = render_one(
        &trino(480),
        vec![step(binpack(), vec![chunk(0, parts.clone())])],
    );
    assert!(sqls(&t).is_empty(), "{:?}", sqls(&t));
    assert!(
        t.skipped[0]
            .reason
            .contains("do not all partition category the same way"),
        "{}",
        t.skipped[0].reason
    );
    // Day in one spec, hour in the other: an hour range is not a day boundary.
    let hour = fp(
        "ts",
        "timestamptz",
        "hour",
        PredicateKind::Range {
            lower: Literal::TimestampTz("2024-01-01 05:00:00".into()),
            upper: Literal::TimestampTz("2024-01-01 06:00:00".into()),
        },
    );
    let parts = vec![
        spec(0, part("d1", vec![d1()])),
        spec(1, part("h5", vec![hour])),
    ];
    let t = render_one(
        &trino(480),
        vec![step(binpack(), vec![chunk(0, parts.clone())])],
    );
    assert!(sqls(&t).is_empty());
    // Spark's where is a row filter: no such limit.
    assert_eq!(
        sqls(&render_one(
            &spark(),
            vec![step(binpack(), vec![chunk(0, parts.clone())])]
        ))
        .len(),
        1
    );
}

#[test]
fn whole_table_chunks_and_malformed_plans() {
    // A whole-table chunk: no WHERE, by the plan's own decision.
    let t = render_one(&trino(480), vec![step(binpack(), vec![chunk(0, vec![])])]);
    assert_eq!(
        sqls(&t),
        vec!["ALTER TABLE \"lake\".\"db\".\"t\" EXECUTE optimize(file_size_threshold => '96MB')"]
    );
    // Whole table and partitions at once: ambiguous, skipped.
    let mut c = chunk(0, vec![part("c=a", vec![cat("a")])]);
    c.whole_table = true;
    let t = render_one(&spark(), vec![step(binpack(), vec![c])]);
    assert!(sqls(&t).is_empty() && t.skipped[0].reason.contains("ambiguous"));
    // Partitioned chunk without partitions: never a whole-table statement.
    let mut c = chunk(0, vec![]);
    c.whole_table = false;
    let t = render_one(&trino(480), vec![step(binpack(), vec![c])]);
    assert!(sqls(&t).is_empty() && t.skipped[0].reason.contains("without partitions"));
    // Params of another operation.
    let mut s = step(binpack(), vec![chunk(0, vec![])]);
    s.operation = Operation::RewriteManifests;
    let t = render_one(&spark(), vec![s]);
    assert!(sqls(&t).is_empty() && t.skipped[0].reason.contains("malformed"));
    // A table-wide operation with partition chunks.
    let s = step(
        StepParams::RewriteManifests {
            target_manifest_size_bytes: 8 << 20,
        },
        vec![chunk(0, vec![part("c=a", vec![cat("a")])])],
    );
    let t = render_one(&trino(480), vec![s]);
    assert!(
        sqls(&t).is_empty()
            && t.skipped[0]
                .reason
                .contains("exactly one whole-table chunk")
    );
    // Unknown plan format.
    let plan: MaintenancePlan = serde_json::from_value(serde_json::json!({
        "format_version": 99, "catalog": "c", "created_at_ms": 0, "tables": [], "skipped_tables": [], "fingerprint": ""
    }))
    .unwrap();
    let err = render_plan(&plan, &spark()).unwrap_err();
    assert_eq!(err.code(), "render");
}

// ---------------------------------------------------------------------------------------------
// Every operation
// ---------------------------------------------------------------------------------------------

fn expire(retention_days: i64, retain_last: u32) -> PlannedStep {
    step(
        StepParams::ExpireSnapshots {
            older_than_ms: NOW - retention_days * DAY,
            retain_last,
            retention_ms: retention_days * DAY,
        },
        vec![chunk(0, vec![])],
    )
}

fn orphans(retention_ms: i64, dry_run: bool) -> PlannedStep {
    step(
        StepParams::RemoveOrphanFiles {
            older_than_ms: NOW - retention_ms,
            retention_ms,
            dry_run,
        },
        vec![chunk(0, vec![])],
    )
}

#[test]
fn every_operation_for_trino() {
    let t = render_one(
        &trino(480),
        vec![
            step(
                StepParams::ConvertEqualityDeletes {
                    method: EqualityDeleteMethod::Rewrite,
                    why: String::new(),
                },
                vec![chunk(0, vec![part("c=a", vec![cat("a")])])],
            ),
            step(
                StepParams::RewritePositionDeletes { min_input_files: 2 },
                vec![chunk(0, vec![])],
            ),
            step(binpack(), vec![chunk(0, vec![])]),
            step(
                StepParams::ComputeStatistics {
                    columns: vec!["a".into(), "B'c".into()],
                },
                vec![chunk(0, vec![])],
            ),
            step(
                StepParams::RewriteManifests {
                    target_manifest_size_bytes: 8 << 20,
                },
                vec![chunk(0, vec![])],
            ),
            expire(7, 5),
            orphans(7 * DAY, false),
        ],
    );
    let tn = "\"lake\".\"db\".\"t\"";
    assert_eq!(
        sqls(&t),
        vec![
            format!(
                "ALTER TABLE {tn} EXECUTE optimize(file_size_threshold => '1PB') WHERE \"category\" = 'a'"
            ),
            format!("ALTER TABLE {tn} EXECUTE optimize(file_size_threshold => '96MB')"),
            format!("ANALYZE {tn} WITH (columns = ARRAY['a', 'b''c'])"),
            format!("ALTER TABLE {tn} EXECUTE optimize_manifests"),
            format!(
                "ALTER TABLE {tn} EXECUTE expire_snapshots(retention_threshold => '7d', retain_last => 5)"
            ),
            format!("ALTER TABLE {tn} EXECUTE remove_orphan_files(retention_threshold => '7d')"),
        ]
    );
    assert_eq!(t.skipped.len(), 1);
    assert_eq!(t.skipped[0].operation, Operation::RewritePositionDeletes);
    assert!(
        notes(&t).iter().any(|n| n.contains("lower case")),
        "Trino's columns are lower case: {:?}",
        notes(&t)
    );
    let stats = render_one(
        &trino(480),
        vec![step(
            StepParams::ComputeStatistics { columns: vec![] },
            vec![chunk(0, vec![])],
        )],
    );
    assert_eq!(sqls(&stats), vec![format!("ANALYZE {tn}")]);
}

#[test]
fn every_operation_for_spark() {
    let t = render_one(
        &spark(),
        vec![
            step(
                StepParams::ConvertEqualityDeletes {
                    method: EqualityDeleteMethod::Rewrite,
                    why: String::new(),
                },
                vec![chunk(0, vec![])],
            ),
            step(
                StepParams::RewritePositionDeletes { min_input_files: 2 },
                vec![chunk(0, vec![part("c=a", vec![cat("a")])])],
            ),
            step(binpack(), vec![chunk(0, vec![])]),
            step(
                StepParams::ComputeStatistics {
                    columns: vec!["a".into()],
                },
                vec![chunk(0, vec![])],
            ),
            step(
                StepParams::RewriteManifests {
                    target_manifest_size_bytes: 8 << 20,
                },
                vec![chunk(0, vec![])],
            ),
            expire(7, 5),
            orphans(3 * DAY, true),
        ],
    );
    let c = "CALL `lake`.system.";
    let tbl = "table => '`lake`.`db`.`t`'";
    assert_eq!(
        sqls(&t),
        vec![
            format!(
                "{c}rewrite_data_files({tbl}, strategy => 'binpack', options => map('rewrite-all', 'true', 'remove-dangling-deletes', 'true'))"
            ),
            format!(
                "{c}rewrite_position_delete_files({tbl}, where => '`category` = \\'a\\'', options => map('min-input-files', '2'))"
            ),
            format!(
                "{c}rewrite_data_files({tbl}, strategy => 'binpack', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241172480', 'min-input-files', '5', 'delete-file-threshold', '1'))"
            ),
            format!("{c}compute_table_stats({tbl}, columns => array('a'))"),
            format!("{c}rewrite_manifests({tbl})"),
            format!(
                "{c}expire_snapshots({tbl}, older_than => TIMESTAMP '2026-05-25 00:00:00.000+00:00', retain_last => 5)"
            ),
            format!(
                "{c}remove_orphan_files({tbl}, older_than => TIMESTAMP '2026-05-29 00:00:00.000+00:00', dry_run => true)"
            ),
        ]
    );
    assert!(t.skipped.is_empty(), "{:?}", t.skipped);
}

#[test]
fn spark_statistics_leave_out_backtick_columns() {
    let stats = |columns: &[&str]| {
        render_one(
            &spark(),
            vec![step(
                StepParams::ComputeStatistics {
                    columns: columns.iter().map(|c| (*c).to_string()).collect(),
                },
                vec![chunk(0, vec![])],
            )],
        )
    };
    // compute_table_stats resolves names with Spark's col(): a backtick cannot pass (on real Spark).
    let t = stats(&["a`b", "c\"d"]);
    assert_eq!(
        sqls(&t),
        vec![
            "CALL `lake`.system.compute_table_stats(table => '`lake`.`db`.`t`', columns => array('c\"d'))"
                .to_string()
        ]
    );
    assert!(
        notes(&t)
            .iter()
            .any(|n| n.contains("`a`b`") && n.contains("left out"))
    );
    // Only refused columns: skipped, never widened to every column.
    let t = stats(&["a`b"]);
    assert!(sqls(&t).is_empty());
    assert!(t.skipped[0].reason.contains("without columns every column"));
}

#[test]
fn spark_strategies() {
    let with = |strategy| {
        let StepParams::RewriteDataFiles {
            target_file_size_bytes,
            min_file_size_bytes,
            max_file_size_bytes,
            min_input_files,
            delete_file_threshold,
            ..
        } = binpack()
        else {
            unreachable!()
        };
        step(
            StepParams::RewriteDataFiles {
                strategy,
                target_file_size_bytes,
                min_file_size_bytes,
                max_file_size_bytes,
                min_input_files,
                delete_file_threshold,
            },
            vec![chunk(0, vec![])],
        )
    };
    let t = render_one(
        &spark(),
        vec![with(RewriteStrategy::ZOrder {
            columns: vec!["a".into(), "b\"c".into()],
        })],
    );
    assert!(
        sqls(&t)[0].contains("strategy => 'sort', sort_order => 'zorder(`a`,`b\"c`)'"),
        "{}",
        sqls(&t)[0]
    );
    // Iceberg's z-order resolves names with Dataset.col: a backtick is refused there (on real Spark).
    let t = render_one(
        &spark(),
        vec![with(RewriteStrategy::ZOrder {
            columns: vec!["a".into(), "b`c".into()],
        })],
    );
    assert!(
        sqls(&t).is_empty() && t.skipped[0].reason.contains("Dataset.col"),
        "{:?}",
        t.skipped
    );
    let t = render_one(
        &spark(),
        vec![with(RewriteStrategy::Sort {
            columns: vec![
                "a DESC NULLS LAST".into(),
                "s.x asc".into(),
                "c nulls first".into(),
            ],
        })],
    );
    assert!(
        sqls(&t)[0].contains(
            "strategy => 'sort', sort_order => '`a` DESC NULLS LAST, `s`.`x` ASC, `c` NULLS FIRST'"
        ),
        "{}",
        sqls(&t)[0]
    );
    let t = render_one(
        &spark(),
        vec![with(RewriteStrategy::Sort { columns: vec![] })],
    );
    assert!(sqls(&t)[0].contains("strategy => 'sort', options"));
    assert!(notes(&t).iter().any(|n| n.contains("table's sort order")));
    let t = render_one(
        &spark(),
        vec![with(RewriteStrategy::Sort {
            columns: vec!["   ".into()],
        })],
    );
    assert!(sqls(&t).is_empty() && t.skipped[0].reason.contains("names no column"));
    // A bare keyword is a column of that name, not a direction.
    let t = render_one(
        &spark(),
        vec![with(RewriteStrategy::Sort {
            columns: vec!["DESC".into()],
        })],
    );
    assert!(
        sqls(&t)[0].contains("sort_order => '`DESC`'"),
        "{}",
        sqls(&t)[0]
    );
    // Trino: bin-pack only.
    for s in [
        RewriteStrategy::ZOrder {
            columns: vec!["a".into(), "b".into()],
        },
        RewriteStrategy::Sort {
            columns: vec!["a".into()],
        },
    ] {
        let t = render_one(&trino(480), vec![with(s)]);
        assert!(sqls(&t).is_empty());
        assert!(
            t.skipped[0].reason.contains("Spark"),
            "{}",
            t.skipped[0].reason
        );
    }
    let t = render_one(
        &trino(480),
        vec![with(RewriteStrategy::Sort { columns: vec![] })],
    );
    assert_eq!(sqls(&t).len(), 1);
    assert!(notes(&t).iter().any(|n| n.contains("sorted_by")));
    // Spark refuses sizes out of order: skip rather than render.
    let bad = step(
        StepParams::RewriteDataFiles {
            strategy: RewriteStrategy::BinPack,
            target_file_size_bytes: 100,
            min_file_size_bytes: 100,
            max_file_size_bytes: 200,
            min_input_files: 5,
            delete_file_threshold: 1,
        },
        vec![chunk(0, vec![])],
    );
    let t = render_one(&spark(), vec![bad]);
    assert!(
        sqls(&t).is_empty()
            && t.skipped[0]
                .reason
                .contains("min-file-size-bytes < target-file-size-bytes")
    );
}

// ---------------------------------------------------------------------------------------------
// Version gates and retention floors
// ---------------------------------------------------------------------------------------------

#[test]
fn trino_version_gates() {
    let manifests = || {
        step(
            StepParams::RewriteManifests {
                target_manifest_size_bytes: 8 << 20,
            },
            vec![chunk(0, vec![])],
        )
    };
    let t = render_one(&trino(469), vec![manifests()]);
    assert!(sqls(&t).is_empty());
    assert!(
        t.skipped[0]
            .reason
            .contains("Trino 469 has no optimize_manifests (added in Trino 470)")
    );
    assert_eq!(render_one(&trino(470), vec![manifests()]).steps.len(), 1);

    let t = render_one(&trino(478), vec![expire(7, 5)]);
    assert!(
        sqls(&t).is_empty() && t.skipped[0].reason.contains("retain_last"),
        "{:?}",
        t.skipped
    );
    let t = render_one(&trino(478), vec![expire(7, 1)]);
    assert_eq!(
        sqls(&t),
        vec![
            "ALTER TABLE \"lake\".\"db\".\"t\" EXECUTE expire_snapshots(retention_threshold => '7d')"
        ]
    );
    assert!(notes(&t).iter().any(|n| n.contains("not passed")));
    let t = render_one(&trino(479), vec![expire(7, 0)]);
    assert!(sqls(&t)[0].ends_with("retain_last => 1)"));
}

#[test]
fn trino_retention_floors_and_dry_run() {
    // Below Trino's default 7d floor: a skip, never a statement Trino refuses.
    let t = render_one(&trino(480), vec![expire(5, 1), orphans(3 * DAY, false)]);
    assert!(sqls(&t).is_empty());
    assert_eq!(t.skipped.len(), 2);
    assert!(
        t.skipped[0]
            .reason
            .contains("iceberg.expire-snapshots.min-retention (7d)"),
        "{}",
        t.skipped[0].reason
    );
    assert!(
        t.skipped[1]
            .reason
            .contains("iceberg.remove-orphan-files.min-retention (7d)")
    );
    // A cluster with lower floors.
    let low = TrinoDialect::new(TrinoOptions {
        expire_snapshots_min_retention_ms: DAY,
        remove_orphan_files_min_retention_ms: 36 * 3_600_000,
        ..TrinoOptions::new("lake", 480)
    })
    .unwrap();
    let t = render_one(&low, vec![expire(5, 1), orphans(2 * DAY, false)]);
    assert_eq!(
        sqls(&t),
        vec![
            "ALTER TABLE \"lake\".\"db\".\"t\" EXECUTE expire_snapshots(retention_threshold => '5d', retain_last => 1)",
            "ALTER TABLE \"lake\".\"db\".\"t\" EXECUTE remove_orphan_files(retention_threshold => '2d')",
        ]
    );
    // Trino has no dry run: the plan's dry run is never rendered as a deleting statement.
    let t = render_one(&low, vec![orphans(30 * DAY, true)]);
    assert!(sqls(&t).is_empty());
    assert!(t.skipped[0].reason.contains("dry run"));
    // Non-positive retention is a malformed plan.
    let t = render_one(&low, vec![expire(0, 1)]);
    assert!(t.skipped[0].reason.contains("positive"));
}

#[test]
fn spark_version_gates_and_floors() {
    let old = spark_v((3, 3), (1, 2, 0));
    let t = render_one(
        &old,
        vec![
            step(
                StepParams::RewritePositionDeletes { min_input_files: 2 },
                vec![chunk(0, vec![])],
            ),
            step(
                StepParams::ComputeStatistics { columns: vec![] },
                vec![chunk(0, vec![])],
            ),
        ],
    );
    assert!(sqls(&t).is_empty());
    assert!(t.skipped[0].reason.contains("from 1.3.0"));
    assert!(t.skipped[1].reason.contains("from 1.8.0"));
    assert_eq!(
        render_one(
            &spark_v((3, 5), (1, 8, 0)),
            vec![step(
                StepParams::ComputeStatistics { columns: vec![] },
                vec![chunk(0, vec![])]
            )]
        )
        .steps
        .len(),
        1
    );
    // No remove-dangling-deletes before 1.6.
    let t = render_one(
        &spark_v((3, 5), (1, 5, 2)),
        vec![step(
            StepParams::ConvertEqualityDeletes {
                method: EqualityDeleteMethod::Rewrite,
                why: String::new(),
            },
            vec![chunk(0, vec![])],
        )],
    );
    assert!(!sqls(&t)[0].contains("remove-dangling-deletes"));
    assert!(
        notes(&t)
            .iter()
            .any(|n| n.contains("no remove-dangling-deletes"))
    );
    // Literal gates.
    let ntz = eq(
        "ts",
        "timestamp",
        Literal::Timestamp("2024-01-01 00:00:00".into()),
    );
    assert!(
        old.field_predicate(&ntz)
            .unwrap_err()
            .contains("TIMESTAMP_NTZ")
    );
    let prefix = fp(
        "s",
        "string",
        "truncate[2]",
        PredicateKind::StartsWith {
            prefix: "ab".into(),
        },
    );
    assert!(
        spark_v((3, 2), (1, 4, 0))
            .field_predicate(&prefix)
            .unwrap_err()
            .contains("startswith")
    );
    assert!(old.field_predicate(&prefix).is_ok());

    // Orphans: Spark refuses older_than under 24h.
    let t = render_one(&spark(), vec![orphans(23 * 3_600_000, true)]);
    assert!(sqls(&t).is_empty());
    assert!(
        t.skipped[0].reason.contains("24 hours"),
        "{}",
        t.skipped[0].reason
    );
    let t = render_one(&spark(), vec![orphans(DAY, false)]);
    assert!(sqls(&t)[0].ends_with("dry_run => false)"));
    // A team floor on expiry.
    let strict = SparkDialect::new(SparkOptions {
        expire_snapshots_min_retention_ms: 7 * DAY,
        ..SparkOptions::new("lake", Version::new(3, 5, 0), Version::new(1, 10, 2))
    })
    .unwrap();
    let t = render_one(&strict, vec![expire(5, 1)]);
    assert!(sqls(&t).is_empty() && t.skipped[0].reason.contains("under the floor of 7d"));
    assert_eq!(render_one(&strict, vec![expire(7, 1)]).steps.len(), 1);
    // An older_than after the plan's now is below any floor.
    let future = step(
        StepParams::RemoveOrphanFiles {
            older_than_ms: NOW + DAY,
            retention_ms: 3 * DAY,
            dry_run: true,
        },
        vec![chunk(0, vec![])],
    );
    assert!(render_one(&spark(), vec![future]).steps.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

#[test]
fn options_validate_and_round_trip() {
    assert!(
        TrinoOptions::default()
            .validate()
            .unwrap_err()
            .to_string()
            .contains("catalog")
    );
    assert!(
        TrinoOptions {
            catalog: "x".into(),
            ..TrinoOptions::default()
        }
        .validate()
        .unwrap_err()
        .to_string()
        .contains("version")
    );
    assert!(
        TrinoOptions {
            catalog: "a\nb".into(),
            version: 470,
            ..TrinoOptions::default()
        }
        .validate()
        .is_err()
    );
    assert!(
        TrinoOptions {
            expire_snapshots_min_retention_ms: -1,
            ..TrinoOptions::new("x", 470)
        }
        .validate()
        .is_err()
    );
    assert!(TrinoDialect::new(TrinoOptions::default()).is_err());

    assert!(SparkOptions::default().validate().is_err());
    assert!(
        SparkOptions {
            catalog: "x".into(),
            ..SparkOptions::default()
        }
        .validate()
        .unwrap_err()
        .to_string()
        .contains("spark_version")
    );
    let ok = SparkOptions::new("x", Version::new(3, 5, 0), Version::new(1, 10, 2));
    assert!(ok.validate().is_ok());
    assert!(
        SparkOptions {
            spark_version: Version::new(2, 4, 8),
            ..ok.clone()
        }
        .validate()
        .unwrap_err()
        .to_string()
        .contains("Spark 3")
    );
    assert!(
        SparkOptions {
            remove_orphan_files_min_retention_ms: DAY - 1,
            ..ok.clone()
        }
        .validate()
        .unwrap_err()
        .to_string()
        .contains("24 hours")
    );
    assert!(
        SparkOptions {
            expire_snapshots_min_retention_ms: -5,
            ..ok.clone()
        }
        .validate()
        .is_err()
    );

    // Serde: versions as strings, defaults fill omitted fields, unknown fields are refused.
    let json = serde_json::to_value(&ok).unwrap();
    assert_eq!(json["spark_version"], "3.5.0");
    let back: SparkOptions = serde_json::from_value(
        serde_json::json!({"catalog": "x", "spark_version": "3.5", "iceberg_version": "1.10.2"}),
    )
    .unwrap();
    assert_eq!(back, ok);
    assert!(
        serde_json::from_value::<SparkOptions>(
            serde_json::json!({"catalog": "x", "sparkversion": "3.5"})
        )
        .is_err()
    );
    let t: TrinoOptions =
        serde_json::from_value(serde_json::json!({"catalog": "lake", "version": 476})).unwrap();
    assert_eq!(t.expire_snapshots_min_retention_ms, 7 * DAY);
    assert!("1.x".parse::<Version>().is_err());
    assert!("1.2.3.4".parse::<Version>().is_err());
    assert_eq!("1.10".parse::<Version>().unwrap(), Version::new(1, 10, 0));
    assert!(Version::new(1, 10, 0) > Version::new(1, 9, 9));
}

#[test]
fn script_has_statements_notes_and_skips() {
    let plan = MaintenancePlan {
        format_version: PLAN_FORMAT_VERSION,
        catalog: "src".into(),
        created_at_ms: NOW,
        tables: vec![table("t", vec![expire(7, 5), orphans(7 * DAY, true)])],
        skipped_tables: vec![],
        policy: None,
        fingerprint: "abc".into(),
    };
    let r = render_plan(&plan, &trino(480)).unwrap();
    assert_eq!(r.engine_catalog, "lake");
    assert_eq!(r.source_catalog, "src");
    assert_eq!(r.statements().count(), 1);
    assert_eq!(r.skipped().count(), 1);
    let s = r.to_script();
    assert!(
        s.contains("-- plan abc, made at 2026-06-01T00:00:00.000Z"),
        "{s}"
    );
    assert!(s.contains("\nALTER TABLE \"lake\".\"db\".\"t\" EXECUTE expire_snapshots(retention_threshold => '7d', retain_last => 5);\n"));
    assert!(s.contains("-- skipped remove_orphan_files: the plan asks for a dry run"));
    // Round trip of the typed output.
    let back: RenderedPlan = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(back, r);
}
