#!/usr/bin/env python3
"""The server's first request against a later one, at several budgets (issue 33).

More memory must never make the first request slower. For each round and
each budget in turn (alternated), the page cache is dropped, `sluice serve
MODEL --budget B` starts, and as soon as it listens this script sends
REQUESTS requests to /v1/completions, each a different token-id prompt of
PROMPT tokens (cache_prompt false, so no request reuses another's prefix),
max_tokens 1, and times each from send to the whole reply. Prints every
request's time, the server's peak RSS (VmHWM, read before it stops), and
per budget the median first request against the median later request at
the first budget (the small one).

usage: server_first_request.py MODEL [--sluice build/sluice] [--budgets 3G,8G,16G] [--rounds 2]
       [--prompt 16] [--requests 3] [--threads 2]
Needs root to drop the page cache; without it the rows say "kept".
"""
import argparse, http.client, json, os, re, statistics, subprocess, sys, time

from benchlib import drop, free_port, header

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("--sluice", default="build/sluice")
ap.add_argument("--budgets", default="3G,8G,16G")
ap.add_argument("--rounds", type=int, default=2)
ap.add_argument("--prompt", type=int, default=16)
ap.add_argument("--requests", type=int, default=3)
ap.add_argument("--threads", type=int, default=2)
a = ap.parse_args()
if not os.path.isfile(os.path.join(a.model, "manifest.json")):
    sys.exit(f"server_first_request: no container at {a.model}")
if not os.access(a.sluice, os.X_OK):
    sys.exit(f"server_first_request: {a.sluice} is not an executable (build it: TARGETS=sluice_cli scripts/build.sh)")


def post(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {data[:300]!r}")
    return json.loads(data)


header()
# Prompt ids in [100, 30100) as on the 48B shape, within a smaller vocabulary.
vocab = json.load(open(os.path.join(a.model, "manifest.json"))).get("config", {}).get("vocab_size", 30100)
span = max(1, min(30000, vocab - 100))
budgets = a.budgets.split(",")
firsts = {b: [] for b in budgets}
laters = {b: [] for b in budgets}
print(f"| round | budget | page cache | start to listening (s) | requests (s each, {a.prompt}-token prompts, 1 token) "
      "| peak RSS (GiB) |")
print("|---|---|---|---|---|---|")
for r in range(a.rounds):
    for b in budgets:
        page = drop()
        port = free_port()
        t0 = time.monotonic()
        p = subprocess.Popen([a.sluice, "serve", a.model, "--port", str(port), "--budget", b, "--threads",
                              str(a.threads), "--ctx", "4096"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = p.stdout.readline().decode()
        if "listening" not in line:
            p.kill()
            sys.exit(f"server_first_request: serve did not start: {p.stderr.read().decode()[-600:]}")
        t_listen = time.monotonic() - t0
        times = []
        try:
            for i in range(a.requests):
                # A different prompt per request (ids differ from the first on).
                ids = [(1000 + 37 * k + 7919 * (i + r * a.requests)) % span + 100 for k in range(a.prompt)]
                t1 = time.monotonic()
                post(port, {"prompt": ids, "max_tokens": 1, "temperature": 0, "cache_prompt": False})
                times.append(time.monotonic() - t1)
            with open(f"/proc/{p.pid}/status") as f:
                hwm = int(re.search(r"VmHWM:\s+(\d+)", f.read()).group(1)) / 2**20
        finally:
            # A failed request must not leave the server running.
            p.terminate()
            p.wait()
        firsts[b].append(times[0])
        laters[b].extend(times[1:])
        print(f"| {r + 1} | {b} | {page} | {t_listen:.2f} | {' / '.join(f'{t:.2f}' for t in times)} | {hwm:.2f} |",
              flush=True)
print()
small_later = statistics.median(laters[budgets[0]]) if laters[budgets[0]] else float("nan")
for b in budgets:
    f = statistics.median(firsts[b])
    later = statistics.median(laters[b]) if laters[b] else float("nan")
    print(f"{b}: first request median {f:.2f} s ({f / small_later:.2f}x a later request at {budgets[0]}); "
          f"later requests median {later:.2f} s")
