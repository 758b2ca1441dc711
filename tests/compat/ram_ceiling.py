#!/usr/bin/env python3
"""The RAM ceiling as a property (issue 16).

On a generated model (`sluice synth`), draws random budgets above the
floor, prefill chunk sizes, thread counts and I/O modes; each draw runs
`sluice logits` in its own process and checks
  * peak RSS (wait4's ru_maxrss) <= the budget, and
  * the logits are bit-identical to every other draw's.

usage: ram_ceiling.py SLUICE WORKDIR [DRAWS]
"""
import hashlib, json, os, random, shutil, subprocess, sys, time

sluice, work = sys.argv[1], sys.argv[2]
DRAWS = int(sys.argv[3]) if len(sys.argv) > 3 else 16
rng = random.Random(int(os.environ.get("RAM_SEED", "1616")))
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
model = os.path.join(work, "synth.waste")
r = subprocess.run([sluice, "synth", "--out", model, "--seed", "5", "--layers", "6", "--hidden", "512",
                    "--vocab", "4096", "--experts", "48", "--top-k", "4", "--moe-inter", "384"],
                   capture_output=True, text=True)
if r.returncode != 0:
    print("synth failed:", r.stderr)
    sys.exit(1)
size = sum(os.path.getsize(os.path.join(model, f)) for f in os.listdir(model))
r = subprocess.run([sluice, "plan", model, "--ctx", "256"], capture_output=True, text=True)
print(r.stdout)


def plan_number(label):
    for line in r.stdout.splitlines():
        if line.strip().startswith(label):
            for w in line[len(label) + 2:].split():
                try:
                    return float(w) * (1 << 30)  # the plan prints GiB
                except ValueError:
                    pass
    raise SystemExit(f"no '{label}' in sluice plan output")


floor, ws = plan_number("floor") + (2 << 20), plan_number("token working set")  # printed to 1 MiB
ids = ",".join(str((i * 37) % 4000 + 3) for i in range(48))
ref = None
worst = 0.0
failures = []
for k in range(DRAWS):
    budget = int(floor + rng.uniform(0.02, 3.0) * ws + rng.uniform(0, 64 << 20))
    chunk = rng.choice([1, 2, 5, 16, 64])
    threads = rng.choice([1, 2, 3, 4])
    io = rng.choice(["-1", "1", "2", "4"])
    extra = rng.sample(["--no-direct", "--no-readahead", "--no-lookahead", "--no-cache"], rng.randint(0, 2))
    out = os.path.join(work, f"l{k}.f32")
    cmd = [sluice, "logits", model, "--ids", ids, "--chunked", "--ctx", "256", "--budget", str(budget),
           "--chunk", str(chunk), "--threads", str(threads), "--io-threads", io, "--no-hotlist", "--out", out] + extra
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    err = p.stderr.read().decode()
    rss = ru.ru_maxrss * 1024
    worst = max(worst, rss / budget)
    h = hashlib.sha256(open(out, "rb").read()).hexdigest() if os.path.exists(out) else None
    desc = f"budget {budget / 2**20:.1f} MiB chunk {chunk} threads {threads} io {io} {' '.join(extra)}"
    print(f"draw {k:2d}: {desc}: peak RSS {rss / 2**20:.1f} MiB ({rss / budget:.3f} of budget), "
          f"{time.monotonic() - t0:.1f} s")
    if os.waitstatus_to_exitcode(status) != 0:
        failures.append(f"draw {k} ({desc}) failed: {err[-300:]}")
        continue
    if rss > budget:
        failures.append(f"draw {k} ({desc}): peak RSS {rss} > budget {budget}")
    if ref is None:
        ref = h
    elif h != ref:
        failures.append(f"draw {k} ({desc}): logits differ from draw 0")
print(f"model {size / 2**20:.1f} MiB on disk, floor {floor / 2**20:.1f} MiB, working set {ws / 2**20:.1f} MiB; "
      f"{DRAWS} draws, worst peak RSS {worst:.3f} of budget, {len(failures)} failures")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
