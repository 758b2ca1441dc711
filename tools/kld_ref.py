#!/usr/bin/python3
"""Independent numpy comparator for v0 logits directories (KLD.md §7.4, fp64).

Written from the spec, not from the C++ code. It streams row blocks of both
operands from their safetensors files (no memory map, sequential reads, like
sluice) and computes per-token KL(ref || cand) and JS in float64 with the
§7.4 conventions (-inf reference entries contribute 0; a finite reference
entry where the candidate is -inf makes KL +inf). It serves two purposes:

  * a cross-check of `sluice kld compare --precision fp64` on whole suites;
  * the numpy baseline of bench/kld_bench.sh (throughput in GB/s, both
    operands counted).

usage: kld_ref.py --suite SUITE_DIR --reference REF_DIR --candidate CAND_DIR
                  [--windows 0-3,7] [--row-block 8] [--no-js] [--json OUT]

Prints one JSON object: positions, windows, kl_mean, js_mean, top1,
per-window means, bytes read and seconds. Only F32 logits are read.
"""
import argparse
import json
import os
import struct
import sys
import time

import numpy as np

LN2 = np.log(2.0)


def parse_windows(spec, n):
    if not spec:
        return list(range(n))
    out = []
    for part in spec.split(","):
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return out


def load_json(path):
    with open(path, "rb") as f:
        return json.load(f)


def tensor_range(path):
    """(data offset, rows, cols) of the F32 tensor 'logits' in a safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
    t = hdr["logits"]
    if t["dtype"] != "F32":
        sys.exit("%s: logits dtype %s (only F32 here)" % (path, t["dtype"]))
    rows, cols = t["shape"]
    return 8 + n + t["data_offsets"][0], rows, cols


def block_metrics(x, y, toks, want_js):
    """Per-row KL, JS, top-1 and NLLs of row blocks x, y ([B, V] float32)."""
    x64 = x.astype(np.float64)
    y64 = y.astype(np.float64)
    a = x64 - x64.max(axis=1, keepdims=True)
    a -= np.log(np.exp(a).sum(axis=1, keepdims=True))
    b = y64 - y64.max(axis=1, keepdims=True)
    b -= np.log(np.exp(b).sum(axis=1, keepdims=True))
    p = np.exp(a)
    xf = x64 != -np.inf
    yf = y64 != -np.inf
    both = xf & yf
    with np.errstate(invalid="ignore"):
        d = np.where(both, a - b, 0.0)
    kl = (p * d).sum(axis=1)
    kl[(xf & ~yf).any(axis=1)] = np.inf
    js = np.zeros(x.shape[0])
    if want_js:
        q = np.exp(b)
        u = np.abs(d)
        g = LN2 - np.log1p(np.exp(-u))  # a - m where a >= b; b - m = g - u
        am = np.where(d >= 0, g, g - u)
        bm = np.where(d <= 0, g, g - u)
        t = np.where(both, p * am + q * bm, np.where(xf, p * LN2, np.where(yf, q * LN2, 0.0)))
        js = 0.5 * t.sum(axis=1)
    top1 = (x.argmax(axis=1) == y.argmax(axis=1)).astype(np.int64)
    r = np.arange(x.shape[0])
    return kl, js, top1, -a[r, toks], -b[r, toks]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", required=True)
    ap.add_argument("--reference", required=True)
    ap.add_argument("--candidate", required=True)
    ap.add_argument("--windows", default="")
    ap.add_argument("--row-block", type=int, default=8)
    ap.add_argument("--no-js", action="store_true")
    ap.add_argument("--json", default="")
    args = ap.parse_args()

    suite = load_json(os.path.join(args.suite, "suite-manifest.json"))
    rm = load_json(os.path.join(args.reference, "manifest.json"))
    cm = load_json(os.path.join(args.candidate, "manifest.json"))
    rfiles = {w["window_index"]: w["file"] for w in rm["windows"]}
    cfiles = {w["window_index"]: w["file"] for w in cm["windows"]}
    wins = suite["windows"]
    sel = parse_windows(args.windows, len(wins))
    t0 = time.time()
    nbytes = 0
    all_kl, all_js, all_t1, nll_r, nll_c, per_window = [], [], [], [], [], []
    for pos in sel:
        w = wins[pos]
        idx = w["index"]
        tok_path = os.path.join(args.suite, w["token_file"]) if "token_file" in w else None
        toks = np.array(load_json(tok_path), dtype=np.int64) if tok_path else None
        rp = os.path.join(args.reference, rfiles[idx])
        cp = os.path.join(args.candidate, cfiles[idx])
        ro, rows, V = tensor_range(rp)
        co, rows2, V2 = tensor_range(cp)
        if (rows, V) != (rows2, V2):
            sys.exit("window %d: shapes differ" % idx)
        wk = []
        with open(rp, "rb") as fr, open(cp, "rb") as fc:
            fr.seek(ro)
            fc.seek(co)
            for r0 in range(0, rows, args.row_block):
                n = min(args.row_block, rows - r0)
                x = np.fromfile(fr, dtype="<f4", count=n * V).reshape(n, V)
                y = np.fromfile(fc, dtype="<f4", count=n * V).reshape(n, V)
                nbytes += x.nbytes + y.nbytes
                tk = toks[r0 + 1:r0 + 1 + n] if toks is not None else np.zeros(n, dtype=np.int64)
                kl, js, t1, nr, nc = block_metrics(x, y, tk, not args.no_js)
                wk.append(kl)
                all_js.append(js)
                all_t1.append(t1)
                nll_r.append(nr)
                nll_c.append(nc)
        wk = np.concatenate(wk)
        all_kl.append(wk)
        per_window.append({"window_index": idx, "kl_mean": float(np.mean(wk))})
    secs = time.time() - t0
    kl = np.concatenate(all_kl)
    out = {
        "positions": int(kl.size),
        "windows": len(sel),
        "kl_mean": float(np.mean(kl)),
        "js_mean": float(np.mean(np.concatenate(all_js))) if not args.no_js else None,
        "top1": float(np.mean(np.concatenate(all_t1))),
        "nll_ref_mean": float(np.mean(np.concatenate(nll_r))),
        "nll_cand_mean": float(np.mean(np.concatenate(nll_c))),
        "per_window": per_window,
        "bytes_read": nbytes,
        "seconds": secs,
        "gb_per_s": nbytes / secs / 1e9,
    }
    text = json.dumps(out, indent=2, sort_keys=True) + "\n"
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
