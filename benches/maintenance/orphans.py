#!/usr/bin/env python3
"""Orphan-file listing: Cryo's dry run (the whole process) vs Spark's ``remove_orphan_files`` dry run
(the CALL alone, JVM start and session set-up excluded) on the same table, both finding the same set.

    . ~/.cache/cryo-peers/peers.env
    cargo build -p cryo-core --example orphans          # or --release, and pass --cryo-bin
    $PEERS_PYTHON benches/maintenance/orphans.py [--root DIR] [--files 5000] [--orphans 1000] [--cryo-bin PATH]

The table (PyIceberg ``SqlCatalog`` on sqlite, ``file://`` warehouse) is built fast: ``--files`` small
Parquet files written by pyarrow into 50 directories under the table's ``data/`` and registered with
PyIceberg's ``add_files`` in 10 commits (10 snapshots, 10 manifests); then ``--orphans`` unreferenced
files are planted in the same directories and under ``metadata/``, and every file gets an mtime ten days
back. Both engines use ``older_than`` = now − 2 days. Spark's CALL runs twice (cold, then warm); the
ratio is reported against both. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "py"))

import cryo_peers  # noqa: E402
from spark_worker import SparkWorker  # noqa: E402

UTC = dt.timezone.utc
DIRS = 50
COMMITS = 10


def _local(p: str) -> str:
    if p.startswith("file://"):
        p = p[len("file://") :]
    elif p.startswith("file:"):
        p = p[len("file:") :]
    return os.path.normpath(p)


def build(root: Path, files: int, orphans: int) -> tuple[Path, set[str]]:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    t0 = time.perf_counter()
    catalog = cryo_peers.sql_catalog(root / "catalog.db", root / "warehouse")
    catalog.create_namespace_if_not_exists("db")
    table = catalog.create_table(
        "db.many",
        schema=Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "v", StringType(), required=False)),
    )
    loc = Path(_local(table.metadata.location))
    paths = []
    for i in range(files):
        d = loc / "data" / f"bucket={i % DIRS:02d}"
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"part-{i:05d}.parquet"
        pq.write_table(pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64()), "v": pa.array([f"r{i}"] * 10)}), p)
        paths.append(f"file://{p}")  # as_uri() would percent-encode `=`, which PyIceberg does not decode
    step = -(-files // COMMITS)
    for c in range(COMMITS):
        table.add_files(paths[c * step : (c + 1) * step], check_duplicate_files=False)
    planted = set()
    sample = Path(_local(paths[0])).read_bytes()
    for i in range(orphans):
        if i % 10 == 9:
            p = loc / "metadata" / f"stray-{i:05d}-m0.avro"
        else:
            p = loc / "data" / f"bucket={i % DIRS:02d}" / f"orphan-{i:05d}.parquet"
        p.write_bytes(sample)
        planted.add(os.path.normpath(str(p)))
    old = (dt.datetime.now(UTC) - dt.timedelta(days=10)).timestamp()
    for d, _, fs in os.walk(loc):
        for f in fs:
            os.utime(os.path.join(d, f), (old, old))
    sys.stderr.write(f"built {files} referenced + {orphans} orphan files in {time.perf_counter() - t0:.1f} s\n")
    return loc, planted


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, default=REPO / "target" / "cryo-bench-orphans")
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--orphans", type=int, default=1000)
    ap.add_argument("--cryo-bin", type=Path, default=None)
    args = ap.parse_args()

    cryo_bin = args.cryo_bin
    if cryo_bin is None:
        subprocess.run(["cargo", "build", "-q", "-p", "cryo-core", "--example", "orphans"], cwd=REPO, check=True)
        cryo_bin = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target") / "debug" / "examples" / "orphans"
    root = args.root.resolve()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    loc, planted = build(root, args.files, args.orphans)
    older_than = (dt.datetime.now(UTC) - dt.timedelta(days=2)).strftime("%Y-%m-%d %H:%M:%S")

    cfg = root / "catalog.json"
    cfg.write_text(json.dumps({"name": "fixtures", "properties": {"uri": f"sqlite:///{root / 'catalog.db'}", "warehouse": (root / "warehouse").as_uri()}}))
    t = time.perf_counter()
    proc = subprocess.run(
        [str(cryo_bin), "--catalog", str(cfg), "--table", "db.many", "--older-than", older_than],
        capture_output=True,
        text=True,
        check=True,
    )
    cryo_s = time.perf_counter() - t
    out = json.loads(proc.stdout)
    cryo_found = {_local(o["path"]) for o in out["orphans"]}

    spark = SparkWorker(root / "catalog.db", root / "warehouse", log=root / "spark-worker.log", app_name="cryo-bench-orphans")
    try:
        calls = []
        for _ in range(2):
            r = spark.call("test_orphans_spark:spark_remove_orphans", catalog="fixtures", table="db.many", older_than=older_than, dry_run=True)
            calls.append(r)
    finally:
        spark.close()
    spark_found = [{_local(p) for p in c["files"]} for c in calls]

    assert cryo_found == planted, f"Cryo: {len(cryo_found)} found, {len(planted)} planted"
    assert all(s == cryo_found for s in spark_found), f"Spark found {[len(s) for s in spark_found]}, Cryo {len(cryo_found)}"
    cold, warm = (c["seconds"] for c in calls)
    report = {
        "files_listed": out["listed_files"],
        "referenced_files": out["referenced_files"],
        "snapshots": COMMITS,
        "orphans_found": len(cryo_found),
        "same_set": True,
        "cryo_binary": str(cryo_bin),
        "cryo_process_s": round(cryo_s, 3),
        "cryo_reported_ms": out["duration_ms"],
        "spark_call_cold_s": round(cold, 3),
        "spark_call_warm_s": round(warm, 3),
        "spark_session_start_s": spark.start_s,
        "speedup_vs_cold": round(cold / cryo_s, 1),
        "speedup_vs_warm": round(warm / cryo_s, 1),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
