#!/usr/bin/env bash
# Builds the `ladle:local` Docker image without pulling a base image (this
# machine has no registry): compiles the release `ladle` binary, gathers it and
# the shared libraries `ldd` lists into a root file system, and builds
# docker/Dockerfile (`FROM scratch`) on it. Then: `docker-compose up -d`.
#
# Environment:
#   LADLE_IMAGE   image tag to build (default ladle:local; docker-compose.yml
#                 runs ladle:local)
#   LADLE_BINARY  use this ladle binary instead of running cargo build
#   CARGO_TARGET_DIR  honoured as usual (default ./target)
set -euo pipefail
cd "$(dirname "$0")/.."

image="${LADLE_IMAGE:-ladle:local}"

if [[ -n "${LADLE_BINARY:-}" ]]; then
  binary="$LADLE_BINARY"
else
  scripts/deps.sh --no-mariadb
  cargo build --release -p ladle-server --bin ladle
  binary="${CARGO_TARGET_DIR:-target}/release/ladle"
fi
[[ -x "$binary" ]] || { echo "docker-build: no executable at $binary" >&2; exit 1; }

context="$(mktemp -d "${TMPDIR:-/tmp}/ladle-docker.XXXXXX")"
trap 'rm -rf "$context"' EXIT
rootfs="$context/rootfs"
mkdir -p "$rootfs/usr/local/bin" "$rootfs/data" "$rootfs/tmp" "$rootfs/bin"

# The release profile keeps debug info (about 100 MB); the image does not need it.
cp "$binary" "$rootfs/usr/local/bin/ladle"
strip --strip-debug "$rootfs/usr/local/bin/ladle"
# bash only runs the health check (an HTTP GET of /health over /dev/tcp):
# a scratch image has no curl or wget.
cp /bin/bash "$rootfs/bin/bash"

# Every shared library either executable loads, at the absolute path ldd
# reports (ldd lists transitive dependencies too), plus the dynamic loader.
copy_libs() {
  ldd "$1" | awk '
    $2 == "=>" && $3 ~ /^\// { print $3 }
    $1 ~ /^\// { print $1 }
  '
}
for lib in $( { copy_libs "$binary"; copy_libs /bin/bash; } | sort -u); do
  mkdir -p "$rootfs$(dirname "$lib")"
  cp -L "$lib" "$rootfs$lib"
done

# /data belongs to nobody (65534) so that ladle needs no root; /tmp is sticky.
chmod 0755 "$rootfs" "$rootfs"/usr "$rootfs"/usr/local "$rootfs"/usr/local/bin "$rootfs/bin"
chmod 0700 "$rootfs/data"
chmod 1777 "$rootfs/tmp"
tar -C "$rootfs" --numeric-owner --owner=0 --group=0 \
  --exclude=./data -cf "$context/rootfs.tar" .
tar -C "$rootfs" --numeric-owner --owner=65534 --group=65534 \
  -rf "$context/rootfs.tar" ./data

cp docker/Dockerfile "$context/Dockerfile"
echo "docker-build: building $image from $(du -sh "$context/rootfs.tar" | cut -f1) of files" >&2
# The classic builder: BuildKit may try to fetch its own front end images.
DOCKER_BUILDKIT=0 docker build --quiet -t "$image" "$context" >/dev/null
docker image ls "$image"
