"""Coordination across machines through the Python package: locks in the catalog's PostgreSQL database
or on object storage, receipts on object storage, the commit fence in the database or on object storage.

Run with the peers venv after installing the package (scripts/test.sh does both), with the loopback
services up (``scripts/services.sh start``: PostgreSQL on 127.0.0.1:5433, Azurite on 127.0.0.1:10000):

    $PEERS_PYTHON -m pytest tests/py/test_coordination.py -q

The catalog is PyIceberg's ``SqlCatalog`` on PostgreSQL with its files on Azurite, so the maintainers
below share nothing but the database and the container. Processes killed while holding a lock, and two
processes racing for one table, are proved by the Rust tests ``coordination::*``
(``cargo test -p cryo-core --test it -- --include-ignored coordination``); here each binding's spelling
is run end to end.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cryo_peers  # noqa: E402

cryo = pytest.importorskip("cryo", reason="install the package first: $PEERS_PYTHON -m maturin develop -m cryo-py/Cargo.toml")

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


@pytest.fixture()
def shared(tmp_path):
    """A fragmented table in a PostgreSQL catalog (a fresh catalog name) with its files on Azurite."""
    env = cryo_peers.services_env()
    cryo_peers.require(env.get("CRYO_POSTGRES_URI"), "PostgreSQL is not up: scripts/services.sh start")
    cryo_peers.require(env.get("CRYO_AZURITE_ENDPOINT"), "Azurite is not up: scripts/services.sh start")
    from pyiceberg.catalog.sql import SqlCatalog

    run = uuid.uuid4().hex[:10]
    root = f"abfss://{env['CRYO_AZURITE_CONTAINER']}/coord-{run}"
    props = {"uri": env["CRYO_POSTGRES_URI"], "warehouse": f"{root}/wh", **cryo_peers.azurite_pyarrow_props(env)}
    name = f"coord_{run}"
    pycat = SqlCatalog(name, **props)
    pycat.create_namespace("db")
    table = pycat.create_table("db.events", schema=SCHEMA)
    for i in range(6):
        ids = list(range(i * 20, i * 20 + 20))
        table.append(pa.table({"id": ids, "name": [f"n-{n}" for n in ids]}, schema=SCHEMA))
    before = cryo_peers.fingerprint(pycat.load_table("db.events").scan().to_arrow())
    return {"name": name, "props": {"type": "sql", **props}, "root": root, "pycat": pycat, "before": before, "tmp": tmp_path}


def _plan(cat):
    plan = cat.plan()
    assert any(s["operation"] == "rewrite_data_files" for t in plan.to_dict()["tables"] for s in t["steps"]), plan.to_dict()
    return plan


@pytest.mark.parametrize("locks", ["catalog", "objects"])
def test_run_under_shared_locks_with_receipts_in_the_bucket(shared, locks):
    cat = cryo.Catalog(shared["name"], **shared["props"])
    lock_dir = "catalog" if locks == "catalog" else f"{shared['root']}/locks"
    receipts = f"{shared['root']}/receipts"
    scans = cat.scan_fleet()
    out = cat.run(_plan(cat), dry_run=False, lock_dir=lock_dir, receipt_log=receipts, actor="py-maintainer", quiet_period_ms=0)
    assert out.counts.get("succeeded", 0) > 0 and out.failed_tables == [], out
    logged = pa.table(cat.read_receipts(receipts)).to_pylist()
    assert len(logged) == pa.table(out.receipts()).num_rows
    assert any(r["status"] == "succeeded" and r["operation"] == "rewrite_data_files" for r in logged), logged
    assert all(r["actor"] == "py-maintainer" for r in logged)
    # Another maintainer planning from the same log (another machine: it shares only the bucket),
    # on scans from before the run, sees the compaction cooling down.
    again = cryo.Catalog(shared["name"], **shared["props"]).plan(scans, receipt_log=receipts).to_dict()
    events = [t for t in again["tables"] if (*t["table"]["namespace"], t["table"]["name"]) == ("db", "events")]
    assert events and all(s["operation"] != "rewrite_data_files" for s in events[0]["steps"]), (again["tables"], again.get("skipped_tables"))
    assert any(s["operation"] == "rewrite_data_files" and s["reason"].startswith("cooldown") for s in events[0]["skipped"]), events
    head = shared["pycat"].load_table("db.events")
    assert cryo_peers.fingerprint(head.scan().to_arrow()) == shared["before"]


def test_locks_in_a_sqlite_catalog_are_refused_with_what_to_do(tmp_path):
    cat = cryo.Catalog(
        "local",
        type="sql",
        uri=f"sqlite:///{tmp_path / 'c.db'}",
        warehouse=f"file://{tmp_path / 'wh'}",
        init_catalog_tables="true",
    )
    plan = cat.plan()
    with pytest.raises(cryo.ConfigError, match="PostgreSQL"):
        cat.run(plan, lock_dir="catalog")


@pytest.mark.parametrize("where", ["database", "objects"])
def test_the_commit_fence_across_machines(shared, where):
    cat = cryo.Catalog(shared["name"], **shared["props"])
    if where == "database":
        fence = cryo.CommitFence(database=shared["props"]["uri"], wait_ms=300)
        assert fence.in_database and "database=<set>" in repr(fence)
        assert shared["props"]["uri"].split("@")[0] not in repr(fence)
    else:
        # Lease objects beside the tables, reached with the catalog's storage properties.
        storage = {k: v for k, v in shared["props"].items() if k.startswith("adls.")}
        fence = cryo.CommitFence(location=f"{shared['root']}/fence", properties=storage, wait_ms=300, lease_ms=5_000)
        assert fence.location == f"{shared['root']}/fence" and not fence.in_database
        assert all(v not in repr(fence) for v in storage.values() if len(v) > 8), repr(fence)
    before = shared["pycat"].load_table("db.events").metadata_location
    with fence.writer(cat.name, "db.events"):
        out = cat.compact("db.events", dry_run=False, commit_fence=fence)
        assert out.committed_groups == 0 and out.failed_groups > 0, out.to_dict()
        assert shared["pycat"].load_table("db.events").metadata_location == before
    out = cat.compact("db.events", dry_run=False, commit_fence=fence)
    assert out.committed_groups > 0, out.to_dict()
    assert cryo_peers.fingerprint(shared["pycat"].load_table("db.events").scan().to_arrow()) == shared["before"]
