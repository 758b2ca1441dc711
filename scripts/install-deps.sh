#!/usr/bin/env bash
# Installs what sluice needs on a fresh Debian machine. Idempotent: when every
# package is already there it asks apt nothing (no `apt-get update`), so a
# rerun costs a second.
#
#   bash scripts/install-deps.sh           everything the build and the tests need
#   bash scripts/install-deps.sh --build   only what building the CLI and the
#                                          library needs (scripts/demo.sh): the
#                                          test-only packages (PyTorch, Node.js,
#                                          Chromium, clang, ...) are most of the
#                                          download and none of them is needed
#                                          to run a model
#
# Each test concern adds its own needs in .ci/deps/*.sh (full mode only).
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
mode=${1:-all}
case "$mode" in all | --build) ;; *) echo "install-deps.sh: unknown option '$mode' (use --build or nothing)" >&2; exit 2 ;; esac

# The build: the compiler, CMake and the C++ libraries. GoogleTest and Google
# Benchmark are here too (small): the demo configures the same build tree as
# scripts/test.sh, so the test run reuses every object the demo compiled.
build_pkgs=(cmake ninja-build g++ make pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libutf8proc-dev libssl-dev zlib1g-dev liburing-dev libstb-dev
  libedit-dev)
# The oracle and the test tools (Python through /usr/bin/python3).
test_pkgs=(python3 python3-numpy python3-torch python3-regex)

pkgs=("${build_pkgs[@]}")
[ "$mode" = all ] && pkgs+=("${test_pkgs[@]}")
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing ${#missing[@]} Debian package(s): ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "install-deps: the ${#pkgs[@]} Debian packages needed are installed"
fi
[ "$mode" = --build ] && exit 0

# Node.js and npm (test clients only) come from .ci/deps/*.sh: Debian's npm
# conflicts with a Node.js that is already installed from elsewhere.
shopt -s nullglob
for f in .ci/deps/*.sh; do
  echo "== deps: $f"
  # shellcheck disable=SC1090
  source "$f"
done
