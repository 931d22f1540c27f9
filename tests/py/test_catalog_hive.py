"""Hive Metastore catalogs against a real standalone metastore, with PyIceberg's and Spark's Hive
catalogs beside Cryo.

Run with the peers venv after installing the package (scripts/test.sh does both), with the loopback
services up (``scripts/services.sh start``: Hive Metastore 3.1.3 on 127.0.0.1:9083):

    $PEERS_PYTHON -m pytest tests/py/test_catalog_hive.py -q

What is proved:

- PyIceberg's ``HiveCatalog`` writes a table (many small appends); Cryo, configured with the same
  PyIceberg properties (``type: hive``, ``uri: thrift://…``), lists, scans, compacts and expires it,
  committing under the metastore's table lock; the metastore's table then points at Cryo's metadata
  with the one before as ``previous_metadata_location``; PyIceberg, Spark 3.5's ``HiveCatalog`` and
  DuckDB read the same rows;
- Spark's ``HiveCatalog`` writes a table; Cryo compacts it; Spark and PyIceberg read it back, and Spark
  writes on top;
- a metastore that is down is a retryable catalog error.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cryo_peers  # noqa: E402

cryo = pytest.importorskip("cryo", reason="install the package first: $PEERS_PYTHON -m maturin develop -m cryo-py/Cargo.toml")


@pytest.fixture(scope="module")
def hms(tmp_path_factory):
    env = cryo_peers.services_env()
    uri = os.environ.get("CRYO_HMS_URI") or env.get("CRYO_HMS_URI")
    cryo_peers.require(uri, "the Hive Metastore is not up: scripts/services.sh start (scripts/peers.sh installs it)")
    cryo_peers.require_module("thrift", "PyIceberg's hive extra (scripts/peers.sh installs it)")
    warehouse = tmp_path_factory.mktemp("hive-warehouse")
    return {"uri": uri, "props": {"type": "hive", "uri": uri, "warehouse": f"file://{warehouse}"}, "warehouse": warehouse}


def _pyiceberg(hms):
    from pyiceberg.catalog import load_catalog

    return load_catalog("hive", **hms["props"])


def _spark(tmp_path: Path, hms, name: str):
    spark = cryo_peers.spark_session(tmp_path / "unused.db", tmp_path / "unused-wh", app_name="cryo-hive")
    p = f"spark.sql.catalog.{name}"
    cryo_peers.add_spark_catalogs(
        spark,
        {
            p: "org.apache.iceberg.spark.SparkCatalog",
            f"{p}.type": "hive",
            f"{p}.uri": hms["uri"],
            f"{p}.warehouse": hms["props"]["warehouse"],
            f"{p}.cache-enabled": "false",
        },
    )
    return spark


def test_hive_table_written_by_pyiceberg(tmp_path, hms):
    db = f"db_{uuid.uuid4().hex[:8]}"
    pycat = _pyiceberg(hms)
    pycat.create_namespace(db)
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    table = pycat.create_table(f"{db}.items", schema=schema)
    for i in range(6):
        ids = list(range(i * 40, i * 40 + 40))
        table.append(pa.table({"id": ids, "name": [f"n-{n}" for n in ids]}, schema=schema))
    before = cryo_peers.fingerprint(pycat.load_table(f"{db}.items").scan().to_arrow())

    cat = cryo.Catalog("hive", **hms["props"])
    assert cat.kind == "hive"
    assert f"{db}.items" in cat.list_tables()
    assert cat.scan(f"{db}.items").data_files == 6
    out = cat.compact(f"{db}.items", target_file_size=64 << 20)
    assert out.committed_groups >= 1 and out.before.files == 6 and out.after.files == 1, out
    expired = cat.expire_snapshots(f"{db}.items", older_than=dt.timedelta(0), retain_last=1, dry_run=False)
    assert len(expired.expired_snapshot_ids) == 6, expired

    head = pycat.load_table(f"{db}.items")
    assert head.current_snapshot().snapshot_id == out.snapshot_ids[-1]
    assert len(head.metadata.snapshots) == 1
    assert cryo_peers.fingerprint(head.scan().to_arrow()) == before
    assert cryo_peers.fingerprint(cryo_peers.read_duckdb(head.metadata_location)) == before
    spark = _spark(tmp_path, hms, "hv")
    assert cryo_peers.fingerprint(cryo_peers.read_spark(spark, f"hv.{db}.items")) == before
    # The metastore's own record (read with PyIceberg's Thrift client): Cryo's head, the one before.
    with pycat._client as client:
        record = client.get_table(db, "items")
    assert record.parameters["metadata_location"] == head.metadata_location
    assert record.parameters["previous_metadata_location"] == head.metadata.metadata_log[-1].metadata_file
    assert record.parameters["table_type"].upper() == "ICEBERG"


def test_hive_table_written_by_spark(tmp_path, hms):
    db = f"db_{uuid.uuid4().hex[:8]}"
    spark = _spark(tmp_path, hms, "hv")
    spark.sql(f"CREATE NAMESPACE hv.{db}")
    spark.sql(f"CREATE TABLE hv.{db}.events (id BIGINT, kind STRING) USING iceberg")
    for i in range(5):
        spark.sql(f"INSERT INTO hv.{db}.events VALUES ({i}, 'k{i}'), ({i + 100}, 'k{i + 100}')")
    events = cryo_peers.fingerprint(cryo_peers.read_spark(spark, f"hv.{db}.events"))

    cat = cryo.Catalog("hive", **hms["props"])
    out = cat.compact(f"{db}.events", target_file_size=64 << 20)
    assert out.committed_groups >= 1 and out.after.files < out.before.files, out
    spark.sql(f"REFRESH TABLE hv.{db}.events")
    assert cryo_peers.fingerprint(cryo_peers.read_spark(spark, f"hv.{db}.events")) == events
    ops = {r["snapshot_id"]: r["operation"] for r in spark.sql(f"SELECT snapshot_id, operation FROM hv.{db}.events.snapshots").collect()}
    assert ops[out.snapshot_ids[-1]] == "replace"
    assert cryo_peers.fingerprint(_pyiceberg(hms).load_table(f"{db}.events").scan().to_arrow()) == events
    spark.sql(f"INSERT INTO hv.{db}.events VALUES (7, 'late')")
    assert _pyiceberg(hms).load_table(f"{db}.events").scan().to_arrow().num_rows == 11


def test_a_metastore_that_is_down_is_a_retryable_error(hms):
    with pytest.raises(cryo.CatalogError) as e:
        cryo.Catalog("hive", type="hive", uri="thrift://127.0.0.1:9")
    assert e.value.retryable
    with pytest.raises(cryo.NotFoundError):
        cryo.Catalog("hive", **hms["props"]).scan("nodb_here.t")
