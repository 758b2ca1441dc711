#!/usr/bin/env python3
"""The README's first command and what it prints must not drift apart (issue 27).

README.md quotes the demo's model command (after <!-- demo-command -->) and its
output (after <!-- demo-output -->); scripts/demo.sh runs that command. This
checks, in order:
  1. scripts/demo.sh runs exactly the README's command (same arguments);
  2. the output (the command run here with --binary, or a demo log with --log)
     has the README's lines: the start-up lines and the statistics line in
     shape (numbers, and the budget's machine-dependent reason, may differ),
     the sampled text exactly (a seed, a model and bit-identical kernels fix it).

  readme_demo.py ROOT --binary build/sluice     run the command here and compare
  readme_demo.py ROOT --log demo.log            compare a log of `bash scripts/demo.sh`

Exit 0: they agree; 1: they differ (a diff is printed); 2: bad usage or a
README without the markers.
"""
import argparse
import os
import re
import shlex
import subprocess
import sys


def fail(msg, code=1):
    print("readme_demo: " + msg, file=sys.stderr)
    sys.exit(code)


def indented_block(lines, marker, what):
    """The 4-space-indented block that follows the marker line (blank lines
    before it skipped), with the indentation removed."""
    try:
        i = next(k for k, l in enumerate(lines) if l.strip() == marker)
    except StopIteration:
        fail(f"README.md has no '{marker}' line before the demo's {what}", 2)
    i += 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    block = []
    while i < len(lines) and lines[i].startswith("    "):
        block.append(lines[i][4:])
        i += 1
    if not block:
        fail(f"README.md: no indented block after '{marker}'", 2)
    return block


def command_words(text):
    return shlex.split(text.replace("\\\n", " "))


def demo_sh_command(path):
    src = open(path, encoding="utf-8").read().splitlines()
    for k, l in enumerate(src):
        if l.startswith("./build/sluice "):
            cmd = l
            while cmd.endswith("\\") and k + 1 < len(src):
                k += 1
                cmd = cmd[:-1] + " " + src[k].strip()
            return shlex.split(cmd)
    fail(f"{path}: no line starting with './build/sluice '", 2)


NUM = re.compile(r"[0-9]+(\.[0-9]+)?")
BUDGET = re.compile(r"^sluice: budget [0-9.]+ GiB = .+; expert cache [0-9.]+ GiB$")


def shape(line):
    return NUM.sub("#", line)


def compare(expected, actual):
    """Lines: budget (shape of its frame), start-up lines and the statistics
    line (numbers as #), text lines exact."""
    problems = []
    if len(expected) != len(actual):
        problems.append(f"{len(expected)} lines expected, {len(actual)} printed")
    for k, (e, a) in enumerate(zip(expected, actual)):
        if e.startswith("sluice: budget "):
            ok = bool(BUDGET.match(e)) and bool(BUDGET.match(a))
            kind = "budget line (shape)"
        elif e.startswith("sluice"):
            ok = shape(e) == shape(a)
            kind = "start-up or statistics line (numbers aside)"
        else:
            ok = e == a
            kind = "generated text (exact)"
        if not ok:
            problems.append(f"line {k + 1}, {kind}:\n  README: {e}\n  output: {a}")
    return problems


def output_lines(text):
    """From the last budget line to the statistics line: the model's part of a
    demo log (the lines before it are apt's and the build's)."""
    lines = text.splitlines()
    starts = [k for k, l in enumerate(lines) if l.startswith("sluice: budget ")]
    if not starts:
        fail("the output has no 'sluice: budget' line: the model never started\n" + "\n".join(lines[-20:]))
    s = starts[-1]
    ends = [k for k in range(s, len(lines)) if lines[k].startswith("sluice run: ")]
    if not ends:
        fail("the output has no 'sluice run:' statistics line after the start-up:\n" + "\n".join(lines[s:]))
    return lines[s:ends[0] + 1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--binary")
    g.add_argument("--log")
    a = ap.parse_args()
    readme = open(os.path.join(a.root, "README.md"), encoding="utf-8").read().splitlines()
    cmd_block = indented_block(readme, "<!-- demo-command -->", "command")
    expected = indented_block(readme, "<!-- demo-output -->", "output")
    words = command_words("\n".join(cmd_block))
    demo = demo_sh_command(os.path.join(a.root, "scripts", "demo.sh"))
    if words != demo:
        fail(f"scripts/demo.sh runs\n  {shlex.join(demo)}\nbut README.md quotes\n  {shlex.join(words)}")
    if a.log:
        text = open(a.log, encoding="utf-8", errors="replace").read()
        if "\x1b[" in text:
            text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
    else:
        if not os.access(a.binary, os.X_OK):
            fail(f"{a.binary} is not an executable", 2)
        run = [os.path.abspath(a.binary)] + words[1:]
        p = subprocess.run(run, cwd=a.root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        text = p.stdout.decode("utf-8", "replace")
        if p.returncode != 0:
            fail(f"the demo command exited {p.returncode}:\n{text}")
    actual = output_lines(text)
    problems = compare(expected, actual)
    if problems:
        fail("README.md's quoted demo output no longer matches what the command prints:\n" + "\n".join(problems)
             + "\n--- printed ---\n" + "\n".join(actual))
    print(f"readme_demo: {len(expected)} lines agree (start-up, {sum(1 for l in expected if not l.startswith('sluice'))}"
          f" text line(s) exact, statistics line in shape); scripts/demo.sh runs the README's command")


if __name__ == "__main__":
    main()
