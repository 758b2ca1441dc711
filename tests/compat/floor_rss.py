#!/usr/bin/env python3
"""The memory floor is what a run really keeps resident (issue 27).

The floor's fixed terms were worst cases (64 MiB of runtime, 64 MiB of
allocator slack, 13 threads x 2 MiB of stack on 2 cores): a 6 MB model's
floor was 184 MiB for a process that peaked at 21 MiB. They are now
measured or bounded by what this process can really hold. This runs each
model at a budget of exactly its floor, with the default threads, with
8 pread readers, and with a prefill chunk of 1 and 64, and checks
  * peak RSS (wait4's ru_maxrss) <= the budget, every run, and
  * the floor is no more than 4x the largest peak among the model's runs
    (it counts a working cache and bounds, not guesses; each ratio is
    printed). Against the largest peak, not each one: a run with a prefill
    chunk of 1 touches less of the code and scratch that the floor bounds
    (12.5 MiB against a 51 MiB floor on kimi-linear-tok), while a term that
    became a guess again would inflate the floor against every run.

usage: floor_rss.py SLUICE REPO_ROOT FIXTURES_DIR
Models: models/sluice-mini always; warp's kimi-linear-tok and k3-tiny
fixtures when ../shared is there (their absence is said, not failed).
"""
import json, os, subprocess, sys

sluice, root, fixtures = sys.argv[1], sys.argv[2], sys.argv[3]
models = [os.path.join(root, "models", "sluice-mini")]
for f in ["kimi-linear-tok.waste", "k3-tiny.waste"]:
    p = os.path.join(fixtures, "warp", f)
    if os.path.isdir(p):
        models.append(p)
    else:
        print(f"floor_rss: {p} absent (no ../shared): that model is not run")

failures = []
for model in models:
    ctx = "256"
    plan = subprocess.run([sluice, "plan", model, "--ctx", ctx, "--json"], capture_output=True, text=True)
    if plan.returncode != 0:
        failures.append(f"{model}: sluice plan failed: {plan.stderr.strip()}")
        continue
    p = json.loads(plan.stdout)
    info = json.loads(subprocess.run([sluice, "info", model, "--json"], capture_output=True, text=True).stdout or "{}")
    vocab = int(info.get("vocab", info.get("config", {}).get("vocab", 256)) or 256)
    ids = ",".join(str((i * 37) % max(vocab - 3, 1) + 1) for i in range(40))
    runs = []  # (name, floor, peak) of this model's runs
    for extra in [[], ["--io-threads", "8"], ["--chunk", "1"], ["--chunk", "64"]]:
        # The floor depends on the chunk and the readers: plan as the run will.
        fl = subprocess.run([sluice, "plan", model, "--ctx", ctx, "--json"] + extra, capture_output=True, text=True)
        budget = json.loads(fl.stdout)["floor"] if fl.returncode == 0 else p["floor"]
        # The plan and the run are two processes, each measuring its own
        # footprint (rounded up to 8 MiB); 1 MiB covers a boundary between them.
        budget += 1 << 20
        cmd = [sluice, "generate", model, "--ids", ids, "-n", "24", "--ctx", ctx, "--budget", str(budget),
               "--print-ids"] + extra
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, ru = os.wait4(proc.pid, 0)
        err = proc.stderr.read().decode()
        peak = ru.ru_maxrss * 1024
        name = f"{os.path.basename(model)} {' '.join(extra) or '(defaults)'}"
        if os.waitstatus_to_exitcode(status) != 0:
            failures.append(f"{name}: exit {os.waitstatus_to_exitcode(status)}: {err.strip()[-400:]}")
            continue
        print(f"floor_rss: {name:40s} floor {budget / 2**20:7.1f} MiB, peak RSS {peak / 2**20:6.1f} MiB "
              f"({peak / budget:.2f} of the floor)")
        if peak > budget:
            failures.append(f"{name}: peak RSS {peak} > budget (floor) {budget}")
        runs.append((name, budget, peak))
    if runs:
        name, budget, _ = max(runs, key=lambda r: r[1])
        top = max(r[2] for r in runs)
        print(f"floor_rss: {os.path.basename(model)}: largest floor {budget / 2**20:.1f} MiB is "
              f"{budget / top:.2f}x the largest peak RSS {top / 2**20:.1f} MiB (limit 4x)")
        if budget > 4 * top:
            failures.append(f"{name}: floor {budget} is over 4x the largest peak RSS {top}: a term is a guess again")
if failures:
    print("floor_rss: FAILED\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"floor_rss: {len(models)} model(s): peak RSS within the floor in every run")
