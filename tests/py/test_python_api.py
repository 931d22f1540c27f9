"""The ``cryo`` Python package (cryo-py) end to end, against real peers.

Run with the peers venv, after installing the package from the clone (scripts/test.sh does both):

    $PEERS_PYTHON -m maturin develop -m cryo-py/Cargo.toml      # debug build into the peers venv
    $PEERS_PYTHON -m pytest tests/py/test_python_api.py -x -q

What is proved:

- the pipeline from Python on a demo lake Cryo builds (``cryo.demo_lake``): scan, grade (frozen
  reports with codes), plan (JSON round trip keeps the fingerprint; a tampered fingerprint is refused),
  render for Trino and Spark, run dry (nothing changes) and for real (receipts, grades improve);
- tabular results cross as Arrow through ``__arrow_c_stream__``: ``pyarrow.table`` and DuckDB read
  receipts, per-partition statistics and orphan listings;
- a table PyIceberg wrote, compacted by ``Catalog.from_pyiceberg(...).compact``, reads back to the same
  rows with PyIceberg and DuckDB (``cryo_peers.fingerprint``);
- destructive operations default to dry runs (cryo-core's defaults, not the binding's);
- errors are ``CryoError`` subclasses with ``code`` (never ValueError); a planted secret never appears
  in a repr, a message or an exception;
- the GIL is released during Rust work, Ctrl-C interrupts a long call, and the package works in a
  child after ``os.fork()``.
"""

from __future__ import annotations

import _thread
import datetime as dt
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cryo_peers  # noqa: E402

cryo = pytest.importorskip("cryo", reason="install the package first: $PEERS_PYTHON -m maturin develop -m cryo-py/Cargo.toml")

SECRET = "planted-Secret-9f3a1c"


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """A demo lake for read-only tests (nobody commits to it)."""
    return cryo.demo_lake(tmp_path_factory.mktemp("lake"))


@pytest.fixture(scope="module")
def fleet(lake):
    return lake.catalog.scan_fleet()


def _pyiceberg_table(tmp: Path, files: int = 8):
    """A PyIceberg-written table with `files` small appends (one data file each)."""
    cat = cryo_peers.sql_catalog(tmp / "catalog.db", tmp / "warehouse", name="py")
    cat.create_namespace("ns")
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("price", pa.float64())])
    table = cat.create_table("ns.items", schema=schema)
    for i in range(files):
        ids = list(range(i * 100, i * 100 + 100))
        table.append(pa.table({"id": ids, "name": [f"item-{n}" for n in ids], "price": [n * 0.5 for n in ids]}, schema=schema))
    return cat


# ---- pipeline -------------------------------------------------------------------------------


def test_scan_grade_on_demo_lake(lake, fleet):
    assert sorted(t.table for t in fleet.tables) == sorted(lake.tables)
    assert len(fleet) == len(lake.tables) and fleet.errors == []
    assert repr(fleet).startswith("FleetScan(catalog \"demo\"")
    reports = {t.table: cryo.grade(t) for t in fleet.tables}
    assert reports["lake.healthy"].grade == "A"
    worst = reports["lake.clickstream"]
    assert worst.grade == "F" and worst.score < 60
    assert worst.findings and all(f.code and f.severity for f in worst.findings)
    assert "lake.clickstream: grade F" in repr(worst)
    assert any(f.operation == "rewrite_data_files" for f in worst.findings)
    # Frozen: results cannot be edited after the fact.
    with pytest.raises(AttributeError):
        worst.score = 100  # type: ignore[misc]
    with pytest.raises(AttributeError):
        worst.findings[0].code = "x"  # type: ignore[misc]
    # to_dict carries cryo-core's serde form.
    d = worst.to_dict()
    assert d["score"] == worst.score and len(d["findings"]) == len(worst.findings)
    one = lake.catalog.scan("lake.clickstream")
    assert one.data_files == next(t for t in fleet.tables if t.table == "lake.clickstream").data_files
    assert cryo.grade(one, skip=[worst.findings[0].code]).score >= worst.score


def test_scan_memo_reads_only_what_changed(lake, tmp_path):
    """`cache_dir`: a second scan reads the current manifest list only, and finds what a scan
    without the memo finds."""
    def reads(scan, kind):
        return sum(n for k, n, _ in scan.to_dict()["io"]["reads"] if k == kind)

    def figures(scan):
        d = scan.to_dict()
        d.pop("io")
        d.pop("duration_ms")
        d.pop("scanned_at_ms")
        return d

    for table in lake.tables:
        fresh = lake.catalog.scan(table)
        cold = lake.catalog.scan(table, cache_dir=tmp_path)
        warm = lake.catalog.scan(table, cache_dir=str(tmp_path))
        assert figures(cold) == figures(warm) == figures(fresh), table
        assert reads(cold, "manifest") == cold.to_dict()["manifests"]["count"], table
        assert (reads(warm, "manifest_list"), reads(warm, "manifest")) == (1, 0), table
    assert len(list(tmp_path.iterdir())) == len(lake.tables)


def test_partition_stats_as_arrow(fleet):
    parts = fleet.partitions()
    table = pa.table(parts)
    assert table.num_rows == len(parts) > 0
    assert {"table", "partition", "data_files", "data_bytes"} <= set(table.column_names)
    by_table = table.group_by("table").aggregate([("data_files", "sum")]).to_pydict()
    files = dict(zip(by_table["table"], by_table["data_files_sum"]))
    for scan in fleet.tables:
        assert files.get(scan.table, 0) == scan.data_files, scan.table
    duckdb = pytest.importorskip("duckdb")
    rows = duckdb.connect().execute("select sum(data_files) from parts").fetchone()
    assert rows[0] == sum(t.data_files for t in fleet.tables)


def test_plan_json_fingerprint_and_render(lake, fleet):
    plan = lake.catalog.plan(fleet)
    assert plan.step_count > 0 and "lake.clickstream" in plan.tables
    assert plan.fingerprint in repr(plan)
    again = cryo.Plan.from_json(plan.to_json())
    assert again == plan and again.fingerprint == plan.fingerprint and again.to_json() == plan.to_json()
    plan.verify(plan.fingerprint)
    with pytest.raises(cryo.ValidationError):
        plan.verify("0" * len(plan.fingerprint))
    doc = json.loads(plan.to_json())
    doc["tables"][0]["score"] += 1  # changed after review
    with pytest.raises(cryo.ValidationError, match="fingerprint mismatch"):
        cryo.Plan.from_json(json.dumps(doc))
    trino = plan.render("trino", catalog="iceberg", version=478)
    assert "ALTER TABLE" in trino and "optimize" in trino
    spark = cryo.render(plan, "spark", catalog="demo", spark_version="3.5.9", iceberg_version="1.10.2")
    assert "CALL `demo`.system.rewrite_data_files(" in spark or "CALL demo.system.rewrite_data_files(" in spark, spark
    with pytest.raises(cryo.ValidationError, match="version"):
        plan.render("trino", catalog="iceberg")
    with pytest.raises(cryo.ValidationError, match="unknown dialect"):
        plan.render("postgres")
    with pytest.raises(cryo.ValidationError, match="unknown option `trino_version`"):
        plan.render("trino", catalog="iceberg", trino_version=478)
    # A Trino destination takes connection and rendering options side by side: cryo-core's field
    # names route each one (a rendering option reaches the dialect's checks).
    engine = cryo.engines.trino(["http://127.0.0.1:9", "http://127.0.0.1:10"], catalog="iceberg", version=478, request_timeout_ms=500)
    assert engine.coordinators == ["http://127.0.0.1:9", "http://127.0.0.1:10"]
    with pytest.raises(cryo.ValidationError, match="retention floors must not be negative"):
        cryo.engines.trino("http://127.0.0.1:9", catalog="iceberg", version=478, expire_snapshots_min_retention_ms=-1)
    with pytest.raises(cryo.ValidationError, match="unknown option `bogus`.*case_insensitive_name_matching.*request_timeout_ms"):
        cryo.engines.trino("http://127.0.0.1:9", catalog="iceberg", version=478, bogus=1)


def test_run_dry_then_for_real_with_receipts(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    lake = cryo.demo_lake(tmp_path / "lake")
    cat = lake.catalog
    before = {t.table: t for t in cat.scan_fleet().tables}
    plan = cat.plan()
    dry = cat.run(plan)  # cryo-core's default: a dry run
    assert dry.dry_run and dry.counts.get("dry_run", 0) > 0 and "succeeded" not in dry.counts
    assert {t.table: t.current_snapshot_id for t in cat.scan_fleet().tables} == {k: v.current_snapshot_id for k, v in before.items()}

    log = tmp_path / "receipts.jsonl"
    real = cat.run(plan, dry_run=False, lock_dir=tmp_path / "locks", receipt_log=log)
    assert not real.dry_run and real.counts.get("succeeded", 0) > 0, real
    assert real.failed_tables == [] and real.plan_fingerprint == plan.fingerprint
    receipts = pa.table(real.receipts())
    assert receipts.num_rows == sum(real.counts.values())
    assert set(receipts.column("plan_fingerprint").to_pylist()) == {plan.fingerprint}
    from_log = pa.table(cryo.read_receipts(log))
    assert sorted(from_log.column("id").to_pylist()) == sorted(receipts.column("id").to_pylist())
    logged = cryo.read_receipts(log)  # noqa: F841 - DuckDB reads it by name (`from logged`)
    by_status = dict(duckdb.connect().execute("select status, count(*) from logged group by status").fetchall())
    assert by_status == real.counts
    after = {t.table: cryo.grade(t) for t in cat.scan_fleet().tables}
    assert after["lake.clickstream"].score > cryo.grade(before["lake.clickstream"]).score


def test_plan_and_run_fleet_take_the_tables_controls(tmp_path):
    """Pauses, deadlines and cooldowns from receipts reach cryo-core's planner and fleet run."""
    lake = cryo.demo_lake(tmp_path / "lake")
    cat = lake.catalog
    fleet = cat.scan_fleet()
    plan = cat.plan(fleet)
    assert "lake.clickstream" in plan.tables and "lake.orders" in plan.tables

    paused = cat.plan(fleet, controls={"lake.clickstream": {"paused": True, "pause_reason": "month-end close"}})
    assert "lake.clickstream" not in paused.tables
    skipped = {".".join([*s["table"]["namespace"], s["table"]["name"]]): s["reason"] for s in paused.to_dict()["skipped_tables"]}
    assert skipped["lake.clickstream"] == "paused: month-end close"
    with pytest.raises(cryo.ValidationError, match="unknown field `pased`"):
        cat.plan(fleet, controls={"lake.clickstream": {"pased": True}})
    with pytest.raises(cryo.ValidationError, match="namespace.table"):
        cat.plan(fleet, controls={"clickstream": {"paused": True}})

    # A run leaves receipts; planned again from them, what just ran cools down.
    log = tmp_path / "receipts.jsonl"
    real = cat.run(plan, dry_run=False, receipt_log=log)
    assert real.counts.get("succeeded", 0) > 0 and real.failed_tables == []
    again = cat.plan(cat.scan_fleet(), receipt_log=log)
    reasons = [s["reason"] for t in again.to_dict()["tables"] for s in t["skipped"]]
    assert any(r.startswith("cooldown: last ran") for r in reasons), again.to_dict()

    # The fleet run checks the controls again before each step: a table paused since the plan
    # was made is left alone.
    fresh = cryo.demo_lake(tmp_path / "lake2")
    plan2 = fresh.catalog.plan()
    before = {t.table: t.current_snapshot_id for t in fresh.catalog.scan_fleet().tables}
    out = fresh.catalog.run_fleet(
        plan2, dry_run=False, controls={"lake.clickstream": {"paused": True, "pause_reason": "owner asked"}}
    )
    rows = pa.table(out.receipts()).to_pylist()
    mine = [r for r in rows if r["table"] == "lake.clickstream"]
    assert mine and all(r["status"] == "deferred" and "owner asked" in r["reason"] for r in mine), mine
    assert any(r["status"] == "succeeded" for r in rows if r["table"] != "lake.clickstream")
    after = {t.table: t.current_snapshot_id for t in fresh.catalog.scan_fleet().tables}
    assert after["lake.clickstream"] == before["lake.clickstream"]


def test_commit_fence_holds_commits_back_while_a_writer_works(tmp_path):
    lake = cryo.demo_lake(tmp_path / "lake")
    cat = lake.catalog
    table = "lake.clickstream"
    before = cat.scan(table).current_snapshot_id
    fence = cryo.CommitFence(tmp_path / "fence", wait_ms=200)
    assert fence.wait_ms == 200 and fence.dir == str(tmp_path / "fence")
    with fence.writer(cat.name, table):
        # A writer operation in flight: the compaction waits 200 ms, commits nothing, says why.
        out = cat.compact(table, dry_run=False, commit_fence=fence)
        assert out.committed_groups == 0 and out.failed_groups > 0
        assert "commit fence" in json.dumps(out.to_dict())
        assert cat.scan(table).current_snapshot_id == before
    # The plan's run takes the fence too (MaintenanceOptions.commit_fence); free now, it commits.
    real = cat.run(cat.plan(), dry_run=False, commit_fence=fence, quiet_period_ms=0)
    assert real.counts.get("succeeded", 0) > 0 and real.failed_tables == [], real
    assert cat.scan(table).current_snapshot_id != before
    with pytest.raises(cryo.ValidationError, match="commit_fence"):
        cat.compact(table, dry_run=False, commit_fence={"dir": ""})


def test_compact_pyiceberg_table_reads_back(tmp_path):
    pycat = _pyiceberg_table(tmp_path)
    rows_before = cryo_peers.fingerprint(cryo_peers.read_pyiceberg("ns.items", catalog=pycat))
    cat = cryo.Catalog.from_pyiceberg(pycat)
    assert cat.name == "py" and cat.kind == "sql"

    dry = cat.compact("ns.items", dry_run=True)
    assert dry.dry_run and dry.snapshot_ids == [] and dry.before.files == 8
    # Just written: inside a quiet period nothing is planned, and the plan says why.
    quiet = cat.compact("ns.items", dry_run=True, quiet_period_ms=600_000)
    assert quiet.committed_groups == 0 and quiet.to_dict()["plan"]["groups"] == []
    skipped = quiet.to_dict()["plan"]["skipped"]
    assert skipped and all(s["reason"].startswith("quiet_period:") for s in skipped)
    assert pycat.load_table("ns.items").current_snapshot().snapshot_id == dry.snapshot_before

    out = cat.compact("ns.items", target_file_size=64 << 20)
    assert not out.dry_run and out.committed_groups >= 1 and out.failed_groups == 0
    assert out.before.files == 8 and out.after.files == 1, out
    assert "CompactionOutcome(ns.items: 8 files" in repr(out)
    table = pycat.load_table("ns.items")
    assert table.current_snapshot().snapshot_id == out.snapshot_ids[-1]
    assert cryo_peers.fingerprint(table.scan().to_arrow()) == rows_before
    assert cryo_peers.fingerprint(cryo_peers.read_duckdb(table.metadata_location)) == rows_before
    assert cat.scan("ns.items").data_files == 1


def test_destructive_operations_default_to_dry_runs(tmp_path):
    pycat = _pyiceberg_table(tmp_path, files=3)
    cat = cryo.Catalog.from_pyiceberg(pycat)
    snapshots = len(pycat.load_table("ns.items").metadata.snapshots)

    expired = cat.expire_snapshots("ns.items", older_than=dt.timedelta(0), retain_last=1)
    assert expired.dry_run and len(expired.expired_snapshot_ids) == snapshots - 1
    assert len(pycat.load_table("ns.items").metadata.snapshots) == snapshots
    assert pa.table(expired.files()).num_rows == expired.before.files - expired.after.files

    data_dir = Path(pycat.load_table("ns.items").location().removeprefix("file://")) / "data"
    planted = data_dir / "orphan-planted.parquet"
    planted.write_bytes(b"not referenced by any snapshot")
    an_hour_ago = time.time() - 3600
    os.utime(planted, (an_hour_ago, an_hour_ago))
    # A one-second window could delete a writer's uncommitted files: core refuses it.
    with pytest.raises(cryo.RefusedError) as refused:
        cat.remove_orphan_files("ns.items", older_than=dt.timedelta(seconds=0))
    assert refused.value.code == "refused" and not refused.value.retryable
    found = cat.remove_orphan_files("ns.items", older_than=dt.timedelta(minutes=10), allow_short_retention=True)
    assert found.dry_run and found.orphan_count == 1 and found.deleted_files == 0 and planted.exists()
    listing = pa.table(found.orphans())
    assert listing.column("path").to_pylist()[0].endswith("orphan-planted.parquet")
    removed = cat.remove_orphan_files(
        "ns.items", older_than=dt.timedelta(minutes=10), allow_short_retention=True, dry_run=False
    )
    assert removed.deleted_files == 1 and not planted.exists()

    assert cat.missing_files("ns.items").is_clean
    manifests = cat.rewrite_manifests("ns.items", dry_run=True)
    assert manifests.dry_run and manifests.snapshot_ids == []
    deletes = cat.rewrite_position_deletes("ns.items", dry_run=True)
    assert deletes.dry_run and deletes.snapshot_ids == []

    expired = cat.expire_snapshots("ns.items", older_than=dt.timedelta(0), retain_last=1, dry_run=False)
    assert not expired.dry_run
    assert len(pycat.load_table("ns.items").metadata.snapshots) == 1
    assert cryo_peers.read_pyiceberg("ns.items", catalog=pycat).num_rows == 300


def test_file_listing_and_missing_files_as_arrow(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    pycat = _pyiceberg_table(tmp_path, files=4)
    cat = cryo.Catalog.from_pyiceberg(pycat)
    files = cat.files("ns.items")
    listing = pa.table(files)
    live = {f.file.file_path for f in pycat.load_table("ns.items").scan().plan_files()}
    assert set(listing.column("path").to_pylist()) == live and len(files) == 4
    assert duckdb.connect().execute("select sum(records) from files").fetchone()[0] == 400

    assert cat.missing_files("ns.items").is_clean
    lost = sorted(live)[0]
    Path(lost.removeprefix("file://")).unlink()
    damage = cat.missing_files("ns.items")
    assert not damage.is_clean and damage.missing_count == 1 and damage.rows_at_risk == 100
    missing = pa.table(damage.missing()).to_pylist()
    assert [(m["path"], m["kind"], m["records"]) for m in missing] == [(lost, "data_file", 100)]


# ---- errors and secrets ---------------------------------------------------------------------


def test_errors_are_typed(lake, tmp_path):
    for name in ["ConfigError", "ValidationError", "CatalogError", "NotFoundError", "StorageError", "MetadataError",
                 "UnsupportedError", "RenderError", "CommitConflictError", "RefusedError", "InternalError"]:
        cls = getattr(cryo, name)
        assert issubclass(cls, cryo.CryoError) and not issubclass(cls, ValueError), name
    with pytest.raises(cryo.ConfigError) as e:
        cryo.Catalog("x", type="oracle")
    assert e.value.code == "config"
    with pytest.raises(cryo.NotFoundError):
        lake.catalog.scan("lake.nope")
    with pytest.raises(cryo.ValidationError, match="unknown option `dry_runs`"):
        lake.catalog.expire_snapshots("lake.healthy", dry_runs=False)
    with pytest.raises(cryo.ValidationError):
        lake.catalog.compact("lake.healthy", min_input_files="many")
    with pytest.raises(cryo.CryoError):
        cryo.Plan.from_json("{not json")
    with pytest.raises(cryo.ValidationError, match="timezone-aware") as naive:
        lake.catalog.expire_snapshots("lake.healthy", older_than=dt.datetime(2026, 1, 1))
    assert naive.value.code == "validation"
    # An aware datetime is an instant: nothing that old in the demo lake's recent history to expire.
    aware = lake.catalog.expire_snapshots("lake.healthy", older_than=dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc))
    assert aware.dry_run and aware.expired_snapshot_ids == []


def test_planted_secret_never_shown(tmp_path):
    # A REST catalog nobody serves: connecting fails; the token and the URI password must not leak.
    with pytest.raises(cryo.CryoError) as e:
        cryo.Catalog("rest", type="rest", uri=f"http://admin:{SECRET}@127.0.0.1:9/", token=SECRET, credential=f"id:{SECRET}")
    assert SECRET not in str(e.value) and SECRET not in repr(e.value)
    # A working catalog with a secret storage property: repr, errors and results stay clean.
    pycat = _pyiceberg_table(tmp_path, files=1)
    props = {**pycat.properties, "type": "sql", "s3.secret-access-key": SECRET, "token": SECRET}
    cat = cryo.Catalog("py", **props)
    shown = [repr(cat), str(cat)]
    try:
        cat.scan("ns.missing")
    except cryo.CryoError as err:
        shown += [str(err), repr(err)]
    scan = cat.scan("ns.items")
    shown += [repr(scan), str(scan.to_dict()), repr(cryo.grade(scan)), str(cat.compact("ns.items", dry_run=True).to_dict())]
    assert all(SECRET not in s for s in shown), [s for s in shown if SECRET in s]


# ---- behaving well inside Python ------------------------------------------------------------


def test_gil_released_during_rust_work(tmp_path):
    ticks = 0
    stop = threading.Event()

    def spin():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.05)
        start_ticks, started = ticks, time.perf_counter()
        cryo.demo_lake(tmp_path / "gil")  # seconds of Rust work (writes Parquet, commits)
        elapsed, during = time.perf_counter() - started, ticks - start_ticks
    finally:
        stop.set()
        t.join()
    assert elapsed > 0.2
    # With the GIL held for the whole call the spinning thread could not run at all.
    assert during > 10_000, (during, elapsed)


def test_one_catalog_from_many_threads(lake):
    from concurrent.futures import ThreadPoolExecutor

    expected = {t: lake.catalog.scan(t).data_files for t in lake.tables}
    with ThreadPoolExecutor(4) as pool:
        got = dict(zip(lake.tables * 3, pool.map(lambda t: lake.catalog.scan(t).data_files, lake.tables * 3)))
    assert got == expected


def test_ctrl_c_interrupts_a_long_call(tmp_path):
    # Reference: how long the call takes uninterrupted.
    started = time.perf_counter()
    cryo.demo_lake(tmp_path / "full")
    full = time.perf_counter() - started
    timer = threading.Timer(0.2, _thread.interrupt_main)
    # Python's own Ctrl-C handler, as in an interactive session: a process started in the
    # background by a shell inherits SIGINT ignored, and then `interrupt_main` does nothing.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        started = time.perf_counter()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            cryo.demo_lake(tmp_path / "interrupted")
        interrupted = time.perf_counter() - started
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert interrupted < 0.2 + 0.5 and interrupted < full, (interrupted, full)
    # The runtime is still usable afterwards.
    assert cryo.demo_lake(tmp_path / "full").catalog.scan("lake.healthy").data_files > 0


def _in_forked_child(work) -> str:
    """Run `work()` in a forked child; its printed result, or fail if it hangs or raises."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            try:
                os.write(w, str(work()).encode())
                code = 0
            except BaseException:  # noqa: BLE001 - reported to the parent through the pipe
                import traceback

                os.write(w, traceback.format_exc()[-3000:].encode())
        finally:
            os._exit(code)
    os.close(w)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the child hung after fork")
    out = os.read(r, 4000).decode()
    os.close(r)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"the child failed: {out}"
    return out


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
# Python 3.12 warns on any fork of a threaded process; forking one that uses Cryo is the point here.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded")
def test_works_after_fork(lake):
    cat = lake.catalog
    files = cat.scan("lake.healthy").data_files  # the parent's runtime and connections are up
    assert files > 0
    # The child uses the catalog it inherited (Airflow forks workers after parsing the DAG file):
    # it reconnects there, on a runtime of its own.
    assert int(_in_forked_child(lambda: cat.scan("lake.healthy").data_files)) == files
    # A catalog made in the child works too.
    uri, warehouse = f"sqlite:///{lake.root}/catalog.db", f"file://{lake.root}/warehouse"
    fresh = _in_forked_child(lambda: cryo.Catalog("demo", type="sql", uri=uri, warehouse=warehouse).scan("lake.healthy").data_files)
    assert int(fresh) == files
    # And the parent still works.
    assert cat.scan("lake.healthy").data_files == files


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded")
def test_a_fork_right_after_a_catalog_call_leaves_the_child_working(lake):
    # sqlx hands back a statement's last row before its worker thread has reset the statement:
    # a fork in that window copied the locks SQLite held there, and the child hung on its first
    # SQLite call (once in CI, under load). Catalog calls now return only once the worker is idle.
    tables = sorted(lake.catalog.list_tables())
    for _ in range(10):
        assert sorted(lake.catalog.list_tables()) == tables  # SQL only: the fork follows at once
        assert _in_forked_child(lambda: ",".join(sorted(lake.catalog.list_tables()))) == ",".join(tables)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded")
def test_a_catalog_dropped_right_before_a_fork_leaves_the_child_working(lake):
    # A dropped catalog closes its SQLite connections. Left to the background, that close could
    # be inside SQLite, holding its global locks, when the process forks: the child then hung on
    # its first SQLite call (14 of 20 forks did, before the close was made on the spot).
    uri, warehouse = f"sqlite:///{lake.root}/catalog.db", f"file://{lake.root}/warehouse"
    files = lake.catalog.scan("lake.healthy").data_files
    for _ in range(10):
        dropped = cryo.Catalog("demo", type="sql", uri=uri, warehouse=warehouse)
        assert dropped.scan("lake.healthy").data_files == files
        del dropped
        fresh = _in_forked_child(lambda: cryo.Catalog("demo", type="sql", uri=uri, warehouse=warehouse).scan("lake.healthy").data_files)
        assert int(fresh) == files


def test_stubs_match_the_native_module():
    stubtest = pytest.importorskip("mypy.stubtest")
    assert stubtest.test_stubs(stubtest.parse_options(["cryo._cryo"])) == 0


def test_readme_python_example_runs(tmp_path, monkeypatch, capsys):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## From Python", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "HealthReport(lake.clickstream: grade F" in out and "ALTER TABLE" in out and "status" in out
