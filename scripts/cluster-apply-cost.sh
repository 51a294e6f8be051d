#!/usr/bin/env bash
# What a replica costs under the Lobsters page mix (issue #16, "Past
# replicas"), a run by hand, not in CI: a 3-node cluster
# (scripts/cluster.sh), lobsters-bench against the primary at a fixed rate,
# and the CPU each node's process used over the same measured window. The
# primary serves every page and commits its writes; a replica only applies
# the writes (its own views kept current), so replica CPU / primary CPU is
# the share of a page's cost that every node pays however many replicas
# serve the reads (an upper bound: it includes the replica's idle work).
#
# Environment: LADLE_BIN, LOBSTERS_BENCH (built binaries; default: debug
# builds in $CARGO_TARGET_DIR), RATE (pages/s, default 40), SCALE (default
# 0.1), RUNTIME (measured seconds, default 40), LADLE_CLUSTER_DATA
# (default a temporary directory).
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
export LADLE_BIN="${LADLE_BIN:-$target/debug/ladle}"
bench="${LOBSTERS_BENCH:-$target/debug/lobsters-bench}"
rate=${RATE:-40} scale=${SCALE:-0.1} runtime=${RUNTIME:-40}
[[ -x "$LADLE_BIN" && -x "$bench" ]] ||
  cargo build -p ladle-server --bin ladle -p lobsters-bench
export LADLE_CLUSTER_DATA="${LADLE_CLUSTER_DATA:-$(mktemp -d "${TMPDIR:-/tmp}/ladle-apply.XXXXXX")}"
trap 'scripts/cluster.sh down >/dev/null 2>&1 || true' EXIT
scripts/cluster.sh up 3 >/dev/null
primary=$(scripts/cluster.sh status | sed -n 's/^node=\([0-9]*\) .*role=primary.*/\1/p' | head -1)
[[ -n "$primary" ]] || { echo "cluster-apply-cost: no primary" >&2; exit 1; }
url="mysql://root@127.0.0.1:$((3310 + primary))/lobsters"
"$bench" lobsters --url "$url" --scale "$scale" --prime --runtime 1 --warmup 0 --target-rate 1 >/dev/null 2>&1
cpu() { awk '{print $14 + $15}' "/proc/$(cat "$LADLE_CLUSTER_DATA/node$1/pid")/stat"; }
applied() { curl -s "127.0.0.1:$((6040 + primary))/metrics" | awk '/^ladle_cluster_applied_lsn/ {print $2}'; }
# Warm-up: views filled, then the measured window.
"$bench" lobsters --url "$url" --scale "$scale" --target-rate "$rate" --runtime 10 --warmup 0 >/dev/null
declare -A before
for i in 1 2 3; do before[$i]=$(cpu "$i"); done
a0=$(applied)
"$bench" lobsters --url "$url" --scale "$scale" --target-rate "$rate" --runtime "$runtime" --warmup 0 \
  >"$LADLE_CLUSTER_DATA/bench.txt"
a1=$(applied)
tck=$(getconf CLK_TCK)
grep '^run:' "$LADLE_CLUSTER_DATA/bench.txt" || true
echo "$rate pages/s offered, scale $scale, ${runtime}s; primary node $primary; change-log entries in the window: $((a1 - a0))"
p=$(( $(cpu "$primary") - before[$primary] ))
for i in 1 2 3; do
  d=$(( $(cpu "$i") - before[$i] ))
  echo "node $i: CPU $(echo "scale=2; $d / $tck" | bc) s ($(echo "scale=3; $d / $p" | bc) of the primary's)"
done
