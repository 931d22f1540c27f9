"""Cryo's orphan-file removal against Spark's ``remove_orphan_files`` on tables Spark and PyIceberg wrote.

Run with the peers venv:  $PEERS_PYTHON -m pytest tests/py/test_orphans_spark.py

Cryo is driven through its command-line example (``examples/orphans.rs``, built here with
``cargo build -p cryo-core --example orphans``; ``CRYO_ORPHANS_BIN`` names another binary). Spark runs in
one child process for the module (``spark_worker.py``) on the same sqlite catalog PyIceberg writes.

Three tables, each with a history both writers made:

- ``db.mixed``: created by Spark, partitioned by a string (values with a space, a slash and a percent
  sign, so partition directories are percent-encoded) and ``days(ts)``; Spark inserts, a merge-on-read
  DELETE (position deletes), then PyIceberg appends;
- ``db.pyt``: created by PyIceberg, appended and overwritten by PyIceberg, then Spark inserts;
- ``hadoop.db.hits``: Spark's hadoop catalog (``vN.metadata.json``, ``version-hint.text``, ``.crc`` files).

Planted in each, with an mtime ten days back: data files in partition directories, a stray manifest, a
stray metadata file, files in nested directories (under ``data/`` and outside it); planted young: one
orphan (must be kept); planted hidden: a ``.crc``-style file and a ``_temporary`` directory (both engines
skip them). Every file the table references is aged too, so age protects nothing that matters.

Then, for each table: Spark's ``CALL ….system.remove_orphan_files(…, older_than => TIMESTAMP …,
dry_run => true)`` and Cryo's dry run find the SAME set, and it is exactly the old planted files; Cryo's
dry run deletes nothing; a real run by Cryo deletes that set and nothing else; PyIceberg, DuckDB and Spark
read the table with the fingerprint they agreed on before; and both engines then find no orphan.
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
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import cryo_peers  # noqa: E402
from spark_worker import SparkWorker  # noqa: E402

UTC = dt.timezone.utc
NOW = dt.datetime.now(UTC)
OLD = NOW - dt.timedelta(days=10)
OLDER_THAN = (NOW - dt.timedelta(days=2)).replace(microsecond=0)
CATS = ["a b", "x/y", "p%q", "plain"]
MOR = {"write.delete.mode": "merge-on-read", "write.update.mode": "merge-on-read", "write.merge.mode": "merge-on-read"}


# ================================================================================================
# Spark side (called in the child: SparkWorker.call("test_orphans_spark:<fn>", ...))
# ================================================================================================


def _rows(start: int, n: int) -> list[tuple]:
    base = dt.datetime(2026, 1, 1, tzinfo=UTC)
    return [(i, CATS[i % len(CATS)], base + dt.timedelta(hours=7 * i), float(i) / 4) for i in range(start, start + n)]


def spark_build_mixed(spark, ident: str) -> dict:
    ns = ident.rsplit(".", 1)[0]
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    props = ", ".join(f"'{k}'='{v}'" for k, v in {"format-version": "2", **MOR}.items())
    spark.sql(
        f"CREATE TABLE {ident} (id BIGINT, cat STRING, ts TIMESTAMP, amount DOUBLE) USING iceberg "
        f"PARTITIONED BY (cat, days(ts)) TBLPROPERTIES ({props})"
    )
    schema = "id BIGINT, cat STRING, ts TIMESTAMP, amount DOUBLE"
    for b in range(3):
        spark.createDataFrame(_rows(b * 40, 40), schema).writeTo(ident).append()
    spark.sql(f"DELETE FROM {ident} WHERE id % 7 = 0")
    return {"ok": True}


def spark_insert(spark, ident: str, start: int, n: int) -> dict:
    schema = "id BIGINT, cat STRING, ts TIMESTAMP, amount DOUBLE"
    spark.createDataFrame(_rows(start, n), schema).writeTo(ident).append()
    return {"ok": True}


def spark_build_hadoop(spark, warehouse: str, ident: str) -> dict:
    cryo_peers.add_spark_catalogs(
        spark,
        {
            "spark.sql.catalog.hadoop": "org.apache.iceberg.spark.SparkCatalog",
            "spark.sql.catalog.hadoop.type": "hadoop",
            "spark.sql.catalog.hadoop.warehouse": warehouse,
        },
    )
    spark.sql("CREATE NAMESPACE IF NOT EXISTS hadoop.db")
    spark.sql(
        f"CREATE TABLE {ident} (id BIGINT, cat STRING, ts TIMESTAMP, amount DOUBLE) USING iceberg "
        "PARTITIONED BY (cat) TBLPROPERTIES ('format-version'='2')"
    )
    for b in range(3):
        spark_insert(spark, ident, b * 30, 30)
    spark.sql(f"DELETE FROM {ident} WHERE id % 5 = 0")  # copy-on-write
    return {"ok": True}


def spark_remove_orphans(spark, catalog: str, table: str, older_than: str, dry_run: bool) -> dict:
    t = time.perf_counter()
    rows = spark.sql(
        f"CALL {catalog}.system.remove_orphan_files(table => '{table}', "
        f"older_than => TIMESTAMP '{older_than}', dry_run => {'true' if dry_run else 'false'})"
    ).collect()
    return {"seconds": time.perf_counter() - t, "files": [r["orphan_file_location"] for r in rows]}


# ================================================================================================
# Parent
# ================================================================================================


def _local(path_or_uri: str) -> str:
    s = str(path_or_uri)
    if s.startswith("file://"):
        s = s[len("file://") :]
    elif s.startswith("file:"):
        s = s[len("file:") :]
    return os.path.normpath(s)


def _age(path: Path, when: dt.datetime = OLD) -> None:
    ts = when.timestamp()
    os.utime(path, (ts, ts))


def _all_files(root: Path) -> list[Path]:
    return [Path(d) / f for d, _, fs in os.walk(root) for f in fs]


class Env:
    def __init__(self, root: Path, cryo_bin: Path, spark: SparkWorker) -> None:
        self.root = root
        self.db = root / "catalog.db"
        self.warehouse = root / "warehouse"
        self.hadoop = root / "hadoop"
        self.cryo_bin = cryo_bin
        self.spark = spark
        self.catalogs = {
            "fixtures": {"name": "fixtures", "properties": {"uri": f"sqlite:///{self.db}", "warehouse": self.warehouse.as_uri()}},
            "hadoop": {"name": "hadoop", "properties": {"type": "hadoop", "warehouse": self.hadoop.as_uri()}},
        }
        self._n = 0

    def pyiceberg(self):
        return cryo_peers.sql_catalog(self.db, self.warehouse)

    def metadata_location(self, catalog: str, ident: str) -> str:
        if catalog == "hadoop":
            meta = self.hadoop / ident.replace(".", "/") / "metadata"
            version = (meta / "version-hint.text").read_text().strip()
            return str(meta / f"v{version}.metadata.json")
        ns, name = ident.rsplit(".", 1)
        con = sqlite3.connect(str(self.db))
        try:
            (loc,) = con.execute(
                "SELECT metadata_location FROM iceberg_tables WHERE table_namespace = ? AND table_name = ?", (ns, name)
            ).fetchone()
        finally:
            con.close()
        return loc

    def table_dir(self, catalog: str, ident: str) -> Path:
        md = json.loads(Path(_local(self.metadata_location(catalog, ident))).read_text())
        return Path(_local(md["location"]))

    def read_all(self, catalog: str, ident: str) -> dict[str, pa.Table]:
        self._n += 1
        loc = self.metadata_location(catalog, ident)
        out = {
            "duckdb": cryo_peers.read_duckdb(loc),
            "spark": self.spark.read(f"{catalog}.{ident}", self.root / f"read-{self._n}.arrow"),
        }
        if catalog == "hadoop":
            out["pyiceberg"] = cryo_peers.read_pyiceberg(metadata_location=loc)
        else:
            out["pyiceberg"] = self.pyiceberg().load_table(ident).scan().to_arrow()
        return out

    def cryo(self, catalog: str, ident: str, *args: str) -> dict:
        cfg = self.root / f"{catalog}.json"
        cfg.write_text(json.dumps(self.catalogs[catalog]))
        proc = subprocess.run(
            [str(self.cryo_bin), "--catalog", str(cfg), "--table", ident, *args],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, f"cryo orphans {ident} failed ({proc.returncode}): {proc.stderr[-3000:]}"
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def cryo_missing(self, catalog: str, ident: str) -> dict:
        cfg = self.root / f"{catalog}.json"
        cfg.write_text(json.dumps(self.catalogs[catalog]))
        proc = subprocess.run(
            [str(self.cryo_bin), "missing", "--catalog", str(cfg), "--table", ident], capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, f"cryo orphans missing {ident} failed: {proc.stderr[-3000:]}"
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def spark_orphans(self, catalog: str, ident: str, dry_run: bool = True) -> set[str]:
        out = self.spark.call(
            "test_orphans_spark:spark_remove_orphans",
            catalog=catalog,
            table=ident,
            older_than=OLDER_THAN.strftime("%Y-%m-%d %H:%M:%S"),
            dry_run=dry_run,
        )
        return {_local(p) for p in out["files"]}

    def cryo_orphans(self, catalog: str, ident: str, *extra: str) -> tuple[set[str], dict]:
        out = self.cryo(catalog, ident, "--older-than", OLDER_THAN.strftime("%Y-%m-%d %H:%M:%S"), *extra)
        return {_local(o["path"]) for o in out["orphans"]}, out


@pytest.fixture(scope="module", params=list(cryo_peers.SPARK_LINES), ids=cryo_peers.spark_line_id)
def env(request, tmp_path_factory):
    line = cryo_peers.spark_line_or_skip(request.param)
    root = tmp_path_factory.mktemp(f"orphans-spark{line}")
    if os.environ.get("CRYO_ORPHANS_BIN"):
        cryo_bin = Path(os.environ["CRYO_ORPHANS_BIN"])
    else:
        cryo_bin = cryo_peers.cargo_examples("orphans") / "orphans"
    # PyIceberg creates the catalog tables before Spark's JdbcCatalog opens the file.
    cat = cryo_peers.sql_catalog(root / "catalog.db", root / "warehouse")
    cat.create_namespace_if_not_exists("db")
    spark = SparkWorker(root / "catalog.db", root / "warehouse", log=root / "spark-worker.log", app_name="cryo-test-orphans", line=line)
    try:
        yield Env(root, cryo_bin, spark)
    finally:
        spark.close()


def _pa_rows(start: int, n: int) -> pa.Table:
    rows = _rows(start, n)
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "cat": pa.array([r[1] for r in rows], pa.string()),
            "ts": pa.array([r[2] for r in rows], pa.timestamp("us", tz="UTC")),
            "amount": pa.array([r[3] for r in rows], pa.float64()),
        }
    )


def build_tables(env: Env) -> dict[str, tuple[str, str]]:
    env.spark.call("test_orphans_spark:spark_build_mixed", ident="fixtures.db.mixed")
    t = env.pyiceberg().load_table("db.mixed")
    t.append(_pa_rows(1000, 50))

    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestamptzType

    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "cat", StringType(), required=False),
        NestedField(3, "ts", TimestamptzType(), required=False),
        NestedField(4, "amount", DoubleType(), required=False),
    )
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="cat"))
    pyt = env.pyiceberg().create_table("db.pyt", schema=schema, partition_spec=spec)
    pyt.append(_pa_rows(0, 60))
    pyt.append(_pa_rows(60, 60))
    pyt.overwrite(_pa_rows(200, 30))
    env.spark.call("test_orphans_spark:spark_insert", ident="fixtures.db.pyt", start=300, n=40)

    env.spark.call("test_orphans_spark:spark_build_hadoop", warehouse=env.hadoop.as_uri(), ident="hadoop.db.hits")
    return {"mixed": ("fixtures", "db.mixed"), "pyt": ("fixtures", "db.pyt"), "hits": ("hadoop", "db.hits")}


def plant(env: Env, table_dir: Path) -> tuple[set[str], set[str], set[str]]:
    """Plant old orphans, one young orphan and hidden files; age every existing file. Returns
    (old orphans, young orphans, hidden files) as local paths."""
    for f in _all_files(table_dir):
        _age(f)
    data_files = sorted(p for p in _all_files(table_dir / "data") if p.suffix == ".parquet" and not p.name.startswith("."))
    manifests = sorted(p for p in _all_files(table_dir / "metadata") if p.suffix == ".avro" and not p.name.startswith("snap-"))
    metadata = sorted(p for p in _all_files(table_dir / "metadata") if p.name.endswith(".metadata.json"))
    assert data_files and manifests and metadata
    old = [
        data_files[0].parent / f"00000-0-{uuid.uuid4()}-orphan.parquet",
        data_files[-1].parent / f"00001-1-{uuid.uuid4()}-orphan.parquet",
        table_dir / "metadata" / f"{uuid.uuid4()}-m0.avro",
        table_dir / "metadata" / f"00999-{uuid.uuid4()}.metadata.json",
        table_dir / "data" / "extra" / "nested" / "deep" / "lost.parquet",
        table_dir / "misc" / "old-export" / "part-0.parquet",
    ]
    sources = [data_files[0], data_files[-1], manifests[0], metadata[-1], data_files[0], data_files[-1]]
    for dst, src in zip(old, sources):
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        _age(dst)
    young = table_dir / "data" / f"young-{uuid.uuid4()}.parquet"
    shutil.copyfile(data_files[0], young)
    hidden = [table_dir / "data" / f".{old[0].name}.crc", table_dir / "_temporary" / "0" / "part-0.parquet"]
    for h in hidden:
        h.parent.mkdir(parents=True, exist_ok=True)
        h.write_bytes(b"hidden")
        _age(h)
    norm = lambda ps: {os.path.normpath(str(p)) for p in ps}  # noqa: E731
    return norm(old), norm([young]), norm(hidden)


@pytest.fixture(scope="module")
def tables(env):
    return build_tables(env)


@pytest.mark.parametrize("name", ["mixed", "pyt", "hits"])
def test_cryo_and_spark_find_the_same_orphans_and_cryo_removes_them(env, tables, name):
    catalog, ident = tables[name]
    table_dir = env.table_dir(catalog, ident)
    before = env.read_all(catalog, ident)
    fps = {reader: cryo_peers.fingerprint(t) for reader, t in before.items()}
    assert len(set(fps.values())) == 1, f"readers disagree before: {fps}"
    fp = fps["spark"]
    assert fp.rows > 0
    if name == "mixed":  # the partition directories are percent-encoded
        dirs = {p.name for p in (table_dir / "data").iterdir()}
        assert any("%2F" in d for d in dirs) and any("%25" in d for d in dirs), dirs

    old, young, hidden = plant(env, table_dir)
    on_disk = {os.path.normpath(str(p)) for p in _all_files(table_dir)}

    spark_found = env.spark_orphans(catalog, ident)
    cryo_found, out = env.cryo_orphans(catalog, ident)
    assert cryo_found == spark_found, f"only Cryo: {sorted(cryo_found - spark_found)}; only Spark: {sorted(spark_found - cryo_found)}"
    assert cryo_found == old, f"missed: {sorted(old - cryo_found)}; extra: {sorted(cryo_found - old)}"
    assert out["dry_run"] and out["deleted_files"] == 0
    assert out["young_unreferenced_files"] == 1
    assert out["hidden_files"] >= len(hidden)
    assert out["orphan_bytes"] == sum(os.path.getsize(p) for p in old)
    assert {os.path.normpath(str(p)) for p in _all_files(table_dir)} == on_disk, "the dry run changed the directory"

    real = env.cryo(catalog, ident, "--delete", "--older-than", OLDER_THAN.strftime("%Y-%m-%d %H:%M:%S"))
    assert real["deleted_files"] == len(old) and not real["failures"], real
    assert {os.path.normpath(str(p)) for p in _all_files(table_dir)} == on_disk - old
    for p in young | hidden:
        assert os.path.exists(p), p

    after = env.read_all(catalog, ident)
    got = {reader: cryo_peers.fingerprint(t) for reader, t in after.items()}
    assert all(v == fp for v in got.values()), f"readers after Cryo's removal: {got}, before: {fp}"
    assert env.spark_orphans(catalog, ident) == set()
    assert env.cryo_orphans(catalog, ident)[0] == set()

    # Nothing is missing either: every committed file is still there.
    missing = env.cryo_missing(catalog, ident)
    assert missing["missing"] == [] and missing["unreadable"] == [], missing
    assert missing["checked_files"] > 0 and not missing["current_affected"]


def test_missing_files_match_sparks_metadata(env, tables):
    """A data file and a delete file vanish from ``db.mixed``: Cryo reports both, with the record counts and
    sizes Spark's ``files`` table gives them, as affecting the current snapshot."""
    catalog, ident = tables["mixed"]
    files = env.spark.sql(
        f"SELECT content, file_path, record_count, file_size_in_bytes FROM {catalog}.{ident}.files ORDER BY file_path"
    )
    data = next(f for f in files if f["content"] == 0)
    deletes = next(f for f in files if f["content"] == 1)
    saved = {}
    for f in (data, deletes):
        p = Path(_local(f["file_path"]))
        saved[p] = p.read_bytes()
        p.unlink()
    try:
        out = env.cryo_missing(catalog, ident)
    finally:
        for p, b in saved.items():
            p.write_bytes(b)
    by_path = {_local(m["path"]): m for m in out["missing"]}
    assert set(by_path) == {_local(data["file_path"]), _local(deletes["file_path"])}, out["missing"]
    m = by_path[_local(data["file_path"])]
    assert (m["kind"], m["records"], m["bytes"]) == ("data_file", data["record_count"], data["file_size_in_bytes"])
    m = by_path[_local(deletes["file_path"])]
    assert (m["kind"], m["records"], m["bytes"]) == ("position_deletes", deletes["record_count"], deletes["file_size_in_bytes"])
    assert out["current_affected"]
    assert out["rows_at_risk"] == data["record_count"]
    cur = next(s for s in out["snapshots"] if s["is_current"])
    assert cur["missing_data_files"] == 1 and cur["missing_delete_files"] == 1
    assert cur["delete_records_at_risk"] == deletes["record_count"]
    assert out["head_requests"] == 0
