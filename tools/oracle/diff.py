#!/usr/bin/python3
"""Compare two trace directories (see traceio.py) stage by stage.

Usage: diff.py A_DIR B_DIR [--tol 1e-3] [--quiet]

Walks A's stages in order (embed, L000.attn, L000.ffn, ..., final, then the
logits), prints max |diff|, mean |diff| and correlation per stage, and names
the first layer and sub-block whose max |diff| exceeds the tolerance.
Exit 0 if no stage diverges, 1 otherwise (also on a shape/stage mismatch).
"""

import argparse
import os
import sys

sys.dont_write_bytecode = True

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import traceio  # noqa: E402


def stage_stats(a, b):
    d = np.abs(a - b)
    af, bf = a.reshape(-1), b.reshape(-1)
    if af.size > 1 and af.std() > 0 and bf.std() > 0:
        corr = float(np.corrcoef(af, bf)[0, 1])
    else:
        corr = 1.0 if np.array_equal(af, bf) else 0.0
    worst = np.unravel_index(int(np.argmax(d)), d.shape) if d.size else (0, 0)
    return float(d.max()) if d.size else 0.0, float(d.mean()) if d.size else 0.0, corr, worst


def label(layer, stage):
    return stage if layer < 0 else "L%03d.%s" % (layer, stage)


def main(argv=None):
    ap = argparse.ArgumentParser(description="first divergence between two traces")
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--quiet", action="store_true", help="print only the verdict")
    args = ap.parse_args(argv)
    ma, sa, la = traceio.read_trace(args.a)
    mb, sb, lb = traceio.read_trace(args.b)
    print("A: %s (%s)  B: %s (%s)" % (args.a, ma.get("producer", "?"),
                                      args.b, mb.get("producer", "?")))
    for key in ("hidden", "n_tokens", "n_layers"):
        if ma.get(key) != mb.get(key):
            print("MISMATCH: %s A=%s B=%s" % (key, ma.get(key), mb.get(key)))
            return 1
    bmap = {(L, st): arr for L, st, arr in sb}
    rows = [(L, st, arr, bmap.get((L, st))) for L, st, arr in sa]
    missing_b = [label(L, st) for L, st, _ in sb if (L, st) not in {(x[0], x[1]) for x in sa}]
    rows.append((-1, "logits", la, lb))
    first = None
    problems = []
    if not args.quiet:
        print("%-12s %12s %12s %13s  %s" % ("stage", "max|diff|", "mean|diff|", "corr",
                                            "worst (token, index)"))
    for L, st, a, b in rows:
        name = label(L, st)
        if a is None or b is None:
            problems.append("%s missing in %s" % (name, "A" if a is None else "B"))
            if first is None:
                first = (name, None)
            continue
        if a.shape != b.shape:
            problems.append("%s shape A%s B%s" % (name, a.shape, b.shape))
            if first is None:
                first = (name, None)
            continue
        mx, mean, corr, worst = stage_stats(a, b)
        bad = not (mx <= args.tol)  # NaN counts as divergent
        if bad and first is None:
            first = (name, (mx, mean, corr))
        if not args.quiet:
            print("%-12s %12.4e %12.4e %13.9f  %s%s" % (
                name, mx, mean, corr, tuple(int(i) for i in worst),
                "  <-- first divergence" if bad and first[0] == name else
                ("  > tol" if bad else "")))
    for p in problems:
        print("PROBLEM: " + p)
    for name in missing_b:
        print("note: stage %s only in B" % name)
    if first is None:
        print("OK: no stage exceeds tol %.1e" % args.tol)
        return 0
    name, st = first
    parts = name.split(".", 1)
    where = ("layer %d, %s" % (int(parts[0][1:]), parts[1])) if name.startswith("L") and \
        len(parts) == 2 else name
    if st is None:
        print("DIVERGED at %s (missing or mis-shaped)" % where)
    else:
        print("DIVERGED first at %s: max|diff| %.4e mean|diff| %.4e corr %.9f (tol %.1e)"
              % (where, st[0], st[1], st[2], args.tol))
    return 1


if __name__ == "__main__":
    sys.exit(main())
