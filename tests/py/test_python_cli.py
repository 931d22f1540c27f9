"""The ``cryo`` command line (``python -m cryo``), Cryo's log records in Python's ``logging``, and
progress callbacks — against a real demo lake.

Run after installing the package (scripts/test.sh does both):

    $PEERS_PYTHON -m maturin develop -m cryo-py/Cargo.toml
    $PEERS_PYTHON -m pytest tests/py/test_python_cli.py -x -q

What is proved:

- every subcommand runs as a separate process (``python -m cryo`` and the ``cryo`` script) on a demo
  lake, prints cryo-core's text reports by default and JSON with ``--json`` that agrees with the
  Python API;
- a catalog JSON file (``{"name", "properties"}``) works like ``--demo``;
- ``run`` is a dry run unless ``--execute`` (the table's snapshot does not move), a stored plan
  with the wrong ``--reviewed`` fingerprint is refused with exit status 2 and changes nothing,
  ``--execute --receipts`` commits and appends receipts; a run with a failed step exits 1;
- bad usage and configuration exit 2 with a message on stderr;
- a compaction's tracing events arrive as ``cryo.*`` records (caplog), not when the logger is
  above their level; progress callbacks see increasing ``done`` counts up to ``total`` for a fleet
  scan, a compaction and a run; ``progress=True`` draws a tqdm bar.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

cryo = pytest.importorskip("cryo", reason="install the package first: $PEERS_PYTHON -m maturin develop -m cryo-py/Cargo.toml")


def cli(*args: str, check: int | None = 0) -> subprocess.CompletedProcess[str]:
    """`python -m cryo ARGS` in a child process; asserts the exit status unless check is None."""
    proc = subprocess.run(
        [sys.executable, "-m", "cryo", *args], capture_output=True, text=True, timeout=600, env={**os.environ, "NO_COLOR": "1"}
    )
    if check is not None:
        assert proc.returncode == check, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def lake_dir(tmp_path_factory) -> Path:
    """A demo lake built by the CLI itself; only read by the tests that use it."""
    root = tmp_path_factory.mktemp("cli") / "demo-lake"
    out = cli("demo", str(root)).stdout
    assert "built the demo lake" in out and "lake.clickstream" in out
    return root


def _id(table: dict) -> str:
    """`namespace.table` from cryo-core's JSON form of a table identifier."""
    return ".".join([*table["namespace"], table["name"]])


def _snapshots(root: Path) -> dict[str, int | None]:
    lake = cryo.demo_lake(root)
    return {t.table: t.current_snapshot_id for t in lake.catalog.scan_fleet().tables}


# ---- the command line ------------------------------------------------------------------------


def test_demo_reopens_and_reports_json(lake_dir):
    again = json.loads(cli("demo", str(lake_dir), "--json").stdout)
    assert again["built"] is False and again["pristine"] is True
    assert {t["identifier"] for t in again["tables"]} == set(cryo.demo_lake(lake_dir).tables)


def test_grade_human_and_json_agree_with_the_api(lake_dir):
    text = cli("grade", "--demo", str(lake_dir)).stdout
    assert text.splitlines()[0].split()[:3] == ["TABLE", "GRADE", "SCORE"]
    assert "lake.clickstream  grade F" in text and "lake.healthy  grade A" in text

    doc = json.loads(cli("grade", "--demo", str(lake_dir), "--json").stdout)
    by_table = {_id(r["table"]): r for r in doc["tables"]}
    api = {t.table: cryo.grade(t) for t in cryo.demo_lake(lake_dir).catalog.scan_fleet().tables}
    assert set(by_table) == set(api) and doc["errors"] == []
    for name, report in api.items():
        assert (by_table[name]["grade"], by_table[name]["score"]) == (report.grade, report.score)
        assert [f["code"] for f in by_table[name]["findings"]] == [f.code for f in report.findings]


def test_scan_json_and_table_filter(lake_dir):
    fleet = json.loads(cli("scan", "--demo", str(lake_dir), "--json").stdout)
    assert len(fleet["tables"]) == len(cryo.demo_lake(lake_dir).tables) and fleet["errors"] == []
    one = json.loads(cli("scan", "--demo", str(lake_dir), "--table", "lake.healthy", "--json").stdout)
    assert [_id(t["table"]) for t in one["tables"]] == ["lake.healthy"]
    text = cli("scan", "--demo", str(lake_dir), "--table", "lake.healthy").stdout
    assert "lake.healthy" in text and "lake.clickstream" not in text


def test_scan_cache_keeps_memos_and_changes_nothing(lake_dir, tmp_path):
    """`--scan-cache DIR`: one memo per table; a scan with memos finds what one without finds,
    reading only the current manifest lists."""
    def tables(*extra: str) -> dict:
        out = json.loads(cli("scan", "--demo", str(lake_dir), "--json", *extra).stdout)
        return {_id(t["table"]): t for t in out["tables"]}

    def figures(t: dict) -> dict:
        return {k: v for k, v in t.items() if k not in ("io", "duration_ms", "scanned_at_ms")}

    fresh = tables()
    cache = tmp_path / "memos"
    tables("--scan-cache", str(cache))
    warm = tables("--scan-cache", str(cache))
    assert len(list(cache.iterdir())) == len(fresh)
    for name, t in warm.items():
        assert figures(t) == figures(fresh[name]), name
        reads = {kind: n for kind, n, _ in t["io"]["reads"]}
        assert reads.get("manifest_list") == 1 and "manifest" not in reads, (name, reads)


def test_catalog_file_works_like_demo(lake_dir, tmp_path):
    config = tmp_path / "catalog.json"
    root = str(lake_dir.resolve())
    config.write_text(
        json.dumps({"name": "demo", "properties": {"type": "sql", "uri": f"sqlite:///{root}/catalog.db", "warehouse": f"file://{root}/warehouse"}})
    )
    from_file = json.loads(cli("grade", "--catalog", str(config), "--json").stdout)
    from_demo = json.loads(cli("grade", "--demo", str(lake_dir), "--json").stdout)
    assert [(_id(r["table"]), r["score"]) for r in from_file["tables"]] == [(_id(r["table"]), r["score"]) for r in from_demo["tables"]]


def test_plan_render_and_reviewed_run(tmp_path):
    root = tmp_path / "lake"
    cli("demo", str(root))
    plan_file = tmp_path / "plan.json"
    text = cli("plan", "--demo", str(root), "-o", str(plan_file)).stdout
    plan = cryo.Plan.from_json(plan_file.read_text())
    assert f"fingerprint {plan.fingerprint}" in text and "lake.clickstream" in text
    assert json.loads(cli("plan", "--demo", str(root), "--json").stdout)["catalog"] == "demo"

    render = ("render", "--demo", str(root), "--plan", str(plan_file))
    sql = cli(*render, "--dialect", "trino", "--sql-catalog", "iceberg", "--option", "version=478").stdout
    assert sql.rstrip("\n") == plan.render("trino", catalog="iceberg", version=478).rstrip("\n") and "ALTER TABLE" in sql
    spark = json.loads(
        cli(*render, "--dialect", "spark", "--sql-catalog", "demo", "--option", "spark_version=3.5.9", "--option", "iceberg_version=1.10.2", "--json").stdout
    )
    assert spark["plan_fingerprint"] == plan.fingerprint and "rewrite_data_files(" in spark["sql"]
    assert "error [validation]" in cli(*render, "--dialect", "trino", check=2).stderr

    before = _snapshots(root)
    receipts = tmp_path / "receipts.jsonl"
    # The wrong fingerprint: refused before anything runs.
    refused = cli("run", "--demo", str(root), "--plan", str(plan_file), "--reviewed", "0" * 64, "--execute", "--receipts", str(receipts), check=2)
    assert "is not the reviewed plan" in refused.stderr and refused.stdout == ""
    assert not receipts.exists() and _snapshots(root) == before

    # A dry run by default: receipts say what would happen, nothing moves.
    dry = cli("run", "--demo", str(root), "--plan", str(plan_file), "--reviewed", plan.fingerprint, "--receipts", str(receipts))
    assert dry.stdout.startswith("dry run: nothing was changed") and "rewrite_data_files" in dry.stdout
    assert _snapshots(root) == before
    dry_receipts = [json.loads(line) for line in receipts.read_text().splitlines()]
    assert dry_receipts and {r["status"] for r in dry_receipts} <= {"dry_run", "skipped", "deferred"}

    # --execute: the plan is carried out and its receipts appended.
    real = json.loads(
        cli("run", "--demo", str(root), "--plan", str(plan_file), "--reviewed", plan.fingerprint, "--execute", "--receipts", str(receipts), "--lock-dir", str(tmp_path / "locks"), "--json").stdout
    )
    assert real["dry_run"] is False and real["plan_fingerprint"] == plan.fingerprint
    statuses = [r["status"] for r in real["receipts"]]
    assert "succeeded" in statuses and "failed" not in statuses
    assert len(receipts.read_text().splitlines()) == len(dry_receipts) + len(statuses)
    after = _snapshots(root)
    assert after["lake.clickstream"] != before["lake.clickstream"]
    assert after["lake.healthy"] == before["lake.healthy"]


def test_run_with_a_failed_step_exits_1(tmp_path):
    root = tmp_path / "lake"
    lake = cryo.demo_lake(root)
    # Lose the worst table's data files behind the catalog's back: no compaction group can commit.
    import pyarrow as pa

    files = pa.table(lake.catalog.files("lake.clickstream"))
    for path, content in zip(files.column("path").to_pylist(), files.column("content").to_pylist()):
        if content == "data":
            os.remove(path.removeprefix("file://"))
    out = cli("run", "--demo", str(root), "--table", "lake.clickstream", "--operation", "rewrite_data_files", "--execute", check=1)
    assert "failed" in out.stdout and "failed tables: lake.clickstream" in out.stdout


def test_bad_usage_and_config_exit_2(lake_dir, tmp_path):
    assert "--catalog FILE" in cli("grade", check=2).stderr
    assert "cannot read catalog file" in cli("grade", "--catalog", str(tmp_path / "nope.json"), check=2).stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert "not valid JSON" in cli("scan", "--catalog", str(bad), check=2).stderr
    bad.write_text(json.dumps({"name": "x", "properties": {"type": "nosuch"}}))
    assert "error [" in cli("scan", "--catalog", str(bad), check=2).stderr
    assert "invalid choice" in cli("render", "--demo", str(lake_dir), "--dialect", "postgres", check=2).stderr
    assert "--reviewed checks a stored plan" in cli("run", "--demo", str(lake_dir), "--reviewed", "abc", check=2).stderr
    assert "not_found" in cli("scan", "--demo", str(lake_dir), "--table", "lake.nosuch", check=2).stderr
    cli("frobnicate", check=2)


def test_console_script_is_installed(lake_dir):
    script = Path(sys.executable).with_name("cryo")
    assert script.exists(), "the `cryo` console script ([project.scripts]) was not installed"
    proc = subprocess.run([str(script), "--version"], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == f"cryo {cryo.__version__}"
    proc = subprocess.run([str(script), "grade", "--demo", str(lake_dir), "--table", "lake.healthy"], capture_output=True, text=True, check=True)
    assert "lake.healthy  grade A" in proc.stdout


def test_verbose_logs_cryo_events_to_stderr(tmp_path):
    root = tmp_path / "lake"
    cryo.demo_lake(root)
    compact = ("run", "--demo", str(root), "--table", "lake.clickstream", "--operation", "rewrite_data_files")
    quiet = cli(*compact)  # a dry run plans the compaction too
    assert "cryo.compact" not in quiet.stderr
    loud = cli(*compact, "--execute", "-v")
    assert "INFO cryo.compact.run: compaction planned table=lake.clickstream" in loud.stderr


# ---- logging ----------------------------------------------------------------------------------


def test_compaction_events_reach_python_logging(tmp_path, caplog):
    cat = cryo.demo_lake(tmp_path / "lake").catalog
    with caplog.at_level(logging.WARNING, logger="cryo"):
        cat.compact("lake.clickstream", dry_run=True)
    assert not [r for r in caplog.records if r.name.startswith("cryo")]

    with caplog.at_level(logging.INFO, logger="cryo"):
        out = cat.compact("lake.clickstream")
    records = [r for r in caplog.records if r.name.startswith("cryo.")]
    planned = next(r for r in records if r.getMessage().startswith("compaction planned"))
    finished = next(r for r in records if r.getMessage().startswith("compaction finished"))
    assert planned.name == "cryo.compact.run" and planned.levelno == logging.INFO
    assert planned.pathname.endswith("compact/run.rs") and planned.lineno > 0
    assert planned.cryo_fields["table"] == "lake.clickstream"
    assert planned.cryo_fields["dry_run"] == "false"
    assert int(finished.cryo_fields["committed_groups"]) == out.committed_groups >= 1
    assert str(out.snapshot_ids[-1]) in finished.cryo_fields["snapshots"]


# ---- progress ---------------------------------------------------------------------------------


def _increasing(events, stage):
    seen = [(e["done"], e["total"]) for e in events if e["stage"] == stage]
    assert seen, f"no {stage} progress in {events}"
    dones = [d for d, _ in seen]
    totals = {t for _, t in seen}
    assert dones == sorted(dones) and dones[0] == 0 and len(totals) == 1 and dones[-1] == totals.pop(), seen
    return seen


def test_progress_callbacks(tmp_path, monkeypatch):
    lake = cryo.demo_lake(tmp_path / "lake")
    cat = lake.catalog

    events: list[dict] = []
    fleet = cat.scan_fleet(progress=events.append)
    seen = _increasing(events, "scan")
    assert seen[-1] == (len(fleet), len(fleet)) and len(seen) == len(fleet) + 1
    assert {e["table"] for e in events if e["done"]} == set(lake.tables)

    events.clear()
    out = cat.compact("lake.clickstream", progress=events.append)
    assert events[0] == {"stage": "plan", "done": 1, "total": 1, "table": "lake.clickstream"}
    seen = _increasing(events, "rewrite")
    assert seen[-1][1] == len(out.to_dict()["plan"]["groups"]) >= 1

    events.clear()
    plan = cat.plan(cat.scan_fleet())
    cat.run(plan, progress=events.append)
    seen = _increasing(events, "run")
    assert seen[-1][1] == len(plan.tables)

    def broken(_event):
        raise RuntimeError("a broken progress callback")

    # A failing callback is reported (sys.unraisablehook) and does not stop the work.
    unraisable: list = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    assert len(cat.scan_fleet(progress=broken)) == len(fleet)
    assert len(unraisable) == len(fleet) + 1
    assert all(isinstance(u.exc_value, RuntimeError) and u.object is broken for u in unraisable)


def test_progress_true_draws_a_tqdm_bar(tmp_path, capsys):
    import cryo_peers  # here only: it brings pyarrow, which the other tests here do without

    cryo_peers.require_module("tqdm")
    cat = cryo.demo_lake(tmp_path / "lake").catalog
    fleet = cat.scan_fleet(progress=True)
    err = capsys.readouterr().err
    assert "scan: 100%" in err and f"{len(fleet)}/{len(fleet)}" in err
    with pytest.raises(TypeError, match="progress must be a callable"):
        cat.scan_fleet(progress="yes")  # type: ignore[arg-type]
