"""Cryo's manifest and position-delete rewrites against real Iceberg peers.

Run with the peers venv:  $PEERS_PYTHON -m pytest tests/py/test_manifests_interop.py -x -q

Cryo is driven through its command-line examples (``examples/rewrite_manifests.rs`` and
``examples/rewrite_position_deletes.rs``, built here with cargo; ``CRYO_EXAMPLES_DIR`` names a directory
holding other builds) on two tables made fresh for this module in one sqlite catalog:

- ``mi.appends``, written by PyIceberg: 30 appends, each with rows on two days far apart, so 30 small
  manifests whose partition ranges overlap;
- ``mi.orders``, written by Spark (Iceberg 1.10) in merge-on-read mode: 8 inserts, three DELETEs and an
  UPDATE (small position-delete files in every day), then a DELETE of a whole day, which Spark does as a
  compaction of one day (``rewrite_data_files``), which leaves that day's position-delete files dangling.

Spark runs in one child process for the module (``spark_worker.py``, with the sqlite lock workaround).

For each table: every reader (PyIceberg, DuckDB, Spark) reads the same rows before and after Cryo's
rewrites; Spark's ``snapshots`` table shows Cryo's ``replace`` snapshots with the summaries Java writes
(``manifests-created``/``-replaced``/``-kept``, ``entries-processed``; removed/added position deletes);
Spark's ``entries`` table shows every file with the snapshot id and sequence numbers it had, the combined
delete files carrying the highest data sequence number of the files they replaced; Spark's ``manifests``
table counts what Cryo said. Then Spark appends and runs its own ``rewrite_manifests``, and every reader
reads the rows the writes imply.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import cryo_peers  # noqa: E402
from spark_worker import SparkWorker  # noqa: E402

UTC = dt.timezone.utc
DAY0 = dt.datetime(2026, 1, 1, tzinfo=UTC)
PYICE = "mi.appends"
SPARK = "mi.orders"
TIMINGS: dict[str, float] = {}


def _timed(name: str):
    class _T:
        def __enter__(self):
            self.t0 = time.monotonic()

        def __exit__(self, *exc):
            TIMINGS[name] = round(TIMINGS.get(name, 0.0) + time.monotonic() - self.t0, 2)

    return _T()


# ================================================================================================
# Spark side (called in the Spark child: SparkWorker.call("test_manifests_interop:<fn>", ...))
# ================================================================================================


def spark_build_orders(spark, ident: str, inserts: int = 8, rows: int = 48) -> dict:
    """Merge-on-read v2 table by day over 4 days: ``inserts`` appends (a file per day each), three
    DELETEs and an UPDATE (a partition-scoped position-delete file per day each), then Spark's own
    compaction of the last day."""
    ns = ident.rsplit(".", 1)[0]
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS fixtures.{ns}")
    spark.sql(
        f"""CREATE TABLE fixtures.{ident} (id BIGINT NOT NULL, ts TIMESTAMP, name STRING, v BIGINT)
            USING iceberg PARTITIONED BY (days(ts))
            TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read',
                           'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read',
                           'write.delete.granularity'='partition')"""
    )
    schema = "id BIGINT, ts TIMESTAMP, name STRING, v BIGINT"
    for b in range(inserts):
        data = [
            (b * rows + i, DAY0 + dt.timedelta(days=i % 4, minutes=b * rows + i), f"o-{b * rows + i}", i)
            for i in range(rows)
        ]
        spark.createDataFrame(data, schema).coalesce(1).writeTo(f"fixtures.{ident}").append()
    for k in range(3):
        spark.sql(f"DELETE FROM fixtures.{ident} WHERE id % 11 = {k}")
    spark.sql(f"UPDATE fixtures.{ident} SET v = v + 1000 WHERE id % 13 = 0")
    # Spark compacts the last day: its data files are rewritten with the deletes applied, and its
    # position-delete files stay behind, applying to nothing (peers/README.md).
    spark.sql(
        f"""CALL fixtures.system.rewrite_data_files(table => '{ident}',
              where => "ts >= TIMESTAMP '2026-01-04 00:00:00'", options => map('min-input-files', '2'))"""
    )
    return {"rows": inserts * rows}


# ================================================================================================
# Parent
# ================================================================================================


class Env:
    def __init__(self, root: Path, bins: Path, spark: SparkWorker) -> None:
        self.root = root
        self.db = root / "catalog.db"
        self.warehouse = root / "warehouse"
        self.bins = bins
        self.spark = spark
        self.catalog_json = root / "cryo-catalog.json"
        self.catalog_json.write_text(
            json.dumps({"name": "fixtures", "properties": {"uri": f"sqlite:///{self.db}", "warehouse": self.warehouse.as_uri()}})
        )
        self._n = 0

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

    def read_all(self, ident: str) -> dict[str, pa.Table]:
        self._n += 1
        with _timed("reads (pyiceberg+duckdb+spark)"):
            return {
                "pyiceberg": self.catalog().load_table(ident).scan().to_arrow(),
                "duckdb": cryo_peers.read_duckdb(self.metadata_location(ident)),
                "spark": self.spark.read(f"fixtures.{ident}", self.root / f"read-{self._n}.arrow"),
            }

    def assert_catalog_unlocked(self) -> None:
        cryo_peers.assert_sqlite_unlocked(self.db)

    def cryo(self, example: str, ident: str, *args: str) -> dict:
        self.assert_catalog_unlocked()
        with _timed(f"cryo {example}"):
            proc = subprocess.run(
                [str(self.bins / example), "--catalog", str(self.catalog_json), "--table", ident, *args],
                capture_output=True,
                text=True,
                timeout=300,
            )
        assert proc.returncode == 0, f"cryo {example} {ident} failed: {proc.stderr[-3000:]}"
        return json.loads(proc.stdout.strip().splitlines()[-1])

    # ---- Spark metadata tables ------------------------------------------------------------------
    def snapshots(self, ident: str) -> list[dict]:
        return self.spark.sql(
            f"SELECT snapshot_id, parent_id, operation, summary FROM fixtures.{ident}.snapshots ORDER BY committed_at, snapshot_id"
        )

    def entries(self, ident: str) -> list[dict]:
        """Live entries of the current snapshot, as Spark's ``entries`` table shows them."""
        return self.spark.sql(
            f"SELECT status, snapshot_id, sequence_number, file_sequence_number, data_file.content AS content, "
            f"data_file.file_path AS file_path, data_file.record_count AS record_count, "
            f"data_file.referenced_data_file AS referenced_data_file, "
            f"CAST(data_file.partition AS STRING) AS partition FROM fixtures.{ident}.entries WHERE status < 2"
        )

    def manifests(self, ident: str) -> list[dict]:
        return self.spark.sql(
            f"SELECT content, path, added_snapshot_id, added_data_files_count, existing_data_files_count, "
            f"added_delete_files_count, existing_delete_files_count FROM fixtures.{ident}.manifests"
        )


def assert_same_rows(got: dict[str, pa.Table], want: cryo_peers.Fingerprint, what: str) -> None:
    bad = {r: cryo_peers.fingerprint(t) for r, t in got.items() if cryo_peers.fingerprint(t) != want}
    assert not bad, f"{what}: readers disagree with the expected rows ({want}): {bad}"


def _kept(entries: list[dict]) -> dict[str, tuple]:
    """What a rewrite must keep per file: content, snapshot id, data and file sequence numbers."""
    return {e["file_path"]: (e["content"], e["snapshot_id"], e["sequence_number"], e["file_sequence_number"]) for e in entries}


@pytest.fixture(scope="module", params=list(cryo_peers.SPARK_LINES), ids=cryo_peers.spark_line_id)
def env(request, tmp_path_factory):
    line = cryo_peers.spark_line_or_skip(request.param)
    root = tmp_path_factory.mktemp(f"manifests-interop-spark{line}")
    t_module = time.monotonic()
    with _timed("cargo build --example rewrite_*"):
        bins = cryo_peers.cargo_examples("rewrite_manifests", "rewrite_position_deletes")
    db, warehouse = root / "catalog.db", root / "warehouse"
    warehouse.mkdir()
    with _timed("pyiceberg table"):
        make_pyiceberg_table(cryo_peers.sql_catalog(db, warehouse))
    with _timed("spark child start"):
        spark = SparkWorker(db, warehouse, log=root / "spark-worker.log", app_name="cryo-test-manifests-interop", line=line)
    assert spark.start_info["catalog_connections_closed"] >= 1, "the JDBC catalog's leaked lock was not released"
    try:
        with _timed("spark table"):
            spark.call("test_manifests_interop:spark_build_orders", ident=SPARK)
        yield Env(root, bins, spark)
    finally:
        spark.close()
        TIMINGS["module total"] = round(time.monotonic() - t_module, 1)
        sys.stderr.write(f"\nmanifests interop timings: {json.dumps(TIMINGS)}\n")


def _pyice_rows(first: int, n: int, days: tuple[int, int]) -> pa.Table:
    ids = list(range(first, first + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "ts": pa.array([DAY0 + dt.timedelta(days=days[i % 2], minutes=i) for i in ids], pa.timestamp("us", tz="UTC")),
            "name": pa.array([f"p-{i}" for i in ids], pa.string()),
        }
    )


def make_pyiceberg_table(catalog) -> None:
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import DayTransform
    from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType

    catalog.create_namespace("mi")
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "ts", TimestamptzType(), required=False),
        NestedField(3, "name", StringType(), required=False),
    )
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="ts_day"))
    table = catalog.create_table(PYICE, schema=schema, partition_spec=spec)
    for k in range(30):
        table.append(_pyice_rows(k * 6, 6, (k % 10, (k * 7 + 5) % 10)))


# ================================================================================================
# Tests
# ================================================================================================

_STATE: dict[str, Any] = {}


def test_pyiceberg_table_manifests_rewritten_rows_unchanged(env):
    before = env.read_all(PYICE)
    want = cryo_peers.fingerprint(before["duckdb"])
    assert want.rows == 180
    assert_same_rows(before, want, "PyIceberg table before")
    entries_before = _kept(env.entries(PYICE))
    assert len(env.manifests(PYICE)) == 30

    # No delete files: the position-delete rewrite has nothing to do and commits nothing.
    pd = env.cryo("rewrite_position_deletes", PYICE)
    assert pd["plan"]["groups"] == [] and pd["snapshot_ids"] == [], pd

    dry = env.cryo("rewrite_manifests", PYICE, "--dry-run")
    assert dry["status"] == "dry_run" and dry["snapshot_ids"] == []
    assert dry["manifests_replaced"] == 30 and dry["manifests_after"] == 1, dry
    assert len(env.snapshots(PYICE)) == 30, "the dry run committed nothing"

    out = env.cryo("rewrite_manifests", PYICE)
    assert out["status"] == "committed", out
    assert (out["manifests_replaced"], out["manifests_created"], out["manifests_kept"]) == (30, 1, 0)
    assert out["before"]["files"] == 30 and out["after"]["files"] == 1

    assert_same_rows(env.read_all(PYICE), want, "PyIceberg table after Cryo's rewrite_manifests")
    snaps = env.snapshots(PYICE)
    head = snaps[-1]
    assert head["snapshot_id"] == out["snapshot_ids"][0] and head["parent_id"] == snaps[-2]["snapshot_id"]
    assert head["operation"] == "replace", head
    s = head["summary"]
    assert (s["manifests-created"], s["manifests-replaced"], s["manifests-kept"]) == ("1", "30", "0"), s
    assert s["entries-processed"] == str(len(entries_before)), s
    assert s["total-records"] == "180" and s["total-data-files"] == str(len(entries_before)), s
    entries = env.entries(PYICE)
    assert all(e["status"] == 0 for e in entries), "rewritten entries are EXISTING"
    assert _kept(entries) == entries_before, "snapshot ids and sequence numbers kept"
    m = env.manifests(PYICE)
    assert len(m) == 1 and m[0]["added_snapshot_id"] == head["snapshot_id"]
    assert m[0]["existing_data_files_count"] == len(entries_before)
    _STATE[PYICE] = before["duckdb"]


def test_spark_mor_table_deletes_combined_and_manifests_rewritten(env):
    before = env.read_all(SPARK)
    want = cryo_peers.fingerprint(before["duckdb"])
    assert_same_rows(before, want, "Spark table before")
    entries_before = env.entries(SPARK)
    deletes_before = [e for e in entries_before if e["content"] == 1]
    data_before = [e for e in entries_before if e["content"] == 0]
    # Partition-scoped delete files (one per day per DELETE/UPDATE). In the compacted day the data is
    # all newer than the older ones: those apply to nothing (dangling); its newest one names only
    # files that are gone. Either way that day keeps no delete file.
    compacted_day = "{2026-01-04}"
    dangling = [
        d
        for d in deletes_before
        if not any(e["partition"] == d["partition"] and e["sequence_number"] <= d["sequence_number"] for e in data_before)
    ]
    assert dangling and all(d["partition"] == compacted_day for d in dangling), dangling
    by_partition: dict[str, list[dict]] = {}
    for e in deletes_before:
        by_partition.setdefault(e["partition"], []).append(e)
    assert sorted(by_partition) == ["{2026-01-01}", "{2026-01-02}", "{2026-01-03}", compacted_day], sorted(by_partition)
    assert all(len(v) == 4 for v in by_partition.values()), "three DELETEs and an UPDATE per day"
    live_days = sorted(p for p in by_partition if p != compacted_day)

    out = env.cryo("rewrite_position_deletes", SPARK)
    assert out["committed_groups"] == len(out["groups"]) > 0 and out["failed_groups"] == 0, out
    assert out["files_dangling"] >= len(dangling), out
    assert out["files_combined"] + out["files_dangling"] == len(deletes_before), out
    assert out["files_added"] == len(live_days), out
    assert out["rows_dropped"] == sum(d["record_count"] for d in by_partition[compacted_day]), out
    assert_same_rows(env.read_all(SPARK), want, "Spark table after Cryo's rewrite_position_deletes")

    snap = env.snapshots(SPARK)[-1]
    assert snap["snapshot_id"] == out["snapshot_ids"][0] and snap["operation"] == "replace", snap
    s = snap["summary"]
    assert int(s["removed-position-delete-files"]) == len(deletes_before), s
    assert int(s["added-position-delete-files"]) == len(live_days), s
    assert int(s["removed-position-deletes"]) == sum(e["record_count"] for e in deletes_before), s
    assert int(s["total-position-deletes"]) == int(s["added-position-deletes"]) > 0, s
    assert s["cryo.operation"] == "rewrite_position_deletes", s

    entries = env.entries(SPARK)
    new_deletes = [e for e in entries if e["content"] == 1]
    assert sorted(e["partition"] for e in new_deletes) == live_days, "one delete file per day with live deletes"
    for e in new_deletes:
        # The highest data sequence number of the files it replaced (so it applies to the same data,
        # and to nothing newer); its file sequence number is the rewrite's.
        assert e["sequence_number"] == max(d["sequence_number"] for d in by_partition[e["partition"]]), e
        assert e["file_sequence_number"] == snap_sequence(env, SPARK, snap["snapshot_id"]), e
    assert _kept([e for e in entries if e["content"] == 0]) == _kept(data_before), "data files untouched"

    # Then the manifests: data and delete manifests apart.
    manifests_before = env.manifests(SPARK)
    mout = env.cryo("rewrite_manifests", SPARK)
    assert mout["status"] == "committed", mout
    assert mout["manifests_before"] == len(manifests_before) > mout["manifests_after"], mout
    m = env.manifests(SPARK)
    assert len(m) == mout["manifests_after"]
    assert sorted(x["content"] for x in m) == [0, 1], m
    assert_same_rows(env.read_all(SPARK), want, "Spark table after Cryo's rewrite_manifests")
    head = env.snapshots(SPARK)[-1]
    assert head["operation"] == "replace" and head["summary"]["manifests-replaced"] == str(mout["manifests_replaced"])
    assert head["summary"]["entries-processed"] == str(len(entries)), head
    assert _kept(env.entries(SPARK)) == _kept(entries), "the manifest rewrite kept every file as it was"
    _STATE[SPARK] = before["duckdb"]


def _local(uri: str) -> str:
    for prefix in ("file://", "file:"):
        if uri.startswith(prefix):
            return os.path.normpath(uri[len(prefix) :])
    return uri


def snap_sequence(env: Env, ident: str, snapshot_id: int) -> int:
    md = json.loads(Path(_local(env.metadata_location(ident))).read_text())
    return next(s["sequence-number"] for s in md["snapshots"] if s["snapshot-id"] == snapshot_id)


@pytest.mark.parametrize("ident", [PYICE, SPARK])
def test_spark_appends_and_rewrites_manifests_after_cryo(env, ident):
    if ident not in _STATE:
        pytest.skip("runs after the table's rewrite test")
    before = _STATE[ident]
    if ident == PYICE:
        inserted = _pyice_rows(5000, 4, (2, 12))
        values = ", ".join(
            f"({r['id']}, TIMESTAMP '{r['ts'].astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S')}', '{r['name']}')" for r in inserted.to_pylist()
        )
    else:
        inserted = pa.table(
            {
                "id": pa.array([9000, 9001], pa.int64()),
                "ts": pa.array([DAY0 + dt.timedelta(days=1), DAY0 + dt.timedelta(days=5)], pa.timestamp("us")),
                "name": ["late-1", "late-2"],
                "v": pa.array([1, 2], pa.int64()),
            }
        )
        values = "(9000, TIMESTAMP '2026-01-02 00:00:00', 'late-1', 1), (9001, TIMESTAMP '2026-01-06 00:00:00', 'late-2', 2)"
    env.spark.sql(f"INSERT INTO fixtures.{ident} VALUES {values}")
    want = cryo_peers.fingerprint(pa.concat_tables([before, inserted.cast(before.schema)]))
    assert_same_rows(env.read_all(ident), want, f"{ident} after Spark's INSERT")

    result = env.spark.sql(f"CALL fixtures.system.rewrite_manifests(table => '{ident}')")
    assert result and result[0]["rewritten_manifests_count"] >= 1, result
    assert env.snapshots(ident)[-1]["operation"] == "replace"
    assert_same_rows(env.read_all(ident), want, f"{ident} after Spark's rewrite_manifests")

    # Cryo again, on Spark's manifests: whatever it does, the rows stay.
    again = env.cryo("rewrite_manifests", ident)
    assert again["status"] in ("committed", "nothing_to_do"), again
    assert_same_rows(env.read_all(ident), want, f"{ident} after Cryo's rewrite of Spark's manifests")
