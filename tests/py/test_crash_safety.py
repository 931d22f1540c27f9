"""Crash safety (issue 8, point 2): Cryo killed with SIGKILL at random points of a compaction, a
snapshot expiry and an orphan clean-up never costs the table a row, and whatever the killed run left
behind is found by the orphan finder and removable.

Run with the peers venv:  $PEERS_PYTHON -m pytest tests/py/test_crash_safety.py -s

Cryo runs as its command-line examples (``examples/compact.rs``, ``expire.rs``, ``orphans.rs``, built
here with ``cargo build -p cryo-core --example …``; ``CRYO_EXAMPLES_DIR`` names a directory holding
other builds, e.g. ``target/release/examples``). No test hook in Cryo is used: the kill lands after a
seeded random delay from the process start.

The table (``db.events``, PyIceberg ``SqlCatalog`` on sqlite, ``file://`` warehouse) is written by
PyIceberg: 40 appends over 6 ``region`` partitions, then a delete that drops the files of the first
30 appends (what expiry has to delete). One partition holds ~11 MB of incompressible text, so its
compacted file spans more than one of the compactor's 8 MiB direct writes (a kill can leave it
half-written at its final name); metadata files still go through ``object_store``'s staging files.
Its rows' fingerprint (``cryo_peers.fingerprint``) is computed from the generator and checked
against PyIceberg and DuckDB before anything runs. The table directory and the catalog are saved
once and restored before every trial at the same path.

A trial, for each of compaction, expiry (``--retain-last 1``, everything older than now) and
orphan removal (of 1500 planted orphans ten days old):

1. start the operation, sleep ``D * (k + u) / N`` (``D`` the median of three uninterrupted runs, ``u``
   seeded uniform, ``k`` the trial, so the kills spread over the whole run), SIGKILL it; a run that
   finished first is retried with half the delay (and counted apart);
2. the kill landed before the commit (catalog still at the template's metadata) or after it; the
   table reads with PyIceberg and DuckDB to the unchanged fingerprint, and every file its metadata
   references is on disk;
3. the files on disk that no metadata references (computed here with PyIceberg, every file counted:
   hidden ones and upload staging files too) are exactly what Cryo's orphan finder reports in a dry
   run with a window that includes the files just written (``--older-than-ms`` a minute ahead,
   ``--allow-short-retention``); every file the killed run wrote and did not commit is among them;
4. a real orphan run removes them all, after which the directory holds exactly the referenced
   files, and both readers still read the same rows;
5. the operation runs again, uninterrupted: it completes normally, the rows are unchanged, and it
   leaves no unreferenced file.

``CRYO_CRASH_KILLS`` (default 10) kills per operation, ``CRYO_CRASH_SEED`` the seed. The counts
(kills before / after the commit, orphans found) are printed at the end (``-s``) and written to
``<tmp>/crash-report.json``.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import cryo_peers  # noqa: E402

KILLS = int(os.environ.get("CRYO_CRASH_KILLS") or 10)
SEED = int(os.environ.get("CRYO_CRASH_SEED") or 20260308)
IDENT = "db.events"
REGIONS = ["eu", "us", "ap", "sa", "af", "big"]
APPENDS = 40
KEPT_APPENDS = 10  # the delete drops the files of every earlier append (expiry's work)
DELETED_BELOW = (APPENDS - KEPT_APPENDS) * 240
PLANTED_ORPHANS = 1500
UTC = dt.timezone.utc
REPORT: dict[str, dict] = {}


def _local(uri: str) -> str:
    s = str(uri)
    if s.startswith("file://"):
        s = s[len("file://") :]
    elif s.startswith("file:"):
        s = s[len("file:") :]
    return os.path.normpath(s)


def _now_ms() -> int:
    return int(time.time() * 1000)


# ================================================================================================
# The table
# ================================================================================================


def _rows(first: int, rng: random.Random, schema: pa.Schema) -> pa.Table:
    """240 rows: 40 per region; in the appends the delete keeps, the ``big`` region's notes are
    ~37 KB of random text each (~11 MB in all)."""
    ids = list(range(first, first + 240))
    region = [REGIONS[i % len(REGIONS)] for i in ids]
    notes = []
    for i, r in zip(ids, region):
        if r == "big" and i >= DELETED_BELOW:
            notes.append(base64.b64encode(rng.randbytes(28_000)).decode())
        elif i % 9 == 0:
            notes.append(None)
        else:
            notes.append(f"n{i}-{rng.randrange(1 << 40):x}")
    return pa.Table.from_pydict(
        {
            "id": ids,
            "region": region,
            "ts": [dt.datetime(2026, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=37 * i) for i in ids],
            "amount": [round(rng.random() * 1000, 2) for _ in ids],
            "note": notes,
        },
        schema=schema,
    )


def build_table(work: Path) -> pa.Table:
    """Create and fill the table under ``work``; return the rows it must read back to."""
    from pyiceberg.expressions import LessThan
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestamptzType

    (work / "warehouse").mkdir(parents=True)
    catalog = cryo_peers.sql_catalog(work / "catalog.db", work / "warehouse", name="crash")
    catalog.create_namespace("db")
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "region", StringType(), required=True),
        NestedField(3, "ts", TimestamptzType(), required=True),
        NestedField(4, "amount", DoubleType()),
        NestedField(5, "note", StringType()),
    )
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"))
    table = catalog.create_table(IDENT, schema=schema, partition_spec=spec)
    arrow_schema = table.schema().as_arrow()
    rng = random.Random(SEED)
    parts = []
    for b in range(APPENDS):
        batch = _rows(b * 240, rng, arrow_schema)
        parts.append(batch)
        table.append(batch)
    table.delete(LessThan("id", DELETED_BELOW))
    catalog.engine.dispose()
    rows = pa.concat_tables(parts)
    import pyarrow.compute as pc

    return rows.filter(pc.greater_equal(rows["id"], DELETED_BELOW))


def plant_orphans(table_dir: Path, rng: random.Random) -> int:
    """Old files no metadata references: in partition directories, a new directory, metadata/."""
    old = time.time() - 10 * 86400
    n = 0
    dirs = [table_dir / "data" / f"region={r}" for r in REGIONS] + [table_dir / "data" / "stray", table_dir / "metadata"]
    for i in range(PLANTED_ORPHANS):
        d = dirs[i % len(dirs)]
        d.mkdir(parents=True, exist_ok=True)
        name = f"orphan-{i:05d}.avro" if d.name == "metadata" else f"00000-0-orphan-{i:05d}.parquet"
        p = d / name
        p.write_bytes(rng.randbytes(64 + i % 512))
        os.utime(p, (old, old))
        n += 1
    return n


# ================================================================================================
# The environment: binaries, template, readers, file sets
# ================================================================================================


class Lake:
    def __init__(self, root: Path, bins: Path) -> None:
        self.root = root
        self.work = root / "work"
        self.bins = bins
        self.catalog_json = root / "catalog.json"
        self.catalog_json.write_text(
            json.dumps(
                {
                    "name": "crash",
                    "properties": {"uri": f"sqlite:///{self.work / 'catalog.db'}", "warehouse": (self.work / "warehouse").as_uri()},
                }
            )
        )
        self.table_dir = self.work / "warehouse" / "db" / "events"
        self.templates: dict[str, Path] = {}
        self.template_files: dict[str, dict[str, int]] = {}
        self.template_location: dict[str, str] = {}
        self.template_snapshots: dict[str, set[int]] = {}
        self.expected: cryo_peers.Fingerprint | None = None
        self._duck = None

    # ---- templates -------------------------------------------------------------------------
    def save(self, name: str) -> None:
        dest = self.root / f"template-{name}"
        shutil.copytree(self.work, dest, symlinks=True)
        self.templates[name] = dest
        self.template_files[name] = self.files()
        self.template_location[name] = self.metadata_location()
        self.template_snapshots[name] = set(snapshots_now(self))

    def restore(self, name: str) -> None:
        shutil.rmtree(self.work)
        shutil.copytree(self.templates[name], self.work, symlinks=True)  # copy2: mtimes kept

    # ---- catalog and readers --------------------------------------------------------------------
    def metadata_location(self) -> str:
        con = sqlite3.connect(str(self.work / "catalog.db"), timeout=30)
        try:
            (loc,) = con.execute(
                "SELECT metadata_location FROM iceberg_tables WHERE table_namespace = 'db' AND table_name = 'events'"
            ).fetchone()
        finally:
            con.close()
        return loc

    def duck(self):
        if self._duck is None:
            self._duck = cryo_peers.duckdb_connect()
        return self._duck

    def read(self) -> dict[str, cryo_peers.Fingerprint]:
        loc = self.metadata_location()
        duck = self.duck().execute("SELECT * FROM iceberg_scan(?)", [_local(loc)])
        duck_rows = duck.to_arrow_table() if hasattr(duck, "to_arrow_table") else duck.fetch_arrow_table()
        return {
            "pyiceberg": cryo_peers.fingerprint(cryo_peers.read_pyiceberg(metadata_location=loc)),
            "duckdb": cryo_peers.fingerprint(duck_rows),
        }

    def assert_rows(self, when: str) -> None:
        got = self.read()
        bad = {k: str(v) for k, v in got.items() if v != self.expected}
        assert not bad, f"{when}: rows changed (want {self.expected}): {bad}"

    # ---- files ----------------------------------------------------------------------------------
    def files(self) -> dict[str, int]:
        """Every regular file (or symlink) under the table directory, hidden and staging files too."""
        out = {}
        for dirpath, _dirs, names in os.walk(self.table_dir):
            for n in names:
                p = os.path.join(dirpath, n)
                out[os.path.normpath(p)] = os.lstat(p).st_size
        return out

    def referenced(self) -> set[str]:
        """What the current metadata references, read with PyIceberg: metadata files (current and
        logged), every snapshot's manifest list and manifests, their live entries, statistics."""
        from pyiceberg.table import StaticTable

        loc = self.metadata_location()
        t = StaticTable.from_metadata(loc)
        md = t.metadata
        refs = {loc, *(e.metadata_file for e in md.metadata_log)}
        manifests = {}
        for s in md.snapshots:
            refs.add(s.manifest_list)
            for m in s.manifests(t.io):
                manifests[m.manifest_path] = m
        for path, m in manifests.items():
            refs.add(path)
            for e in m.fetch_manifest_entry(t.io, discard_deleted=True):
                refs.add(e.data_file.file_path)
        for st in list(md.statistics) + list(getattr(md, "partition_statistics", []) or []):
            refs.add(st.statistics_path)
        return {_local(r) for r in refs}

    # ---- Cryo -----------------------------------------------------------------------------------
    def command(self, op: str, *extra: str) -> list[str]:
        base = ["--catalog", str(self.catalog_json), "--table", IDENT]
        if op == "compact":
            return [str(self.bins / "compact"), *base, *extra]
        if op == "expire":
            return [str(self.bins / "expire"), *base, "--older-than-ms", str(_now_ms()), "--retain-last", "1", "--execute", *extra]
        if op == "orphans":  # the default window (3 days): the planted orphans are 10 days old
            return [str(self.bins / "orphans"), "remove", *base, "--delete", *extra]
        raise AssertionError(op)

    def run(self, argv: list[str], what: str) -> dict:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{what} failed ({proc.returncode}): {proc.stderr[-3000:]}"
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def find_orphans(self, delete: bool) -> dict:
        """The orphan finder with a window that includes every file written so far."""
        argv = [str(self.bins / "orphans"), "remove", "--catalog", str(self.catalog_json), "--table", IDENT]
        argv += ["--older-than-ms", str(_now_ms() + 60_000), "--allow-short-retention"]
        if delete:
            argv.append("--delete")
        return self.run(argv, "orphan finder")


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    root = tmp_path_factory.mktemp("crash")
    t0 = time.monotonic()
    bins = cryo_peers.cargo_examples("compact", "expire", "orphans")
    build_s = time.monotonic() - t0
    lake = Lake(root, bins)
    rows = build_table(lake.work)
    lake.expected = cryo_peers.fingerprint(rows)
    lake.assert_rows("as PyIceberg wrote it")
    assert lake.referenced() == set(lake.files()), "the fresh table should have no unreferenced file"
    lake.save("table")
    plant_orphans(lake.table_dir, random.Random(SEED + 1))
    lake.save("orphans")
    REPORT["setup"] = {
        "kills_per_operation": KILLS,
        "seed": SEED,
        "table_files": len(lake.template_files["table"]),
        "table_bytes": sum(lake.template_files["table"].values()),
        "planted_orphans": PLANTED_ORPHANS,
        "cargo_build_s": round(build_s, 1),
        "setup_s": round(time.monotonic() - t0, 1),
    }
    t_module = time.monotonic()
    try:
        yield lake
    finally:
        REPORT["setup"]["tests_s"] = round(time.monotonic() - t_module, 1)
        (root / "crash-report.json").write_text(json.dumps(REPORT, indent=1))
        sys.stderr.write(f"\ncrash safety: {json.dumps(REPORT)}\n")


# ================================================================================================
# The trials
# ================================================================================================


def kill_at(argv: list[str], delay: float) -> tuple[bool, float]:
    """Start ``argv``, SIGKILL it ``delay`` seconds later; ``(killed, seconds it ran)``."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = t0 + delay
    while (left := deadline - time.monotonic()) > 0 and proc.poll() is None:
        time.sleep(min(left, 0.002))
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    _out, err = proc.communicate(timeout=600)
    # The process may have exited between the poll and the signal: the exit code tells.
    killed = proc.returncode == -signal.SIGKILL
    assert killed or proc.returncode == 0, f"the run failed on its own ({proc.returncode}): {err.decode()[-3000:]}"
    return killed, time.monotonic() - t0


def snapshots_now(lake: Lake) -> list[int]:
    md = json.loads(Path(_local(lake.metadata_location())).read_text())
    return [s["snapshot-id"] for s in md.get("snapshots", [])]


def crash_trials(lake: Lake, op: str, template: str, check_later) -> dict:
    rng = random.Random(f"{SEED}-{op}")
    # Uninterrupted runs: they work, and their (median) duration spreads the kills.
    durations = []
    for _ in range(3):
        lake.restore(template)
        t0 = time.monotonic()
        full = lake.run(lake.command(op), f"uninterrupted {op}")
        durations.append(time.monotonic() - t0)
    duration = sorted(durations)[1]
    full_commits = len(set(snapshots_now(lake)) - lake.template_snapshots[template])
    stats = {
        "uninterrupted_run_s": round(duration, 3),
        "kills": 0,
        "finished_before_kill": 0,
        "before_commit": 0,
        "after_commit": 0,
        **({"after_some_commits": 0} if op == "compact" else {}),
        **({"orphans_none_deleted": 0, "orphans_some_deleted": 0, "orphans_all_deleted": 0} if op == "orphans" else {}),
        "orphans_found": 0,
        "orphans_per_kill": [],
        "uncommitted_files_written": 0,
        "staging_files_left": 0,
    }
    t_trials = time.monotonic()
    for k in range(KILLS):
        delay = duration * (k + rng.random()) / KILLS
        for _attempt in range(4):
            lake.restore(template)
            killed, _ran = kill_at(lake.command(op), delay)
            if killed:
                break
            stats["finished_before_kill"] += 1
            delay /= 2
        stats["kills"] += killed

        # (2) committed or not, the rows are the same and nothing referenced is gone.
        # (A run that finished first is counted as such; the checks below run all the same.)
        if killed and lake.metadata_location() == lake.template_location[template]:
            stats["before_commit"] += 1
        elif killed:
            stats["after_commit"] += 1
            if op == "compact" and len(set(snapshots_now(lake)) - lake.template_snapshots[template]) < full_commits:
                stats["after_some_commits"] += 1  # a compaction commits its groups in batches
        what = f"{op} kill {k} (delay {delay:.3f}s)"
        lake.assert_rows(f"after {what}")
        on_disk = lake.files()
        refs = lake.referenced()
        missing = refs - set(on_disk)
        assert not missing, f"after {what}: referenced files are gone: {sorted(missing)[:5]}"

        # (3) what nobody references is what the orphan finder reports.
        unreferenced = set(on_disk) - refs
        before = lake.template_files[template]
        written = {p for p, size in on_disk.items() if before.get(p) != size}
        uncommitted = written - refs
        stats["uncommitted_files_written"] += len(uncommitted)
        stats["staging_files_left"] += sum(1 for p in uncommitted if "#" in os.path.basename(p))
        dry = lake.find_orphans(delete=False)
        found = {_local(o["path"]) for o in dry["orphans"]}
        assert found == unreferenced, (
            f"after {what}: the orphan finder disagrees with the metadata: "
            f"not found {sorted(unreferenced - found)[:5]}, wrongly found {sorted(found - unreferenced)[:5]}"
        )
        assert uncommitted <= found
        assert dry["deleted_files"] == 0 and set(lake.files()) == set(on_disk), "a dry run deleted something"
        stats["orphans_found"] += len(found)
        if op == "orphans" and killed:
            key = {0: "all", PLANTED_ORPHANS: "none"}.get(len(found), "some")
            stats[f"orphans_{key}_deleted"] += 1
        stats["orphans_per_kill"].append(len(found))

        # (4) they can be removed, and the table still reads the same.
        real = lake.find_orphans(delete=True)
        assert real["failures"] == [] and real["deleted_files"] == len(found), real
        assert set(lake.files()) == refs, f"after removing the orphans of {what}"
        lake.assert_rows(f"after removing the orphans of {what}")

        # (5) a later run completes normally and leaves nothing behind.
        later = lake.run(lake.command(op), f"the run after {what}")
        check_later(later, what)
        lake.assert_rows(f"after the run that followed {what}")
        left = set(lake.files()) - lake.referenced()
        assert not left, f"the run after {what} left unreferenced files: {sorted(left)[:5]}"
    stats["trials_s"] = round(time.monotonic() - t_trials, 1)
    stats["uninterrupted_outcome"] = {k: full[k] for k in ("committed_groups", "files_in", "files_out") if k in full}
    REPORT[op] = stats
    assert stats["kills"] >= KILLS * 3 // 4, f"too few kills landed while {op} was running: {stats}"
    return stats


def test_kill_compaction(lake):
    def later_ok(out: dict, what: str) -> None:
        assert out["failed_groups"] == 0 and out["conflicted_groups"] == 0, f"after {what}: {out}"

    crash_trials(lake, "compact", "table", later_ok)


def test_kill_expiry(lake):
    def later_ok(out: dict, what: str) -> None:
        assert out["failures"] == [] and out["cleanup_error"] is None, f"after {what}: {out}"

    crash_trials(lake, "expire", "table", later_ok)


def test_kill_orphan_cleanup(lake):
    def later_ok(out: dict, what: str) -> None:
        # Everything was removed already by the finder's real run: the later run finds nothing.
        assert out["failures"] == [] and out["orphans"] == [], f"after {what}: {out}"

    stats = crash_trials(lake, "orphans", "orphans", later_ok)
    # No commit is involved: every kill leaves the metadata as it was.
    assert stats["after_commit"] == 0, stats
