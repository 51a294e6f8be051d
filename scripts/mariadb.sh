#!/usr/bin/env bash
# Throwaway MariaDB for the conformance suite (the correctness oracle).
#
#   scripts/mariadb.sh start   # install if missing, start, print mysql://root@127.0.0.1:PORT
#   scripts/mariadb.sh url     # print the URL of the running instance
#   scripts/mariadb.sh stop    # kill it and remove its data directory
#
# Idempotent; needs no stdin. State lives in $LADLE_MARIADB_STATE
# (default /tmp/ladle-mariadb), one directory holding datadir, socket, pid,
# port, url and log.
set -euo pipefail

STATE="${LADLE_MARIADB_STATE:-/tmp/ladle-mariadb}"
export DEBIAN_FRONTEND=noninteractive

log() { echo "mariadb.sh: $*" >&2; }

ensure_installed() {
    if command -v mariadbd >/dev/null 2>&1 && command -v mariadb-install-db >/dev/null 2>&1 \
        && command -v mariadb >/dev/null 2>&1; then
        return
    fi
    log "installing mariadb-server with apt-get"
    apt-get update -qq </dev/null >&2
    apt-get install -y -qq --no-install-recommends mariadb-server mariadb-client </dev/null >&2
}

mariadbd_bin() {
    if command -v mariadbd >/dev/null 2>&1; then command -v mariadbd; else echo /usr/sbin/mariadbd; fi
}

free_port() {
    python3 - <<'PY' 2>/dev/null || echo $((20000 + RANDOM % 20000))
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
PY
}

is_running() {
    [[ -f "$STATE/pid" ]] || return 1
    local pid
    pid="$(cat "$STATE/pid")"
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null
}

accepts_connections() {
    mariadb --no-defaults -h 127.0.0.1 -P "$1" -u root --connect-timeout=2 \
        -e "SELECT 1" >/dev/null 2>&1 </dev/null
}

start() {
    if is_running && [[ -f "$STATE/url" ]] && accepts_connections "$(cat "$STATE/port")"; then
        cat "$STATE/url"
        return
    fi
    stop_quiet
    ensure_installed
    mkdir -p "$STATE"
    local port datadir
    port="$(free_port)"
    datadir="$STATE/data"
    rm -rf "$datadir"
    mkdir -p "$datadir"
    log "initialising $datadir"
    mariadb-install-db --no-defaults --datadir="$datadir" --user=root \
        --auth-root-authentication-method=normal --skip-test-db >"$STATE/install.log" 2>&1 </dev/null \
        || { cat "$STATE/install.log" >&2; exit 1; }
    log "starting on 127.0.0.1:$port"
    "$(mariadbd_bin)" --no-defaults --datadir="$datadir" --port="$port" \
        --socket="$STATE/mysqld.sock" --pid-file="$STATE/mysqld.pid" \
        --bind-address=127.0.0.1 --user=root --innodb_flush_log_at_trx_commit=1 \
        --skip-log-bin --max-connections=500 \
        --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci >"$STATE/mariadbd.log" 2>&1 </dev/null &
    echo $! >"$STATE/pid"
    echo "$port" >"$STATE/port"
    for _ in $(seq 1 120); do
        if accepts_connections "$port"; then
            echo "mysql://root@127.0.0.1:$port" >"$STATE/url"
            cat "$STATE/url"
            return
        fi
        if ! is_running; then
            log "mariadbd exited; log follows"
            cat "$STATE/mariadbd.log" >&2
            exit 1
        fi
        sleep 0.5
    done
    log "mariadbd did not accept connections within 60 s; log follows"
    cat "$STATE/mariadbd.log" >&2
    exit 1
}

stop_quiet() {
    if is_running; then
        local pid
        pid="$(cat "$STATE/pid")"
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 60); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.5
        done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -rf "$STATE"
}

case "${1:-}" in
    start) start ;;
    stop) stop_quiet; log "stopped" ;;
    url)
        if is_running && [[ -f "$STATE/url" ]]; then cat "$STATE/url"; else log "not running"; exit 1; fi
        ;;
    *) echo "usage: $0 start|stop|url" >&2; exit 2 ;;
esac
