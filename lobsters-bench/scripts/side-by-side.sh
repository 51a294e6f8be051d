#!/usr/bin/env bash
# Runs the vote, Lobsters and (when installed) sysbench workloads against
# MariaDB and Ladle on this machine, prints a table of Ladle/MariaDB
# ratios, appends one line to lobsters-bench/results/history.csv and draws
# SVG charts into OUT_DIR.
#
#   vote:      MariaDB --queries original (a counter column), Ladle natural
#   lobsters:  MariaDB --queries original (the app's hand-tuned SQL), Ladle
#              --queries natural (no counters, aggregates in reads): first
#              a fixed offered rate right after --prime (its windows show
#              the cold start; server CPU per page, via /proc, is measured
#              after the warm-up), then the max rate within the SLO on the
#              same, now warm, data
#   sysbench:  oltp_point_select, oltp_read_only, oltp_read_write (prepared
#              statements through the MariaDB C client), server CPU per query
#
# Both servers listen on loopback only, use throw-away data directories and
# are killed on exit. Environment (Lobsters at scale 1, where #13 measures it; short runs):
#   SCALE=1 LOBSTERS_RUNTIME=10 LOBSTERS_WARMUP=3 START_RATE=8 STEP_FACTOR=2
#   REFINE_STEPS=2 SLO_P95_MS=100 CONNECTIONS=16
#   FIXED_RATE=200 FIXED_RUNTIME=30 FIXED_WARMUP=60   the CPU-per-page run
#   VOTE_ARTICLES=10000 VOTE_RUNTIME=10 VOTE_WARMUP=3 VOTE_READ_FRACTION=0.95
#   SYSBENCH_TABLES=2 SYSBENCH_TABLE_SIZE=20000 SYSBENCH_THREADS=4
#   SYSBENCH_TIME=20 SYSBENCH_TESTS="oltp_point_select oltp_read_only oltp_read_write"
#                       (issue #13's target: SYSBENCH_TABLES=4 SYSBENCH_TABLE_SIZE=50000)
#   SKIP_SYSBENCH=1     leave sysbench out even when installed
#   MARIADB_PORT=13306 LADLE_PORT=13307 LADLE_METRICS_PORT=16034
#   OUT_DIR=(temp dir)  JSON reports, logs and charts are kept there
#   HISTORY=<repo>/lobsters-bench/results/history.csv   NO_HISTORY=1: don't append
#   SKIP_BUILD=1        use already built release binaries
#   CARGO_TARGET_DIR    where cargo builds (default: <repo>/target)
set -euo pipefail

SCALE=${SCALE:-1}
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
FIXED_RATE=${FIXED_RATE:-200}
FIXED_RUNTIME=${FIXED_RUNTIME:-30}
FIXED_WARMUP=${FIXED_WARMUP:-60}
SYSBENCH_TABLES=${SYSBENCH_TABLES:-2}
SYSBENCH_TABLE_SIZE=${SYSBENCH_TABLE_SIZE:-20000}
SYSBENCH_THREADS=${SYSBENCH_THREADS:-4}
SYSBENCH_TIME=${SYSBENCH_TIME:-20}
SYSBENCH_TESTS=${SYSBENCH_TESTS:-oltp_point_select oltp_read_only oltp_read_write}
MARIADB_PORT=${MARIADB_PORT:-13306}
LADLE_PORT=${LADLE_PORT:-13307}
LADLE_METRICS_PORT=${LADLE_METRICS_PORT:-16034}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HISTORY=${HISTORY:-$REPO/lobsters-bench/results/history.csv}
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

# utime + stime of a process, in seconds, from /proc/PID/stat (fields
# counted after the ")" that ends the command name).
proc_cpu_seconds() { # pid
  awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); split($0, f, " "); printf "%.3f\n", (f[12] + f[13]) / hz }' \
    "/proc/$1/stat"
}

VOTE_ARGS=(--articles "$VOTE_ARTICLES" --read-fraction "$VOTE_READ_FRACTION" --runtime "$VOTE_RUNTIME"
  --warmup "$VOTE_WARMUP" --connections "$CONNECTIONS" --prime)
run vote-mariadb vote --url "$MARIADB_URL/vote" --queries original --server-pid "$MARIADB_PID" "${VOTE_ARGS[@]}"
run vote-ladle vote --url "$LADLE_URL/vote" --queries natural --server-pid "$LADLE_PID" "${VOTE_ARGS[@]}"

# The fixed-rate run primes: Ladle's views start cold, which its windows
# show; the find-max search then runs on warm data (a first step lost to the
# cold start would send the search downwards).
FIXED_ARGS=(--scale "$SCALE" --prime --runtime "$FIXED_RUNTIME" --warmup "$FIXED_WARMUP"
  --target-rate "$FIXED_RATE" --slo-p95-ms "$SLO_P95_MS" --connections "$CONNECTIONS")
run lobsters-fixed-mariadb lobsters --url "$MARIADB_URL/lobsters" --queries original --server-pid "$MARIADB_PID" "${FIXED_ARGS[@]}"
run lobsters-fixed-ladle lobsters --url "$LADLE_URL/lobsters" --queries natural --server-pid "$LADLE_PID" "${FIXED_ARGS[@]}"

LOB_ARGS=(--scale "$SCALE" --runtime "$LOBSTERS_RUNTIME" --warmup "$LOBSTERS_WARMUP" --find-max
  --slo-p95-ms "$SLO_P95_MS" --target-rate "$START_RATE" --step-factor "$STEP_FACTOR"
  --refine-steps "$REFINE_STEPS" --connections "$CONNECTIONS")
run lobsters-mariadb lobsters --url "$MARIADB_URL/lobsters" --queries original --server-pid "$MARIADB_PID" "${LOB_ARGS[@]}"
run lobsters-ladle lobsters --url "$LADLE_URL/lobsters" --queries natural --server-pid "$LADLE_PID" "${LOB_ARGS[@]}"

run_sysbench() { # server port pid: prepares sbtest, runs each test, records server CPU
  local server=$1 port=$2 pid=$3 t before after
  local sb=(--db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$port" --mysql-user=root --mysql-password=
    --mysql-db=sbtest --tables="$SYSBENCH_TABLES" --table-size="$SYSBENCH_TABLE_SIZE" --threads="$SYSBENCH_THREADS")
  log "sysbench on $server: prepare ($SYSBENCH_TABLES x $SYSBENCH_TABLE_SIZE rows)"
  if ! mariadb -h 127.0.0.1 -P "$port" -u root -e "CREATE DATABASE IF NOT EXISTS sbtest" \
      >"$OUT_DIR/sysbench-prepare-$server.log" 2>&1 ||
    ! timeout 900 sysbench oltp_read_write "${sb[@]}" prepare >>"$OUT_DIR/sysbench-prepare-$server.log" 2>&1; then
    log "sysbench prepare FAILED on $server (see $OUT_DIR/sysbench-prepare-$server.log)"
    return 0
  fi
  for t in $SYSBENCH_TESTS; do
    log "sysbench $t on $server (${SYSBENCH_TIME}s)"
    before=$(proc_cpu_seconds "$pid")
    timeout $((SYSBENCH_TIME + 120)) sysbench "$t" "${sb[@]}" --time="$SYSBENCH_TIME" --report-interval=0 run \
      >"$OUT_DIR/sysbench-$t-$server.log" 2>&1 || log "sysbench $t FAILED on $server (see $OUT_DIR/sysbench-$t-$server.log)"
    after=$(proc_cpu_seconds "$pid")
    echo "$before $after" >"$OUT_DIR/sysbench-$t-$server.cpu"
  done
}

if [[ -z "${SKIP_SYSBENCH:-}" ]] && command -v sysbench >/dev/null; then
  run_sysbench mariadb "$MARIADB_PORT" "$MARIADB_PID"
  run_sysbench ladle "$LADLE_PORT" "$LADLE_PID"
else
  log "sysbench skipped (SKIP_SYSBENCH set or sysbench not installed: apt-get install sysbench)"
fi

HISTORY_ARGS=()
if [[ -z "${NO_HISTORY:-}" ]]; then
  HISTORY_ARGS=(--history "$HISTORY" --commit "$(git -C "$REPO" describe --always --dirty)")
fi
python3 "$REPO/lobsters-bench/scripts/side-by-side-summary.py" "$OUT_DIR" --scale "$SCALE" \
  --fixed-rate "$FIXED_RATE" --sysbench-tests "$SYSBENCH_TESTS" "${HISTORY_ARGS[@]}"

chart() { # name title: an SVG of p95 and rate per window from NAME-{mariadb,ladle}.json
  local name=$1 title=$2; shift 2
  local series=() server
  for server in MariaDB Ladle; do
    if [[ -s "$OUT_DIR/$name-${server,,}.json" ]]; then
      series+=(--series "$server=$OUT_DIR/$name-${server,,}.json")
    fi
  done
  if [[ ${#series[@]} -gt 0 ]]; then
    "$BENCH" chart "${series[@]}" --title "$title" --out "$OUT_DIR/$name.svg" >&2 || log "chart $name FAILED"
  fi
}
chart lobsters-fixed "Lobsters at $FIXED_RATE pages/s offered right after --prime, scale $SCALE (MariaDB original, Ladle natural)"
chart lobsters "Lobsters max-rate search, scale $SCALE (each rate step in turn)"
chart vote "vote, $VOTE_ARTICLES articles (MariaDB original, Ladle natural)"
if [[ -z "${NO_HISTORY:-}" && -s "$HISTORY" ]]; then
  "$BENCH" chart --history "$HISTORY" --title "side-by-side runs: Ladle/MariaDB" --out "$OUT_DIR/history.svg" >&2 ||
    log "history chart FAILED"
fi
log "charts: $(ls "$OUT_DIR"/*.svg 2>/dev/null | tr '\n' ' ')"
