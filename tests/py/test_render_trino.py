"""Every golden Trino statement (golden/render/trino/*.json) parses with trino-sql-validator as exactly
one statement, of the expected kind, on the intended table, with only the procedure arguments Trino's
Iceberg connector defines.

Run with the peers venv:  $PEERS_PYTHON -m pytest tests/py/test_render_trino.py
The golden files come from `CRYO_BLESS=1 cargo test -p cryo-core --test it render`.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cryo_peers  # noqa: E402

tsv = cryo_peers.require_module("trino_sql_validator")

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "golden" / "render" / "trino"
FILES = sorted(GOLDEN.glob("*.json"))

# The ALTER TABLE ... EXECUTE forms of Trino's Iceberg table procedures (OptimizeTableProcedure,
# ExpireSnapshotsTableProcedure, RemoveOrphanFilesTableProcedure, OptimizeManifestsTableProcedure), with
# airlift DataSize / Duration literals. Anything else is a rendering bug.
DATA_SIZE = r"'\d+(?:B|kB|MB|GB|TB|PB)'"
DURATION = r"'\d+(?:ms|s|m|h|d)'"
EXECUTE = re.compile(
    rf"(?:optimize\(file_size_threshold => {DATA_SIZE}\)(?: WHERE .+)?"
    r"|optimize_manifests"
    rf"|expire_snapshots\(retention_threshold => {DURATION}(?:, retain_last => [1-9]\d*)?\)"
    rf"|remove_orphan_files\(retention_threshold => {DURATION}\))",
    re.DOTALL,
)


def quote(part: str) -> str:
    """Trino's quoted identifier, written independently of the Rust renderer."""
    return '"' + part.replace('"', '""') + '"'


def target(rendered: dict, table: dict) -> str:
    # A nested namespace is one Trino schema named `a.b`.
    return ".".join([quote(rendered["engine_catalog"]), quote(".".join(table["namespace"])), quote(table["name"])])


def test_golden_files_exist():
    names = {p.stem for p in FILES}
    for case in ["operations", "predicates", "chunks", "hostile_identifiers", "version_gates_old", "retention_floors", "fixtures_events"]:
        assert case in names, f"golden/render/trino/{case}.json missing (CRYO_BLESS=1 cargo test -p cryo-core --test it render)"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_statement_is_one_valid_statement_on_its_target(path: Path):
    rendered = json.loads(path.read_text())
    assert rendered["dialect"] == "trino"
    count = 0
    for table in rendered["tables"]:
        tgt = target(rendered, table["table"])
        assert table["target"] == tgt
        for step in table["steps"]:
            for st in step["statements"]:
                sql = st["sql"]
                # jinja="reject": parse the text as is (no masking of `{{ … }}` in values).
                analysis = tsv.analyze_statements(sql, jinja="reject")
                assert analysis.validation.valid, f"{path.name}: {sql!r}: {analysis.validation.error}"
                assert analysis.validation.statement_count == 1, f"{path.name}: {sql!r}"
                assert len(analysis.statements) == 1
                kind = analysis.statements[0].kind
                if step["operation"] == "compute_statistics":
                    assert kind == "analyze", sql
                    assert sql == f"ANALYZE {tgt}" or sql.startswith(f"ANALYZE {tgt} WITH (columns = ARRAY["), sql
                else:
                    assert kind == "alter_table", sql
                    prefix = f"ALTER TABLE {tgt} EXECUTE "
                    assert sql.startswith(prefix), sql
                    assert EXECUTE.fullmatch(sql[len(prefix) :]), f"unexpected procedure form: {sql!r}"
                    if st["partitions"]:
                        assert " WHERE " in sql, "a partitioned chunk must never become a whole-table statement"
                count += 1
    assert count > 0 or all(t["skipped"] for t in rendered["tables"]), path.name


def test_what_trino_cannot_run_is_skipped_with_a_reason():
    ops = json.loads((GOLDEN / "operations.json").read_text())
    skipped = {(t["table"]["name"], s["operation"]): s["reason"] for t in ops["tables"] for s in t["skipped"]}
    assert "no procedure that rewrites position-delete files" in skipped[("orders", "rewrite_position_deletes")]
    assert "dry run" in skipped[("orders", "remove_orphan_files")]
    gates = json.loads((GOLDEN / "version_gates_old.json").read_text())
    reasons = [s["reason"] for t in gates["tables"] for s in t["skipped"]]
    assert any("optimize_manifests (added in Trino 470)" in r for r in reasons)
    assert any("retain_last" in r for r in reasons)
    floors = json.loads((GOLDEN / "retention_floors.json").read_text())
    statements = [st["sql"] for t in floors["tables"] for s in t["steps"] for st in s["statements"]]
    # Trino's default 7d floors: nothing shorter is ever rendered.
    for sql in statements:
        days = int(re.search(r"retention_threshold => '(\d+)d'", sql).group(1))
        assert days >= 7, sql


def test_validator_catches_a_naively_quoted_value():
    """The check has teeth: the same statement with the value pasted in unescaped is not one statement."""
    evil = "'; DROP TABLE x; --"
    naive = f"ALTER TABLE \"lake\".\"db\".\"t\" EXECUTE optimize WHERE \"c\" = '{evil}'"
    result = tsv.validate(naive, jinja="reject")
    assert not (result.valid and result.statement_count == 1)
    hostile = json.loads((GOLDEN / "hostile_identifiers.json").read_text())
    sqls = [st["sql"] for t in hostile["tables"] for s in t["steps"] for st in s["statements"]]
    assert any("'''; DROP TABLE x; --'" in s for s in sqls)
