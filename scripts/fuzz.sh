#!/usr/bin/env bash
# Bounded fuzzing of Cryo's metadata/manifest reading, grader and planner (fuzz/, cargo-fuzz).
#
#   bash scripts/fuzz.sh                               # every target, FUZZ_SECONDS each (CI)
#   FUZZ_SECONDS=3600 bash scripts/fuzz.sh manifest    # one target for an hour, by hand
#   FUZZ_SECONDS=0 bash scripts/fuzz.sh                # build only, then replay the seeds
#
# FUZZ_SECONDS   seconds per target (default 60); FUZZ_JOBS libFuzzer workers per target (1)
# FUZZ_REPLAY    0: skip the stable replay at the end (scripts/test.sh: its `cargo test` ran it)
# FUZZ_BUDGET    seconds for the whole step, build included (default 300 under CI=true, none by
#                hand): after the build, each target gets at most an even share of what is
#                left, and never less than 20 s
# CRYO_FUZZ_TARGET_DIR  where the instrumented build goes (default: $CARGO_TARGET_DIR/fuzz when
#                       CARGO_TARGET_DIR is set, ~/.cache/cryo-fuzz/target under CI=true, else
#                       fuzz/target); libFuzzer's growing corpus
#                       lives there too (<dir>/corpus/<target>), so long runs pick up where
#                       earlier ones stopped. The committed seeds (fuzz/corpus/) are only read.
#
# A crash fails the script and prints the reproducer (fuzz/artifacts/<target>/crash-…). Replay it
# with `cargo +nightly fuzz run <target> <file>`; once fixed, commit it where it landed: the
# stable test `fuzz_corpus` (cargo test -p cryo-core) replays fuzz/corpus and fuzz/artifacts.
#
# cargo-fuzz needs the nightly toolchain installed here (rustup's `nightly`; none is downloaded).
# Without it the script says so loudly and runs only that stable replay.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

CARGO_FUZZ_VERSION=0.13.1
SECONDS_PER_TARGET=${FUZZ_SECONDS:-60}
JOBS=${FUZZ_JOBS:-1}
ALL=(table_metadata manifest_list manifest grade_plan expire_readers)
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${ALL[@]}")
DIR=${CRYO_FUZZ_TARGET_DIR:-${CARGO_TARGET_DIR:+$CARGO_TARGET_DIR/fuzz}}
# CI clones afresh each time: keep its build beside the peers cache, so a second run on the same
# machine rebuilds only cryo-core and the targets (~2-3 min instead of a cold 7-12 min).
[ -n "$DIR" ] || [ "${CI:-}" != true ] || DIR=${XDG_CACHE_HOME:-$HOME/.cache}/cryo-fuzz/target
DIR=$(realpath -m "${DIR:-$ROOT/fuzz/target}")  # absolute: cargo fuzz runs in fuzz/

replay() {
  if [ "${FUZZ_REPLAY:-1}" = 0 ]; then
    echo "== fuzz: the stable replay of the seeds is left to the caller (FUZZ_REPLAY=0)"
    return 0
  fi
  echo "== fuzz: replaying the committed seeds and reproducers (stable)"
  # CRYO_CORE_FEATURES: the feature set the caller's other builds use (scripts/test.sh), so this
  # test binary is the one already built, not a rebuild of the graph with other features.
  cargo test -p cryo-core ${CRYO_CORE_FEATURES:+--features "$CRYO_CORE_FEATURES"} --test it fuzz_corpus
}

if ! cargo +nightly --version >/dev/null 2>&1; then
  cat >&2 <<'EOF'
########################################################################################
#  NO NIGHTLY TOOLCHAIN: `cargo +nightly` is not available, so cargo-fuzz cannot run.  #
#  Fuzzing is SKIPPED; only the committed corpora are replayed on stable below.        #
#  (rustup toolchains cannot be downloaded here: install one where they can.)          #
########################################################################################
EOF
  replay
  exit 0
fi

if [ "$(cargo fuzz --version 2>/dev/null || true)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]; then
  echo "== fuzz: installing cargo-fuzz $CARGO_FUZZ_VERSION"
  cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION"
fi

# Address sanitizer off: Cryo and its dependency tree are safe Rust (cryo-core denies unsafe
# code; the C in the tree, zstd/lz4, is not on these paths). Release with debug assertions and
# overflow checks (cargo-fuzz's default) is what catches bugs here; ASan would halve execs/s.
# 16 codegen units (cargo-fuzz defaults to 1) and fuzz/Cargo.toml's opt-level 1 keep the cold
# build short enough for CI (measurements in scripts/README.md).
FLAGS=(-s none --codegen-units 16 --target-dir "$DIR")

start=$(date +%s)
echo "== fuzz: building ${TARGETS[*]} (nightly: $(cargo +nightly --version))"
if [ ${#TARGETS[@]} -eq ${#ALL[@]} ]; then
  (cd fuzz && cargo +nightly fuzz build "${FLAGS[@]}")
else
  for t in "${TARGETS[@]}"; do (cd fuzz && cargo +nightly fuzz build "${FLAGS[@]}" "$t"); done
fi
echo "== fuzz: build took $(($(date +%s) - start)) s"

BUDGET=${FUZZ_BUDGET:-}
[ -n "$BUDGET" ] || { [ "${CI:-}" = true ] && BUDGET=300; }
if [ -n "$BUDGET" ] && [ "$SECONDS_PER_TARGET" -gt 0 ]; then
  reserve=30; [ "${FUZZ_REPLAY:-1}" != 0 ] || reserve=0  # the replay's
  share=$(( (BUDGET - ($(date +%s) - start) - reserve) / ${#TARGETS[@]} ))
  [ "$share" -ge 20 ] || share=20
  if [ "$share" -lt "$SECONDS_PER_TARGET" ]; then
    echo "== fuzz: ${BUDGET} s budget: ${share} s per target (FUZZ_SECONDS=$SECONDS_PER_TARGET)"
    SECONDS_PER_TARGET=$share
  fi
fi

failed=()
PARALLEL=()
# Parallel workers write their output to fuzz-<n>.log in the working directory (fuzz/).
[ "$JOBS" -le 1 ] || PARALLEL=(-jobs="$JOBS" -workers="$JOBS")
if [ "$SECONDS_PER_TARGET" -gt 0 ]; then
  for t in "${TARGETS[@]}"; do
    work="$DIR/corpus/$t"
    mkdir -p "$work" "fuzz/artifacts/$t"
    log="$DIR/fuzz-$t.log"
    echo "== fuzz: $t for ${SECONDS_PER_TARGET} s (seeds: fuzz/corpus/$t, corpus: $work)"
    set +e
    (cd fuzz && cargo +nightly fuzz run "${FLAGS[@]}" "$t" "$work" "corpus/$t" -- \
      -max_total_time="$SECONDS_PER_TARGET" -timeout=30 -rss_limit_mb=4096 \
      ${PARALLEL[@]+"${PARALLEL[@]}"} -print_final_stats=1 \
      -artifact_prefix="$ROOT/fuzz/artifacts/$t/") >"$log" 2>&1
    rc=$?
    set -e
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|^#[0-9]+ *DONE' "$log" || true
    if [ $rc -ne 0 ]; then
      failed+=("$t")
      echo "!! fuzz: $t FAILED (exit $rc); its output: $log"
      grep -E 'panicked at|^(thread|SUMMARY|==[0-9]+==)' "$log" | head -20 || true
      grep -E 'Test unit written to|artifact_prefix' "$log" | sed 's/^/!! reproducer: /' || true
    fi
  done
fi

replay
if [ ${#failed[@]} -gt 0 ]; then
  echo "!! fuzz: crashes in ${failed[*]}: reproducers under fuzz/artifacts/<target>/ (see above)"
  exit 1
fi
echo "== fuzz: done in $(($(date +%s) - start)) s, no crash"
