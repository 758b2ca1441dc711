#!/usr/bin/env bash
# ARM64 (aarch64 Linux) under emulation: cross-builds the engine and its
# kernel, compatibility, invariance, placement and bad-input tests with
# Debian's g++-aarch64-linux-gnu and runs them under qemu-aarch64 (Debian's
# qemu-user), whose default CPU model ("max") has NEON, dotprod and i8mm.
#
# What this proves: the code builds for aarch64, the NEON kernels (src/quant,
# src/kld/kernels) are bit-identical to the scalar reference, and the engine's logits
# on ARM match warp's fixtures as on x86. What it cannot prove: speed (qemu
# translates every instruction; see docs/PERF.md for the emulated ratios).
#
# The build's arm64 libraries (OpenSSL, zlib, utf8proc, GoogleTest) are
# Debian's arm64 packages, downloaded with apt-get and unpacked into
# $BUILD_DIR/deps: the host's dpkg state is not changed (no
# `dpkg --add-architecture`). The HTTP server (cpp-httplib) and the CLI are
# not cross-built: none of the tests run here needs them.
#
# BUILD_DIR (default build-arm64), JOBS (default nproc). ARM64_FULL=1 also
# runs the tests that are left out for time (see SELECT and SKIP below).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-arm64}
JOBS=${JOBS:-$(nproc)}
export DEBIAN_FRONTEND=noninteractive
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
t0=$(date +%s)

# --- toolchain and emulator ---------------------------------------------
need=""
for p in g++-aarch64-linux-gnu qemu-user cmake ninja-build; do
  dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
  $SUDO apt-get update -qq
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -qq --no-install-recommends $need >/dev/null
fi

# --- arm64 libraries, unpacked (not installed) ---------------------------
mkdir -p "$BUILD_DIR"
DEPS="$(cd "$BUILD_DIR" && pwd)/deps"
PKGS="libssl-dev libssl3 zlib1g-dev zlib1g libutf8proc-dev libutf8proc2 libgtest-dev libgmock-dev
      libbenchmark-dev libbenchmark1debian nlohmann-json3-dev libstb-dev libcli11-dev"
stamp="$DEPS/.stamp"  # the package list, and the layout version below
LAYOUT=2
if ! [ -f "$stamp" ] || [ "$(cat "$stamp")" != "$LAYOUT $(echo $PKGS)" ]; then
  echo "== arm64 packages: $(echo $PKGS)"
  rm -rf "$DEPS" "$BUILD_DIR/apt"
  a="$(cd "$BUILD_DIR" && pwd)/apt"
  mkdir -p "$a/lists/partial" "$a/cache/archives/partial" "$a/debs" "$DEPS"
  # Own lists and cache, empty dpkg status: apt resolves arm64 names
  # without touching the host's package database.
  o=(-oAPT::Architecture=arm64 -oAPT::Architectures=arm64 -oDir::State::Lists="$a/lists"
     -oDir::Cache="$a/cache" -oDir::State::status=/dev/null -oAPT::Sandbox::User=root)
  apt-get "${o[@]}" update -qq
  # shellcheck disable=SC2086
  (cd "$a/debs" && apt-get "${o[@]}" download $PKGS >/dev/null)
  for f in "$a/debs"/*.deb; do dpkg-deb -x "$f" "$DEPS"; done
  # Some runtime libraries (zlib) ship in /lib, not /usr/lib: merge them,
  # so one library folder serves the linker and the build tree's RPATH.
  if [ -d "$DEPS/lib" ]; then cp -a "$DEPS/lib/." "$DEPS/usr/lib/"; fi
  # Absolute symlinks inside the packages (e.g. libfoo.so -> /usr/lib/...)
  # would point at the host: make them relative to the unpacked tree.
  find "$DEPS" -type l | while read -r l; do
    t=$(readlink "$l")
    case "$t" in /*) ln -sfn "$DEPS$t" "$l" ;; esac
  done
  rm -rf "$a"
  echo "$LAYOUT" $PKGS >"$stamp"
fi

# --- cross build -----------------------------------------------------------
# Only the folders whose tests run here (kld_fast_tests drives cli/kld, hence
# libcli11-dev above, header-only); the server needs cpp-httplib, and
# text/fullscale/oracle drive the x86 CLI or Python against it.
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
  -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" -DSLUICE_ARM64_DEPS="$DEPS" \
  -DSLUICE_SKIP="server;text;fullscale;oracle" -DSLUICE_BUILD_BENCH=ON >/dev/null
TARGETS="unit_tests compat_tests invariance_tests badinput_tests placement_tests kld_fast_tests"
# shellcheck disable=SC2086
ninja -C "$BUILD_DIR" -j "$JOBS" $TARGETS
t1=$(date +%s)

# --- tests under qemu-aarch64 -------------------------------------------------
# The labels of the issue, less what emulation makes too slow for CI
# (measured under qemu on the 2-core machine, docs/LEARNED.md 2026-12-03):
# the generated-placement sweep (198 s), the chunked-prefill I/O count (34 s),
# and the thread/chunk invariance and placement sweeps on all but two
# fixtures (15-31 s each). Kept: every unit, bad-input and compatibility test,
# scalar-vs-NEON logits on every fixture, and the two sweeps on kimi-linear-tok
# (plus v3-q3trunk-tiny / converted-vq4p). ARM64_FULL=1 runs everything.
# Plus the KLD fast-kernel tests (NEON vs scalar, bit for bit) and the
# reader's 16 KiB-page test; their CLI, numpy and I/O-mode cases run Python
# or whole files through the kernel, prove nothing ARM-specific and cost
# minutes under qemu.
SELECT=(-L 'unit|compat|invariance|placement|badinput')
# The memory-return tests measure VmRSS after MADV_DONTNEED and a real
# child's memory pressure: qemu-user need not pass madvise through to the
# host, so under emulation they would test qemu, not sluice (they run natively
# in scripts/test.sh, Release and ASan).
EMU_RSS='RecordPool\.ALoweredLimitReturnsTheMemoryVmRssDrops|Pressure\.(InjectedShortage|ARealChild)'
# Tests that drive the CLI (`sluice`), which is not cross-built, are not
# defined in this build at all (SLUICE_CLI_TESTS in tests/CMakeLists.txt).
SKIP='PlacementsGenerated\.|Prefill\.Chunked|ThreadsChunksAndCallsAreBitIdentical/(converted|deepseek|k3|kimi_linear_tiny|kimi_linear_prefixed)|Placements\.BitIdentical/(converted_default|converted_trunk3|converted_vq2r|deepseek|k3|kimi_linear_tiny|kimi_linear_prefixed|v3)'
KLD_RE='^(KldFast\.(ExpIsWithinTwoUlpOfFp64|JsMixtureFunctionKeepsRelativeAccuracy|ScalarAvx2Avx512AreBitIdentical|WithinSection74LimitsOfFp64|IdenticalRowsGiveExactlyZero|NonFiniteIsRefusedAtTheSameColumn|ReceiptsBitIdenticalForAnyThreadCountAndIsa)|KldReadAhead\..*)$'
cd "$BUILD_DIR"
if [ "${ARM64_FULL:-0}" = 1 ]; then
  ctest --output-on-failure -j "$JOBS" "${SELECT[@]}" -E "$EMU_RSS"
  ctest --output-on-failure -j "$JOBS" -R '^(KldFast|KldReadAhead)\.'
else
  echo "== ARM64 (qemu-aarch64) tests: ${SELECT[*]} -E '$SKIP', and -R '$KLD_RE'"
  ctest --output-on-failure -j "$JOBS" "${SELECT[@]}" -E "$SKIP|$EMU_RSS"
  ctest --output-on-failure -j "$JOBS" -R "$KLD_RE"
fi
t2=$(date +%s)
echo "== ARM64: setup+build $((t1 - t0)) s, tests $((t2 - t1)) s"
