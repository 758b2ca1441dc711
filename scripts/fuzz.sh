#!/usr/bin/env bash
# Coverage-guided fuzzing of the untrusted-input parsers with Debian's clang
# and libFuzzer, under ASan and UBSan (issue 16).
#   scripts/fuzz.sh [SECONDS_PER_HARNESS]   (default 30)
# Each harness is built from the few sources it needs (no CMake build), its
# corpus seeded from ../shared/fixtures when present and kept in
# build-fuzz/corpus-NAME. Exit 1 on any crash, leak or UB report, 77 (skip)
# without clang's libFuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-30}
CXX=${FUZZ_CXX:-clang++}
OUT=build-fuzz
if ! command -v "$CXX" >/dev/null; then echo "SKIP: $CXX not installed (apt-get install clang)"; exit 77; fi
mkdir -p "$OUT"
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long){return 0;}' > "$OUT/probe.cpp"
if ! "$CXX" -fsanitize=fuzzer "$OUT/probe.cpp" -o "$OUT/probe" 2>/dev/null; then
  echo "SKIP: $CXX has no libFuzzer (Debian: apt-get install clang libclang-rt-dev or clang-14)"; exit 77
fi
FLAGS=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Isrc -Iinclude)

build() {  # name sources... (rebuilt only when a source is newer)
  local name=$1; shift
  local newer=0
  for s in "$@"; do [ "$s" -nt "$OUT/$name" ] && newer=1; done
  [ $newer = 1 ] || [ ! -x "$OUT/$name" ] || return 0
  "$CXX" "${FLAGS[@]}" "$@" -o "$OUT/$name" -lpthread
}
build fuzz_manifest tests/fuzz/fuzz_manifest.cpp src/format/manifest.cpp src/runtime/memory_plan.cpp src/quant/qtensor.cpp
build fuzz_request tests/fuzz/fuzz_request.cpp src/server/request.cpp src/server/chat_request.cpp src/api/schema_check.cpp \
  src/server/xtml_render.cpp src/server/pyjson.cpp src/grammar/json_schema.cpp src/grammar/grammar.cpp
build fuzz_hotlist tests/fuzz/fuzz_hotlist.cpp src/runtime/hotlist.cpp src/format/file.cpp src/format/io_fault.cpp \
  src/format/platform_io.cpp
HARNESSES="fuzz_manifest fuzz_request fuzz_hotlist"

seed_manifest() {
  local d="$OUT/corpus-fuzz_manifest"; mkdir -p "$d"
  for f in ../shared/fixtures/warp/*.waste/manifest.json tests/fuzz/seeds/manifest/*.json; do
    [ -f "$f" ] && cp -f "$f" "$d/$(echo "$f" | md5sum | cut -c1-12).json"
  done
  true
}
seed_manifest
mkdir -p "$OUT/corpus-fuzz_request" "$OUT/corpus-fuzz_hotlist"
cp -f tests/fuzz/seeds/request/* "$OUT/corpus-fuzz_request/" 2>/dev/null || true
cp -f tests/fuzz/seeds/hotlist/* "$OUT/corpus-fuzz_hotlist/" 2>/dev/null || true

rc=0
for h in ${ONLY:-$HARNESSES}; do
  echo "== $h: ${SECS}s"
  if ! ASAN_OPTIONS=detect_leaks=1 "$OUT/$h" -max_total_time="$SECS" -max_len=262144 -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 "$OUT/corpus-$h" 2>"$OUT/$h.log"; then
    echo "FAIL: $h (see $OUT/$h.log and $OUT/crash-*)"; tail -30 "$OUT/$h.log"; rc=1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$OUT/$h.log" | sed "s/^/  /"
done
exit $rc
