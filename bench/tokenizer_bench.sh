#!/usr/bin/env bash
# Tokenizer throughput, sluice against tiktoken (@dqbd/tiktoken, WASM, and
# js-tiktoken, pure JavaScript), o200k_base and cl100k_base, on an
# English-heavy corpus and the mixed-script corpus of the differential test,
# in one run. Prints MB/s and the ratios; results go to docs/PERF.md.
#
# Usage: bench/tokenizer_bench.sh [BUILD_DIR [REPS]]
#   BUILD_DIR: a build with -DSLUICE_BUILD_BENCH=ON (default: build); its
#   bench/bench_tokenizer must be built. REPS: interleaved timing rounds (default 5).
# Needs node and the npm packages of tests/tokenizer/node (npm ci there, or
# .ci/deps/tokenizer.sh), and /usr/bin/python3 for the corpora.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
reps=${2:-5}
bin=$build/bench/bench_tokenizer
node_dir=$root/tests/tokenizer/node
[ -x "$bin" ] || { echo "tokenizer_bench: $bin is missing (cmake --build $build --target bench_tokenizer)"; exit 2; }
command -v node >/dev/null || { echo "tokenizer_bench: node is not installed"; exit 2; }
for pkg in @dqbd/tiktoken js-tiktoken; do
  [ -f "$node_dir/node_modules/$pkg/package.json" ] ||
    { echo "tokenizer_bench: npm package $pkg is missing: run 'npm ci' in tests/tokenizer/node"; exit 2; }
done
work=$build/bench/tokenizer
mkdir -p "$work"
/usr/bin/python3 "$root/tests/tokenizer/gen_corpus.py" "$work/english.bin" --profile english
/usr/bin/python3 "$root/tests/tokenizer/gen_corpus.py" "$work/mixed.bin"
echo "commit $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- src/tokenizer || echo ' + uncommitted src/tokenizer changes')"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores; uptime:$(uptime | sed 's/.*up/ up/')"
node "$root/bench/tokenizer_bench.mjs" "$bin" "$work" "$node_dir" "$reps" \
  "english=$work/english.bin" "mixed=$work/mixed.bin"
