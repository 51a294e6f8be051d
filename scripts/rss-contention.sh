#!/usr/bin/env bash
# Resident memory against --memory-limit under CPU contention (issue #17),
# a measurement by hand, not in CI: starts `ladle --memory-limit` on a free
# loopback port (durability async: the table lives in RocksDB, so what
# grows is the view state and the process around it), loads ROWS rows,
# then runs point reads of distinct keys (`SELECT id, REPEAT(s, REPEATS)
# FROM t WHERE id = ?`: about 100 * REPEATS bytes of view state per key,
# in all ROWS * 100 * REPEATS bytes, several times the limit, so the
# server evicts all along) from CONNECTIONS mariadb clients, each reading
# its own shuffled share of the keys, while BUSY processes spin on the
# cores. Samples VmRSS and the thread count from /proc every 0.5 s and
# prints the baseline (after the load and one read), the peak, the end,
# and the view state the server counts (ladle_view_memory_bytes).
#
# Environment: LADLE_BIN (default $CARGO_TARGET_DIR/debug/ladle), LIMIT
# (default 256M), ROWS (default 200000), REPEATS (default 40),
# CONNECTIONS (default 16), BUSY (spinning processes, default the number
# of cores; 0 for a quiet run), LADLE_ARGS (more server flags),
# RSS_SAMPLES (write the samples here: seconds rss_kb threads).
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-$PWD/target}"
bin="${LADLE_BIN:-$target/debug/ladle}"
limit="${LIMIT:-256M}" rows="${ROWS:-200000}" repeats="${REPEATS:-40}"
conns="${CONNECTIONS:-16}" busy="${BUSY:-$(nproc)}"
[[ -x "$bin" ]] || cargo build -p ladle-server --bin ladle

work="$(mktemp -d "${TMPDIR:-/tmp}/ladle-rss.XXXXXX")"
children=()
cleanup() {
  local pid
  for pid in "${children[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port) metrics=$(free_port)
# shellcheck disable=SC2086
"$bin" --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$metrics" \
  --data-dir "$work/data" --durability async --snapshot-interval 0 \
  --memory-limit "$limit" ${LADLE_ARGS:-} >"$work/ladle.log" 2>&1 &
pid=$!
children+=("$pid")
for _ in $(seq 300); do
  curl -sf --max-time 1 "http://127.0.0.1:$metrics/health" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/ladle.log" >&2; exit 1; }
  sleep 0.1
done
sql() { mariadb --no-defaults --protocol=tcp -h 127.0.0.1 -P "$port" -u root -N -B "$@"; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status"; }
threads() { awk '/^Threads:/ { print $2 }' "/proc/$pid/status"; }

sql -e "CREATE DATABASE rss; CREATE TABLE rss.t (id INT PRIMARY KEY, s VARCHAR(100) NOT NULL)"
python3 - "$rows" >"$work/load.sql" <<'PY'
import sys
rows = int(sys.argv[1])
for start in range(0, rows, 1000):
    values = ",".join(f"({i}, '{i:0>100}')" for i in range(start, min(rows, start + 1000)))
    print(f"INSERT INTO rss.t VALUES {values};")
PY
sql <"$work/load.sql"
read_sql="SELECT id, REPEAT(s, $repeats) FROM rss.t WHERE id ="
sql -e "$read_sql 0" >/dev/null
python3 - "$rows" "$conns" "$work" "$read_sql" <<'PY'
import random, sys
rows, conns, work, read = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
ids = list(range(rows))
random.Random(17).shuffle(ids)
for c in range(conns):
    with open(f"{work}/reads{c}.sql", "w") as f:
        for i in ids[c::conns]:
            f.write(f"{read} {i};\n")
PY
baseline=$(rss_kb)
echo "rss-contention: $rows rows loaded; RSS $((baseline >> 10)) MB, $(threads) threads; limit $limit; $conns connections, $busy busy processes"

for _ in $(seq "$busy"); do
  sh -c 'while :; do :; done' &
  children+=("$!")
done
start=$EPOCHREALTIME
readers=()
for c in $(seq 0 $((conns - 1))); do
  sql <"$work/reads$c.sql" >/dev/null &
  readers+=("$!")
done
children+=("${readers[@]}")
peak=$baseline max_threads=0
samples="${RSS_SAMPLES:-$work/samples}"
: >"$samples"
while :; do
  running=0
  for r in "${readers[@]}"; do kill -0 "$r" 2>/dev/null && running=1; done
  r=$(rss_kb) t=$(threads)
  ((r > peak)) && peak=$r
  ((t > max_threads)) && max_threads=$t
  echo "$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') $r $t" >>"$samples"
  ((running)) || break
  sleep 0.5
done
for r in "${readers[@]}"; do wait "$r" || { echo "rss-contention: a reader failed" >&2; exit 1; }; done
elapsed=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
view=$(curl -s "http://127.0.0.1:$metrics/metrics" | awk '/^ladle_view_memory_bytes/ { s += $2 } END { printf "%d", s / 1048576 }')
lim_kb=$(awk '/^ladle_memory_limit_bytes / { printf "%d", $2 / 1024 }' <(curl -s "http://127.0.0.1:$metrics/metrics"))
# Where the resident memory is: thread stacks (mappings of the stack size
# the server asks for, 64 MB), other anonymous memory (the allocator's
# heap), files (binary, libraries).
breakdown=$(python3 - "$pid" <<'PY'
import re, sys
stacks = anon = files = nstacks = 0
size = rss = 0
name = ""
def flush():
    global stacks, anon, files, nstacks
    if abs(size - (64 << 10)) <= 64 and not name:
        stacks += rss; nstacks += 1
    elif name and not name.startswith("["):
        files += rss
    else:
        anon += rss
with open(f"/proc/{sys.argv[1]}/smaps") as f:
    for line in f:
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            flush()
            parts = line.split(None, 5)
            name = parts[5].strip() if len(parts) > 5 else ""
            size = rss = 0
        elif line.startswith("Size:"):
            size = int(line.split()[1])
        elif line.startswith("Rss:"):
            rss = int(line.split()[1])
flush()
print(f"{nstacks} thread stacks {stacks >> 10} MB, other anonymous {anon >> 10} MB, files {files >> 10} MB")
PY
)
echo "rss-contention: $rows reads in ${elapsed} s; RSS baseline $((baseline >> 10)) MB, peak $((peak >> 10)) MB (grew $(((peak - baseline) >> 10)) MB, $(awk -v g=$((peak - baseline)) -v l="$lim_kb" 'BEGIN { printf "%.2f", g / l }')x the limit), end $(($(rss_kb) >> 10)) MB; threads at most $max_threads; view state $view MB"
echo "rss-contention: at the end: $breakdown"
