"""Hostile identifiers and values through the engines' REAL parsers.

`golden/inject/{trino,spark}.jsonl` (from `cryo-core/tests/it/render_hostile.rs`: every hostile string as
table, namespace, nested namespace level, column, partition value, sort / z-order / statistics column
and engine catalog, every operation) hold one record per rendered statement with what it must address
and select, one per step Cryo refused with the reason, and one per engine catalog the options refused.

- Trino: `io.trino.sql.parser.SqlParser.createStatement` from the Trino install (`TRINO_HOME/lib`, Java
  25), one JVM for the whole batch (`TrinoParse.java`). Each statement parses as exactly one statement
  (trailing text is a parse error), of the expected kind and procedure, on the intended
  catalog.schema.table (name parts as written); its WHERE holds exactly the intended column identifiers
  and string literals; ANALYZE's columns are exactly the intended ones. The reviewable script
  (`trino.sql`, notes and skips as `--` comments holding the same hostile text) splits with Trino's own
  lexer into exactly the rendered statements.
- Spark: the session's parser with Iceberg's SQL extensions (one JVM, a child process): one CALL of the
  intended `catalog.system.procedure`; the `table` string parses (parseMultipartIdentifier) to the
  intended parts; the `where` string parses (parseExpression) to exactly the intended columns and
  values; `sort_order` parses with Iceberg's own ExtendedParser to the intended columns; statistics
  `columns` are the intended names.

Skips without the peers, unless CRYO_REQUIRE_PEERS=1. Run:  $PEERS_PYTHON -m pytest tests/py/test_inject.py
Regenerate the corpus:  CRYO_BLESS=1 cargo test -p cryo-core --test it render_hostile
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cryo_peers  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "golden" / "inject"
REQUIRE = os.environ.get("CRYO_REQUIRE_PEERS") == "1"
ENV = cryo_peers.peers_env()

# Plan operation -> (Trino statement kind, Trino procedure), Spark procedure.
TRINO = {
    "convert_equality_deletes": ("TableExecute", "optimize"),
    "rewrite_data_files": ("TableExecute", "optimize"),
    "rewrite_manifests": ("TableExecute", "optimize_manifests"),
    "expire_snapshots": ("TableExecute", "expire_snapshots"),
    "remove_orphan_files": ("TableExecute", "remove_orphan_files"),
    "compute_statistics": ("Analyze", None),
}
SPARK = cryo_peers.SPARK_PROCEDURES
TIMINGS: dict[str, float] = {}


def _missing(reason: str):
    if REQUIRE:
        pytest.fail(f"{reason} (CRYO_REQUIRE_PEERS=1: the peer is required)")
    pytest.skip(reason)


def load(engine: str) -> list[dict]:
    # One record a line, split at "\n" only: str.splitlines would also split inside the raw U+0085
    # and U+2028 of the corpus.
    with open(GOLDEN / f"{engine}.jsonl", encoding="utf-8", newline="") as f:
        text = f.read()
    return [json.loads(line) for line in text.split("\n") if line]


def statements(engine: str) -> list[dict]:
    return [r for r in load(engine) if "sql" in r]


# ------------------------------------------------------------------------------------------------
# Trino
# ------------------------------------------------------------------------------------------------


def _trino_java() -> tuple[str, str]:
    home = ENV.get("TRINO_HOME", "")
    java = Path(ENV.get("TRINO_JAVA_HOME") or "/usr/lib/jvm/temurin-25-jdk-amd64") / "bin" / "java"
    if not home or not list(Path(home, "lib").glob("io.trino.trino-parser-*.jar")):
        _missing(f"no Trino install (TRINO_HOME={home!r}; scripts/peers.sh installs it)")
    if not java.exists():
        _missing(f"no Java 25 at {java}")
    return str(java), home


def trino_parse(requests: list[tuple[str, str]]) -> list[dict]:
    """One JVM: each (mode, text) through TrinoParse.java, results in order."""
    java, home = _trino_java()
    batch = "".join(f"{mode} {base64.b64encode(text.encode()).decode()}\n" for mode, text in requests)
    t0 = time.monotonic()
    proc = subprocess.run(
        [java, "-cp", f"{home}/lib/*", str(Path(__file__).with_name("TrinoParse.java"))],
        input=batch.encode(),
        capture_output=True,
    )
    TIMINGS["trino_jvm_s"] = round(time.monotonic() - t0, 1)
    assert proc.returncode == 0, proc.stderr.decode()[-4000:]
    out = [json.loads(line) for line in proc.stdout.decode().split("\n") if line]
    assert len(out) == len(requests)
    return out


@pytest.fixture(scope="module")
def trino_results() -> dict:
    records = statements("trino")
    # newline="": a table name's raw "\r\n" stays as rendered.
    with open(GOLDEN / "trino.sql", encoding="utf-8", newline="") as f:
        script = f.read()
    parsed = trino_parse([("S", r["sql"]) for r in records] + [("P", script)])
    return {"records": records, "parsed": parsed[:-1], "script": parsed[-1]}


def test_trino_every_statement_is_one_statement_on_its_target(trino_results):
    failures = []
    for r, p in zip(trino_results["records"], trino_results["parsed"]):
        e, sql, op = r["expect"], r["sql"], r["operation"]
        if not p["ok"]:
            failures.append(f"does not parse: {sql!r}: {p['error']}")
            continue
        kind, procedure = TRINO[op]
        target = [e["catalog"], ".".join(e["namespace"]), e["name"]]
        problems = []
        if p["kind"] != kind:
            problems.append(f"kind {p['kind']}")
        if p["target"] != target:
            problems.append(f"target {p['target']} != {target}")
        if kind == "TableExecute":
            if p["procedure"] != procedure:
                problems.append(f"procedure {p['procedure']}")
            # The WHERE names exactly the partition columns and holds exactly the partition values.
            if Counter(p["identifiers"]) != Counter(e["where_columns"]):
                problems.append(f"where columns {p['identifiers']} != {e['where_columns']}")
            if Counter(p["strings"]) != Counter(e["where_values"]):
                problems.append(f"where values {p['strings']} != {e['where_values']}")
            if p["has_where"] != bool(e["where_values"]):
                problems.append("a partitioned step must have a WHERE, a table-wide one none")
        else:
            # Trino shows column names in lower case: ANALYZE's columns are passed so (noted).
            want = [c.lower() for c in e["stat_columns"]]
            if p["strings"] != want:
                problems.append(f"columns {p['strings']} != {want}")
        if problems:
            failures.append(f"{sql!r}: {'; '.join(problems)}")
    assert not failures, f"{len(failures)} of {len(trino_results['records'])}:\n" + "\n".join(failures[:20])


def test_trino_script_splits_into_exactly_the_statements(trino_results):
    """Notes and skips (hostile text included) stay inside their `--` comments: Trino's lexer finds exactly
    the rendered statements in the script, and nothing after the last one."""
    script = trino_results["script"]
    assert script["trailing"] is None, script["trailing"]
    got = Counter(s["sql"] for s in script["statements"])
    assert all(s["ok"] for s in script["statements"])
    want = Counter(r["sql"] for r in trino_results["records"])
    assert got == want, (list((got - want).items())[:5], list((want - got).items())[:5])


def test_trino_parser_has_teeth():
    """The same batch path rejects the naive renderings: an unescaped quote, a second statement, an
    unterminated comment, an empty identifier."""
    naive = [
        """ALTER TABLE "lake"."db"."t" EXECUTE optimize WHERE "c" = ''; DROP TABLE x; --'""",
        """ALTER TABLE "lake"."db"."t" EXECUTE optimize_manifests; DROP TABLE x""",
        """ALTER TABLE "lake"."db"."t" EXECUTE optimize_manifests /* open""",
        """ALTER TABLE "lake"."db"."" EXECUTE optimize_manifests""",
        """ALTER TABLE "lake"."db"."a"b" EXECUTE optimize_manifests""",
    ]
    for sql, p in zip(naive, trino_parse([("S", s) for s in naive])):
        assert not p["ok"], sql


def test_trino_refusals_name_their_reason():
    records = load("trino")
    refused = [r for r in records if "skipped" in r and r["skipped"].startswith("unaddressable table name")]
    tables = {json.dumps(r["table"], sort_keys=True) for r in refused}
    # The empty name, the empty namespace and the empty nested level; nested levels with a dot.
    assert any(r["table"]["name"] == "" for r in refused)
    assert any(len(r["table"]["namespace"]) > 1 and "." in r["table"]["namespace"][1] for r in refused)
    assert len(tables) >= 3
    # Names with upper-case letters: Trino folds them and would address a lower-case twin or nothing.
    folded = [r for r in refused if "folds identifiers to lower case" in r["skipped"]]
    assert folded and all(any(ch.isupper() for part in [*r["table"]["namespace"], r["table"]["name"]] for ch in part) for r in folded)
    emitted = [r for r in records if "sql" in r]
    assert emitted and not any(any(ch.isupper() for part in [*r["expect"]["namespace"], r["expect"]["name"]] for ch in part) for r in emitted)
    catalogs = {r["catalog"] for r in records if "refused" in r}
    assert "" in catalogs and "new\nline" in catalogs and "nul\x00byte" in catalogs


# ------------------------------------------------------------------------------------------------
# Spark (the JVM in a child process: this file with --child)
# ------------------------------------------------------------------------------------------------


def _seq(s) -> list:
    return [s.apply(i) for i in range(s.length())]


def _walk(expr, literals: list, attributes: list) -> None:
    name = expr.getClass().getSimpleName()
    if name == "Literal":
        v = expr.value()
        literals.append(None if v is None else (v if isinstance(v, (bool, int, float)) else v.toString()))
    elif name == "UnresolvedAttribute":
        attributes.append([str(p) for p in _seq(expr.nameParts())])
    for child in _seq(expr.children()):
        _walk(child, literals, attributes)


def _spark_parse(spark, sql: str) -> dict:
    jvm = spark._jvm
    parser = spark._jsparkSession.sessionState().sqlParser()
    out: dict = {}
    try:
        plan = parser.parsePlan(sql)
    except Exception as e:  # noqa: BLE001 - reported to the parent, which fails the test
        return {"error": str(e).splitlines()[0]}
    out["class"] = plan.getClass().getSimpleName()
    out["name"] = [str(p) for p in _seq(plan.name())]
    args: dict = {}
    for a in _seq(plan.args()):
        expr = a.expr()
        literals: list = []
        _walk(expr, literals, [])
        args[a.name() if a.getClass().getSimpleName() == "NamedArgument" else ""] = literals
    out["args"] = args
    if args.get("table"):
        out["table_parts"] = [str(p) for p in _seq(parser.parseMultipartIdentifier(args["table"][0]))]
    if args.get("where"):
        literals, attributes = [], []
        try:
            _walk(parser.parseExpression(args["where"][0]), literals, attributes)
            out["where"] = {"literals": literals, "attributes": attributes}
        except Exception as e:  # noqa: BLE001
            out["where_error"] = str(e).splitlines()[0]
    if args.get("sort_order"):
        try:
            fields = jvm.org.apache.iceberg.spark.ExtendedParser.parseSortOrder(spark._jsparkSession, args["sort_order"][0])
            columns = []
            for f in fields:
                term = f.term()
                refs = term.refs() if term.getClass().getSimpleName() == "Zorder" else [term]
                columns.extend(str(r.name()) for r in refs)
            out["sort_columns"] = columns
        except Exception as e:  # noqa: BLE001
            out["sort_error"] = str(e).splitlines()[0]
    return out


def child_main(out_path: Path) -> None:
    t0 = time.monotonic()
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"cryo-inject-{os.getpid()}"
    tmp.mkdir(parents=True, exist_ok=True)
    spark = cryo_peers.spark_session(tmp / "catalog.db", tmp / "warehouse", app_name="cryo-inject")
    started = time.monotonic() - t0
    t1 = time.monotonic()
    results = [_spark_parse(spark, r["sql"]) for r in statements("spark")]
    naive = [
        "CALL `lake`.system.rewrite_manifests(table => '`lake`.`db`.`t`'); DROP TABLE x",
        "CALL `lake`.system.rewrite_manifests(table => 'lake.db.it's')",
        "CALL `lake`.system.rewrite_manifests(table => '`lake`.`db`.`t`') /* open",
    ]
    teeth = [_spark_parse(spark, s) for s in naive]
    Path(out_path).write_text(
        json.dumps({"results": results, "teeth": teeth, "timings": {"spark_start_s": round(started, 1), "spark_parse_s": round(time.monotonic() - t1, 1)}})
    )
    spark.stop()


@pytest.fixture(scope="module")
def spark_results(tmp_path_factory) -> dict:
    if not ENV.get("SPARK_JARS"):
        _missing("no Spark jars (SPARK_JARS unset; scripts/peers.sh installs them)")
    try:
        import pyspark  # noqa: F401
    except ImportError:
        _missing("pyspark is not installed (run with $PEERS_PYTHON)")
    out = tmp_path_factory.mktemp("inject") / "spark.json"
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, __file__, "--child", str(out)], capture_output=True, text=True)
    TIMINGS["spark_child_s"] = round(time.monotonic() - t0, 1)
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(out.read_text())
    TIMINGS.update(got["timings"])
    sys.stderr.write(f"\ninject timings: {json.dumps(TIMINGS)}\n")
    return {"records": statements("spark"), **got}


def test_spark_every_statement_is_one_call_on_its_target(spark_results):
    failures = []
    for r, p in zip(spark_results["records"], spark_results["results"]):
        e, sql, op = r["expect"], r["sql"], r["operation"]
        if "error" in p:
            failures.append(f"does not parse: {sql!r}: {p['error']}")
            continue
        problems = []
        if p["class"] != "CallStatement":
            problems.append(f"class {p['class']}")
        if p["name"] != [e["catalog"], "system", SPARK[op]]:
            problems.append(f"procedure {p['name']}")
        target = [e["catalog"], *e["namespace"], e["name"]]
        if p.get("table_parts") != target:
            problems.append(f"table {p.get('table_parts')} != {target}")
        where = p.get("where")
        if e["where_values"]:
            if where is None:
                problems.append(f"where did not parse: {p.get('where_error')}")
            else:
                if Counter(where["literals"]) != Counter(e["where_values"]):
                    problems.append(f"where values {where['literals']} != {e['where_values']}")
                # A dotted plan column is a nested field (the plan's convention): `a`.`b`.
                if where["attributes"] != [c.split(".") for c in e["where_columns"]]:
                    problems.append(f"where columns {where['attributes']} != {e['where_columns']}")
        elif "where" in p["args"]:
            problems.append("a table-wide step has a where")
        if e["strategy"] in ("sort", "z_order") and p.get("sort_columns") != e["sort_columns"]:
            problems.append(f"sort columns {p.get('sort_columns')} ({p.get('sort_error')}) != {e['sort_columns']}")
        # A column with a backtick cannot reach compute_table_stats (Spark's col()): left out, noted.
        stat_columns = [c for c in e["stat_columns"] if "`" not in c]
        if op == "compute_statistics" and p["args"].get("columns") != stat_columns:
            problems.append(f"statistics columns {p['args'].get('columns')} != {stat_columns}")
        if problems:
            failures.append(f"{sql!r}: {'; '.join(problems)}")
    assert not failures, f"{len(failures)} of {len(spark_results['records'])}:\n" + "\n".join(failures[:20])


def test_spark_parser_has_teeth(spark_results):
    for p in spark_results["teeth"]:
        assert "error" in p, p


def test_spark_refusals_name_their_reason():
    records = load("spark")
    refused = [r for r in records if "skipped" in r]
    assert any(r["skipped"].startswith("unaddressable table name") and r["table"]["name"] == "" for r in refused)
    # A backtick cannot reach Iceberg's z-order (Dataset.col): refused with the reason, not emitted.
    assert any("z-order column" in r["skipped"] for r in refused)
    # Nor can a sort or z-order column with whitespace at its edges (trimming it addressed another column).
    edges = [r for r in refused if "starts or ends with whitespace" in r["skipped"]]
    assert {r["skipped"].split(" column")[0] for r in edges} == {"sort", "z-order"}, edges
    assert {"", "nul\x00byte"} <= {r["catalog"] for r in records if "refused" in r}


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--child":
    child_main(Path(sys.argv[2]))
