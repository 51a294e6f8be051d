# Sourced by scripts/frameworks.sh, scripts/sqlalchemy.sh and
# scripts/rails.sh: a fresh Ladle for a framework's suite, and the clean-up
# of both servers. The caller defines log, LADLE_BIN, WORK (its venv, for a
# Python driver) and MARIADB_STATE.

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_ladle LOG_DIR DRIVER: starts $LADLE_BIN on a fresh data directory
# (LADLE_DATA, LADLE_PORT, LADLE_PID) and waits until the Python DB-API
# module DRIVER (MySQLdb, pymysql) connects, or with DRIVER `mariadb`,
# the mariadb command-line client.
start_ladle() {
    local log_dir=$1 driver=$2
    if [[ ! -x "$LADLE_BIN" ]]; then
        log "building the ladle binary"
        cargo build -q -p ladle-server --bin ladle
    fi
    LADLE_DATA="$(mktemp -d /tmp/ladle-frameworks-data.XXXXXX)"
    LADLE_PORT="$(free_port)"
    "$LADLE_BIN" --listen "127.0.0.1:$LADLE_PORT" --metrics-listen "127.0.0.1:$(free_port)" \
        --data-dir "$LADLE_DATA" --durability async --snapshot-interval 0 \
        >"$log_dir/ladle-server.log" 2>&1 &
    LADLE_PID=$!
    for _ in $(seq 1 100); do
        if [[ "$driver" == mariadb ]]; then
            if mariadb -h 127.0.0.1 -P "$LADLE_PORT" -u root -e 'SELECT 1' >/dev/null 2>&1; then
                return
            fi
        elif "$WORK/venv/bin/python" -c "import $driver; $driver.connect(host='127.0.0.1', port=$LADLE_PORT, user='root')" 2>/dev/null; then
            return
        fi
        sleep 0.3
    done
    log "ladle did not accept connections; see $log_dir/ladle-server.log"
    exit 1
}

stop_servers() {
    if [[ -n "${LADLE_PID:-}" ]]; then kill "$LADLE_PID" 2>/dev/null || true; wait "$LADLE_PID" 2>/dev/null || true; fi
    [[ -n "${LADLE_DATA:-}" ]] && rm -rf "$LADLE_DATA"
    if [[ -n "${MARIADB_STATE:-}" ]]; then
        LADLE_MARIADB_STATE="$MARIADB_STATE" scripts/mariadb.sh stop >/dev/null 2>&1 || true
        rm -rf "$MARIADB_STATE"
    fi
}
