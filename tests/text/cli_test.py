#!/usr/bin/python3
"""CLI tests for sluice run, chat, tokenize and detokenize.

usage: cli_test.py SLUICE FIXTURES WORKDIR
Exits 0 on success, 1 on failure, 77 (skip) without fixtures.
"""
import os
import subprocess
import sys

SLUICE, FIXTURES, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
WARP = os.path.join(FIXTURES, "warp")
TOK = os.path.join(WARP, "kimi-linear-tok.waste")
CONV = os.path.join(WARP, "converted-default.waste")
NOTOK = os.path.join(WARP, "kimi-linear-tiny.waste")
COMMON = ["--threads", "2"]
failures = []


def run(args, stdin=b""):
    p = subprocess.run([SLUICE] + args, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
        if detail:
            print("     " + str(detail)[:2000])


def ids_lines(err):
    return [l for l in err.splitlines() if l.startswith("ids:")]


def test_run_seeded():
    for model in (TOK, CONV):
        name = os.path.basename(model)
        a = run(["run", model, "Tell me a story", "-n", "24", "--seed", "1", "--print-ids"] + COMMON)
        b = run(["run", model, "Tell me a story", "-n", "24", "--seed", "1", "--print-ids"] + COMMON)
        check(a[0] == 0 and b[0] == 0, f"run {name}: exit 0", a[2])
        check(a[1] == b[1] and ids_lines(a[2]) == ids_lines(b[2]) and ids_lines(a[2]),
              f"run {name} --seed 1 twice: identical text and ids", (a[1], b[1]))
        check("tok/s" in a[2] and "hits" in a[2] and "seed 1" in a[2], f"run {name}: stats line", a[2])
        raw = run(["run", model, "Once upon a time", "--raw", "-n", "8", "--temp", "0"] + COMMON)
        check(raw[0] == 0, f"run {name} --raw: exit 0", raw[2])


def test_run_greedy_and_stop():
    a = run(["run", TOK, "hello", "-n", "20", "--temp", "0", "--print-ids"] + COMMON)
    b = run(["run", TOK, "hello", "-n", "20", "--temp", "0", "--seed", "99"] + COMMON)
    check(a[0] == 0 and a[1] == b[1], "run --temp 0: seed does not matter", (a[1], b[1]))
    text = a[1].decode("utf-8", "replace")
    # Cut at a stop string taken from the middle of the greedy text.
    if len(text) >= 4:
        stop = text[len(text) // 2:len(text) // 2 + 2]
        c = run(["run", TOK, "hello", "-n", "20", "--temp", "0", "--stop", stop] + COMMON)
        want = text[:text.find(stop)]
        check(c[0] == 0 and c[1].decode("utf-8", "replace") == want and "stop string" in c[2],
              "run --stop cuts the text before the stop string", (stop, c[1], want))
    else:
        check(False, "run --temp 0 produced text to test --stop on", a)


def test_chat_save_load():
    state = os.path.join(WORK, "chat-state")
    for f in (state, state + ".json"):
        if os.path.exists(f):
            os.remove(f)
    args = ["chat", TOK, "-n", "12", "--seed", "5", "--print-ids"] + COMMON
    a = run(args, f"hello there\n/save {state}\nwhat next?\nand then?\n/quit\n".encode())
    check(a[0] == 0, "chat A: exit 0", a[2])
    check(os.path.exists(state) and os.path.exists(state + ".json"), "chat /save writes FILE and FILE.json")
    b = run(args, f"/load {state}\nwhat next?\nand then?\n".encode())
    check(b[0] == 0, "chat B (/load): exit 0", b[2])
    la, lb = ids_lines(a[2]), ids_lines(b[2])
    check(len(la) == 3 and len(lb) == 2 and la[1:] == lb,
          "chat: /load in a new process continues with bit-identical tokens", (la, lb))
    # Without the saved state, the same input gives a different conversation
    # (the history matters).
    c = run(args, b"what next?\n")
    check(c[0] == 0, "chat C: exit 0", c[2])
    d = run(args, b"hello\n/reset\nwhat next?\n")
    check(ids_lines(d[2])[1:] == ids_lines(c[2]), "chat /reset starts over", (ids_lines(d[2]), ids_lines(c[2])))
    e = run(args, f"/load {os.path.join(WORK, 'missing')}\n/bogus\nhi\n".encode())
    check(e[0] == 1 and "/load" in e[2] and "unknown command" in e[2] and len(ids_lines(e[2])) == 1,
          "chat: a failed /load and an unknown command are reported; the chat goes on", e[2])


def test_tokenize_roundtrip():
    text = "Hello, world! caf\u00e9 \u4e16\u754c \U0001F642 <|im_end|>"
    for model in (TOK, CONV):
        name = os.path.basename(model)
        t = run(["tokenize", model, text] + COMMON)
        check(t[0] == 0 and t[1].strip(), f"tokenize {name}: exit 0", t[2])
        d = run(["detokenize", model, t[1].decode().strip()] + COMMON)
        check(d[0] == 0 and d[1].decode("utf-8") == text, f"detokenize(tokenize(x)) == x on {name}", (d[1], text))
        s = run(["tokenize", model] + COMMON, stdin=text.encode())
        check(s[1] == t[1], f"tokenize {name}: stdin equals argument")
        d2 = run(["detokenize", model] + COMMON, stdin=t[1].replace(b" ", b","))
        check(d2[1].decode("utf-8") == text, f"detokenize {name}: comma-separated ids on stdin")
    m = run(["tokenize", CONV, "a<|im_end|>", "--markup"] + COMMON)
    c = run(["tokenize", CONV, "a<|im_end|>"] + COMMON)
    check(m[1].split()[-1] == b"498" and b"498" not in c[1].split(), "tokenize --markup resolves specials only then",
          (m[1], c[1]))


def test_errors():
    # Usage errors exit 2.
    for args in (["run"], ["run", CONV], ["run", CONV, "x", "--temp", "-1"], ["run", CONV, "x", "--top-p", "2"],
                 ["run", CONV, "x", "--min-p", "1.5"], ["run", CONV, "x", "-n", "abc"],
                 ["run", CONV, "x", "--no-such-flag"], ["chat"], ["tokenize"], ["detokenize", CONV, "12", "abc"],
                 ["detokenize", CONV, "-5"], ["chat", CONV, "--repeat-penalty", "0"]):
        r = run(args + COMMON)
        check(r[0] == 2, "exit 2: sluice " + " ".join(a if a not in (CONV,) else "MODEL" for a in args), r[2][-300:])
    # A container without a tokenizer: exit 1, the missing file named.
    for args in (["tokenize", NOTOK, "hi"], ["run", NOTOK, "hi"], ["detokenize", NOTOK, "1"]):
        r = run(args + COMMON)
        check(r[0] == 1 and "tokenizer.model" in r[2], "no tokenizer: sluice " + args[0] + " exits 1 naming it",
              r[2][-300:])
    r = run(["detokenize", CONV, "100000"] + COMMON)
    check(r[0] == 1, "detokenize of an unknown id exits 1", r[2][-300:])
    r = run(["run", os.path.join(WORK, "no-such-model"), "hi"] + COMMON)
    check(r[0] == 1, "run on a missing container exits 1", r[2][-300:])


def main():
    if not os.path.isdir(WARP):
        print(f"SKIP: no fixtures at {WARP}")
        return 77
    os.makedirs(WORK, exist_ok=True)
    for t in (test_run_seeded, test_run_greedy_and_stop, test_chat_save_load, test_tokenize_roundtrip, test_errors):
        t()
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
