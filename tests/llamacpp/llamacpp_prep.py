"""What the llama.cpp and GGUF tests share: building the driver and
llama-perplexity (prepare.sh) into one folder, with its SKIP passed on; numpy
or a SKIP; a case's container (a directory in the repository, or one
tools/oracle/make_synthetic.py builds)."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def prepare(ddir):
    """Runs prepare.sh DDIR; exits 77 (SKIP, with the reason) or 1 when it cannot."""
    p = subprocess.run(["bash", os.path.join(HERE, "prepare.sh"), ddir], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode == 77:
        print(p.stdout.strip())
        sys.exit(77)
    if p.returncode != 0:
        print("prepare.sh failed:\n" + p.stdout)
        sys.exit(1)
    return ddir


def driver_args(*extra):
    """The arguments every driver-based check takes (--sluice, --work,
    --driver-dir, and each name in extra as a required option); makes --work
    and builds the driver there (or in --driver-dir). Returns (args, driver dir)."""
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--driver-dir", help="where prepare.sh builds the llama.cpp driver (default: --work)")
    for name in extra:
        ap.add_argument(name, required=True)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    return a, prepare(a.driver_dir or a.work)


def finish(fails):
    """Exits 1 listing the failures, or prints PASS."""
    if fails:
        print("FAIL:\n  " + "\n  ".join(fails))
        sys.exit(1)
    print("PASS")


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def numpy():
    try:
        import numpy as np
    except ImportError:
        skip("numpy is not importable by %s (Debian's python3-numpy)" % sys.executable)
    return np


def case_container(case, work, name):
    """case["dir"], or a synthetic container built from the case's
    make_synthetic arguments (keys other than those are the test's own)."""
    if "dir" in case:
        return case["dir"]
    sys.path.insert(0, os.path.join(ROOT, "tools", "oracle"))
    import make_synthetic
    args = {k: v for k, v in case.items() if k in ("family", "experts", "seed", "trunk_bits", "vocab")}
    path = os.path.join(work, name + ".waste")
    make_synthetic.build(path, **args)
    return path
