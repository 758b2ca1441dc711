#!/usr/bin/env bash
# The whole test suite: a Release build with every test, then an ASan/UBSan
# build running the unit, bad-input and compatibility suites.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
(cd build && ctest --output-on-failure -j "$(nproc)")
BUILD_DIR=build-asan SANITIZE=1 bash scripts/build.sh
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure -j "$(nproc)" -L 'unit|badinput|compat')
