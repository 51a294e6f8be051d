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
# WORKLOAD=vote measures the replica's apply at full write rate instead: a
# 2-node cluster (primary + 1 synchronous replica), `lobsters-bench vote
# --read-fraction 0` (every operation a write, CONNECTIONS connections,
# ARTICLES articles) against the primary, unthrottled; prints the pair's
# writes/s and each node's CPU per change-log entry.
#
# WORKLOAD=catchup measures the apply of a backlog (entries applied in runs
# of up to 256): a 3-node cluster, the same vote workload for RUNTIME
# seconds while one replica is stopped (SIGSTOP; the other acknowledges),
# then SIGCONT: prints the entries it was behind, the time it took to reach
# the primary's position, and its CPU per entry over that catch-up.
#
# Environment: LADLE_BIN, LOBSTERS_BENCH (built binaries; default: debug
# builds in $CARGO_TARGET_DIR), RATE (pages/s, default 40), SCALE (default
# 0.1), RUNTIME (measured seconds, default 40), LADLE_CLUSTER_DATA
# (default a temporary directory); for WORKLOAD=vote, CONNECTIONS (default
# 16) and ARTICLES (default 10000).
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
export LADLE_BIN="${LADLE_BIN:-$target/debug/ladle}"
bench="${LOBSTERS_BENCH:-$target/debug/lobsters-bench}"
rate=${RATE:-40} scale=${SCALE:-0.1} runtime=${RUNTIME:-40} workload=${WORKLOAD:-lobsters}
connections=${CONNECTIONS:-16} articles=${ARTICLES:-10000}
nodes=3
[[ "$workload" == vote ]] && nodes=2
if [[ ! -x "$LADLE_BIN" || ! -x "$bench" ]]; then
  # (One package at a time: `--bin ladle` would filter lobsters-bench's.)
  cargo build -p ladle-server --bin ladle
  cargo build -p lobsters-bench
fi
export LADLE_CLUSTER_DATA="${LADLE_CLUSTER_DATA:-$(mktemp -d "${TMPDIR:-/tmp}/ladle-apply.XXXXXX")}"
trap 'scripts/cluster.sh down >/dev/null 2>&1 || true' EXIT
scripts/cluster.sh up "$nodes" >/dev/null
primary=$(scripts/cluster.sh status | sed -n 's/^node=\([0-9]*\) .*role=primary.*/\1/p' | head -1)
[[ -n "$primary" ]] || { echo "cluster-apply-cost: no primary" >&2; exit 1; }
cpu() { awk '{print $14 + $15}' "/proc/$(cat "$LADLE_CLUSTER_DATA/node$1/pid")/stat"; }
# A node's applied position, from /health (its metrics are refreshed by its
# etcd coordination step, which a node back from a pause may still wait in).
applied() { curl -s "127.0.0.1:$((6040 + ${1:-$primary}))/health" | sed -n 's/.*applied=\([0-9]*\).*/\1/p'; }
tck=$(getconf CLK_TCK)
now_ms() { local t=$EPOCHREALTIME; echo $((10#${t/./} / 1000)); }
if [[ "$workload" == catchup ]]; then
  url="mysql://root@127.0.0.1:$((3310 + primary))/vote"
  vote=("$bench" vote --url "$url" --articles "$articles" --read-fraction 0 --connections "$connections" --warmup 0)
  "${vote[@]}" --prime --runtime 5 >/dev/null 2>&1
  lagging=$(( primary % 3 + 1 ))
  pid=$(cat "$LADLE_CLUSTER_DATA/node$lagging/pid")
  a0=$(applied "$lagging")
  kill -STOP "$pid"
  "${vote[@]}" --runtime "$runtime" --json "$LADLE_CLUSTER_DATA/vote.json" >/dev/null 2>&1
  target_lsn=$(applied)
  c0=$(cpu "$lagging") t0=$(now_ms)
  kill -CONT "$pid"
  until [[ "$(applied "$lagging")" == "$target_lsn" ]]; do
    (( $(now_ms) - t0 < ${CATCHUP_TIMEOUT_MS:-300000} )) || { echo "cluster-apply-cost: node $lagging did not catch up" >&2; exit 1; }
    sleep 0.05
  done
  t1=$(now_ms) d=$(( $(cpu "$lagging") - c0 )) entries=$(( target_lsn - a0 ))
  jq -r '"while stopped: writes/s \(.ops_per_s | floor), writes \(.writes), errors \(.errors)"' "$LADLE_CLUSTER_DATA/vote.json"
  echo "node $lagging (stopped ${runtime}s) was $entries entries behind; caught up in $((t1 - t0)) ms" \
    "($(echo "scale=0; 1000 * $entries / ($t1 - $t0)" | bc) entries/s), CPU $(echo "scale=2; $d / $tck" | bc) s," \
    "$(echo "scale=3; 1000 * $d / $tck / $entries" | bc) ms per entry"
  exit 0
fi
if [[ "$workload" == vote ]]; then
  url="mysql://root@127.0.0.1:$((3310 + primary))/vote"
  vote=("$bench" vote --url "$url" --articles "$articles" --read-fraction 0 --connections "$connections" --warmup 0)
  "${vote[@]}" --prime --runtime 5 >/dev/null 2>&1
  declare -A before
  for i in $(seq 1 "$nodes"); do before[$i]=$(cpu "$i"); done
  a0=$(applied)
  "${vote[@]}" --runtime "$runtime" --json "$LADLE_CLUSTER_DATA/vote.json" >/dev/null 2>&1
  a1=$(applied)
  entries=$((a1 - a0))
  writes=$(jq -r .writes "$LADLE_CLUSTER_DATA/vote.json")
  jq -r '"writes/s \(.ops_per_s | floor), writes \(.writes), errors \(.errors), write p50 \(.write_p50_ms) ms, p99 \(.write_p99_ms) ms"' \
    "$LADLE_CLUSTER_DATA/vote.json"
  echo "vote, read fraction 0, $connections connections, ${runtime}s; primary node $primary; change-log entries in the window: $entries"
  for i in $(seq 1 "$nodes"); do
    d=$(( $(cpu "$i") - before[$i] ))
    echo "node $i: CPU $(echo "scale=2; $d / $tck" | bc) s, $(echo "scale=3; 1000 * $d / $tck / $entries" | bc) ms per entry, $(echo "scale=3; 1000 * $d / $tck / $writes" | bc) ms per write"
  done
  exit 0
fi
url="mysql://root@127.0.0.1:$((3310 + primary))/lobsters"
"$bench" lobsters --url "$url" --scale "$scale" --prime --runtime 1 --warmup 0 --target-rate 1 >/dev/null 2>&1
# Warm-up: views filled, then the measured window.
"$bench" lobsters --url "$url" --scale "$scale" --target-rate "$rate" --runtime 10 --warmup 0 >/dev/null
declare -A before
for i in 1 2 3; do before[$i]=$(cpu "$i"); done
a0=$(applied)
"$bench" lobsters --url "$url" --scale "$scale" --target-rate "$rate" --runtime "$runtime" --warmup 0 \
  >"$LADLE_CLUSTER_DATA/bench.txt"
a1=$(applied)
grep '^run:' "$LADLE_CLUSTER_DATA/bench.txt" || true
echo "$rate pages/s offered, scale $scale, ${runtime}s; primary node $primary; change-log entries in the window: $((a1 - a0))"
entries=$((a1 - a0))
p=$(( $(cpu "$primary") - before[$primary] ))
for i in 1 2 3; do
  d=$(( $(cpu "$i") - before[$i] ))
  echo "node $i: CPU $(echo "scale=2; $d / $tck" | bc) s ($(echo "scale=3; $d / $p" | bc) of the primary's), $(echo "scale=3; 1000 * $d / $tck / $entries" | bc) ms per entry"
done
