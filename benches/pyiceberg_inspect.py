#!/usr/bin/env python3
"""Time PyIceberg's table.inspect.files() and table.inspect.partitions() on the largest fixture table.

    $PEERS_PYTHON benches/pyiceberg_inspect.py [--fixtures DIR] [--table KEY] [--runs 5]

Largest = most live data + delete files in the fixture manifest (pyiceberg.events today). Prints one JSON
object: median / min / max seconds over the runs, plus the table's shape. The table is loaded once; each run
calls inspect again (PyIceberg caches manifest-list reads in-process, so runs after the first are warm).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "py"))

import cryo_peers  # noqa: E402


def timed(fn, runs: int) -> tuple[dict, object]:
    out, result = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        out.append(time.perf_counter() - t0)
    return {"median_s": round(statistics.median(out), 6), "min_s": round(min(out), 6), "max_s": round(max(out), 6), "runs_s": [round(x, 6) for x in out]}, result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixtures", type=Path, default=REPO / "target" / "cryo-fixtures")
    ap.add_argument("--table", help="manifest key, e.g. fixtures.pyiceberg.events (default: the largest local table)")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()

    manifest = json.loads((args.fixtures / "manifest.json").read_text())
    local = {k: v for k, v in manifest["tables"].items() if manifest["catalogs"][v["catalog"]]["type"] in ("sql", "hadoop")
             and not v["metadata_location"].startswith("s3://")}
    key = args.table or max(local, key=lambda k: (local[k]["data_files"] + local[k]["position_delete_files"], local[k]["row_count"]))
    entry = manifest["tables"][key]
    cat = manifest["catalogs"][entry["catalog"]]

    t0 = time.perf_counter()
    if cat["type"] == "hadoop":
        from pyiceberg.table import StaticTable

        table = StaticTable.from_metadata(entry["metadata_location"])
    else:
        table = cryo_peers.sql_catalog(cat["uri"][len("sqlite:///"):], cat["warehouse"], name=entry["catalog"]).load_table(entry["identifier"])
    load_s = time.perf_counter() - t0

    files_t, files = timed(lambda: table.inspect.files(), args.runs)
    parts_t, parts = timed(lambda: table.inspect.partitions(), args.runs)

    import pyarrow
    import pyiceberg

    print(json.dumps({
        "bench": "pyiceberg_inspect",
        "table": key,
        "data_files": entry["data_files"],
        "delete_files": entry["position_delete_files"] + entry["equality_delete_files"],
        "snapshots": entry["snapshots"],
        "rows": entry["row_count"],
        "runs": args.runs,
        "load_table_s": round(load_s, 6),
        "inspect_files": {**files_t, "result_rows": files.num_rows},
        "inspect_partitions": {**parts_t, "result_rows": parts.num_rows},
        "versions": {"pyiceberg": pyiceberg.__version__, "pyarrow": pyarrow.__version__, "python": sys.version.split()[0]},
    }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
