#!/usr/bin/env bash
# Builds (release) and starts the ladle server. With no arguments it listens
# on 127.0.0.1:3307 with data in ./ladle-data; every flag of `ladle --help`
# can be passed through, e.g. scripts/ladle.sh --durability async.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --no-mariadb
exec cargo run --release --quiet -p ladle-server --bin ladle -- "$@"
