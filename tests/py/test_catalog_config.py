"""The configuration users already have, and the SQL catalog on PostgreSQL, against the real peers.

Run with the peers venv after installing the package (scripts/test.sh does both), with the loopback
services up (``scripts/services.sh start``: PostgreSQL on 127.0.0.1:5433):

    $PEERS_PYTHON -m pytest tests/py/test_catalog_config.py -q

What is proved:

- ``cryo.load_catalog(name)`` resolves a catalog from ``.pyiceberg.yaml`` (``$PYICEBERG_HOME``) and
  ``PYICEBERG_CATALOG__<NAME>__<PROPERTY>`` variables to exactly the name and properties PyIceberg's own
  ``load_catalog`` resolves (PyIceberg run in a child process with the same environment), the default
  catalog included; the CLI's ``--catalog-name`` takes the same catalog;
- a property Cryo does not know is logged by name (never its value); one it knows but cannot serve
  refuses the catalog, saying what is missing; a catalog nothing configures is ``NotFoundError``;
- a PostgreSQL SQL catalog (the schema PyIceberg's ``SqlCatalog`` and Java's ``JdbcCatalog`` share):
  PyIceberg writes a table, Cryo (configured through ``PYICEBERG_CATALOG__…`` variables) compacts it and
  expires its snapshots, committing with ``UPDATE … WHERE metadata_location = ?``; Spark 3.5's JDBC catalog
  and PyIceberg read the same rows back. Spark writes a table, Cryo compacts it, PyIceberg reads it.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cryo_peers  # noqa: E402

cryo = pytest.importorskip("cryo", reason="install the package first: $PEERS_PYTHON -m maturin develop -m cryo-py/Cargo.toml")

SECRET = "planted-Secret-77e1"


def _items(cat, ident: str, files: int) -> None:
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    table = cat.create_table(ident, schema=schema)
    for i in range(files):
        ids = list(range(i * 50, i * 50 + 50))
        table.append(pa.table({"id": ids, "name": [f"n-{n}" for n in ids]}, schema=schema))


@pytest.fixture()
def pyiceberg_home(tmp_path, monkeypatch):
    """A `.pyiceberg.yaml` with two catalogs in a PYICEBERG_HOME of its own; no PYICEBERG_* leaks in."""
    for key in list(os.environ):
        if key.upper().startswith("PYICEBERG_"):
            monkeypatch.delenv(key)
    home = tmp_path / "home"
    home.mkdir()
    lake = tmp_path / "lake"
    lake.mkdir()
    pycat = cryo_peers.sql_catalog(lake / "catalog.db", lake / "warehouse", name="lake")
    pycat.create_namespace("ns")
    _items(pycat, "ns.items", 4)
    (home / ".pyiceberg.yaml").write_text(
        f"""
default-catalog: lake
catalog:
  Lake:
    type: sql
    uri: sqlite:///{lake / "catalog.db"}
    warehouse: file://{tmp_path / "elsewhere"}
    pool.max-connections: 2
  other:
    uri: sqlite:///{tmp_path / "nowhere.db"}
    credential: id:{SECRET}
"""
    )
    monkeypatch.setenv("PYICEBERG_HOME", str(home))
    # The environment overrides the file, as in PyIceberg.
    monkeypatch.setenv("PYICEBERG_CATALOG__LAKE__WAREHOUSE", f"file://{lake / 'warehouse'}")
    monkeypatch.setenv("PYICEBERG_CATALOG__LAKE__INIT_CATALOG_TABLES", "false")
    return home


def _pyiceberg_resolves(name: str | None) -> dict:
    """Name and properties PyIceberg's own load_catalog resolves, in a child with this environment."""
    code = (
        "import json, sys\n"
        "from pyiceberg.catalog import load_catalog\n"
        "name = sys.argv[1] or None\n"
        "c = load_catalog(name)\n"
        "print(json.dumps({'name': c.name, 'properties': dict(c.properties)}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, name or ""], capture_output=True, text=True, check=True, env=dict(os.environ))
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_load_catalog_resolves_what_pyiceberg_resolves(pyiceberg_home):
    for name in ("lake", "LAKE", None):
        theirs = _pyiceberg_resolves(name)
        resolved, props = cryo._cryo.pyiceberg_config(name, {})
        assert (resolved, props) == (theirs["name"], theirs["properties"]), name
    cat = cryo.load_catalog()
    assert cat.name == "lake" and cat.kind == "sql"
    assert cat.list_tables() == ["ns.items"]
    assert cat.scan("ns.items").data_files == 4
    # Properties in code override both.
    cat = cryo.load_catalog("lake", **{"pool.max-connections": 1})
    assert cat.scan("ns.items").data_files == 4


def test_the_cli_takes_a_catalog_by_name(pyiceberg_home):
    out = subprocess.run(
        [sys.executable, "-m", "cryo", "grade", "--catalog-name", "lake", "--json"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )
    assert out.returncode == 0, out.stderr
    grades = json.loads(out.stdout)
    assert grades["catalog"] == "lake" and grades["errors"] == []
    assert [t["table"] for t in grades["tables"]] == [{"namespace": ["ns"], "name": "items"}]
    missing = subprocess.run(
        [sys.executable, "-m", "cryo", "grade", "--catalog-name", "absent"], capture_output=True, text=True, env=dict(os.environ)
    )
    assert missing.returncode == 2
    assert "catalog `absent`" in missing.stderr and "PYICEBERG_CATALOG__ABSENT__" in missing.stderr


def test_properties_cryo_cannot_serve_or_does_not_know(pyiceberg_home, caplog):
    # Known but not served yet: logged with what is missing, by name; the catalog works.
    with caplog.at_level(logging.WARNING, logger="cryo"):
        cat = cryo.load_catalog("lake", **{"gcs.requester-pays": SECRET, "s3.role-arn": "arn:x", "frobnicate.level": SECRET})
    assert cat.scan("ns.items").data_files == 4
    messages = [r.getMessage() for r in caplog.records]
    assert any("gcs.requester-pays" in m and "requester-pays buckets" in m for m in messages), messages
    assert any("s3.role-arn" in m and "IAM role" in m for m in messages), messages
    assert any("frobnicate.level" in m and "not one Cryo knows" in m for m in messages), messages
    assert SECRET not in caplog.text
    # Ignoring these would write files against the user's settings: refused, saying why.
    with pytest.raises(cryo.UnsupportedError) as e:
        cryo.load_catalog("lake", **{"s3.sse-kms-key-id": "k"})
    assert "s3.sse-kms-key-id" in str(e.value) and "server-side encryption" in str(e.value)
    with pytest.raises(cryo.UnsupportedError, match="DynamoDB"):
        cryo.load_catalog("lake", type="dynamodb")
    with pytest.raises(cryo.NotFoundError, match="PYICEBERG_CATALOG__NOPE__"):
        cryo.load_catalog("nope")
    # A catalog whose connection fails shows no credential.
    with pytest.raises(cryo.CryoError) as e:
        cryo.load_catalog("other")
    assert SECRET not in str(e.value) and SECRET not in repr(e.value)


# ---- PostgreSQL ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def postgres():
    env = cryo_peers.services_env()
    uri = env.get("CRYO_POSTGRES_URI")
    cryo_peers.require(uri, "PostgreSQL is not up: scripts/services.sh start (scripts/peers.sh installs it)")
    return env


def _spark_pg(tmp_path: Path, env: dict, name: str):
    spark = cryo_peers.spark_session(tmp_path / "unused.db", tmp_path / "unused-wh", app_name="cryo-postgres")
    cryo_peers.add_spark_catalogs(
        spark,
        {
            f"spark.sql.catalog.{name}": "org.apache.iceberg.spark.SparkCatalog",
            f"spark.sql.catalog.{name}.type": "jdbc",
            f"spark.sql.catalog.{name}.uri": env["CRYO_POSTGRES_JDBC_URL"],
            f"spark.sql.catalog.{name}.jdbc.user": env["CRYO_POSTGRES_USER"],
            f"spark.sql.catalog.{name}.jdbc.password": env["CRYO_POSTGRES_PASSWORD"],
            f"spark.sql.catalog.{name}.jdbc.schema-version": "V1",
            f"spark.sql.catalog.{name}.warehouse": f"file://{tmp_path / 'warehouse'}",
            f"spark.sql.catalog.{name}.cache-enabled": "false",
        },
    )
    return spark


def test_postgres_catalog_shared_with_pyiceberg_and_spark(tmp_path, monkeypatch, postgres):
    from pyiceberg.catalog.sql import SqlCatalog

    # Rows are scoped by catalog name: a fresh catalog per run. (No `_`: the environment spells it `-`.)
    name = f"pg{uuid.uuid4().hex[:10]}"
    warehouse = f"file://{tmp_path / 'warehouse'}"
    pycat = SqlCatalog(name, uri=postgres["CRYO_POSTGRES_URI"], warehouse=warehouse)
    pycat.create_namespace("ns")
    _items(pycat, "ns.items", 6)
    before = cryo_peers.fingerprint(pycat.load_table("ns.items").scan().to_arrow())

    # Cryo finds the catalog the way PyIceberg users configure it: environment variables.
    for key in list(os.environ):
        if key.upper().startswith("PYICEBERG_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("PYICEBERG_HOME", str(tmp_path))
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{name.upper()}__URI", postgres["CRYO_POSTGRES_URI"])
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{name.upper()}__WAREHOUSE", warehouse)
    cat = cryo.load_catalog(name)
    assert cat.kind == "sql" and cat.list_tables() == ["ns.items"]
    out = cat.compact("ns.items", target_file_size=64 << 20)
    assert out.committed_groups >= 1 and out.before.files == 6 and out.after.files == 1, out
    expired = cat.expire_snapshots("ns.items", older_than=dt.timedelta(0), retain_last=1, dry_run=False)
    assert len(expired.expired_snapshot_ids) == 7 - 1, expired

    table = pycat.load_table("ns.items")
    assert table.current_snapshot().snapshot_id == out.snapshot_ids[-1]
    assert len(table.metadata.snapshots) == 1
    assert cryo_peers.fingerprint(table.scan().to_arrow()) == before
    spark = _spark_pg(tmp_path, postgres, name)
    assert cryo_peers.fingerprint(cryo_peers.read_spark(spark, f"{name}.ns.items")) == before
    assert cryo_peers.fingerprint(cryo_peers.read_duckdb(table.metadata_location)) == before

    # Spark writes (many small commits), Cryo compacts, PyIceberg and Spark read the same rows.
    spark.sql(f"CREATE TABLE {name}.ns.events (id BIGINT, kind STRING) USING iceberg")
    for i in range(5):
        spark.sql(f"INSERT INTO {name}.ns.events VALUES ({i}, 'k{i}'), ({i + 100}, 'k{i + 100}')")
    events = cryo_peers.fingerprint(cryo_peers.read_spark(spark, f"{name}.ns.events"))
    out = cat.compact("ns.events", target_file_size=64 << 20)
    assert out.committed_groups >= 1 and out.after.files < out.before.files, out
    assert cryo_peers.fingerprint(pycat.load_table("ns.events").scan().to_arrow()) == events
    spark.sql(f"REFRESH TABLE {name}.ns.events")
    assert cryo_peers.fingerprint(cryo_peers.read_spark(spark, f"{name}.ns.events")) == events
    ops = {r["snapshot_id"]: r["operation"] for r in spark.sql(f"SELECT snapshot_id, operation FROM {name}.ns.events.snapshots").collect()}
    assert ops[out.snapshot_ids[-1]] == "replace"
