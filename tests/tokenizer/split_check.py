#!/usr/bin/env python3
"""Checks sluice's hand-written pre-tokenizers against Python's `regex`.

For each pattern (Kimi, o200k_base, cl100k_base) the regex string is taken
from `tok_dump --mode regex` (which a unit test ties to TOKENIZER.md and the
difftest ties to tiktoken's pat_str), compiled with `regex` (VERSION1, for
the Kimi pattern's `&&` class intersection; simple case folding, as Rust's
regex uses), and its findall() pieces are compared with `tok_dump --mode
split` on every corpus record. Invalid UTF-8 is decoded with
errors="replace", the same U+FFFD substitution sluice applies.

It also compares the class table of every code point (\\p{L}, \\p{N}, the
two letter-run classes, \\s, \\p{Han}) with `regex`'s own Unicode tables.

Usage: split_check.py TOK_DUMP CORPUS    (exit 0 pass, 1 mismatch)
"""
import subprocess
import sys

import regex

PATTERNS = ["kimi", "o200k_base", "cl100k_base"]
CLASSES = [(1, r"\p{L}"), (2, r"\p{N}"), (4, r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"),
           (8, r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"), (16, r"\s"), (32, r"\p{Han}")]


def records(path):
    data = open(path, "rb").read()
    out, pos = [], 0
    while pos < len(data):
        nl = data.index(b"\n", pos)
        n = int(data[pos:nl])
        out.append(data[nl + 1:nl + 1 + n])
        pos = nl + 2 + n
    return out


def check_classes(tok_dump):
    rle = subprocess.run([tok_dump, "--mode", "classes"], check=True, capture_output=True, text=True).stdout
    ours = bytearray(0x110000)
    for line in rle.split("\n"):
        if line:
            lo, hi, bits = line.split()
            ours[int(lo, 16):int(hi, 16) + 1] = bytes([int(bits)]) * (int(hi, 16) - int(lo, 16) + 1)
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    text = "".join(map(chr, cps))
    theirs = bytearray(0x110000)
    for bit, pat in CLASSES:
        for m in regex.finditer(pat, text, flags=regex.V1):
            theirs[ord(m.group())] |= bit
    bad = [c for c in cps if ours[c] != theirs[c]]
    print(f"split_check: classes: {len(cps)} code points, {len(bad)} differ from regex {regex.__version__}")
    for c in bad[:10]:
        print(f"  U+{c:04X}: sluice {ours[c]:06b} regex {theirs[c]:06b}")
    return len(bad)


def main():
    tok_dump, corpus = sys.argv[1], sys.argv[2]
    texts = records(corpus)
    blob = open(corpus, "rb").read()
    failures = check_classes(tok_dump)
    for name in PATTERNS:
        pat = subprocess.run([tok_dump, "--mode", "regex", "--pattern", name], check=True, capture_output=True,
                             text=True).stdout.rstrip("\n")
        rx = regex.compile("(?-f)" + pat, flags=regex.V1)
        out = subprocess.run([tok_dump, "--mode", "split", "--records", "--pattern", name], input=blob, check=True,
                             capture_output=True).stdout.decode("ascii").split("\n")
        pieces = mismatches = 0
        for i, raw in enumerate(texts):
            want = [p.encode("utf-8").hex() for p in rx.findall(raw.decode("utf-8", "replace"))]
            got = out[i].split(" ") if out[i] else []
            pieces += len(want)
            if got != want:
                mismatches += 1
                if mismatches <= 5:
                    print(f"  {name} record {i}: {raw[:120]!r}")
                    print(f"    regex : {[bytes.fromhex(p).decode('utf-8', 'replace') for p in want][:30]}")
                    print(f"    sluice: {[bytes.fromhex(p).decode('utf-8', 'replace') for p in got][:30]}")
        print(f"split_check: {name}: {len(texts)} records, {pieces} pieces, {mismatches} mismatches")
        failures += mismatches
    print("split_check: PASS" if failures == 0 else "split_check: FAIL")
    sys.exit(0 if failures == 0 else 1)


if __name__ == "__main__":
    main()
