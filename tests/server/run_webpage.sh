#!/usr/bin/env bash
# CTest driver for the chat page test in headless Chromium.
# Usage: run_webpage.sh SLUICE_BIN CONTAINER SCREENSHOT_DIR
# Exit 77 (SKIP) with the reason when node, playwright-core, chromium or the
# fixture is missing (.ci/deps/webpage.sh installs chromium). The screenshot
# is kept in SCREENSHOT_DIR (the build's Testing/artifacts).
set -u
here=$(cd "$(dirname "$0")" && pwd)
export SLUICE_BIN=$1 SLUICE_MODEL=$2
shots=$3
if ! command -v node >/dev/null 2>&1; then echo "SKIP: node is not installed"; exit 77; fi
if [ ! -f "$here/node/node_modules/playwright-core/package.json" ]; then
  echo "SKIP: npm package playwright-core is missing: run 'npm ci' in tests/server/node"; exit 77
fi
chrome=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$chrome" ]; then echo "SKIP: chromium is not installed (.ci/deps/webpage.sh installs it)"; exit 77; fi
if [ ! -f "$SLUICE_MODEL/tokenizer.model" ]; then echo "SKIP: fixture $SLUICE_MODEL is missing"; exit 77; fi
mkdir -p "$shots"
cd "$here/node" || exit 1
CHROMIUM=$chrome exec node webpage.mjs "$shots/webpage.png"
