"""AWS Glue catalogs against moto's Glue server, with PyIceberg's and Spark's Glue catalogs beside Cryo.

Run with the peers venv after installing the package (scripts/test.sh does both), with the loopback
services up (``scripts/services.sh start``: moto serves Glue and S3 on 127.0.0.1:5055):

    $PEERS_PYTHON -m pytest tests/py/test_catalog_glue.py -q

What is proved, on tables whose files are on moto's S3:

- PyIceberg's ``GlueCatalog`` writes a table (many small appends); Cryo, configured with the same
  PyIceberg properties (``type: glue``, ``glue.endpoint``, ``glue.region``, credentials), lists, scans,
  compacts and expires it; Glue's table then points at Cryo's metadata with the one before as
  ``previous_metadata_location`` and its other fields kept; PyIceberg, Spark 3.5's ``GlueCatalog`` and
  DuckDB read the same rows;
- Spark's ``GlueCatalog`` writes a table; Cryo compacts it; Spark and PyIceberg read it back;
- a catalog with refused or missing credentials, or a Glue that is down, is a typed error without any
  secret.

moto does not enforce ``UpdateTable``'s ``VersionId`` (it accepts any); the race between Cryo's check and
its update is therefore proved by the Rust test ``commit::concurrent_commit_conflicts_on_glue_catalogs``
only as far as the ``metadata_location`` check reaches (a writer that committed before Cryo's update is
seen), which is the check Java's ``GlueTableOperations`` makes too.
"""

from __future__ import annotations

import datetime as dt
import sys
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cryo_peers  # noqa: E402

cryo = pytest.importorskip("cryo", reason="install the package first: $PEERS_PYTHON -m maturin develop -m cryo-py/Cargo.toml")

SECRET = "planted-glue-secret-3c1"
REGION = "us-east-1"


@pytest.fixture(scope="module")
def glue():
    env = cryo_peers.services_env()
    endpoint = env.get("CRYO_MOTO_ENDPOINT")
    cryo_peers.require(endpoint, "moto is not up: scripts/services.sh start")
    import boto3

    bucket = f"cryo-glue-{uuid.uuid4().hex[:8]}"
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.create_bucket(Bucket=bucket)
    client = boto3.client("glue", endpoint_url=endpoint, region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")
    props = {
        "type": "glue",
        "glue.endpoint": endpoint,
        "glue.region": REGION,
        "glue.access-key-id": "testing",
        "glue.secret-access-key": SECRET,
        "s3.endpoint": endpoint,
        "s3.access-key-id": "testing",
        "s3.secret-access-key": "testing",
        "s3.region": REGION,
        "s3.path-style-access": "true",
        "warehouse": f"s3://{bucket}/wh",
    }
    return {"endpoint": endpoint, "bucket": bucket, "client": client, "props": props}


def _pyiceberg(glue):
    from pyiceberg.catalog import load_catalog

    return load_catalog("glue", **glue["props"])


def _spark(tmp_path: Path, glue, name: str):
    spark = cryo_peers.spark_session(tmp_path / "unused.db", tmp_path / "unused-wh", app_name="cryo-glue")
    # The Glue client's credentials: the AWS SDK's default chain reads these system properties first.
    spark._jvm.java.lang.System.setProperty("aws.accessKeyId", "testing")
    spark._jvm.java.lang.System.setProperty("aws.secretAccessKey", "testing")
    p = f"spark.sql.catalog.{name}"
    cryo_peers.add_spark_catalogs(
        spark,
        {
            p: "org.apache.iceberg.spark.SparkCatalog",
            f"{p}.type": "glue",
            f"{p}.glue.endpoint": glue["endpoint"],
            f"{p}.warehouse": glue["props"]["warehouse"],
            f"{p}.cache-enabled": "false",
            **cryo_peers._s3_io_conf(p, glue["endpoint"], "testing", "testing", REGION),
        },
    )
    return spark


def test_glue_table_written_by_pyiceberg(tmp_path, glue):
    db = f"db_{uuid.uuid4().hex[:8]}"
    pycat = _pyiceberg(glue)
    pycat.create_namespace(db)
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    table = pycat.create_table(f"{db}.items", schema=schema)
    for i in range(6):
        ids = list(range(i * 40, i * 40 + 40))
        table.append(pa.table({"id": ids, "name": [f"n-{n}" for n in ids]}, schema=schema))
    before = cryo_peers.fingerprint(pycat.load_table(f"{db}.items").scan().to_arrow())
    raw_before = glue["client"].get_table(DatabaseName=db, Name="items")["Table"]

    cat = cryo.Catalog("glue", **glue["props"])
    assert cat.kind == "glue"
    assert f"{db}.items" in cat.list_tables()
    assert cat.scan(f"{db}.items").data_files == 6
    out = cat.compact(f"{db}.items", target_file_size=64 << 20)
    assert out.committed_groups >= 1 and out.before.files == 6 and out.after.files == 1, out
    expired = cat.expire_snapshots(f"{db}.items", older_than=dt.timedelta(0), retain_last=1, dry_run=False)
    assert len(expired.expired_snapshot_ids) == 6, expired

    raw = glue["client"].get_table(DatabaseName=db, Name="items")["Table"]
    head = pycat.load_table(f"{db}.items")
    assert raw["Parameters"]["metadata_location"] == head.metadata_location
    assert raw["Parameters"]["previous_metadata_location"] == head.metadata.metadata_log[-1].metadata_file
    assert raw["Parameters"]["table_type"].upper() == "ICEBERG"
    assert int(raw["VersionId"]) > int(raw_before["VersionId"])
    assert raw["StorageDescriptor"]["Columns"] == raw_before["StorageDescriptor"]["Columns"]
    assert head.current_snapshot().snapshot_id == out.snapshot_ids[-1]
    assert len(head.metadata.snapshots) == 1
    assert cryo_peers.fingerprint(head.scan().to_arrow()) == before
    s3 = {"endpoint": glue["endpoint"], "access_key": "testing", "secret_key": "testing", "region": REGION}
    assert cryo_peers.fingerprint(cryo_peers.read_duckdb(head.metadata_location, s3=s3)) == before
    spark = _spark(tmp_path, glue, "gl")
    assert cryo_peers.fingerprint(cryo_peers.read_spark(spark, f"gl.{db}.items")) == before


def test_glue_table_written_by_spark(tmp_path, glue):
    db = f"db_{uuid.uuid4().hex[:8]}"
    glue["client"].create_database(DatabaseInput={"Name": db})
    spark = _spark(tmp_path, glue, "gl")
    spark.sql(f"CREATE TABLE gl.{db}.events (id BIGINT, kind STRING) USING iceberg")
    for i in range(5):
        spark.sql(f"INSERT INTO gl.{db}.events VALUES ({i}, 'k{i}'), ({i + 100}, 'k{i + 100}')")
    events = cryo_peers.fingerprint(cryo_peers.read_spark(spark, f"gl.{db}.events"))

    cat = cryo.Catalog("glue", **glue["props"])
    out = cat.compact(f"{db}.events", target_file_size=64 << 20)
    assert out.committed_groups >= 1 and out.after.files < out.before.files, out
    spark.sql(f"REFRESH TABLE gl.{db}.events")
    assert cryo_peers.fingerprint(cryo_peers.read_spark(spark, f"gl.{db}.events")) == events
    ops = {r["snapshot_id"]: r["operation"] for r in spark.sql(f"SELECT snapshot_id, operation FROM gl.{db}.events.snapshots").collect()}
    assert ops[out.snapshot_ids[-1]] == "replace"
    assert cryo_peers.fingerprint(_pyiceberg(glue).load_table(f"{db}.events").scan().to_arrow()) == events
    # Spark keeps writing on top of Cryo's commit.
    spark.sql(f"INSERT INTO gl.{db}.events VALUES (7, 'late')")
    assert _pyiceberg(glue).load_table(f"{db}.events").scan().to_arrow().num_rows == 11


def test_glue_errors_are_typed_and_hold_no_secret(glue):
    props = dict(glue["props"])
    del props["glue.access-key-id"], props["glue.secret-access-key"]
    with pytest.raises(cryo.ConfigError, match="needs credentials"):
        _no_env_credentials(props)
    with pytest.raises(cryo.CatalogError) as e:
        cryo.Catalog("glue", **{**glue["props"], "glue.endpoint": "http://127.0.0.1:9"})
    assert e.value.retryable and SECRET not in str(e.value) and SECRET not in repr(e.value)
    with pytest.raises(cryo.NotFoundError):
        cryo.Catalog("glue", **glue["props"]).scan("nodb_here.t")


def _no_env_credentials(props):
    import os

    saved = {k: os.environ.pop(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY") if k in os.environ}
    try:
        return cryo.Catalog("glue", **props)
    finally:
        os.environ.update(saved)
