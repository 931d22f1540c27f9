#!/usr/bin/env bash
# Run every test: Rust unit + integration tests, and the cross-implementation tests against the
# real peers (PyIceberg, DuckDB, Spark + Iceberg, SeaweedFS REST catalog + S3, moto S3, Trino), then
# the Python and Node packages.
#
#   bash scripts/test.sh            # everything (installs the peers on first use, ~2 min)
#   CRYO_TEST_FAST=1 bash ...       # Rust only: the tests that need the peers are counted as ignored
#
# The peers go to ${CRYO_PEERS_DIR:-~/.cache/cryo-peers}; fixtures to target/cryo-fixtures.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# Each step's start, and at the end (or on failure) how long each took.
STEPS=()
step() {
  STEPS+=("$(date +%s) $1")
  printf '\n== %s (%s)\n' "$1" "$(date +%H:%M:%S)"
}
durations() {
  local rc=$? end i t0 t1 name
  end=$(date +%s)
  printf '\n== step durations (exit %s)\n' "$rc"
  for i in "${!STEPS[@]}"; do
    t0=${STEPS[$i]%% *} name=${STEPS[$i]#* }
    t1=$end; [ $((i + 1)) -lt ${#STEPS[@]} ] && t1=${STEPS[$((i + 1))]%% *}
    printf '%6ss  %s\n' $((t1 - t0)) "$name"
  done
  [ ${#STEPS[@]} -gt 0 ] && printf '%6ss  total\n' $((end - ${STEPS[0]%% *}))
}

if [ "${CRYO_TEST_FAST:-0}" = 1 ]; then
  step "cargo test (fast: no peers; the tests that need them are counted as ignored)"
  cargo test -p cryo-core
  exit 0
fi

# One feature set for every build below (the workspace tests, the quickstart, the Python wheel and
# the Node addon): cryo-core with `datafusion`. Cargo then compiles each dependency and cryo-core
# once per profile and shares them; a build with another feature set (even one dev-dependency
# feature, or cryo-core without `datafusion`) rebuilds most of the graph (~10 min on 2 cores).
# The same goes for the target: napi's build always passes `--target <host triple>`, which puts
# its artifacts under target/<triple>/; naming the host triple for every build puts them all there.
# Tests that build an example themselves (tests/py) read both variables.
CORE_FEATURES=datafusion,fuzz
WS_FEATURES=cryo-core/datafusion,cryo-core/fuzz
# CI clones afresh each time: under CI=true the build goes to a cache beside the peers (as CI
# services cache ~/.cargo and target/), so a second run on the same machine compiles only Cryo's
# own crates (~18 min of dependencies otherwise). Outputs that are not cargo's stay in ./target.
# CRYO_BUILD_CACHE=0 builds from nothing; a cache over 40 GB is emptied first.
if [ -z "${CARGO_TARGET_DIR:-}" ] && [ "${CI:-}" = true ] && [ "${CRYO_BUILD_CACHE:-1}" != 0 ]; then
  CARGO_TARGET_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/cryo-build/target
  if [ -d "$CARGO_TARGET_DIR" ] && [ "$(du -s -BG "$CARGO_TARGET_DIR" | cut -f1 | tr -d G)" -gt 40 ]; then
    rm -rf "$CARGO_TARGET_DIR"
  fi
  mkdir -p "$CARGO_TARGET_DIR"
  export CARGO_TARGET_DIR
  # The fuzz build (nightly, instrumented: nothing in common with this one) keeps its own cache.
  export CRYO_FUZZ_TARGET_DIR=${CRYO_FUZZ_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cryo-fuzz/target}
  echo "cargo's build cache: $CARGO_TARGET_DIR"
fi
export CRYO_CORE_FEATURES=$CORE_FEATURES
CARGO_BUILD_TARGET=$(rustc -vV | sed -n 's/^host: //p')
export CARGO_BUILD_TARGET

# What the workspace lints and rustfmt.toml promise, before anything is built.
step "rustfmt"
cargo fmt --all --check

# The build needs nothing the peers bring: it starts first and runs while the peers install, the
# services start and the fixtures are written; the tests wait for it.
mkdir -p target
step "cargo build (workspace: core + bindings, in the background)"
cargo build --workspace --all-targets --features "$WS_FEATURES" >target/cargo-build.log 2>&1 &
build_pid=$! build_t0=$(date +%s)
trap 'durations; [ -z "${build_pid:-}" ] || kill "$build_pid" 2>/dev/null || true' EXIT
wait_build() {
  local rc=0
  [ -n "${build_pid:-}" ] || return 0
  wait "$build_pid" || rc=$?
  build_pid=""
  tail -n 3 target/cargo-build.log
  echo "cargo build: $(($(date +%s) - build_t0)) s from its start"
  [ "$rc" = 0 ] || { cat target/cargo-build.log; echo "cargo build failed ($rc)"; exit "$rc"; }
}

step "peers"
bash scripts/peers.sh
# shellcheck disable=SC1091
. "${CRYO_PEERS_DIR:-$HOME/.cache/cryo-peers}/peers.env"

step "python lint and spelling (ruff, typos)"
"$PEERS_VENV/bin/ruff" check cryo-py/python tests/py tests/fixtures benches examples
"$PEERS_VENV/bin/typos"

step "services"
bash scripts/services.sh start
trap 'durations; for p in ${build_pid:-} ${fuzz_pid:-} ${sim_pid:-} ${packages_pid:-}; do kill "$p" 2>/dev/null || true; done; bash "$ROOT/scripts/services.sh" stop >/dev/null 2>&1 || true' EXIT
set -a
# shellcheck disable=SC1091
. "$CRYO_PEERS_DIR/run/services.env"
set +a

step "fixtures (PyIceberg + Spark 3.5 + Spark 4.1)"
FIXTURES=${CRYO_FIXTURES:-$ROOT/target/cryo-fixtures}
rm -rf "$FIXTURES"
mkdir -p "$FIXTURES"
# The second Spark line's tables (Spark 4.1 + Iceberg 1.12: format v3 row lineage), in their own catalog
# file and manifest (manifest-spark41.json) beside the others: written side by side with the first's
# (their files do not overlap), its log shown when it is done.
spark4_fixtures=""
if [ -n "${SPARK4_PYTHON:-}" ]; then
  "$SPARK4_PYTHON" tests/fixtures/make_fixtures_spark4.py --out "$FIXTURES" >"$FIXTURES/spark41.log" 2>&1 &
  spark4_fixtures=$!
else
  echo "no Spark 4.1 line (SPARK4_PYTHON unset in peers.env): its fixtures are not built, its tests fail"
fi
"$PEERS_PYTHON" tests/fixtures/make_fixtures.py --out "$FIXTURES" --local --s3 --rest
if [ -n "$spark4_fixtures" ]; then
  rc=0; wait "$spark4_fixtures" || rc=$?
  cat "$FIXTURES/spark41.log"
  [ "$rc" = 0 ] || { echo "make_fixtures_spark4.py failed ($rc)"; exit "$rc"; }
fi
export CRYO_FIXTURES=$FIXTURES CRYO_REQUIRE_PEERS=1

step "cargo build (waiting for the background build)"
wait_build

# --include-ignored: the tests that need the peers (ignored by a plain `cargo test`) run here,
# where the fixtures and services are up; the measurement test is left to its benchmark.
step "cargo test (with the peers)"
# (commit_rest::rest_table_written_by_pyiceberg is run by tests/py/test_commit_rest.py, which
# writes the table it needs.)
cargo test -p cryo-core --features "$CORE_FEATURES" -- --include-ignored --skip compact_bench \
  --skip commit_rest::rest_table_written_by_pyiceberg
# What pytest runs of cryo-core's (the examples, the `it` test binary) is built now, and pytest gets
# their paths: a cargo call there would wait for the build directory's lock while the lints lane
# builds beside it.
cargo build -q -p cryo-core --features "$CORE_FEATURES" --examples
CRYO_IT_TEST_BIN=$(cargo test -q -p cryo-core --features "$CORE_FEATURES" --test it --no-run --message-format=json \
  | "$PEERS_PYTHON" -c 'import json, sys; print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("executable")][-1])')
CRYO_EXAMPLES_DIR=${CARGO_TARGET_DIR:-$ROOT/target}/$CARGO_BUILD_TARGET/debug/examples
export CRYO_IT_TEST_BIN CRYO_EXAMPLES_DIR

# The commit-protocol simulator (cryo-core/tests/sim): `cargo test` above ran its first 40 seeds
# and its regression seeds;
# here, beside pytest like the fuzzing, as many more as SIM_SECONDS allows (seeds from 1000 on).
step "commit-protocol simulation (${SIM_SECONDS:-240} s of seeds, in the background)"
SIM_BIN=$(cargo test -q -p cryo-core --features "$CORE_FEATURES" --test sim --no-run --message-format=json \
  | "$PEERS_PYTHON" -c 'import json, sys; print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("executable")][-1])')
CRYO_SIM_FIRST=1000 CRYO_SIM_SEEDS=1000000 CRYO_SIM_SECONDS=${SIM_SECONDS:-240} \
  "$SIM_BIN" seeds --exact --nocapture >target/sim.log 2>&1 &
sim_pid=$!

# Bounded fuzzing (scripts/fuzz.sh: cold build + FUZZ_SECONDS per target; without a nightly
# toolchain it says so and replays the seeds only). Longer runs by hand: see scripts/README.md.
# It runs in the background beside the quickstart and pytest (whose Spark JVMs and soak leave a
# core idle much of the time: each target fuzzes for a fixed time, so it costs them little) and is
# waited for at the end.
step "fuzz (cargo-fuzz, ${FUZZ_SECONDS:-60} s per target, in the background)"
# (`cargo test` above replayed the committed seeds and reproducers already: fuzz_corpus.)
FUZZ_REPLAY=0 bash scripts/fuzz.sh >target/fuzz.log 2>&1 &
fuzz_pid=$!

step "the main job (README's first command, debug build)"
rm -rf target/quickstart-demo
out=$(cargo run -q --features "$CORE_FEATURES" --example quickstart -- target/quickstart-demo)
for expect in "built demo lake" "lake.healthy      A" "under policy" "preset streaming-hot on native" "lake.metrics_v1: committed" "plan written to" "SQL for Trino" "SQL for Spark" \
              "maintenance run, dry run" "maintenance run on the native engine" "the fleet after the run" \
              "lake.clickstream: grade F"; do
  grep -qF "$expect" <<<"$out" || { echo "quickstart output lacks: $expect"; echo "$out" | head -40; exit 1; }
done
grep -qE 'receipts \([0-9]+ succeeded, [0-9]+ dry run, [0-9]+ skipped, [0-9]+ deferred, 0 failed\)' <<<"$out" \
  || { echo "quickstart maintenance run had failures"; echo "$out" | tail -60; exit 1; }
# A second run starts again from the decayed lake (the first one compacted a table).
out=$(cargo run -q --features "$CORE_FEATURES" --example quickstart -- target/quickstart-demo)
grep -qF "lake.clickstream: grade F" <<<"$out" || { echo "second quickstart run did not start from the decayed lake"; exit 1; }

step "python package (cryo-py: debug build installed into the peers venv)"
# With cryo-core's datafusion feature: the package's sorted and z-ordered compactions run for real in
# tests/py/test_lineage_spark41.py (without it they refuse, `unsupported`).
VIRTUAL_ENV=$PEERS_VENV "$PEERS_PYTHON" -m maturin develop -q -m cryo-py/Cargo.toml --features "$WS_FEATURES"

# Clippy, rustdoc and the public API, then the packages on other interpreters (Airflow and
# Dagster's venv, a second CPython, Node): none needs Spark. They run in the background beside
# pytest, under `nice` so that the Spark lanes keep the cores, and are waited for after it. Their
# output goes to target/packages-lane.log.
packages_lane() {
  set -e
  renice -n 10 -p "$BASHPID" >/dev/null 2>&1 || true
  # Every target and feature, warnings as errors; then the docs, broken links included; then the
  # public API of cryo-core against cryo-core/public-api.txt (CRYO_BLESS=1 accepts a change).
  # Pure CPU, no peer: here, beside pytest's lanes (which leave a core idle much of the time),
  # rather than before them.
  echo "== clippy and rustdoc (warnings are errors), the public API"
  cargo clippy --workspace --all-targets --features "$WS_FEATURES" -- -D warnings
  RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --features "$WS_FEATURES"
  python3 scripts/public_api.py
  # Airflow and Dagster have their own venv (scripts/peers.sh): install the cryo wheel there and run
  # the orchestrator tests with its python (they skip, saying why, under the peers venv).
  # The same features as `maturin develop` above: Cargo reuses that build instead of compiling cryo-py again.
  rm -rf target/cryo-wheel && "$PEERS_PYTHON" -m maturin build -q --profile dev -m cryo-py/Cargo.toml --features "$WS_FEATURES" -o target/cryo-wheel
  echo "== Airflow and Dagster ($ORCHESTRATORS_PYTHON)"
  "$ORCHESTRATORS_PYTHON" -m pip install -q --force-reinstall --no-deps target/cryo-wheel/*.whl
  "$ORCHESTRATORS_PYTHON" -m pytest -q -p no:cacheprovider --basetemp=target/packages-lane/orchestrators tests/py/test_orchestrators.py

  # The wheel is abi3: the same file must work on another CPython. Where a 3.12 is at hand
  # (CRYO_TEST_PY312, else pyenv's), install it there with the peers it needs and run its tests.
  local py312
  py312=${CRYO_TEST_PY312:-$(ls -d "$HOME"/.pyenv/versions/3.12*/bin/python 2>/dev/null | tail -n1 || true)}
  if [ -n "$py312" ] && [ -x "$py312" ]; then
    echo "== the same abi3 wheel on $("$py312" --version)"
    # The venv and its pinned peers stay beside the peers' (a clean clone would install them
    # again each run); the wheel is installed afresh.
    local v312=${CRYO_PEERS_DIR:-$HOME/.cache/cryo-peers}/venv-py312
    local specs=("pyiceberg[sql-sqlite,pyarrow]==0.12.0" "duckdb==1.5.5" "pytest==9.2.0" "mypy==2.4.1")
    if [ "$(cat "$v312/.cryo-specs" 2>/dev/null)" != "$py312 ${specs[*]}" ]; then
      rm -rf "$v312" && "$py312" -m venv "$v312"
      "$v312/bin/pip" install -q "${specs[@]}"
      echo "$py312 ${specs[*]}" >"$v312/.cryo-specs"
    fi
    "$v312/bin/pip" install -q --force-reinstall --no-deps target/cryo-wheel/*.whl
    "$v312/bin/python" -m pytest -q -p no:cacheprovider --basetemp=target/packages-lane/py312 tests/py/test_python_api.py
  fi

  # The Node package: its npm dependencies (package-lock.json), the addon with its generated
  # index.d.ts (a debug build), then node's test runner: the API on demo lakes, errors and
  # secrets, and the parity with the Python package installed above (same grades, plans,
  # fingerprints and SQL, under a clock frozen by faketime).
  echo "== node package (cryo-node: npm ci, napi build, node --test)"
  if ! command -v faketime >/dev/null 2>&1; then
    local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq && $sudo apt-get install -y -qq faketime >/dev/null
  fi
  npm --prefix cryo-node ci --no-audit --no-fund
  npm --prefix cryo-node run build -- --features "$WS_FEATURES"
  node --test cryo-node/test/*.test.mjs
}
step "lints and packages: clippy, rustdoc, public API; Airflow and Dagster, a second CPython, Node (in the background)"
mkdir -p target/packages-lane
(packages_lane) >target/packages-lane.log 2>&1 &
packages_pid=$!

# Two pytest runs side by side (each is mostly one core: a Spark JVM, a Python process, waits): the
# second Spark line's tests (Spark 4.1 + Iceberg 1.12: its module, and the cross-implementation
# modules' `spark4.1` half) in the background with their own temp root, everything else in front.
# (The two take about as long: ~35 and ~38 min under each other's load on 2 cores.)
step "pytest (cross-implementation, and the Python package; Spark 4.1's half beside it)"
SPARK41_TESTS=(tests/py/test_compact_interop.py tests/py/test_expire_spark.py tests/py/test_manifests_interop.py
  tests/py/test_native_run_peers.py tests/py/test_orphans_spark.py tests/py/test_render_spark.py
  tests/py/test_statistics_spark.py)
mkdir -p target/pytest-lane2
lane2() {
  local rc=0
  "$PEERS_PYTHON" -m pytest -q -p no:cacheprovider --basetemp=target/pytest-lane2/lineage --durations=10 tests/py/test_lineage_spark41.py || rc=1
  "$PEERS_PYTHON" -m pytest -q -p no:cacheprovider --basetemp=target/pytest-lane2/interop --durations=15 "${SPARK41_TESTS[@]}" -k spark4.1 || rc=1
  return "$rc"
}
lane2 >target/pytest-lane2/log 2>&1 &
lane2_pid=$!
rc=0
"$PEERS_PYTHON" -m pytest -q tests/py --ignore=tests/py/test_lineage_spark41.py -k "not spark4.1" --durations=30 || rc=$?
rc2=0; wait "$lane2_pid" || rc2=$?
echo "-- the Spark 4.1 half (exit $rc2):"
cat target/pytest-lane2/log
[ "$rc" = 0 ] && [ "$rc2" = 0 ] || exit 1

step "lints and packages (waiting for the background lane)"
rc=0; wait "$packages_pid" || rc=$?
cat target/packages-lane.log
packages_pid=""
[ "$rc" = 0 ] || { echo "the lints and packages lane failed ($rc)"; exit "$rc"; }

step "commit-protocol simulation (waiting for the background run)"
rc=0; wait "$sim_pid" || rc=$?
sim_pid=""
tail -n 60 target/sim.log
[ "$rc" = 0 ] || { echo "the simulation failed ($rc)"; exit "$rc"; }

step "fuzz (waiting for the background run)"
rc=0; wait "$fuzz_pid" || rc=$?
fuzz_pid=""
cat target/fuzz.log
[ "$rc" = 0 ] || { echo "fuzzing failed ($rc)"; exit "$rc"; }

step "done"
