#!/usr/bin/env bash
# CTest driver: 50 seeded constrained generations for each of the 20
# schemas on a random-weight model (1000 outputs), each validated by ajv.
# Usage: run_ajv.sh SCHEMA_GEN CONTAINER SCHEMA_DIR
# Exit 77 (SKIP) with the reason when node, ajv or the fixture is missing;
# .ci/deps/grammar.sh installs node and ajv.
set -u
here=$(cd "$(dirname "$0")" && pwd)
gen=$1 model=$2 schemas=$3
if ! command -v node >/dev/null 2>&1; then echo "SKIP: node is not installed (.ci/deps/grammar.sh installs it)"; exit 77; fi
if [ ! -f "$here/node/node_modules/ajv/package.json" ]; then
  echo "SKIP: npm package ajv is missing: run 'npm ci' in tests/grammar/node"; exit 77
fi
if [ ! -f "$model/tokenizer.model" ]; then echo "SKIP: fixture $model is missing"; exit 77; fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$gen" "$model" "$schemas" 50 "$out/outputs.jsonl" || { echo "schema_gen failed"; exit 1; }
node "$here/node/validate.mjs" "$schemas" "$out/outputs.jsonl"
