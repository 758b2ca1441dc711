#!/usr/bin/env python3
"""Hostile files and paths (issue 32), on the real binary:
  - a FIFO, a symlink to a device, a symlink to a FIFO or a directory in
    place of every container file (side files included) and of every CLI
    file option, inputs and outputs: each run ends within seconds (a hang
    fails the case), with a non-zero exit naming the file where the file is
    needed; outputs never write through a symlink (the target is unchanged);
  - outputs that are, or lie inside, the model read (or a convert's source,
    synth's --tokenizer, kld capture's --model) are refused naming both, and
    the container is byte-identical after;
  - `kld report` / `kld paired` refuse a receipt marked integrity: failed;
  - serve refuses an empty or blank --api-key; one number / id-list parser.
usage: hostile_paths.py SLUICE FIXTURES WORKDIR     exit 77 = SKIP
"""
import hashlib, json, os, shutil, signal, subprocess, sys, time

sluice, fixtures, work = sys.argv[1:4]
src_model = os.path.join(fixtures, "warp", "kimi-linear-tok.waste")
if not os.path.isdir(src_model):
    print(f"SKIP: no fixture {src_model}")
    sys.exit(77)
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
fails = []
HANG = 20  # seconds: far above any case here (each ends in well under 2 s)
KINDS = ("fifo", "devlink", "fifolink", "dir")


def special(path, kind):
    if os.path.lexists(path):
        shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.remove(path)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "devlink":
        os.symlink("/dev/zero", path)
    elif kind == "fifolink":
        target = path + ".target-fifo"
        if not os.path.lexists(target):
            os.mkfifo(target)
        os.symlink(target, path)
    elif kind == "dir":
        os.mkdir(path)


def run(cmd, stdin=None, env=None):
    t0 = time.time()
    try:
        r = subprocess.run(cmd, input=stdin, capture_output=True, timeout=HANG, env=env)
    except subprocess.TimeoutExpired:
        return None, "", time.time() - t0
    return r.returncode, r.stderr.decode(errors="replace") + r.stdout.decode(errors="replace"), time.time() - t0


def case(name, cmd, want_fail=True, needle=None, stdin=None, env=None, ok_rcs=None):
    rc, out, t = run(cmd, stdin, env)
    last = out.strip().splitlines()[-1] if out.strip() else ""
    if rc is None:
        ok, why = False, f"HUNG (killed after {HANG} s)"
    elif ok_rcs is not None:
        ok, why = rc in ok_rcs and (needle is None or needle in out), f"exit {rc}"
    elif want_fail:
        ok, why = rc != 0 and (needle is None or needle in out), f"exit {rc}"
    else:
        ok, why = rc == 0, f"exit {rc}"
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {why} in {t:.2f} s: {last[:160]}")
    if not ok:
        fails.append(name)
        if rc is not None and out:
            print("      " + "\n      ".join(out.strip().splitlines()[-4:]))
    return rc, out


def model_copy(tag, src=None):
    d = os.path.join(work, f"m-{tag}.waste")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(src or src_model, d)
    os.chmod(d, 0o755)
    for n in os.listdir(d):
        os.chmod(os.path.join(d, n), 0o644)
    return d


def tree_hash(d):
    h = hashlib.sha256()
    for n in sorted(os.listdir(d)):
        p = os.path.join(d, n)
        h.update(n.encode())
        if os.path.isfile(p) and not os.path.islink(p):
            with open(p, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


# --- 1. every container file replaced -----------------------------------
# The file each command needs gives a non-zero exit naming it; a file a
# command does not read (info never reads trunk.bin) may pass; nothing hangs.
needs = {"tokenize": {"manifest.json", "codebooks.bin", "tokenizer.model", "specials.json"},
         "run": {"manifest.json", "trunk.bin", "codebooks.bin", "experts-L1.bin", "tokenizer.model", "specials.json",
                 "chat.json"}}
# chat.json: the fixture with one (run uses the chat template when there is one).
chat_model = os.path.join(fixtures, "warp", "converted-default.waste")
for f in ("manifest.json", "trunk.bin", "codebooks.bin", "experts-L1.bin", "tokenizer.model", "specials.json",
          "chat.json", "usage.waste"):
    for kind in KINDS:
        m = model_copy("side", chat_model if f == "chat.json" else src_model)
        special(os.path.join(m, f), kind)
        for cmd, args in (("info", []), ("tokenize", ["hi"]), ("run", ["hi", "-n", "1", "-q"])):
            must = f in needs.get(cmd, set()) or (cmd == "info" and f == "manifest.json")
            case(f"container {f} as {kind}: {cmd}", [sluice, cmd, m] + args,
                 ok_rcs=None if must else (0, 1), want_fail=must, needle=f if must else None)

# serve with a FIFO side file: refuses and exits (it ignored SIGTERM while
# blocked); if it does start, SIGTERM must stop it.
for f in ("tokenizer.model", "specials.json", "chat.json"):
    m = model_copy("serve", chat_model)
    special(os.path.join(m, f), "fifo")
    p = subprocess.Popen([sluice, "serve", m, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(timeout=5)  # refused at start, or serving (the side files load on first use)
        ok = p.returncode != 0 and f in err.decode(errors="replace")
        why = f"exit {p.returncode}: {err.decode(errors='replace').strip().splitlines()[-1:]}"
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)
        try:
            p.communicate(timeout=10)
            ok, why = True, "started; SIGTERM stopped it"
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            ok, why = False, "HUNG and ignored SIGTERM"
    print(f"{'ok  ' if ok else 'FAIL'} serve with {f} as a FIFO: {why}")
    if not ok:
        fails.append(f"serve {f}")

# --- 2. CLI input file options ------------------------------------------
m = model_copy("in")
plan_cfg = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "plan", "kimi-linear-48b.config.json")
for kind in KINDS:
    F = os.path.join(work, f"in-{kind}")
    special(F, kind)
    inputs = [("run --file", [sluice, "run", m, "--file", F, "-n", "1", "-q"]),
              ("run --json-schema", [sluice, "run", m, "hi", "--json-schema", F, "-n", "1", "-q"]),
              ("tokenize --file", [sluice, "tokenize", m, "--file", F]),
              ("perplexity FILE", [sluice, "perplexity", m, F, "-q"]),
              ("logits --hotlist", [sluice, "logits", m, "--ids", "1,2", "--hotlist", F, "-q"]),
              ("plan --config", [sluice, "plan", "--config", F]),
              ("plan --trace", [sluice, "plan", "--config", plan_cfg, "--trace", F]),
              ("serve --test-forced-output", [sluice, "serve", m, "--port", "0", "--test-forced-output", F]),
              ("kld report --receipts", [sluice, "kld", "report", "--receipts", F, "--out", os.path.join(work, "r.html")]),
              ("kld paired --receipts", [sluice, "kld", "paired", "--receipts", F, F])]
    for name, cmd in inputs:
        case(f"{name} as {kind}", cmd, needle=os.path.basename(F))
    # chat /load reads F and F.json: refused by name, the chat goes on.
    special(F + ".json", kind)
    case(f"chat /load as {kind}", [sluice, "chat", m, "-q"], ok_rcs=(0,), needle=os.path.basename(F),
         stdin=f"/load {F}\n/quit\n".encode())
    # kld suite verify / convert: a special file in the directory read.
    d = os.path.join(work, f"suite-{kind}")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    special(os.path.join(d, "manifest.json"), kind)
    case(f"kld suite verify manifest.json as {kind}", [sluice, "kld", "suite", "verify", d], needle="manifest.json")
    hf = os.path.join(work, f"hf-{kind}")
    shutil.rmtree(hf, ignore_errors=True)
    os.makedirs(hf)
    special(os.path.join(hf, "config.json"), kind)
    case(f"convert config.json as {kind}", [sluice, "convert", "--src", hf, "--out", os.path.join(work, f"conv-{kind}")])
    tok = os.path.join(work, f"tok-{kind}")
    special(tok, kind)
    case(f"kld suite make --tokens-source as {kind}",
         [sluice, "kld", "suite", "make", "--out", os.path.join(work, f"mk-{kind}"), "--context", "4",
          "--tokens-source", f"a={tok}:1"], needle=os.path.basename(tok))

# --- 3. CLI output options ----------------------------------------------
victim = os.path.join(work, "victim")
for kind in KINDS + ("victimlink",):
    m = model_copy("out")
    before = tree_hash(m)
    O = os.path.join(work, f"out-{kind}")

    def prep(path):
        if kind == "victimlink":
            with open(victim, "wb") as f:
                f.write(b"precious")
            if os.path.lexists(path):
                os.remove(path)
            os.symlink(victim, path)
        else:
            special(path, kind)

    outs = [("logits --out", ["logits", m, "--ids", "1,2", "-q", "--out"]),
            ("logits --vq4p-ties", ["logits", m, "--ids", "1,2", "-q", "--vq4p-ties"]),
            ("logits --learn", ["logits", m, "--ids", "1,2", "-q", "--learn"]),
            ("logits --dump-routes", ["logits", m, "--ids", "1,2", "-q", "--dump-routes"])]
    for name, args in outs:
        prep(O)
        rc, out = case(f"{name} as {kind}", [sluice] + args + [O], want_fail=kind != "victimlink",
                       needle=os.path.basename(O) if kind != "victimlink" else None)
        if kind == "victimlink":
            with open(victim, "rb") as f:
                if f.read() != b"precious":
                    print(f"FAIL {name}: wrote through the symlink into its target")
                    fails.append(f"{name} through a symlink")
    # --trace DIR: each file of the trace (trace.json, logits.f32) in turn.
    for f in ("trace.json", "logits.f32"):
        T = os.path.join(work, f"trace-{kind}-{f}")
        shutil.rmtree(T, ignore_errors=True)
        os.makedirs(T)
        prep(os.path.join(T, f))
        rc, out = case(f"logits --trace with {f} as {kind}", [sluice, "logits", m, "--ids", "1,2", "-q", "--trace", T],
                       want_fail=kind != "victimlink", needle=f if kind != "victimlink" else None)
        if kind != "victimlink" and rc not in (None, 0) and os.path.exists(os.path.join(T, "trace.json")) and \
                os.path.isfile(os.path.join(T, "trace.json")) and f != "trace.json":
            print(f"FAIL --trace left a trace.json beside a failed {f}")
            fails.append("partial trace")
        if kind == "victimlink":
            with open(victim, "rb") as fh:
                if fh.read() != b"precious":
                    print(f"FAIL --trace wrote through a symlink at {f}")
                    fails.append("trace through a symlink")
    prep(O)
    case(f"chat /save as {kind}", [sluice, "chat", m, "-q"], ok_rcs=(0,), stdin=f"/save {O}\n/quit\n".encode(),
         needle=os.path.basename(O) if kind != "victimlink" else None)
    if tree_hash(m) != before:
        print(f"FAIL outputs as {kind} changed the container")
        fails.append(f"container changed ({kind})")

# --- 4. a run never destroys its own model --------------------------------
m = model_copy("self")
before = tree_hash(m)
for name, args in (("--out M/trunk.bin", ["logits", m, "--ids", "1,2", "--out", os.path.join(m, "trunk.bin")]),
                   ("--learn M/manifest.json", ["logits", m, "--ids", "1,2", "--learn", os.path.join(m, "manifest.json")]),
                   ("--vq4p-ties M/specials.json", ["logits", m, "--ids", "1,2", "--vq4p-ties", os.path.join(m, "specials.json")]),
                   ("--trace M/sub", ["logits", m, "--ids", "1,2", "--trace", os.path.join(m, "sub")]),
                   ("--dump-routes M/../M/x", ["generate", m, "--ids", "1", "-n", "1", "--dump-routes",
                                               os.path.join(m, "..", os.path.basename(m), "x.jsonl")]),
                   ("kld capture --out M", ["kld", "capture", "--suite", work, "--model", m, "--out", m]),
                   ("synth --out M --tokenizer M", ["synth", "--out", m, "--tokenizer", m, "--layers", "1"]),
                   ("convert --src S --out S/x", ["convert", "--src", m, "--out", os.path.join(m, "x")])):
    case(f"self-destruction {name}", [sluice] + args + ["-q"] * (args[0] in ("logits", "generate")), needle="inside")
if tree_hash(m) != before or sorted(os.listdir(m)) != sorted(os.listdir(src_model)):
    print("FAIL a refused run changed the container")
    fails.append("container changed by a refused run")
case("--learn M/usage.waste (the container's own hotlist) is allowed",
     [sluice, "logits", m, "--ids", "1,2", "-q", "--learn", os.path.join(m, "usage.waste")], want_fail=False)
link = os.path.join(work, "alias.waste")
os.symlink(m, link)
case("--out through a symlink to the model", [sluice, "logits", m, "--ids", "1,2", "-q", "--out",
                                              os.path.join(link, "trunk.bin")], needle="inside")

# --- 5. KLD receipts whose check failed ----------------------------------
def receipt(integrity):
    r = {"direction": "KL(reference || candidate)", "positions": 6, "top1_agreement": 0.9,
         "kl_reference_to_candidate": {"mean": 0.01, "median": 0.01, "p99": 0.02, "max": 0.03},
         "kl_window_cluster_bootstrap": {"ci95_low": 0.005, "ci95_high": 0.015, "standard_error": 0.002,
                                         "bootstrap_samples": 100},
         "domains": {"d": {"estimate": 0.01, "ci95_low": 0.005, "ci95_high": 0.015}},
         "per_window": [{"window_index": 0, "positions": 3, "kl_reference_to_candidate": {"mean": 0.01}},
                        {"window_index": 1, "positions": 3, "kl_reference_to_candidate": {"mean": 0.01}}],
         "sluice": {"integrity": integrity}}
    p = os.path.join(work, f"receipt-{integrity.split()[0]}.json")
    with open(p, "w") as f:
        json.dump(r, f)
    return p


good, bad = receipt("verified"), receipt("failed")
html = os.path.join(work, "report.html")
case("kld report on a verified receipt ranks it", [sluice, "kld", "report", "--receipts", good, "--out", html],
     want_fail=False)
os.remove(html)
case("kld report refuses a receipt marked integrity: failed",
     [sluice, "kld", "report", "--receipts", good, bad, "--out", html], ok_rcs=(3,), needle="integrity: failed")
if os.path.exists(html):
    print("FAIL kld report wrote a page ranking a failed receipt")
    fails.append("report html written")
case("kld paired refuses a receipt marked integrity: failed", [sluice, "kld", "paired", "--receipts", good, bad],
     ok_rcs=(3,), needle="integrity: failed")

# The same from a real run: compare --verify-hashes on a candidate whose
# file was changed after capture marks its receipt failed (exit 3); report
# and paired refuse that receipt.
kd = os.path.join(work, "kld")
os.makedirs(kd)
with open(os.path.join(kd, "toks.txt"), "w") as f:
    f.write(" ".join(str(i % 200) for i in range(4000)))
tiny = os.path.join(fixtures, "warp", "kimi-linear-tiny.waste")
K = lambda *a: [sluice, "kld"] + list(a)
P = lambda n: os.path.join(kd, n)
case("kld suite make", K("suite", "make", "--out", P("suite"), "--context", "16", "--tokens-source",
                         "a=" + P("toks.txt") + ":4"), want_fail=False)
case("kld capture", K("capture", "--model", tiny, "--suite", P("suite"), "--out", P("ref")), want_fail=False)
shutil.copytree(P("ref"), P("cand"))
with open(os.path.join(P("cand"), "logits_001.safetensors"), "r+b") as f:
    f.seek(-8, 2)
    b = f.read(1)
    f.seek(-8, 2)
    f.write(bytes([b[0] ^ 1]))
case("kld compare, intact", K("compare", "--suite", P("suite"), "--reference", P("ref"), "--candidate", P("ref"),
                              "--verify-hashes", "on", "--json", P("ok.json")), want_fail=False)
case("kld compare, a changed candidate file", K("compare", "--suite", P("suite"), "--reference", P("ref"), "--candidate",
                                               P("cand"), "--verify-hashes", "on", "--json", P("bad.json")),
     ok_rcs=(3,), needle="integrity: failed")
case("kld report refuses the compare-marked receipt", K("report", "--receipts", P("ok.json"), P("bad.json"), "--out",
                                                       P("r.html")), ok_rcs=(3,), needle="integrity: failed")
case("kld paired refuses the compare-marked receipt", K("paired", "--receipts", P("ok.json"), P("bad.json")),
     ok_rcs=(3,), needle="integrity: failed")
if os.path.exists(P("r.html")):
    print("FAIL kld report wrote a page with a failed receipt")
    fails.append("report html written (compare receipt)")

# --- 6. smaller holes --------------------------------------------------------
m = model_copy("misc")
case("serve --api-key ''", [sluice, "serve", m, "--api-key", ""], ok_rcs=(2,), needle="--api-key")
env = dict(os.environ, SLUICE_API_KEY="")
case("serve with SLUICE_API_KEY=''", [sluice, "serve", m], ok_rcs=(2,), needle="SLUICE_API_KEY", env=env)
case("serve --api-key 'a b'", [sluice, "serve", m, "--api-key", "a b"], ok_rcs=(2,), needle="API key")
case("run --seed 2^64", [sluice, "run", m, "hi", "-n", "1", "--seed", "18446744073709551616"], ok_rcs=(2,),
     needle="--seed")
case("run --seed 2^64-1", [sluice, "run", m, "hi", "-n", "1", "-q", "--seed", "18446744073709551615"], want_fail=False)
case("detokenize 1,,2", [sluice, "detokenize", m, "1,,2"], ok_rcs=(2,), needle="empty element")
case("logits --ids 1,,2", [sluice, "logits", m, "--ids", "1,,2"], ok_rcs=(2,), needle="empty element")
case("detokenize 1,2", [sluice, "detokenize", m, "1,2"], want_fail=False)
case("--version x", [sluice, "--version", "x"], ok_rcs=(2,), needle="--version")
case("--version", [sluice, "--version"], want_fail=False)

print(f"\nhostile_paths: {len(fails)} failures")
for f in fails:
    print("  " + f)
sys.exit(1 if fails else 0)
