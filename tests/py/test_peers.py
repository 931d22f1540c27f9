"""PyIceberg, DuckDB and Spark read every fixture table to the same rows.

Run with the peers venv:  $PEERS_PYTHON -m pytest tests/py/test_peers.py
Fixtures come from $CRYO_FIXTURES_DIR (default <repo>/target/cryo-fixtures); they are generated with
tests/fixtures/make_fixtures.py when the manifest is missing (or CRYO_FIXTURES_REGEN=1).
The S3 (moto) and REST (SeaweedFS) tables are checked when the services answer (scripts/services.sh start);
they are (re)built with make_fixtures.py --s3 / --rest when missing.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cryo_peers  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(os.environ.get("CRYO_FIXTURES_DIR") or REPO / "target" / "cryo-fixtures")

LOCAL_TABLES = [
    "fixtures.pyiceberg.events",
    "fixtures.pyiceberg.healthy",
    "fixtures.pyiceberg.unpartitioned",
    "fixtures.spark.orders_mor",
    "fixtures.spark.legacy_v1",
    "fixtures.spark.upserts_eq",
    "hadoop.db.hadoop_tbl",
]


def _services_env() -> dict[str, str]:
    env = {}
    path = cryo_peers.peers_dir() / "run" / "services.env"
    if path.exists():
        for line in path.read_text().splitlines():
            if line.startswith("export ") and "=" in line:
                k, _, v = line[7:].partition("=")
                env[k] = v
    return env


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except Exception:
        return False


@pytest.fixture(scope="session")
def manifest() -> dict:
    mpath = FIXTURES / "manifest.json"
    if os.environ.get("CRYO_FIXTURES_REGEN") or not mpath.exists():
        subprocess.run([sys.executable, str(REPO / "tests" / "fixtures" / "make_fixtures.py"), "--out", str(FIXTURES)], check=True)
    return json.loads(mpath.read_text())


@pytest.fixture(scope="session")
def spark(manifest):
    s = cryo_peers.spark_session(FIXTURES / "catalog.db", FIXTURES / "warehouse", FIXTURES / "hadoop", app_name="cryo-test-peers")
    yield s
    s.stop()


def _pyiceberg(entry: dict, manifest: dict) -> pa.Table:
    cat = manifest["catalogs"][entry["catalog"]]
    if cat["type"] == "hadoop":
        return cryo_peers.read_pyiceberg(metadata_location=entry["metadata_location"])
    if cat["type"] == "sql":
        return cryo_peers.read_pyiceberg(
            entry["identifier"], catalog_db=cat["uri"][len("sqlite:///") :], warehouse=cat["warehouse"],
            catalog_name=entry["catalog"], properties=cat.get("properties"),
        )
    raise AssertionError(cat)


# --- the agreement tests ------------------------------------------------------------------------


def test_manifest_lists_every_local_table(manifest):
    assert set(LOCAL_TABLES) <= set(manifest["tables"])
    for key in LOCAL_TABLES:
        e = manifest["tables"][key]
        assert e["row_count"] > 0 and len(e["fingerprint"]) == 64
        assert e["metadata_location"].endswith(".metadata.json")


@pytest.mark.parametrize("key", LOCAL_TABLES)
def test_pyiceberg_matches_manifest(manifest, key):
    e = manifest["tables"][key]
    if e["equality_delete_files"] > 0:
        # Documented peer limitation: PyIceberg 0.12 refuses tables with equality deletes. Check it still
        # does (if a newer PyIceberg reads them, compare instead of skipping).
        try:
            data = _pyiceberg(e, manifest)
        except ValueError as err:
            assert "equality deletes" in str(err)
            pytest.skip("PyIceberg 0.12 cannot read equality deletes (fingerprint taken with DuckDB)")
    else:
        data = _pyiceberg(e, manifest)
    fp = cryo_peers.fingerprint(data)
    assert (fp.rows, fp.sha256) == (e["row_count"], e["fingerprint"])


@pytest.mark.parametrize("key", LOCAL_TABLES)
def test_duckdb_matches_pyiceberg(manifest, key):
    e = manifest["tables"][key]
    fp = cryo_peers.fingerprint(cryo_peers.read_duckdb(e["metadata_location"]))
    assert (fp.rows, fp.sha256) == (e["row_count"], e["fingerprint"])


@pytest.mark.parametrize("key", LOCAL_TABLES)
def test_spark_matches_pyiceberg(manifest, spark, key):
    e = manifest["tables"][key]
    fp = cryo_peers.fingerprint(cryo_peers.read_spark(spark, key))
    assert (fp.rows, fp.sha256) == (e["row_count"], e["fingerprint"])


def test_fixture_shapes(manifest):
    """The properties the fixtures exist for (so a generator change cannot silently drop them)."""
    t = manifest["tables"]
    ev = t["fixtures.pyiceberg.events"]
    assert ev["partition_specs"] >= 2 and ev["schemas"] >= 2 and ev["snapshots"] >= 50
    assert "comment" in ev["columns"] and "channel" in ev["columns"] and "note" not in ev["columns"]
    assert 2000 <= ev["row_count"] <= 5000
    assert t["fixtures.pyiceberg.healthy"]["snapshots"] == 1 and t["fixtures.pyiceberg.healthy"]["data_files"] <= 2
    assert t["fixtures.pyiceberg.unpartitioned"]["data_files"] >= 50
    assert t["fixtures.spark.orders_mor"]["position_delete_files"] > 0
    assert t["fixtures.spark.legacy_v1"]["format_version"] == 1
    assert t["fixtures.spark.upserts_eq"]["equality_delete_files"] == 2
    assert t["fixtures.spark.upserts_eq"]["fingerprint_reader"] == "duckdb"
    assert t["hadoop.db.hadoop_tbl"]["metadata_location"].endswith(".metadata.json")
    assert (FIXTURES / "hadoop" / "db" / "hadoop_tbl" / "metadata" / "version-hint.text").exists()


def test_spark_and_pyiceberg_share_the_sqlite_catalog(manifest, spark):
    names = {r.tableName for r in spark.sql("SHOW TABLES IN fixtures.pyiceberg").collect()}
    assert {"events", "healthy", "unpartitioned"} <= names
    cat = cryo_peers.sql_catalog(FIXTURES / "catalog.db", FIXTURES / "warehouse")
    assert {("spark", "orders_mor"), ("spark", "legacy_v1"), ("spark", "upserts_eq")} <= set(cat.list_tables("spark"))


# --- remote tables (need scripts/services.sh start and make_fixtures.py --s3 / --rest) -------------


def _regenerate(mode: str) -> dict:
    """(Re)build one remote fixture (about a second) and return the fresh manifest."""
    subprocess.run([sys.executable, str(REPO / "tests" / "fixtures" / "make_fixtures.py"), "--out", str(FIXTURES), mode], check=True)
    return json.loads((FIXTURES / "manifest.json").read_text())


def _spark_has_s3() -> bool:
    return cryo_peers.peers_env().get("SPARK_HAS_S3") == "1"


def test_s3_table_all_readers(manifest, spark):
    key = "fixtures_s3.pyiceberg.s3_small"
    endpoint = _services_env().get("CRYO_MOTO_ENDPOINT", "http://127.0.0.1:5055")
    cryo_peers.require(_up(endpoint), f"moto S3 does not answer at {endpoint}: scripts/services.sh start")
    if key not in manifest["tables"]:
        manifest = _regenerate("--s3")
    e = manifest["tables"][key]
    try:
        py = cryo_peers.fingerprint(_pyiceberg(e, manifest))
    except (FileNotFoundError, OSError):  # moto keeps objects in memory: restarted since --s3 ran
        manifest = _regenerate("--s3")
        e = manifest["tables"][key]
        py = cryo_peers.fingerprint(_pyiceberg(e, manifest))
    cat = manifest["catalogs"]["fixtures_s3"]
    endpoint = cat["properties"]["s3.endpoint"]
    dd = cryo_peers.fingerprint(cryo_peers.read_duckdb(e["metadata_location"], s3={"endpoint": endpoint}))
    assert py == dd == (e["row_count"], e["fingerprint"])
    if not _spark_has_s3():
        pytest.skip("Spark of the shim route has no S3FileIO SDK (iceberg-aws-bundle): PyIceberg + DuckDB only")
    cryo_peers.add_spark_catalogs(
        spark, cryo_peers.spark_s3_jdbc_catalog_conf("fixtures_s3", cat["uri"][len("sqlite:///") :], cat["warehouse"], endpoint)
    )
    assert cryo_peers.fingerprint(cryo_peers.read_spark(spark, key)) == py


def test_rest_table_all_readers(manifest, spark):
    key = "rest.cryo_rest.small"
    uri = _services_env().get("CRYO_REST_URI", "http://127.0.0.1:8181")
    cryo_peers.require(_up(uri + "/v1/config"), f"SeaweedFS's REST catalog does not answer at {uri}: scripts/services.sh start")
    sys.path.insert(0, str(REPO / "tests" / "fixtures"))
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    import make_fixtures

    if key not in manifest["tables"]:
        manifest = _regenerate("--rest")
    e = manifest["tables"][key]
    try:
        tbl = make_fixtures.rest_catalog().load_table(e["identifier"])
    except (NoSuchTableError, NoSuchNamespaceError):  # SeaweedFS data wiped (CRYO_SERVICES_FRESH=1)
        manifest = _regenerate("--rest")
        e = manifest["tables"][key]
        tbl = make_fixtures.rest_catalog().load_table(e["identifier"])
    cat = manifest["catalogs"]["rest"]
    py = cryo_peers.fingerprint(tbl.scan().to_arrow())
    key_id, _, secret = make_fixtures.REST_CREDENTIAL.partition(":")
    dd = cryo_peers.fingerprint(
        cryo_peers.read_duckdb(tbl.metadata_location, s3={"endpoint": cat["s3_endpoint"], "access_key": key_id, "secret_key": secret})
    )
    assert py == dd == (e["row_count"], e["fingerprint"])
    if not _spark_has_s3():
        pytest.skip("Spark of the shim route cannot use REST catalogs nor S3: PyIceberg + DuckDB only")
    cryo_peers.add_spark_catalogs(
        spark,
        cryo_peers.spark_rest_catalog_conf("rest", cat["uri"], cat["warehouse"], make_fixtures.REST_CREDENTIAL, cat["s3_endpoint"]),
    )
    assert cryo_peers.fingerprint(cryo_peers.read_spark(spark, key)) == py


# --- the fingerprint itself -------------------------------------------------------------------------


def test_fingerprint_ignores_row_and_column_order():
    t = pa.table({"a": [1, 2, 3], "b": ["x", "y", None]})
    shuffled = pa.table({"b": [None, "x", "y"], "a": [3, 1, 2]})
    assert cryo_peers.fingerprint(t) == cryo_peers.fingerprint(shuffled)
    assert cryo_peers.fingerprint(t) != cryo_peers.fingerprint(pa.table({"a": [1, 2, 4], "b": ["x", "y", None]}))
    # a multiset: duplicates count
    assert cryo_peers.fingerprint(pa.table({"a": [1, 1]})) != cryo_peers.fingerprint(pa.table({"a": [1]}))
    assert cryo_peers.fingerprint(pa.table({"a": [1, 1, 2]})) != cryo_peers.fingerprint(pa.table({"a": [1, 2, 2]}))


def test_fingerprint_normalizes_types_across_readers():
    instant = dt.datetime(2026, 3, 1, 12, 30, tzinfo=dt.timezone.utc)
    a = pa.table(
        {
            "ts": pa.array([instant], pa.timestamp("us", tz="UTC")),
            "d": pa.array([decimal.Decimal("1.50")], pa.decimal128(12, 2)),
            "s": pa.array(["é"], pa.string()),
            "f": pa.array([0.5], pa.float32()),
            "i": pa.array([7], pa.int32()),
            "day": pa.array([dt.date(2026, 3, 1)], pa.date32()),
        }
    )
    b = pa.table(
        {
            "ts": pa.array([instant], pa.timestamp("us", tz="UTC")).cast(pa.timestamp("ns", tz="Etc/UTC")).cast(pa.timestamp("ns", tz="Europe/Berlin")),
            "d": pa.array([decimal.Decimal("1.5000")], pa.decimal128(38, 4)),
            "s": pa.array(["é"], pa.large_string()),
            "f": pa.array([0.5], pa.float64()),
            "i": pa.array([7], pa.int64()),
            "day": pa.array([dt.date(2026, 3, 1)], pa.date32()).cast(pa.date64()),
        }
    )
    assert cryo_peers.fingerprint(a) == cryo_peers.fingerprint(b)
    # -0.0 == 0.0, but a naive timestamp is not the same column as an instant in another zone
    assert cryo_peers.fingerprint(pa.table({"f": pa.array([-0.0])})) == cryo_peers.fingerprint(pa.table({"f": pa.array([0.0])}))


def test_fingerprint_nested_values():
    t1 = pa.table({"m": pa.array([[("b", 2), ("a", 1)]], pa.map_(pa.string(), pa.int64())), "l": [[1, 2]], "st": [{"x": 1, "y": "z"}]})
    t2 = pa.table({"m": pa.array([[("a", 1), ("b", 2)]], pa.map_(pa.string(), pa.int64())), "l": pa.array([[1, 2]], pa.large_list(pa.int64())), "st": [{"y": "z", "x": 1}]})
    assert cryo_peers.fingerprint(t1) == cryo_peers.fingerprint(t2)
    assert cryo_peers.fingerprint(t1) != cryo_peers.fingerprint(pa.table({"m": t1["m"], "l": [[2, 1]], "st": t1["st"]}))
