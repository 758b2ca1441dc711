#!/usr/bin/python3
"""Perplexity and KL divergence across engines (issue 29, deliverable 4).

  perplexity_check.py --sluice BIN --work DIR [--driver-dir DIR] [--chunks N]

llama.cpp's own llama-perplexity (compiled by prepare.sh from the bundle
against the prebuilt libllama) runs on the GGUF that `sluice export-gguf`
writes from models/sluice-mini, over the held-out text, 128-token chunks,
its exact mode (flash attention off, f32 KV), writing its logits as a
`.kld` base file. Then:

1. `sluice perplexity` on the same text (its own windows) and llama.cpp's
   PPL must agree within their 95 % intervals.
2. `sluice kld compare --reference BASE.kld --model models/sluice-mini
   --bos BOS` (sluice reading the logits llama.cpp wrote, on llama.cpp's
   chunks with llama.cpp's BOS substitution) must find the engines the same
   model: mean KLD <= 1e-5 (the .kld's 16-bit log-probabilities alone give
   about 1e-8), PPL ratio within 1e-3, the same top token >= 99.9 %.

Exit 77 (SKIP) with the reason when llama.cpp is absent.
"""
import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from llamacpp_prep import prepare  # noqa: E402
ROOT = os.path.dirname(os.path.dirname(HERE))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--driver-dir")
    ap.add_argument("--chunks", type=int, default=60)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    ddir = prepare(os.path.abspath(a.driver_dir or a.work))
    model = os.path.join(ROOT, "models", "sluice-mini")
    text = os.path.join(ROOT, "models", "kjv-heldout.txt")
    gguf = os.path.abspath(os.path.join(a.work, "sluice-mini.gguf"))
    base = os.path.abspath(os.path.join(a.work, "base.kld"))
    subprocess.run([a.sluice, "export-gguf", model, gguf, "-q"], check=True, stdout=subprocess.DEVNULL)
    # Its CPU backends load from the library folder: run it there.
    p = subprocess.run([os.path.join(ddir, "llama-perplexity"), "-m", gguf, "-f", text, "-c", "128", "-b", "128",
                        "-t", "2", "-fa", "off", "-ctk", "f32", "-ctv", "f32", "--chunks", str(a.chunks),
                        "--kl-divergence-base", base], cwd=os.path.join(ddir, "bins"), capture_output=True, text=True)
    m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", p.stdout + p.stderr)
    if p.returncode != 0 or not m:
        print("llama-perplexity failed (exit %d):\n%s" % (p.returncode, (p.stdout + p.stderr)[-3000:]))
        return 1
    l_ppl, l_pm = float(m.group(1)), float(m.group(2))
    s = json.loads(subprocess.run([a.sluice, "perplexity", model, text, "--ctx", "128", "--windows", str(a.chunks),
                                   "--json", "-t", "2"], capture_output=True, text=True, check=True).stdout)
    s_lo, s_hi = s["ppl_ci95"]
    l_lo, l_hi = l_ppl - 1.96 * l_pm, l_ppl + 1.96 * l_pm
    overlap = s_lo <= l_hi and l_lo <= s_hi
    print("perplexity, %d chunks of 128: llama.cpp %.4f (95 %%: %.2f - %.2f), sluice %.4f (95 %%: %.2f - %.2f): %s" % (
        a.chunks, l_ppl, l_lo, l_hi, s["ppl"], s_lo, s_hi, "the intervals overlap" if overlap else "DISJOINT"))
    bos = json.load(open(os.path.join(model, "specials.json")))[0]["id"]
    c = subprocess.run([a.sluice, "kld", "compare", "--reference", base, "--model", model, "--bos", str(bos)],
                       capture_output=True, text=True)
    if c.returncode != 0:
        print("sluice kld compare failed:\n" + c.stdout + c.stderr)
        return 1
    out = c.stdout

    def grab(pat):
        g = re.search(pat, out)
        return float(g.group(1)) if g else float("nan")
    kld = grab(r"Mean\s+KLD:\s+(-?[0-9.]+)")
    kmax = grab(r"Maximum KLD:\s+(-?[0-9.]+)")
    ratio = grab(r"Mean PPL\(Q\)/PPL\(base\)\s*:\s+([0-9.]+)")
    top = grab(r"Same top p:\s+([0-9.]+)")
    q_ppl = grab(r"Mean PPL\(Q\)\s*:\s+([0-9.]+)")
    ok_kld = kld <= 1e-5 and abs(ratio - 1) <= 1e-3 and top >= 99.9
    print("sluice kld compare against llama.cpp's base (BOS %d substituted, as llama.cpp evaluated): sluice PPL %.4f, "
          "PPL ratio %.6f, mean KLD %.2e, max KLD %.2e, same top %.3f %%: %s" % (
              bos, q_ppl, ratio, kld, kmax, top, "OK" if ok_kld else
              "FAIL (thresholds: mean KLD <= 1e-5, |ratio - 1| <= 1e-3, same top >= 99.9 %)"))
    return 0 if overlap and ok_kld else 1


if __name__ == "__main__":
    sys.exit(main())
