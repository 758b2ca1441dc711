#!/usr/bin/env bash
# Sets up a fresh machine, builds, and streams text from the model shipped
# in the repository (models/sluice-mini: a 5.3M-parameter Kimi-Linear
# trained on the King James Bible, tools/train/) under a 160 MB RAM budget,
# then prints the statistics line. Needs nothing outside the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
MODEL=${MODEL:-models/sluice-mini}
PROMPT=${PROMPT:-"And God said unto Moses,"}
./build/sluice run "$MODEL" --raw --bos "$PROMPT" -n 64 --temp 0.8 --top-p 0.9 --seed 7 \
    --repeat-penalty 1.1 --budget 160M --ctx 256
