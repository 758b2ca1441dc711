#!/usr/bin/env bash
# Sets up a fresh machine, builds, and runs the main job on a small built-in
# model: a Kimi-Linear-shaped fixture container written by warp's tools.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
MODEL=${MODEL:-../shared/fixtures/warp/kimi-linear-tiny.waste}
./build/sluice info "$MODEL"
./build/sluice generate "$MODEL" --ids 3,7,11,5,9,13,2,17 -n 16
