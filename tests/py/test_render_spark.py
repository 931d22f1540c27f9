"""Rendered Spark SQL (golden/render/spark/*.json) against a real local Spark, on both lines: 3.5 +
Iceberg 1.10 and 4.1 + Iceberg 1.12.

1. Every golden Spark statement goes through Spark's own parser (with Iceberg's SQL extensions): it is
   exactly one CALL of the expected procedure in the expected catalog, its `table` argument parses to the
   intended identifier, and its `where` argument (a SQL string inside a string literal) parses as an
   expression that still holds every hostile value verbatim.
2. The `fixtures_*` goldens (real planner output for fixture tables) run, statement by statement and in
   order, on Spark against a fresh copy of the fixtures (`make_fixtures.py --out <tmp>`); the tables are
   then read back with DuckDB and PyIceberg: same rows (fingerprints), and Spark's `snapshots` metadata
   table shows the `replace` snapshots the rewrites committed.
3. Every other golden (the hand-built plans of `cryo-core/tests/it/render.rs`: operations, predicates,
   chunks, strategies, version gates, retention floors, hostile identifiers) runs too: for each case a
   fresh `hadoop` catalog named like the golden's `engine_catalog` (hostile names included) gets the
   tables its statements target, built from the plan itself (`golden/render/plans/<case>.json`, see
   `plan_tables.py`: schema from the predicates' column types, spec from their transforms, format v2,
   several appends per partition, merge-on-read DELETEs where position deletes are rewritten, an old
   orphan file where orphans are removed). Every statement runs in golden order and must succeed and
   do its work; the rows Spark read before must be the rows DuckDB reads after. A table whose every
   step the renderer skipped is not built (no statement targets it).

Spark runs in a child process (this file with `--child`): Spark keeps one JVM per process and caches
catalogs, so a session another test module opened on the shared fixtures must never see these statements.

Run with the peers venv:  $PEERS_PYTHON -m pytest tests/py/test_render_spark.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cryo_peers  # noqa: E402
import plan_tables  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "golden" / "render" / "spark"
PLANS = REPO / "golden" / "render" / "plans"
FILES = sorted(GOLDEN.glob("*.json"))
# Order matters only within a table; tables are independent.
FIXTURE_CASES = ["fixtures_upserts_eq", "fixtures_orders_mor", "fixtures_events", "fixtures_unpartitioned"]
# The hand-built goldens: their tables are built from the plan (golden/render/plans/<case>.json).
HANDBUILT_CASES = [p.stem for p in FILES if p.stem not in FIXTURE_CASES]

PROCEDURES = cryo_peers.SPARK_PROCEDURES

# The values of cryo-core/tests/it/render.rs `hostile()`: each must reach Spark's parsed `where` intact.
HOSTILE_VALUES = [
    "'; DROP TABLE x; --",
    "back\\slash \\' \\\\",
    'quote"double `tick`',
    "tab\there\r\nnewline",
    "{{ jinja }} {% raw %} $$ /* c */ -- ;",
]


# ------------------------------------------------------------------------------------------------
# Child process: everything that needs the JVM
# ------------------------------------------------------------------------------------------------


def _seq(s) -> list:
    return [s.apply(i) for i in range(s.length())]


def _parse(spark, sql: str) -> dict:
    parser = spark._jsparkSession.sessionState().sqlParser()
    out: dict = {"sql": sql}
    try:
        plan = parser.parsePlan(sql)
    except Exception as e:  # noqa: BLE001 - reported to the parent, which fails the test
        out["error"] = str(e).splitlines()[0]
        return out
    out["class"] = plan.getClass().getName()
    # Spark 3.5: Iceberg's extensions parse CALL into a CallStatement (name, args of NamedArgument or
    # PositionalArgument); Spark 4 parses it itself into a Call (an UnresolvedProcedure, and
    # NamedArgumentExpression or bare expressions).
    spark4 = out["class"] == "org.apache.spark.sql.catalyst.plans.logical.Call"
    out["call"] = spark4 or out["class"].endswith("CallStatement")
    out["name"] = [str(p) for p in _seq(plan.procedure().nameParts() if spark4 else plan.name())]
    args = {}
    for a in _seq(plan.args()):
        kind = a.getClass().getSimpleName()
        if spark4:
            named = kind == "NamedArgumentExpression"
            expr, name = (a.value(), a.key()) if named else (a, None)
        else:
            expr, name = a.expr(), (a.name() if kind == "NamedArgument" else None)
        value = None
        if expr.getClass().getSimpleName() == "Literal" and expr.value() is not None:
            v = expr.value()
            # py4j hands ints and booleans over as Python values; strings arrive as UTF8String.
            value = str(v) if isinstance(v, (bool, int, float)) else v.toString()
        args[name] = {"value": value, "expr": expr.toString()}
    out["args"] = args
    table = args.get("table", {}).get("value")
    if table is not None:
        out["table_parts"] = [str(p) for p in _seq(parser.parseMultipartIdentifier(table))]
    where = args.get("where", {}).get("value")
    if where is not None:
        try:
            out["where_expr"] = parser.parseExpression(where).toString()
        except Exception as e:  # noqa: BLE001
            out["where_error"] = str(e).splitlines()[0]
    return out


def _error_text(e: BaseException) -> str:
    """The Java exception chain when there is one (py4j's own first line says nothing)."""
    j = getattr(e, "java_exception", None)
    if j is None:
        text = str(e).strip()
        return (text.splitlines()[0] if text else repr(e))[:2000]
    msgs: list[str] = []
    while j is not None and len(msgs) < 6:
        msg = str(j.toString())
        if msg not in msgs:
            msgs.append(msg)
        j = j.getCause()
    return " | caused by: ".join(msgs)[:2000]


def _run_statements(spark, table: dict) -> list[dict]:
    out = []
    for step in table["steps"]:
        for st in step["statements"]:
            s0 = time.monotonic()
            entry = {"operation": step["operation"], "chunk": st["chunk"], "sql": st["sql"]}
            if step["operation"] == "rewrite_manifests" and table.get("target"):
                # Iceberg leaves a table whose data sits in one manifest as it is (rewritten count 0).
                entry["data_manifests_before"] = spark.sql(f"SELECT count(*) AS n FROM {table['target']}.manifests WHERE content = 0").collect()[0].n
            try:
                rows = spark.sql(st["sql"]).collect()
                entry["rows"] = [{k: str(v) for k, v in r.asDict().items()} for r in rows[:20]]
                entry["row_count"] = len(rows)
            except Exception as e:  # noqa: BLE001 - reported to the parent, which fails the test
                entry["error"] = _error_text(e)
            entry["seconds"] = round(time.monotonic() - s0, 2)
            out.append(entry)
    return out


def _snapshots(spark, ident: str) -> list[dict]:
    rows = spark.sql(f"SELECT snapshot_id, operation, summary FROM {ident}.snapshots ORDER BY committed_at").collect()
    return [{"snapshot_id": r.snapshot_id, "operation": r.operation, "summary": dict(r.summary or {})} for r in rows]


def _file_contents(spark, ident: str) -> dict[str, int]:
    rows = spark.sql(f"SELECT content, count(*) AS n FROM {ident}.files GROUP BY content").collect()
    return {str(r.content): r.n for r in rows}


def child_main(fixtures: Path, out_path: Path) -> None:
    os.environ.setdefault("CRYO_SPARK_SCRATCH", str(fixtures / "spark-scratch"))
    t0 = time.monotonic()
    spark = cryo_peers.spark_session(fixtures / "catalog.db", fixtures / "warehouse", app_name="cryo-test-render")
    result: dict = {"timings": {"spark_start_s": round(time.monotonic() - t0, 2)}, "parsed": {}, "runs": {}}

    t0 = time.monotonic()
    for path in FILES:
        rendered = json.loads(path.read_text())
        result["parsed"][path.stem] = [
            _parse(spark, st["sql"]) for t in rendered["tables"] for s in t["steps"] for st in s["statements"]
        ]
    result["timings"]["parse_s"] = round(time.monotonic() - t0, 2)

    for case in FIXTURE_CASES:
        rendered = json.loads((GOLDEN / f"{case}.json").read_text())
        for table in rendered["tables"]:
            ident = ".".join(["fixtures", *table["table"]["namespace"], table["table"]["name"]])
            run: dict = {"before": _snapshots(spark, ident), "files_before": _file_contents(spark, ident)}
            t0 = time.monotonic()
            run["statements"] = _run_statements(spark, table)
            run["seconds"] = round(time.monotonic() - t0, 2)
            run["after"] = _snapshots(spark, ident)
            run["files_after"] = _file_contents(spark, ident)
            result["runs"][ident] = run
    result["timings"]["fixture_runs_s"] = round(sum(r["seconds"] for r in result["runs"].values()), 2)

    t0 = time.monotonic()
    result["handbuilt"] = {case: _run_handbuilt_case(spark, case, fixtures / "render-cases") for case in HANDBUILT_CASES}
    result["timings"]["handbuilt_s"] = round(time.monotonic() - t0, 2)
    spark.stop()
    out_path.write_text(json.dumps(result, indent=1))


def _run_handbuilt_case(spark, case: str, root: Path) -> dict:
    """Build the case's tables in a fresh hadoop catalog named like the golden's engine catalog, run every
    statement in order, and record Spark's read before, each statement's output and the metadata after."""
    rendered = json.loads((GOLDEN / f"{case}.json").read_text())
    plan = json.loads((PLANS / f"{case}.json").read_text())
    catalog = rendered["engine_catalog"]
    warehouse = root / case
    warehouse.mkdir(parents=True)
    # Spark caches catalog instances by name and several cases share `lake` (and table names): drop the
    # cached instances so this case's catalog starts on its own warehouse.
    spark._jsparkSession.sessionState().catalogManager().reset()
    p = f"spark.sql.catalog.{catalog}"
    cryo_peers.add_spark_catalogs(
        spark, {p: "org.apache.iceberg.spark.SparkCatalog", f"{p}.type": "hadoop", f"{p}.warehouse": warehouse.as_uri()}
    )
    t_case = time.monotonic()
    out: dict = {"catalog": catalog, "warehouse": str(warehouse), "tables": []}
    for rt, pt in zip(rendered["tables"], plan["tables"]):
        target = rt["target"]
        entry: dict = {"table": rt["table"], "target": target}
        out["tables"].append(entry)
        if not any(s["statements"] for s in rt["steps"]):
            entry["no_statements"] = True  # every step skipped by the renderer: nothing targets the table
            continue
        t0 = time.monotonic()
        try:
            if rt["table"] != pt["table"]:
                raise ValueError(f"golden table {rt['table']} is {pt['table']} in the plan")
            entry["built"] = plan_tables.build_table(spark, catalog, plan_tables.model_table(pt))
            before = cryo_peers.fingerprint(cryo_peers.read_spark(spark, target))
        except Exception as e:  # noqa: BLE001 - reported to the parent, which fails the test
            entry["build_error"] = _error_text(e)
            continue
        entry["build_s"] = round(time.monotonic() - t0, 2)
        entry["spark_before"] = before.as_dict()
        if entry["built"]["position_delete_commits"]:
            entry["files_before"] = _file_contents(spark, target)
        t0 = time.monotonic()
        entry["statements"] = _run_statements(spark, rt)
        entry["run_s"] = round(time.monotonic() - t0, 2)
        table = plan_tables.load_table(spark, target)
        entry["metadata_location"] = str(table.operations().current().metadataFileLocation())
        entry["orphans_after"] = [{**o, "exists": os.path.exists(o["path"])} for o in entry["built"]["orphans"]]
    out["seconds"] = round(time.monotonic() - t_case, 2)
    return out


# ------------------------------------------------------------------------------------------------
# Parent: pytest
# ------------------------------------------------------------------------------------------------

TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="module", params=list(cryo_peers.SPARK_LINES), ids=cryo_peers.spark_line_id)
def spark_line(request) -> str:
    """Every golden runs on each Spark line (3.5 + Iceberg 1.10, 4.1 + Iceberg 1.12)."""
    return cryo_peers.spark_line_or_skip(request.param)


@pytest.fixture(scope="module")
def fresh(spark_line, tmp_path_factory) -> tuple[Path, dict]:
    """A fresh fixture copy: metadata holds absolute paths, so the fixtures are regenerated, not copied."""
    out = tmp_path_factory.mktemp(f"render-fixtures-spark{spark_line}")
    t0 = time.monotonic()
    subprocess.run(
        [sys.executable, str(REPO / "tests" / "fixtures" / "make_fixtures.py"), "--out", str(out), "--local"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    TIMINGS["make_fixtures_s"] = round(time.monotonic() - t0, 1)
    return out, json.loads((out / "manifest.json").read_text())


@pytest.fixture(scope="module")
def spark_results(fresh, spark_line) -> dict:
    fixtures, _ = fresh
    out = fixtures / "spark-results.json"
    t0 = time.monotonic()
    env = dict(os.environ, CRYO_SPARK_LINE=spark_line)
    python = sys.executable
    if spark_line != cryo_peers.DEFAULT_SPARK_LINE:  # the line's own venv (its pyspark)
        python = cryo_peers.spark_line_env(spark_line)["python"]
        env["PYSPARK_PYTHON"] = python
        env.pop("VIRTUAL_ENV", None)
    proc = subprocess.run(
        [python, __file__, "--child", str(fixtures), str(out)],
        capture_output=True,
        text=True,
        env=env,
    )
    TIMINGS["spark_child_s"] = round(time.monotonic() - t0, 1)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads(out.read_text())
    if os.environ.get("CRYO_RENDER_SPARK_RESULTS"):  # keep the child's report for a look afterwards
        Path(os.environ["CRYO_RENDER_SPARK_RESULTS"]).write_text(out.read_text())
    TIMINGS.update(results["timings"])
    for ident, run in results["runs"].items():
        TIMINGS[f"run {ident}_s"] = run["seconds"]
    for case, got in results.get("handbuilt", {}).items():
        TIMINGS[f"handbuilt {case}_s"] = got["seconds"]
    sys.stderr.write(f"\nrender/spark timings: {json.dumps(TIMINGS)}\n")
    return results


def test_golden_files_exist():
    names = {p.stem for p in FILES}
    for case in [*FIXTURE_CASES, "operations", "predicates", "hostile_identifiers", "version_gates_old"]:
        assert case in names, f"golden/render/spark/{case}.json missing (CRYO_BLESS=1 cargo test -p cryo-core --test it render)"


def test_every_statement_parses_as_one_call_on_its_target(spark_results):
    checked = 0
    for path in FILES:
        rendered = json.loads(path.read_text())
        parsed = iter(spark_results["parsed"][path.stem])
        catalog = rendered["engine_catalog"]
        for table in rendered["tables"]:
            want = [catalog, *table["table"]["namespace"], table["table"]["name"]]
            for step in table["steps"]:
                for st in step["statements"]:
                    p = next(parsed)
                    assert p["sql"] == st["sql"]
                    assert "error" not in p, f"{path.name}: Spark cannot parse {st['sql']!r}: {p.get('error')}"
                    assert p["call"], (path.name, p["class"])
                    assert p["name"] == [catalog, "system", PROCEDURES[step["operation"]]], (path.name, p["name"])
                    assert p["table_parts"] == want, (path.name, p["table_parts"], want)
                    if st["partitions"]:
                        assert "where" in p["args"], "a partitioned chunk must never become a whole-table statement"
                    if "where" in p["args"]:
                        assert "where_error" not in p, (path.name, st["sql"], p.get("where_error"))
                    checked += 1
        assert next(parsed, None) is None
    assert checked > 100


def test_hostile_values_survive_both_escapes(spark_results):
    parsed = spark_results["parsed"]["hostile_identifiers"]
    wheres = [p["where_expr"] for p in parsed if "where_expr" in p]
    everything = "\n".join(wheres)
    for value in HOSTILE_VALUES:
        assert value in everything, f"{value!r} did not reach Spark's parsed where intact"
    # The first table's chunk selects all five values, each once.
    first = wheres[0]
    for value in HOSTILE_VALUES:
        assert first.count(value) == 1, (value, first)


def test_fixture_statements_run_on_spark(spark_results):
    ran = 0
    for case in FIXTURE_CASES:
        rendered = json.loads((GOLDEN / f"{case}.json").read_text())
        for table in rendered["tables"]:
            ident = ".".join(["fixtures", *table["table"]["namespace"], table["table"]["name"]])
            run = spark_results["runs"][ident]
            expected = [st["sql"] for s in table["steps"] for st in s["statements"]]
            assert [s["sql"] for s in run["statements"]] == expected
            for s in run["statements"]:
                assert "error" not in s, f"{ident}: Spark refused {s['sql']!r}: {s['error']}"
                ran += 1
    assert ran >= 20


def _replace_snapshots(run: dict) -> list[dict]:
    before = {s["snapshot_id"] for s in run["before"]}
    return [s for s in run["after"] if s["snapshot_id"] not in before and s["operation"] == "replace"]


def test_rewrites_committed_replace_snapshots(spark_results):
    for ident, run in spark_results["runs"].items():
        new = _replace_snapshots(run)
        assert new, f"{ident}: no replace snapshot after the run"
        ops = {s["operation"] for s in run["statements"]}
        if ops & {"rewrite_data_files", "convert_equality_deletes"}:
            assert any(int(s["summary"].get("deleted-data-files", "0")) > 0 for s in new), (ident, new)
        if "rewrite_position_deletes" in ops:
            assert any(int(s["summary"].get("removed-position-delete-files", "0")) > 0 for s in new), (ident, new)
        if "rewrite_manifests" in ops:
            assert any(int(s["summary"].get("manifests-replaced", "0")) > 0 for s in new), (ident, new)


def test_equality_deletes_were_converted(spark_results):
    """rewrite-all applies every equality delete; none is left for readers to join (content 2)."""
    run = spark_results["runs"]["fixtures.spark.upserts_eq"]
    assert run["files_before"]["2"] == 2, run["files_before"]
    assert run["files_after"].get("2", 0) == 0, run["files_after"]


def test_rows_unchanged_for_duckdb_and_pyiceberg(fresh, spark_results):
    fixtures, manifest = fresh
    catalog = cryo_peers.sql_catalog(fixtures / "catalog.db", fixtures / "warehouse")
    for ident, run in spark_results["runs"].items():
        entry = manifest["tables"][ident]
        expected = (entry["row_count"], entry["fingerprint"])
        table = catalog.load_table(entry["identifier"])
        assert table.metadata_location != entry["metadata_location"], f"{ident}: nothing was committed"
        duck = cryo_peers.fingerprint(cryo_peers.read_duckdb(table.metadata_location))
        assert (duck.rows, duck.sha256) == expected, f"{ident}: DuckDB reads different rows after the run"
        if run["files_after"].get("2", 0):
            # PyIceberg 0.12 refuses to read equality deletes (scripts/README.md); DuckDB checked them above.
            continue
        py = cryo_peers.fingerprint(cryo_peers.read_pyiceberg(entry["identifier"], catalog=catalog))
        assert (py.rows, py.sha256) == expected, f"{ident}: PyIceberg reads different rows after the run"


# ------------------------------------------------------------------------------------------------
# Hand-built goldens: tables built from the plan, every statement run
# ------------------------------------------------------------------------------------------------

# What each statement reports when it did something (the procedures' output columns).
DID_WORK = {
    "convert_equality_deletes": lambda r: int(r["rewritten_data_files_count"]) > 0,
    "rewrite_data_files": lambda r: int(r["rewritten_data_files_count"]) > 0,
    "rewrite_position_deletes": lambda r: int(r["rewritten_delete_files_count"]) > 0,
    "rewrite_manifests": lambda r: int(r["rewritten_manifests_count"]) > 0,
    "compute_statistics": lambda r: r["statistics_file"] not in ("", "None"),
}


def _iceberg_version(line: str) -> tuple[int, ...]:
    return tuple(int(x) for x in (cryo_peers.spark_line_env(line)["iceberg"] or "0").split(".")[:3])


def _chunk_column_types(case: str, table: dict, operation: str, chunk: int) -> set[str]:
    """The plan-side types of the columns a chunk's partition predicates name."""
    plan = json.loads((PLANS / f"{case}.json").read_text())
    for t in plan["tables"]:
        if t["table"] == table["table"]:
            for step in t["steps"]:
                if step["operation"] == operation:
                    for c in step["chunks"]:
                        if c["index"] == chunk:
                            return {p["column_type"] for part in c["partitions"] for p in part["predicate"]}
    return set()


def _handbuilt(spark_results):
    for case in HANDBUILT_CASES:
        rendered = json.loads((GOLDEN / f"{case}.json").read_text())
        for table, entry in zip(rendered["tables"], spark_results["handbuilt"][case]["tables"]):
            yield case, table, entry


def _local(uri: str) -> str:
    for prefix in ("file://", "file:"):
        if uri.startswith(prefix):
            return uri[len(prefix) :]
    return uri


def test_handbuilt_tables_were_built_as_named(spark_results):
    """Spark created every namespace and table literally as the plan names them (hostile names too),
    format v2, merge-on-read with position-delete files where the plan rewrites them."""
    built = 0
    for case in HANDBUILT_CASES:
        rendered = json.loads((GOLDEN / f"{case}.json").read_text())
        got = spark_results["handbuilt"][case]
        assert got["catalog"] == rendered["engine_catalog"]
        assert [t["target"] for t in got["tables"]] == [t["target"] for t in rendered["tables"]], case
    for case, table, entry in _handbuilt(spark_results):
        if entry.get("no_statements"):
            continue
        assert "build_error" not in entry, f"{case} {entry['target']}: {entry['build_error']}"
        # The hadoop catalog lays tables out as <warehouse>/<namespace parts>/<name>: the literal names.
        location = _local(entry["metadata_location"])
        want = "/".join([spark_results["handbuilt"][case]["warehouse"], *table["table"]["namespace"], table["table"]["name"]])
        assert location.startswith(want + "/metadata/"), (location, want)
        assert json.loads(Path(location).read_text())["format-version"] == 2
        b = entry["built"]
        assert entry["spark_before"]["rows"] == b["rows"] > 0
        if b["position_delete_commits"]:
            assert b["properties"].get("write.delete.mode") == "merge-on-read", b["properties"]
            assert entry["files_before"].get("1", 0) > 0, f"{case} {entry['target']}: no position-delete files"
        built += 1
    assert built >= 20


def test_every_handbuilt_statement_runs_on_spark(spark_results):
    ran = 0
    for case, table, entry in _handbuilt(spark_results):
        expected = [st["sql"] for s in table["steps"] for st in s["statements"]]
        if entry.get("no_statements"):
            assert not expected
            continue
        assert [s["sql"] for s in entry.get("statements", [])] == expected, f"{case} {entry['target']}"
        for s in entry["statements"]:
            assert "error" not in s, f"{case} {entry['target']}: Spark refused {s['sql']!r}: {s['error']}"
            ran += 1
    want = sum(len(st["statements"]) for c in HANDBUILT_CASES for t in json.loads((GOLDEN / f"{c}.json").read_text())["tables"] for st in t["steps"])
    assert ran == want and ran >= 60, (ran, want)


def test_handbuilt_statements_did_their_work(spark_results, spark_line):
    """Each rewrite selects the rows built for its planned partitions (so the where matches the plan),
    statistics and manifest rewrites commit. Exempt: the rewrites after a whole-table rewrite-all
    (convert), which leaves them nothing to do; and, before Iceberg 1.11, a where on a binary/fixed
    partition value once an earlier statement rewrote the table's manifests (apache/iceberg#15128, see
    plan_tables.BYTES_PARTITION_BUG_FIXED_IN): Iceberg itself prunes the manifest holding it; and a
    manifest rewrite of a table whose data sits in one manifest (Iceberg 1.12's rewrite_data_files can
    leave that), which Iceberg leaves as it is."""
    iceberg_version = _iceberg_version(spark_line)
    for case, table, entry in _handbuilt(spark_results):
        after_rewrite_all = False
        rewrote = False
        for s in entry.get("statements", []):
            op = s["operation"]
            exempt = after_rewrite_all and op in ("rewrite_data_files", "rewrite_position_deletes")
            exempt |= op == "rewrite_manifests" and s.get("data_manifests_before", 2) <= 1
            if rewrote and iceberg_version < plan_tables.BYTES_PARTITION_BUG_FIXED_IN:
                types = _chunk_column_types(case, table, op, s["chunk"])
                exempt |= any(t == "binary" or t.startswith("fixed[") for t in types)
            if op in DID_WORK and not exempt:
                assert s["row_count"] == 1 and DID_WORK[op](s["rows"][0]), (
                    f"{case} {entry['target']}: {op} chunk {s['chunk']} did nothing: {s['rows']}\n{s['sql']}"
                )
            if op == "convert_equality_deletes" and "where =>" not in s["sql"]:
                after_rewrite_all = True
            rewrote |= op in DID_WORK and s.get("row_count") == 1 and DID_WORK[op](s["rows"][0])


def _duckdb_path(metadata_location: str, tmp: Path) -> str:
    """DuckDB 1.5.5's iceberg_scan takes an argument holding `"` for a qualified table name ("Unterminated
    quote in qualified name"): such a metadata file is handed over through a symlink (the manifests'
    own paths, quotes and all, are then read as they are)."""
    path = _local(metadata_location)
    if '"' not in path:
        return path
    link = tmp / f"{len(list(tmp.iterdir()))}.metadata.json"
    link.symlink_to(path)
    return str(link)


def test_handbuilt_rows_unchanged_spark_then_duckdb(spark_results, tmp_path):
    for case, _, entry in _handbuilt(spark_results):
        if entry.get("no_statements") or "build_error" in entry:
            continue  # nothing ran (the build failure is test_handbuilt_tables_were_built_as_named's)
        before = entry["spark_before"]
        duck = cryo_peers.fingerprint(cryo_peers.read_duckdb(_duckdb_path(entry["metadata_location"], tmp_path)))
        assert duck.as_dict() == before, f"{case} {entry['target']}: DuckDB reads {duck} after, Spark read {before} before"


def test_handbuilt_orphans_removed_unless_dry_run(spark_results):
    planted = 0
    for case, _, entry in _handbuilt(spark_results):
        if entry.get("no_statements") or "build_error" in entry:
            continue
        listed = [
            r["orphan_file_location"]
            for s in entry["statements"]
            if s["operation"] == "remove_orphan_files"
            for r in s["rows"]
        ]
        for o in entry["orphans_after"]:
            assert listed and all(_local(x) == o["path"] for x in listed), (case, entry["target"], listed)
            assert o["exists"] == o["dry_run"], f"{case} {entry['target']}: dry_run={o['dry_run']} but exists={o['exists']}"
            planted += 1
    assert planted >= 7


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child_main(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        sys.exit("usage: test_render_spark.py --child FIXTURES_DIR OUT_JSON (normally started by pytest)")
