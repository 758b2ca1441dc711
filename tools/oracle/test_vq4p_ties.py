#!/usr/bin/python3
"""CTest `vq4p_ties` (label oracle): `sluice logits --vq4p-ties FILE`, the
engine's record of its VQ4P rounding decisions near a boundary
(sluice_vq4p_ties_record / sluice_vq4p_ties_get), which check_engine.py's
margin-aware comparison reads.  numpy only; torch is not needed.

On a K3-shaped VQ4P container built by make_synthetic.py, token at a time
and chunked:
  * the logits are bit-identical with and without the record;
  * step and chunked record the same entries and decisions;
  * every entry lies within the band (1e-3 code units) of a .5, its code is
    the value rounded (half to even) and the file is ordered closest first;
  * a container without VQ4P experts records nothing.

Usage: test_vq4p_ties.py --sluice BIN [--work DIR]
Exit 0 pass, 1 fail, 77 SKIP (no numpy, no CLI).
"""

import argparse
import os
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
SKIP = 77
BAND = 1e-3
IDS = [3, 7, 11, 5, 9, 13, 2, 17, 4, 8, 19, 23, 6, 29, 12, 31]


def run(sluice, path, chunked, ties, work):
    import subprocess
    import numpy as np
    out = os.path.join(work, "lg.f32")
    cmd = [sluice, "logits", path, "--ids", ",".join(map(str, IDS)), "--out", out, "-t", "1"]
    if chunked:
        cmd.append("--chunked")
    tf = os.path.join(work, "ties.txt")
    if ties:
        cmd += ["--vq4p-ties", tf]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s: rc %d: %s" % (" ".join(cmd), r.returncode, r.stderr.strip()))
    lg = np.fromfile(out, dtype="<f4")
    lines = None
    if ties:
        with open(tf) as f:
            lines = f.read().splitlines()
    return lg, lines


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--work", default=None)
    a = ap.parse_args(argv)
    try:
        import numpy as np
    except ImportError as e:
        print("SKIP: numpy not importable by %s (%s)" % (sys.executable, e))
        return SKIP
    if not os.access(a.sluice, os.X_OK):
        print("SKIP: the sluice CLI %s is not built" % a.sluice)
        return SKIP
    import make_synthetic
    work = a.work or tempfile.mkdtemp(prefix="sluice-vq4p-ties-")
    os.makedirs(work, exist_ok=True)
    bad = []

    def check(cond, what):
        print("%s  %s" % ("ok  " if cond else "FAIL", what))
        if not cond:
            bad.append(what)

    try:
        p = make_synthetic.build(os.path.join(work, "k3-vq4p.waste"), family="k3", trunk_bits=8,
                                 experts="vq4p", seed=3)
        recs = {}
        for chunked in (False, True):
            name = "chunk" if chunked else "step"
            plain, _ = run(a.sluice, p, chunked, False, work)
            lg, lines = run(a.sluice, p, chunked, True, work)
            check(plain.tobytes() == lg.tobytes(),
                  "%s: logits bit-identical with and without --vq4p-ties" % name)
            check(len(lines) >= 2 and lines[0].startswith("# sluice vq4p-ties 1")
                  and "truncated" not in lines[0], "%s: header %r" % (name, lines[0][:60]))
            body = [ln.split() for ln in lines if not ln.startswith("#")]
            check(len(body) > 0, "%s: %d entries recorded" % (name, len(body)))
            margins, ok_q, ok_band, ok_kind = [], True, True, True
            for L, pos, kind, e, idx, val, q in body:
                v = float(np.float32(float(val)))
                m = abs(v - np.floor(v) - 0.5)
                margins.append(m)
                ok_band &= m < BAND
                ok_q &= int(q) == int(np.rint(np.float32(v)))        # half to even
                ok_kind &= kind in ("gate", "up", "down") and (kind == "down") == (int(e) >= 0)
                ok_kind &= 0 <= int(pos) < len(IDS) and int(idx) >= 0
            check(ok_band, "%s: every entry within %.0e code units of a .5" % (name, BAND))
            check(ok_q, "%s: every code is its value rounded half to even" % name)
            check(ok_kind, "%s: kinds, experts (-1 for gate/up), positions, indices" % name)
            check(margins == sorted(margins), "%s: closest to a boundary first" % name)
            recs[name] = sorted(tuple(r) for r in body)
        check(recs["step"] == recs["chunk"], "step and chunked record the same decisions")
        p3 = make_synthetic.build(os.path.join(work, "k3-vq3r.waste"), family="k3", trunk_bits=4,
                                  experts="vq3r", seed=3)
        _, lines = run(a.sluice, p3, False, True, work)
        check([ln for ln in lines if not ln.startswith("#")] == [],
              "VQ3R container: nothing recorded")
    except RuntimeError as e:
        check(False, str(e))
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    print("FAIL" if bad else "OK")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
