"""Shared pieces of the compaction benchmark (benches/compaction): catalog, fingerprint, queries."""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "py"))

import cryo_peers  # noqa: E402

TABLE = "db.events"
CATALOG = "bench"
DEFAULT_SEED = 20261201
TARGET_FILE_SIZE = 128 << 20
ZSTD_LEVEL = 3

# Order-independent multiset fingerprint: rows, sum of 64-bit row hashes (as HUGEINT) and their
# xor, over explicitly cast columns so Arrow, Parquet and Iceberg reads of the same values agree.
# A lost, duplicated, changed or resurrected row changes it. (The project's cryo_peers.fingerprint
# canonicalizes every row in Python: minutes for tens of millions of rows.)
_ROW_HASH = (
    "hash(id::BIGINT, part::INTEGER, epoch_us(ts)::BIGINT, user_id::BIGINT, amount::DOUBLE, "
    "qty::INTEGER, category::VARCHAR, payload::VARCHAR)"
)
FINGERPRINT_SQL = (
    "SELECT count(*)::BIGINT, coalesce(sum(h::HUGEINT), 0)::VARCHAR, coalesce(bit_xor(h), 0)::VARCHAR "
    f"FROM (SELECT {_ROW_HASH} AS h FROM {{rel}})"
)

# The query mix run with DuckDB iceberg_scan before and after compaction.
QUERIES: list[tuple[str, str]] = [
    ("full count", "SELECT count(*) FROM {t}"),
    ("partition aggregate", "SELECT count(*), sum(amount), avg(qty) FROM {t} WHERE part = 7"),
    ("selective filter (user_id)", "SELECT count(*), sum(amount) FROM {t} WHERE user_id = 123457"),
    ("group by category", "SELECT category, count(*), sum(amount), epoch_us(max(ts)) FROM {t} GROUP BY category ORDER BY category"),
    (
        "time range",
        "SELECT count(*), avg(amount) FROM {t} "
        "WHERE ts >= TIMESTAMPTZ '2026-01-01 02:00:00+00' AND ts < TIMESTAMPTZ '2026-01-01 03:00:00+00'",
    ),
]


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def catalog(root: Path):
    return cryo_peers.sql_catalog(root / "catalog.db", root / "warehouse", name=CATALOG)


def catalog_json(root: Path) -> dict[str, Any]:
    """Cryo's catalog config for the table under ``root``."""
    return {
        "name": CATALOG,
        "properties": {"uri": f"sqlite:///{(root / 'catalog.db').resolve()}", "warehouse": (root / "warehouse").resolve().as_uri()},
    }


def spark(root: Path, memory: str, app_name: str):
    return cryo_peers.spark_session(root / "catalog.db", root / "warehouse", catalog_name=CATALOG, memory=memory, app_name=app_name)


def duckdb_connect():
    return cryo_peers.duckdb_connect()


def local_path(uri: str) -> str:
    return cryo_peers._local_path(uri)


def fingerprint(con, rel: str) -> tuple[int, int, int]:
    n, s, x = con.execute(FINGERPRINT_SQL.format(rel=rel)).fetchone()
    return int(n), int(s), int(x)


def iceberg_rel(metadata_location: str) -> str:
    return f"iceberg_scan('{local_path(metadata_location)}')"


def parquet_rel(files: list[str]) -> str:
    return "read_parquet([" + ", ".join(f"'{f}'" for f in files) + "])"


def table_state(root: Path) -> dict[str, Any]:
    """Live files of the current snapshot (PyIceberg): counts, bytes, data files per partition."""
    table = catalog(root).load_table(TABLE)
    files = table.inspect.files().to_pylist()
    data = [f for f in files if f["content"] == 0]
    deletes = [f for f in files if f["content"] != 0]
    parts: dict[int, list[str]] = {}
    for f in sorted(data, key=lambda f: f["file_path"]):
        parts.setdefault(f["partition"]["part"], []).append(local_path(f["file_path"]))
    snap = table.current_snapshot()
    return {
        "metadata_location": table.metadata_location,
        "snapshot_id": snap.snapshot_id if snap else None,
        "operation": snap.summary.operation.value if snap and snap.summary else None,
        "snapshots": len(table.metadata.snapshots),
        "data_files": len(data),
        "data_bytes": sum(f["file_size_in_bytes"] for f in data),
        "delete_files": len(deletes),
        "delete_bytes": sum(f["file_size_in_bytes"] for f in deletes),
        "records": sum(f["record_count"] for f in data),
        "partitions": {str(k): v for k, v in sorted(parts.items())},
        "data_file_sizes": sorted(f["file_size_in_bytes"] for f in data),
    }


def _rounded(rows: list[tuple]) -> list[tuple]:
    return [tuple(round(v, 4) if isinstance(v, float) else v for v in r) for r in rows]


def run_queries(metadata_location: str, runs: int) -> dict[str, Any]:
    """Each query once to warm up, then ``runs`` timed runs; median seconds and the (rounded) result."""
    con = duckdb_connect()
    t = iceberg_rel(metadata_location)
    out: dict[str, Any] = {}
    try:
        for name, q in QUERIES:
            sql = q.format(t=t)
            result = _rounded(con.execute(sql).fetchall())
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                con.execute(sql).fetchall()
                times.append(time.perf_counter() - start)
            out[name] = {"median_s": statistics.median(times), "runs_s": times, "result": result}
    finally:
        con.close()
    return out


def same_results(a: list, b: list) -> bool:
    """Query results equal up to float summation order."""
    if len(a) != len(b):
        return False
    for ra, rb in zip(a, b):
        if len(ra) != len(rb):
            return False
        for va, vb in zip(ra, rb):
            if isinstance(va, float) and isinstance(vb, float):
                if abs(va - vb) > 1e-6 * max(1.0, abs(va), abs(vb)):
                    return False
            elif va != vb:
                return False
    return True


def peak_rss_kb(pid: int) -> int:
    """VmHWM (peak resident set) of a live process, in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def parquet_codecs(files: list[str]) -> list[str]:
    """Distinct (codec) of every column chunk of the first row group of each file."""
    import pyarrow.parquet as pq

    seen: set[str] = set()
    for f in files:
        md = pq.ParquetFile(f).metadata
        if md.num_row_groups:
            rg = md.row_group(0)
            seen.update(rg.column(i).compression for i in range(rg.num_columns))
    return sorted(seen)


def env_info() -> dict[str, Any]:
    import platform

    info: dict[str, Any] = {"cpus": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version()}
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
        with open("/proc/meminfo") as f:
            info["mem_total_gb"] = round(int(f.readline().split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return info
