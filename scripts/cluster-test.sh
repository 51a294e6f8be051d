#!/usr/bin/env bash
# The test of scripts/cluster.sh's contract (issue #16), run by
# scripts/test.sh (so by CI) with the debug binary. As a user would:
#   1. `cluster.sh up 3` (LADLE_BIN, a temporary LADLE_CLUSTER_DATA);
#      `status` then shows one primary and two replicas, each line in the
#      documented format, with the node's live pid and its MySQL port;
#   2. rows written through the primary and through both replicas
#      (forwarded), and each node reads every row back in the session
#      that wrote there (read-your-writes);
#   3. kill -9 of the primary: a new primary within 30 s, `status` shows
#      the old one down, and the new primary holds every acknowledged row
#      and takes writes, also forwarded by the surviving replica;
#   4. `cluster.sh down`: no node and no etcd process left, ports free.
# The cluster uses cluster.sh's fixed ports (etcd 2379-2380, nodes
# 3311-3313, 6041-6043, 7311-7313): the test refuses to start when one is
# taken (a `cluster.sh up` by hand, say) and holds a lock so two runs on
# one machine take turns. Every wait is a bounded poll. On failure it
# prints `status` and the end of every node's and etcd's log; the cluster
# is stopped and its processes are gone in every case (exit trap).
#
# Environment: LADLE_BIN (default: $CARGO_TARGET_DIR/debug/ladle, built
# if missing). Needs etcd, curl and the mariadb client (scripts/deps.sh).
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."
ROOT="$PWD"

say() { echo "cluster-test: $*"; }
fail() { echo "cluster-test: FAILED: $*" >&2; exit 1; }
now_ms() { local t=$EPOCHREALTIME; echo $((10#${t/./} / 1000)); }

for tool in etcd curl mariadb flock; do
  command -v "$tool" >/dev/null || fail "$tool is not installed (scripts/deps.sh installs it)"
done
target="${CARGO_TARGET_DIR:-$ROOT/target}"
export LADLE_BIN="${LADLE_BIN:-$target/debug/ladle}"
[[ -x "$LADLE_BIN" ]] || cargo build -p ladle-server --bin ladle
# The cluster's own settings only: no extra flags or secret from the caller.
unset LADLE_CLUSTER_ARGS LADLE_CLUSTER_SECRET LADLE_CLUSTER_SECRET_FILE

# One run at a time per machine: the ports are fixed.
exec 9>"${TMPDIR:-/tmp}/ladle-cluster-test.lock"
flock -w 300 9 || fail "another cluster test held the lock for 5 minutes"
PORTS=(2379 2380 3311 3312 3313 6041 6042 6043 7311 7312 7313)
for port in "${PORTS[@]}"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    fail "127.0.0.1:$port is taken (a cluster started by hand? scripts/cluster.sh down)"
  fi
done

export LADLE_CLUSTER_DATA
LADLE_CLUSTER_DATA="$(mktemp -d "${TMPDIR:-/tmp}/ladle-cluster-test.XXXXXX")"
DATA="$LADLE_CLUSTER_DATA"
pids=() # every node's and etcd's pid, once known
ok=0

# A process that exists and is not a zombie (a killed node whose parent,
# cluster.sh, has exited waits for init to reap it).
running() { [[ -r "/proc/$1/stat" ]] && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }

cleanup() {
  local rc=$? pid
  trap - EXIT
  if ((ok == 0)); then
    echo "cluster-test: status at the failure:" >&2
    scripts/cluster.sh status >&2 || true
    for log in "$DATA"/node*/ladle.log "$DATA/etcd.log"; do
      [[ -f "$log" ]] || continue
      echo "---- last lines of ${log#"$DATA"/}" >&2
      tail -n 40 "$log" >&2
    done
  fi
  scripts/cluster.sh down >/dev/null 2>&1 || true
  # Whatever `down` could not stop (it has no pid file for a process it
  # never recorded), by the pids this test saw.
  for pid in "${pids[@]}"; do
    running "$pid" && kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$DATA"
  exit "$rc"
}
trap cleanup EXIT

sql() { # sql <node> <statements>: tab-separated rows, no header
  MYSQL_PWD="${LADLE_PASSWORD:-}" mariadb --no-defaults --protocol=tcp -h 127.0.0.1 \
    -P $((3310 + $1)) -u root -N -B -e "$2"
}

# `status`, checked line by line against the contract; prints it.
LINE='^node=([1-9]) pid=([0-9]+|-) mysql=127\.0\.0\.1:([0-9]+) role=(primary|replica|catching-up|down) applied=([0-9]+|-)$'
status() {
  local out line i=0
  out="$(scripts/cluster.sh status)"
  while IFS= read -r line; do
    i=$((i + 1))
    [[ "$line" =~ $LINE ]] || fail "status line not in the documented format: '$line'"
    [[ "${BASH_REMATCH[1]}" == "$i" ]] || fail "status line $i is for node ${BASH_REMATCH[1]}: '$line'"
    [[ "${BASH_REMATCH[3]}" == $((3310 + i)) ]] || fail "node $i's MySQL port is not $((3310 + i)): '$line'"
    if [[ "${BASH_REMATCH[4]}" == down ]]; then
      [[ "${BASH_REMATCH[2]}" == - && "${BASH_REMATCH[5]}" == - ]] ||
        fail "a down node with a pid or a position: '$line'"
    else
      [[ "${BASH_REMATCH[2]}" == "$(cat "$DATA/node$i/pid")" ]] ||
        fail "node $i's pid is not the one it was started with: '$line'"
      # (The killed node may have died since status looked: for a moment
      # after kill -9 it is still listed, as catching-up.)
      [[ "$i" == "${killed_node:-}" ]] || running "${BASH_REMATCH[2]}" ||
        fail "node $i's pid is not a running process: '$line'"
    fi
  done <<<"$out"
  ((i == 3)) || fail "status has $i lines, not 3: $out"
  echo "$out"
}
role_of() { sed -n "s/^node=$1 .* role=\([a-z-]*\) .*/\1/p"; }
count_role() { grep -c " role=$1 " || true; }
primary_of() { sed -n 's/^node=\([0-9]\) .* role=primary .*/\1/p'; }

# Polls `status` until <predicate> holds for it (at most <seconds>).
wait_status() { # wait_status <seconds> <what> <predicate...>
  local seconds=$1 what=$2 deadline out
  shift 2
  deadline=$(($(now_ms) + seconds * 1000))
  while :; do
    out="$(status)"
    if "$@" <<<"$out"; then
      echo "$out"
      return 0
    fi
    (($(now_ms) < deadline)) || fail "no $what within $seconds s; last status:"$'\n'"$out"
    sleep 0.1
  done
}
one_primary_two_replicas() {
  local s
  s="$(cat)"
  [[ "$(count_role primary <<<"$s")" == 1 && "$(count_role replica <<<"$s")" == 2 ]]
}

# 1. Up, and the documented status.
started=$(now_ms)
scripts/cluster.sh up 3 >"$DATA/up.out" 2>&1 || { cat "$DATA/up.out" >&2; fail "cluster.sh up 3"; }
for i in 1 2 3; do pids+=("$(cat "$DATA/node$i/pid")"); done
pids+=("$(cat "$DATA/etcd.pid")")
say "up 3 returned after $(($(now_ms) - started)) ms"
st="$(wait_status 60 "primary and two replicas" one_primary_two_replicas)"
echo "$st"
old=$(primary_of <<<"$st")
replicas=()
for i in 1 2 3; do [[ "$i" == "$old" ]] || replicas+=("$i"); done
say "node $old is primary, nodes ${replicas[*]} replicas ($(($(now_ms) - started)) ms after up)"

# 2. Writes through every node, each read back where it was written. A
# session's read after its write sees it (on a replica: waits until the
# node has applied it), and every earlier write was acknowledged before,
# so each node must return every row written so far.
acked=()
write_and_read() { # write_and_read <node> <first id> <count>
  local node=$1 first=$2 count=$3 values=() id got want
  for ((id = first; id < first + count; id++)); do values+=("($id, $node, REPEAT('x', $id % 50))"); done
  got="$(sql "$node" "INSERT INTO clu.t VALUES $(IFS=,; echo "${values[*]}"); SELECT id FROM clu.t ORDER BY id")" ||
    fail "writing ids $first.. through node $node"
  for ((id = first; id < first + count; id++)); do acked+=("$id"); done
  want="$(printf '%s\n' "${acked[@]}" | sort -n)"
  [[ "$got" == "$want" ]] ||
    fail "node $node read back $(wc -l <<<"$got") rows after its write, not the ${#acked[@]} acknowledged: $(diff <(echo "$want") <(echo "$got") | head -5)"
}
sql "$old" "CREATE DATABASE clu; CREATE TABLE clu.t (id INT PRIMARY KEY, via INT NOT NULL, pad VARCHAR(64) NOT NULL)" ||
  fail "CREATE TABLE on the primary"
write_and_read "$old" 1 100
write_and_read "${replicas[0]}" 101 100
write_and_read "${replicas[1]}" 201 100
write_and_read "$old" 301 100
say "${#acked[@]} rows written through the primary and both replicas, read back on each"

# 3. kill -9 of the primary.
killed=$(now_ms)
killed_node=$old
kill -9 "$(cat "$DATA/node$old/pid")"
new_primary() {
  local s p
  s="$(cat)"
  p=$(primary_of <<<"$s")
  [[ -n "$p" && "$p" != "$old" && "$(role_of "$old" <<<"$s")" == down ]]
}
st="$(wait_status 30 "new primary after the kill" new_primary)"
echo "$st"
new=$(primary_of <<<"$st")
say "node $new is primary $(($(now_ms) - killed)) ms after kill -9 of node $old; node $old is down"
other=$((6 - old - new))
# Every acknowledged row on the new primary, which takes writes.
write_and_read "$new" 401 50
# The surviving replica follows the new primary and forwards to it.
st="$(wait_status 30 "replica following the new primary" \
  bash -c "grep -q '^node=$other .* role=replica '")"
write_and_read "$other" 451 50
say "all ${#acked[@]} acknowledged rows on the new primary and the surviving replica"

# 4. Down, and nothing left.
stopping=$(now_ms)
scripts/cluster.sh down
say "down took $(($(now_ms) - stopping)) ms"
for pid in "${pids[@]}"; do
  running "$pid" && fail "process $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" | cut -c1-80)) outlived cluster.sh down"
done
for port in "${PORTS[@]}"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then fail "127.0.0.1:$port still answers after down"; fi
done
[[ -z "$(scripts/cluster.sh status | grep -v ' role=down ' || true)" ]] || fail "status after down: $(scripts/cluster.sh status)"
ok=1
say "ok ($(($(now_ms) - started)) ms)"
