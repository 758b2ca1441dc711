#!/usr/bin/env bash
# sluice vs warp 0.6.8, side by side on one container (issue 13):
#   bash bench/vs_warp.sh MODEL [--rounds N] [--replay ../shared/traces/kimi-linear-48b-route-150.jsonl] [--no-ttft512] [--ttft512-rounds N]
# Needs root (it drops the page cache before every run), a Release build
# with benchmarks (build/bench/bench_budget, bench_disk_probe) and warp's
# test_forward (../shared/peer/warp-0.6.8, or WARP=path). Prints the table
# and exits non-zero when a ratio is under its target. Not a CTest: timing
# belongs in benchmarks.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: bash bench/vs_warp.sh MODEL [--rounds N] [--replay TRACE] [--no-ttft512] [--ttft512-rounds N] [--only cache,nocache]" >&2; exit 2; }
for b in build/sluice build/bench/bench_budget build/bench/bench_disk_probe; do
  [ -x "$b" ] || { echo "vs_warp: $b missing: build first (bash scripts/build.sh)" >&2; exit 2; }
done
exec /usr/bin/python3 bench/vs_warp.py "$@"
