#!/usr/bin/env bash
# Packages a training run (tools/train/train.py OUT_DIR) as the repository's
# model: models/sluice-mini-hf (the bf16 checkpoint, tokenizer files, loss
# curve), models/sluice-mini (the container, `sluice convert` with the
# recipe below), models/kjv-heldout.txt, and PROVENANCE.json / .md.
# usage: tools/train/package.sh OUT_DIR [SLUICE=build/sluice]
set -euo pipefail
cd "$(dirname "$0")/../.."
RUN=${1:?usage: package.sh TRAIN_OUT_DIR}
SLUICE=${SLUICE:-build/sluice}
HF=models/sluice-mini-hf
C=models/sluice-mini
RECIPE="--trunk-bits 8"          # Q8G trunk, VQ3R experts (3 stages x 256 entries, 3 bits/weight)
PY=/usr/bin/python3
mkdir -p "$HF"
for f in config.json model.safetensors tiktoken.model tokenizer_config.json chat_template.jinja; do
    cp "$RUN/hf/$f" "$HF/$f"
done
cp "$RUN/loss.png" "$RUN/train.json" "$HF/"
cp "$RUN/heldout.txt" models/kjv-heldout.txt
rm -rf "$C.tmp"
"$SLUICE" convert "$HF" "$C.tmp" $RECIPE --quiet
rm -rf "$C"
mv "$C.tmp" "$C"
"$SLUICE" perplexity "$C" models/kjv-heldout.txt --ctx 128 --json --no-progress -t 1 > "$RUN/ppl_sluice.json"
$PY tools/train/baselines.py "$RUN" --ctx 128 --hf "$HF" --json "$RUN/baselines.json" > /dev/null
$PY - "$RUN" "$HF" "$RECIPE" <<'PYEOF'
import json, os, sys
run, hf, recipe = sys.argv[1:4]
tr = json.load(open(os.path.join(run, "train.json")))
ps = json.load(open(os.path.join(run, "ppl_sluice.json")))
bl = json.load(open(os.path.join(run, "baselines.json")))
prov = {"model": "sluice-mini", "architecture": "Kimi-Linear (../shared/spec/MODEL.md), tools/train/kimi_linear.py",
        "corpus": tr["corpus"], "tokenizer": tr["tokenizer"], "seed": tr["seed"], "steps": tr["steps"],
        "steps_planned": tr["steps_planned"], "batch": tr["batch"], "ctx": tr["ctx"], "lr": tr["lr"],
        "parameters": tr["parameters"], "train_loss_last20_mean": tr["train_loss_last20_mean"],
        "heldout_loss_bf16": bl["torch_bf16"]["nll_mean"], "script_commit": tr["script_commit"],
        "torch": tr["torch"], "train_wall_s": tr["wall_s"],
        "train_command": "LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-serial /usr/bin/python3 tools/train/train.py OUT --steps %d --seed %d" % (tr["steps_planned"], tr["seed"]),
        "convert": "sluice convert models/sluice-mini-hf models/sluice-mini " + recipe,
        "heldout_file": "models/kjv-heldout.txt",
        "heldout_ppl_sluice": {"ctx": ps["ctx"], "ppl": ps["ppl"], "ppl_ci95": ps["ppl_ci95"],
                               "tokens_scored": ps["tokens_scored"], "windows": ps["windows"]},
        "heldout_ppl_torch_bf16": bl["torch_bf16"]["ppl"], "heldout_ppl_bigram": bl["bigram"]["ppl"],
        "heldout_ppl_unigram": bl["unigram"]["ppl"]}
json.dump(prov, open(os.path.join(hf, "PROVENANCE.json"), "w"), indent=1)
print(json.dumps(prov, indent=1))
PYEOF
