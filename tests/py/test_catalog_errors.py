"""Catalog errors as users meet them, on every catalog the services run: a table dropped between
Cryo's read and its commit, a missing namespace, a catalog that is down, refused credentials.

Run with the peers venv after installing the package (scripts/test.sh does both), with the loopback
services up (``scripts/services.sh start``):

    $PEERS_PYTHON -m pytest tests/py/test_catalog_errors.py -q

Each error must be typed, name the catalog or the table, hold no secret, and leave nothing
half-written: a compaction whose table went away while it was rewriting deletes the files it wrote.
The moment "between the read and the commit" is made exact with the commit fence: the test holds it
as a writer while Cryo rewrites, drops the table through PyIceberg, then lets Cryo's commit in.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cryo_peers  # noqa: E402

cryo = pytest.importorskip("cryo", reason="install the package first: $PEERS_PYTHON -m maturin develop -m cryo-py/Cargo.toml")

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
KINDS = ["sqlite", "postgres", "glue", "hive"]


def _props(kind: str, tmp_path: Path) -> dict[str, str]:
    env = cryo_peers.services_env()
    warehouse = f"file://{tmp_path / 'wh'}"
    if kind == "sqlite":
        return {
            "type": "sql",
            "uri": f"sqlite:///{tmp_path / 'catalog.db'}",
            "warehouse": warehouse,
            "init_catalog_tables": "true",
        }
    if kind == "postgres":
        cryo_peers.require(env.get("CRYO_POSTGRES_URI"), "PostgreSQL is not up: scripts/services.sh start")
        return {"type": "sql", "uri": env["CRYO_POSTGRES_URI"], "warehouse": warehouse, "init_catalog_tables": "true"}
    if kind == "glue":
        cryo_peers.require(env.get("CRYO_MOTO_ENDPOINT"), "moto is not up: scripts/services.sh start")
        return {
            "type": "glue",
            "glue.endpoint": env["CRYO_MOTO_ENDPOINT"],
            "glue.region": "us-east-1",
            "glue.access-key-id": "testing",
            "glue.secret-access-key": "testing",
            "warehouse": warehouse,
        }
    cryo_peers.require(env.get("CRYO_HMS_URI"), "the Hive Metastore is not up: scripts/services.sh start")
    return {"type": "hive", "uri": env["CRYO_HMS_URI"], "warehouse": warehouse}


def _pyiceberg(name: str, props: dict[str, str]):
    from pyiceberg.catalog import load_catalog

    return load_catalog(name, **props)


def _files(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("kind", KINDS)
def test_a_table_dropped_between_read_and_commit(tmp_path, kind):
    props = _props(kind, tmp_path)
    name = f"err_{uuid.uuid4().hex[:8]}"
    db = f"db_{uuid.uuid4().hex[:8]}"
    pycat = _pyiceberg(name, props)
    pycat.create_namespace(db)
    table = pycat.create_table(f"{db}.items", schema=SCHEMA)
    for i in range(6):
        ids = list(range(i * 30, i * 30 + 30))
        table.append(pa.table({"id": ids, "name": [f"n-{n}" for n in ids]}, schema=SCHEMA))
    # `file:///tmp/…` from most catalogs, `file:/tmp/…` from the metastore's.
    location = Path(urlparse(pycat.load_table(f"{db}.items").location()).path)
    before = _files(location)
    assert before, f"no files under {location}"

    cat = cryo.Catalog(name, **props)
    fence = cryo.CommitFence(tmp_path / "fence", wait_ms=30_000)
    result: dict[str, object] = {}

    def compact():
        try:
            result["out"] = cat.compact(f"{db}.items", dry_run=False, commit_fence=fence, target_file_size=64 << 20)
        except cryo.CryoError as e:  # the binding's base class: the type is checked below
            result["error"] = e

    with fence.writer(cat.name, f"{db}.items"):
        worker = threading.Thread(target=compact)
        worker.start()
        # Cryo rewrites (outside the fence), then waits at it; its new files appear meanwhile.
        deadline = time.monotonic() + 60
        while len(_files(location)) == len(before) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        pycat.drop_table(f"{db}.items")
    worker.join(120)
    assert not worker.is_alive()

    if "error" in result:
        e = result["error"]
        assert isinstance(e, (cryo.NotFoundError, cryo.CommitConflictError)), repr(e)
        text = str(e)
    else:
        out = result["out"]
        assert out.committed_groups == 0 and out.failed_groups > 0, out.to_dict()
        text = str(out.to_dict())
    assert "items" in text, text
    assert "testing" not in text or kind != "glue"
    # Nothing half-written: what Cryo wrote for the rewrite is gone again.
    assert _files(location) == before, sorted(_files(location) - before)


@pytest.mark.parametrize("kind", KINDS)
def test_a_missing_namespace_is_not_found_naming_it(tmp_path, kind):
    props = _props(kind, tmp_path)
    cat = cryo.Catalog(f"err_{uuid.uuid4().hex[:8]}", **props)
    missing = f"nowhere_{uuid.uuid4().hex[:6]}"
    with pytest.raises(cryo.NotFoundError) as e:
        cat.scan(f"{missing}.t")
    assert missing in str(e.value)


def test_refused_database_credentials_are_typed_and_secret(tmp_path):
    env = cryo_peers.services_env()
    cryo_peers.require(env.get("CRYO_POSTGRES_URI"), "PostgreSQL is not up: scripts/services.sh start")
    wrong = "wr0ng-pa55word-91"
    uri = env["CRYO_POSTGRES_URI"].replace(env["CRYO_POSTGRES_PASSWORD"], wrong)
    with pytest.raises(cryo.CatalogError) as e:
        cryo.Catalog("pgbad", type="sql", uri=uri, warehouse=f"file://{tmp_path}")
    text = f"{e.value} {e.value!r}"
    assert "pgbad" in text and wrong not in text and env["CRYO_POSTGRES_PASSWORD"] not in text, text


@pytest.mark.parametrize(
    "props",
    [
        {"type": "sql", "uri": "postgresql://cryo:pw-down-1@127.0.0.1:9/db"},
        {"type": "hive", "uri": "thrift://127.0.0.1:9"},
        {"type": "rest", "uri": "http://127.0.0.1:9", "credential": "id:pw-down-2"},
        {
            "type": "glue",
            "glue.endpoint": "http://127.0.0.1:9",
            "glue.region": "us-east-1",
            "glue.access-key-id": "a",
            "glue.secret-access-key": "pw-down-3",
        },
    ],
    ids=["postgres", "hive", "rest", "glue"],
)
def test_a_catalog_that_is_down_is_retryable_and_secret(props):
    os.environ.setdefault("CRYO_LOG", "warn")
    with pytest.raises(cryo.CatalogError) as e:
        cat = cryo.Catalog("down", warehouse="file:///tmp/unused", **props)
        cat.list_tables()  # REST connects lazily
    assert e.value.retryable, repr(e.value)
    text = f"{e.value} {e.value!r}"
    assert "down" in text and "pw-down" not in text, text
