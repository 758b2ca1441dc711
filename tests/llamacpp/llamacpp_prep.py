"""What the llama.cpp tests share: building the driver and llama-perplexity
(prepare.sh) into one folder, with its SKIP passed on."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


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
