#!/usr/bin/env python3
"""Snapshot expiry at scale: Cryo vs Spark's ``expire_snapshots`` on identical copies of one table.

    . ~/.cache/cryo-peers/peers.env
    $PEERS_PYTHON benches/maintenance/expire.py [--snapshots 3000] [--keep 10] [--retain-last 5] [--runs 1] [--warm]

1. ``cargo build --release --example make_history --example expire`` (``CARGO_TARGET_DIR`` honoured).
2. ``make_history`` builds ``db.history`` with ``--snapshots`` snapshots through Cryo's commit layer (one
   small append per snapshot, every 10th an overwrite that removes an older file), in a sqlite catalog
   that Spark's ``JdbcCatalog`` opens too. The table is built once at ``<work>/live`` and kept as
   ``<work>/pristine`` (reused while ``--snapshots`` is the same; ``--rebuild`` forces it).
3. Spark: the pristine copy is put at ``<work>/live`` (the same path: Iceberg metadata holds absolute
   paths), a Spark session starts (JVM start and session creation are not timed), and only
   ``CALL fixtures.system.expire_snapshots(table => 'db.history', older_than => TIMESTAMP '<the
   --keep-th newest snapshot>', retain_last => N)`` is timed.
4. Cryo: the pristine copy is put back and the whole ``expire --execute`` process is timed (start,
   catalog, metadata, manifests, commit, deletes).
5. Both must leave the same snapshots and delete the same files (relative paths; Hadoop's ``.crc``
   checksum files aside). Printed: wall times, the ratio, snapshots and files deleted by each; the
   numbers are also written to ``<work>/expire-results.json``.
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

from spark_worker import SparkWorker  # noqa: E402

IDENT = "db.history"
SPARK_KIND = {
    "data": "deleted_data_files_count",
    "position_deletes": "deleted_position_delete_files_count",
    "equality_deletes": "deleted_equality_delete_files_count",
    "manifests": "deleted_manifest_files_count",
    "manifest_lists": "deleted_manifest_lists_count",
    "statistics": "deleted_statistics_files_count",
}


def target_dir() -> Path:
    return Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")


def files(root: Path) -> dict[str, int]:
    out = {}
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            if not n.endswith(".crc"):
                p = os.path.join(dirpath, n)
                out[os.path.relpath(p, root)] = os.path.getsize(p)
    return out


def metadata(live: Path) -> dict:
    import sqlite3

    con = sqlite3.connect(str(live / "catalog.db"))
    try:
        (loc,) = con.execute("SELECT metadata_location FROM iceberg_tables WHERE table_name = 'history'").fetchone()
    finally:
        con.close()
    path = loc.removeprefix("file://") if loc.startswith("file://") else loc.removeprefix("file:")
    return json.loads(Path(path).read_text())


def restore(pristine: Path, live: Path) -> None:
    if live.exists():
        shutil.rmtree(live)
    shutil.copytree(pristine, live, symlinks=True)


def restore_in_place(pristine: Path, live: Path) -> None:
    """Put the pristine table back under a running Spark session: the warehouse anew, the sqlite
    file rewritten in place (same inode, so the session's JDBC connections see the new content)."""
    shutil.rmtree(live / "warehouse")
    shutil.copytree(pristine / "warehouse", live / "warehouse", symlinks=True)
    shutil.copyfile(pristine / "catalog.db", live / "catalog.db")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--snapshots", type=int, default=3000)
    ap.add_argument("--keep", type=int, default=10, help="snapshots younger than the --keep-th newest are kept by age")
    ap.add_argument("--retain-last", type=int, default=5)
    ap.add_argument("--runs", type=int, default=1, help="timed runs per engine (each on a fresh copy); the best counts")
    ap.add_argument("--work", type=Path, default=target_dir() / "cryo-bench-expire")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--warm", action="store_true", help="also time a second CALL in the same Spark session (JIT warm), on a fresh copy")
    args = ap.parse_args()

    work: Path = args.work.resolve()
    live, pristine = work / "live", work / "pristine"
    subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", "cryo-core", "--example", "make_history", "--example", "expire"],
        cwd=REPO,
        check=True,
    )
    examples = target_dir() / "release" / "examples"
    params = {"snapshots": args.snapshots}
    stamp = pristine / "params.json"
    if args.rebuild or not stamp.exists() or json.loads(stamp.read_text()) != params:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        t = time.perf_counter()
        subprocess.run([str(examples / "make_history"), "--root", str(live), "--snapshots", str(args.snapshots)], check=True, stdout=subprocess.DEVNULL)
        print(f"built {args.snapshots} snapshots in {time.perf_counter() - t:.1f}s", flush=True)
        shutil.copytree(live, pristine, symlinks=True)
        stamp.write_text(json.dumps(params))
    restore(pristine, live)
    md = metadata(live)
    snaps = sorted(md["snapshots"], key=lambda s: (s["timestamp-ms"], s["sequence-number"]))
    older_than_ms = snaps[-args.keep]["timestamp-ms"]
    table_dir = live / "warehouse" / "db" / "history"
    before = files(table_dir)
    print(f"table: {len(snaps)} snapshots, {len(before)} files, {sum(before.values()) / 1e6:.0f} MB", flush=True)

    catalog_json = work / "catalog.json"
    catalog_json.write_text(json.dumps({"name": "fixtures", "properties": {"uri": f"sqlite:///{live / 'catalog.db'}", "warehouse": (live / "warehouse").as_uri()}}))
    literal = dt.datetime.fromtimestamp(older_than_ms / 1000, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]

    # ---- Spark -------------------------------------------------------------------------------------
    call = f"CALL fixtures.system.expire_snapshots(table => '{IDENT}', older_than => TIMESTAMP '{literal}', retain_last => {args.retain_last})"
    spark_times, spark_warm, spark_out, spark_deleted, spark_left = [], [], None, None, None
    for run in range(args.runs):
        restore(pristine, live)
        worker = SparkWorker(live / "catalog.db", live / "warehouse", log=work / f"spark-{run}.log", app_name="cryo-bench-expire")
        try:
            t = time.perf_counter()
            (spark_out,) = worker.sql(call)
            spark_times.append(time.perf_counter() - t)
            spark_deleted = set(before) - set(files(table_dir))
            spark_left = sorted(s["snapshot-id"] for s in metadata(live)["snapshots"])
            print(f"spark run {run + 1}: {spark_times[-1]:.2f}s {spark_out}", flush=True)
            if args.warm:
                restore_in_place(pristine, live)
                t = time.perf_counter()
                (warm_out,) = worker.sql(call)
                spark_warm.append(time.perf_counter() - t)
                assert warm_out == spark_out, (warm_out, spark_out)
                assert set(before) - set(files(table_dir)) == spark_deleted
                print(f"spark run {run + 1}, second CALL in the same session: {spark_warm[-1]:.2f}s", flush=True)
        finally:
            worker.close()

    # ---- Cryo --------------------------------------------------------------------------------------
    cryo_times, cryo_out, cryo_deleted, cryo_left = [], None, None, None
    for run in range(args.runs):
        restore(pristine, live)
        t = time.perf_counter()
        proc = subprocess.run(
            [str(examples / "expire"), "--catalog", str(catalog_json), "--table", IDENT, "--older-than-ms", str(older_than_ms), "--retain-last", str(args.retain_last), "--execute"],
            capture_output=True,
            text=True,
        )
        cryo_times.append(time.perf_counter() - t)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            return 1
        cryo_out = json.loads(proc.stdout.strip().splitlines()[-1])
        cryo_deleted = set(before) - set(files(table_dir))
        cryo_left = sorted(s["snapshot-id"] for s in metadata(live)["snapshots"])
        print(f"cryo run {run + 1}: {cryo_times[-1]:.2f}s ({cryo_out['duration_ms']} ms in expire) {cryo_out['deleted']}", flush=True)

    # ---- Compare -----------------------------------------------------------------------------------
    assert spark_out is not None and cryo_out is not None
    same_snapshots = spark_left == cryo_left
    same_files = spark_deleted == cryo_deleted
    counts_agree = all(cryo_out["deleted"][k]["files"] == spark_out[c] for k, c in SPARK_KIND.items())
    spark_s, cryo_s = min(spark_times), min(cryo_times)
    result = {
        "snapshots": len(snaps),
        "files_before": len(before),
        "older_than": literal,
        "retain_last": args.retain_last,
        "spark_call_s": round(spark_s, 3),
        "cryo_process_s": round(cryo_s, 3),
        "speedup": round(spark_s / cryo_s, 1),
        "spark_warm_call_s": round(min(spark_warm), 3) if spark_warm else None,
        "speedup_vs_warm_spark": round(min(spark_warm) / cryo_s, 1) if spark_warm else None,
        "snapshots_expired": {"spark": len(snaps) - len(spark_left), "cryo": len(cryo_out["expired_snapshot_ids"])},
        "files_deleted": {"spark": len(spark_deleted), "cryo": len(cryo_deleted)},
        "spark_counts": spark_out,
        "cryo_counts": {k: v["files"] for k, v in cryo_out["deleted"].items()},
        "same_remaining_snapshots": same_snapshots,
        "same_deleted_files": same_files,
        "counts_agree": counts_agree,
    }
    (work / "expire-results.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    warm = f" (warm Spark CALL {min(spark_warm):.2f}s -> {min(spark_warm) / cryo_s:.1f}x)" if spark_warm else ""
    print(
        f"\nexpire {len(snaps)} snapshots: Spark CALL {spark_s:.2f}s, Cryo process {cryo_s:.2f}s -> Cryo {spark_s / cryo_s:.1f}x faster{warm}; "
        f"deleted {len(cryo_deleted)} files / {result['snapshots_expired']['cryo']} snapshots (Spark: {len(spark_deleted)} / {result['snapshots_expired']['spark']})"
    )
    if not (same_snapshots and same_files and counts_agree):
        print("MISMATCH between Spark and Cryo", file=sys.stderr)
        if not same_files:
            print(f"only Spark: {sorted(spark_deleted - cryo_deleted)[:20]}\nonly Cryo: {sorted(cryo_deleted - spark_deleted)[:20]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
