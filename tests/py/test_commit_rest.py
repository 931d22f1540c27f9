"""Cryo compacts a REST table PyIceberg wrote; PyIceberg and DuckDB read it back to the same rows.

Run with the peers venv and the services up (scripts/services.sh start):
    $PEERS_PYTHON -m pytest tests/py/test_commit_rest.py

PyIceberg creates a day-partitioned table in the SeaweedFS REST catalog and appends three batches.
The Rust test ``commit_rest::rest_table_written_by_pyiceberg`` (ignored by a plain ``cargo test``, run
here with ``--ignored`` and ``CRYO_REST_PEER_TABLE``) rewrites both partitions and commits a
``replace`` through Cryo's RestCommitter, with an append committed between its stage and its commit:
the first commit gets 409, the retry loop reloads, validates and commits on the new head. The rows must then be exactly
the generator's rows for every id written, whoever reads them.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cryo_peers  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def _services_env() -> dict[str, str]:
    env = {}
    path = cryo_peers.peers_dir() / "run" / "services.env"
    if path.exists():
        for line in path.read_text().splitlines():
            if line.startswith("export ") and "=" in line:
                k, _, v = line[7:].partition("=")
                env[k] = v
    env.update({k: v for k, v in os.environ.items() if k.startswith("CRYO_")})
    return env


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except Exception:
        return False


def rows(ids) -> pa.Table:
    """The Rust tests' generator (tests/it/replace.rs `row`): day ``id % 2``, null name every 7th."""
    ids = list(ids)
    ts = [T0 + dt.timedelta(days=i % 2, microseconds=i) for i in ids]
    names = [None if i % 7 == 0 else f"name-{i}" for i in ids]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "name": pa.array(names, pa.string()),
        },
        schema=pa.schema(
            [
                pa.field("id", pa.int64(), nullable=False),
                pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
                pa.field("name", pa.string()),
            ]
        ),
    )


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    env = _services_env()
    uri = env.get("CRYO_REST_URI", "http://127.0.0.1:8181")
    cryo_peers.require(_up(uri + "/v1/config"), f"SeaweedFS's REST catalog does not answer at {uri}: scripts/services.sh start")
    return env


def _catalog(env: dict[str, str]):
    from pyiceberg.catalog.rest import RestCatalog

    uri = env.get("CRYO_REST_URI", "http://127.0.0.1:8181")
    credential = env.get("CRYO_REST_CREDENTIAL", "admin:adminsecret")
    key, _, secret = credential.partition(":")
    return RestCatalog(
        "rest",
        **{
            "uri": uri,
            "credential": credential,
            "oauth2-server-uri": f"{uri}/v1/oauth/tokens",
            "warehouse": env.get("CRYO_REST_WAREHOUSE", "icetables"),
            "s3.endpoint": env.get("CRYO_SEAWEED_S3_ENDPOINT", "http://127.0.0.1:8333"),
            "s3.access-key-id": key,
            "s3.secret-access-key": secret,
            "s3.region": "us-east-1",
            "s3.path-style-access": "true",
        },
    )


def test_cryo_replace_on_a_pyiceberg_rest_table(env):
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import DayTransform
    from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType

    cat = _catalog(env)
    cat.create_namespace_if_not_exists("cryo_commit_py")
    ident = f"cryo_commit_py.t_{uuid.uuid4().hex[:12]}"
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "ts", TimestamptzType(), required=True),
        NestedField(3, "name", StringType(), required=False),
    )
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="ts_day"))
    tbl = cat.create_table(ident, schema=schema, partition_spec=spec, properties={"format-version": "2"})
    for lo in (0, 20, 40):
        tbl.append(rows(range(lo, lo + 20)))
    tbl = cat.load_table(ident)
    assert len(tbl.inspect.files()) == 6

    cmd, cwd = cryo_peers.cargo_it_test("commit_rest::rest_table_written_by_pyiceberg", "--exact", "--ignored", "--nocapture")
    out = subprocess.run(
        cmd,
        cwd=cwd,
        env={**os.environ, **env, "CRYO_REST_PEER_TABLE": ident},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=1800,
    )
    assert out.returncode == 0, out.stdout[-4000:]
    assert "peer-table: ok" in out.stdout, out.stdout[-4000:]

    tbl = cat.load_table(ident)
    ops = [s.summary.operation.value for s in sorted(tbl.snapshots(), key=lambda s: s.sequence_number)]
    assert ops == ["append", "append", "append", "append", "replace"]
    replace = tbl.current_snapshot()
    assert replace.summary.operation.value == "replace"
    assert replace.summary["deleted-data-files"] == "6"
    assert replace.summary["added-data-files"] == "2"
    assert replace.summary["total-records"] == "70"
    # The rewritten files keep the sequence number of the snapshot Cryo read (equality deletes
    # committed after it would still apply), the appended ones have their own.
    entries = tbl.inspect.entries().to_pylist()
    added_by_replace = [e for e in entries if e["snapshot_id"] == replace.snapshot_id and e["status"] == 1]
    assert len(added_by_replace) == 2
    assert {e["sequence_number"] for e in added_by_replace} == {3}
    assert len(tbl.inspect.files()) == 4

    want = cryo_peers.fingerprint(rows(list(range(60)) + list(range(1000, 1010))))
    assert cryo_peers.fingerprint(tbl.scan().to_arrow()) == want
    key, _, secret = env.get("CRYO_REST_CREDENTIAL", "admin:adminsecret").partition(":")
    s3 = {"endpoint": env.get("CRYO_SEAWEED_S3_ENDPOINT", "http://127.0.0.1:8333"), "access_key": key, "secret_key": secret}
    assert cryo_peers.fingerprint(cryo_peers.read_duckdb(tbl.metadata_location, s3=s3)) == want
