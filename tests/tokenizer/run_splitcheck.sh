#!/usr/bin/env bash
# CTest driver for split_check.py: sluice's pre-tokenizers (Kimi, o200k_base,
# cl100k_base) and Unicode classes against Python's `regex` module.
# Usage: run_splitcheck.sh TOK_DUMP WORKDIR. Exit 77 (SKIP) with the reason
# when python3-regex is missing; .ci/deps/tokenizer.sh installs it.
set -u
here=$(cd "$(dirname "$0")" && pwd)
tok_dump=$1
work=$2
if ! /usr/bin/python3 -c "import regex" >/dev/null 2>&1; then
  echo "SKIP: /usr/bin/python3 with the regex module (Debian python3-regex) is missing"
  exit 77
fi
mkdir -p "$work" || exit 1
/usr/bin/python3 "$here/gen_corpus.py" "$work/corpus-split.bin" || exit 1
/usr/bin/python3 "$here/split_check.py" "$tok_dump" "$work/corpus-split.bin"
