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
