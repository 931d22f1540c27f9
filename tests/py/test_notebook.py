"""The example notebook (examples/notebook.ipynb) runs top to bottom in a real Jupyter kernel.

Run with the package installed (see test_python_api.py) and the notebook peers (nbclient, nbformat,
ipykernel: scripts/peers.sh pins them):  $PEERS_PYTHON -m pytest tests/py/test_notebook.py

What is proved: every cell executes without an error on a fresh demo lake (built under a temporary
directory through ``$CRYO_NOTEBOOK_LAKE``), in a kernel running this interpreter; the rich outputs
are Cryo's HTML (grade badges in the fleet, the worst table's report, the plan and the run
receipts); the real run succeeded, and the grades shown at the end are better than at the start.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cryo_peers  # noqa: E402

pytest.importorskip("cryo", reason="install the package first: $PEERS_PYTHON -m maturin develop -m cryo-py/Cargo.toml")
nbformat = cryo_peers.require_module("nbformat")
nbclient = cryo_peers.require_module("nbclient")
cryo_peers.require_module("ipykernel")

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "notebook.ipynb"
ROW = re.compile(r'class="cryo-fleet-row" data-table="([^"]+)" data-grade="([A-F])" data-score="(\d+)"')


def _html(cell) -> str:
    return "".join(o.get("data", {}).get("text/html", "") for o in cell.get("outputs", []))


def _text(cell) -> str:
    parts = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            parts.append(o.get("text", ""))
        else:
            parts.append(o.get("data", {}).get("text/plain", ""))
    return "".join(parts)


def _cell(nb, needle: str):
    found = [c for c in nb.cells if c.cell_type == "code" and needle in c.source]
    assert len(found) == 1, f"{len(found)} code cells contain {needle!r}"
    return found[0]


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("notebook")
    # A kernel spec for this very interpreter (whatever "python3" means elsewhere on the machine).
    spec = tmp / "jupyter" / "kernels" / "cryo-test"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "cryo tests",
                "language": "python",
                "env": {"CRYO_NOTEBOOK_LAKE": str(tmp / "work")},
            }
        )
    )
    mp = pytest.MonkeyPatch()
    mp.setenv("JUPYTER_PATH", str(tmp / "jupyter"))
    try:
        nb = nbformat.read(NOTEBOOK, as_version=4)
        client = nbclient.NotebookClient(
            nb, timeout=900, kernel_name="cryo-test", resources={"metadata": {"path": str(tmp)}}
        )
        client.execute()
    finally:
        mp.undo()
    return nb, tmp / "work"


def test_notebook_runs_without_errors(executed):
    nb, work = executed
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.get("execution_count") for c in code), "a cell did not run"
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == []
    # It worked where it was told to (and nowhere else).
    assert (work / "lake" / "demo-lake.json").exists() and (work / "receipts.jsonl").stat().st_size > 0


def test_notebook_shows_cryo_html(executed):
    nb, _ = executed
    fleet = _html(_cell(nb, "fleet = lake.catalog.scan_fleet()"))
    grades = _html(_cell(nb, "grades = cryo.grade_fleet(fleet)"))
    worst = _html(_cell(nb, "worst = grades.worst"))
    plan = _html(_cell(nb, "plan = lake.catalog.plan(fleet)"))
    dry = _html(_cell(nb, "dry = lake.catalog.run(plan)"))
    real = _html(_cell(nb, "outcome = lake.catalog.run(plan, dry_run=False"))
    after = _html(_cell(nb, "after = cryo.grade_fleet("))
    assert fleet == grades  # a fleet scan displays as its grades
    for fragment in (fleet, worst, plan, after):
        assert 'class="cryo-grade cryo-grade-' in fragment
    assert 'class="cryo-grade cryo-grade-F"' in fleet and 'data-grade="F"' in worst
    assert 'class="cryo cryo-health-report" data-table="lake.clickstream"' in worst
    assert worst.count('class="cryo-finding"') >= 3 and 'class="cryo-bar"' in worst
    assert 'class="cryo cryo-plan"' in plan and 'class="cryo-step"' in plan
    assert 'data-status="dry_run"' in dry and 'data-status="succeeded"' not in dry
    assert 'data-status="succeeded"' in real and 'data-status="failed"' not in real
    # The SQL renderings and the receipts as Arrow / DuckDB.
    assert "ALTER TABLE" in _text(_cell(nb, 'plan.render("trino"'))
    assert "rewrite_data_files" in _text(_cell(nb, 'plan.render("spark"'))
    assert "pyarrow.Table" in _text(_cell(nb, "receipts = pa.table(outcome.receipts())"))
    assert "lake.clickstream" in _text(_cell(nb, "duckdb.sql("))
    # Graded again: the worst table is better, and none is worse.
    before = {t: int(s) for t, _, s in ROW.findall(grades)}
    again = {t: int(s) for t, _, s in ROW.findall(after)}
    assert set(before) == set(again) and len(before) >= 5
    assert again["lake.clickstream"] > before["lake.clickstream"]
    assert all(again[t] >= before[t] for t in before), (before, again)
    comparison = _text(_cell(nb, "after = cryo.grade_fleet("))
    assert "lake.clickstream" in comparison and "->" in comparison
