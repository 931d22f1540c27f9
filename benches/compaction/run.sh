#!/usr/bin/env bash
# Compaction benchmark: Cryo vs Spark rewrite_data_files vs raw DuckDB / pyarrow rewrites.
#
#   bash benches/compaction/run.sh [--size-mb 1024] [--deletes] [--contenders cryo,spark,duckdb,pyarrow]
#                                  [--query-runs 3] [--regenerate] [--keep] [--spark-memory 2g]
#                                  [--strategy binpack | sort:user_id | zorder:user_id,ts | hilbert:user_id,ts]
#
# Needs the peers (bash scripts/peers.sh) and ~5x --size-mb of free disk under target/bench.
# Prints a Markdown table; writes target/bench/compaction-<timestamp>.json. See benches/compaction/README.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
env_file="${CRYO_PEERS_DIR:-$HOME/.cache/cryo-peers}/peers.env"
if [[ ! -f "$env_file" ]]; then
    echo "no $env_file: run 'bash scripts/peers.sh' first" >&2
    exit 2
fi
. "$env_file"
target_dir="${CARGO_TARGET_DIR:-target}"
# With the DataFusion feature: sorted, z-ordered and Hilbert rewrites (--strategy) need it.
cargo build --release -q -p cryo-core --features datafusion --example compact
exec "$PEERS_PYTHON" benches/compaction/bench.py --compact-bin "$target_dir/release/examples/compact" \
    --out "$target_dir/bench" "$@"
