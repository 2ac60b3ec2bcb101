#!/usr/bin/env bash
# Build tempi's images without a registry: the worker (`tempi worker`, non-root) and the
# Temporal dev server, both on the offline Debian base of deploy/sandbox/build-base.sh.
#
#   deploy/images/build.sh [TAG]      (default tag: latest)
#
# Gives tempi-worker:TAG and tempi-dev-server:TAG. Idempotent: an unchanged tree rebuilds
# from Docker's layer cache to the same image ids in a few seconds; only a changed
# uv.lock reinstalls the dependencies.
#
# Environment: BUILD_ID (the workers' build id; default tempi-<git commit>), BASE_IMAGE
# (tempi-base:bookworm, built here when missing, which needs root and debootstrap),
# CA_BUNDLE (the CA bundle that lets the build reach the package index; default this
# machine's: SSL_CERT_FILE, PIP_CERT or /etc/ssl/certs/ca-certificates.crt), INDEX_URL (a
# PEP 691 index for fetching uv; default PyPI), HTTP(S)_PROXY/NO_PROXY when set, NO_CACHE=1
# to build every layer again, VERBOSE=1 to show the build's steps.
# The CA bundle and proxy settings reach the build stage only, never the images.
set -euo pipefail

TAG="${1:-latest}"
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BASE_IMAGE="${BASE_IMAGE:-${TEMPI_BASE_IMAGE:-tempi-base:bookworm}}"
CA_BUNDLE="${CA_BUNDLE:-${SSL_CERT_FILE:-${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}}}"
COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
BUILD_ID="${BUILD_ID:-tempi-$COMMIT}"
UV_VERSION="${UV_VERSION:-$( (uv --version 2>/dev/null || echo 'uv 0.13.9') | awk '{print $2}')}"
# The classic builder needs nothing but the engine, and works offline.
export DOCKER_BUILDKIT=0

if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  "$ROOT/deploy/sandbox/build-base.sh" "$BASE_IMAGE"
fi
if [ ! -r "$CA_BUNDLE" ]; then
  echo "build.sh: no CA bundle at $CA_BUNDLE; set CA_BUNDLE to the one that verifies the package index" >&2
  exit 1
fi

# A context of exactly what the images need: no .venv, caches or local settings.
CONTEXT="$(mktemp -d /tmp/tempi-images.XXXXXX)"
trap 'rm -rf "$CONTEXT"' EXIT
tar -C "$ROOT" --exclude=__pycache__ -c pyproject.toml uv.lock README.md tempi | tar -C "$CONTEXT" -x
cp "$HERE/Dockerfile" "$HERE/fetch_uv.py" "$CONTEXT/"
cp "$CA_BUNDLE" "$CONTEXT/ca.crt"

args=(--build-arg "BASE_IMAGE=$BASE_IMAGE" --build-arg "UV_VERSION=$UV_VERSION")
[ "${NO_CACHE:-0}" != 1 ] || args+=(--no-cache)
[ -z "${INDEX_URL:-}" ] || args+=(--build-arg "INDEX_URL=$INDEX_URL")
for proxy in HTTP_PROXY HTTPS_PROXY NO_PROXY http_proxy https_proxy no_proxy; do
  # Docker's predefined proxy arguments: used by the build, left out of the image's history.
  [ -z "${!proxy:-}" ] || args+=(--build-arg "$proxy=${!proxy}")
done

build() {
  if [ "${VERBOSE:-0}" = 1 ]; then
    docker build "${args[@]}" "$@" "$CONTEXT"
  elif ! docker build "${args[@]}" "$@" "$CONTEXT" >"$CONTEXT/build.log" 2>&1; then
    tail -n 40 "$CONTEXT/build.log" >&2
    exit 1
  fi
}
start=$SECONDS
build --target dev-server -t "tempi-dev-server:$TAG"
build --build-arg "BUILD_ID=$BUILD_ID" --target worker -t "tempi-worker:$TAG"
echo "build.sh: tempi-worker:$TAG (build id $BUILD_ID) and tempi-dev-server:$TAG in $((SECONDS - start)) s"
