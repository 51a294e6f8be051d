#!/usr/bin/env bash
# Runs the Lobsters and vote workloads against MariaDB and Ladle on this
# machine and prints a table of Ladle/MariaDB ratios.
#
#   lobsters: MariaDB with --queries original (the app's hand-tuned SQL),
#             Ladle with --queries natural (no counters, aggregates in reads)
#   vote:     the same queries on both
#
# Both servers listen on loopback only, use throw-away data directories and
# are killed on exit. Environment (defaults are small, for a quick look):
#   SCALE=0.1 LOBSTERS_RUNTIME=10 LOBSTERS_WARMUP=3 START_RATE=8 STEP_FACTOR=2
#   REFINE_STEPS=2 SLO_P95_MS=100 CONNECTIONS=16
#   VOTE_ARTICLES=10000 VOTE_RUNTIME=10 VOTE_WARMUP=3 VOTE_READ_FRACTION=0.95
#   MARIADB_PORT=13306 LADLE_PORT=13307 LADLE_METRICS_PORT=16034
#   OUT_DIR=(temp dir)  JSON reports are kept there
#   SKIP_BUILD=1        use already built release binaries
#   CARGO_TARGET_DIR    where cargo builds (default: <repo>/target)
set -euo pipefail

SCALE=${SCALE:-0.1}
LOBSTERS_RUNTIME=${LOBSTERS_RUNTIME:-10}
LOBSTERS_WARMUP=${LOBSTERS_WARMUP:-3}
START_RATE=${START_RATE:-8}
STEP_FACTOR=${STEP_FACTOR:-2}
REFINE_STEPS=${REFINE_STEPS:-2}
SLO_P95_MS=${SLO_P95_MS:-100}
CONNECTIONS=${CONNECTIONS:-16}
VOTE_ARTICLES=${VOTE_ARTICLES:-10000}
VOTE_RUNTIME=${VOTE_RUNTIME:-10}
VOTE_WARMUP=${VOTE_WARMUP:-3}
VOTE_READ_FRACTION=${VOTE_READ_FRACTION:-0.95}
MARIADB_PORT=${MARIADB_PORT:-13306}
LADLE_PORT=${LADLE_PORT:-13307}
LADLE_METRICS_PORT=${LADLE_METRICS_PORT:-16034}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
WORK=$(mktemp -d /tmp/side-by-side.XXXXXX)
OUT_DIR=${OUT_DIR:-$WORK/out}
mkdir -p "$OUT_DIR"
MARIADB_PID=""
LADLE_PID=""

log() { echo "[side-by-side $(date +%H:%M:%S)] $*" >&2; }

cleanup() {
  local rc=$?
  [[ -n "$LADLE_PID" ]] && kill "$LADLE_PID" 2>/dev/null && wait "$LADLE_PID" 2>/dev/null || true
  [[ -n "$MARIADB_PID" ]] && kill "$MARIADB_PID" 2>/dev/null && wait "$MARIADB_PID" 2>/dev/null || true
  rm -rf "$WORK/mariadb" "$WORK/ladle"
  log "servers stopped; reports in $OUT_DIR"
  exit $rc
}
trap cleanup EXIT INT TERM

wait_port() { # host port name seconds
  local i
  for ((i = 0; i < $4 * 10; i++)); do
    if (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  log "$3 did not start listening on $1:$2 within $4s"
  return 1
}

if [[ -z "${SKIP_BUILD:-}" ]]; then
  log "building release binaries (lobsters-bench, ladle)"
  (cd "$REPO" && cargo build --release -p lobsters-bench -p ladle-server)
fi
BENCH="$TARGET/release/lobsters-bench"
LADLE="$TARGET/release/ladle"

if ! command -v mariadbd >/dev/null; then
  if [[ $(id -u) == 0 ]]; then
    log "installing Debian's mariadb-server"
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q mariadb-server
  else
    log "mariadbd not found: apt-get install mariadb-server"; exit 1
  fi
fi

log "starting MariaDB on 127.0.0.1:$MARIADB_PORT (datadir $WORK/mariadb)"
mkdir -p "$WORK/mariadb"
mariadb-install-db --datadir="$WORK/mariadb/data" --auth-root-authentication-method=normal --user="$(id -un)" \
  >"$WORK/mariadb-install.log" 2>&1
mariadbd --datadir="$WORK/mariadb/data" --port="$MARIADB_PORT" --socket="$WORK/mariadb/sock" \
  --bind-address=127.0.0.1 --innodb_flush_log_at_trx_commit=1 --innodb_buffer_pool_size=1G \
  --max_connections=1000 --user="$(id -un)" >"$WORK/mariadb.log" 2>&1 &
MARIADB_PID=$!
wait_port 127.0.0.1 "$MARIADB_PORT" MariaDB 60

log "starting Ladle on 127.0.0.1:$LADLE_PORT (--durability sync, data dir $WORK/ladle)"
"$LADLE" --data-dir "$WORK/ladle" --listen "127.0.0.1:$LADLE_PORT" \
  --metrics-listen "127.0.0.1:$LADLE_METRICS_PORT" --durability sync >"$WORK/ladle.log" 2>&1 &
LADLE_PID=$!
wait_port 127.0.0.1 "$LADLE_PORT" Ladle 60

MARIADB_URL="mysql://root@127.0.0.1:$MARIADB_PORT"
LADLE_URL="mysql://root@127.0.0.1:$LADLE_PORT"

run() { # name args...: runs one benchmark, keeps going if it fails
  local name=$1; shift
  log "running $name"
  if ! "$BENCH" "$@" --json "$OUT_DIR/$name.json" 2>&1 | tee "$OUT_DIR/$name.log" >&2; then
    log "$name FAILED (see $OUT_DIR/$name.log)"
  fi
  [[ -s "$OUT_DIR/$name.json" ]] || log "$name wrote no report"
}

VOTE_ARGS=(--articles "$VOTE_ARTICLES" --read-fraction "$VOTE_READ_FRACTION" --runtime "$VOTE_RUNTIME"
  --warmup "$VOTE_WARMUP" --connections "$CONNECTIONS" --prime)
run vote-mariadb vote --url "$MARIADB_URL/vote" "${VOTE_ARGS[@]}"
run vote-ladle vote --url "$LADLE_URL/vote" "${VOTE_ARGS[@]}"

LOB_ARGS=(--scale "$SCALE" --prime --runtime "$LOBSTERS_RUNTIME" --warmup "$LOBSTERS_WARMUP" --find-max
  --slo-p95-ms "$SLO_P95_MS" --target-rate "$START_RATE" --step-factor "$STEP_FACTOR"
  --refine-steps "$REFINE_STEPS" --connections "$CONNECTIONS")
run lobsters-mariadb lobsters --url "$MARIADB_URL/lobsters" --queries original "${LOB_ARGS[@]}"
run lobsters-ladle lobsters --url "$LADLE_URL/lobsters" --queries natural "${LOB_ARGS[@]}"

python3 - "$OUT_DIR" <<'PY'
import json, os, sys
out = sys.argv[1]
def load(name):
    try:
        with open(os.path.join(out, name + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
rows = [
    ("vote ops/s", "vote", lambda r: r["ops_per_s"], True),
    ("vote read p95 ms", "vote", lambda r: r["read_p95_ms"], False),
    ("vote write p95 ms", "vote", lambda r: r["write_p95_ms"], False),
    ("lobsters max pages/s", "lobsters", lambda r: r["max_pages_per_s"], True),
]
print()
print(f"{'metric':<24}{'MariaDB':>14}{'Ladle':>14}{'Ladle/MariaDB':>16}")
for label, w, get, _ in rows:
    vals = []
    for server in ("mariadb", "ladle"):
        r = load(f"{w}-{server}")
        try:
            vals.append(get(r) if r else None)
        except (KeyError, TypeError):
            vals.append(None)
    fmt = lambda v: "failed" if v is None else f"{v:.2f}"
    ratio = f"{vals[1] / vals[0]:.2f}x" if None not in vals and vals[0] else "n/a"
    print(f"{label:<24}{fmt(vals[0]):>14}{fmt(vals[1]):>14}{ratio:>16}")
print("(lobsters: MariaDB runs --queries original, Ladle --queries natural)")
PY
