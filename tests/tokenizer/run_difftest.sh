#!/usr/bin/env bash
# CTest driver for the differential test against real tiktoken (see
# node/difftest.mjs). Usage: run_difftest.sh TOK_DUMP WORKDIR
# Exit 77 (SKIP) with the reason when node, the npm packages or python3 are
# missing; .ci/deps/tokenizer.sh installs them.
set -u
here=$(cd "$(dirname "$0")" && pwd)
tok_dump=$1
work=$2
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP: node is not installed (.ci/deps/tokenizer.sh installs it)"
  exit 77
fi
for pkg in @dqbd/tiktoken js-tiktoken; do
  if [ ! -f "$here/node/node_modules/$pkg/package.json" ]; then
    echo "SKIP: npm package $pkg is missing: run 'npm ci' in tests/tokenizer/node"
    exit 77
  fi
done
if [ ! -x /usr/bin/python3 ]; then
  echo "SKIP: /usr/bin/python3 is missing (it generates the corpus)"
  exit 77
fi
mkdir -p "$work" || exit 1
/usr/bin/python3 "$here/gen_corpus.py" "$work/corpus-diff.bin" || exit 1
node "$here/node/difftest.mjs" "$tok_dump" "$work" "$work/corpus-diff.bin"
