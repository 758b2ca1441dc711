#!/usr/bin/env bash
# The README's first command. Sets up a fresh Debian machine (the build's
# packages only), builds the sluice command and its library (not the tests
# nor the benchmarks), and streams text from the model shipped in the
# repository: models/sluice-mini, a 5.3M-parameter Kimi-Linear trained on the
# King James Bible (tools/train/). Needs nothing outside the repository.
#
# The budget is sluice's default, printed on its first line: the most this
# machine can spare, capped at what the model can use (its floor plus every
# expert record). A fixed budget here rotted once already: 160M sat a few MiB
# above the floor of the machine it was written on, and the floor grew.
#
# The command below is quoted in README.md with what it prints;
# tests/install/readme_demo.py checks that the two still agree.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s.%N)
say() { printf 'demo: %s\n' "$*" >&2; }
say "installing the build's Debian packages (apt runs only for those missing)"
bash scripts/install-deps.sh --build
say "building the sluice command and the library it links (tests and benchmarks are left to scripts/test.sh)"
TARGETS=sluice_cli bash scripts/build.sh
say "built in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.0f", b-a}') s since the demo started; running models/sluice-mini"
./build/sluice run models/sluice-mini --raw --bos "And God said unto Moses," -n 64 \
    --temp 0.8 --top-p 0.9 --seed 7 --repeat-penalty 1.1 --ctx 256
