#!/usr/bin/env python3
"""kill -9 at random points of the commands that write files (issue 16).

For each command: one uninterrupted run gives the reference bytes; then
KILLS runs are each killed with SIGKILL at a random moment of their run
time. After every kill:
  * no torn file under a final name: each output is absent or complete,
    and what is there is either byte-identical to the reference or refused
    by its reader with a message naming it (never read as valid);
  * the rerun (resume) finishes and its bytes equal the reference.

usage: kill9.py SLUICE FIXTURES WORKDIR [KILLS]   exit 77 = SKIP
"""
import hashlib, os, random, shutil, signal, subprocess, sys, time

sluice, fixtures, work = sys.argv[1], sys.argv[2], sys.argv[3]
KILLS = int(sys.argv[4]) if len(sys.argv) > 4 else 20
warp = os.path.join(fixtures, "warp")
model = os.path.join(warp, "kimi-linear-tok.waste")
hf = os.path.join(fixtures, "hf", "tiny-kimi-linear")
if not os.path.isdir(model) or not os.path.isdir(hf):
    print(f"SKIP: fixtures missing ({model}, {hf})")
    sys.exit(77)
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
rng = random.Random(int(os.environ.get("KILL9_SEED", "16")))
failures = []


def file_hash(fp):
    """sha256 of the bytes; a capture manifest without its wall-clock fields
    (created_utc, runtime timings), which differ between any two runs."""
    b = open(fp, "rb").read()
    if fp.endswith("manifest.json") and b"created_utc" in b:
        import json
        j = json.loads(b)
        j.pop("created_utc", None)
        j.pop("runtime", None)
        b = json.dumps(j, sort_keys=True).encode()
    return hashlib.sha256(b).hexdigest()


def digest(paths):
    """name -> sha256 of every file under the given paths (dirs walked)."""
    out = {}
    for p in paths:
        if os.path.isdir(p):
            for root, _, files in os.walk(p):
                for f in sorted(files):
                    fp = os.path.join(root, f)
                    out[os.path.relpath(fp, os.path.dirname(p))] = file_hash(fp)
        elif os.path.exists(p):
            out[os.path.basename(p)] = file_hash(p)
    return out


def run(cmd, stdin=None, timeout=300):
    return subprocess.run(cmd, input=stdin, capture_output=True, timeout=timeout)


def timed(cmd, stdin=None):
    t0 = time.monotonic()
    r = run(cmd, stdin)
    return r, time.monotonic() - t0


def kill_at(cmd, t, stdin=None):
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if stdin is not None:
        try:
            p.stdin.write(stdin)
            p.stdin.close()
        except BrokenPipeError:
            pass
    time.sleep(t)
    finished = p.poll() is not None
    if not finished:
        p.send_signal(signal.SIGKILL)
    p.wait()
    return not finished


ONLY = os.environ.get("KILL9_ONLY", "").split(",") if os.environ.get("KILL9_ONLY") else None


def case(name, make_cmd, outputs, check, stdin=None, clean_each=False):
    """make_cmd(dir) -> argv; outputs(dir) -> paths; check(dir) -> None if
    what is on disk is absent-or-valid, else a problem string."""
    if ONLY and name not in ONLY:
        return
    ref_dir = os.path.join(work, name + "-ref")
    os.makedirs(ref_dir)
    r, t_ref = timed(make_cmd(ref_dir), stdin)
    if r.returncode != 0:
        failures.append(f"{name}: reference run failed: {r.stderr.decode()[-400:]}")
        return
    ref = digest(outputs(ref_dir))
    killed = resumed_ok = 0
    for k in range(KILLS):
        d = os.path.join(work, f"{name}-{k}")
        os.makedirs(d)
        if kill_at(make_cmd(d), rng.uniform(0.02, 0.95) * t_ref + 0.01, stdin):
            killed += 1
        problem = check(d)
        if problem:
            failures.append(f"{name} kill {k}: {problem}")
        r = run(make_cmd(d), stdin)  # resume / rerun
        got = digest(outputs(d))
        if r.returncode != 0 or got != ref:
            diff = sorted(set(got.items()) ^ set(ref.items()))[:4]
            failures.append(f"{name} kill {k}: rerun rc {r.returncode}, bytes differ: {diff} {r.stderr.decode()[-300:]}")
        else:
            resumed_ok += 1
        shutil.rmtree(d, ignore_errors=True)
    print(f"{name}: reference {t_ref:.2f} s; {KILLS} kill points ({killed} killed mid-run), "
          f"{resumed_ok}/{KILLS} reruns byte-identical")


# --- convert: a partial container is never taken for a model ---
def convert_check(d):
    out = os.path.join(d, "c.waste")
    if not os.path.exists(os.path.join(out, "manifest.json")):
        return None  # incomplete and it says so: no manifest, nothing opens it
    r = run([sluice, "verify", out])
    return None if r.returncode == 0 else None if b"c.waste" in r.stderr else f"verify of a killed convert: {r.stderr[-200:]}"


case("convert", lambda d: [sluice, "convert", hf, os.path.join(d, "c.waste"), "--quiet", "--jobs", "2",
                    "--kmeans-iters", "5", "--train-vectors", "20000"],
     lambda d: [os.path.join(d, "c.waste")], convert_check)

# --- kld suite make: the suite dir is complete or absent ---
toks = os.path.join(work, "stream.tok")
with open(toks, "w") as f:
    f.write("[" + ",".join(str((i * 7919) % 500) for i in range(40000)) + "]")


def suite_check(d):
    s = os.path.join(d, "suite")
    if not os.path.exists(s):
        return None
    r = run([sluice, "kld", "suite", "verify", s])
    return None if r.returncode == 0 else f"a killed suite make left {s} that does not verify: {r.stderr[-200:]}"


# --force: the rerun over a suite the killed run may have finished starts
# over (without it the refusal is the point; kld_tests checks that).
case("suite-make", lambda d: [sluice, "kld", "suite", "make", "--out", os.path.join(d, "suite"), "--context", "256",
                              "--tokens-source", f"a={toks}:24", "--tokens-source", f"b={toks}:24", "--force"],
     lambda d: [os.path.join(d, "suite")], suite_check)

# --- kld capture: each window file complete or absent; rerun resumes ---
suite = os.path.join(work, "cap-suite")
small = os.path.join(work, "small.tok")  # ids below the model's vocabulary
with open(small, "w") as f:
    f.write("[" + ",".join(str((i * 7919) % 300) for i in range(4000)) + "]")
r = run([sluice, "kld", "suite", "make", "--out", suite, "--context", "32", "--tokens-source", f"a={small}:6"])
assert r.returncode == 0, r.stderr


def capture_check(d):
    out = os.path.join(d, "cap")
    for root, _, files in os.walk(out) if os.path.isdir(out) else []:
        for f in files:
            if f.endswith(".safetensors"):
                r = run([sluice, "kld", "inspect", os.path.join(root, f)])
                if r.returncode != 0:
                    return f"torn window file {f}: {r.stderr[-200:]}"
    return None


case("kld-capture", lambda d: [sluice, "kld", "capture", "--model", model, "--suite", suite, "--out",
                               os.path.join(d, "cap")],
     lambda d: [os.path.join(d, "cap")], capture_check)

# --- chat /save: FILE and FILE.json load together or are refused by name ---
chat_in = b"Tell me a story.\n/save " + b"SAVEPATH" + b"\n/quit\n"


def chat_cmd(d):
    return [sluice, "chat", model, "-n", "6", "--seed", "1", "--temp", "0"]


def chat_case():
    name = "chat-save"
    ref_dir = os.path.join(work, name + "-ref")
    os.makedirs(ref_dir)
    sp = os.path.join(ref_dir, "s")
    r, t_ref = timed(chat_cmd(ref_dir), chat_in.replace(b"SAVEPATH", sp.encode()))
    if r.returncode != 0:
        failures.append(f"{name}: reference failed {r.stderr[-300:]}")
        return
    ref = digest([sp, sp + ".json"])
    ok = killed = 0
    for k in range(KILLS):
        d = os.path.join(work, f"{name}-{k}")
        os.makedirs(d)
        p = os.path.join(d, "s")
        stdin = chat_in.replace(b"SAVEPATH", p.encode())
        killed += kill_at(chat_cmd(d), rng.uniform(0.02, 1.1) * t_ref + 0.01, stdin)
        if os.path.exists(p) or os.path.exists(p + ".json"):
            r = run(chat_cmd(d), f"/load {p}\n/quit\n".encode())
            loaded = b"loaded" in r.stderr
            complete = digest([p, p + ".json"]) == ref
            if loaded and not complete:
                failures.append(f"{name} kill {k}: a torn save was loaded")
            if not loaded and p.encode() not in r.stderr:
                failures.append(f"{name} kill {k}: refused without naming the file: {r.stderr[-200:]}")
        r = run(chat_cmd(d), stdin)
        if r.returncode == 0 and digest([p, p + ".json"]) == ref:
            ok += 1
        else:
            failures.append(f"{name} kill {k}: rerun differs or failed: {r.stderr[-200:]}")
        shutil.rmtree(d, ignore_errors=True)
    print(f"{name}: reference {t_ref:.2f} s; {KILLS} kill points ({killed} killed mid-run), {ok}/{KILLS} reruns "
          f"byte-identical")


chat_case()

# --- --learn: the usage file is complete or absent ---
def learn_check(d):
    p = os.path.join(d, "usage.bin")
    if not os.path.exists(p):
        return None
    r = run([sluice, "generate", model, "--ids", "1,2,3", "-n", "1", "--hotlist", p])
    return None if r.returncode == 0 else f"killed --learn left an unreadable {p}: {r.stderr[-200:]}"


case("learn", lambda d: [sluice, "generate", model, "--ids", "5,6,7,8,9,10,11,12", "-n", "8", "--learn",
                         os.path.join(d, "usage.bin")],
     lambda d: [os.path.join(d, "usage.bin")], learn_check)

for f in failures:
    print("FAIL:", f)
print(f"kill -9: {len(failures)} failures")
sys.exit(1 if failures else 0)
