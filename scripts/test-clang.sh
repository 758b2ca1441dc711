#!/usr/bin/env bash
# The test suite built by clang instead of gcc (issue 19): a Release build
# with -Werror and every test but the full-scale ones, then an ASan/UBSan
# build running the unit, bad-input and compatibility suites, as
# scripts/test.sh does with gcc. Not part of .ci/run (it would double CI's
# build time); run it before a change that touches compiler-sensitive code
# (intrinsics, templates, warnings).
#   bash scripts/test-clang.sh        (CLANG=clang-14 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG=${CLANG:-clang-14}
command -v "$CLANG" >/dev/null || {
  echo "test-clang: $CLANG not found (apt-get install -y clang-14 libclang-rt-14-dev)" >&2; exit 2; }
CLANGXX=${CLANG/clang/clang++}
export CC=$CLANG CXX=$CLANGXX
# A build tree configured by another compiler keeps it: refuse rather than
# silently test gcc's binaries under clang's name.
for d in build-clang build-clang-asan; do
  if [ -f "$d/CMakeCache.txt" ] && ! grep -q "CMAKE_CXX_COMPILER:[A-Z]*=.*clang" "$d/CMakeCache.txt"; then
    echo "test-clang: $d was configured with another compiler; remove it first" >&2; exit 2
  fi
done
WERROR=1 BUILD_DIR=build-clang bash scripts/build.sh
# The full-scale tests write tens of GB; scripts/test.sh's gcc run covers them.
(cd build-clang && ctest --output-on-failure -j "$(nproc)" -LE fullscale)
BUILD_DIR=build-clang-asan SANITIZE=1 WERROR=1 TARGETS=sanitizer_suite bash scripts/build.sh
(cd build-clang-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure -j "$(nproc)" -L 'unit|badinput|compat')
