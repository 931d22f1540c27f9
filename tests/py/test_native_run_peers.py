"""The demo lake's whole plan run on Cryo's native engine, read back by Spark, PyIceberg and DuckDB.

Run with the peers venv and the package installed:  $PEERS_PYTHON -m pytest tests/py/test_native_run_peers.py -q

Per Spark line (3.5 + Iceberg 1.10, 4.1 + Iceberg 1.12), a fresh demo lake (``cryo.demo_lake``):

1. Every table's rows are fingerprinted with Spark and DuckDB (and PyIceberg where it reads the table:
   PyIceberg 0.12 refuses equality deletes, so not ``lake.customers`` yet).
2. The fleet is scanned, graded and planned, and the plan runs for real on the native engine. No
   step is skipped for want of a native engine; ``lake.customers``'s ``convert_equality_deletes``
   succeeds.
3. Every table reads the same rows with Spark, DuckDB and PyIceberg — ``lake.customers`` included,
   which PyIceberg now reads, its equality deletes applied and gone from the table.
4. Every table is at B or better, or each finding left is one no native operation fixes (a table
   property a person sets, a partitioning to change).

And on another fresh demo lake (Spark 3.5), ``lake.customers``'s equality deletes are converted to position
deletes (``Catalog.convert_equality_deletes``: the dry run changes nothing, the data files stay) and Spark,
DuckDB and PyIceberg read the rows they read before.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import cryo_peers  # noqa: E402
from spark_worker import SparkWorker  # noqa: E402

cryo = cryo_peers.require_module("cryo", "install the package first: $PEERS_PYTHON -m maturin develop -m cryo-py/Cargo.toml")

EQUALITY = "lake.customers"


class Lake:
    def __init__(self, root: Path, line: str) -> None:
        self.root = root
        self.demo = cryo.demo_lake(root / "demo")
        manifest = self.demo.to_dict()
        self.name = manifest["catalog"]["name"]
        props = manifest["catalog"]["properties"]
        self.db = props["uri"][len("sqlite:///") :]
        self.warehouse = props["warehouse"]
        self.catalog = self.demo.catalog
        self.tables = sorted(self.demo.tables)
        self.spark = SparkWorker(self.db, self.warehouse, log=root / "spark.log", app_name="cryo-test-native-run", line=line, catalog=self.name)
        self._n = 0

    def metadata_location(self, ident: str) -> str:
        import sqlite3

        ns, name = ident.rsplit(".", 1)
        con = sqlite3.connect(self.db)
        try:
            (loc,) = con.execute(
                "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?",
                (self.name, ns, name),
            ).fetchone()
        finally:
            con.close()
        return loc

    def fingerprints(self, ident: str) -> dict[str, str]:
        self._n += 1
        out = {
            "spark": str(cryo_peers.fingerprint(self.spark.read(f"{self.name}.{ident}", self.root / f"read-{self._n}.arrow"))),
            "duckdb": str(cryo_peers.fingerprint(cryo_peers.read_duckdb(self.metadata_location(ident)))),
        }
        try:
            data = cryo_peers.read_pyiceberg(ident, catalog_db=self.db, warehouse=self.warehouse, catalog_name=self.name)
        except ValueError as e:
            # PyIceberg 0.12 refuses equality deletes; nothing else is excused.
            assert "equality deletes" in str(e), e
        else:
            out["pyiceberg"] = str(cryo_peers.fingerprint(data))
        return out


@pytest.fixture(scope="module", params=list(cryo_peers.SPARK_LINES), ids=cryo_peers.spark_line_id)
def lake(request, tmp_path_factory):
    line = cryo_peers.spark_line_or_skip(request.param)
    lake = Lake(tmp_path_factory.mktemp(f"native-run-spark{line}"), line)
    try:
        yield lake
    finally:
        lake.spark.close()


def test_native_run_keeps_every_row_and_leaves_no_equality_deletes(lake):
    before = {t: lake.fingerprints(t) for t in lake.tables}
    for t, fp in before.items():
        assert len(set(fp.values())) == 1, (t, fp)
    assert "pyiceberg" not in before[EQUALITY], "the demo's CDC table has equality deletes"
    eq_before = lake.catalog.scan(EQUALITY).to_dict()["delete_files"]["equality"]["files"]
    assert eq_before >= 10

    fleet = lake.catalog.scan_fleet()
    plan = lake.catalog.plan(fleet)
    steps = {
        (".".join([*t["table"]["namespace"], t["table"]["name"]]), s["operation"]) for t in plan.to_dict()["tables"] for s in t["steps"]
    }
    assert (EQUALITY, "convert_equality_deletes") in steps, steps
    outcome = lake.catalog.run(plan, dry_run=False)
    receipts = pa.table(outcome.receipts()).to_pylist()
    assert outcome.failed_tables == [], json.dumps(receipts, default=str)[:3000]
    for r in receipts:
        assert "no native engine" not in (r.get("reason") or ""), r
    convert = [r for r in receipts if r["table"] == EQUALITY and r["operation"] == "convert_equality_deletes"]
    assert [r["status"] for r in convert] == ["succeeded"], convert

    # The same rows, by every reader; PyIceberg now reads the CDC table too.
    for t in lake.tables:
        after = lake.fingerprints(t)
        want = before[t]["duckdb"]
        assert set(after) == {"spark", "duckdb", "pyiceberg"}, (t, after)
        assert after == {k: want for k in after}, (t, before[t], after)
    scan = lake.catalog.scan(EQUALITY).to_dict()
    assert scan["delete_files"]["equality"]["files"] == 0, scan["delete_files"]

    # Every table at B or better, or only findings a person has to act on.
    for s in lake.catalog.scan_fleet().tables:
        report = cryo.grade(s)
        # What a person does: a table property to set (then, maybe, a rewrite), or a repartition.
        left = [f for f in report.findings if not f.remedy.startswith(("set ", "repartition"))]
        assert report.grade in ("A", "B") or not left, (s.table, report.grade, [(f.code, f.remedy) for f in left])


@pytest.fixture(scope="module")
def cdc_lake(tmp_path_factory):
    """A fresh demo lake read by Spark 3.5 (Spark 4.1 reads converted tables, v2 and v3, in
    test_lineage_spark41.py)."""
    line = cryo_peers.spark_line_or_skip(cryo_peers.DEFAULT_SPARK_LINE)
    lake = Lake(tmp_path_factory.mktemp("convert-equality"), line)
    try:
        yield lake
    finally:
        lake.spark.close()


def test_equality_deletes_become_position_deletes_every_reader_agrees(cdc_lake):
    lake = cdc_lake
    before = lake.fingerprints(EQUALITY)
    assert set(before) == {"spark", "duckdb"} and len(set(before.values())) == 1, before
    files_before = lake.catalog.scan(EQUALITY).to_dict()
    eq_before = files_before["delete_files"]["equality"]["files"]

    dry = lake.catalog.convert_equality_deletes(EQUALITY, dry_run=True)
    assert (dry.status, dry.files_converted, dry.positions) == ("dry_run", eq_before, 0), dry.to_dict()
    assert lake.fingerprints(EQUALITY) == before

    out = lake.catalog.convert_equality_deletes(EQUALITY, dry_run=False)
    assert out.status == "committed" and out.files_converted == eq_before and out.positions > 0, out.to_dict()
    assert not out.deletion_vectors and out.left == []
    scan = lake.catalog.scan(EQUALITY).to_dict()
    assert scan["delete_files"]["equality"]["files"] == 0, scan["delete_files"]
    assert scan["delete_files"]["position"]["records"] == out.positions, scan["delete_files"]
    assert scan["data_files"] == files_before["data_files"], "the data files stay as they were"
    # Spark and DuckDB read the same rows; PyIceberg, which refused the equality deletes, reads them too.
    after = lake.fingerprints(EQUALITY)
    assert after == {"spark": before["spark"], "duckdb": before["spark"], "pyiceberg": before["spark"]}, (before, after)
