#!/usr/bin/env bash
# Bounded fuzzing of every target in fuzz/ (cargo fuzz, libFuzzer): each
# runs SECONDS seconds (default 60) from its committed corpus, on one core.
# A crash leaves its input under fuzz/artifacts/<target>/ and fails the
# run; the input then becomes a regression test (fuzz/README.md).
# Needs a nightly toolchain (libFuzzer's coverage flags are nightly-only;
# without one the run is skipped with a note: toolchains cannot be fetched
# on every machine) and cargo-fuzz (installed from crates.io if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET="${1:-${LADLE_FUZZ_SECONDS:-60}}"
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz.sh: no nightly toolchain here; fuzzing skipped"
  exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
# Outside the clone, so a fresh checkout (CI) reuses the instrumented build.
FUZZ_TARGET_DIR="${LADLE_FUZZ_TARGET_DIR:-$HOME/.cache/ladle-fuzz-target}"
# The run grows a private copy of the corpus: the committed one stays small.
work="$(mktemp -d /tmp/ladle-fuzz.XXXXXX)"
trap 'rm -rf "$work"' EXIT
for target in sql_frontend wire_commands; do
  mkdir -p "$work/$target"
  echo "fuzzing $target for ${SECONDS_PER_TARGET}s"
  cargo +nightly fuzz run --fuzz-dir fuzz --target-dir "$FUZZ_TARGET_DIR" "$target" "$work/$target" "fuzz/corpus/$target" -- \
    -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=4096 -timeout=30 -print_final_stats=1
done
