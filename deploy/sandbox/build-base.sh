#!/usr/bin/env bash
# Build tempi's offline base image with debootstrap + `docker import`, for machines that
# cannot pull from a registry. Idempotent: does nothing when the tag already exists.
#
#   deploy/sandbox/build-base.sh [TAG]        (default tag: tempi-base:bookworm)
#
# Environment: SUITE (bookworm), MIRROR (the Debian mirror apt is configured with, else
# deb.debian.org), REBUILD=1 to build even when the tag exists. Needs root and debootstrap.
set -euo pipefail

TAG="${1:-${TEMPI_BASE_IMAGE:-tempi-base:bookworm}}"
SUITE="${SUITE:-bookworm}"
# The sandbox tools go into the base so the Dockerfile needs no network of its own.
PACKAGES="git,ripgrep,python3,procps,ca-certificates"

if [ "${REBUILD:-0}" != 1 ] && docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "build-base: $TAG already exists"
  exit 0
fi

configured_mirror() {
  # deb822 sources (URIs: ...) or one-line sources (deb URL suite ...), first Debian one.
  local files
  files=$(ls /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
  [ -n "$files" ] || return 0
  # shellcheck disable=SC2086
  sed -n -e 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' \
         -e 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\).*/\2/p' $files \
    | grep -v -- '-security' | head -n 1
}
MIRROR="${MIRROR:-$(configured_mirror)}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"

ROOT="$(mktemp -d /tmp/tempi-base.XXXXXX)"
trap 'rm -rf "$ROOT"' EXIT

echo "build-base: debootstrap $SUITE from $MIRROR"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOT" "$MIRROR" >"$ROOT.log" 2>&1 || {
  tail -n 30 "$ROOT.log" >&2
  exit 1
}
rm -f "$ROOT.log"
# Caches and logs only make the image bigger.
rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/log/* \
  "$ROOT"/usr/share/doc/* "$ROOT"/usr/share/man/* "$ROOT"/usr/share/info/*

tar --numeric-owner -C "$ROOT" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["bash"]' - "$TAG" >/dev/null
echo "build-base: built $TAG"
