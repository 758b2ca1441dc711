#!/usr/bin/python3
"""CTest fixture_policy: the fixture policy of issue 3 (item 5) on containers
that differ from a committed fixture's in exactly one respect.

Usage: test_fixture_policy.py --sluice BIN [--work DIR] [--fixture-dir tests/fixtures]

From the recipe recorded in tests/fixtures/synth-kimi-linear-q4.json (its
provenance settings) it builds, with make_synthetic.py:

  match   the same recipe: must reproduce the sidecar's fingerprint exactly
  trunk8  only the trunk width differs (--trunk-bits 8)
  cb2     only the codebooks differ (another --codebook-seed)
  k3      another family (extra)
  vq4p    another expert quantization (extra)

and asserts, on the fixture path (--no-oracle, forced even where torch
exists): match passes; every other one is skipped with a reason that names
the first mismatching field (trunk formats, codebooks sha256, family, expert
quantization).  It also checks that the rebuild is deterministic (every
committed fixture's sidecar is reproduced), that a fixture describing another
container fails with the three-row diagnosis, and, where the oracle is
available, that all three containers pass against a fresh oracle with the
fixture left unused.  Exit 0 when every assertion holds, 1 otherwise, 77
without numpy.
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
FIXTURE = "synth-kimi-linear-q4"

failures = []


def expect(cond, what):
    print("  [%s] %s" % ("ok" if cond else "FAILED", what))
    if not cond:
        failures.append(what)
    return cond


def files_equal(a, b, name):
    with open(os.path.join(a, name), "rb") as f1, open(os.path.join(b, name), "rb") as f2:
        return f1.read() == f2.read()


def bank_files(path):
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(path, "experts-L*.bin")))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--work", default=None)
    ap.add_argument("--fixture-dir", default=os.path.join(ROOT, "tests", "fixtures"))
    a = ap.parse_args(argv)
    try:
        import numpy  # noqa: F401  (availability check)
    except ImportError as e:
        print("SKIP: numpy not importable by %s (%s): the synthetic containers need "
              "python3-numpy" % (sys.executable, e))
        return 77
    import fingerprint as fpm
    import fixture_check
    import harness
    import make_synthetic

    work = a.work or tempfile.mkdtemp(prefix="sluice-policy-")
    if a.work and os.path.isdir(work):
        shutil.rmtree(work)
    os.makedirs(work, exist_ok=True)
    fx = fixture_check.load_fixture(os.path.join(a.fixture_dir, FIXTURE + ".json"))
    recipe = make_synthetic.recipe_args(fx["provenance"]["settings"])
    variants = {
        "match": dict(recipe),
        "trunk8": dict(recipe, trunk_bits=8),
        "cb2": dict(recipe, codebook_seed=recipe["codebook_seed"] + 1),
        "k3": dict(recipe, family="k3"),
        "vq4p": dict(recipe, experts="vq4p"),
    }
    paths = {}
    print("building containers under %s from the recipe of %s: %s" % (work, FIXTURE, recipe))
    for k, args in variants.items():
        paths[k] = make_synthetic.build(os.path.join(work, k + ".waste"), **args)

    print("\n1. the rebuild is deterministic and the variants differ as intended")
    cfp = fpm.cli_fingerprint(a.sluice, paths["match"])
    expect(fpm.canonical(cfp) == fpm.canonical(fpm.of_sidecar(fx)),
           "match: sluice info --fingerprint equals the sidecar %s.json field for field"
           % FIXTURE)
    expect(not fpm.differing_keys(cfp, fpm.python_fingerprint(paths["match"])),
           "match: the CLI fingerprint equals the Python recomputation")
    again = make_synthetic.build(os.path.join(work, "match-again.waste"), **recipe)
    names = ["manifest.json", "trunk.bin", "codebooks.bin"] + bank_files(again)
    expect(all(files_equal(paths["match"], again, n) for n in names),
           "match built twice: all %d files byte-identical" % len(names))
    m, t8, cb = paths["match"], paths["trunk8"], paths["cb2"]
    expect(files_equal(m, t8, "codebooks.bin")
           and all(files_equal(m, t8, n) for n in bank_files(m))
           and not files_equal(m, t8, "trunk.bin"),
           "trunk8 differs from match in trunk.bin (and manifest) only")
    expect(files_equal(m, cb, "trunk.bin")
           and all(files_equal(m, cb, n) for n in bank_files(m))
           and not files_equal(m, cb, "codebooks.bin"),
           "cb2 differs from match in codebooks.bin (and the manifest's provenance) only")
    # every committed fixture can be rebuilt from its sidecar alone
    for jf in sorted(glob.glob(os.path.join(a.fixture_dir, "*.json"))):
        other = fixture_check.load_fixture(jf)
        p = make_synthetic.build(os.path.join(work, "rebuild-" + other["name"] + ".waste"),
                                 **make_synthetic.recipe_args(other["provenance"]["settings"]))
        expect(fpm.first_mismatch(fpm.of_sidecar(other), fpm.cli_fingerprint(a.sluice, p))
               is None and other["values"].size == other["vocab"],
               "%s: rebuilt from its sidecar, the fingerprint matches exactly" % other["name"])

    print("\n2. fixture path (--no-oracle): use the fixture only on an exact match")
    want = {
        "match": ("PASS", None, None),
        "trunk8": ("SKIP", "trunk_formats",
                   "fixture trunk Q4G/Q8G/F32, container Q8G/F32"),
        "cb2": ("SKIP", "sha256.codebooks.bin", "same formats, different codebooks"),
        "k3": ("SKIP", "family", "fixture is kimi-linear, container is kimi-k3"),
        "vq4p": ("SKIP", "expert_quant", "fixture experts VQ3R"),
    }
    table = []
    for k, (status, field, text) in want.items():
        print("-- %s" % k)
        res = fixture_check.check(a.sluice, paths[k], fx, use_oracle=False,
                                  out=lambda s: print("   " + s))
        table.append((k, "fixture", res))
        if status == "PASS":
            expect(res["status"] == "PASS" and len(res["rows"]) == 2,
                   "%s: PASS against the fixture (step and chunked)" % k)
        else:
            print("   SKIP: " + res["reason"])
            expect(res["status"] == "SKIP" and res.get("field") == field
                   and text in res["reason"],
                   "%s: SKIP naming %s (%r)" % (k, field, text))
    expect("sha256" in table[2][2]["reason"] and "codebook_seed" in table[2][2]["reason"],
           "cb2: the reason quotes both sha256s and the differing provenance setting")
    # the command-line entry point reports a skip with exit status 77
    r = subprocess.run([sys.executable, os.path.join(HERE, "fixture_check.py"), paths["trunk8"],
                        "--sluice", a.sluice, "--fixture", fx["path"], "--no-oracle"],
                       capture_output=True, text=True)
    print("   fixture_check.py trunk8 --no-oracle -> rc %d: %s" % (
        r.returncode, r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr))
    expect(r.returncode == 77 and "SKIP: fixture %s: fixture trunk Q4G/Q8G/F32, container "
           "Q8G/F32" % FIXTURE in r.stdout, "fixture_check.py exits 77 with the reason")
    # --fixtures DIR finds the matching fixture among all committed ones
    res = fixture_check.check(a.sluice, paths["match"], None,
                              fixture_check.list_fixtures(a.fixture_dir), use_oracle=False,
                              out=lambda s: None)
    expect(res["status"] == "PASS" and res["fixture"] == FIXTURE,
           "--fixtures %s picks %s for match and passes" % (a.fixture_dir, FIXTURE))

    print("\n3. a fixture that describes another container: FAIL with the three-row diagnosis")
    ok, why = harness.oracle_status()
    bad_dir = os.path.join(work, "stale-fixture")
    os.makedirs(bad_dir)
    # The bug of seeds/000: logits of the trunk8 conversion under the
    # fingerprint of the default one.
    stale = (harness.Oracle(paths["trunk8"]).logits(fx["ids"]) if ok else
             harness.engine_logits(a.sluice, paths["trunk8"], fx["ids"]))
    stale.astype("<f4").tofile(os.path.join(bad_dir, FIXTURE + ".f32"))
    shutil.copy(fx["path"], os.path.join(bad_dir, FIXTURE + ".json"))
    bad = fixture_check.load_fixture(os.path.join(bad_dir, FIXTURE + ".json"))
    res = fixture_check.check(a.sluice, paths["match"], bad, use_oracle=False,
                              out=lambda s: print("   " + s))
    table.append(("match, stale fixture", "fixture", res))
    d = res["diagnosis"] or {}
    expect(res["status"] == "FAIL" and "engine_vs_fixture" in d,
           "stale fixture: FAIL, diagnosis printed")
    if ok:
        expect(d["engine_vs_oracle"]["max"] <= harness.FLAG
               and abs(d["oracle_vs_fixture"]["max"] - d["engine_vs_fixture"]["max"]) <= 1e-3,
               "diagnosis: engine vs fresh oracle <= 1e-4, oracle vs fixture equals engine vs "
               "fixture (%.3e vs %.3e): the fixture is at fault"
               % (d["oracle_vs_fixture"]["max"], d["engine_vs_fixture"]["max"]))
    else:
        print("   (oracle rows n/a: %s)" % why)

    print("\n4. with the oracle: a fresh oracle from each container, the fixture unused")
    if ok:
        for k in ("match", "trunk8", "cb2"):
            res = fixture_check.check(a.sluice, paths[k], fx, use_oracle=True,
                                      out=lambda s: print("   " + s))
            table.append((k, "oracle", res))
            expect(res["status"] == "PASS" and res["mode"] == "oracle"
                   and all(st["max"] <= harness.FLAG for _, st, _ in res["rows"]),
                   "%s: PASS against a fresh oracle (max|diff| %s), fixture unused"
                   % (k, ", ".join("%.3e" % st["max"] for _, st, _ in res["rows"])))
    else:
        print("   SKIP (not an error): %s" % why)

    print("\nsummary (fixture %s, threshold %.0e)" % (FIXTURE, harness.TOL))
    print("  %-22s %-8s %-5s %s" % ("container", "path", "result", "max|diff| step/chunk, or reason"))
    for k, mode, res in table:
        detail = res["reason"] if res["status"] == "SKIP" else " / ".join(
            "%.3e" % st["max"] for _, st, _ in res["rows"])
        print("  %-22s %-8s %-5s %s" % (k, mode, res["status"], detail))
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print("FAILED: %d assertion(s): %s" % (len(failures), "; ".join(failures)))
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
