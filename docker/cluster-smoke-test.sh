#!/usr/bin/env bash
# Opt-in check of the docker-compose cluster (issue #16), not run by
# scripts/test.sh or CI (which may have no Docker): builds the images, starts
# docker-compose.yml under its own project name (an existing
# `docker-compose up` keeps its volumes, but must be down: the host ports are
# the same), and then, as a user would:
#   1. waits for a primary; SHOW CLUSTER lists three nodes, one primary;
#   2. runs a writer (one INSERT per mariadb CLI call, unique ids; on any
#      error it moves to the next node's port, so it finds the new primary)
#      and `docker kill`s the primary's container under that load;
#   3. checks that writes are acknowledged again, by another node, and
#      prints the failover time (kill to first acknowledged write) and the
#      errors the writer saw;
#   4. checks on both surviving nodes: every acknowledged id is there, and
#      no id that was refused or never sent.
# Removes its containers, network and volumes at the end.
#
# Usage: docker/cluster-smoke-test.sh   (LADLE_BINARY=... skips the cargo
#        build; LADLE_SMOKE_KEEP=1 leaves the cluster up for a look)
set -euo pipefail
cd "$(dirname "$0")/.."

export LADLE_PASSWORD="smoke-$RANDOM$RANDOM"
export LADLE_CLUSTER_SECRET="smoke-cluster-secret-$RANDOM$RANDOM"
compose=(docker-compose -p ladle-cluster-smoke)
work="$(mktemp -d "${TMPDIR:-/tmp}/ladle-cluster-smoke.XXXXXX")"

fail() { echo "cluster-smoke: $*" >&2; exit 1; }
for port in 3311 3312 3313 6041 6042 6043 9090; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    fail "127.0.0.1:$port is taken (is \`docker-compose up\` running? \`docker-compose down\` first)"
  fi
done

scripts/docker-build.sh
cleanup() {
  [[ -n "${writer:-}" ]] && kill "$writer" 2>/dev/null || true
  if [[ -z "${LADLE_SMOKE_KEEP:-}" ]]; then
    "${compose[@]}" down -v >/dev/null 2>&1 || true
    rm -rf "$work"
  else
    echo "cluster-smoke: left up (${compose[*]} down -v to remove); writer logs in $work" >&2
  fi
}
trap cleanup EXIT
"${compose[@]}" up -d

sql() { # sql <port> <statement>
  mariadb -h 127.0.0.1 -P "$1" -u root -p"$LADLE_PASSWORD" -N -B -e "$2"
}
health() { curl -s --max-time 1 "http://127.0.0.1:$((6040 + $1))/health" || true; }
primary() { # prints the node whose /health says primary, if any
  local i
  for i in 1 2 3; do
    [[ "$(health "$i")" == primary* ]] && { echo "$i"; return 0; }
  done
  return 1
}
now_ms() { local t=$EPOCHREALTIME; echo "${t/./}" | cut -c1-13; }

started=$(now_ms)
for _ in $(seq 600); do primary >/dev/null && break; sleep 0.2; done
old=$(primary) || { "${compose[@]}" logs --tail 30 >&2; fail "no primary within 120 s"; }
echo "cluster-smoke: node $old is primary, $(($(now_ms) - started)) ms after up -d"
# SHOW CLUSTER lists the members as etcd last listed them: until the
# replicas have connected and published, it shows them catching up.
for _ in $(seq 300); do
  cluster="$(sql $((3310 + old)) "SHOW CLUSTER")"
  [[ "$(awk '$3 == "primary"' <<<"$cluster" | wc -l)" == 1 &&
    "$(awk '$3 == "replica"' <<<"$cluster" | wc -l)" == 2 ]] && break
  sleep 0.2
done
echo "$cluster"
[[ "$(awk '$3 == "primary"' <<<"$cluster" | wc -l)" == 1 &&
  "$(awk '$3 == "replica"' <<<"$cluster" | wc -l)" == 2 ]] ||
  fail "SHOW CLUSTER: wanted one primary and two replicas within 60 s"
echo "cluster-smoke: SHOW CLUSTER: ok"
sql $((3310 + old)) "CREATE DATABASE smoke; CREATE TABLE smoke.t (id INT PRIMARY KEY, at BIGINT)"

# The writer: one INSERT per id, sent once. Logs "ms id port" to acked and
# "ms id port error" to errors; an error moves it to the next port.
writer_loop() {
  local id=0 port=$((3310 + old)) out
  while [[ ! -f "$work/stop" ]]; do
    id=$((id + 1))
    if out="$(sql "$port" "INSERT INTO smoke.t VALUES ($id, $(now_ms))" 2>&1)"; then
      echo "$(now_ms) $id $port" >>"$work/acked"
    else
      # mariadb prints the statement before the error: keep the error line.
      echo "$(now_ms) $id $port $(grep -m1 -o 'ERROR [0-9]*.*' <<<"$out" | cut -c1-100)" >>"$work/errors"
      port=$((port % 3 + 3311))
      sleep 0.05
    fi
    echo "$id" >"$work/sent"
  done
}
touch "$work/acked" "$work/errors"
writer_loop &
writer=$!
sleep 5
before=$(wc -l <"$work/acked")
((before > 0)) || fail "no write acknowledged in 5 s before the kill"

killed_at=$(now_ms)
docker kill "$("${compose[@]}" ps -q "ladle$old")" >/dev/null
echo "cluster-smoke: killed node $old (ladle$old) after $before acknowledged writes"
new=""
for _ in $(seq 300); do
  new=$(primary) && [[ "$new" != "$old" ]] && break
  new=""
  sleep 0.1
done
[[ -n "$new" ]] || fail "no new primary within 30 s of the kill"
elected_at=$(now_ms)
for _ in $(seq 300); do
  awk -v t="$killed_at" -v p=$((3310 + old)) '$1 > t && $3 != p { found = 1 } END { exit !found }' \
    "$work/acked" && break
  sleep 0.1
done
first_ack=$(awk -v t="$killed_at" -v p=$((3310 + old)) '$1 > t && $3 != p { print $1; exit }' "$work/acked")
[[ -n "$first_ack" ]] || fail "no write acknowledged by another node within 30 s of the kill"
sleep 5 # the workload goes on
touch "$work/stop"
wait "$writer" || true
writer=""

acked=$(wc -l <"$work/acked")
after=$(awk -v t="$killed_at" '$1 > t' "$work/acked" | wc -l)
echo "cluster-smoke: node $new elected primary $((elected_at - killed_at)) ms after the kill (seen on /health)"
echo "cluster-smoke: failover: first write acknowledged by node $new $((first_ack - killed_at)) ms after the kill"
echo "cluster-smoke: writes: $(cat "$work/sent") sent, $acked acknowledged ($after after the kill), $(wc -l <"$work/errors") errors:"
# The errors by port and kind (the client's error code and message).
sed -E 's/^[0-9]+ [0-9]+ //' "$work/errors" | sort | uniq -c | sed 's/^/  /'

# Every acknowledged id on both surviving nodes, and nothing refused (1290)
# or never sent; an id whose outcome the client could not know (e.g. the
# connection dropped mid-statement) may be either way.
# (comm needs the byte order of sort, not numeric order.)
export LC_ALL=C
awk '{ print $2 }' "$work/acked" | sort >"$work/acked-ids"
{ grep -E 'ERROR (1290|2002|2003)' "$work/errors" || true; } | awk '{ print $2 }' | sort >"$work/refused-ids"
for i in 1 2 3; do
  [[ "$i" == "$old" ]] && continue
  # A replica may still be applying the newest entries: wait until it has
  # as many rows as the primary.
  for _ in $(seq 100); do
    [[ "$(sql $((3310 + i)) "SELECT COUNT(*) FROM smoke.t")" == "$(sql $((3310 + new)) "SELECT COUNT(*) FROM smoke.t")" ]] && break
    sleep 0.1
  done
  sql $((3310 + i)) "SELECT id FROM smoke.t ORDER BY id" >"$work/rows$i"
  missing=$(comm -23 "$work/acked-ids" <(sort "$work/rows$i") | wc -l)
  refused=$(comm -12 "$work/refused-ids" <(sort "$work/rows$i") | wc -l)
  unsent=$(awk -v max="$(cat "$work/sent")" '$1 > max' "$work/rows$i" | wc -l)
  echo "cluster-smoke: node $i: $(wc -l <"$work/rows$i") rows, $missing acknowledged missing, $refused refused present, $unsent never sent"
  ((missing == 0 && refused == 0 && unsent == 0)) || fail "node $i: rows differ from what was acknowledged"
done
other=$((6 - old - new))
cmp -s "$work/rows$new" "$work/rows$other" ||
  fail "the surviving nodes hold different rows"
echo "cluster-smoke: surviving nodes identical: ok"
sql $((3310 + new)) "SHOW CLUSTER"
echo "cluster-smoke: all ok"
