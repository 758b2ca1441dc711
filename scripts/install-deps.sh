#!/usr/bin/env bash
# Installs everything the build and the tests need on a fresh Debian machine.
# Idempotent. Each concern may add its own needs in .ci/deps/*.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  cmake ninja-build g++ make pkg-config \
  libgtest-dev libgmock-dev libbenchmark-dev \
  nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libutf8proc-dev libssl-dev zlib1g-dev liburing-dev libstb-dev libedit-dev \
  python3 python3-numpy python3-torch python3-regex >/dev/null
# Node.js and npm (test clients only) come from .ci/deps/*.sh: Debian's npm
# conflicts with a Node.js that is already installed from elsewhere.
shopt -s nullglob
for f in .ci/deps/*.sh; do
  echo "== deps: $f"
  # shellcheck disable=SC1090
  source "$f"
done
