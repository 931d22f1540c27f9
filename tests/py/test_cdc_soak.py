"""Live-CDC soak, short version (issue 8, point 1): ``benches/soak/cdc_soak.py`` for 2.5 minutes.

Run with the peers venv:  $PEERS_PYTHON -m pytest tests/py/test_cdc_soak.py -s

Spark (MERGE INTO and DELETE, merge-on-read) and PyIceberg (append, overwrite with a filter) commit to
one ``day(ts)``-partitioned v2 table every 3 s, taking turns; Cryo, through the Python package,
compacts (deletes applied), rewrites position deletes, rewrites manifests and expires snapshots every
2 s, with a 20 s quiet period (``quiet_period_ms``: partitions a commit changed within it are left
alone) and a commit fence (``cryo.CommitFence``: the writers hold it for each whole operation, and every
Cryo commit is made under it). Simulated days last 30 s, so partitions cool down
during the run, and 10% of the writers' operations also change two rows of an older day. Asserted:

- every Cryo job ends committed, with nothing to do, or cleanly aborted by validation with its
  receipt (the error names the conflict); none failed;
- no writer commit failed, because of Cryo or for any other reason: not even an operation that
  also changed a cold day (older than yesterday) while Cryo was compacting that partition — the race
  a quiet period alone cannot close (it failed one writer in about three runs before the fence). With
  the fence, that operation either commits before Cryo's commit (whose validation then aborts the
  group, with its receipt) or starts after it;
- PyIceberg, DuckDB and Spark read exactly the rows the writers' logs imply (fingerprints equal the
  model's): zero keys lost, resurrected, stale or duplicated;
- Cryo did work during the soak, and after the final round (once the writers stopped) the table has
  fewer data files than it started with and no delete file.

Without the quiet period the same soak fails Spark MERGEs (``Cannot commit, missing data files``,
``Missing required files to delete``): see benches/soak/README.md for the figures and the
contrast with Spark's own ``rewrite_data_files`` on the same cadence. ``CRYO_SOAK_MINUTES`` changes
the length; the report is printed (``-s``) and kept in ``<tmp>/soak/report.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import cryo_peers  # noqa: E402

cryo = pytest.importorskip("cryo", reason="install the package first: $PEERS_PYTHON -m maturin develop -m cryo-py/Cargo.toml")
MINUTES = os.environ.get("CRYO_SOAK_MINUTES") or "2.5"


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    env = cryo_peers.peers_env()
    if not env.get("SPARK_JARS") or not env.get("DUCKDB_ICEBERG_EXT"):
        if os.environ.get("CRYO_REQUIRE_PEERS") == "1":
            pytest.fail("the soak needs Spark and DuckDB from scripts/peers.sh (CRYO_REQUIRE_PEERS=1)")
        pytest.skip("Spark's Iceberg runtime or DuckDB's iceberg extension is not installed (scripts/peers.sh)")
    out = tmp_path_factory.mktemp("cdc") / "soak"
    cmd = [
        sys.executable,
        str(REPO / "benches" / "soak" / "cdc_soak.py"),
        "--out", str(out),
        "--minutes", MINUTES,
        "--maintainer", "cryo",
        "--quiet-seconds", "20",
        "--fence",
        "--cadence", "3",
        "--maint-cadence", "2",
        "--batch-rows", "80",
        "--day-seconds", "30",
        "--retention-seconds", "60",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    print(proc.stdout[-6000:])
    assert proc.returncode == 0, proc.stderr[-6000:]
    return json.loads((out / "report.json").read_text())


def test_every_cryo_job_ends_committed_or_cleanly_aborted(report):
    totals = report["maintainer_totals"]
    assert totals.get("failed", 0) == 0, report["maintainer_jobs"]
    assert totals.get("committed", 0) > 0, report["maintainer_jobs"]
    for name, job in report["maintainer_jobs"].items():
        for ex in job.get("examples", []):
            # an abort is a validation conflict, with its receipt
            assert ex["status"] in ("aborted", "partly_aborted"), (name, ex)
            assert ex.get("code") == "commit_conflict" or ex.get("conflicts"), (name, ex)
    assert all(s in ("committed", "nothing_to_do") for s in report["final_round"].values()), report["final_round"]


def test_expiries_keep_up_under_the_fence(report):
    # Each commit under the fence stages on the head the writers in flight left, so expiries are not
    # starved by writers committing every second or two (before: 1 of 45 committed in 20 minutes).
    expire = report["maintainer_jobs"]["expire"]
    assert expire.get("committed", 0) > 0, expire
    assert expire.get("aborted", 0) < expire["committed"], expire


def test_no_writer_fails(report):
    for name, w in report["writers"].items():
        assert w["succeeded"] > 10, (name, w)
        assert w["failed"] == 0, (name, w["failed_by_cause"], w["failure_examples"])


def test_every_reader_reads_the_writers_rows(report):
    v = report["verification"]
    for reader in ("pyiceberg", "duckdb", "spark"):
        assert v["reads"][reader].get("equal") is True, (reader, v["reads"][reader], v["expected"])
    assert v["keys_lost"] == 0 and v["keys_resurrected"] == 0 and v["keys_stale"] == 0, v["examples"]
    assert v["duplicate_rows"] == 0


def test_cryo_kept_the_table_in_shape(report):
    c = report["compaction"]
    assert c["groups"].get("committed", 0) > 0 and c["files_in"] > c["files_out"], c
    assert c["partitions_skipped_quiet"] > 0, c
    before, after = report["table_before"], report["table_after_final_round"]
    assert after["data_files"] < before["data_files"], (before, after)
    assert after["delete_files"] == 0, after
