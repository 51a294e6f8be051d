#!/usr/bin/env bash
# Installs what building and testing Ladle needs on Debian/Ubuntu, if missing:
# clang/libclang (bindgen for the rocksdb crate), Debian's librocksdb-dev
# (linked instead of compiling RocksDB's C++ source), MariaDB server and
# client (the correctness oracle and performance baseline), OpenSSL headers
# (the TLS test client, mysql_async native-tls), Python venv, and Go with
# Debian's go-sql-driver/mysql (the Go database/sql client test), etcd
# (the cluster's coordination service: scripts/cluster.sh, the `cluster`
# test) and protoc (etcd-client generates its gRPC code at build time), and
# curl (scripts/cluster.sh reads each node's /health with it).
# Usage: scripts/deps.sh [--no-mariadb]
set -euo pipefail

want=(clang libclang-dev librocksdb-dev pkg-config libssl-dev python3-venv protobuf-compiler etcd-server curl)
if [[ "${1:-}" != "--no-mariadb" ]]; then
  # The test suite's clients: MariaDB (the oracle), Go's database/sql
  # driver (tests/go, run by tests/python/test_go_client.py).
  want+=(mariadb-server mariadb-client golang-go golang-github-go-sql-driver-mysql-dev)
fi

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "deps: please install: ${missing[*]} (no apt-get found)" >&2
  exit 1
fi
SUDO=""
if [[ "$(id -u)" != 0 ]]; then SUDO="sudo"; fi
echo "deps: installing ${missing[*]}" >&2
$SUDO apt-get update -qq
# Never start services from package post-install scripts: tests start their
# own throwaway MariaDB on a loopback port.
DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
