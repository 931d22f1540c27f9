#!/usr/bin/env python3
"""Raw per-partition rewrites (no Iceberg commit, deletes NOT applied): DuckDB ``COPY`` or pyarrow.

    $PEERS_PYTHON benches/compaction/raw_rewrite.py --engine duckdb|pyarrow --input parts.json --out DIR

``parts.json`` maps a partition name to its data files (the table's live data files, listed by the
harness beforehand). Each partition becomes one zstd(3) Parquet file ``DIR/part=<p>.parquet``.

- DuckDB: ``COPY (SELECT * FROM read_parquet([...])) TO ... (FORMAT parquet, COMPRESSION zstd,
  COMPRESSION_LEVEL 3)``, one partition after another, DuckDB's own threads (= cores),
  ``preserve_insertion_order = false`` (a raw rewrite needs no order; it lets COPY go parallel).
- pyarrow: ``pq.read_table(files)`` (threaded read) then ``pq.write_table(..., compression='zstd',
  compression_level=3)``; ``--threads`` partitions at once (default: cores) so that the
  single-threaded encoder of one file does not leave the other core idle.

Prints JSON last: seconds and CPU seconds (all threads) of the rewrite loop only (interpreter start
and imports excluded).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ZSTD_LEVEL = 3


def rewrite_duckdb(parts: dict[str, list[str]], out: Path) -> float:
    import duckdb

    con = duckdb.connect()
    con.execute("SET preserve_insertion_order = false")
    t = time.perf_counter()
    for name, files in parts.items():
        con.execute(
            f"COPY (SELECT * FROM read_parquet(?)) TO '{out / f'part={name}.parquet'}' "
            f"(FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL {ZSTD_LEVEL})",
            [files],
        )
    seconds = time.perf_counter() - t
    con.close()
    return seconds


def rewrite_pyarrow(parts: dict[str, list[str]], out: Path, threads: int) -> float:
    import pyarrow.parquet as pq

    def one(item: tuple[str, list[str]]) -> None:
        name, files = item
        table = pq.read_table(files, partitioning=None)
        pq.write_table(table, out / f"part={name}.parquet", compression="zstd", compression_level=ZSTD_LEVEL)

    t = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(one, parts.items()))
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", choices=["duckdb", "pyarrow"], required=True)
    ap.add_argument("--input", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    parts = json.loads(args.input.read_text())
    args.out.mkdir(parents=True, exist_ok=True)
    cpu0 = time.process_time()
    if args.engine == "duckdb":
        seconds = rewrite_duckdb(parts, args.out)
    else:
        seconds = rewrite_pyarrow(parts, args.out, args.threads)
    cpu = time.process_time() - cpu0
    print(json.dumps({"seconds": seconds, "cpu_s": cpu, "engine": args.engine, "threads": args.threads if args.engine == "pyarrow" else None}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
