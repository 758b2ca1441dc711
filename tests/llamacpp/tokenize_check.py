#!/usr/bin/python3
"""llama.cpp's tokenization of text against sluice's, on the tokenizer that
`sluice export-gguf` writes into the GGUF (gpt2 BPE, kimi-k2
pre-tokenizer, merges recomputed from the ranks): every id identical.

  tokenize_check.py --sluice BIN --work DIR [--driver-dir DIR]

Texts: models/kjv-heldout.txt (the held-out text perplexity is measured
on), the repository's README.md (markdown and code), and mixed scripts
(Han, which the Kimi pattern splits apart, emoji, Arabic, digit runs,
contractions, whitespace runs). Exit 77 (SKIP) with the reason when
llama.cpp is absent.
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from llamacpp_prep import prepare  # noqa: E402
ROOT = os.path.dirname(os.path.dirname(HERE))

MIXED = ("In the beginning 1234567 was 3.14159; they'll we've I'M.\n\n\n  \t  spaces   \n"
         "北京欢迎你，我们的测试句子。日本語のテキストも。한국어 문장.\n"
         "emoji 🙂👍🏽 and ZWJ 👨‍👩‍👧 families; Arabic مرحبا بالعالم; Cyrillic Привет мир.\n"
         "code: def f(x):\n    return x**2  # square\n<|im_end|> is plain text here.\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sluice", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--driver-dir")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    ddir = prepare(a.driver_dir or a.work)
    model = os.path.join(ROOT, "models", "sluice-mini")
    gguf = os.path.join(a.work, "sluice-mini-tok.gguf")
    subprocess.run([a.sluice, "export-gguf", model, gguf, "-q"], check=True, stdout=subprocess.DEVNULL)
    mixed = os.path.join(a.work, "mixed.txt")
    with open(mixed, "w", encoding="utf-8") as f:
        f.write(MIXED)
    failed = False
    for name in [os.path.join(ROOT, "models", "kjv-heldout.txt"), os.path.join(ROOT, "README.md"), mixed]:
        ll = subprocess.run([os.path.join(ddir, "llamacpp_logits"), gguf, "--bins", os.path.join(ddir, "bins"),
                             "--tokenize", name], capture_output=True, text=True, check=True).stdout.strip()
        sl = subprocess.run([a.sluice, "tokenize", model, "-f", name], capture_output=True, text=True,
                            check=True).stdout.split()
        ll = [int(x) for x in ll.split(",")] if ll else []
        sl = [int(x) for x in sl]
        first = next((i for i in range(min(len(ll), len(sl))) if ll[i] != sl[i]), None)
        ok = ll == sl
        failed |= not ok
        where = "" if ok else " first difference at token %s (llama.cpp %s, sluice %s)" % (
            first, ll[first:first + 5] if first is not None else ll[len(sl):len(sl) + 5],
            sl[first:first + 5] if first is not None else sl[len(ll):len(ll) + 5])
        print("%s: %d bytes, llama.cpp %d tokens, sluice %d tokens: %s%s" % (
            os.path.basename(name), os.path.getsize(name), len(ll), len(sl), "identical" if ok else "DIFFERENT", where))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
