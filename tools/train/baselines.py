#!/usr/bin/python3
"""Unigram and bigram baselines (and, with --hf, the torch model) on the held-out text, with the model's
tokenizer, scored on exactly the tokens `sluice perplexity --ctx T` scores
(non-overlapping windows of T tokens, second half).

  unigram: add-one smoothed counts of the training stream;
  bigram:  interpolated absolute discounting (d = 0.75) down to that
           unigram, the usual strong count baseline.

Usage: baselines.py DATA_DIR [--ctx 128] [--json OUT] [--hf HF_DIR] [--paired PPL_JSON]
  (DATA_DIR: train.py's OUT_DIR; PPL_JSON: `sluice perplexity --json` on the same
  file and --ctx, whose per-window NLL sums are paired with the bigram's)
"""

import argparse
import json
import math
import os

import numpy as np
import torch


def clustered(win_sums, win_n):
    S, N, W = sum(win_sums), sum(win_n), len(win_sums)
    m = S / N
    se = math.sqrt(W / (W - 1) * sum((s - m * n) ** 2 for s, n in zip(win_sums, win_n))) / N
    return {"ppl": math.exp(m), "ppl_ci95": [math.exp(m - 1.96 * se), math.exp(m + 1.96 * se)],
            "nll_mean": m, "nll_se": se, "tokens_scored": N, "windows": W, "window_nll": list(win_sums)}


def paired(a_sums, b_sums, win_n):
    """NLL of b minus a per token, windows as clusters: the same windows scored
    by both, so their shared difficulty cancels (an unpaired pair of CIs
    overlaps even when one model is better in every window)."""
    d = [y - x for x, y in zip(a_sums, b_sums)]
    r = clustered(d, win_n)
    return {"nll_diff": r["nll_mean"], "nll_diff_ci95": [r["nll_mean"] - 1.96 * r["nll_se"], r["nll_mean"] + 1.96 * r["nll_se"]],
            "ppl_ratio": math.exp(r["nll_mean"]), "windows_b_worse": sum(1 for x in d if x > 0), "windows": len(d)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data_dir")
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--json")
    ap.add_argument("--hf", help="also score this bf16 checkpoint with the torch model (float64)")
    ap.add_argument("--paired", help="sluice perplexity --json output: pair its windows with the bigram's")
    a = ap.parse_args()
    d = torch.load(os.path.join(a.data_dir, "data.pt"))
    V = d["vocab"]
    tr = d["train"].numpy().astype(np.int64)
    uni = np.bincount(tr, minlength=V).astype(np.float64)
    p_uni = (uni + 1) / (uni.sum() + V)
    pair = tr[:-1] * V + tr[1:]
    keys, cnt = np.unique(pair, return_counts=True)
    big = dict(zip(keys.tolist(), cnt.tolist()))
    ctx_tot = np.bincount(tr[:-1], minlength=V).astype(np.float64)
    ctx_types = np.bincount(keys // V, minlength=V).astype(np.float64)
    D = 0.75

    def p_big(prev, t):
        c = ctx_tot[prev]
        if c == 0:
            return p_uni[t]
        return max(big.get(prev * V + t, 0) - D, 0) / c + D * ctx_types[prev] / c * p_uni[t]

    h = d["heldout"].numpy().astype(np.int64)
    T = a.ctx
    out = {}
    for name in ("unigram", "bigram"):
        sums, ns = [], []
        for w in range(len(h) // T):
            win = h[w * T:(w + 1) * T].copy()
            win[0] = d["bos"]
            s = 0.0
            for i in range(T // 2, T - 1):
                s -= math.log(p_uni[win[i + 1]] if name == "unigram" else p_big(win[i], win[i + 1]))
            sums.append(s)
            ns.append(T - 1 - T // 2)
        out[name] = clustered(sums, ns)
    if a.hf:
        import sys
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import hfexport
        from kimi_linear import KimiLinear
        cfg = json.load(open(os.path.join(a.hf, "config.json")))
        m = hfexport.load_bf16(KimiLinear(cfg), a.hf).double().eval()
        W = len(h) // T
        x = torch.from_numpy(h[:W * T].reshape(W, T).copy())
        x[:, 0] = d["bos"]
        sums = []
        with torch.no_grad():
            for b in range(0, W, 64):
                xb = x[b:b + 64]
                lp = torch.log_softmax(m(xb)[:, T // 2:T - 1], -1)
                nll = -lp.gather(-1, xb[:, T // 2 + 1:, None])[..., 0]
                sums += nll.sum(1).tolist()
        out["torch_bf16"] = clustered(sums, [T - 1 - T // 2] * W)
    if a.paired:
        ps = json.load(open(a.paired))
        if ps["ctx"] != T or len(ps["window_nll"]) != len(out["bigram"]["window_nll"]):
            raise SystemExit("%s: ctx %d / %d windows do not match ctx %d / %d windows here"
                             % (a.paired, ps["ctx"], len(ps["window_nll"]), T, len(out["bigram"]["window_nll"])))
        out["paired_bigram_minus_sluice"] = paired(ps["window_nll"], out["bigram"]["window_nll"],
                                                   [T - 1 - T // 2] * len(ps["window_nll"]))
    out["ctx"] = T
    print(json.dumps(out, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
