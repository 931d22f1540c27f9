"""GCS and Azure storage against their emulators, with PyIceberg writing the tables Cryo maintains.

Run with the peers venv after installing the package (scripts/test.sh does both), with the loopback
services up (``scripts/services.sh start``: fake-gcs-server on 127.0.0.1:4443, Azurite's blob service on
127.0.0.1:10000):

    $PEERS_PYTHON -m pytest tests/py/test_storage_gcs_azure.py -q

What is proved:

- **Azure**, both ways PyIceberg reaches it: PyArrow's file I/O with ``adls.account-name``,
  ``adls.account-key`` and the blob/dfs storage authority (locations ``abfss://container/path``), and
  adlfs with ``adls.connection-string`` (Java-style locations
  ``abfss://container@account.dfs.core.windows.net/path``). PyIceberg writes a table in small appends;
  Cryo, given the same properties, scans and grades it, compacts it, expires its snapshots, finds and
  deletes a planted orphan and nothing else; PyIceberg reads the same rows back.
- **GCS**: PyIceberg writes a table through ``gcs.service.host``; Cryo scans and grades it, lists a
  planted orphan, finds a deleted data file, and DuckDB reads the table; Cryo compacts it, expires
  its snapshots and removes the orphan, and PyIceberg reads the same rows back. fake-gcs-server has
  no XML API uploads, which ``object_store`` (and so Cryo) writes with (fsouza/fake-gcs-server#331):
  ``scripts/services.sh`` puts ``scripts/gcs/xml_adapter.py`` before it, which serves each as the
  server's JSON API call that does the same (conditions included). On the server alone those
  uploads are refused, and a compaction must then leave the table as it was: the last GCS test.
- No property value (account key, connection string, token) reaches an error message.
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

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
FAR_FUTURE_MS = "4102444800000"


@pytest.fixture(scope="module")
def env():
    e = cryo_peers.services_env()
    cryo_peers.require(e.get("CRYO_AZURITE_ENDPOINT"), "Azurite is not up: scripts/services.sh start")
    cryo_peers.require(e.get("CRYO_GCS_ENDPOINT"), "fake-gcs-server is not up: scripts/services.sh start")
    return e


def _azure_fs(env):
    from pyarrow.fs import AzureFileSystem

    return AzureFileSystem(
        account_name=env["CRYO_AZURITE_ACCOUNT"],
        account_key=env["CRYO_AZURITE_KEY"],
        blob_storage_authority=env["CRYO_AZURITE_AUTHORITY"],
        dfs_storage_authority=env["CRYO_AZURITE_AUTHORITY"],
        blob_storage_scheme="http",
        dfs_storage_scheme="http",
    )


def _gcs_props(env) -> dict[str, str]:
    # PyArrow's GCS client needs a token (with its expiry) to send anything; the emulator takes any.
    return {
        "gcs.service.host": env["CRYO_GCS_ENDPOINT"],
        "gcs.oauth2.token": "emulator-token-7f3",
        "gcs.oauth2.token-expires-at": FAR_FUTURE_MS,
    }


def _gcs_fs(env):
    from pyarrow.fs import GcsFileSystem

    host = env["CRYO_GCS_ENDPOINT"].split("://", 1)[1]
    return GcsFileSystem(
        scheme="http",
        endpoint_override=host,
        access_token="emulator-token-7f3",
        credential_token_expiration=dt.datetime(2100, 1, 1, tzinfo=dt.timezone.utc),
    )


def _written_by_pyiceberg(tmp_path: Path, name: str, warehouse: str, props: dict[str, str], appends: int = 6):
    """A sqlite SQL catalog (shared by PyIceberg and Cryo) and a table PyIceberg wrote in ``appends``
    small appends; returns (Cryo's catalog properties, PyIceberg's catalog, table name, fingerprint)."""
    from pyiceberg.catalog.sql import SqlCatalog

    catalog_props = {"uri": f"sqlite:///{tmp_path / 'catalog.db'}", "warehouse": warehouse, **props}
    pycat = SqlCatalog(name, **catalog_props)
    pycat.create_namespace("db")
    table = pycat.create_table("db.items", schema=SCHEMA)
    for i in range(appends):
        ids = list(range(i * 50, i * 50 + 50))
        table.append(pa.table({"id": ids, "name": [f"n-{n}" for n in ids]}, schema=SCHEMA))
    before = cryo_peers.fingerprint(pycat.load_table("db.items").scan().to_arrow())
    return {"type": "sql", **catalog_props}, pycat, "db.items", before


def _maintain_and_read_back(name: str, props: dict[str, str], pycat, table: str, before, plant) -> None:
    """Cryo scans, grades, compacts, expires and removes a planted orphan; PyIceberg reads the rows."""
    cat = cryo.Catalog(name, **props)
    scan = cat.scan(table)
    assert scan.data_files == 6
    report = cryo.grade(scan)
    assert report.table == table and report.grade in "ABCDF", report.to_dict()

    out = cat.compact(table, target_file_size=64 << 20)
    assert out.committed_groups == 1 and out.before.files == 6 and out.after.files == 1, out
    expired = cat.expire_snapshots(table, older_than=dt.timedelta(0), retain_last=1, dry_run=False)
    assert len(expired.expired_snapshot_ids) == 6, expired
    assert pa.table(expired.files()).num_rows > 0, expired.to_dict()

    head = pycat.load_table(table)
    assert head.current_snapshot().snapshot_id == out.snapshot_ids[-1]
    assert len(head.metadata.snapshots) == 1
    assert cryo_peers.fingerprint(head.scan().to_arrow()) == before
    assert cat.missing_files(table).missing_count == 0

    orphan = plant(f"{head.location()}/data/orphan-{uuid.uuid4().hex[:6]}.parquet")
    young = cat.remove_orphan_files(table)
    assert young.dry_run and young.orphan_count == 0, young.to_dict()
    assert young.to_dict()["young_unreferenced_files"] == 1, young.to_dict()
    future = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=4)
    dry = cat.remove_orphan_files(table, older_than=future, allow_short_retention=True)
    assert _paths(dry) == [orphan], dry.to_dict()
    real = cat.remove_orphan_files(table, older_than=future, allow_short_retention=True, dry_run=False)
    assert real.deleted_files == 1, real.to_dict()
    assert cat.remove_orphan_files(table, older_than=future, allow_short_retention=True).orphan_count == 0
    assert cryo_peers.fingerprint(pycat.load_table(table).scan().to_arrow()) == before


def _planter(fs):
    """Writes an orphan at a location whose path (after the scheme) is the PyArrow file system's."""

    def plant(location: str) -> str:
        with fs.open_output_stream(location.split("://", 1)[1]) as f:
            f.write(b"orphan bytes")
        return location

    return plant


def _paths(outcome) -> list[str]:
    return sorted(pa.table(outcome.orphans()).column("path").to_pylist())


def test_azure_through_pyarrow_properties(tmp_path, env):
    container = env["CRYO_AZURITE_CONTAINER"]
    props = cryo_peers.azurite_pyarrow_props(env)
    warehouse = f"abfss://{container}/cryo-{uuid.uuid4().hex[:10]}"
    cryo_props, pycat, table, before = _written_by_pyiceberg(tmp_path, "azpa", warehouse, props)
    _maintain_and_read_back("azpa", cryo_props, pycat, table, before, _planter(_azure_fs(env)))


def test_azure_through_a_connection_string_and_java_style_locations(tmp_path, env):
    container, account = env["CRYO_AZURITE_CONTAINER"], env["CRYO_AZURITE_ACCOUNT"]
    props = {"adls.connection-string": env["CRYO_AZURITE_CONNECTION_STRING"]}
    warehouse = f"abfss://{container}@{account}.dfs.core.windows.net/cryo-{uuid.uuid4().hex[:10]}"
    cryo_props, pycat, table, before = _written_by_pyiceberg(tmp_path, "azconn", warehouse, props)
    assert pycat.load_table(table).location().startswith(f"abfss://{container}@{account}.dfs.core.windows.net/")
    fs = _azure_fs(env)

    def plant(location: str) -> str:
        key = location.split("://", 1)[1].split("/", 1)[1]
        with fs.open_output_stream(f"{container}/{key}") as f:
            f.write(b"orphan bytes")
        return location

    _maintain_and_read_back("azconn", cryo_props, pycat, table, before, plant)


def _gcs_table(tmp_path: Path, env, name: str):
    """A table PyIceberg wrote on fake-gcs-server, and Cryo's catalog of it: (catalog, PyIceberg's
    catalog, table, its head, its rows' fingerprint)."""
    warehouse = f"gs://{env['CRYO_GCS_BUCKET']}/cryo-{uuid.uuid4().hex[:10]}"
    cryo_props, pycat, table, before = _written_by_pyiceberg(tmp_path, name, warehouse, _gcs_props(env))
    return cryo.Catalog(name, **cryo_props), pycat, table, pycat.load_table(table), before


def test_gcs_scan_grade_orphans_and_missing_files(tmp_path, env):
    cat, pycat, table, head, before = _gcs_table(tmp_path, env, "gcs")
    scan = cat.scan(table)
    assert scan.data_files == 6 and scan.to_dict()["location"] == head.location()
    assert cryo.grade(scan).grade in "ABCDF"

    fs = _gcs_fs(env)
    orphan = f"{head.location()}/data/orphan-{uuid.uuid4().hex[:6]}.parquet"
    with fs.open_output_stream(orphan.split("://", 1)[1]) as f:
        f.write(b"orphan bytes")
    future = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=4)
    dry = cat.remove_orphan_files(table, older_than=future, allow_short_retention=True)
    assert _paths(dry) == [orphan], dry.to_dict()
    assert dry.to_dict()["listed_files"] > 6

    # DuckDB reads GCS through its own client (httpfs), with the table as PyIceberg wrote it.
    host = env["CRYO_GCS_ENDPOINT"].split("://", 1)[1]
    con = cryo_peers.duckdb_connect()
    try:
        con.execute(f"LOAD '{cryo_peers.peers_env()['DUCKDB_HTTPFS_EXT']}'")
        con.execute(
            f"CREATE SECRET gcs_emu (TYPE gcs, KEY_ID 'x', SECRET 'y', ENDPOINT '{host}', USE_SSL false, URL_STYLE 'path')"
        )
        rows = con.execute("SELECT * FROM iceberg_scan(?)", [head.metadata_location]).to_arrow_table()
        assert cryo_peers.fingerprint(rows) == before
    finally:
        con.close()

    lost = next(iter(head.inspect.files().to_pylist()))["file_path"]
    fs.delete_file(lost.split("://", 1)[1])
    missing = cat.missing_files(table)
    assert missing.missing_count == 1 and missing.rows_at_risk == 50, missing


def test_gcs_compact_expire_orphans_read_back(tmp_path, env):
    warehouse = f"gs://{env['CRYO_GCS_BUCKET']}/cryo-{uuid.uuid4().hex[:10]}"
    cryo_props, pycat, table, before = _written_by_pyiceberg(tmp_path, "gcsm", warehouse, _gcs_props(env))
    _maintain_and_read_back("gcsm", cryo_props, pycat, table, before, _planter(_gcs_fs(env)))


def test_a_storage_refusing_writes_leaves_the_table_unchanged(tmp_path, env):
    cryo_peers.require(env.get("CRYO_GCS_SERVER_ENDPOINT"), "fake-gcs-server is not up: scripts/services.sh start")
    warehouse = f"gs://{env['CRYO_GCS_BUCKET']}/cryo-{uuid.uuid4().hex[:10]}"
    cryo_props, pycat, table, before = _written_by_pyiceberg(tmp_path, "gcsw", warehouse, _gcs_props(env))
    head = pycat.load_table(table)
    # Cryo on the server alone, which refuses object_store's uploads.
    cat = cryo.Catalog("gcsw", **{**cryo_props, "gcs.service.host": env["CRYO_GCS_SERVER_ENDPOINT"]})
    out = cat.compact(table, target_file_size=64 << 20)
    assert out.committed_groups == 0 and out.failed_groups == 1, out.to_dict()
    assert "emulator-token-7f3" not in str(out.to_dict())
    after = pycat.load_table(table)
    assert after.metadata_location == head.metadata_location
    assert cryo_peers.fingerprint(after.scan().to_arrow()) == before


def test_errors_name_the_store_and_hold_no_secret(tmp_path, env):
    container = env["CRYO_AZURITE_CONTAINER"]
    props = cryo_peers.azurite_pyarrow_props(env)
    warehouse = f"abfss://{container}/cryo-{uuid.uuid4().hex[:10]}"
    cryo_props, _, table, _ = _written_by_pyiceberg(tmp_path, "azbad", warehouse, props, appends=1)
    wrong_key = "V3JvbmdLZXlXcm9uZ0tleVdyb25nS2V5V3Jvbmc="
    cat = cryo.Catalog("azbad", **{**cryo_props, "adls.account-key": wrong_key})
    with pytest.raises(cryo.CryoError) as e:
        cat.scan(table)
    text = str(e.value)
    assert "denied" in text or "403" in text or "authoriz" in text.lower(), text
    assert wrong_key not in text and env["CRYO_AZURITE_KEY"] not in text
    # No account anywhere: a configuration error naming the property to set.
    bare = {k: v for k, v in cryo_props.items() if k != "adls.account-name"}
    with pytest.raises(cryo.CryoError) as e:
        cryo.Catalog("azbad", **bare).scan(table)
    assert "adls.account-name" in str(e.value)
