#!/usr/bin/env bash
# Configures and builds. BUILD_DIR (default build) and SANITIZE=1 select the
# variant; TARGETS (default: everything) names what ninja builds; WERROR=1
# turns warnings into errors. WERROR defaults to 1 under CI (CI set, as
# .ci/run has it) and 0 elsewhere: the flag is part of every compile line, so
# the demo and the test suite must agree on it or the suite would recompile
# everything the demo built.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
if [ -n "${CI:-}" ] && [ "${CI:-}" != 0 ] && [ "${CI:-}" != false ]; then WERROR=${WERROR:-1}; fi
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release)
if [ "${SANITIZE:-0}" = 1 ]; then
  args=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_SANITIZE=ON -DSLUICE_BUILD_BENCH=OFF)
fi
if [ "${WERROR:-0}" = 1 ]; then args+=(-DSLUICE_WERROR=ON); else args+=(-DSLUICE_WERROR=OFF); fi
cmake -S . -B "$BUILD_DIR" "${args[@]}" >/dev/null
# Each step's line shows how far the build is and how long it has run.
export NINJA_STATUS=${NINJA_STATUS:-"[%f/%t %es] "}
# shellcheck disable=SC2086
ninja -C "$BUILD_DIR" -j "$JOBS" ${TARGETS:-}
