#!/usr/bin/env bash
# The KLD half of docs/QUALITY.md: ranks the recipes of tools/train/recipes.sh
# against the bf16 torch model on the held-out text.
#   1. a `sluice kld` suite of W windows of T tokens from models/kjv-heldout.txt;
#   2. the reference: the bf16 checkpoint run by torch (tools/train/torch_ref.py);
#   3. `sluice kld capture` of every recipe's container, `kld compare` of each
#      against the reference (window-clustered bootstrap CIs), `kld paired`
#      of each recipe against the committed one (t8-vq3r), and the HTML report;
#   4. a screenshot of the report in headless Chromium (when installed).
# Needs the recipe containers that recipes.sh converted into WORK_DIR.
# usage: tools/train/quality.sh WORK_DIR [WINDOWS=64] [CTX=128]   (SLUICE=build/sluice)
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=${1:?usage: quality.sh WORK_DIR [WINDOWS] [CTX]}
WIN=${2:-64}
CTX=${3:-128}
SLUICE=${SLUICE:-build/sluice}
PY=/usr/bin/python3
RECIPES="t8-vq3r t4-vq3r t3-vq3r t8-vq2r t8-vq4p"
K="$WORK/kld"
mkdir -p "$K"
container() { if [ "$1" = t8-vq3r ]; then echo models/sluice-mini; else echo "$WORK/$1"; fi; }
for r in $RECIPES; do
    [ -f "$(container "$r")/manifest.json" ] || { echo "quality.sh: $(container "$r") missing: run tools/train/recipes.sh $WORK first" >&2; exit 1; }
done
[ -f "$K/suite/suite-manifest.json" ] ||
    "$SLUICE" kld suite make --out "$K/suite" --context "$CTX" --source "kjv=models/kjv-heldout.txt:$WIN" \
        --tokenizer models/sluice-mini >&2
[ -f "$K/ref/manifest.json" ] || $PY tools/train/torch_ref.py "$K/suite" models/sluice-mini-hf "$K/ref"
receipts=() labels=() tokens=()
for r in $RECIPES; do
    [ -f "$K/cap-$r/manifest.json" ] ||
        "$SLUICE" kld capture --model "$(container "$r")" --suite "$K/suite" --out "$K/cap-$r" --run-name "$r" --no-progress >&2
    "$SLUICE" kld compare --suite "$K/suite" --reference "$K/ref" --candidate "$K/cap-$r" --json "$K/$r.json" \
        --tokens "$K/$r.tokens.safetensors" --no-progress >"$K/$r.txt"
    receipts+=("$K/$r.json") labels+=("$r") tokens+=("$K/$r.tokens.safetensors")
done
for r in $RECIPES; do
    [ "$r" = t8-vq3r ] && continue
    "$SLUICE" kld paired --suite "$K/suite" --reference "$K/ref" --a "$K/cap-t8-vq3r" --b "$K/cap-$r" \
        --json "$K/paired-$r.json" --no-progress >"$K/paired-$r.txt"
done
"$SLUICE" kld report --receipts "${receipts[@]}" --tokens "${tokens[@]}" --labels "${labels[@]}" --out "$K/report.html" \
    --title "sluice-mini recipes vs the bf16 torch model (held-out KJV)" >&2
if command -v chromium >/dev/null 2>&1; then
    chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,1600 \
        --screenshot="$K/report.png" "file://$(cd "$K" && pwd)/report.html" >/dev/null 2>&1 || true
fi
# One JSON line per recipe: its KLD summary, for docs/QUALITY.md.
for r in $RECIPES; do
    $PY - "$K/$r.json" "$r" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
keep = {k: v for k, v in j.items() if not isinstance(v, (list, dict)) or k in ("kl", "kld", "top1", "ci95", "summary")}
keep["recipe"] = sys.argv[2]
print(json.dumps(keep))
EOF
done
