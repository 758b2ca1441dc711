#!/usr/bin/env bash
# NEON against scalar under qemu-aarch64, kernel by kernel. EMULATED: qemu
# translates each ARM instruction into several host ones, and a NEON
# instruction usually into a call, so these ratios say how much work each
# kernel issues per byte, not how fast it runs on an ARM CPU. Needs the
# cross build of scripts/test-arm64.sh (BUILD_DIR, default build-arm64).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-arm64}
[ -f "$BUILD_DIR/CMakeCache.txt" ] || { echo "run scripts/test-arm64.sh first (no $BUILD_DIR)" >&2; exit 2; }
ninja -C "$BUILD_DIR" -j "${JOBS:-2}" bench_kernels >/dev/null
echo "== EMULATED (qemu-aarch64 $(qemu-aarch64 --version | head -1 | awk '{print $3}'), host $(uname -m): ratios, not speeds"
qemu-aarch64 -L /usr/aarch64-linux-gnu "$BUILD_DIR/bench/bench_kernels" \
  --benchmark_filter='/(0|3)$' --benchmark_min_time="${MIN_TIME:-0.5}" "$@"
