#!/usr/bin/env bash
# CTest driver for the node tests of `sluice serve`.
# Usage: run_node.sh SCRIPT SLUICE_BIN CONTAINER
# Exit 77 (SKIP) with the reason when node, the npm packages or the fixture
# are missing; .ci/deps/server.sh installs node and the packages.
set -u
here=$(cd "$(dirname "$0")" && pwd)
script=$1
export SLUICE_BIN=$2
export SLUICE_MODEL=$3
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP: node is not installed (.ci/deps/server.sh installs it)"
  exit 77
fi
if [ ! -f "$here/node/node_modules/openai/package.json" ]; then
  echo "SKIP: npm package openai is missing: run 'npm ci' in tests/server/node"
  exit 77
fi
if [ ! -f "$SLUICE_MODEL/tokenizer.model" ]; then
  echo "SKIP: fixture $SLUICE_MODEL (with tokenizer.model) is missing"
  exit 77
fi
if ! "$SLUICE_BIN" serve --help >/dev/null 2>&1; then
  echo "SKIP: $SLUICE_BIN has no 'serve' subcommand"
  exit 77
fi
cd "$here/node" || exit 1
exec node --test --test-concurrency=1 "$script"
