"""Tables compacted by Cryo's engine read back identically with PyIceberg and DuckDB.

Run with the peers venv:  $PEERS_PYTHON -m pytest tests/py/test_compact_peers.py

The Rust test ``compact::compacted_tables_for_peers`` compacts demo-lake tables (position
deletes, equality deletes, format v1, many small files) into ``target/cryo-compacted`` and
commits each group as a ``replace`` snapshot (applied delete files removed); this test runs it when its output is missing. For every table, the rows of the
snapshot before compaction and of the one after must have the same order-independent fingerprint
(``cryo_peers.fingerprint``), read by each peer. PyIceberg 0.12 refuses equality deletes: for the
table that has them, the "before" side is read by DuckDB only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cryo_peers  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "target" / "cryo-compacted" / "compacted.json"


@pytest.fixture(scope="module")
def compacted() -> dict:
    if not OUT.exists() or os.environ.get("CRYO_COMPACTED_REBUILD"):
        cmd, cwd = cryo_peers.cargo_it_test("compact::compacted_tables_for_peers", "--exact")
        subprocess.run(cmd, cwd=cwd, check=True, timeout=1800)
    return json.loads(OUT.read_text())


def _catalog(compacted: dict):
    c = compacted["catalog"]
    props = dict(c["properties"])
    uri = props.pop("uri")
    warehouse = props.pop("warehouse", None)
    props.pop("type", None)
    return cryo_peers.sql_catalog(uri[len("sqlite:///") :], warehouse, name=c["name"], **props)


def _ids(compacted: dict) -> list[str]:
    return [t["identifier"] for t in compacted["tables"]]


def _entry(compacted: dict, ident: str) -> dict:
    return next(t for t in compacted["tables"] if t["identifier"] == ident)


@pytest.mark.parametrize("ident", ["lake.orders", "lake.customers", "lake.metrics_v1", "lake.clickstream"])
def test_duckdb_reads_the_same_rows(compacted, ident):
    t = _entry(compacted, ident)
    before = cryo_peers.fingerprint(cryo_peers.read_duckdb(t["before_metadata"]))
    after = cryo_peers.fingerprint(cryo_peers.read_duckdb(t["after_metadata"]))
    assert after == before
    assert after.rows == t["rows_read"] - t["rows_deleted"] or t["groups"] == 0


@pytest.mark.parametrize("ident", ["lake.orders", "lake.customers", "lake.metrics_v1", "lake.clickstream"])
def test_pyiceberg_reads_the_same_rows(compacted, ident):
    t = _entry(compacted, ident)
    snapshot = _catalog(compacted).load_table(ident).current_snapshot()
    assert snapshot.summary.operation.value == "replace"
    table = _catalog(compacted).load_table(ident)
    after = cryo_peers.fingerprint(table.scan(snapshot_id=t["after_snapshot_id"]).to_arrow())
    try:
        before_rows = table.scan(snapshot_id=t["before_snapshot_id"]).to_arrow()
    except ValueError as e:  # PyIceberg 0.12 cannot apply equality deletes
        assert "equality deletes" in str(e)
        before_rows = cryo_peers.read_duckdb(t["before_metadata"])
    # Every group commits and takes its applied delete files along: none are left.
    assert t["delete_files_after"] == 0
    assert after == cryo_peers.fingerprint(before_rows)
    files = table.inspect.files()
    data = [c for c in files.column("content").to_pylist() if c == 0]
    assert len(data) <= t["data_files_before"] or t["groups"] == 0
    assert table.current_snapshot().snapshot_id == t["after_snapshot_id"]
