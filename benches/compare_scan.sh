#!/usr/bin/env bash
# Cryo scan+grade vs PyIceberg inspect.files()/inspect.partitions() on the same fixture table.
#   bash benches/compare_scan.sh [TABLE] [RUNS]     (needs scripts/peers.sh and make_fixtures.py)
set -euo pipefail
cd "$(dirname "$0")/.."
TABLE=${1:-pyiceberg.events}; RUNS=${2:-5}
. "${CRYO_PEERS_DIR:-$HOME/.cache/cryo-peers}/peers.env"
cryo=$(cargo bench -q -p cryo-core --bench scan -- "$TABLE" "$RUNS" 2>/dev/null | tail -1)
py=$("$PEERS_PYTHON" benches/pyiceberg_inspect.py --table "fixtures.$TABLE" --runs "$RUNS")
"$PEERS_PYTHON" - "$cryo" "$py" <<'PY'
import json, sys
c, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
def med(d, *keys):
    for k in keys:
        if k in d: return d[k]["median_s"] if isinstance(d[k], dict) else d[k]
print(json.dumps({"cryo": c, "pyiceberg": p}, indent=1))
files = med(p, "inspect_files", "files")
parts = med(p, "inspect_partitions", "partitions")
print(f"\ncryo load+scan+grade: {c['load_scan_grade_median_s']*1000:.1f} ms (median of {c['runs']})")
print(f"cryo list_files:      {c['list_files_median_s']*1000:.1f} ms")
if files: print(f"pyiceberg inspect.files():      {files*1000:.1f} ms  -> ratio {files / c['load_scan_grade_median_s']:.1f}x")
if parts: print(f"pyiceberg inspect.partitions(): {parts*1000:.1f} ms  -> ratio {parts / c['load_scan_grade_median_s']:.1f}x")
PY
