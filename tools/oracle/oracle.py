#!/usr/bin/python3
"""sluice oracle: an independent pure-PyTorch forward pass over a WASTE v0
container, written from ../shared/spec/FORMAT.md and MODEL.md alone.

Usage:
  oracle.py CONTAINER --ids 1,2,3 [--dump FILE] [--dump-all FILE]
            [--trace DIR] [--tokens N]
  oracle.py --version

--dump FILE      last-position logits, V little-endian float32
--dump-all FILE  logits of every position, n x V little-endian float32
--trace DIR      per-layer hidden states (see traceio.py for the format)
--tokens N       greedy continuation: print the N next ids, one per line
                 (t0 = argmax of the prompt's last logits, then t1, ...; note
                 that the fixtures' greedy_next8 lists t1..t8)
--verify         check every expert record's CRC-32
--margins        print the smallest router key gap and VQ4P rounding margin
"""

import argparse
import os
import sys

sys.dont_write_bytecode = True

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import traceio  # noqa: E402
import model as model_module  # noqa: E402
from model import TIE_BAND, Model  # noqa: E402

ORACLE_VERSION = "sluice-oracle 1"


def run_prompt(model, ids, want_trace=False):
    """Fresh state, feed ids; returns (logits [n, V] f64 tensor, trace list)."""
    model.reset()
    trace = [] if want_trace else None
    logits = model.forward(list(ids), trace=trace)
    return logits, trace


def argmax(row):
    """Lowest index among equal maxima."""
    return int(np.argmax(np.asarray(row)))


def greedy(model, last_logits, n):
    """Continue from the model's current state: feed the argmax back one
    token at a time; returns the n generated ids."""
    out = []
    row = last_logits
    for i in range(n):
        t = argmax(row)
        out.append(t)
        if i + 1 < n:
            row = model.forward([t])[-1].numpy()
    return out


def parse_ids(s):
    s = s.strip()
    if not s:
        return []
    return [int(v) for v in s.replace(" ", ",").split(",") if v != ""]


def main(argv=None):
    ap = argparse.ArgumentParser(description="sluice independent PyTorch oracle")
    ap.add_argument("container", nargs="?")
    ap.add_argument("--ids", default=None, help="comma-separated token ids")
    ap.add_argument("--dump", default=None)
    ap.add_argument("--dump-all", dest="dump_all", default=None)
    ap.add_argument("--trace", default=None)
    ap.add_argument("--tokens", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--verify", action="store_true", help="check expert record CRCs")
    ap.add_argument("--margins", action="store_true",
                    help="print the router and VQ4P rounding margins of the prompt to stderr")
    ap.add_argument("--kda-l2-eps", dest="kda_l2_eps", type=float, default=None,
                    help="KDA q/k L2-norm epsilon (default 1e-12, warp's; llama.cpp uses rms_norm_eps)")
    ap.add_argument("--version", action="store_true")
    a = ap.parse_args(argv)
    if a.version:
        print(ORACLE_VERSION)
        return 0
    if not a.container or a.ids is None:
        ap.error("CONTAINER and --ids are required")
    torch.set_num_threads(max(1, a.threads))
    ids = parse_ids(a.ids)
    if not ids:
        ap.error("--ids is empty")
    if a.kda_l2_eps is not None:
        model_module.KDA_L2_EPS = a.kda_l2_eps
    model = Model(a.container, verify=a.verify)
    logits, trace = run_prompt(model, ids, want_trace=bool(a.trace))
    if a.margins:
        print("router min gap %.6e; vq4p min margin %.6e; vq4p entries within %.0e of a "
              "rounding boundary: %d" % (model.min_router_gap, model.vq4p_margin,
                                         TIE_BAND, len(model.vq4p_ties)), file=sys.stderr)
    lg = logits.numpy()
    if a.dump:
        traceio.write_f32(a.dump, lg[-1])
    if a.dump_all:
        traceio.write_f32(a.dump_all, lg)
    if a.trace:
        traceio.write_trace(a.trace, ORACLE_VERSION, model.cfg.d, model.cfg.n_layers,
                            [(L, st, v.numpy()) for L, st, v in trace], lg)
    if a.tokens > 0:
        for t in greedy(model, lg[-1], a.tokens):
            print(t)
    elif not (a.dump or a.dump_all or a.trace):
        print("argmax %d" % argmax(lg[-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
