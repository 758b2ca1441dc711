#!/usr/bin/env bash
# Writes the full-scale synthetic container for the fullscale tests, once.
# SLUICE_FULLSCALE_MODEL names an existing one to use instead. Exit 77 (SKIP)
# with the reason when there is no room: it needs about 18 GB.
set -uo pipefail
SLUICE=$1
OUT=${SLUICE_FULLSCALE_MODEL:-$2}
if [ -f "$OUT/manifest.json" ]; then
    # The manifest is written last: its presence means a complete container.
    echo "full-scale container present: $OUT"
    exit 0
fi
if [ -n "${SLUICE_FULLSCALE_MODEL:-}" ]; then
    echo "SKIP: SLUICE_FULLSCALE_MODEL=$OUT has no manifest.json"
    exit 77
fi
mkdir -p "$(dirname "$OUT")"
NEED_KB=$((20 * 1024 * 1024))
AVAIL_KB=$(df -Pk "$(dirname "$OUT")" | awk 'NR==2 {print $4}')
if [ "${AVAIL_KB:-0}" -lt "$NEED_KB" ]; then
    echo "SKIP: the full-scale container needs about 18 GB; $(dirname "$OUT") has $((AVAIL_KB / 1024 / 1024)) GB free"
    exit 77
fi
START=$(date +%s)
if ! "$SLUICE" synth --out "$OUT" --jobs "$(nproc)"; then
    echo "sluice synth failed; removing the partial container"
    rm -rf "$OUT"
    exit 1
fi
echo "wrote $(du -sh "$OUT" | cut -f1) in $(( $(date +%s) - START )) s: $OUT"
