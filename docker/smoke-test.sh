#!/usr/bin/env bash
# Opt-in check of the Docker set-up (not run by scripts/test.sh or CI, which
# may have no Docker): builds ladle:local, starts the single-node compose file
# docker/single-node.yml under its own project name (so an existing `docker-compose up` volume is untouched),
# and with the mariadb CLI checks that a table written before
# `docker-compose restart` is still there after it, that the view's cached
# keys came back from the shutdown snapshot, and that `docker stop` ends ladle
# cleanly (exit 0, well before SIGKILL). Removes its container, network and
# volume at the end.
#
# Usage: docker/smoke-test.sh   (LADLE_BINARY=... skips the cargo build;
#        LADLE_HOST_PORT / LADLE_METRICS_HOST_PORT if 3307 / 6034 are taken)
set -euo pipefail
cd "$(dirname "$0")/.."

export LADLE_PASSWORD="smoke-$RANDOM$RANDOM"
port="${LADLE_HOST_PORT:-3307}"
compose=(docker-compose -p ladle-smoke -f docker/single-node.yml --project-directory .)

LADLE_IMAGES=ladle scripts/docker-build.sh
trap '"${compose[@]}" down -v >/dev/null 2>&1 || true' EXIT
"${compose[@]}" up -d

wait_healthy() {
  local id status
  id="$("${compose[@]}" ps -q ladle)"
  for _ in $(seq 120); do
    status="$(docker inspect --format '{{.State.Health.Status}}' "$id")"
    [[ "$status" == healthy ]] && return 0
    sleep 1
  done
  echo "smoke: container not healthy (last: $status)" >&2
  "${compose[@]}" logs --tail 30 >&2
  return 1
}
sql() { mariadb -h 127.0.0.1 -P "$port" -u root -p"$LADLE_PASSWORD" -N -B -e "$1"; }
expect() { # expect <what> <wanted> <got>
  if [[ "$2" != "$3" ]]; then
    echo "smoke: $1: wanted [$2], got [$3]" >&2
    exit 1
  fi
  echo "smoke: $1: ok"
}

wait_healthy
sql "CREATE DATABASE smoke; USE smoke;
     CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20));
     INSERT INTO t VALUES (1, 'one'), (2, 'two');"
expect "select before restart" "two" "$(sql "SELECT name FROM smoke.t WHERE id = 2")"

"${compose[@]}" restart
wait_healthy
expect "rows after restart" "1 one
2 two" "$(sql "SELECT id, name FROM smoke.t ORDER BY id" | tr '\t' ' ')"
# The point-read view was installed before the restart; its cached key comes
# back from the shutdown snapshot (column 4 of SHOW VIEWS is cached_keys).
expect "cached keys restored" "1" \
  "$(sql "SHOW VIEWS" | awk -F'\t' '$2 ~ /WHERE .*id = \?/ { print $4 }')"

id="$("${compose[@]}" ps -q ladle)"
started=$SECONDS
docker stop "$id" >/dev/null
expect "docker stop exit code" "0" "$(docker inspect --format '{{.State.ExitCode}}' "$id")"
(( SECONDS - started < 30 )) || { echo "smoke: docker stop took $((SECONDS - started)) s" >&2; exit 1; }
docker logs "$id" 2>&1 | grep -q "INFO stopped" || { echo "smoke: no clean stop logged" >&2; exit 1; }
echo "smoke: clean stop: ok"
echo "smoke: all ok"
