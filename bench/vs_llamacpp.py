#!/usr/bin/env python3
"""sluice against llama.cpp's mmap path on a model bigger than the memory
both are given (issue 29).

    /usr/bin/python3 bench/vs_llamacpp.py CONTAINER GGUF [--cap 4G] [--budget 3G]
        [--prompts 16,512] [--gen 16] [--gen-long 2] [--rounds 2] [--threads 2]

GGUF is CONTAINER written by `sluice export-gguf` (for a model this size:
--expert-type q4_0 --trunk-type q8_0). Both engines run inside one memory
cgroup capped at --cap (page cache included: llama.cpp's mmap'ed weights
count against it, so the model cannot sit in RAM), sluice with --budget.
For each round and prompt length the two run alternated (the order flips
each round), the page cache dropped before every run; the disk is probed
in the same run. Measured from process start: the first token (the first
byte of a generated token id on stdout: open, weights, prompt, one token),
decode tok/s (each engine's own count over its decode steps), bytes read
from storage (wait4's ru_inblock x 512), peak RSS (wait4) and the cgroup's
peak (RSS + page cache). llama.cpp: the npm prebuilt libllama (v0.5.0),
driven by tests/llamacpp/llamacpp_logits.cpp --gen, with its defaults
(mmap, flash attention auto, f16 KV, batches of 512). Needs root (page
cache, cgroup).
"""
import argparse, os, re, statistics, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import drop, header, sh

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def size(s):
    m = re.fullmatch(r"([0-9.]+)([KMG]?)", s)
    if not m:
        sys.exit("vs_llamacpp: bad size " + s)
    return int(float(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)])


def own_cgroup():
    """(kind, directory under which a child cgroup with a memory limit can be made)."""
    for line in open("/proc/self/cgroup"):
        parts = line.strip().split(":", 2)
        if parts[1] == "memory" and os.path.isdir("/sys/fs/cgroup/memory"):
            return "v1", "/sys/fs/cgroup/memory" + parts[2]
        if parts[0] == "0" and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            return "v2", "/sys/fs/cgroup" + parts[2]
    sys.exit("vs_llamacpp: no memory cgroup to cap the engines with")


class Cap:
    """A fresh memory cgroup per run (its peak starts at zero)."""

    def __init__(self, limit):
        self.kind, parent = own_cgroup()
        self.path = os.path.join(parent, "sluice-bench-%d-%d" % (os.getpid(), time.monotonic_ns()))
        os.mkdir(self.path)
        name = "memory.limit_in_bytes" if self.kind == "v1" else "memory.max"
        with open(os.path.join(self.path, name), "w") as f:
            f.write(str(limit))
        if self.kind == "v1":  # no swap beyond the cap either
            try:
                with open(os.path.join(self.path, "memory.memsw.limit_in_bytes"), "w") as f:
                    f.write(str(limit))
            except OSError:
                pass

    def enter(self):
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def peak(self):
        name = "memory.max_usage_in_bytes" if self.kind == "v1" else "memory.peak"
        try:
            return int(open(os.path.join(self.path, name)).read())
        except OSError:
            return -1

    def close(self):
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)


def run(cmd, cap):
    c = Cap(cap)
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=c.enter)
    first = p.stdout.read(1)
    ttft = time.monotonic() - t0
    p.stdout.read()
    err = p.stderr.read().decode(errors="replace")
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    peak = c.peak()
    c.close()
    if os.waitstatus_to_exitcode(status) != 0 or not first:
        sys.exit("vs_llamacpp: %s failed (exit %d): %s" % (" ".join(cmd), os.waitstatus_to_exitcode(status), err[-800:]))
    return {"ttft": ttft, "wall": wall, "rss": ru.ru_maxrss * 1024, "read": ru.ru_inblock * 512, "cg_peak": peak,
            "err": err}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("container")
    ap.add_argument("gguf")
    ap.add_argument("--sluice", default=os.path.join(ROOT, "build", "sluice"))
    ap.add_argument("--cap", default="4G")
    ap.add_argument("--budget", default="3G")
    ap.add_argument("--prompts", default="16,512")
    ap.add_argument("--gen", type=int, default=16, help="tokens generated after a short prompt")
    ap.add_argument("--gen-long", type=int, default=2, help="tokens generated after a prompt of 256+ tokens")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--engines", default="sluice,llama.cpp")
    a = ap.parse_args()
    cap = size(a.cap)
    work = os.path.join(ROOT, "build", "llamacpp-bench")
    prep = subprocess.run(["bash", os.path.join(ROOT, "tests", "llamacpp", "prepare.sh"), work], capture_output=True,
                          text=True)
    if prep.returncode != 0:
        sys.exit("vs_llamacpp: the llama.cpp driver: " + prep.stdout + prep.stderr)
    driver, bins = os.path.join(work, "llamacpp_logits"), os.path.join(work, "bins")

    header()
    gib = 1 << 30
    model_bytes = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(a.container) for f in fs)
    print("# container %.2f GiB, GGUF %.2f GiB; memory cap %.2f GiB (cgroup, page cache included), sluice --budget %s; "
          "threads %d" % (model_bytes / gib, os.path.getsize(a.gguf) / gib, cap / gib, a.budget, a.threads))
    probe = os.path.join(ROOT, "build", "bench", "bench_disk_probe")
    if os.access(probe, os.X_OK):
        drop()
        best = re.findall(r"\"probe_best_gbps\":([0-9.]+)", sh("%s %s" % (probe, a.container)))
        print("# disk probe (random record reads, O_DIRECT): best %s GB/s" % (max(map(float, best)) if best else "?"))
    engines = a.engines.split(",")
    rows = {}
    print("| round | prompt | engine | page cache | first token (s from start) | decode tok/s | read (GB) | "
          "peak RSS (GiB) | cgroup peak (GiB) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in range(a.rounds):
        for n in map(int, a.prompts.split(",")):
            gen = a.gen if n < 256 else a.gen_long
            ids = ",".join(str(1000 + 37 * i) for i in range(n))
            order = engines if r % 2 == 0 else engines[::-1]
            for e in order:
                page = drop()
                if e == "sluice":
                    x = run([a.sluice, "generate", a.container, "--ids", ids, "-n", str(gen), "--threads",
                             str(a.threads), "--budget", a.budget, "--stats"], cap)
                    m = re.search(r"generated (\d+) tokens in ([0-9.]+) s \(([0-9.]+) tok/s\)", x["err"])
                    tps = float(m.group(3)) if m and gen > 1 else float("nan")
                else:
                    x = run([driver, a.gguf, "--ids", ids, "--bins", bins, "--gen", str(gen), "--threads",
                             str(a.threads)], cap)
                    m = re.search(r"decode (\d+) tokens ([0-9.]+) s \(([0-9.]+) tok/s\)", x["err"])
                    tps = float(m.group(3)) if m and gen > 1 else float("nan")
                rows.setdefault((n, e), []).append((x["ttft"], tps, x["read"], x["rss"], x["cg_peak"]))
                print("| %d | %d | %s | %s | %.2f | %.3f | %.2f | %.2f | %.2f |" % (
                    r, n, e, page, x["ttft"], tps, x["read"] / 1e9, x["rss"] / gib, x["cg_peak"] / gib), flush=True)
    print()
    print("| prompt | engine | first token median (s) | decode tok/s median | read median (GB) | first token: llama.cpp / sluice "
          "| decode: sluice / llama.cpp |")
    print("|---|---|---|---|---|---|---|")
    for n in map(int, a.prompts.split(",")):
        med = {e: [statistics.median([v[i] for v in rows[(n, e)]]) for i in range(3)] for e in engines if (n, e) in rows}
        for e in engines:
            if e not in med:
                continue
            ratio_t = ratio_d = ""
            if e == "sluice" and "llama.cpp" in med:
                ratio_t = "%.2fx" % (med["llama.cpp"][0] / med["sluice"][0])
                ratio_d = "%.2fx" % (med["sluice"][1] / med["llama.cpp"][1]) if med["llama.cpp"][1] > 0 else ""
            print("| %d | %s | %.2f | %.3f | %.2f | %s | %s |" % (n, e, med[e][0], med[e][1], med[e][2] / 1e9,
                                                                  ratio_t, ratio_d))


if __name__ == "__main__":
    main()
