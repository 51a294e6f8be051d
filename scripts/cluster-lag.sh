#!/usr/bin/env bash
# Replication lag under the Lobsters page mix (issue #16), a full run by
# hand, not in CI: starts a 3-node cluster (scripts/cluster.sh, default
# --sync-replicas 1), runs lobsters-bench against the primary at a fixed
# rate, samples the primary's /metrics every 100 ms during the measured
# part (ladle_cluster_replica_lag_seconds and _entries, per replica: the
# age of the oldest entry a replica has not acknowledged, and how many
# entries it lacks; the primary refreshes them every 100 ms), then prints
# p50, p99 and max per replica, and stops the cluster.
#
# Environment: LADLE_BIN, LOBSTERS_BENCH (built binaries; default: debug
# builds in $CARGO_TARGET_DIR), LAG_RATE (pages/s, default 200), LAG_SCALE
# (default 0.2), LAG_RUNTIME (measured seconds, default 30), LAG_WARMUP
# (default 10), LADLE_CLUSTER_DATA (default a temporary directory).
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
export LADLE_BIN="${LADLE_BIN:-$target/debug/ladle}"
bench="${LOBSTERS_BENCH:-$target/debug/lobsters-bench}"
rate="${LAG_RATE:-200}" scale="${LAG_SCALE:-0.2}"
runtime="${LAG_RUNTIME:-30}" warmup="${LAG_WARMUP:-10}"
[[ -x "$LADLE_BIN" && -x "$bench" ]] ||
  cargo build -p ladle-server --bin ladle -p lobsters-bench
export LADLE_CLUSTER_DATA="${LADLE_CLUSTER_DATA:-$(mktemp -d "${TMPDIR:-/tmp}/ladle-lag.XXXXXX")}"
samples="$LADLE_CLUSTER_DATA/lag-samples"
trap 'scripts/cluster.sh down >/dev/null 2>&1 || true' EXIT

scripts/cluster.sh up 3 >/dev/null
primary=$(scripts/cluster.sh status | sed -n 's/^node=\([0-9]*\) .*role=primary.*/\1/p' | head -1)
[[ -n "$primary" ]] || { echo "cluster-lag: no primary" >&2; exit 1; }
echo "cluster-lag: primary is node $primary; priming scale $scale" >&2
"$bench" lobsters --url "mysql://root@127.0.0.1:$((3310 + primary))/lobsters" \
  --scale "$scale" --prime --runtime 1 --warmup 0 --target-rate 1 >/dev/null

sample() { # one line per replica and metric: <seconds since start> <metric> <replica> <value>
  local start=$EPOCHREALTIME now
  while :; do
    now=$EPOCHREALTIME
    curl -s --max-time 1 "http://127.0.0.1:$((6040 + primary))/metrics" |
      awk -v t="$(echo "$now - $start" | bc)" '
        /^ladle_cluster_replica_lag_(seconds|entries)\{/ {
          split($1, a, "\""); name = $1; sub(/\{.*/, "", name); print t, name, a[2], $2 }'
    sleep 0.1
  done
}
sample >"$samples" &
sampler=$!
"$bench" lobsters --url "mysql://root@127.0.0.1:$((3310 + primary))/lobsters" \
  --scale "$scale" --target-rate "$rate" --runtime "$runtime" --warmup "$warmup" |
  tee "$LADLE_CLUSTER_DATA/bench.txt" >&2
kill "$sampler" 2>/dev/null || true

echo "cluster-lag: $rate pages/s, scale $scale, ${runtime}s measured after ${warmup}s warm-up;"
echo "replication lag sampled on the primary every 100 ms (measured part only):"
for metric in ladle_cluster_replica_lag_seconds ladle_cluster_replica_lag_entries; do
  for replica in $(awk -v m="$metric" '$2 == m { print $3 }' "$samples" | sort -u); do
    awk -v m="$metric" -v r="$replica" -v w="$warmup" '$2 == m && $3 == r && $1 >= w { print $4 }' "$samples" |
      sort -g | awk -v m="$metric" -v r="$replica" '
        { v[NR] = $1 }
        END {
          if (NR == 0) exit
          p50 = v[int((NR - 1) * 0.50) + 1]; p99 = v[int((NR - 1) * 0.99) + 1]
          printf "  %s replica=%s samples=%d p50=%s p99=%s max=%s\n", m, r, NR, p50, p99, v[NR]
        }'
  done
done
