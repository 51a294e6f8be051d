#!/usr/bin/env bash
# Builds the images docker-compose.yml runs, without pulling a base image (this
# machine has no registry). Each is `FROM scratch` plus a root file system the
# script gathers: a binary and the shared libraries `ldd` lists.
#   ladle:local             the release `ladle` binary (docker/Dockerfile)
#   ladle-etcd:local        Debian's etcd-server binary (docker/etcd.Dockerfile)
#   ladle-prometheus:local  Debian's prometheus binary and its web UI files,
#                           from the .deb files (downloaded with apt-get
#                           download, not installed: installing would start a
#                           Prometheus service on the host)
#                           (docker/prometheus.Dockerfile)
# Then: `docker-compose up -d` (the 3-node cluster) or
# `docker-compose -f docker/single-node.yml up -d` (one node).
#
# Environment:
#   LADLE_IMAGE   tag of the ladle image (default ladle:local; both compose
#                 files run ladle:local)
#   LADLE_BINARY  use this ladle binary instead of running cargo build
#   LADLE_IMAGES  which images to build (default "ladle etcd prometheus")
#   CARGO_TARGET_DIR  honoured as usual (default ./target)
set -euo pipefail
cd "$(dirname "$0")/.."

images="${LADLE_IMAGES:-ladle etcd prometheus}"
work="$(mktemp -d "${TMPDIR:-/tmp}/ladle-docker.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# Every shared library the executables load, at the absolute path ldd
# reports (ldd lists transitive dependencies too), plus the dynamic loader.
copy_libs() { # copy_libs <rootfs> <executable>...
  local rootfs=$1 lib
  shift
  for lib in $(for exe in "$@"; do ldd "$exe"; done | awk '
      $2 == "=>" && $3 ~ /^\// { print $3 }
      $1 ~ /^\// { print $1 }' | sort -u); do
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
  done
}

# A root file system with bash (it only runs health checks over /dev/tcp: a
# scratch image has no curl or wget), /tmp, and an empty /data owned by
# nobody (65534) so that the service needs no root.
new_rootfs() { # new_rootfs <name>: prints the directory
  local rootfs="$work/$1/rootfs"
  mkdir -p "$rootfs/usr/local/bin" "$rootfs/data" "$rootfs/tmp" "$rootfs/bin"
  cp /bin/bash "$rootfs/bin/bash"
  echo "$rootfs"
}

# Packs <rootfs> (root-owned, /data owned by nobody) and builds <dockerfile>
# on it as <tag>.
build_image() { # build_image <tag> <dockerfile> <rootfs>
  local tag=$1 dockerfile=$2 rootfs=$3 context
  context="$(dirname "$rootfs")"
  chmod 0755 "$rootfs" "$rootfs"/usr "$rootfs"/usr/local "$rootfs"/usr/local/bin "$rootfs/bin"
  chmod 0700 "$rootfs/data"
  chmod 1777 "$rootfs/tmp"
  tar -C "$rootfs" --numeric-owner --owner=0 --group=0 \
    --exclude=./data -cf "$context/rootfs.tar" .
  tar -C "$rootfs" --numeric-owner --owner=65534 --group=65534 \
    -rf "$context/rootfs.tar" ./data
  cp "$dockerfile" "$context/Dockerfile"
  echo "docker-build: building $tag from $(du -sh "$context/rootfs.tar" | cut -f1) of files" >&2
  # The classic builder: BuildKit may try to fetch its own front end images.
  DOCKER_BUILDKIT=0 docker build --quiet -t "$tag" "$context" >/dev/null
  rm -rf "$rootfs" "$context/rootfs.tar"
}

build_ladle() {
  local binary rootfs
  if [[ -n "${LADLE_BINARY:-}" ]]; then
    binary="$LADLE_BINARY"
  else
    scripts/deps.sh --no-mariadb
    cargo build --release -p ladle-server --bin ladle
    binary="${CARGO_TARGET_DIR:-target}/release/ladle"
  fi
  [[ -x "$binary" ]] || { echo "docker-build: no executable at $binary" >&2; exit 1; }
  rootfs="$(new_rootfs ladle)"
  cp "$binary" "$rootfs/usr/local/bin/ladle"
  # The release profile keeps debug info (about 100 MB); the image does not need it.
  strip --strip-debug "$rootfs/usr/local/bin/ladle"
  copy_libs "$rootfs" "$binary" /bin/bash
  build_image "${LADLE_IMAGE:-ladle:local}" docker/Dockerfile "$rootfs"
}

build_etcd() {
  local rootfs
  command -v etcd >/dev/null || scripts/deps.sh --no-mariadb # etcd-server
  rootfs="$(new_rootfs etcd)"
  cp "$(command -v etcd)" "$rootfs/usr/local/bin/etcd"
  copy_libs "$rootfs" "$(command -v etcd)" /bin/bash
  build_image ladle-etcd:local docker/etcd.Dockerfile "$rootfs"
}

build_prometheus() {
  local rootfs debs deb
  rootfs="$(new_rootfs prometheus)"
  debs="$work/prometheus/debs"
  mkdir -p "$debs"
  # prometheus and the packages holding the files its web UI links to
  # (/usr/share/prometheus/web/static/* are symbolic links into
  # /usr/share/javascript and /usr/share/fonts).
  (cd "$debs" && apt-get download -q prometheus fonts-glyphicons-halflings \
    libjs-bootstrap4 libjs-bootstrap libjs-eonasdan-bootstrap-datetimepicker \
    libjs-jquery libjs-jquery-hotkeys libjs-moment libjs-moment-timezone \
    libjs-mustache libjs-popper.js libjs-rickshaw libjs-d3 2>&1 |
    grep -v 'Download is performed unsandboxed' >&2 || true)
  ls "$debs"/prometheus_*.deb >/dev/null || { echo "docker-build: apt-get download prometheus failed" >&2; exit 1; }
  for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$rootfs"; done
  # Not needed to run: docs, service files, promtool, and moment-timezone's
  # raw data (about 200 MB; the UI loads the packed *.min.js).
  rm -rf "$rootfs/usr/share/doc" "$rootfs/lib/systemd" "$rootfs/etc/init.d" "$debs" \
    "$rootfs/usr/bin/promtool" "$rootfs/usr/share/javascript/moment-timezone/data"
  copy_libs "$rootfs" "$rootfs/usr/bin/prometheus" /bin/bash
  build_image ladle-prometheus:local docker/prometheus.Dockerfile "$rootfs"
}

for image in $images; do
  case "$image" in
    ladle) build_ladle ;;
    etcd) build_etcd ;;
    prometheus) build_prometheus ;;
    *) echo "docker-build: unknown image $image (ladle, etcd, prometheus)" >&2; exit 2 ;;
  esac
done
docker image ls --filter 'reference=ladle*:local'
