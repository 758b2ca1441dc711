#!/usr/bin/python3
"""CLI tests of issue 17: the command table, prompt input, --json, -q, eval,
bench, --cpus, --exclusive-open, --mlock, --dump-routes, generate's text,
--ignore-eos, the newcomer frictions, and bad input (exit 2 and one line).

usage: cli_parity_test.py SLUICE SOURCE_DIR WORKDIR
Runs on the repository's models/sluice-mini (always present). Exits 0 on
success, 1 on failure.
"""
import fcntl
import json
import os
import resource
import shutil
import subprocess
import sys

SLUICE, SRC, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
MODEL = os.path.join(SRC, "models", "sluice-mini")
HF = os.path.join(SRC, "models", "sluice-mini-hf")
COMMON = ["--threads", "2"]
PROMPT = "And God said, Let there be light"
failures = []


def run(args, stdin=b"", **kw):
    p = subprocess.run([SLUICE] + args, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300,
                       **kw)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
        if detail:
            print("     " + str(detail)[:2000])


def usage_error(args, what, needle=None, stdin=b""):
    """Bad usage: exit 2 and a reason on the first line of stderr (no usage dump first)."""
    rc, out, err = run(args, stdin)
    first = err.strip().splitlines()[0] if err.strip() else ""
    check(rc == 2 and first and (needle is None or needle in first),
          f"bad usage exits 2 with a one-line reason: {what}", (rc, err[:400]))
    return err


def copy_model(name):
    d = os.path.join(WORK, name)
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(MODEL, d)
    return d


def test_help_lists_every_command():
    rc, out, err = run(["--help"])
    want = ["info", "logits", "generate", "run", "eval", "chat", "tokenize", "detokenize", "perplexity", "bench", "plan",
            "serve", "synth", "convert", "verify", "kld"]
    lines = out.splitlines()
    missing = [c for c in want if not any(l.strip().startswith(c + " ") for l in lines)]
    check(rc == 0 and not missing, "sluice --help lists every subcommand with a description", (rc, missing, out))
    for cmd in ("convert", "verify", "bench", "eval", "synth"):
        rc, out, err = run([cmd, "--help"])
        check(rc == 0 and "--" in out, f"sluice {cmd} --help exits 0 and lists options", (rc, err))
    rc, out, _ = run(["run", "--help"])
    temp = [l for l in out.splitlines() if "--temp" in l]
    check(temp and "[" in temp[0], "run --help shows the sampling defaults", temp)
    rc, out, _ = run(["synth", "--help"])
    layers = [l for l in out.splitlines() if "--layers" in l]
    check(layers and "[" in layers[0], "synth --help shows its defaults", layers)
    rc, out, _ = run(["convert", "--help"])
    check("--src" in out and "--out" in out and "--trunk-bits" in out, "convert --help names --src, --out, --trunk-bits")


def test_prompt_sources():
    base = ["run", MODEL, "--raw", "--bos", "-n", "12", "--temp", "0", "-q"] + COMMON
    rc, want, err = run(base + [PROMPT])
    check(rc == 0 and want, "run with PROMPT (reference)", err)
    f = os.path.join(WORK, "prompt.txt")
    with open(f, "w") as fh:
        fh.write(PROMPT)
    for label, args, stdin in (("--file F", ["--file", f], b""), ("-", ["-"], PROMPT.encode()),
                               ("a pipe", [], PROMPT.encode())):
        rc, out, err = run(base + args, stdin)
        check(rc == 0 and out == want, f"run takes the prompt from {label}", (rc, out, want, err))
    rc, ids, _ = run(["tokenize", MODEL, PROMPT])
    for label, args, stdin in (("--file F", ["--file", f], b""), ("-", ["-"], PROMPT.encode()),
                               ("a pipe", [], PROMPT.encode())):
        rc, out, err = run(["tokenize", MODEL] + args, stdin)
        check(rc == 0 and out == ids, f"tokenize takes the text from {label}", (out, ids, err))
    rc, e1, _ = run(["eval", MODEL, PROMPT, "--json", "-q"] + COMMON)
    rc2, e2, err = run(["eval", MODEL, "--json", "-q"] + COMMON, PROMPT.encode())
    check(rc == 0 and rc2 == 0 and e1 == e2, "eval takes the prompt from a pipe", (e1, e2, err))
    held = os.path.join(SRC, "models", "kjv-heldout.txt")
    with open(held, "rb") as fh:
        text = fh.read()[:20000]
    part = os.path.join(WORK, "heldout-part.txt")
    with open(part, "wb") as fh:
        fh.write(text)
    pp = ["perplexity", MODEL, "--ctx", "64", "--windows", "2", "--json", "-q"] + COMMON
    rc, p1, err1 = run(pp[:2] + [part] + pp[2:])
    rc2, p2, err2 = run(pp[:2] + ["-"] + pp[2:], text)
    ok = rc == 0 and rc2 == 0 and json.loads(p1)["ppl"] == json.loads(p2)["ppl"]
    check(ok, "perplexity reads FILE or - (stdin) with the same result", (err1, err2))
    usage_error(["run", MODEL, PROMPT, "--file", f], "run with PROMPT and --file", "once")
    usage_error(["run", MODEL], "run without a prompt and an empty stdin", "no prompt")
    usage_error(["run", MODEL, "--file", os.path.join(WORK, "missing.txt")], "run --file of a missing file")


def test_json_outputs():
    for args, keys in ((["info", MODEL, "--json"], ["family", "experts", "vocab"]),
                       (["plan", MODEL, "--json", "--ctx", "256"], ["floor", "budget", "cache", "record_bytes"]),
                       (["tokenize", MODEL, PROMPT, "--json"], ["ids", "pieces"]),
                       (["eval", MODEL, PROMPT, "--json", "--top-k", "3"] + COMMON, ["top", "n_prompt"]),
                       (["bench", MODEL, "-n", "4", "--prompt", "8", "--json"] + COMMON,
                        ["prefill_tok_s", "decode_tok_s", "hit_rate", "gb_read_per_token", "read_gb_s",
                         "peak_rss_bytes", "budget_bytes"])):
        rc, out, err = run(args)
        try:
            j = json.loads(out)
            ok = rc == 0 and all(k in j for k in keys)
        except ValueError:
            j, ok = None, False
        check(ok, f"{args[0]} --json prints one JSON object with {keys}", (rc, out[:300], err[:300]))
    rc, out, err = run(["tokenize", MODEL, PROMPT, "--json"])
    j = json.loads(out)
    check("".join(j["pieces"]) == PROMPT and len(j["pieces"]) == len(j["ids"]),
          "tokenize --json: the pieces concatenate to the text", j)


def test_eval_distribution():
    rc, out, err = run(["eval", MODEL, PROMPT, "--top-k", "5", "--json"] + COMMON)
    top = json.loads(out)["top"]
    probs = [t["prob"] for t in top]
    logits = [t["logit"] for t in top]
    ok = (rc == 0 and len(top) == 5 and all("text" in t for t in top) and probs == sorted(probs, reverse=True)
          and logits == sorted(logits, reverse=True) and 0 < sum(probs) <= 1.0 + 1e-9)
    check(ok, f"eval --top-k 5: token, text, probability, logit, sorted (sum of probs {sum(probs):.4f})", top)
    rc, out, err = run(["eval", MODEL, PROMPT, "--top-k", "3"] + COMMON)
    rows = [l for l in out.splitlines()[2:] if l.strip()]
    check(rc == 0 and len(rows) == 3 and "prob" in out.splitlines()[1], "eval prints a table of 3 rows", out)
    usage_error(["eval", MODEL, PROMPT, "--top-k", "0"], "eval --top-k 0")


def test_quiet_and_progress():
    rc, out, err = run(["run", MODEL, PROMPT, "-n", "4", "-q"] + COMMON)
    check(rc == 0 and out and err == "", "run -q: the answer on stdout, nothing on stderr", err)
    rc, out, err = run(["run", MODEL, PROMPT, "-n", "4"] + COMMON)
    check(rc == 0 and "loading the trunk" in err and "model ready in" in err,
          "run says what start-up is doing", err)


def test_generate_text():
    ids = "4096," + ",".join(run(["tokenize", MODEL, PROMPT])[1].split())
    rc, text, err = run(["generate", MODEL, "--ids", ids, "-n", "12", "-q"] + COMMON)
    rc2, idl, err2 = run(["generate", MODEL, "--ids", ids, "-n", "12", "--print-ids", "-q"] + COMMON)
    gen = [int(x) for x in idl.split()]
    rc3, detok, _ = run(["detokenize", MODEL] + [str(i) for i in gen if i < 4096])
    check(rc == 0 and rc2 == 0 and text and not text.strip().isdigit() and text == detok,
          "generate prints text by default; --print-ids prints the ids of the same text", (text, idl, detok))
    rc, _, err = run(["generate", MODEL, "--ids", ids, "-n", "40", "--ignore-eos"] + COMMON)
    check(rc == 0 and "generated 40 tokens" in err, "generate --ignore-eos generates exactly -n tokens", err)
    rc, _, err = run(["run", MODEL, PROMPT, "-n", "40", "--ignore-eos", "--seed", "1"] + COMMON)
    check(rc == 0 and "generated 40 tokens" in err, "run --ignore-eos generates exactly -n tokens", err)
    # stdout and stderr into one file: the statistics start on their own line.
    path = os.path.join(WORK, "both.txt")
    with open(path, "wb") as fh:
        subprocess.run([SLUICE, "run", MODEL, PROMPT, "--raw", "-n", "8", "--temp", "0"] + COMMON, stdout=fh,
                       stderr=subprocess.STDOUT, timeout=120)
    with open(path) as fh:
        both = fh.read()
    check(any(l.startswith("sluice run: prompt") for l in both.splitlines()),
          "run: the stats line starts its own line when stdout and stderr share a file", both)


def test_no_trunk_for_metadata_commands():
    d = copy_model("no-trunk")
    open(os.path.join(d, "trunk.bin"), "w").close()  # an empty trunk: any read of it fails
    for args in (["info", d], ["info", d, "--json"], ["tokenize", d, PROMPT], ["detokenize", d, "100", "200"],
                 ["plan", d]):
        rc, out, err = run(args)
        check(rc == 0 and out, f"{' '.join(args[:1] + args[2:])}: works without reading the trunk", (rc, err))
    rc, out, err = run(["run", d, PROMPT, "-n", "2"] + COMMON)
    check(rc == 1 and "trunk" in err, "run on the same container fails, naming the trunk", err)


def test_checkpoint_hint():
    for args in (["run", HF, PROMPT], ["info", HF], ["plan", HF]):
        rc, out, err = run(args)
        check(rc == 1 and "Hugging Face checkpoint" in err and "sluice convert" in err,
              f"{args[0]} on a Hugging Face folder says to run sluice convert", err)


def test_cpus():
    base = ["run", MODEL, PROMPT, "--raw", "-n", "8", "--temp", "0", "-q", "--threads", "2"]
    rc, want, _ = run(base)
    rc, out, err = run(base + ["--cpus", "0"])
    check(rc == 0 and out == want, "--cpus 0: the same text as without pinning", (out, want, err))
    rc, out, err = run(["run", MODEL, PROMPT, "--raw", "-n", "8", "--temp", "0", "-q", "--cpus", "0"])
    check(rc == 0 and out == want, "--cpus 0 with --threads 0 (one thread): the same text", err)
    usage_error(["run", MODEL, PROMPT, "--cpus", "3-1"], "--cpus 3-1", "3-1")
    usage_error(["info", MODEL, "--cpus", "x"], "--cpus x", "x")
    rc, out, err = run(["info", MODEL, "--cpus", "1023"])
    rc2, out2, err2 = run(["run", MODEL, PROMPT, "-n", "1", "--cpus", "1023"])
    check(rc2 == 1 and "not available" in err2, "--cpus 1023 on a smaller machine: exit 1, CPU not available", err2)
    rc, out, err = run(["serve", MODEL, "--cpus", "2-1"])
    check(rc == 2 and "2-1" in err, "serve --cpus 2-1: exit 2 naming the list", err)


def test_exclusive_open():
    d = copy_model("exclusive")
    man = os.path.join(d, "manifest.json")
    with open(man) as fh:
        fcntl.flock(fh, fcntl.LOCK_SH)  # another process has it open
        rc, out, err = run(["info", d, "--exclusive-open"])
        check(rc == 1 and "busy" in err and "another process" in err,
              "--exclusive-open while another process has the container open: exit 1, busy", err)
        rc, out, err = run(["info", d])
        check(rc == 0, "a plain open beside another plain open works", err)
        rc, out, err = run(["serve", d, "--exclusive-open", "--port", "0"] + COMMON)
        check(rc == 1 and "busy" in err, "serve --exclusive-open on a container in use: exit 1, busy", err)
        fcntl.flock(fh, fcntl.LOCK_UN)
        fcntl.flock(fh, fcntl.LOCK_EX)  # held exclusively
        rc, out, err = run(["run", d, PROMPT, "-n", "2"] + COMMON)
        check(rc == 1 and "exclusively" in err, "a plain open while another holds it exclusively: exit 1", err)
        fcntl.flock(fh, fcntl.LOCK_UN)
    rc, out, err = run(["run", d, PROMPT, "-n", "2", "--exclusive-open"] + COMMON)
    check(rc == 0, "--exclusive-open on a free container works", err)
    rc, out, err = run(["serve", d, "--exclusive-open", "--port", "0", "--help"])
    check(rc == 0 and "--exclusive-open" in out and "--cpus" in out, "serve takes --exclusive-open and --cpus", out[-300:])


def test_mlock():
    def no_memlock():
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))
    rc, out, err = run(["run", MODEL, PROMPT, "-n", "2", "--mlock"] + COMMON, preexec_fn=no_memlock)
    check(rc == 1 and "RLIMIT_MEMLOCK" in err and "ulimit -l" in err,
          "--mlock under RLIMIT_MEMLOCK 0: exit 1 naming the limit", err)
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if soft == resource.RLIM_INFINITY or soft >= (1 << 30):
        rc, out, err = run(["run", MODEL, PROMPT, "-n", "2", "--mlock"] + COMMON)
        check(rc == 0, "--mlock where the limit allows it works", err)
    else:
        print(f"skip --mlock success case: RLIMIT_MEMLOCK is {soft} bytes here")


def test_dump_routes():
    path = os.path.join(WORK, "routes.jsonl")
    base = ["run", MODEL, PROMPT, "--raw", "-n", "6", "--temp", "0", "-q"] + COMMON
    rc, want, _ = run(base)
    rc, out, err = run(base + ["--dump-routes", path])
    with open(path) as fh:
        lines = [json.loads(l) for l in fh]
    info = json.loads(run(["info", MODEL, "--json"])[1])
    moe = info["moe_layers"]
    ok = (rc == 0 and out == want and lines and [l["tok"] for l in lines] == list(range(len(lines)))
          and all(len(l["layers"]) == moe and all(len(s) == info["top_k"] for s in l["layers"]) for l in lines))
    check(ok, f"--dump-routes: {len(lines)} positions x {moe} MoE layers x top-{info['top_k']}, same text", err)
    ref = os.path.join(SRC, "..", "shared", "traces", "kimi-linear-48b-route-150.jsonl")
    if os.path.exists(ref):
        with open(ref) as fh:
            r0 = json.loads(fh.readline())
        check(sorted(r0.keys()) == sorted(lines[0].keys()), "--dump-routes: the keys of ../shared/traces")
    rc, out, err = run(base + ["--dump-routes", os.path.join(WORK, "no-such-dir", "r.jsonl")])
    check(rc == 1 and "no-such-dir" in err, "--dump-routes into a missing folder: exit 1 naming it", err)


def test_bench():
    rc, out, err = run(["bench", MODEL, "-n", "8", "--prompt", "16"] + COMMON)
    check(rc == 0 and "prefill" in out and "decode" in out and "peak RSS" in out and "per decoded token" in out and "GB/s while reading" in out,
          "bench prints prefill, decode, hit rate, GB/token, read rate, peak RSS", out)
    j = json.loads(run(["bench", MODEL, "-n", "8", "--prompt", "16", "--json"] + COMMON)[1])
    check(j["decode_tokens"] == 8 and j["prompt_tokens"] == 16 and 0 <= j["hit_rate"] <= 1 and j["peak_rss_bytes"] > 0,
          "bench --json: counts and rates in range", j)
    usage_error(["bench", MODEL, "-n", "0"], "bench -n 0")
    usage_error(["bench", MODEL, "--prompt", "4000", "-n", "200", "--ctx", "256"], "bench past --ctx", "ctx")


def test_cache_policy_and_plan():
    rc, want, _ = run(["run", MODEL, PROMPT, "--raw", "-n", "8", "--temp", "0", "-q"] + COMMON)
    for pol in ("lfru", "lru"):
        rc, out, err = run(["run", MODEL, PROMPT, "--raw", "-n", "8", "--temp", "0", "-q", "--cache-policy", pol]
                           + COMMON)
        check(rc == 0 and out == want, f"--cache-policy {pol}: the same text", err)
    usage_error(["run", MODEL, PROMPT, "--cache-policy", "mru"], "--cache-policy mru", "mru")
    j = json.loads(run(["plan", MODEL, "--budget", "2G", "--json"])[1])
    experts = sum(os.path.getsize(os.path.join(MODEL, f)) for f in os.listdir(MODEL) if f.startswith("experts-"))
    check(j["cache"] <= experts + j["min_cache"], f"plan --budget 2G on a tiny model: cache {j['cache']} bytes, "
          f"not more than the {experts} bytes of experts", j)


def test_convert_verify_usage():
    usage_error(["convert"], "convert without SRC and DST", "SRC")
    usage_error(["convert", HF, os.path.join(WORK, "x.waste"), "--trunk-bits", "5"], "convert --trunk-bits 5")
    rc, out, err = run(["convert", os.path.join(WORK, "no-such-hf"), os.path.join(WORK, "y.waste")])
    check(rc == 1 and "no-such-hf" in err, "convert of a missing checkpoint: exit 1 naming it", err)
    rc, out, err = run(["verify", MODEL])
    check(rc == 0 and "verify: OK" in out, "verify MODEL: OK", err)
    usage_error(["verify"], "verify without a container")


def test_kld_help_and_errors():
    rc, out, err = run(["kld", "suite", "make", "--help"])
    check(rc == 0 and "NAME=FILE:W" in out and "windows of --context T tokens" in out,
          "kld suite make --help explains NAME=FILE:W", (rc, err))
    rc, out, err = run(["kld", "suite", "make", "--context", "64"])
    first = err.strip().splitlines()[0] if err.strip() else ""
    check(rc == 2 and first.startswith("sluice kld: error") and len(err.strip().splitlines()) <= 2,
          "kld suite make without --out: the error first, no usage dump", err)
    # One option parser (CLI11) for every kld subcommand: help with defaults,
    # exit 2 and a one-line reason for bad usage.
    for sub, want in [(["compare"], "10000"), (["capture"], "256"), (["report"], "--bins-per-decade"),
                      (["paired"], "--tie-tolerance"), (["noise"], "--runs"), (["export-kld"], "--reference"),
                      (["suite", "verify"], "--expect-suite-hash"), (["inspect"], "files")]:
        rc, out, err = run(["kld"] + sub + ["--help"])
        check(rc == 0 and want in out, f"kld {' '.join(sub)} --help lists its options ({want})", (rc, out[:300], err))
    for args, needle in [(["kld"], None), (["kld", "frobnicate"], None),
                         (["kld", "compare", "--reference", "r", "--candidate", "c", "--windoes", "1"], "--windoes"),
                         (["kld", "compare", "--reference", "r", "--candidate", "c", "--seed", "x"], "--seed"),
                         (["kld", "compare", "--reference", "r", "--candidate", "c", "--io", "mmap"], "--io"),
                         (["kld", "capture", "--suite", "s", "--out", "o"], "--model"),
                         (["kld", "report", "--receipts", "a.json", "--out", "r.html", "extra"], "extra")]:
        err = usage_error(args, "sluice " + " ".join(args), needle)
        check(len(err.strip().splitlines()) <= 2, "sluice " + " ".join(args) + ": no usage dump", err)


def test_synth_tokenizer():
    out = os.path.join(WORK, "synth-tok.waste")
    shutil.rmtree(out, ignore_errors=True)
    args = ["synth", "--out", out, "--layers", "2", "--hidden", "64", "--experts", "4", "--top-k", "2", "--moe-inter",
            "32", "--inter", "64", "--heads", "2", "--kda-heads", "2", "--kda-dim", "16", "--kv-lora", "16",
            "--vocab", "4112", "--tokenizer", MODEL]
    rc, _, err = run(args)
    rc2, ids, err2 = run(["tokenize", out, PROMPT])
    want = run(["tokenize", MODEL, PROMPT])[1]
    check(rc == 0 and rc2 == 0 and ids == want, "synth --tokenizer: the synthetic container tokenizes", (err, err2))
    small = os.path.join(WORK, "synth-small.waste")
    shutil.rmtree(small, ignore_errors=True)
    rc, _, err = run(args[:1] + ["--out", small] + args[3:-4] + ["--vocab", "1000", "--tokenizer", MODEL])
    check(rc == 1 and "--vocab" in err, "synth --tokenizer with a too small --vocab: exit 1 naming --vocab", err)


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    if not os.path.exists(os.path.join(MODEL, "manifest.json")):
        print(f"SKIP: {MODEL} is missing")
        return 77
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and callable(fn):
            print(f"== {name}")
            fn()
    print(f"{len(failures)} failure(s)" + (": " + "; ".join(failures) if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
