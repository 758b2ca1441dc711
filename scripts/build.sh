#!/usr/bin/env bash
# Configures and builds. BUILD_DIR (default build) and SANITIZE=1 select the
# variant; TARGETS (default: everything) names what ninja builds; WERROR=1
# turns warnings into errors (CI does).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release)
if [ "${SANITIZE:-0}" = 1 ]; then
  args=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_SANITIZE=ON -DSLUICE_BUILD_BENCH=OFF)
fi
if [ "${WERROR:-0}" = 1 ]; then args+=(-DSLUICE_WERROR=ON); else args+=(-DSLUICE_WERROR=OFF); fi
cmake -S . -B "$BUILD_DIR" "${args[@]}" >/dev/null
# shellcheck disable=SC2086
ninja -C "$BUILD_DIR" -j "$JOBS" ${TARGETS:-}
