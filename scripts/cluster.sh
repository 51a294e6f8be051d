#!/usr/bin/env bash
# A local Ladle cluster without Docker (issue #16's contract; scripts and
# tests depend on it):
#   scripts/cluster.sh up [N]   etcd on 127.0.0.1:2379 and N nodes (default 3):
#                               node i: MySQL 127.0.0.1:331i, /metrics and
#                               /health 127.0.0.1:604i, replication
#                               127.0.0.1:731i, data ./cluster-data/node<i>;
#                               returns once a primary is elected
#   scripts/cluster.sh status   one line per node:
#     node=<i> pid=<pid> mysql=<host:port> role=<primary|replica|catching-up|down> applied=<position>
#   scripts/cluster.sh down     stops the nodes, then etcd
# Environment: LADLE_BIN (a built ladle binary; default: build release),
# LADLE_CLUSTER_DATA (default ./cluster-data), LADLE_CLUSTER_ARGS (extra
# flags for every node). A 1-node cluster runs with --sync-replicas 0.
# The nodes share the cluster secret in ./cluster-data/cluster-secret
# (made on first use, mode 0600) unless LADLE_CLUSTER_SECRET or
# LADLE_CLUSTER_SECRET_FILE gives one.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${LADLE_CLUSTER_DATA:-$PWD/cluster-data}
ETCD_URL=http://127.0.0.1:2379

# A process that runs: a killed node whose parent (this script, gone since
# `up`) cannot reap it stays a zombie until init does, seconds later on
# some machines, and is down already.
alive() {
  [[ -f "$1" ]] || return 1
  local pid state
  pid=$(cat "$1")
  kill -0 "$pid" 2>/dev/null || return 1
  state=$(sed -n 's/^[0-9]* (.*) \(.\) .*/\1/p' "/proc/$pid/stat" 2>/dev/null || true)
  [[ "$state" != Z ]]
}

node_ids() {
  local d
  for d in "$DATA"/node*; do
    [[ -d "$d" ]] && echo "${d##*/node}"
  done | sort -n
}

start_etcd() {
  if curl -sf --max-time 1 "$ETCD_URL/health" >/dev/null 2>&1; then
    return 0
  fi
  command -v etcd >/dev/null || scripts/deps.sh --no-mariadb
  mkdir -p "$DATA"
  etcd --name ladle --data-dir "$DATA/etcd" \
    --listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
    --listen-peer-urls http://127.0.0.1:2380 \
    --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster ladle=http://127.0.0.1:2380 \
    >"$DATA/etcd.log" 2>&1 &
  echo $! >"$DATA/etcd.pid"
  for _ in $(seq 1 100); do
    curl -sf --max-time 1 "$ETCD_URL/health" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "cluster: etcd did not start; see $DATA/etcd.log" >&2
  exit 1
}

start_node() {
  local i=$1 n=$2 bin=$3
  local dir="$DATA/node$i"
  mkdir -p "$dir"
  alive "$dir/pid" && return 0
  local sync=()
  if ((n == 1)); then sync=(--sync-replicas 0); fi
  local secret=()
  if [[ -z "${LADLE_CLUSTER_SECRET:-}${LADLE_CLUSTER_SECRET_FILE:-}" ]]; then
    if [[ ! -s "$DATA/cluster-secret" ]]; then
      (umask 077 && head -c 32 /dev/urandom | base64 >"$DATA/cluster-secret")
    fi
    secret=(--cluster-secret-file "$DATA/cluster-secret")
  fi
  # shellcheck disable=SC2086
  "$bin" --listen "127.0.0.1:$((3310 + i))" --metrics-listen "127.0.0.1:$((6040 + i))" \
    --data-dir "$dir/data" --etcd "$ETCD_URL" --node-id "$i" \
    --replication-listen "127.0.0.1:$((7310 + i))" "${sync[@]}" "${secret[@]}" ${LADLE_CLUSTER_ARGS:-} \
    >>"$dir/ladle.log" 2>&1 &
  echo $! >"$dir/pid"
}

status_line() {
  local i=$1 dir="$DATA/node$1" pid="-" role=down applied="-"
  if alive "$dir/pid"; then
    pid=$(cat "$dir/pid")
    local health
    health=$(curl -s --max-time 1 "http://127.0.0.1:$((6040 + i))/health" || true)
    case "${health%% *}" in
      primary) role=primary ;;
      replica) role=replica ;;
      # electing, catching up, or diverged (must be re-bootstrapped): not
      # (yet) a replica that is up to date.
      *) role=catching-up ;;
    esac
    applied=$(sed -n 's/.*applied=\([0-9]*\).*/\1/p' <<<"$health")
    applied=${applied:--}
  fi
  echo "node=$i pid=$pid mysql=127.0.0.1:$((3310 + i)) role=$role applied=$applied"
}

case "${1:-}" in
  up)
    n=${2:-3}
    if ! [[ "$n" =~ ^[1-9]$ ]]; then
      echo "usage: scripts/cluster.sh up [N] (1..9 nodes)" >&2
      exit 2
    fi
    bin=${LADLE_BIN:-}
    if [[ -z "$bin" ]]; then
      cargo build --release --quiet -p ladle-server --bin ladle
      bin="${CARGO_TARGET_DIR:-$PWD/target}/release/ladle"
    fi
    start_etcd
    for i in $(seq 1 "$n"); do start_node "$i" "$n" "$bin"; done
    for _ in $(seq 1 600); do
      for i in $(seq 1 "$n"); do
        if curl -s --max-time 1 "http://127.0.0.1:$((6040 + i))/health" 2>/dev/null | grep -q '^primary'; then
          for j in $(node_ids); do status_line "$j"; done
          exit 0
        fi
      done
      sleep 0.1
    done
    echo "cluster: no primary elected within 60 s; see $DATA/node*/ladle.log" >&2
    exit 1
    ;;
  status)
    for i in $(node_ids); do status_line "$i"; done
    ;;
  down)
    for i in $(node_ids); do
      pidfile="$DATA/node$i/pid"
      if alive "$pidfile"; then kill "$(cat "$pidfile")" 2>/dev/null || true; fi
    done
    for i in $(node_ids); do
      pidfile="$DATA/node$i/pid"
      for _ in $(seq 1 300); do alive "$pidfile" || break; sleep 0.1; done
      if alive "$pidfile"; then kill -9 "$(cat "$pidfile")" 2>/dev/null || true; fi
      rm -f "$pidfile"
    done
    if alive "$DATA/etcd.pid"; then
      kill "$(cat "$DATA/etcd.pid")" 2>/dev/null || true
      for _ in $(seq 1 100); do alive "$DATA/etcd.pid" || break; sleep 0.1; done
    fi
    rm -f "$DATA/etcd.pid"
    ;;
  *)
    echo "usage: scripts/cluster.sh up [N] | status | down" >&2
    exit 2
    ;;
esac
