"""Helpers the Python benchmarks in bench/ share: dropping the page cache,
the run's header (time, commit, CPU, kernel set, load), a free port."""
import os, socket, subprocess, time


def drop():
    """Drops the page cache (root only); says whether it could."""
    subprocess.run(["sync"])
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return "dropped"
    except OSError:
        return "kept"


def sh(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()


def header():
    """Prints the lines every result needs beside it: when, which commit, which machine, what load."""
    rev = sh("git rev-parse --short HEAD") + ("" if sh("git status --porcelain --untracked-files=no") == "" else "+dirty")
    print(f"# {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} commit {rev}")
    cpu = sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2")
    flags = open("/proc/cpuinfo").read()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    load = " ".join(open("/proc/loadavg").read().split()[0:3])
    print(f"# {cpu}, {isa}, {os.cpu_count()} cores; load {load}")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p
