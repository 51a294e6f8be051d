#!/usr/bin/env bash
# Runs SQLAlchemy's dialect compliance suite (test/dialect/test_suite.py from
# its PyPI sdist, over PyMySQL) against Ladle and MariaDB side by side, and
# prints passed/failed/errors/skipped per test class for both, then the
# tests Ladle fails that MariaDB passes; then an Alembic autogenerate ->
# upgrade -> downgrade round trip on each (scripts/alembic_roundtrip.py).
#
#   scripts/sqlalchemy.sh                        # the whole suite (about 1 minute a side)
#   scripts/sqlalchemy.sh -k ComponentReflection # pytest arguments, passed through
#
# Environment:
#   LADLE_BIN            the ladle binary (default: the debug build in
#                        $CARGO_TARGET_DIR, built if missing)
#   LADLE_FRAMEWORKS_DIR where the venv and the sdist live (default
#                        ~/.cache/ladle-frameworks; nothing is committed)
#   SQLALCHEMY_VERSION   the sdist to test (default 2.1.9)
#   ALEMBIC_VERSION      the Alembic release for the round trip (1.20.1)
#   SUITE_TIMEOUT        seconds the suite may take on one server (1800)
#   LADLE_FRAMEWORKS_ONLY=ladle|mariadb  run one side only
#   LADLE_FRAMEWORKS_STRICT=1  exit 1 when Ladle fails (or errors on) a test
#                        MariaDB passes, or a round-trip step (for scripts/test.sh)
#
# Both servers get the URL `mysql+pymysql://root@HOST:PORT/test`; SQLAlchemy
# picks its MySQL or MariaDB dialect from the server's version string, so
# a few tests exist on one side only (they are counted, not compared).
# Each side gets a fresh server: Ladle with a new data directory, MariaDB
# from scripts/mariadb.sh with a private state directory. Logs and JUnit
# files are kept in $LADLE_FRAMEWORKS_DIR/logs/sqlalchemy/<server>/.
set -euo pipefail
cd "$(dirname "$0")/.."

WORK="${LADLE_FRAMEWORKS_DIR:-$HOME/.cache/ladle-frameworks}"
SQLALCHEMY_VERSION="${SQLALCHEMY_VERSION:-2.1.9}"
ALEMBIC_VERSION="${ALEMBIC_VERSION:-1.20.1}"
SUITE_TIMEOUT="${SUITE_TIMEOUT:-1800}"
ONLY="${LADLE_FRAMEWORKS_ONLY:-}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/ladle-target}"
LADLE_BIN="${LADLE_BIN:-$CARGO_TARGET_DIR/debug/ladle}"
LOGS="$WORK/logs/sqlalchemy"

log() { echo "sqlalchemy.sh: $*" >&2; }

setup() {
    mkdir -p "$WORK"
    [[ -x "$WORK/venv/bin/python" ]] || python3 -m venv "$WORK/venv"
    SQLA="$WORK/sqlalchemy-$SQLALCHEMY_VERSION"
    if [[ ! -f "$SQLA/test/dialect/test_suite.py" ]]; then
        log "fetching the SQLAlchemy $SQLALCHEMY_VERSION sdist"
        "$WORK/venv/bin/pip" download -q --disable-pip-version-check --no-deps \
            --no-binary :all: "SQLAlchemy==$SQLALCHEMY_VERSION" -d "$WORK"
        tar -xzf "$WORK/sqlalchemy-$SQLALCHEMY_VERSION.tar.gz" -C "$WORK"
    fi
    # The suite imports SQLAlchemy from the sdist's lib/ (its conftest.py
    # puts it first on sys.path); it needs only these beside it.
    if ! "$WORK/venv/bin/python" -c 'import pymysql, pytest, typing_extensions' 2>/dev/null; then
        "$WORK/venv/bin/pip" install -q --disable-pip-version-check pymysql 'pytest>=8,<10' typing_extensions
    fi
    # Alembic without its dependencies: it runs over the sdist's SQLAlchemy
    # (PYTHONPATH), not a second copy from PyPI.
    if ! "$WORK/venv/bin/python" -c 'import alembic, mako' 2>/dev/null; then
        "$WORK/venv/bin/pip" install -q --disable-pip-version-check --no-deps \
            "alembic==$ALEMBIC_VERSION" Mako MarkupSafe
    fi
}

# prepare PORT: the two databases the suite expects.
prepare() {
    "$WORK/venv/bin/python" - "$1" <<'PY'
import sys, pymysql
c = pymysql.connect(host="127.0.0.1", port=int(sys.argv[1]), user="root")
with c.cursor() as cur:
    for db in ("test", "test_schema"):
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {db}")
PY
}

# run_suite SERVER PORT: one pytest run, JUnit XML in $LOGS/SERVER/junit.xml.
run_suite() {
    local server="$1" port="$2" out="$LOGS/$1"
    rm -rf "$out"
    mkdir -p "$out"
    prepare "$port"
    (cd "$SQLA" && timeout "$SUITE_TIMEOUT" "$WORK/venv/bin/python" -m pytest \
        test/dialect/test_suite.py --dburi "mysql+pymysql://root@127.0.0.1:$port/test?charset=utf8mb4" \
        --maxfail=100000 -p no:cacheprovider -q --junitxml="$out/junit.xml" "${PYTEST_ARGS[@]}" \
        </dev/null >"$out/suite.log" 2>&1) || true
    # The Alembic round trip, on its own database (scripts/alembic_roundtrip.py).
    PYTHONPATH="$SQLA/lib" timeout "$SUITE_TIMEOUT" "$WORK/venv/bin/python" \
        scripts/alembic_roundtrip.py "mysql+pymysql://root@127.0.0.1:$port" \
        </dev/null >"$out/alembic.log" 2>"$out/alembic.stderr" || true
}

source scripts/lib/side-by-side-servers.sh
trap stop_servers EXIT

PYTEST_ARGS=("$@")
setup
mkdir -p "$LOGS"
pids=()
if [[ "$ONLY" != mariadb ]]; then
    start_ladle "$LOGS" pymysql
    log "Ladle on port $LADLE_PORT ($LADLE_BIN)"
    run_suite ladle "$LADLE_PORT" &
    pids+=($!)
fi
if [[ "$ONLY" != ladle ]]; then
    MARIADB_STATE="$(mktemp -d /tmp/ladle-sqlalchemy-mariadb.XXXXXX)"
    url="$(LADLE_MARIADB_STATE="$MARIADB_STATE" scripts/mariadb.sh start)"
    log "MariaDB at $url"
    run_suite mariadb "${url##*:}" &
    pids+=($!)
fi
for pid in "${pids[@]}"; do wait "$pid"; done

python3 - "$LOGS" <<'PY'
import collections, os, re, sys
import xml.etree.ElementTree as ET
logs = sys.argv[1]
def load(server):
    """{normalised test id: outcome}, or None when the suite never ran."""
    path = os.path.join(logs, server, "junit.xml")
    if not os.path.exists(path):
        return None
    out = {}
    for tc in ET.parse(path).iter("testcase"):
        # Classes carry the dialect and server version: Foo_mysql+pymysql_8_0_34.
        cls = re.sub(r"_(mysql|mariadb)\+.*$", "", tc.get("classname", "").split(".")[-1])
        kinds = [c.tag for c in tc]
        outcome = ("failed" if "failure" in kinds else "errors" if "error" in kinds
                   else "skipped" if "skipped" in kinds else "passed")
        out[f"{cls}::{tc.get('name')}"] = outcome
    return out
ladle, maria = load("ladle"), load("mariadb")
KINDS = ("passed", "failed", "errors", "skipped")
def counts(results, cls=None):
    c = collections.Counter(v for k, v in results.items() if cls is None or k.split("::")[0] == cls)
    return [c[k] for k in KINDS]
def cell(results, cls=None):
    if results is None:
        return "did not run"
    return " / ".join(str(n) for n in counts(results, cls))
classes = sorted({k.split("::")[0] for r in (ladle, maria) if r for k in r})
print("SQLAlchemy dialect suite: passed / failed / errors / skipped")
print("| class | MariaDB | Ladle |")
print("|---|---|---|")
for cls in classes:
    if ladle is None or maria is None or counts(ladle, cls) != counts(maria, cls):
        print(f"| {cls} | {cell(maria, cls)} | {cell(ladle, cls)} |")
print(f"| total | {cell(maria)} | {cell(ladle)} |")
def alembic(server):
    path = os.path.join(logs, server, "alembic.log")
    if not os.path.exists(path):
        return None
    return [l.rstrip() for l in open(path) if l.strip() and not l.startswith("Generating")]
alembic_failed = False
for server in ("mariadb", "ladle"):
    steps = alembic(server)
    if steps is None:
        continue
    bad = [s for s in steps if not s.endswith("ok") and ": ok (" not in s]
    print(f"Alembic round trip on {server}: " + (f"{len(steps)} steps ok" if not bad and steps else "; ".join(bad or ["no output"])))
    if server == "ladle" and (bad or not steps):
        alembic_failed = True
strict = os.environ.get("LADLE_FRAMEWORKS_STRICT") == "1" and not os.environ.get("LADLE_FRAMEWORKS_ONLY")
if ladle is None or maria is None:
    sys.exit(1 if os.environ.get("LADLE_FRAMEWORKS_STRICT") == "1" and not os.environ.get("LADLE_FRAMEWORKS_ONLY") else 0)
short = sorted(k for k, v in ladle.items() if v in ("failed", "errors") and maria.get(k) == "passed")
if short:
    print(f"Ladle fails {len(short)} tests MariaDB passes:")
    for k in short:
        print("  " + k)
    if strict:
        sys.exit(1)
if strict and alembic_failed:
    sys.exit(1)
PY
