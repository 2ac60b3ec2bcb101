#!/usr/bin/env bash
# Prepare a Debian/Ubuntu CI machine for the sandbox tests: install the Docker engine and
# debootstrap, start the engine, and build tempi's sandbox image without any registry.
# Idempotent: every step is skipped when its result is already there.
#
#   deploy/sandbox/ci-setup.sh        (as root, or as a user with sudo)
#
# Then run the tests with TEMPI_REQUIRE_DOCKER=1 so a missing engine fails them.
set -euo pipefail
cd "$(dirname "$0")"

BASE_IMAGE="${TEMPI_BASE_IMAGE:-tempi-base:bookworm}"
SANDBOX_IMAGE="${TEMPI_SANDBOX_IMAGE:-tempi-sandbox:latest}"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "ci-setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! $SUDO docker info >/dev/null 2>&1; then
  echo "ci-setup: starting dockerd"
  if [ -d /run/systemd/system ]; then
    $SUDO systemctl start docker
  else
    $SUDO sh -c 'nohup dockerd >/var/log/tempi-dockerd.log 2>&1 &'
  fi
  for _ in $(seq 60); do
    $SUDO docker info >/dev/null 2>&1 && break
    sleep 1
  done
  if ! $SUDO docker info >/dev/null 2>&1; then
    echo "ci-setup: dockerd did not come up; its log:" >&2
    $SUDO tail -n 30 /var/log/tempi-dockerd.log >&2 || true
    exit 1
  fi
fi
if [ -n "$SUDO" ]; then
  # The tests run as this (non-root) user and talk to the engine directly. CI only.
  $SUDO chmod 666 /var/run/docker.sock
fi

$SUDO ./build-base.sh "$BASE_IMAGE"
# The classic builder: it needs nothing beyond the engine and works offline.
DOCKER_BUILDKIT=0 docker build -q --build-arg "BASE_IMAGE=$BASE_IMAGE" -t "$SANDBOX_IMAGE" . >/dev/null
echo "ci-setup: $SANDBOX_IMAGE is ready"
