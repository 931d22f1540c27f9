"""Cryo's compaction against real Iceberg peers: interoperability and concurrent writers.

Run with the peers venv:  $PEERS_PYTHON -m pytest tests/py/test_compact_interop.py

Cryo is driven through its command-line example (``examples/compact.rs``, built here with
``cargo build -p cryo-core --example compact``; ``CRYO_COMPACT_BIN`` names another binary) on a fresh
fixture copy (``make_fixtures.py --out <tmp>``) made for this module. Spark runs in one child process for
the whole module (``spark_worker.py``), on the same sqlite catalog, with Iceberg's catalog cache off and
with the read lock Iceberg 1.10.2's ``JdbcCatalog`` leaks at start-up released (without that, no other
process can commit while the Spark session lives: see ``spark_worker.py``). Every Cryo run first checks
that nobody holds a lock on the catalog file.

Interoperability (issue 3, point 4), for ``pyiceberg.events`` (PyIceberg, spec + schema evolution),
``spark.orders_mor`` (Spark, merge-on-read position deletes) and ``spark.upserts_eq`` (equality deletes):

- the rows before compaction read the same with PyIceberg (where it can: it refuses equality deletes),
  DuckDB and Spark, and equal the fixture generator's fingerprint; after Cryo's compaction every reader
  (PyIceberg too, once no equality delete is left) reads exactly those rows;
- Spark's ``snapshots`` table shows Cryo's ``replace`` snapshots, each summary matching what Spark's
  ``all_entries`` table says the snapshot added and removed, with totals that chain from the parent and
  end on the ``files`` table's sums; the new files carry the base snapshot's data sequence number (their
  file sequence number is their own snapshot's), are in the current partition spec, and every delete file
  left still applies to a live data file;
- Spark keeps writing (INSERT, then a MERGE in merge-on-read mode that writes position deletes) and then
  compacts the table itself with ``CALL fixtures.system.rewrite_data_files``: after each step every reader
  reads the rows those writes imply (computed here from the rows before, not from any engine's output).

Concurrency (point 5), another writer committing while Cryo waits between rewrite and commit
(``--pause-before-commit``):

- (a) a PyIceberg append: Cryo retries and commits every group; rows = before + appended;
- (b) a Spark merge-on-read DELETE in one partition Cryo rewrites: that group is ``conflicted`` and its
  new files are deleted (no file of the table's directory is left unreferenced by every snapshot), the
  other groups commit; rows = before minus the deleted rows;
- (c) a Spark merge-on-read MERGE (update, delete, insert) in that partition: same;
- (d) an equality delete (Iceberg's Java writer through Spark's JVM) against rows Cryo rewrites: not a
  conflict; the group commits and, as its files carry the base sequence number, the delete still applies.

In each case the expected rows come from the rows read before and the writer's own change, applied in
Python. Timings are printed at the end of the module (``-s`` shows them) and written to
``<fixtures>/timings.json``.
"""

from __future__ import annotations

import collections
import datetime as dt
import decimal
import json
import os
import queue
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests" / "fixtures"))
import cryo_peers  # noqa: E402
from spark_worker import SparkWorker  # noqa: E402

UTC = dt.timezone.utc
TIMINGS: dict[str, float] = {}
OUTCOMES: dict[str, dict] = {}  # what Cryo reported per scenario, for the module's closing report
INTEROP_TABLES = ["pyiceberg.events", "spark.orders_mor", "spark.upserts_eq"]
MOR = {"write.delete.mode": "merge-on-read", "write.update.mode": "merge-on-read", "write.merge.mode": "merge-on-read"}


def _timed(name: str):
    class _T:
        def __enter__(self):
            self.t0 = time.monotonic()

        def __exit__(self, *exc):
            TIMINGS[name] = round(TIMINGS.get(name, 0.0) + time.monotonic() - self.t0, 2)

    return _T()


# ================================================================================================
# Spark side: functions the Spark child calls (SparkWorker.call("test_compact_interop:<fn>", ...))
# ================================================================================================


def spark_build_orders(spark, ident: str, seed: int, batches: int = 5, rows: int = 120) -> dict:
    """A merge-on-read copy of spark.orders_mor's shape: months(order_date) over Jan-Mar 2026, ``batches``
    appends (a file per month each), then a DELETE that leaves position deletes in every month."""
    import random

    import make_fixtures

    ns = ident.rsplit(".", 1)[0]
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    props = ", ".join(f"'{k}'='{v}'" for k, v in {"format-version": "2", **MOR}.items())
    spark.sql(
        f"""CREATE TABLE {ident} (
              order_id BIGINT NOT NULL, customer_id BIGINT, order_date DATE, status STRING,
              amount DECIMAL(10,2), updated_at TIMESTAMP)
            USING iceberg PARTITIONED BY (months(order_date)) TBLPROPERTIES ({props})"""
    )
    schema = "order_id BIGINT, customer_id BIGINT, order_date DATE, status STRING, amount DECIMAL(10,2), updated_at TIMESTAMP"
    rng = random.Random(seed)
    next_id = 1
    for _ in range(batches):
        spark.createDataFrame(make_fixtures._orders_rows(rng, next_id, rows), schema).coalesce(1).writeTo(ident).append()
        next_id += rows
    spark.sql(f"DELETE FROM {ident} WHERE status = 'cancelled'")
    return {"next_id": next_id}


def _write_eq_delete(spark, jt, column: str, keys: list[str], name: str) -> None:
    """One equality-delete file through Iceberg's Java writer: ``GenericAppenderFactory`` on Iceberg 1.10
    (Spark 3.5), ``GenericFileWriterFactory`` on 1.12 (Spark 4.1), which dropped the former."""
    if spark.version.startswith("3."):
        import make_fixtures

        make_fixtures._write_eq_delete(spark, jt, column, keys, name)
    else:
        import make_fixtures_spark4

        make_fixtures_spark4.write_eq_delete(spark, jt, column, keys, name)


def spark_build_upserts(spark, ident: str, batches: int = 5, rows: int = 40) -> dict:
    """An unpartitioned v2 table: ``batches`` appends of keys k-0000.., then an equality delete (keys % 13)."""
    ns = ident.rsplit(".", 1)[0]
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    spark.sql(f"CREATE TABLE {ident} (event_key STRING NOT NULL, value BIGINT, ts TIMESTAMP) USING iceberg TBLPROPERTIES ('format-version'='2')")
    base = dt.datetime(2026, 2, 1, tzinfo=UTC)
    schema = "event_key STRING, value BIGINT, ts TIMESTAMP"
    for b in range(batches):
        keys = range(b * rows, (b + 1) * rows)
        data = [(f"k-{k:04d}", k * 10, base + dt.timedelta(minutes=k)) for k in keys]
        spark.createDataFrame(data, schema).coalesce(1).writeTo(ident).append()
    jt = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, ident)
    _write_eq_delete(spark, jt, "event_key", [f"k-{k:04d}" for k in range(0, batches * rows, 13)], "eq-delete-before")
    return {"keys": batches * rows}


def spark_equality_delete(spark, ident: str, column: str, keys: list[str], name: str) -> dict:
    """Commit one equality-delete file (Iceberg's Java writer, a RowDelta) on a string column."""
    jt = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, ident)
    _write_eq_delete(spark, jt, column, keys, name)
    jt.refresh()
    return {"snapshot_id": jt.currentSnapshot().snapshotId(), "sequence_number": jt.currentSnapshot().sequenceNumber()}


# ================================================================================================
# Parent helpers
# ================================================================================================


def _local(path_or_uri: str) -> str:
    s = str(path_or_uri)
    if s.startswith("file://"):
        s = s[len("file://") :]
    elif s.startswith("file:"):
        s = s[len("file:") :]
    return os.path.normpath(s)


def _sql_literal(v: Any, t: pa.DataType) -> str:
    """A Spark SQL literal of Arrow type ``t`` (the session time zone is UTC)."""
    if pa.types.is_integer(t):
        sql_type = {8: "TINYINT", 16: "SMALLINT", 32: "INT", 64: "BIGINT"}[t.bit_width]
    elif pa.types.is_decimal(t):
        sql_type = f"DECIMAL({t.precision},{t.scale})"
    elif pa.types.is_timestamp(t):
        sql_type = "TIMESTAMP" if t.tz else "TIMESTAMP_NTZ"
    elif pa.types.is_date(t):
        sql_type = "DATE"
    elif pa.types.is_float32(t):
        sql_type = "FLOAT"
    elif pa.types.is_float64(t):
        sql_type = "DOUBLE"
    elif pa.types.is_boolean(t):
        sql_type = "BOOLEAN"
    elif pa.types.is_string(t) or pa.types.is_large_string(t) or str(t) == "string_view":
        sql_type = "STRING"
    else:  # pragma: no cover - the tables here have no other types
        raise TypeError(f"no literal for {t}")
    if v is None:
        return f"CAST(NULL AS {sql_type})"
    if sql_type == "STRING":
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if sql_type == "BOOLEAN":
        return "TRUE" if v else "FALSE"
    if sql_type.startswith("TIMESTAMP"):
        if v.tzinfo is not None:
            v = v.astimezone(UTC).replace(tzinfo=None)
        return f"{sql_type} '{v.strftime('%Y-%m-%d %H:%M:%S.%f')}'"
    if sql_type == "DATE":
        return f"DATE '{v.isoformat()}'"
    if sql_type in ("FLOAT", "DOUBLE"):
        return f"CAST('{float(v)!r}' AS {sql_type})"
    return f"CAST('{v}' AS {sql_type})"


def _note(out: dict) -> None:
    OUTCOMES[out["table"]] = {
        k: out[k]
        for k in ["committed_groups", "conflicted_groups", "failed_groups", "files_in", "files_out", "rows_deleted", "delete_files_removed", "retries", "duration_ms"]
    } | {"snapshots": len(out["snapshot_ids"]), "conflicts": sorted({c["kind"] for g in out["groups"] for c in g["status"].get("conflicts", [])})}


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _rows_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema)


def assert_same_rows(got: dict[str, pa.Table], expected: pa.Table, what: str) -> cryo_peers.Fingerprint:
    """Every reader's rows have the expected fingerprint; on a mismatch, show which rows differ."""
    want = cryo_peers.fingerprint(expected)
    bad = {}
    for reader, table in got.items():
        fp = cryo_peers.fingerprint(table)
        if fp != want:
            have = collections.Counter(cryo_peers.canonical_rows(table))
            exp = collections.Counter(cryo_peers.canonical_rows(expected))
            missing = list((exp - have).elements())
            extra = list((have - exp).elements())
            bad[reader] = f"{fp.rows} rows (want {want.rows}); {len(missing)} missing e.g. {missing[:3]}; {len(extra)} extra e.g. {extra[:3]}"
    assert not bad, f"{what}: readers disagree with the expected rows: {json.dumps(bad, indent=1, ensure_ascii=False)}"
    return want


class Env:
    """The fresh fixtures, the Cryo binary and the Spark child, with readers for all three peers."""

    def __init__(self, root: Path, manifest: dict, cryo_bin: Path, spark: SparkWorker) -> None:
        self.root = root
        self.manifest = manifest
        self.db = root / "catalog.db"
        self.warehouse = root / "warehouse"
        self.cryo_bin = cryo_bin
        self.spark = spark
        self.catalog_json = root / "cryo-catalog.json"
        self.catalog_json.write_text(
            json.dumps({"name": "fixtures", "properties": {"uri": f"sqlite:///{self.db}", "warehouse": self.warehouse.as_uri()}})
        )
        self._n = 0

    # ---- catalog ---------------------------------------------------------------------------------
    def catalog(self):
        return cryo_peers.sql_catalog(self.db, self.warehouse)

    def metadata_location(self, ident: str) -> str:
        ns, name = ident.rsplit(".", 1)
        con = sqlite3.connect(str(self.db))
        try:
            (loc,) = con.execute(
                "SELECT metadata_location FROM iceberg_tables WHERE table_namespace = ? AND table_name = ?", (ns, name)
            ).fetchone()
        finally:
            con.close()
        return loc

    def metadata(self, ident: str) -> dict:
        return json.loads(Path(_local(self.metadata_location(ident))).read_text())

    def tmp(self, suffix: str) -> Path:
        self._n += 1
        return self.root / f"tmp-{self._n}{suffix}"

    # ---- readers -----------------------------------------------------------------------------------
    def read_pyiceberg(self, ident: str) -> pa.Table:
        return self.catalog().load_table(ident).scan().to_arrow()

    def read_duckdb(self, ident: str) -> pa.Table:
        return cryo_peers.read_duckdb(self.metadata_location(ident))

    def read_spark(self, ident: str) -> pa.Table:
        return self.spark.read(f"fixtures.{ident}", self.tmp(".arrow"))

    def read_all(self, ident: str, *, pyiceberg: bool = True) -> dict[str, pa.Table]:
        with _timed("reads (pyiceberg+duckdb+spark)"):
            out = {"duckdb": self.read_duckdb(ident), "spark": self.read_spark(ident)}
            if pyiceberg:
                out["pyiceberg"] = self.read_pyiceberg(ident)
        return out

    def assert_catalog_unlocked(self) -> None:
        cryo_peers.assert_sqlite_unlocked(self.db)

    # ---- Cryo ---------------------------------------------------------------------------------------
    def cryo(self, ident: str, *args: str) -> dict:
        self.assert_catalog_unlocked()
        with _timed("cryo compact runs"):
            proc = subprocess.run(
                [str(self.cryo_bin), "--catalog", str(self.catalog_json), "--table", ident, *args],
                capture_output=True,
                text=True,
                timeout=300,
            )
        assert proc.returncode == 0, f"cryo compact {ident} failed: {proc.stderr[-3000:]}"
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        _note(out)
        return out

    def cryo_paused(self, ident: str, *args: str) -> PausedCryo:
        self.assert_catalog_unlocked()
        return PausedCryo(self, ident, list(args))

    # ---- files ------------------------------------------------------------------------------------
    def files_on_disk(self, ident: str) -> set[str]:
        """Data and delete files under the table's location (metadata and Hadoop's .crc files aside)."""
        loc = Path(_local(self.metadata(ident)["location"]))
        out = set()
        for dirpath, dirnames, filenames in os.walk(loc):
            dirnames[:] = [d for d in dirnames if not (Path(dirpath) == loc and d == "metadata")]
            for f in filenames:
                if not f.startswith(".") and not f.endswith(".crc"):
                    out.add(os.path.normpath(os.path.join(dirpath, f)))
        return out

    def referenced_files(self, ident: str) -> set[str]:
        """Every data and delete file any snapshot's manifests list (deleted entries included)."""
        table = self.catalog().load_table(ident)
        out = set()
        for snapshot in table.metadata.snapshots:
            for manifest in snapshot.manifests(table.io):
                for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                    out.add(_local(entry.data_file.file_path))
        return out

    def unreferenced_files(self, ident: str) -> set[str]:
        return self.files_on_disk(ident) - self.referenced_files(ident)

    # ---- Spark metadata tables --------------------------------------------------------------------
    def snapshots(self, ident: str) -> list[dict]:
        return self.spark.sql(
            f"SELECT snapshot_id, parent_id, operation, summary, CAST(committed_at AS STRING) AS committed_at "
            f"FROM fixtures.{ident}.snapshots ORDER BY committed_at, snapshot_id"
        )

    def entries(self, ident: str, table: str = "entries") -> list[dict]:
        rows = self.spark.sql(
            f"SELECT status, snapshot_id, sequence_number, file_sequence_number, data_file.content AS content, "
            f"data_file.file_path AS file_path, data_file.record_count AS record_count, "
            f"data_file.file_size_in_bytes AS file_size_in_bytes, data_file.spec_id AS spec_id, "
            f"to_json(data_file) AS data_file_json FROM fixtures.{ident}.{table}"
        )
        for r in rows:
            r["partition"] = json.dumps(json.loads(r.pop("data_file_json")).get("partition", {}), sort_keys=True)
        return rows

    def files(self, ident: str) -> list[dict]:
        return self.spark.sql(
            f"SELECT content, file_path, record_count, file_size_in_bytes, spec_id FROM fixtures.{ident}.files"
        )


class PausedCryo:
    """``compact --pause-before-commit FLAG``: the files are rewritten and the commit waits for FLAG."""

    def __init__(self, env: Env, ident: str, args: list[str]) -> None:
        self.flag = env.tmp(".go")
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [str(env.cryo_bin), "--catalog", str(env.catalog_json), "--table", ident, "--pause-before-commit", str(self.flag), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stdout: list[str] = []

        def pump() -> None:
            for line in self.proc.stdout:
                self.lines.put(line.rstrip("\n"))
            self.lines.put(None)

        threading.Thread(target=pump, daemon=True).start()

    def wait_rewritten(self, timeout: float = 300) -> int:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                self.proc.kill()
                raise AssertionError("cryo never reported REWRITTEN") from None
            if line is None:
                raise AssertionError(f"cryo exited before REWRITTEN: {self.proc.wait()} {self.proc.stderr.read()[-3000:]}")
            self.stdout.append(line)
            if line.startswith("REWRITTEN "):
                return int(line.split()[1])

    def finish(self, env: Env, timeout: float = 300) -> dict:
        env.assert_catalog_unlocked()
        self.flag.touch()
        rc = self.proc.wait(timeout=timeout)
        while (line := self.lines.get(timeout=30)) is not None:
            self.stdout.append(line)
        TIMINGS["cryo compact runs"] = round(TIMINGS.get("cryo compact runs", 0.0) + time.monotonic() - self.t0, 2)
        assert rc == 0, f"cryo compact failed: {self.proc.stderr.read()[-3000:]}"
        out = json.loads(self.stdout[-1])
        _note(out)
        return out


# ================================================================================================
# Fixtures
# ================================================================================================


@pytest.fixture(scope="module", params=list(cryo_peers.SPARK_LINES), ids=cryo_peers.spark_line_id)
def env(request, tmp_path_factory):
    line = cryo_peers.spark_line_or_skip(request.param)
    root = tmp_path_factory.mktemp(f"compact-interop-spark{line}")
    t_module = time.monotonic()
    with _timed("make_fixtures (fresh copy)"):
        subprocess.run(
            [sys.executable, str(REPO / "tests" / "fixtures" / "make_fixtures.py"), "--out", str(root), "--local"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    manifest = json.loads((root / "manifest.json").read_text())
    if os.environ.get("CRYO_COMPACT_BIN"):
        cryo_bin = Path(os.environ["CRYO_COMPACT_BIN"])
    else:
        with _timed("cargo build --example compact"):
            cryo_bin = cryo_peers.cargo_examples("compact") / "compact"
    with _timed("spark child start"):
        spark = SparkWorker(root / "catalog.db", root / "warehouse", log=root / "spark-worker.log", app_name="cryo-test-compact-interop", line=line)
    assert spark.start_info["catalog_connections_closed"] >= 1, "the JDBC catalog's leaked lock was not released"
    try:
        yield Env(root, manifest, cryo_bin, spark)
    finally:
        spark.close()
        TIMINGS["module total"] = round(time.monotonic() - t_module, 1)
        slow = sorted(spark.timings, key=lambda t: -t[1])[:8]
        report = {"timings_s": TIMINGS, "slowest spark requests": slow, "spark requests": len(spark.timings), "cryo outcomes": OUTCOMES}
        (root / "timings.json").write_text(json.dumps(report, indent=1))
        sys.stderr.write(f"\ncompact interop timings: {json.dumps(report)}\n")


# ================================================================================================
# (4) Interoperability
# ================================================================================================

_COMPACTED: dict[tuple[Path, str], dict] = {}


def compacted(env: Env, ident: str) -> dict:
    """Compact ``ident`` once with Cryo and record what every peer saw before and after."""
    if (env.root, ident) in _COMPACTED:
        return _COMPACTED[(env.root, ident)]
    entry = env.manifest["tables"][f"fixtures.{ident}"]
    rec: dict[str, Any] = {"ident": ident}
    before = env.read_all(ident, pyiceberg=False)
    try:
        before["pyiceberg"] = env.read_pyiceberg(ident)
        rec["pyiceberg_before"] = "read"
    except ValueError as e:  # PyIceberg 0.12 refuses equality deletes (scripts/README.md)
        assert "equality deletes" in str(e), e
        rec["pyiceberg_before"] = "refused: equality deletes"
    rec["before"] = before["duckdb"]
    rec["before_fp"] = assert_same_rows(before, before["duckdb"], f"{ident} before compaction")
    assert (rec["before_fp"].rows, rec["before_fp"].sha256) == (entry["row_count"], entry["fingerprint"]), "not the generator's rows"
    rec["base_md"] = env.metadata(ident)
    rec["snapshots_before"] = {s["snapshot_id"] for s in env.snapshots(ident)}
    rec["files_before"] = env.files(ident)
    rec["unreferenced_before"] = env.unreferenced_files(ident)
    rec["outcome"] = env.cryo(ident)
    rec["after"] = env.read_all(ident, pyiceberg=True)  # PyIceberg too: no equality delete may be left
    rec["after_md"] = env.metadata(ident)
    rec["snapshots"] = env.snapshots(ident)
    rec["all_entries"] = env.entries(ident, "all_entries")
    rec["entries"] = env.entries(ident, "entries")
    rec["files"] = env.files(ident)
    rec["unreferenced_after"] = env.unreferenced_files(ident)
    _COMPACTED[(env.root, ident)] = rec
    return rec


@pytest.mark.parametrize("ident", INTEROP_TABLES)
def test_cryo_compaction_keeps_every_row_for_every_reader(env, ident):
    rec = compacted(env, ident)
    out = rec["outcome"]
    assert out["groups"] and out["committed_groups"] == len(out["groups"]), out
    assert out["files_in"] > out["files_out"] > 0
    assert_same_rows(rec["after"], rec["before"], f"{ident} after Cryo's compaction")
    assert rec["after_md"]["current-snapshot-id"] != rec["base_md"]["current-snapshot-id"]
    if ident == "spark.upserts_eq":
        assert rec["pyiceberg_before"].startswith("refused"), "the fixture should have equality deletes"
    # Cryo left nothing behind in the table's directory.
    assert rec["unreferenced_after"] <= rec["unreferenced_before"], rec["unreferenced_after"] - rec["unreferenced_before"]


def _summary_int(s: dict, key: str) -> int:
    return int(s.get(key) or 0)


def _chain(snapshots: list[dict], head_id: int) -> list[dict]:
    """The snapshots from the first to ``head_id`` along parent ids (commit times can tie)."""
    by_id = {s["snapshot_id"]: s for s in snapshots}
    out = []
    sid = head_id
    while sid is not None:
        out.append(by_id[sid])
        sid = by_id[sid]["parent_id"]
    return out[::-1]


def _head(env: Env, ident: str) -> dict:
    return _chain(env.snapshots(ident), env.metadata(ident)["current-snapshot-id"])[-1]


@pytest.mark.parametrize("ident", INTEROP_TABLES)
def test_spark_metadata_shows_correct_replace_snapshots(env, ident):
    rec = compacted(env, ident)
    out = rec["outcome"]
    chain = _chain(rec["snapshots"], rec["after_md"]["current-snapshot-id"])
    new = [s for s in chain if s["snapshot_id"] not in rec["snapshots_before"]]
    assert [s["snapshot_id"] for s in new] == out["snapshot_ids"], "Spark sees other snapshots than Cryo committed"
    by_id = {s["snapshot_id"]: s for s in rec["snapshots"]}
    assert new[0]["parent_id"] == rec["base_md"]["current-snapshot-id"]
    totals = ["total-data-files", "total-delete-files", "total-records", "total-files-size", "total-position-deletes", "total-equality-deletes"]
    for s in new:
        sid, summ = s["snapshot_id"], s["summary"]
        assert s["operation"] == "replace", s
        assert summ.get("cryo.operation") == "rewrite_data_files" and summ.get("engine-name") == "cryo", summ
        mine = [e for e in rec["all_entries"] if e["snapshot_id"] == sid and e["status"] in (1, 2)]
        uniq = {(e["status"], e["file_path"]): e for e in mine}.values()
        added = [e for e in uniq if e["status"] == 1]
        removed = [e for e in uniq if e["status"] == 2]
        assert all(e["content"] == 0 for e in added), "a rewrite adds data files only"
        rdata = [e for e in removed if e["content"] == 0]
        rpos = [e for e in removed if e["content"] == 1]
        req = [e for e in removed if e["content"] == 2]
        want = {
            "added-data-files": len(added),
            "deleted-data-files": len(rdata),
            "added-records": sum(e["record_count"] for e in added),
            "deleted-records": sum(e["record_count"] for e in rdata),
            "added-files-size": sum(e["file_size_in_bytes"] for e in added),
            "removed-files-size": sum(e["file_size_in_bytes"] for e in removed),
            "removed-delete-files": len(rpos) + len(req),
            "removed-position-delete-files": len(rpos),
            "removed-equality-delete-files": len(req),
            "removed-position-deletes": sum(e["record_count"] for e in rpos),
            "removed-equality-deletes": sum(e["record_count"] for e in req),
            "added-delete-files": 0,
        }
        got = {k: _summary_int(summ, k) for k in want}
        assert got == want, f"{ident} snapshot {sid}: summary {got} but Spark's all_entries say {want}"
        # Totals chain from the parent.
        parent = by_id[s["parent_id"]]["summary"]
        delta = {
            "total-data-files": len(added) - len(rdata),
            "total-delete-files": -(len(rpos) + len(req)),
            "total-records": want["added-records"] - want["deleted-records"],
            "total-files-size": want["added-files-size"] - want["removed-files-size"],
            "total-position-deletes": -want["removed-position-deletes"],
            "total-equality-deletes": -want["removed-equality-deletes"],
        }
        for k in totals:
            assert _summary_int(summ, k) == _summary_int(parent, k) + delta[k], (ident, sid, k, summ, parent)
        # And with what Cryo reports for the groups it committed in this snapshot.
        groups = [g for g in out["groups"] if g["status"].get("snapshot_id") == sid]
        assert groups
        assert sum(g["data_files_in"] for g in groups) == len(rdata)
        assert sum(g["data_files_out"] for g in groups) == len(added)
        assert sum(g["rows_in"] for g in groups) == want["deleted-records"]
        assert sum(g["rows_out"] for g in groups) == want["added-records"]
        for g in groups:
            d = g["rows_deleted"]
            assert g["rows_out"] == g["rows_in"] - d["position"] - d["equality"] - d["deletion_vector"], g
    # The last one's totals are what Spark's files table holds now.
    files = rec["files"]
    last = new[-1]["summary"]
    data = [f for f in files if f["content"] == 0]
    pos = [f for f in files if f["content"] == 1]
    eq = [f for f in files if f["content"] == 2]
    assert {k: _summary_int(last, k) for k in totals} == {
        "total-data-files": len(data),
        "total-delete-files": len(pos) + len(eq),
        "total-records": sum(f["record_count"] for f in data),
        "total-files-size": sum(f["file_size_in_bytes"] for f in files),
        "total-position-deletes": sum(f["record_count"] for f in pos),
        "total-equality-deletes": sum(f["record_count"] for f in eq),
    }
    if not pos and not eq:  # no delete left: the live records are the rows every reader read
        assert rec["before_fp"].rows == sum(f["record_count"] for f in data)


@pytest.mark.parametrize("ident", INTEROP_TABLES)
def test_new_files_carry_the_base_sequence_number_in_the_current_spec(env, ident):
    rec = compacted(env, ident)
    md = rec["after_md"]
    seq = {s["snapshot-id"]: s["sequence-number"] for s in md["snapshots"]}
    base_seq = seq[rec["base_md"]["current-snapshot-id"]]
    assert rec["outcome"]["base_snapshot_id"] == rec["base_md"]["current-snapshot-id"]
    live = {e["file_path"]: e for e in rec["entries"] if e["status"] != 2}
    checked = 0
    for sid in rec["outcome"]["snapshot_ids"]:
        assert seq[sid] > base_seq
        added = [e for e in rec["all_entries"] if e["snapshot_id"] == sid and e["status"] == 1]
        for e in added:
            assert e["sequence_number"] == base_seq, (e["file_path"], e["sequence_number"], base_seq)
            assert e["file_sequence_number"] == seq[sid], (e["file_path"], e["file_sequence_number"], seq[sid])
            assert e["spec_id"] == md["default-spec-id"], "rewritten into an old spec"
            assert e["file_path"] in live, "a file Cryo added is not live"
            assert live[e["file_path"]]["sequence_number"] == base_seq, "the entry lost its sequence number when carried"
            checked += 1
    assert checked == rec["outcome"]["files_out"]
    if ident == "pyiceberg.events":
        # Every file of the old spec (day + category) was rewritten into the current one (+ user bucket).
        assert len(md["partition-specs"]) == 2
        assert {e["spec_id"] for e in live.values()} == {md["default-spec-id"]}
        old = [f for f in rec["files_before"] if f["spec_id"] != md["default-spec-id"]]
        assert old, "the fixture should have files in the old spec"


@pytest.mark.parametrize("ident", INTEROP_TABLES)
def test_no_dangling_delete_files(env, ident):
    rec = compacted(env, ident)
    live = [e for e in rec["entries"] if e["status"] != 2]
    data = [e for e in live if e["content"] == 0]
    deletes = [e for e in live if e["content"] in (1, 2)]
    assert len(deletes) == sum(1 for f in rec["files"] if f["content"] in (1, 2))
    live_paths = {_local(e["file_path"]) for e in data}
    for d in deletes:
        if d["content"] == 1:
            targets = {_local(p) for p in pq.read_table(_local(d["file_path"]), columns=["file_path"]).column(0).to_pylist()}
            assert targets & live_paths, f"{ident}: position delete file {d['file_path']} applies to no live data file"
        else:
            applies = any(
                f["sequence_number"] < d["sequence_number"] and (f["spec_id"], f["partition"]) == (d["spec_id"], d["partition"])
                for f in data
            ) or (d["partition"] == "{}" and any(f["sequence_number"] < d["sequence_number"] for f in data))
            assert applies, f"{ident}: equality delete file {d['file_path']} applies to no live data file"
    before_deletes = [f for f in rec["files_before"] if f["content"] in (1, 2)]
    if ident in ("spark.orders_mor", "spark.upserts_eq"):
        # Every data file there had deletes, so every one was rewritten and every delete file went with it.
        assert before_deletes and not deletes, deletes
        assert rec["outcome"]["delete_files_removed"] == len(before_deletes)


# ---- Spark keeps writing ------------------------------------------------------------------------

# key column, a non-partition column a MERGE updates, and the new value
WRITES = {
    "pyiceberg.events": ("event_id", "comment", lambda v: "merged ✓ 'quoted'"),
    "spark.orders_mor": ("order_id", "status", lambda v: "merged"),
    "spark.upserts_eq": ("event_key", "value", lambda v: (v or 0) + 1_000_000),
}


def _new_keys(rows: list[dict], key: str, n: int, tag: str) -> list:
    sample = rows[0][key]
    if isinstance(sample, str):
        return [f"spark-{tag}-{i}" for i in range(n)]
    top = max(r[key] for r in rows)
    return [top + 1000 + i + (0 if tag == "ins" else 100) for i in range(n)]


def _values(rows: list[dict], schema: pa.Schema, ops: list[str] | None = None) -> str:
    """The rows as a Spark VALUES list (typed literals), each followed by its op when given."""
    out = []
    for i, r in enumerate(rows):
        vals = [_sql_literal(r[f.name], f.type) for f in schema]
        if ops is not None:
            vals.append(_sql_literal(ops[i], pa.string()))
        out.append("(" + ", ".join(vals) + ")")
    return ",\n  ".join(out)


@pytest.mark.parametrize("ident", INTEROP_TABLES)
def test_spark_keeps_writing_and_compacts_after_cryo(env, ident):
    rec = compacted(env, ident)
    key, col, change = WRITES[ident]
    schema = rec["before"].schema
    rows = sorted(rec["before"].to_pylist(), key=lambda r: r[key])
    n = len(rows)
    t = f"fixtures.{ident}"
    cols = ", ".join(_q(f.name) for f in schema)
    props = ", ".join(f"'{k}'='{v}'" for k, v in MOR.items())
    env.spark.sql(f"ALTER TABLE {t} SET TBLPROPERTIES ({props})")

    # INSERT: copies of three rows (same partitions) under new keys.
    ins = [dict(rows[i], **{key: k}) for i, k in zip((0, n // 2, n - 1), _new_keys(rows, key, 3, "ins"))]
    env.spark.sql(f"INSERT INTO {t} ({cols}) VALUES\n  {_values(ins, schema)}")
    expected = rows + ins

    # MERGE (merge-on-read): delete five rows, update five, insert two.
    dels = [rows[(3 + 37 * i) % n] for i in range(5)]
    upds = [rows[(11 + 41 * i) % n] for i in range(5)]
    assert not {r[key] for r in dels} & {r[key] for r in upds}
    news = [dict(rows[(7 + 53 * i) % n], **{key: k}) for i, k in enumerate(_new_keys(rows, key, 2, "merge"))]
    source = [dict(r) for r in dels] + [dict(r, **{col: change(r[col])}) for r in upds] + news
    ops = ["D"] * len(dels) + ["U"] * len(upds) + ["I"] * len(news)
    s_cols = ", ".join([*(_q(f.name) for f in schema), "`_op`"])
    env.spark.sql(
        f"""MERGE INTO {t} AS t
            USING (SELECT * FROM VALUES
              {_values(source, schema, ops)} AS s({s_cols})) AS s
            ON t.{_q(key)} = s.{_q(key)}
            WHEN MATCHED AND s._op = 'D' THEN DELETE
            WHEN MATCHED AND s._op = 'U' THEN UPDATE SET t.{_q(col)} = s.{_q(col)}
            WHEN NOT MATCHED AND s._op = 'I' THEN INSERT ({cols}) VALUES ({", ".join("s." + _q(f.name) for f in schema)})"""
    )
    del_keys = {r[key] for r in dels}
    upd = {r[key]: change(r[col]) for r in upds}
    expected = [dict(r, **({col: upd[r[key]]} if r[key] in upd else {})) for r in expected if r[key] not in del_keys] + news
    merge_snap = _head(env, ident)
    assert merge_snap["operation"] == "overwrite", merge_snap
    assert _summary_int(merge_snap["summary"], "added-position-delete-files") > 0, "the MERGE did not write position deletes"
    assert_same_rows(env.read_all(ident), _rows_table(expected, schema), f"{ident} after Spark's INSERT and MERGE")

    # Spark compacts the table itself, Cryo's files included.
    res = env.spark.sql(
        f"CALL fixtures.system.rewrite_data_files(table => '{ident}', options => map('rewrite-all', 'true', 'remove-dangling-deletes', 'true'))"
    )
    assert res and int(res[0]["rewritten_data_files_count"]) > 0 and int(res[0]["failed_data_files_count"]) == 0, res
    last = _head(env, ident)
    assert last["operation"] == "replace" and last["summary"].get("engine-name") == "spark", last
    cryo_files = {e["file_path"] for e in rec["all_entries"] if e["status"] == 1 and e["snapshot_id"] in rec["outcome"]["snapshot_ids"]}
    assert not cryo_files & {f["file_path"] for f in env.files(ident)}, "Spark's rewrite-all left Cryo's files in place"
    assert_same_rows(env.read_all(ident), _rows_table(expected, schema), f"{ident} after Spark's rewrite_data_files")


# ================================================================================================
# (5) Concurrency: another writer commits between Cryo's rewrite and its commit
# ================================================================================================


def _partition_path(g: dict) -> str:
    return g["partition"]["path"]


def _cryo_files(env: Env, ident: str, before: set[str]) -> set[str]:
    """Files that appeared in the table's directory since ``before`` (Cryo's, while it waits)."""
    return env.files_on_disk(ident) - before


def _check_warehouse(env: Env, ident: str, out: dict, unref_before: set[str], written: set[str]) -> None:
    """Cryo's files of conflicted groups are gone; those of committed groups are referenced."""
    assert len(written) == sum(g["data_files_out"] for g in out["groups"]), (len(written), out)
    unref = env.unreferenced_files(ident)
    assert unref <= unref_before, f"files left in the warehouse that no snapshot references: {sorted(unref - unref_before)}"
    on_disk = env.files_on_disk(ident)
    kept = written & on_disk
    assert len(kept) == sum(g["data_files_out"] for g in out["groups"] if g["status"]["status"] == "committed")
    assert kept <= env.referenced_files(ident)


def test_pyiceberg_append_while_cryo_waits_retries_and_commits_everything(env):
    """(a) A PyIceberg append lands between Cryo's rewrite and its commit."""
    from pyiceberg.transforms import DayTransform, IdentityTransform

    import make_fixtures

    ident = "conc.events_append"
    cat = env.catalog()
    cat.create_namespace_if_not_exists("conc")
    gen = make_fixtures.EventGen(4242)
    start = dt.datetime(2026, 5, 1, tzinfo=UTC)
    table = cat.create_table(ident, schema=make_fixtures._events_arrow_schema(True), properties={"format-version": "2"})
    with table.update_spec() as u:
        u.add_field("ts", DayTransform(), "ts_day")
        u.add_field("category", IdentityTransform(), "category")
    with _timed("build conc tables"):
        for _ in range(6):
            table.append(gen.batch(150, start, 5, evolved=True))
    before = env.read_pyiceberg(ident)
    unref_before = env.unreferenced_files(ident)
    on_disk = env.files_on_disk(ident)

    cryo = env.cryo_paused(ident)
    n = cryo.wait_rewritten()
    assert n >= 10
    written = _cryo_files(env, ident, on_disk)
    appended = gen.batch(60, start, 6, evolved=True)  # days 1-5 are being rewritten; day 6 is new
    cat.load_table(ident).append(appended)
    append_snapshot = cat.load_table(ident).current_snapshot().snapshot_id
    out = cryo.finish(env)

    assert out["committed_groups"] == len(out["groups"]) == n and not out["conflicted_groups"] and not out["failed_groups"], out
    assert out["retries"] >= 1, "the first commit should have lost the race and retried"
    snaps = {s["snapshot_id"]: s for s in env.snapshots(ident)}
    assert snaps[out["snapshot_ids"][0]]["parent_id"] == append_snapshot
    expected = _rows_table(before.to_pylist() + appended.to_pylist(), before.schema)
    assert_same_rows(env.read_all(ident), expected, f"{ident}: compaction with a concurrent append")
    _check_warehouse(env, ident, out, unref_before, written)


def _conflict_scenario(env: Env, ident: str, seed: int, write) -> tuple[dict, list[dict]]:
    """Build a merge-on-read orders table in Spark, pause Cryo after its rewrite, let ``write(rows)``
    commit through Spark and return the rows it implies, let Cryo commit; check the warehouse and that
    every reader reads exactly the implied rows."""
    with _timed("build conc tables"):
        env.spark.call("test_compact_interop:spark_build_orders", ident=f"fixtures.{ident}", seed=seed)
    before = env.read_pyiceberg(ident)
    assert_same_rows({"duckdb": env.read_duckdb(ident), "spark": env.read_spark(ident)}, before, f"{ident} before")
    unref_before = env.unreferenced_files(ident)
    on_disk = env.files_on_disk(ident)
    snaps_before = {s["snapshot_id"] for s in env.snapshots(ident)}

    cryo = env.cryo_paused(ident)
    n = cryo.wait_rewritten()
    assert n == 3, "one group per month"
    written = _cryo_files(env, ident, on_disk)
    expected_rows = write(before.to_pylist())
    writer = [s for s in env.snapshots(ident) if s["snapshot_id"] not in snaps_before]
    assert len(writer) == 1 and _summary_int(writer[0]["summary"], "added-position-delete-files") > 0, (
        "the Spark write should be merge-on-read (position deletes)",
        writer,
    )
    out = cryo.finish(env)

    assert_same_rows(env.read_all(ident), _rows_table(expected_rows, before.schema), f"{ident}: compaction with a concurrent Spark write")
    _check_warehouse(env, ident, out, unref_before, written)
    return out, writer


def _assert_only_february_conflicts(out: dict, writer: list[dict]) -> None:
    status = {_partition_path(g): g["status"] for g in out["groups"]}
    assert set(status) == {"order_date_month=2026-01", "order_date_month=2026-02", "order_date_month=2026-03"}, status
    feb = status["order_date_month=2026-02"]
    assert feb["status"] == "conflicted", out
    kinds = {c["kind"] for c in feb["conflicts"]}
    assert kinds <= {"new_position_delete", "removed"} and kinds, feb
    assert {c["by_snapshot"] for c in feb["conflicts"]} == {writer[0]["snapshot_id"]}, feb
    for month in ("order_date_month=2026-01", "order_date_month=2026-03"):
        assert status[month]["status"] == "committed", out
    assert out["committed_groups"] == 2 and out["conflicted_groups"] == 1 and not out["failed_groups"]
    assert out["retries"] >= 1, "the first commit should have lost the race to the Spark write and retried"


def test_spark_delete_in_a_rewritten_partition_aborts_only_that_group(env):
    """(b) A merge-on-read DELETE of February rows commits while Cryo waits."""
    ident = "conc.orders_delete"

    def write(rows):
        env.spark.sql(
            f"DELETE FROM fixtures.{ident} WHERE order_date >= DATE '2026-02-01' AND order_date < DATE '2026-03-01' AND customer_id % 4 = 0"
        )
        gone = [r for r in rows if dt.date(2026, 2, 1) <= r["order_date"] < dt.date(2026, 3, 1) and r["customer_id"] % 4 == 0]
        assert len(gone) >= 5
        return [r for r in rows if r not in gone]

    out, writer = _conflict_scenario(env, ident, 777, write)
    _assert_only_february_conflicts(out, writer)


def test_spark_merge_in_a_rewritten_partition_aborts_only_that_group(env):
    """(c) A merge-on-read MERGE (update + delete of February rows, inserts in March and April)."""
    ident = "conc.orders_merge"

    def write(rows):
        feb = sorted((r for r in rows if dt.date(2026, 2, 1) <= r["order_date"] < dt.date(2026, 3, 1)), key=lambda r: r["order_id"])
        top = max(r["order_id"] for r in rows)
        dels = [r["order_id"] for r in feb[0:40:5]]
        upds = {r["order_id"]: decimal.Decimal(f"{r['order_id'] % 500}.75") for r in feb[2:40:5]}
        ins = [
            {"order_id": top + 1 + i, "customer_id": 9, "order_date": dt.date(2026, 3, 20) if i % 2 else dt.date(2026, 4, 2),
             "status": "merged-new", "amount": decimal.Decimal("1.25"), "updated_at": dt.datetime(2026, 4, 2, 12, 0, tzinfo=UTC)}
            for i in range(6)
        ]
        src = [f"({k}, 'D', CAST(NULL AS DECIMAL(10,2)), CAST(NULL AS DATE))" for k in dels]
        src += [f"({k}, 'U', CAST('{a}' AS DECIMAL(10,2)), CAST(NULL AS DATE))" for k, a in upds.items()]
        src += [f"({r['order_id']}, 'I', CAST('{r['amount']}' AS DECIMAL(10,2)), DATE '{r['order_date']}')" for r in ins]
        env.spark.sql(
            f"""MERGE INTO fixtures.{ident} AS t
                USING (SELECT * FROM VALUES {", ".join(src)} AS s(order_id, op, amount, order_date)) AS s
                ON t.order_id = s.order_id
                WHEN MATCHED AND s.op = 'D' THEN DELETE
                WHEN MATCHED AND s.op = 'U' THEN UPDATE SET t.amount = s.amount, t.status = 'merged'
                WHEN NOT MATCHED THEN INSERT (order_id, customer_id, order_date, status, amount, updated_at)
                  VALUES (s.order_id, 9, s.order_date, 'merged-new', s.amount, TIMESTAMP '2026-04-02 12:00:00')"""
        )
        out = []
        for r in rows:
            if r["order_id"] in dels:
                continue
            if r["order_id"] in upds:
                r = dict(r, amount=upds[r["order_id"]], status="merged")
            out.append(r)
        return out + ins

    out, writer = _conflict_scenario(env, ident, 778, write)
    _assert_only_february_conflicts(out, writer)
    assert writer[0]["operation"] == "overwrite"


def test_equality_delete_while_cryo_waits_still_applies_to_the_rewritten_rows(env):
    """(d) An equality delete (Iceberg Java writer) of keys Cryo is rewriting commits while it waits:
    not a conflict — the group commits, and the delete still hides those keys, because the new files
    carry the base snapshot's data sequence number."""
    ident = "conc.upserts_eq"
    with _timed("build conc tables"):
        env.spark.call("test_compact_interop:spark_build_upserts", ident=f"fixtures.{ident}")
    before = env.read_duckdb(ident)
    assert_same_rows({"spark": env.read_spark(ident)}, before, f"{ident} before")
    base_md = env.metadata(ident)
    unref_before = env.unreferenced_files(ident)
    on_disk = env.files_on_disk(ident)

    cryo = env.cryo_paused(ident)
    assert cryo.wait_rewritten() == 1
    written = _cryo_files(env, ident, on_disk)
    keys = ["k-0001", "k-0050", "k-0101", "k-0150", "k-0199"]
    delete = env.spark.call("test_compact_interop:spark_equality_delete", ident=f"fixtures.{ident}", column="event_key", keys=keys, name="eq-delete-concurrent")
    out = cryo.finish(env)

    assert out["committed_groups"] == 1 and out["retries"] >= 1, out
    expected = [r for r in before.to_pylist() if r["event_key"] not in keys]
    assert len(expected) == before.num_rows - len(keys)
    assert_same_rows(
        {"duckdb": env.read_duckdb(ident), "spark": env.read_spark(ident)},
        _rows_table(expected, before.schema),
        f"{ident}: compaction with a concurrent equality delete",
    )
    base_seq = next(s["sequence-number"] for s in base_md["snapshots"] if s["snapshot-id"] == base_md["current-snapshot-id"])
    live = [e for e in env.entries(ident) if e["status"] != 2]
    data = [e for e in live if e["content"] == 0]
    eq = [e for e in live if e["content"] == 2]
    assert len(data) == 1 and data[0]["sequence_number"] == base_seq, data
    assert [e["file_path"].rsplit("/", 1)[-1] for e in eq] == ["eq-delete-concurrent.parquet"], eq
    assert eq[0]["sequence_number"] == delete["sequence_number"] > base_seq
    _check_warehouse(env, ident, out, unref_before, written)
