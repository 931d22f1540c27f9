#!/usr/bin/env python3
"""Raw per-partition rewrites of the compaction benchmark table by pyarrow and DuckDB (and,
with ``--spark``, Spark's ``rewrite_data_files``), for comparison with Cryo's engine.

Run after ``cargo test --release --test it compact_bench -- --ignored --nocapture`` has left
the table in ``target/cryo-bench``::

    . ~/.cache/cryo-peers/peers.env
    $PEERS_PYTHON tests/py/bench_rewrite_peers.py target/cryo-bench [--spark]

pyarrow and DuckDB read every data file of a partition and write one zstd(3) file, with no
Iceberg commit and no deletes applied (raw rewrites). Spark commits to the table (run it last:
the next Cryo run regenerates the table). Reported: MB/s of input, per contender.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cryo_peers  # noqa: E402


def partitions(root: Path) -> dict[str, list[str]]:
    data = root / "warehouse" / "db" / "fragmented" / "data"
    out: dict[str, list[str]] = {}
    for d in sorted(p for p in data.iterdir() if p.is_dir()):
        files = sorted(f for f in glob.glob(str(d / "*.parquet")) if "deletes" not in os.path.basename(f))
        if files:
            out[d.name] = files
    return out


def bench_pyarrow(parts: dict[str, list[str]], out: Path) -> float:
    import pyarrow.parquet as pq

    t = time.perf_counter()
    for name, files in parts.items():
        table = pq.read_table(files, partitioning=None)
        pq.write_table(table, out / f"{name}.parquet", compression="zstd", compression_level=3)
    return time.perf_counter() - t


def bench_duckdb(parts: dict[str, list[str]], out: Path) -> float:
    import duckdb

    con = duckdb.connect()
    t = time.perf_counter()
    for name, files in parts.items():
        con.execute(
            f"COPY (SELECT * FROM read_parquet(?)) TO '{out / (name + '.parquet')}' "
            "(FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 3)",
            [files],
        )
    elapsed = time.perf_counter() - t
    con.close()
    return elapsed


def bench_spark(root: Path) -> float:
    spark = cryo_peers.spark_session(root / "catalog.db", root / "warehouse", catalog_name="bench", memory="2g")
    spark.sql("SELECT count(*) FROM bench.db.fragmented").collect()  # warm up: JVM, catalog, classes
    t = time.perf_counter()
    spark.sql(
        "CALL bench.system.rewrite_data_files(table => 'db.fragmented', options => map("
        "'target-file-size-bytes','134217728','min-input-files','2'))"
    ).collect()
    elapsed = time.perf_counter() - t
    spark.stop()
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", type=Path)
    ap.add_argument("--spark", action="store_true")
    args = ap.parse_args()
    root = args.root.resolve()
    parts = partitions(root)
    size = sum(os.path.getsize(f) for fs in parts.values() for f in fs)
    n = sum(len(fs) for fs in parts.values())
    print(f"input: {len(parts)} partitions, {n} files, {size / 1e6:.1f} MB")
    for name, fn in [("pyarrow", bench_pyarrow), ("duckdb", bench_duckdb)]:
        out = Path(tempfile.mkdtemp(prefix=f"cryo-bench-{name}-"))
        try:
            secs = fn(parts, out)
            written = sum(f.stat().st_size for f in out.iterdir())
        finally:
            shutil.rmtree(out, ignore_errors=True)
        print(f"{name}: {secs:.2f}s = {size / 1e6 / secs:.1f} MB/s input, {written / 1e6:.1f} MB out")
    if args.spark:
        secs = bench_spark(root)
        print(f"spark rewrite_data_files: {secs:.2f}s = {size / 1e6 / secs:.1f} MB/s input (JVM start excluded)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
