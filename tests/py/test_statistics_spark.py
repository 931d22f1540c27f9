"""Cryo's table statistics beside Spark's ``compute_table_stats``, read back by Java and Trino.

Run with the peers venv, the package installed (``maturin develop``) and, for Trino, the services
started:  $PEERS_PYTHON -m pytest tests/py/test_statistics_spark.py -q

Per Spark line (3.5 + Iceberg 1.10 writes format v2 with position deletes; 4.1 + Iceberg 1.12
writes format v3 with deletion vectors), one table written by Spark SQL: ten columns of every
primitive kind (long, int, string with nulls and empty strings, negative and positive decimals,
boolean, date, timestamp, double, float, binary), bucketed, two inserts, then a merge-on-read
``DELETE`` whose deletes the statistics must apply. Then:

1. Spark runs ``compute_table_stats``: its Puffin file is read here (footer, zstd blobs).
2. Cryo's ``Catalog.compute_statistics`` replaces it on the same snapshot.
3. The two files describe the same columns; for every column under 4,096 distinct values (the
   sketch's exact range) Cryo's compact theta sketch is Java's, byte for byte (the same values,
   hashed the same way, serialized the same way); the 6,000-id column (estimation mode) is within
   the sketch's error of Spark's and of the true count.
4. Java's Iceberg reads Cryo's file back through the table (``statisticsFiles()``, the Puffin
   reader) and DataSketches' Java library deserializes each sketch to the same estimate.
5. Trino (v2) reports Cryo's distinct counts in ``SHOW STATS``.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import cryo_peers  # noqa: E402
from spark_worker import SparkWorker  # noqa: E402


def _cryo():
    """The package, imported here and not at module level: the Spark 4.1 child imports this module
    (for ``java_statistics``) with its own Python, which has no ``cryo``."""
    return cryo_peers.require_module("cryo", "install the package first: $PEERS_PYTHON -m maturin develop -m cryo-py/Cargo.toml")

IDENT = "db.stats"
SPARK_IDENT = f"fixtures.{IDENT}"
ROWS = 6000
# Every Iceberg primitive kind Spark SQL writes, with values of known distinct counts.
SELECT = """
SELECT id,
       CAST(id % 1000 AS INT) AS code,
       CASE WHEN id % 13 = 0 THEN NULL WHEN id % 17 = 0 THEN '' ELSE concat('name-', id % 300) END AS name,
       CAST((id % 50 - 25) / 4.0 AS DECIMAL(10, 2)) AS price,
       id % 2 = 0 AS flag,
       date_add(DATE '2026-01-01', CAST(id % 20 AS INT)) AS d,
       timestamp_seconds(1767225600 + id % 700) AS ts,
       (id % 200) * 1.5 AS amount,
       CAST(id % 70 AS FLOAT) / 8 AS ratio,
       CAST(concat('b', id % 90) AS BINARY) AS raw
FROM range({first}, {last})
"""
# Below this many distinct values a theta sketch (k = 4096) holds every hash.
EXACT_BELOW = 4096


# ================================================================================================
# Java side (in the Spark child, through SparkWorker.call("test_statistics_spark:<fn>", ...))
# ================================================================================================


def java_statistics(spark, ident: str) -> dict:
    """The current snapshot's statistics file as Java's Iceberg reads it: path, and per blob the
    field, the `ndv` property and the estimate DataSketches' Java library gives the sketch."""
    jvm = spark._jvm
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, ident)
    current = table.currentSnapshot().snapshotId()
    files = [f for f in table.statisticsFiles() if f.snapshotId() == current]
    if not files:
        return {"path": None, "blobs": []}
    f = files[0]
    reader = jvm.org.apache.iceberg.puffin.Puffin.read(table.io().newInputFile(f.path())).build()
    compact = None
    for name in ("org.apache.datasketches.theta.CompactSketch", "org.apache.iceberg.shaded.org.apache.datasketches.theta.CompactSketch"):
        try:
            jvm.java.lang.Class.forName(name, True, table.getClass().getClassLoader())
        except Exception:  # noqa: BLE001 - py4j raises Py4JJavaError; try the other name
            continue
        compact = name
        break
    blobs = []
    try:
        metadata = reader.fileMetadata()
        pairs = reader.readAll(metadata.blobs()).iterator()  # a java.lang.Iterable
        while pairs.hasNext():
            pair = pairs.next()
            bm, buf = pair.first(), pair.second()
            data = bytes(jvm.org.apache.iceberg.util.ByteBuffers.toByteArray(buf))
            estimate = None
            if compact is not None:
                pkg = compact.rsplit(".theta.", 1)[0]
                memory = _jclass(jvm, f"{pkg}.memory.Memory").wrap(data)
                estimate = float(_jclass(jvm, compact).wrap(memory).getEstimate())
            blobs.append(
                {
                    "type": bm.type(),
                    "fields": list(bm.inputFields()),
                    "snapshot_id": int(bm.snapshotId()),
                    "ndv": bm.properties().get("ndv"),
                    "estimate": estimate,
                }
            )
        created_by = metadata.properties().get("created-by")
    finally:
        reader.close()
    return {"path": f.path(), "file_size": int(f.fileSizeInBytes()), "created_by": created_by, "blobs": blobs, "sketch_class": compact}


def _jclass(jvm, name: str):
    obj = jvm
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


# ================================================================================================
# Helpers
# ================================================================================================


def _local(uri: str) -> str:
    return uri[len("file://") :] if uri.startswith("file://") else uri[len("file:") :] if uri.startswith("file:") else uri


def read_puffin(path: str) -> dict[int, dict]:
    """Field id → {ndv, type, sketch (uncompressed bytes)} of a Puffin file (footer uncompressed,
    blobs plain or zstd: what Java and Cryo write)."""
    import zstandard

    data = Path(_local(path)).read_bytes()
    assert data[:4] == b"PFA1" and data[-4:] == b"PFA1", path
    flags = data[-8:-4]
    assert flags[0] & 1 == 0, "compressed footer"
    n = int.from_bytes(data[-12:-8], "little")
    footer = json.loads(data[-12 - n : -12])
    assert data[-12 - n - 4 : -12 - n] == b"PFA1"
    out = {}
    for b in footer["blobs"]:
        raw = data[b["offset"] : b["offset"] + b["length"]]
        codec = b.get("compression-codec")
        if codec == "zstd":
            raw = zstandard.ZstdDecompressor().decompress(raw, max_output_size=1 << 24)
        else:
            assert codec is None, codec
        (field,) = b["fields"]
        out[field] = {"type": b["type"], "ndv": int(b["properties"]["ndv"]), "sketch": raw, "snapshot_id": b["snapshot-id"]}
    return out


class Lake:
    def __init__(self, root: Path, line: str) -> None:
        self.root = root
        self.line = line
        self.db = root / "catalog.db"
        self.warehouse = root / "warehouse"
        self.warehouse.mkdir(parents=True)
        self.spark = SparkWorker(self.db, self.warehouse, log=root / "spark.log", app_name="cryo-test-statistics", line=line)

    def metadata(self) -> dict:
        import sqlite3

        con = sqlite3.connect(str(self.db))
        try:
            (loc,) = con.execute(
                "SELECT metadata_location FROM iceberg_tables WHERE table_namespace = 'db' AND table_name = 'stats'"
            ).fetchone()
        finally:
            con.close()
        return json.loads(Path(_local(loc)).read_text())

    def current_statistics(self) -> dict:
        md = self.metadata()
        current = md["current-snapshot-id"]
        (stats,) = [s for s in md.get("statistics", []) if s["snapshot-id"] == current]
        return stats

    def catalog(self):
        return _cryo().Catalog("fixtures", uri=f"sqlite:///{self.db}", warehouse=self.warehouse.as_uri())


@pytest.fixture(scope="module", params=list(cryo_peers.SPARK_LINES), ids=cryo_peers.spark_line_id)
def lake(request, tmp_path_factory):
    line = cryo_peers.spark_line_or_skip(request.param)
    lake = Lake(tmp_path_factory.mktemp(f"statistics-spark{line}"), line)
    try:
        version = "3" if line != cryo_peers.DEFAULT_SPARK_LINE else "2"
        s = lake.spark
        s.sql("CREATE NAMESPACE IF NOT EXISTS fixtures.db")
        s.sql(
            f"""CREATE TABLE {SPARK_IDENT} (id bigint, code int, name string, price decimal(10, 2), flag boolean,
                d date, ts timestamp, amount double, ratio float, raw binary)
                USING iceberg PARTITIONED BY (bucket(4, id))
                TBLPROPERTIES ('format-version' = '{version}', 'write.delete.mode' = 'merge-on-read')"""
        )
        s.sql(f"INSERT INTO {SPARK_IDENT} " + SELECT.format(first=0, last=ROWS // 2))
        s.sql(f"INSERT INTO {SPARK_IDENT} " + SELECT.format(first=ROWS // 2, last=ROWS))
        s.sql(f"DELETE FROM {SPARK_IDENT} WHERE id % 7 = 0")
        yield lake
    finally:
        lake.spark.close()


def test_cryo_statistics_are_sparks_and_java_and_trino_read_them(lake):
    s = lake.spark
    truth = s.sql(f"SELECT count(*) AS n, count(DISTINCT id) AS ids FROM {SPARK_IDENT}")[0]
    assert truth["n"] == ROWS - ROWS // 7 - 1, truth  # ids 0, 7, ..., 5999 // 7 * 7 deleted

    # 1. Spark's statistics.
    s.sql(f"CALL fixtures.system.compute_table_stats(table => '{IDENT}')")
    spark_stats = lake.current_statistics()
    spark_blobs = read_puffin(spark_stats["statistics-path"])
    assert len(spark_blobs) == 10, spark_blobs.keys()

    # 2. Cryo's, on the same snapshot: a dry run reads nothing and changes nothing first.
    cat = lake.catalog()
    dry = cat.compute_statistics(IDENT, dry_run=True)
    assert dry.dry_run and dry.statistics_path is None and dry.before.files >= 4, dry
    assert lake.current_statistics() == spark_stats
    outcome = cat.compute_statistics(IDENT)
    assert not outcome.dry_run and outcome.rows == truth["n"], outcome.to_dict()
    assert outcome.snapshot_ids == [] and outcome.snapshot_id == lake.metadata()["current-snapshot-id"]
    ours = lake.current_statistics()
    assert ours["statistics-path"] == outcome.statistics_path != spark_stats["statistics-path"]
    assert outcome.to_dict()["replaced_path"] == spark_stats["statistics-path"]
    assert ours["file-size-in-bytes"] == os.path.getsize(_local(ours["statistics-path"]))
    cryo_blobs = read_puffin(ours["statistics-path"])

    # 3. The same columns; the same sketches where they are exact.
    assert cryo_blobs.keys() == spark_blobs.keys()
    ndv = dict(outcome.ndv)
    exact = 0
    for field, theirs in spark_blobs.items():
        mine = cryo_blobs[field]
        assert mine["type"] == theirs["type"] == "apache-datasketches-theta-v1"
        assert mine["snapshot_id"] == theirs["snapshot_id"]
        if theirs["ndv"] < EXACT_BELOW:
            assert mine["ndv"] == theirs["ndv"], (field, mine["ndv"], theirs["ndv"])
            assert mine["sketch"] == theirs["sketch"], f"field {field}: the sketch bytes differ"
            exact += 1
        else:
            # Estimation mode: k = 4096 gives a relative standard error of about 1.6%.
            assert abs(mine["ndv"] - theirs["ndv"]) <= 0.08 * truth["ids"], (field, mine["ndv"], theirs["ndv"])
            assert abs(mine["ndv"] - truth["ids"]) <= 0.05 * truth["ids"], (field, mine["ndv"], truth["ids"])
    assert exact == 9, "every column but the ids is in the exact range"
    assert sorted(ndv.values()) == sorted(b["ndv"] for b in cryo_blobs.values())

    # 4. Java's Iceberg reads Cryo's file; DataSketches' Java library reads the sketches.
    java = s.call("test_statistics_spark:java_statistics", ident=SPARK_IDENT)
    assert _local(java["path"]) == _local(ours["statistics-path"]), java
    assert java["file_size"] == ours["file-size-in-bytes"]
    assert java["created_by"].startswith("Cryo ")
    assert {b["fields"][0]: int(b["ndv"]) for b in java["blobs"]} == {f: b["ndv"] for f, b in cryo_blobs.items()}
    if java["sketch_class"] is not None:
        for b in java["blobs"]:
            assert int(b["estimate"]) == cryo_blobs[b["fields"][0]]["ndv"], b
    else:
        cryo_peers.require(False, "DataSketches' Java classes are not on Spark's class path")

    # 5. Trino shows Cryo's distinct counts (format v2; Trino's v3 support is the line's business).
    if lake.line == cryo_peers.DEFAULT_SPARK_LINE:
        trino_counts = _trino_show_stats(lake)
        if trino_counts is not None:
            names = {f["id"]: f["name"] for f in lake.metadata()["schemas"][-1]["fields"]}
            for field, b in cryo_blobs.items():
                assert trino_counts[names[field]] == pytest.approx(b["ndv"], rel=0.001), (names[field], trino_counts)


def _trino_show_stats(lake: Lake) -> dict[str, float] | None:
    env = cryo_peers.peers_env() | dict(os.environ)
    url = env.get("TRINO_URL")
    cryo_peers.require(bool(url), "no TRINO_URL: scripts/services.sh start runs Trino")
    if not url:
        return None
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/v1/info", timeout=5) as r:
            info = json.load(r)
    except OSError as e:
        cryo_peers.require(False, f"Trino at {url} does not answer ({e}): scripts/services.sh start")
        return None
    assert not info.get("starting"), info
    trino = cryo_peers.require_module("trino")
    from urllib.parse import urlparse

    u = urlparse(url)
    conn = trino.dbapi.connect(host=u.hostname, port=u.port, user=env.get("TRINO_USER", "cryo"), http_scheme=u.scheme)
    cur = conn.cursor()
    name = f"stats_{os.getpid()}"
    props = {
        "iceberg.catalog.type": "jdbc",
        "iceberg.jdbc-catalog.driver-class": "org.sqlite.JDBC",
        "iceberg.jdbc-catalog.connection-url": f"jdbc:sqlite:{lake.db}",
        "iceberg.jdbc-catalog.catalog-name": "fixtures",
        "iceberg.jdbc-catalog.default-warehouse-dir": lake.warehouse.as_uri(),
        "iceberg.jdbc-catalog.schema-version": "V1",
        "fs.local.enabled": "true",
        "local.location": "/",
    }
    with_ = ", ".join(f'"{k}" = \'{v}\'' for k, v in props.items())
    try:
        cur.execute(f"CREATE CATALOG {name} USING iceberg WITH ({with_})")
        cur.fetchall()
        cur.execute(f"SHOW STATS FOR {name}.db.stats")
        rows = cur.fetchall()
    finally:
        try:
            cur.execute(f"DROP CATALOG IF EXISTS {name}")
            cur.fetchall()
        finally:
            conn.close()
    # column_name, data_size, distinct_values_count, nulls_fraction, row_count, low_value, high_value
    return {r[0]: r[2] for r in rows if r[0] is not None}
