#!/usr/bin/env python3
"""Spark contender: ``CALL bench.system.rewrite_data_files`` on the benchmark table (local[2]).

    $PEERS_PYTHON benches/compaction/spark_rewrite.py --root DIR [--memory 2g] [--remove-dangling-deletes]
        [--strategy binpack | sort:col,col | zorder:col,col]

Starts the session (JVM start, Iceberg extensions, ``SELECT 1``) untimed, then times the procedure
call alone. Prints JSON last: seconds, the procedure's result row, and the JVM's peak RSS (VmHWM of
the JVM process over its whole life, read from /proc just before it exits) and the JVM's CPU
seconds during the call.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common  # noqa: E402


def jvm_cpu_s(pid: int) -> float:
    """utime + stime of a process (all its threads), seconds."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float:
    """Busy CPU-seconds of the whole machine since boot (/proc/stat)."""
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (sum(f[:8]) - f[3] - f[4]) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, required=True)
    ap.add_argument("--memory", default="2g")
    ap.add_argument("--target-file-size", type=int, default=common.TARGET_FILE_SIZE)
    ap.add_argument("--remove-dangling-deletes", action="store_true")
    ap.add_argument("--strategy", default="binpack", help="binpack, sort:col,col or zorder:col,col")
    args = ap.parse_args()
    t0 = time.perf_counter()
    spark = common.spark(args.root.resolve(), memory=args.memory, app_name="cryo-bench-spark-rewrite")
    spark.sql("SELECT 1").collect()
    jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    startup = time.perf_counter() - t0
    options = {"target-file-size-bytes": str(args.target_file_size)}
    if args.remove_dangling_deletes:
        options["remove-dangling-deletes"] = "true"
    opts = ", ".join(f"'{k}', '{v}'" for k, v in options.items())
    kind, _, cols = args.strategy.partition(":")
    order = ""
    if kind == "sort":
        order = f", strategy => 'sort', sort_order => '{', '.join(cols.split(','))}'"
    elif kind == "zorder":
        order = f", strategy => 'sort', sort_order => 'zorder({', '.join(cols.split(','))})'"
    elif kind != "binpack":
        raise SystemExit(f"Spark has no {kind} order")
    sql = f"CALL {common.CATALOG}.system.rewrite_data_files(table => '{common.TABLE}'{order}, options => map({opts}))"
    cpu0, busy0 = jvm_cpu_s(jvm_pid), machine_busy_s()
    t = time.perf_counter()
    row = spark.sql(sql).collect()[0].asDict()
    seconds = time.perf_counter() - t
    cpu, busy = jvm_cpu_s(jvm_pid) - cpu0, machine_busy_s() - busy0
    others = max(0.0, (busy - cpu) / seconds)
    rss_kb = common.peak_rss_kb(jvm_pid)
    spark.stop()
    print(json.dumps({"seconds": seconds, "startup_s": startup, "sql": sql, "result": row, "cpu_s": cpu, "others_cores": others, "jvm_pid": jvm_pid, "peak_rss_kb": rss_kb}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
