#!/usr/bin/python3
"""(Re)generate the committed oracle fixtures in tests/fixtures/.

Usage: make_fixtures.py --sluice BIN [--out tests/fixtures] [--only NAME,...]
                        [--verify]

For each fixture: build its synthetic container (make_synthetic.py, from the
recipe in harness.SYNTHETIC) in a temporary folder, take the container's
fingerprint as `sluice info --fingerprint` prints it (and check it against
fingerprint.python_fingerprint), run the oracle on the ids, and write

  NAME.f32   last-position logits, V little-endian float32
  NAME.json  the fingerprint fields exactly as the CLI prints them, plus
             "ids", "oracle_version", "vocab" and "logits" (the .f32 name);
             for a VQ4P container also "vq4p_ties", the oracle's table
             entries within "vq4p_tie_band" code units of a .5 (layer,
             token, kind, expert or -1, index, value, code): the fixture
             path compares only when the engine rounds all of them alike.

The provenance block of the fingerprint holds the generator settings, so the
container can be rebuilt from the sidecar alone (make_synthetic.recipe_args).
--verify writes nothing: it rebuilds every committed fixture's container and
checks that the fingerprint and the oracle's logits are reproduced exactly.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

FIXTURES = ["synth-kimi-linear-q4", "synth-deepseek-q4", "synth-k3-q4", "synth-k3-q8-vq4p"]
DEFAULT_OUT = os.path.join(HERE, "..", "..", "tests", "fixtures")


def generate(sluice, name, workdir):
    """(sidecar dict without the logits file name, logits float32 array)."""
    import numpy as np
    import fingerprint as fpm
    import harness
    import make_synthetic
    args = dict(harness.SYNTHETIC)[name]
    path = make_synthetic.build(os.path.join(workdir, name + ".waste"), **args)
    fp = fpm.cli_fingerprint(sluice, path)
    py = fpm.python_fingerprint(path)
    if fpm.differing_keys(fp, py):
        raise SystemExit("%s: sluice info --fingerprint and the Python fingerprint differ in %s"
                         % (name, fpm.differing_keys(fp, py)))
    ids = harness.SYNTH_CASES[0]
    orc = harness.Oracle(path)
    vals = orc.logits(ids).astype(np.float32)
    ok, version = harness.oracle_status()
    side = dict(fp)
    side.update({"ids": ids, "oracle_version": version, "vocab": int(vals.size)})
    if orc.is_vq4p:
        import model
        side["vq4p_tie_band"] = model.TIE_BAND
        side["vq4p_ties"] = harness.sidecar_ties(orc.last_ties)
    return side, vals


def dumps(side):
    """Indented JSON with the ids, and each VQ4P near-tie, on one line."""
    ties = side.get("vq4p_ties")
    d = dict(side, ids="@IDS@")
    if ties is not None:
        d["vq4p_ties"] = ["@TIE%d@" % i for i in range(len(ties))]
    text = json.dumps(d, indent=1, sort_keys=True)
    for i, t in enumerate(ties or []):
        text = text.replace('"@TIE%d@"' % i, json.dumps(t))
    return text.replace('"@IDS@"', json.dumps(side["ids"])) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--only", default=None)
    ap.add_argument("--verify", action="store_true")
    a = ap.parse_args(argv)
    import harness
    ok, why = harness.oracle_status()
    if not ok:
        print("SKIP: " + why)
        return 77
    names = a.only.split(",") if a.only else FIXTURES
    work = tempfile.mkdtemp(prefix="sluice-fixtures-")
    bad = 0
    try:
        for name in names:
            side, vals = generate(a.sluice, name, work)
            side["logits"] = name + ".f32"
            jpath = os.path.join(a.out, name + ".json")
            if a.verify:
                import numpy as np
                with open(jpath) as f:
                    old = json.load(f)
                same_json = old == side
                same_vals = np.array_equal(
                    np.fromfile(os.path.join(a.out, name + ".f32"), dtype="<f4"), vals)
                print("%-24s sidecar %s, logits %s" % (
                    name, "reproduced" if same_json else "DIFFERS",
                    "bit-identical" if same_vals else "DIFFER"))
                bad += (not same_json) + (not same_vals)
                continue
            os.makedirs(a.out, exist_ok=True)
            vals.astype("<f4").tofile(os.path.join(a.out, name + ".f32"))
            with open(jpath, "w") as f:
                f.write(dumps(side))
            print("wrote %s (%d logits, argmax %d)" % (jpath, vals.size, int(vals.argmax())))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
