#!/usr/bin/env bash
# Held-out perplexity of models/sluice-mini-hf converted at each recipe
# (trunk 8/4/3 bits with VQ3R experts; VQ2R and VQ4P experts with an 8-bit
# trunk), for docs/QUALITY.md. One JSON line per recipe on stdout.
# usage: tools/train/recipes.sh WORK_DIR [WINDOWS=120]   (SLUICE=build/sluice)
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=${1:?usage: recipes.sh WORK_DIR [WINDOWS]}
WIN=${2:-120}
SLUICE=${SLUICE:-build/sluice}
mkdir -p "$WORK"
while IFS='|' read -r name args; do
    [ -n "$name" ] || continue
    if [ "$name" = t8-vq3r ]; then
        c=models/sluice-mini
    else
        c="$WORK/$name"
        [ -f "$c/manifest.json" ] || "$SLUICE" convert models/sluice-mini-hf "$c" $args --quiet >&2
    fi
    bytes=$(du -sb "$c" | cut -f1)
    "$SLUICE" perplexity "$c" models/kjv-heldout.txt --ctx 128 --windows "$WIN" --json --no-progress -t 1 |
        /usr/bin/python3 -c "import json,sys; j=json.load(sys.stdin); j.pop('window_nll'); j.update(recipe='$name', convert_args='$args', container_bytes=$bytes); print(json.dumps(j))"
done <<'LIST'
t4-vq3r|--trunk-bits 4
t3-vq3r|--trunk-bits 3
t8-vq2r|--trunk-bits 8 --stages 2
t8-vq4p|--trunk-bits 8 --stages 4 --entries 64 --index-bits 6
t8-vq3r|--trunk-bits 8
LIST
