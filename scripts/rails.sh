#!/usr/bin/env bash
# Runs ActiveRecord (Debian's ruby-activerecord 6.1 and ruby-mysql2) against
# Ladle and MariaDB side by side: tests/rails/activerecord_checks.rb, a
# Lobsters-like model set with migrations up and down, associations,
# counter caches, locking, upserts, JSON, decimals, booleans, timestamps
# and a schema dump, as many small named checks. Prints passed / failed
# per side, each check's outcome on both, and a diff of what each check
# observed where the two servers differ.
#
#   scripts/rails.sh                # every check
#   scripts/rails.sh locking        # the checks whose name contains "locking"
#
# Environment:
#   LADLE_BIN            the ladle binary (default: the debug build in
#                        $CARGO_TARGET_DIR, built if missing)
#   LADLE_RAILS_DIR      where logs go (default ~/.cache/ladle-frameworks/logs/rails)
#   LADLE_RAILS_STRICT=1 exit 1 when Ladle fails a check MariaDB passes, or
#                        a check observes something else on Ladle, except
#                        the differences tests/rails/known_differences.txt
#                        lists with their reasons (for scripts/test.sh)
#
# Each side gets a fresh server: Ladle with a new data directory, MariaDB
# from scripts/mariadb.sh with a private state directory. Every statement
# ActiveRecord sent is logged in $LADLE_RAILS_DIR/<server>.sql.log.
set -euo pipefail
cd "$(dirname "$0")/.."

WORK="${LADLE_RAILS_DIR:-$HOME/.cache/ladle-frameworks/logs/rails}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/ladle-target}"
LADLE_BIN="${LADLE_BIN:-$CARGO_TARGET_DIR/debug/ladle}"
FILTER="${1:-}"

log() { echo "rails.sh: $*" >&2; }

setup() {
    if ! ruby -e 'require "active_record"; require "mysql2"' 2>/dev/null; then
        log "installing ruby-activerecord and ruby-mysql2 with apt-get"
        apt-get update -qq </dev/null >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            ruby ruby-activerecord ruby-mysql2 </dev/null >&2
    fi
    if ! command -v mariadb >/dev/null; then
        scripts/deps.sh >&2
    fi
}

source scripts/lib/side-by-side-servers.sh

# run_checks SERVER PORT: the checks' output in $WORK/SERVER.out.
run_checks() {
    RAILS_SQL_LOG="$WORK/$1.sql.log" timeout 600 ruby tests/rails/activerecord_checks.rb \
        127.0.0.1 "$2" "$FILTER" </dev/null >"$WORK/$1.out" 2>"$WORK/$1.err" || true
}

trap stop_servers EXIT
setup
rm -rf "$WORK"
mkdir -p "$WORK"
start_ladle "$WORK" mariadb
log "Ladle on port $LADLE_PORT ($LADLE_BIN)"
MARIADB_STATE="$(mktemp -d /tmp/ladle-rails-mariadb.XXXXXX)"
url="$(LADLE_MARIADB_STATE="$MARIADB_STATE" scripts/mariadb.sh start)"
log "MariaDB at $url"
run_checks ladle "$LADLE_PORT" &
ladle_job=$!
run_checks mariadb "${url##*:}"
wait "$ladle_job"

python3 scripts/lib/compare_checks.py "$WORK/mariadb.out" "$WORK/ladle.out" \
    tests/rails/known_differences.txt
