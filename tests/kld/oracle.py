#!/usr/bin/python3
"""Independent numpy oracle for the KLD tests, written from KLD.md (not from
the C++ code). Each subcommand reads raw little-endian files written by the
test and prints JSON on stdout.

  rng SEED N B                 numpy default_rng(SEED).integers(0, N, (B, N))
  boot WMEANS_F64 B SEED       festr2 window-cluster bootstrap (§4.5)
  summ VEC_F64                 festr2 stats(): mean, median, p95, p99, max
  kl REF_F32 CAND_F32 R V TOKS_I32   per-row KL/JS/NLL in fp64 (§7.4) and fp32 (§4.2)
  kldenc LOGITS_F32 R V        llama.cpp .kld row encoding (§6.3), hex
  torchkl REF_F32 CAND_F32 R V [CAP]  festr2 v0's own torch float32 arithmetic (§4.2);
                               CAP sets ATEN_CPU_CAPABILITY (e.g. avx512) before torch loads
"""
import json
import sys

import numpy as np


def f64(p):
    return np.fromfile(p, dtype="<f8")


def cmd_rng(seed, n, b):
    g = np.random.default_rng(seed)
    first = int(np.random.PCG64(np.random.SeedSequence(seed)).random_raw())
    m = g.integers(0, n, size=(b, n))
    return {"first64": "%016x" % first, "matrix": m.tolist()}


def cmd_boot(path, b, seed):
    w = f64(path)
    idx = np.random.default_rng(seed).integers(0, len(w), size=(b, len(w)))
    s = w[idx].mean(axis=1)
    lo, hi = np.percentile(s, [2.5, 97.5])
    return {"estimate": float(np.mean(w)), "standard_error": float(np.std(s, ddof=1)),
            "ci95_low": float(lo), "ci95_high": float(hi)}


def cmd_summ(path):
    v = f64(path)
    return {"mean": float(np.mean(v)), "median": float(np.median(v)), "p95": float(np.percentile(v, 95)),
            "p99": float(np.percentile(v, 99)), "max": float(np.max(v))}


def fp64_rows(x, y, toks):
    x = x.astype(np.float64)
    y = y.astype(np.float64)
    out = {"kl": [], "js": [], "nll_ref": [], "nll_cand": [], "top1": [], "top1_tie": []}
    ln2 = np.log(2.0)
    for r in range(x.shape[0]):
        a = x[r] - x[r].max()
        a = a - np.log(np.sum(np.exp(a)))
        b = y[r] - y[r].max()
        b = b - np.log(np.sum(np.exp(b)))
        p = np.exp(a)
        q = np.exp(b)
        with np.errstate(invalid="ignore", divide="ignore"):
            kl = np.sum(np.where(p > 0, p * (a - b), 0.0))
            both = np.isfinite(a) & np.isfinite(b)
            m = np.where(both, np.maximum(a, b) + np.log1p(np.exp(-np.abs(a - b))) - ln2,
                         np.maximum(a, b) - ln2)
            js = 0.5 * np.sum(np.where(p > 0, p * (a - m), 0.0)) + 0.5 * np.sum(np.where(q > 0, q * (b - m), 0.0))
        t = toks[r + 1]
        out["kl"].append(float(kl))
        out["js"].append(float(js))
        out["nll_ref"].append(float(-a[t]))
        out["nll_cand"].append(float(-b[t]))
        out["top1"].append(int(np.argmax(x[r]) == np.argmax(y[r])))
        tie = np.any((x[r] == x[r].max()) & (y[r] == y[r].max()))
        out["top1_tie"].append(int(tie))
    return out


def fp32_rows(x, y):
    kls, jss = [], []
    ln2 = np.float32(np.log(2.0))
    for r in range(x.shape[0]):
        xr = x[r] - x[r].max()
        a = xr - np.log(np.sum(np.exp(xr), dtype=np.float32))
        yr = y[r] - y[r].max()
        b = yr - np.log(np.sum(np.exp(yr), dtype=np.float32))
        p, q = np.exp(a), np.exp(b)
        kls.append(float(np.sum(p * (a - b), dtype=np.float32)))
        lm = np.logaddexp(a, b) - ln2
        jss.append(float(np.float32(0.5) * np.sum(p * (a - lm), dtype=np.float32)
                         + np.float32(0.5) * np.sum(q * (b - lm), dtype=np.float32)))
    return {"kl32": kls, "js32": jss}


def cmd_kl(rp, cp, r, v, tp):
    x = np.fromfile(rp, dtype="<f4").reshape(r, v)
    y = np.fromfile(cp, dtype="<f4").reshape(r, v)
    toks = np.fromfile(tp, dtype="<i4")
    out = fp64_rows(x, y, toks)
    if np.all(np.isfinite(x)) and np.all(np.isfinite(y)):
        out.update(fp32_rows(x, y))
    return out


def cmd_kldenc(path, r, v):
    x = np.fromfile(path, dtype="<f4").reshape(r, v)
    nv = 2 * ((v + 1) // 2) + 4
    rows = np.zeros((r, nv), dtype="<u2")
    for i in range(r):
        row = x[i]
        mx = np.float32(row.max())
        mn = np.float32(max(row.min(), mx - np.float32(16)))
        lse = np.float32(np.log(np.sum(np.exp(row - mx).astype(np.float64))))
        scale = np.float32((mx - mn) / np.float32(65535))
        mlp = np.float32(mn - mx - lse)
        hdr = np.array([scale, mlp], dtype="<f4").view("<u2")
        rows[i, 0:4] = hdr
        if scale != 0:
            iscale = np.float32(np.float32(1) / scale)
            val = (iscale * (row - mn)).astype(np.float32)
            q = np.rint(val).astype(np.int64)  # rint: round half to even
            q = np.where(row > mn, np.clip(q, 0, 65535), 0)
            rows[i, 4:4 + v] = q.astype("<u2")
    return {"hex": rows.tobytes().hex()}


def cmd_torchkl(rp, cp, r, v, cap=None):
    import math
    import os

    if cap:
        os.environ["ATEN_CPU_CAPABILITY"] = cap
    import torch
    used = torch.__config__.show().split("CPU capability usage:")[1].split("\n")[0].strip()
    x = torch.from_numpy(np.fromfile(rp, dtype="<f4").reshape(r, v))
    y = torch.from_numpy(np.fromfile(cp, dtype="<f4").reshape(r, v))
    a = torch.log_softmax(x.float(), dim=-1)
    b = torch.log_softmax(y.float(), dim=-1)
    p, q = a.exp(), b.exp()
    kl = (p * (a - b)).sum(dim=-1).double()
    lm = torch.logaddexp(a, b) - math.log(2.0)
    js = (0.5 * (p * (a - lm)).sum(dim=-1) + 0.5 * (q * (b - lm)).sum(dim=-1)).double()
    top = (torch.argmax(x, dim=-1) == torch.argmax(y, dim=-1))
    return {"kl": kl.tolist(), "js": js.tolist(), "top1": [int(t) for t in top.tolist()], "capability": used,
            "torch": torch.__version__}


def main():
    a = sys.argv[1:]
    if a[0] == "rng":
        r = cmd_rng(int(a[1]), int(a[2]), int(a[3]))
    elif a[0] == "boot":
        r = cmd_boot(a[1], int(a[2]), int(a[3]))
    elif a[0] == "summ":
        r = cmd_summ(a[1])
    elif a[0] == "kl":
        r = cmd_kl(a[1], a[2], int(a[3]), int(a[4]), a[5])
    elif a[0] == "torchkl":
        r = cmd_torchkl(a[1], a[2], int(a[3]), int(a[4]), a[5] if len(a) > 5 else None)
    elif a[0] == "kldenc":
        r = cmd_kldenc(a[1], int(a[2]), int(a[3]))
    else:
        sys.exit("unknown command")
    json.dump(r, sys.stdout)


if __name__ == "__main__":
    main()
