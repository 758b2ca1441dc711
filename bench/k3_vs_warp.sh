#!/usr/bin/env bash
# sluice vs warp 0.6.8 on the K3-shaped container (issue 14):
#   bash bench/k3_vs_warp.sh [MODEL] [extra vs_warp options]
# MODEL defaults to $SLUICE_K3_MODEL (written by `sluice synth --family k3`).
# Expert caches of 0, 4 and 8 GiB for both engines (warp WASTE_CACHE_MB,
# sluice floor + the same cache: the floor holds the trunk), 2 threads, a
# 16-token prompt plus 16 tokens, page cache dropped before every run,
# engines alternating, the disk probed in the same run, then a 512-token
# prompt's first-token time with chunked prefill. Needs root. One round:
# a cold K3 token reads ~18 GB, so each run takes minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-${SLUICE_K3_MODEL:-}}
[ -n "$MODEL" ] || { echo "usage: bash bench/k3_vs_warp.sh MODEL (or set SLUICE_K3_MODEL)" >&2; exit 2; }
[ $# -gt 0 ] && shift
exec bash bench/vs_warp.sh "$MODEL" --caches 0,4,8 --gen 16 --rounds 1 "$@"
