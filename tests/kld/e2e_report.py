#!/usr/bin/python3
"""End-to-end KLD run through the sluice CLI (issue 7, "Must show").

usage: e2e_report.py SLUICE FIXTURES WORKDIR

Builds a suite from local text with the tokenizer of kimi-linear-tok.waste,
captures a reference with converted-default.waste, compares candidates made
from the same weights at other widths (converted-trunk3 and converted-vq2r
captured to files, converted-vq4p and converted-default itself streamed with
--model), prints the ranking with CIs and renders the report.
Exits 0 on success, 1 on failure, 77 (skip) without the fixtures.
WORKDIR is recreated, and removed at the end unless SLUICE_KEEP_TMP=1.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time

SLUICE, FIXTURES, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
WARP = os.path.join(FIXTURES, "warp")
TOK = os.path.join(WARP, "kimi-linear-tok.waste")
NAMES = ["converted-default", "converted-trunk3", "converted-vq2r", "converted-vq4p"]
MODELS = {n: os.path.join(WARP, n + ".waste") for n in NAMES}
CONTEXT = 256
failures = []


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
        if detail:
            print("     " + str(detail)[:3000])
    return cond


def run(args, what, expect=0):
    t = time.time()
    p = subprocess.run([SLUICE] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    out, err = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    check(p.returncode == expect, f"{what}: exit {expect} (got {p.returncode}, {time.time() - t:.2f} s)", err or out)
    return p.returncode, out, err


# ---- the local corpus: three domains of hand-written text -----------------

PROSE = [
    "The river had been low all summer, and by September the old ford below the mill was passable on foot. "
    "Children crossed it on their way to school, balancing on the flat stones that the spring floods usually hid.",
    "Maria kept a notebook of the birds that came to the feeder: sparrows in the morning, a pair of jays at noon, "
    "and once, in the grey light before a storm, a heron that stood on the fence for an hour and then left without a sound.",
    "Nobody in the village remembered who had planted the chestnut trees along the road. They were older than the "
    "church, people said, older than the road itself, which had been laid out to follow them.",
    "When the power failed, the town discovered how many of its habits depended on a humming refrigerator and a "
    "lit screen. Neighbours who had not spoken in years shared candles, soup, and opinions about the weather.",
    "The lighthouse keeper's log for 1911 records forty-one ships, three fogs, one wedding and a whale that "
    "followed the supply boat into the harbour and refused, for two days, to leave.",
    "Rain arrived in the afternoon, first as a smell of wet dust, then as a sound on the tin roof, and finally as "
    "a curtain that hid the hills and turned the yard into a shallow, muddy lake.",
    "Her grandfather repaired clocks. His workshop was a single room with a window facing north, because, he said, "
    "northern light does not lie about the colour of brass.",
    "By the third week of the expedition the maps were wrong in small ways that added up: a stream where none was "
    "drawn, a ridge a mile east of its printed line, a lake that had become a meadow.",
]

CODE = [
    "def gcd(a, b):\n    \"\"\"Greatest common divisor by Euclid's algorithm.\"\"\"\n    while b:\n        a, b = b, a % b\n"
    "    return abs(a)\n\n\nassert gcd(12, 18) == 6\nassert gcd(7, 5) == 1\n",
    "def chunks(xs, n):\n    \"\"\"Yield successive n-sized pieces of xs.\"\"\"\n    for i in range(0, len(xs), n):\n"
    "        yield xs[i:i + n]\n\n\nprint(list(chunks([1, 2, 3, 4, 5], 2)))\n",
    "static int clamp(int v, int lo, int hi) {\n    if (v < lo) return lo;\n    if (v > hi) return hi;\n    return v;\n}\n\n"
    "int main(void) {\n    printf(\"%d\\n\", clamp(42, 0, 10));\n    return 0;\n}\n",
    "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, x):\n        self.items.append(x)\n\n"
    "    def pop(self):\n        if not self.items:\n            raise IndexError(\"pop from empty stack\")\n"
    "        return self.items.pop()\n",
    "def word_counts(text):\n    counts = {}\n    for word in text.lower().split():\n        word = word.strip('.,;:!?')\n"
    "        counts[word] = counts.get(word, 0) + 1\n    return sorted(counts.items(), key=lambda kv: -kv[1])\n",
    "fn mean(xs: &[f64]) -> Option<f64> {\n    if xs.is_empty() {\n        return None;\n    }\n"
    "    Some(xs.iter().sum::<f64>() / xs.len() as f64)\n}\n",
    "SELECT customer_id, COUNT(*) AS orders, SUM(total) AS spent\nFROM orders\nWHERE created_at >= '2024-01-01'\n"
    "GROUP BY customer_id\nHAVING COUNT(*) > 3\nORDER BY spent DESC;\n",
]

INSTRUCTIONS = [
    ("open_qa", "Why is the sky blue?", "",
     "Sunlight is scattered by the molecules in the air, and shorter wavelengths scatter much more than longer ones, "
     "so blue light reaches our eyes from every direction of the sky."),
    ("summarization", "Summarize the paragraph in one sentence.",
     "The committee met on Tuesday to review the budget. After two hours of discussion it approved the proposal for "
     "new street lights but postponed the decision on the park renovation until spring.",
     "The committee approved new street lights and postponed the park renovation."),
    ("brainstorming", "Give three ideas for a rainy weekend at home.", "",
     "Bake bread from scratch, start a jigsaw puzzle with the whole family, or sort old photos into an album."),
    ("classification", "Is a tomato a fruit or a vegetable?", "",
     "Botanically a tomato is a fruit, because it develops from the flower and contains seeds; in cooking it is "
     "usually treated as a vegetable."),
    ("closed_qa", "How many legs does the animal in the text have?",
     "The spider waited at the centre of its web, all eight legs resting on the silk threads.",
     "The spider has eight legs."),
    ("creative_writing", "Write a two-line poem about the sea.", "",
     "Grey water folds the light away,\nand gives it back at break of day."),
    ("information_extraction", "List the cities mentioned.",
     "We flew from Lisbon to Oslo, took the night train to Stockholm and ended the trip in Helsinki.",
     "Lisbon, Oslo, Stockholm, Helsinki."),
]


def corpus():
    prose = "\n\n".join(PROSE[i % len(PROSE)] for i in range(24))
    code = "\n\n\n".join("# task %d\n%s" % (i, CODE[i % len(CODE)]) for i in range(28))
    rows = []
    for i in range(24):
        cat, ins, ctx, resp = INSTRUCTIONS[i % len(INSTRUCTIONS)]
        parts = ["### Category\n" + cat, "### Instruction\n" + ins]
        if ctx:
            parts.append("### Context\n" + ctx)
        parts.append("### Response\n" + resp)
        rows.append("\n\n".join(parts))
    return {"prose": prose, "code": code, "instruction": "\n\n\n".join(rows)}


def main():
    missing = [p for p in [TOK] + list(MODELS.values()) if not os.path.isdir(p)]
    if missing:
        print("SKIP: fixtures not present: " + ", ".join(missing))
        return 77
    if os.path.exists(WORK):
        shutil.rmtree(WORK)
    os.makedirs(WORK)
    W = lambda *p: os.path.join(WORK, *p)
    t0 = time.time()

    # 1. Suite from local text with kimi-linear-tok's tokenizer.
    sources = []
    windows = {"prose": 8, "code": 6, "instruction": 6}
    for dom, text in corpus().items():
        with open(W(dom + ".txt"), "w") as f:
            f.write(text)
        sources += ["--source", "%s=%s:%d" % (dom, W(dom + ".txt"), windows[dom])]
    print("corpus: " + ", ".join("%s %d bytes" % (d, os.path.getsize(W(d + ".txt"))) for d in windows))
    rc, out, _ = run(["kld", "suite", "make", "--tokenizer", TOK, "--out", W("suite"), "--context", str(CONTEXT)] + sources,
                     "suite make")
    if rc:
        return 1
    print(out.strip())
    run(["kld", "suite", "verify", W("suite"), "--vocab", "316"], "suite verify: ids < 316 (the tokenizer's)")
    n_windows = sum(windows.values())
    positions = n_windows * (CONTEXT - 1)

    # 2. Reference: converted-default captured to files.
    rc, out, err = run(["kld", "capture", "--model", MODELS["converted-default"], "--suite", W("suite"), "--out", W("ref"),
                        "--progress"], "capture reference (converted-default)")
    check("progress: capture [" in err and "%d/%d windows" % (n_windows, n_windows) in err and "written" in err,
          "capture --progress: progress lines on stderr", err)
    check("progress" not in out, "capture --progress: nothing on stdout", out)

    # 3. Candidates: two captured to files, two streamed with --model.
    for n in ["converted-trunk3", "converted-vq2r"]:
        run(["kld", "capture", "--model", MODELS[n], "--suite", W("suite"), "--out", W(n)], "capture " + n)
    receipts, sidecars = [], []
    for n in NAMES:
        operand = ["--candidate", W(n)] if os.path.isdir(W(n)) else ["--model", MODELS[n]]
        how = "files" if operand[0] == "--candidate" else "--model streaming"
        args = ["kld", "compare", "--suite", W("suite"), "--reference", W("ref")] + operand + \
               ["--json", W(n + ".json"), "--tokens", W(n + ".safetensors")]
        rc, out, err = run(args, "compare %s (%s)" % (n, how))
        if rc:
            return 1
        receipts.append(W(n + ".json"))
        sidecars.append(W(n + ".safetensors"))
        if n == "converted-vq2r":  # the progress display changes nothing but stderr
            rc2, out2, err2 = run(args[:-4] + ["--json", W(n + "-p.json"), "--progress"], "compare %s --progress" % n)
            check("progress: compare [" in err2 and "done in" in err2, "compare --progress: lines on stderr", err2)
            check(out2 == out, "compare --progress: stdout byte-identical", (out, out2))
            a, b = json.load(open(W(n + ".json"))), json.load(open(W(n + "-p.json")))
            a["sluice"].pop("timing"), b["sluice"].pop("timing")
            check(a == b, "compare --progress: receipt identical apart from its timing block")

    # 4. The reference's own container, streamed: KL exactly 0.
    r = json.load(open(W("converted-default.json")))
    kl = r["kl_reference_to_candidate"]
    check(r["positions"] == positions, "default: %d positions scored" % positions, r["positions"])
    check(kl["mean"] == 0.0 and kl["max"] == 0.0 and r["top1_agreement"] == 1.0,
          "converted-default streamed against its own capture: KL exactly 0, top-1 100%", kl)
    b = r["kl_window_cluster_bootstrap"]
    check(b["ci95_low"] == 0.0 and b["ci95_high"] == 0.0, "converted-default: CI [0, 0]", b)
    for n in NAMES[1:]:
        m = json.load(open(W(n + ".json")))["kl_reference_to_candidate"]["mean"]
        check(m > 0, "%s: mean KL > 0 (other quantization of the same weights)" % n, m)

    # 5. The report.
    rc, out, err = run(["kld", "report", "--receipts"] + receipts + ["--tokens"] + sidecars +
                       ["--out", W("report.html"), "--json", W("report.json"), "--title", "converted-* against converted-default"],
                       "kld report")
    if rc:
        return 1
    print(out, end="")
    rows = {}
    for line in out.splitlines():
        m = re.match(r"\s+(\d+)\s+(converted-\S+)\s+(\S+)\s+\[(\S+), (\S+)\]\s+(\S+)%", line)
        if m:
            rows[m.group(2)] = (int(m.group(1)), float(m.group(3)), float(m.group(4)), float(m.group(5)))
    check(sorted(rows) == sorted(NAMES), "stdout: every candidate ranked with mean and CI", out)
    check(rows.get("converted-default", (0,))[0] == 1, "stdout: converted-default ranked first", rows)
    check("per-domain mean KL" in out and "report written to" in out, "stdout: per-domain means and the output path")
    ranks = sorted(rows.values())
    check(all(ranks[i][1] <= ranks[i + 1][1] for i in range(len(ranks) - 1)), "stdout: ranked by mean KL", ranks)
    html = open(W("report.html")).read() if os.path.exists(W("report.html")) else ""
    check(html.startswith("<!DOCTYPE html>") and "<svg" in html, "report.html exists with inline SVG")
    check('id="kl-histogram"' in html and 'id="ranking-table"' in html and 'id="domain-table"' in html,
          "report.html: ranking, per-domain and histogram tables")
    check(all(n in html for n in NAMES), "report.html: every candidate named")
    check(not re.search(r"<script|https?://|\bsrc=|\bhref=|url\(", html), "report.html: self-contained (no scripts, no links)")
    total = re.search(r'<tr><td class="l">total</td><td></td><td></td>((?:<td>\d+</td>)+)</tr>', html)
    check(total and re.findall(r"\d+", total.group(1)) == [str(positions)] * 4,
          "report.html: histogram table counts every token of every candidate", total and total.group(0))
    rep = json.load(open(W("report.json")))
    for c in rep["ranking"]:
        h = c["histogram"]
        check(sum(h["counts"]) + h["below"] + h["above"] + h["inf"] == positions, "%s: histogram sums to %d" % (c["label"], positions))
    d0 = [c for c in rep["ranking"] if c["label"] == "converted-default"][0]
    check(d0["histogram"]["zeros"] == positions, "converted-default: every token in the KL = 0 bin")

    # 6. Bad input: named, its own exit code, nothing written.
    rc, _, err = run(["kld", "report", "--receipts", receipts[1], W("nope.json"), "--out", W("bad.html")],
                     "report with a missing receipt", expect=5)
    check("nope.json" in err and not os.path.exists(W("bad.html")), "missing receipt: named, no output", err)
    rc, _, err = run(["kld", "report", "--receipts", receipts[1], receipts[2], "--tokens", sidecars[2], sidecars[1],
                      "--out", W("bad.html")], "report with swapped sidecars", expect=3)
    check("a sidecar of another run" in err and not os.path.exists(W("bad.html")), "swapped sidecars: named, no output", err)

    # 7. The measured numbers.
    print("\nmeasured (%d windows x %d tokens, %d positions; KL(ref || cand) in nats, window-clustered bootstrap 95%% CI):"
          % (n_windows, CONTEXT, positions))
    for c in rep["ranking"]:
        print("  %d. %-18s mean %.6g  CI [%.6g, %.6g]  top-1 %.2f%%  " % (
            c["rank"], c["label"], c["kl_mean"], c["kl_ci95_low"], c["kl_ci95_high"], 100 * c["top1_agreement"]) +
            "  ".join("%s %.4g [%.4g, %.4g]" % (d, v["mean"], v["ci95_low"], v["ci95_high"]) for d, v in sorted(c["domains"].items())))
    print("report: %s  (%.1f s in all)" % (W("report.html"), time.time() - t0))
    if failures:
        print("%d FAILED: %s" % (len(failures), "; ".join(failures)))
        return 1
    if not os.environ.get("SLUICE_KEEP_TMP"):
        shutil.rmtree(WORK, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
