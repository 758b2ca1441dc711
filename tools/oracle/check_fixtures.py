#!/usr/bin/python3
"""Prove the oracle against warp: for every fixtures/warp/NAME.json case, run
the oracle on NAME.waste and compare with warp's last-position logits and
greedy_next8.

Usage: check_fixtures.py [FIXTURES_DIR] [--only NAME[,NAME]] [--verbose]
FIXTURES_DIR defaults to ../shared/fixtures relative to the repository root
(it may also be the warp/ folder itself).

Acceptance (fixtures/README.md): max|diff| <= 1e-4 (2e-4 on K3-shaped
containers: attn_res_block_size > 0 or latent MoE), equal argmax and
greedy_next8 reproduced.  Exit 0 when every case passes, 1 otherwise,
77 when torch or the fixtures are missing.
"""

import argparse
import glob
import math
import json
import os
import sys

sys.dont_write_bytecode = True
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

SKIP = 77


def run_case(model, ids, ref, n_greedy):
    """Prompt from a fresh state, then greedy.  warp's greedy_next8 are the
    tokens that follow the prompt's own argmax t0 (t0 itself is the argmax
    column): t1..t8, so n_greedy + 1 tokens are generated and t0 dropped."""
    import numpy as np
    from oracle import greedy, run_prompt
    import compare
    logits, _ = run_prompt(model, ids)
    gap, qm, ties = model.min_router_gap, model.vq4p_margin, list(model.vq4p_ties)
    last = logits[-1].numpy()
    st = compare.stats(last.astype(np.float32).astype(np.float64), ref)
    g = greedy(model, last, n_greedy + 1)[1:]
    return last, st, g, gap, qm, ties


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("fixtures", nargs="?",
                    default=os.path.join(HERE, "..", "..", "..", "shared", "fixtures"))
    ap.add_argument("--only", default=None, help="comma-separated fixture names")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--strict", action="store_true",
                    help="no margin-aware retry of VQ4P rounding near-ties")
    a = ap.parse_args(argv)

    fx = os.path.abspath(a.fixtures)
    warp = fx if os.path.basename(fx.rstrip("/")) == "warp" else os.path.join(fx, "warp")
    cases_files = sorted(glob.glob(os.path.join(warp, "*.json")))
    if not cases_files:
        print("SKIP: no fixtures under %s" % warp)
        return SKIP
    try:
        import numpy as np
        import torch
    except Exception as e:  # pragma: no cover
        print("SKIP: torch/numpy not importable by %s (%s)" % (sys.executable, e))
        return SKIP
    torch.set_num_threads(max(1, a.threads))
    from model import Model

    only = set(a.only.split(",")) if a.only else None
    hdr = "%-22s %4s %3s %10s %10s %11s %6s %7s %9s %10s %10s %s" % (
        "container", "case", "n", "max|diff|", "mean|diff|", "corr", "argmax",
        "greedy8", "tol", "routergap", "vq4pmargin", "result")
    print(hdr)
    print("-" * len(hdr))
    n_fail = 0
    n_tie = 0
    n_cases = 0
    t0 = time.time()
    for jf in cases_files:
        name = os.path.basename(jf)[:-5]
        if only and name not in only:
            continue
        with open(jf) as f:
            spec = json.load(f)
        cpath = os.path.join(warp, spec["container"])
        try:
            model = Model(cpath)
        except Exception as e:
            print("%-22s  LOAD FAILED: %s: %s" % (name, type(e).__name__, e))
            n_fail += 1
            continue
        cfg = model.cfg
        k3 = cfg.attn_res > 0 or cfg.r_lat > 0
        tol = 2e-4 if k3 else 1e-4
        for ci, case in enumerate(spec["cases"]):
            n_cases += 1
            ids = case["ids"]
            ref = np.fromfile(os.path.join(warp, case["logits"]), dtype="<f4").astype(np.float64)
            model.vq4p_force = {}
            last, st, g8, gap, qm, ties = run_case(model, ids, ref, len(case["greedy_next8"]))
            g_ok = g8 == list(case["greedy_next8"])
            ok = st["max"] <= tol and st["argmax_ok"] and g_ok
            result = "pass" if ok else "FAIL"
            note = None
            if not ok and ties and not a.strict:
                # Margin-aware retry: warp's float32 activations may round a
                # VQ4P table entry lying within TIE_BAND of a .5 the other way.
                for tie in sorted(ties, key=lambda z: abs(z["y"] - math.floor(z["y"]) - 0.5)):
                    y, q = tie["y"], tie["q"]
                    alt = float(math.floor(y)) if q == math.ceil(y) else float(math.ceil(y))
                    model.vq4p_force = {tie["call"]: [(tuple(tie["entry"]), alt)]}
                    l2, st2, g82, _, _, _ = run_case(model, ids, ref, len(case["greedy_next8"]))
                    if st2["max"] <= tol and st2["argmax_ok"] and g82 == list(case["greedy_next8"]):
                        note = ("    VQ4P rounding tie resolved the other way: layer %d token %d "
                                "%s table (expert %d) entry v,s,c=%s: T*127/M = %.7f rounds to "
                                "%d here, warp's float32 path gives %d; without it max|diff| "
                                "%.3e" % (tie["layer"], tie["token"], tie["kind"], tie["expert"],
                                          tuple(tie["entry"]), y, int(q), int(alt), st["max"]))
                        st, g8, g_ok, ok, result = st2, g82, True, True, "pass-tie"
                        break
                model.vq4p_force = {}
            if not ok:
                n_fail += 1
            elif result == "pass-tie":
                n_tie += 1
            print("%-22s %4d %3d %10.3e %10.3e %11.9f %6s %7s %9.1e %10s %10s %s" % (
                name, ci, len(ids), st["max"], st["mean"], st["corr"],
                "ok" if st["argmax_ok"] else "DIFF", "ok" if g_ok else "DIFF",
                tol, "%.3e" % gap if gap != math.inf else "-",
                "%.3e" % qm if qm != math.inf else "-", result))
            if note:
                print(note)
            if a.verbose or not g_ok:
                if not g_ok:
                    print("    greedy: oracle %s warp %s" % (g8, case["greedy_next8"]))
            if a.verbose and case.get("logits_chunked"):
                refc = np.fromfile(os.path.join(warp, case["logits_chunked"]),
                                   dtype="<f4").astype(np.float64)
                print("    vs warp chunked: max|diff| %.3e (warp's own step/chunk %.3e)" % (
                    np.abs(last - refc).max(), case.get("chunked_vs_stepwise_maxdiff", 0)))
    dt = time.time() - t0
    print("-" * len(hdr))
    print("%d cases, %d failed, %d passed only after resolving a VQ4P rounding tie, %.1f s"
          % (n_cases, n_fail, n_tie, dt))
    print("routergap: smallest k-th/(k+1)-th router key gap over the prompt; vq4pmargin: "
          "smallest distance of a VQ4P table entry T*127/M to a rounding boundary")
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
