"""Cryo's snapshot expiry against Spark's ``expire_snapshots`` procedure on the same table.

Run with the peers venv:  $PEERS_PYTHON -m pytest tests/py/test_expire_spark.py -x -q

One table gets a mixed history from PyIceberg and Spark (Iceberg 1.10, jdbc catalog on the sqlite file
PyIceberg's ``SqlCatalog`` writes), with everything expiry has to respect:

- PyIceberg appends, Spark INSERTs, a merge-on-read DELETE and UPDATE (position deletes), Spark's
  ``rewrite_data_files`` (a ``replace`` that leaves the position deletes behind), a dynamic
  ``INSERT OVERWRITE`` of one day, more appends;
- a branch ``audit`` (at the third snapshot, ``RETAIN 30 DAYS WITH SNAPSHOT RETENTION 2 SNAPSHOTS``) with a
  commit of its own, a tag ``v1`` (second snapshot, kept forever), a tag ``stale`` whose max ref age is
  1 ms (so it is expired);
- table statistics (Puffin) and partition statistics for an old snapshot and for the current one;
- ``write.metadata.delete-after-commit.enabled`` with ``previous-versions-max`` = 6, so the expiry commit
  drops (and deletes) the oldest logged metadata file.

The warehouse and the catalog are copied aside; Spark runs ``CALL fixtures.system.expire_snapshots(table =>
..., older_than => TIMESTAMP '<the 9th snapshot>', retain_last => 3)``; the copy is put back at the same
path (Iceberg metadata holds absolute paths) and Cryo's ``examples/expire.rs`` runs with the same instant
and count, first as a dry run (which must change nothing and name exactly what the real run deletes).
Then:

- the sets of deleted files (relative to the table location) are identical, and so are the remaining
  snapshot ids and refs; Cryo's per-kind counts equal the procedure's output;
- main, the branch and the tag read the same rows as before the expiry, with PyIceberg, DuckDB and
  Spark, on both copies.

Hadoop's local file system writes ``.<name>.crc`` checksum files beside the files Spark writes, and deletes
them with the file; they are no Iceberg files, Cryo leaves them (orphan removal takes them), and the
comparison ignores them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import cryo_peers  # noqa: E402
from spark_worker import SparkWorker  # noqa: E402

UTC = dt.timezone.utc
IDENT = "db.history"
SPARK_IDENT = f"fixtures.{IDENT}"
T0 = dt.datetime(2026, 1, 1, tzinfo=UTC)


# ================================================================================================
# Spark side (called in the Spark child through SparkWorker.call("test_expire_spark:<fn>", ...))
# ================================================================================================


def spark_stale_tag(spark, ident: str, snapshot_id: int) -> dict:
    """A tag whose max ref age (1 ms) has passed by the time expiry runs (Spark's DDL cannot go below a minute)."""
    jt = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, ident)
    jt.manageSnapshots().createTag("stale", snapshot_id).setMaxRefAgeMs("stale", 1).commit()
    return {"ok": True}


# ================================================================================================
# Helpers
# ================================================================================================


def _local(path_or_uri: str) -> str:
    s = str(path_or_uri)
    if s.startswith("file://"):
        s = s[len("file://") :]
    elif s.startswith("file:"):
        s = s[len("file:") :]
    return os.path.normpath(s)


def _rows(first: int, n: int, tag: str = "") -> pa.Table:
    ids = list(range(first, first + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "ts": pa.array([T0 + dt.timedelta(days=i % 3, seconds=i) for i in ids], pa.timestamp("us", tz="UTC")),
            "name": pa.array([None if i % 11 == 0 else f"{tag}name-{i}" for i in ids], pa.string()),
        }
    )


def _values(first: int, n: int, tag: str) -> str:
    out = []
    for i in range(first, first + n):
        ts = (T0 + dt.timedelta(days=i % 3, seconds=i)).strftime("%Y-%m-%d %H:%M:%S")
        out.append(f"({i}, TIMESTAMP '{ts}', '{tag}name-{i}')")
    return ", ".join(out)


class Lake:
    """The sqlite catalog, the warehouse and the Spark child."""

    def __init__(self, root: Path, line: str) -> None:
        self.line = line
        self.root = root
        self.db = root / "catalog.db"
        self.warehouse = root / "warehouse"
        self.catalog_json = root / "cryo-catalog.json"
        self.catalog_json.write_text(
            json.dumps({"name": "fixtures", "properties": {"uri": f"sqlite:///{self.db}", "warehouse": self.warehouse.as_uri()}})
        )
        self.spark: SparkWorker | None = None
        self._n = 0

    def start_spark(self, name: str) -> SparkWorker:
        self.spark = SparkWorker(
            self.db, self.warehouse, log=self.root / f"spark-{name}.log", app_name=f"cryo-test-expire-{name}", line=self.line
        )
        assert self.spark.start_info["catalog_connections_closed"] >= 1
        return self.spark

    def stop_spark(self) -> None:
        if self.spark is not None:
            self.spark.close()
            self.spark = None

    def catalog(self):
        return cryo_peers.sql_catalog(self.db, self.warehouse)

    def metadata_location(self) -> str:
        ns, name = IDENT.rsplit(".", 1)
        con = sqlite3.connect(str(self.db))
        try:
            (loc,) = con.execute(
                "SELECT metadata_location FROM iceberg_tables WHERE table_namespace = ? AND table_name = ?", (ns, name)
            ).fetchone()
        finally:
            con.close()
        return loc

    def metadata(self) -> dict:
        return json.loads(Path(_local(self.metadata_location())).read_text())

    def table_dir(self) -> Path:
        return Path(_local(self.metadata()["location"]))

    def files(self) -> set[str]:
        """Every file under the table's location, relative to it (Hadoop's .crc checksums aside)."""
        loc = self.table_dir()
        out = set()
        for dirpath, _dirnames, filenames in os.walk(loc):
            for f in filenames:
                if not f.endswith(".crc"):
                    out.add(os.path.relpath(os.path.join(dirpath, f), loc))
        return out

    def relative(self, path: str) -> str:
        return os.path.relpath(_local(path), self.table_dir())

    def snapshots(self) -> list[dict]:
        return sorted(self.metadata()["snapshots"], key=lambda s: (s["timestamp-ms"], s["sequence-number"]))

    def refs(self) -> dict[str, tuple[int, str]]:
        return {k: (v["snapshot-id"], v["type"]) for k, v in self.metadata().get("refs", {}).items()}

    def tmp(self, suffix: str) -> Path:
        self._n += 1
        return self.root / f"tmp-{self._n}{suffix}"

    def assert_catalog_unlocked(self) -> None:
        cryo_peers.assert_sqlite_unlocked(self.db)

    # ---- reads ----------------------------------------------------------------------------------
    def fingerprints(self, targets: dict[str, int]) -> dict[str, dict[str, str]]:
        """Row fingerprints of each named snapshot with PyIceberg, DuckDB and Spark."""
        assert self.spark is not None
        table = self.catalog().load_table(IDENT)
        metadata_json = _local(self.metadata_location())
        con = cryo_peers.duckdb_connect()
        out: dict[str, dict[str, str]] = {}
        try:
            for name, snapshot_id in targets.items():
                res = con.execute("SELECT * FROM iceberg_scan(?, snapshot_from_id => ?)", [metadata_json, snapshot_id])
                duck = res.to_arrow_table() if hasattr(res, "to_arrow_table") else res.fetch_arrow_table()
                spark_ident = SPARK_IDENT if name == "main" else f"{SPARK_IDENT}.{name}"
                out[name] = {
                    "pyiceberg": str(cryo_peers.fingerprint(table.scan(snapshot_id=snapshot_id).to_arrow())),
                    "duckdb": str(cryo_peers.fingerprint(duck)),
                    "spark": str(cryo_peers.fingerprint(self.spark.read(spark_ident, self.tmp(".arrow")))),
                }
        finally:
            con.close()
        return out

    # ---- copies ---------------------------------------------------------------------------------
    def save(self, to: Path) -> None:
        to.mkdir(parents=True)
        shutil.copytree(self.warehouse, to / "warehouse", symlinks=True)
        shutil.copy2(self.db, to / "catalog.db")

    def restore(self, frm: Path) -> None:
        assert self.spark is None, "stop Spark before swapping its catalog file"
        shutil.rmtree(self.warehouse)
        shutil.copytree(frm / "warehouse", self.warehouse, symlinks=True)
        shutil.copyfile(frm / "catalog.db", self.db)


def build_history(lake: Lake) -> dict[str, int]:
    """The history described in the module docs; returns the ids of the snapshots the refs point at."""
    spark = lake.spark
    assert spark is not None
    cat = lake.catalog()
    cat.create_namespace("db")
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import DayTransform
    from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType

    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "ts", TimestamptzType(), required=False),
        NestedField(3, "name", StringType(), required=False),
    )
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="ts_day"))
    cat.create_table(
        IDENT,
        schema,
        partition_spec=spec,
        properties={
            "format-version": "2",
            "write.delete.mode": "merge-on-read",
            "write.update.mode": "merge-on-read",
            "write.merge.mode": "merge-on-read",
            "write.metadata.delete-after-commit.enabled": "true",
            "write.metadata.previous-versions-max": "6",
        },
    )

    def pyiceberg_append(first: int, n: int) -> None:
        cat.load_table(IDENT).append(_rows(first, n))
        time.sleep(0.02)

    def sql(text: str) -> list[dict]:
        lake.assert_catalog_unlocked()
        rows = spark.sql(text)
        time.sleep(0.02)
        return rows

    pyiceberg_append(0, 60)  # S1
    pyiceberg_append(60, 60)  # S2
    sql(f"INSERT INTO {SPARK_IDENT} VALUES {_values(120, 60, 's')}")  # S3
    sql(f"DELETE FROM {SPARK_IDENT} WHERE id % 10 = 3")  # S4: position deletes
    sql(f"CALL fixtures.system.rewrite_data_files(table => '{IDENT}', options => map('min-input-files', '2'))")  # S5
    pyiceberg_append(180, 60)  # S6
    sql(f"UPDATE {SPARK_IDENT} SET name = 'updated' WHERE id % 7 = 0")  # S7: position deletes + new rows
    sql(
        f"INSERT OVERWRITE {SPARK_IDENT} SELECT id + 1000, ts, name FROM {SPARK_IDENT} "
        f"WHERE ts < TIMESTAMP '2026-01-02 00:00:00'"
    )  # S8: replaces day 0 (dynamic overwrite, set below)
    pyiceberg_append(240, 30)  # S9
    pyiceberg_append(270, 30)  # S10
    snaps = [s["snapshot-id"] for s in lake.snapshots()]
    assert len(snaps) == 10, snaps
    sql(
        f"ALTER TABLE {SPARK_IDENT} CREATE BRANCH audit AS OF VERSION {snaps[2]} "
        "RETAIN 30 DAYS WITH SNAPSHOT RETENTION 2 SNAPSHOTS"
    )
    sql(f"INSERT INTO {SPARK_IDENT}.branch_audit VALUES {_values(9000, 10, 'audit-')}")
    sql(f"ALTER TABLE {SPARK_IDENT} CREATE TAG v1 AS OF VERSION {snaps[1]}")
    spark.call("test_expire_spark:spark_stale_tag", ident=SPARK_IDENT, snapshot_id=snaps[3])
    # Statistics: an old snapshot's (expired below) and the current one's (kept).
    for sid in (snaps[4], snaps[9]):
        sql(f"CALL fixtures.system.compute_table_stats(table => '{IDENT}', snapshot_id => {sid})")
        sql(f"CALL fixtures.system.compute_partition_stats(table => '{IDENT}', snapshot_id => {sid})")
    refs = lake.refs()
    return {"main": refs["main"][0], "branch_audit": refs["audit"][0], "tag_v1": refs["v1"][0], "snaps": snaps}


# ================================================================================================
# The test
# ================================================================================================


@pytest.fixture(scope="module", params=list(cryo_peers.SPARK_LINES), ids=cryo_peers.spark_line_id)
def lake(request, tmp_path_factory):
    line = cryo_peers.spark_line_or_skip(request.param)
    root = tmp_path_factory.mktemp(f"expire-spark{line}")
    lake = Lake(root, line)
    try:
        yield lake
    finally:
        lake.stop_spark()


def _cryo_bin() -> Path:
    if os.environ.get("CRYO_EXPIRE_BIN"):
        return Path(os.environ["CRYO_EXPIRE_BIN"])
    return cryo_peers.cargo_examples("expire") / "expire"


def _cryo(lake: Lake, *args: str) -> dict:
    lake.assert_catalog_unlocked()
    proc = subprocess.run(
        [str(_cryo_bin()), "--catalog", str(lake.catalog_json), "--table", IDENT, *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"cryo expire failed: {proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


SPARK_KIND = {
    "data": "deleted_data_files_count",
    "position_deletes": "deleted_position_delete_files_count",
    "equality_deletes": "deleted_equality_delete_files_count",
    "manifests": "deleted_manifest_files_count",
    "manifest_lists": "deleted_manifest_lists_count",
    "statistics": "deleted_statistics_files_count",
}


def test_cryo_and_spark_expire_the_same_snapshots_and_files(lake):
    cryo_bin = _cryo_bin()  # build first: the Spark side below is timed separately
    assert cryo_bin.exists()
    spark = lake.start_spark("build")
    spark.sql("SET spark.sql.sources.partitionOverwriteMode=dynamic")
    ids = build_history(lake)
    snaps = ids.pop("snaps")
    by_id = {s["snapshot-id"]: s for s in lake.snapshots()}
    older_than_ms = by_id[snaps[8]]["timestamp-ms"]  # the 9th snapshot stays, older ones may go
    retain_last = 3
    before_files = lake.files()
    before_refs = lake.refs()
    assert set(before_refs) == {"main", "audit", "v1", "stale"}
    assert len(lake.metadata().get("statistics", [])) == 2
    assert len(lake.metadata().get("partition-statistics", [])) == 2
    fp_before = lake.fingerprints(ids)
    for name, fps in fp_before.items():
        assert len(set(fps.values())) == 1, f"peers disagree on {name} before expiry: {fps}"
    pristine = lake.root / "pristine"
    lake.save(pristine)

    # ---- Spark ------------------------------------------------------------------------------------
    literal = dt.datetime.fromtimestamp(older_than_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    t0 = time.monotonic()
    (spark_out,) = spark.sql(
        f"CALL fixtures.system.expire_snapshots(table => '{IDENT}', older_than => TIMESTAMP '{literal}', "
        f"retain_last => {retain_last})"
    )
    spark_s = time.monotonic() - t0
    spark_deleted = before_files - lake.files()
    spark_snapshots = sorted(s["snapshot-id"] for s in lake.metadata()["snapshots"])
    spark_refs = lake.refs()
    fp_spark = lake.fingerprints(ids)
    lake.stop_spark()

    # ---- Cryo, on the same table put back at the same path ---------------------------------------
    lake.restore(pristine)
    assert lake.files() == before_files
    dry = _cryo(lake, "--older-than-ms", str(older_than_ms), "--retain-last", str(retain_last))
    assert dry["dry_run"] is True
    assert lake.files() == before_files, "the dry run changed files"
    t0 = time.monotonic()
    out = _cryo(lake, "--older-than-ms", str(older_than_ms), "--retain-last", str(retain_last), "--execute")
    cryo_s = time.monotonic() - t0
    cryo_deleted = before_files - lake.files()
    cryo_snapshots = sorted(s["snapshot-id"] for s in lake.metadata()["snapshots"])
    spark = lake.start_spark("read")
    fp_cryo = lake.fingerprints(ids)

    sys.stderr.write(
        f"\nexpire: spark CALL {spark_s:.2f}s ({spark_out}), cryo process {cryo_s:.2f}s "
        f"({len(out['expired_snapshot_ids'])} snapshots, {len(out['files'])} files, {out['deleted']})\n"
    )

    # Same snapshots and refs left.
    assert cryo_snapshots == spark_snapshots
    assert sorted(out["retained_snapshot_ids"]) == cryo_snapshots
    assert lake.refs() == spark_refs
    assert "stale" not in spark_refs and {"main", "audit", "v1"} <= set(spark_refs)
    expired = sorted(set(by_id) - set(spark_snapshots))
    assert sorted(out["expired_snapshot_ids"]) == expired
    assert expired, "the scenario must expire something"
    # The same files deleted (relative to the table location), and Cryo says exactly which.
    assert cryo_deleted == spark_deleted, (
        f"only Spark deleted: {sorted(spark_deleted - cryo_deleted)}\nonly Cryo deleted: {sorted(cryo_deleted - spark_deleted)}"
    )
    assert {lake.relative(f["path"]) for f in out["files"]} == cryo_deleted
    assert {lake.relative(f["path"]) for f in dry["files"]} == cryo_deleted, "the dry run named other files"
    assert dry["expired_snapshot_ids"] == out["expired_snapshot_ids"]
    assert out["failures"] == [] and out["cleanup_error"] is None
    # Per kind, as Spark's procedure counts them (it does not count metadata.json files).
    for kind, column in SPARK_KIND.items():
        assert out["deleted"][kind]["files"] == spark_out[column], (kind, out["deleted"], spark_out)
    # The scenario exercises every kind but equality deletes (Spark writes none here).
    kinds = {f["kind"] for f in out["files"]}
    assert kinds == {"data", "position_deletes", "manifest", "manifest_list", "statistics", "metadata_json"}, kinds
    assert out["deleted"]["manifest_lists"]["files"] == len(expired)
    assert out["deleted"]["metadata_json"]["files"] >= 1, "the expiry commit should drop a logged metadata file"
    assert out["deleted"]["statistics"]["files"] == 2, "the old snapshot's table and partition statistics"
    # Every reader reads every ref the same as before, on both copies.
    assert fp_spark == fp_before
    assert fp_cryo == fp_before
