#!/usr/bin/python3
"""Compare two logits files (little-endian float32, V values, or n x V with
--vocab): max |diff|, mean |diff|, correlation, argmax of each, top-5 sets.

Usage: compare.py A.f32 B.f32 [--threshold 1e-3] [--vocab V]
Exit 1 when max|diff| > threshold or the argmax differs (on any row).
"""

import argparse
import sys

import numpy as np


def stats(a, b):
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    b = np.asarray(b, dtype=np.float64).reshape(-1)
    if a.shape != b.shape:
        raise ValueError("length mismatch: %d vs %d" % (a.size, b.size))
    d = np.abs(a - b)
    if a.size > 1 and a.std() > 0 and b.std() > 0:
        corr = float(np.corrcoef(a, b)[0, 1])
    else:
        corr = 1.0 if np.array_equal(a, b) else 0.0
    am, bm = int(np.argmax(a)), int(np.argmax(b))
    top_a = [int(i) for i in np.argsort(-a, kind="stable")[:5]]
    top_b = [int(i) for i in np.argsort(-b, kind="stable")[:5]]
    return {"max": float(d.max()) if d.size else 0.0,
            "mean": float(d.mean()) if d.size else 0.0,
            "corr": corr, "argmax_a": am, "argmax_b": bm, "argmax_ok": am == bm,
            "top5_a": top_a, "top5_b": top_b,
            "top5_same": set(top_a) == set(top_b)}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--threshold", "--tol", type=float, default=1e-3)
    ap.add_argument("--vocab", type=int, default=0,
                    help="row length; compare row by row (default: one row)")
    a = ap.parse_args(argv)
    A = np.fromfile(a.a, dtype="<f4").astype(np.float64)
    B = np.fromfile(a.b, dtype="<f4").astype(np.float64)
    if A.size != B.size:
        print("size mismatch: %s has %d floats, %s has %d" % (a.a, A.size, a.b, B.size))
        return 1
    V = a.vocab if a.vocab > 0 else A.size
    if A.size % V:
        print("size %d is not a multiple of --vocab %d" % (A.size, V))
        return 1
    rows = A.size // V
    bad = False
    for r in range(rows):
        s = stats(A[r * V:(r + 1) * V], B[r * V:(r + 1) * V])
        tag = "" if rows == 1 else "row %d: " % r
        print("%smax|diff| %.6e  mean|diff| %.6e  corr %.9f" % (tag, s["max"], s["mean"], s["corr"]))
        print("%sargmax A %d  B %d  %s" % (tag, s["argmax_a"], s["argmax_b"],
                                          "same" if s["argmax_ok"] else "DIFFERENT"))
        print("%stop5 A %s  B %s  %s" % (tag, s["top5_a"], s["top5_b"],
                                        "same set" if s["top5_same"] else "different sets"))
        if s["max"] > a.threshold or not s["argmax_ok"]:
            bad = True
    print("FAIL" if bad else "OK")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
