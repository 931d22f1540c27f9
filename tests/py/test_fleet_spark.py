"""Fleet runs with a real local Spark (3.5 + Iceberg 1.10) as the destination, from Python.

A child process (this file with ``--child``: Spark keeps one JVM per process and caches catalogs)
builds Cryo's demo lake, opens it in Spark as the ``jdbc`` catalog ``demo``, reads every table with
Spark (rows before), plans with Cryo and runs the plan through ``Catalog.run_fleet`` with a
``SparkEngine`` over that session and a ``Governor`` capping Spark at one maintenance statement at a
time; it records what the probe saw while a step ran. The parent then checks:

- every planned step was admitted by the governor before it ran, and succeeded on Spark (receipts
  with the Spark statements, their job-group query ids, snapshot ids before/after);
- never more than one maintenance statement ran at once (the cap), and the probe counted it as Cryo's;
- the re-scanned tables grade better;
- DuckDB (and Spark, after) read exactly the rows Spark read before (order-independent fingerprints);
- Spark's ``snapshots`` table shows the `replace` snapshots the rewrites committed;
- a dry run first submitted nothing (the tables' metadata did not move).

Run with the peers venv:  $PEERS_PYTHON -m pytest tests/py/test_fleet_spark.py
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cryo_peers  # noqa: E402

cryo = pytest.importorskip("cryo", reason="install the package first: $PEERS_PYTHON -m maturin develop -m cryo-py/Cargo.toml")


def _name(t: dict) -> str:
    return ".".join([*t["namespace"], t["name"]])


def _child(root: Path, out: Path) -> None:
    """Everything Spark does, in this process."""
    import threading

    from cryo.engines import SparkEngine

    demo = cryo.demo_lake(root)
    cat = demo.catalog
    spark = cryo_peers.spark_session(root / "catalog.db", root / "warehouse", catalog_name="demo", app_name="cryo-fleet-test")
    tables = cat.list_tables()
    fleet = cat.scan_fleet()
    scores_before = {s.table: cryo.grade(s).score for s in fleet.tables}
    rows_before = {t: list(cryo_peers.fingerprint(cryo_peers.read_spark(spark, f"demo.{t}"))) for t in tables}
    meta_before = {t: cat.scan(t).to_dict()["metadata_location"] for t in tables}
    plan = cat.plan(fleet.tables)

    engine = SparkEngine(spark, catalog="demo")
    governor = cryo.Governor(limits={"spark": {"max_maintenance_per_destination": 1, "max_maintenance_per_coordinator": 1}})

    dry = cat.run_fleet(plan, {"spark": engine}, default_destination="spark", governor=governor)
    meta_after_dry = {t: cat.scan(t).to_dict()["metadata_location"] for t in tables}

    # Watch the session while the run goes: what Spark's status tracker says, as the governor sees it.
    seen: list[dict] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.2):
            try:
                seen.append(engine.probe()["coordinators"][0])
            except Exception as e:  # noqa: BLE001 - recorded for the parent to see
                seen.append({"error": str(e)})

    w = threading.Thread(target=watch, daemon=True)
    w.start()
    real = cat.run_fleet(plan, {"spark": engine}, default_destination="spark", governor=governor, dry_run=False)
    stop.set()
    w.join()

    fleet_after = cat.scan_fleet()
    scores_after = {s.table: cryo.grade(s).score for s in fleet_after.tables}
    rows_after_spark = {t: list(cryo_peers.fingerprint(cryo_peers.read_spark(spark, f"demo.{t}"))) for t in tables}
    snapshots = {
        t: [r.asDict() for r in spark.sql(f"SELECT snapshot_id, operation FROM demo.{t}.snapshots").collect()] for t in tables
    }
    out.write_text(
        json.dumps(
            {
                "tables": tables,
                "scores_before": scores_before,
                "scores_after": scores_after,
                "rows_before": rows_before,
                "rows_after_spark": rows_after_spark,
                "meta_before": meta_before,
                "meta_after_dry": meta_after_dry,
                "metadata_after": {s.table: s.to_dict()["metadata_location"] for s in fleet_after.tables},
                "dry": dry.to_dict(),
                "real": real.to_dict(),
                "real_tables": real.tables(),
                "snapshots": snapshots,
                "seen": seen,
                "governor": json.loads(governor.to_json()),
            },
            default=str,
        )
    )
    spark.stop()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    # The child's Spark session takes this line's jars (spark_session's default).
    cryo_peers.spark_line_or_skip(cryo_peers.spark_line())
    root = tmp_path_factory.mktemp("fleet-spark")
    out = root / "out.json"
    proc = subprocess.run(
        [sys.executable, __file__, "--child", str(root / "lake"), str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text()), root / "lake"


def test_dry_run_submits_nothing(run):
    r, _ = run
    assert r["meta_after_dry"] == r["meta_before"]
    dry = r["dry"]
    assert dry["dry_run"] is True
    statuses = {x["status"] for x in dry["receipts"]}
    assert "succeeded" not in statuses and "failed" not in statuses
    shown = [x for x in dry["receipts"] if x["status"] == "dry_run"]
    assert shown and all(x["details"]["statements"] for x in shown), "a dry run shows the statements"
    assert all(s.startswith("CALL `demo`.system.") for x in shown for s in x["details"]["statements"])


def test_every_step_is_admitted_then_succeeds_on_spark(run):
    r, _ = run
    receipts = r["real"]["receipts"]
    assert not [x for x in receipts if x["status"] == "failed"], [x for x in receipts if x["status"] == "failed"]
    ran = [x for x in receipts if x["status"] == "succeeded"]
    assert len(ran) >= 8, receipts
    for i, x in enumerate(receipts):
        if x["status"] != "succeeded":
            continue
        assert x["engine"] == "spark" and x["details"]["destination"] == "spark"
        assert x["details"]["query_ids"] and all(q.startswith("cryo-maintenance-") for q in x["details"]["query_ids"])
        assert any(
            a["status"] == "admitted" and a["table"] == x["table"] and a["operation"] == x["operation"] for a in receipts[:i]
        ), f"{x['operation']} on {_name(x['table'])} ran without an admission"
        if x["operation"] in ("rewrite_data_files", "rewrite_position_deletes", "convert_equality_deletes"):
            assert x["snapshots_after"] and x["snapshots_after"][0] != x["snapshot_before"], x
            assert x["after"]["files"] < x["before"]["files"], x
            # Spark's procedure result is kept: how many files it rewrote.
            assert x["details"]["results"][0][0], x
    assert {t["status"] for t in r["real_tables"]} == {"done"}, r["real_tables"]


def test_the_governor_caps_maintenance_at_one_statement(run):
    r, _ = run
    receipts = r["real"]["receipts"]
    # Replay admissions and outcomes: at most one step in flight at any point.
    in_flight = peak = 0
    for x in receipts:
        if x["status"] == "admitted":
            in_flight += 1
            peak = max(peak, in_flight)
        elif x["status"] in ("succeeded", "failed") and x["operation"]:
            in_flight -= 1
    assert peak == 1, peak
    loads = [s for s in r["seen"] if "error" not in s]
    assert loads, r["seen"]
    assert max(s["maintenance_running"] for s in loads) <= 1
    assert any(s["maintenance_running"] == 1 for s in loads), "the probe saw Cryo's statement running"


def test_tables_grade_better_and_rows_are_identical(run):
    r, lake = run
    improved = [t for t in r["tables"] if r["scores_after"][t] > r["scores_before"][t]]
    assert len(improved) >= 3, (r["scores_before"], r["scores_after"])
    for t in r["tables"]:
        assert r["rows_after_spark"][t] == r["rows_before"][t], t
        duck = cryo_peers.fingerprint(cryo_peers.read_duckdb(r["metadata_after"][t]))
        assert list(duck) == r["rows_before"][t], f"DuckDB reads other rows of {t}"


def test_spark_shows_the_replace_snapshots(run):
    r, _ = run
    rewritten = {
        _name(x["table"])
        for x in r["real"]["receipts"]
        if x["status"] == "succeeded" and x["operation"] in ("rewrite_data_files", "convert_equality_deletes")
    }
    assert rewritten
    for t in rewritten:
        assert "replace" in {s["operation"] for s in r["snapshots"][t]}, (t, r["snapshots"][t])


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "--child":
    _child(Path(sys.argv[2]), Path(sys.argv[3]))
