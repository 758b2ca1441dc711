#!/usr/bin/env python3
"""First token and decode at several budgets, from process start (issue 33).

More memory must never mean a slower first token. For each round, each
budget in turn (alternated, so drift in the disk or the host hits them
alike): the page cache is dropped, then

    sluice generate MODEL --ids <PROMPT ids> -n GEN --threads T --budget B --stats

runs while this script times the first byte of generated text on stdout
from the process's start (what a user waits for: open, trunk, prompt and
one token), reads the prompt and decode rates from the statistics line,
and takes the peak RSS from wait4, and what the run spent making cache
memory resident ahead of use and how many reads found no resident buffer
(the "memory made resident" statistics line). The disk is probed in the
same run (bench_disk_probe). Prints one row per run and, per budget, the
median first token and its ratio to the first budget's. --baseline BIN
runs a second build beside each run (alternated), with the same medians.

usage: first_token_budgets.py MODEL [--build build] [--sluice BIN] [--baseline BIN] [--budgets 3G,8G,16G]
       [--rounds 2] [--prompt 16] [--gen 16] [--threads 2]
Needs root to drop the page cache; without it the rows say "kept".
"""
import argparse, os, re, statistics, subprocess, sys, time

from benchlib import drop, header, sh

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("--build", default="build")
ap.add_argument("--sluice", help="the binary (default BUILD/sluice)")
ap.add_argument("--baseline", help="a second build's binary, run beside each run of the first (alternated)")
ap.add_argument("--budgets", default="3G,8G,16G")
ap.add_argument("--rounds", type=int, default=2)
ap.add_argument("--prompt", type=int, default=16)
ap.add_argument("--gen", type=int, default=16)
ap.add_argument("--threads", type=int, default=2)
a = ap.parse_args()
sluice = a.sluice or os.path.join(a.build, "sluice")
if not os.path.isfile(os.path.join(a.model, "manifest.json")):
    sys.exit(f"first_token_budgets: no container at {a.model}; write one with: {sluice} synth --out {a.model} --jobs 2")


header()
probe = os.path.join(a.build, "bench", "bench_disk_probe")
if os.access(probe, os.X_OK):
    drop()
    out = sh(f"{probe} {a.model}")
    best = re.findall(r"\"probe_best_gbps\":([0-9.]+)", out)
    print(f"# disk probe (random record reads, O_DIRECT): best {max(map(float, best)) if best else '?'} GB/s")
ids = ",".join(str(1000 + 37 * i) for i in range(a.prompt))
budgets = a.budgets.split(",")
builds = [("new", sluice)] + ([("baseline", a.baseline)] if a.baseline else [])
rows = {(n, b): [] for n, _ in builds for b in budgets}
print("| round | build | budget | page cache | first token (s from start) | prompt phase (s) | decode tok/s | "
      "made resident ahead (MiB / s) | reads into cold buffers | peak RSS (GiB) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in range(a.rounds):
    for b in budgets:
        # Alternate which build goes first, so drift hits both alike.
        order = builds if r % 2 == 0 else builds[::-1]
        for name, binary in order:
            page = drop()
            cmd = [binary, "generate", a.model, "--ids", ids, "-n", str(a.gen), "--threads", str(a.threads),
                   "--budget", b, "--stats"]
            t0 = time.monotonic()
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            first = p.stdout.read(1)
            t_first = time.monotonic() - t0
            p.stdout.read()
            err = p.stderr.read().decode(errors="replace")
            _, status, ru = os.wait4(p.pid, 0)
            if os.waitstatus_to_exitcode(status) != 0 or not first:
                sys.exit(f"first_token_budgets: {' '.join(cmd)} failed: {err[-600:]}")
            m = re.search(r"prompt \d+ tokens in ([0-9.]+) s .*generated \d+ tokens in [0-9.]+ s \(([0-9.]+) tok/s\)", err)
            prompt_s, tok_s = (float(m.group(1)), float(m.group(2))) if m else (float("nan"), float("nan"))
            w = re.search(r"memory made resident: ([0-9.]+) MiB of record buffers ahead of use in ([0-9.]+) s.*; "
                          r"(\d+) reads into buffers not yet resident", err)
            warm = f"{float(w.group(1)):.0f} / {float(w.group(2)):.2f}" if w else "not reported"
            cold = w.group(3) if w else "not reported"
            peak = ru.ru_maxrss / 2**20
            rows[(name, b)].append((t_first, tok_s, peak))
            print(f"| {r + 1} | {name} | {b} | {page} | {t_first:.2f} | {prompt_s:.2f} | {tok_s:.2f} | {warm} | {cold} | "
                  f"{peak:.2f} |", flush=True)
print()
for name, _ in builds:
    base = statistics.median(x[0] for x in rows[(name, budgets[0])])
    base_tok = statistics.median(x[1] for x in rows[(name, budgets[0])])
    for b in budgets:
        ft = statistics.median(x[0] for x in rows[(name, b)])
        tk = statistics.median(x[1] for x in rows[(name, b)])
        print(f"{name} {b}: first token median {ft:.2f} s ({ft / base:.2f}x {budgets[0]}), decode median {tk:.2f} tok/s "
              f"({tk / base_tok:.2f}x {budgets[0]}), peak RSS max {max(x[2] for x in rows[(name, b)]):.2f} GiB")
