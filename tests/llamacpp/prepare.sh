#!/usr/bin/env bash
# Builds the llama.cpp logits driver (llamacpp_logits.cpp) into WORK, against
# the headers of the exact llama.cpp revision the npm prebuilt libllama was
# built from, and links it to that library. Idempotent: a driver newer than
# its source is kept. Exit 77 (SKIP) with the reason when a prerequisite is
# missing; any other failure is a failure.
#   prepare.sh WORK   ->  WORK/llamacpp_logits, WORK/llama-perplexity,
#                         WORK/bins (the library folder)
# llama-perplexity is llama.cpp's own tool, compiled from the bundle's
# tools/perplexity against the prebuilt libllama-common (its backends load
# from the library folder: run it there).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$1"
mkdir -p "$work"
# Tests of several cases prepare the same folder at once (ctest -j): one at a time.
if [ -z "${SLUICE_PREPARE_LOCKED:-}" ] && command -v flock >/dev/null; then
  SLUICE_PREPARE_LOCKED=1 exec flock "$work/.lock" bash "$0" "$@"
fi
bins="$here/node/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
skip() { echo "SKIP: $*"; exit 77; }
[ "$(uname -m)" = x86_64 ] || skip "the npm prebuilt llama.cpp is for linux-x64; this is $(uname -m)"
[ -f "$bins/libllama.v0.5.0.so" ] ||
  skip "@node-llama-cpp/linux-x64 is not installed (bash .ci/deps/llamacpp.sh installs it: npm ci in tests/llamacpp/node)"
command -v g++ >/dev/null || skip "no g++"
driver="$work/llamacpp_logits"
if [ -x "$driver" ] && [ "$driver" -nt "$here/llamacpp_logits.cpp" ] && [ -x "$work/llama-perplexity" ]; then
  ln -sfn "$bins" "$work/bins"
  exit 0
fi
# node-llama-cpp 3.22.1's tarball carries llama/gitRelease.bundle: llama.cpp
# v0.5.0 (the prebuilt's LLAMA_COMMIT 0ad4a86), pinned by npm's integrity
# (sha512-bltIipuWmc123H7tMIgDGKSsSrhmhlQYeVUC48XTjVW7XGJJiJJyCdlTMzQ/LiWoPkGDpcL4FviDpgw7qfTiDw==, here in hex).
want_sha512="6e5b488a9b9699cd76dc7eed30880318a4ac4ab866865418795502e3c5d38d55bb5c624988927209d95333343f2e25a83e4183a5c2f816f883a60c3ba9f4e20f"
hdr="$work/llama-headers"
if [ ! -f "$hdr/include/llama.h" ] || [ ! -f "$hdr/tools/perplexity/perplexity.cpp" ]; then
  command -v npm >/dev/null || skip "npm is not installed (the llama.cpp headers come from the node-llama-cpp package)"
  command -v git >/dev/null || skip "git is not installed (the llama.cpp source is a git bundle)"
  tmp="$(mktemp -d "$work/fetch.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack node-llama-cpp@3.22.1 --silent >/dev/null) ||
    skip "npm pack node-llama-cpp@3.22.1 failed (no registry?)"
  got_sha512="$(sha512sum "$tmp/node-llama-cpp-3.22.1.tgz" | cut -d' ' -f1)"
  if [ "$got_sha512" != "$want_sha512" ]; then
    echo "prepare.sh: node-llama-cpp-3.22.1.tgz has SHA-512 $got_sha512, not the pinned $want_sha512" >&2
    exit 1
  fi
  tar -xzf "$tmp/node-llama-cpp-3.22.1.tgz" -C "$tmp" package/llama/gitRelease.bundle
  git init -q "$tmp/src"
  git -C "$tmp/src" fetch -q "$tmp/package/llama/gitRelease.bundle" HEAD
  mkdir -p "$tmp/hdr"
  git -C "$tmp/src" archive FETCH_HEAD include ggml/include common tools/perplexity | tar -x -C "$tmp/hdr"
  rm -rf "$hdr"
  mv "$tmp/hdr" "$hdr"
fi
g++ -O2 -std=c++17 -Wall "$here/llamacpp_logits.cpp" -I"$hdr/include" -I"$hdr/ggml/include" -L"$bins" \
  -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -l:libggml-base.so -Wl,-rpath,"$bins" -o "$driver.tmp"
mv "$driver.tmp" "$driver"
g++ -O2 -std=c++17 -w "$hdr/tools/perplexity/perplexity.cpp" "$hdr/tools/perplexity/main.cpp" -I"$hdr/common" \
  -I"$hdr/include" -I"$hdr/ggml/include" -L"$bins" -l:libllama-common.so -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so \
  -l:libggml-base.so -Wl,-rpath,"$bins" -o "$work/llama-perplexity.tmp"
mv "$work/llama-perplexity.tmp" "$work/llama-perplexity"
ln -sfn "$bins" "$work/bins"
