#!/usr/bin/env bash
# Coverage-guided fuzzing of the untrusted-input parsers with Debian's clang
# and libFuzzer, under ASan and UBSan (issue 16).
#   scripts/fuzz.sh [SECONDS_PER_HARNESS]   (default 30)
#   ONLY="fuzz_kld fuzz_suite" scripts/fuzz.sh 120   (a subset)
#   RUNS=1000000 ONLY=fuzz_container scripts/fuzz.sh 86400   (a run of N inputs)
# The size parsers run with tests/fuzz/extremes.dict (values at and past the
# bounds, so products overflow), fuzz_container also puts special files (a
# FIFO, a directory, symlinks to a device or a FIFO) in place of container
# files (issue 32).
# Each harness links the few sources it needs (no CMake build). Objects are
# compiled once into build-fuzz/obj and shared between harnesses, through a
# generated Makefile (make -j$FUZZ_JOBS, default 2), so adding a harness costs
# only its own sources. Corpora are seeded from ../shared/fixtures when
# present and from tests/fuzz/seeds, and kept in build-fuzz/corpus-NAME.
# Exit 1 on any crash, leak or UB report, 77 (skip) without clang's libFuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-30}
CXX=${FUZZ_CXX:-clang++}
OUT=${FUZZ_OUT:-build-fuzz}
if ! command -v "$CXX" >/dev/null; then echo "SKIP: $CXX not installed (apt-get install clang)"; exit 77; fi
if ! command -v make >/dev/null; then echo "SKIP: make not installed"; exit 77; fi
mkdir -p "$OUT"
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long){return 0;}' > "$OUT/probe.cpp"
if ! "$CXX" -fsanitize=fuzzer "$OUT/probe.cpp" -o "$OUT/probe" 2>/dev/null; then
  echo "SKIP: $CXX has no libFuzzer (Debian: apt-get install clang libclang-rt-dev or clang-14)"; exit 77
fi

# The engine fuzz_session opens: the model's arithmetic, kernels, store and
# tower are trusted code fed by the parsers above, so they are built without
# coverage (NOCOV below): coverage is spent on the state-file parser.
ENGINE="src/model/engine.cpp src/model/weights.cpp src/model/images.cpp src/model/kda.cpp src/model/mla.cpp
  src/model/ffn.cpp src/runtime/thread_pool.cpp src/runtime/expert_source.cpp src/runtime/expert_store.cpp
  src/runtime/memory_plan.cpp src/runtime/hotlist.cpp src/runtime/cache_policy.cpp src/runtime/cache_replay.cpp
  src/runtime/route_trace.cpp src/runtime/read_queue.cpp src/common/cpu_list.cpp src/common/units.cpp src/runtime/mem_status.cpp
  src/runtime/pressure_watch.cpp src/runtime/disk_probe.cpp src/runtime/process_footprint.cpp src/model/checkpoints.cpp src/model/prefill.cpp src/model/saved_session.cpp
  src/vision/config.cpp src/vision/image.cpp src/vision/tower.cpp src/vision/stb_impl.cpp src/format/crc32.cpp src/format/file.cpp
  src/format/platform_io.cpp src/common/checked_file.cpp src/format/io_fault.cpp src/format/manifest.cpp src/format/container.cpp
  src/format/expert_record.cpp src/common/sha256.cpp src/common/sha256_ni.cpp src/format/file_sha256.cpp src/quant/qtensor.cpp src/quant/dispatch.cpp
  src/quant/cpu_features.cpp src/quant/kernels_scalar.cpp src/quant/kernels_nosimd.cpp"
case "$(uname -m)" in
  x86_64) ENGINE+=" src/quant/kernels_avx2.cpp src/quant/kernels_avx512.cpp" ;;
  aarch64) ENGINE+=" src/quant/kernels_neon.cpp" ;;
esac
NOCOV="src/model/engine.cpp src/model/weights.cpp src/model/images.cpp src/model/kda.cpp src/model/mla.cpp
  src/model/ffn.cpp src/runtime/thread_pool.cpp src/runtime/expert_source.cpp src/runtime/expert_store.cpp
  src/runtime/cache_policy.cpp src/runtime/cache_replay.cpp src/runtime/route_trace.cpp src/runtime/read_queue.cpp
  src/common/cpu_list.cpp src/common/units.cpp src/runtime/mem_status.cpp src/runtime/pressure_watch.cpp src/runtime/disk_probe.cpp
  src/runtime/process_footprint.cpp src/model/checkpoints.cpp src/model/prefill.cpp src/model/saved_session.cpp src/vision/config.cpp src/vision/image.cpp src/vision/tower.cpp src/vision/stb_impl.cpp
  src/quant/dispatch.cpp src/quant/cpu_features.cpp src/quant/kernels_scalar.cpp src/quant/kernels_nosimd.cpp
  src/quant/kernels_avx2.cpp src/quant/kernels_avx512.cpp src/quant/kernels_neon.cpp src/synth/synth.cpp
  src/convert/trunk.cpp src/convert/vq.cpp"

# harness: sources besides tests/fuzz/<harness>.cpp
FILE_IO="src/format/file.cpp src/format/io_fault.cpp src/format/platform_io.cpp src/common/checked_file.cpp"
SHA256="src/common/sha256.cpp src/common/sha256_ni.cpp src/format/file_sha256.cpp"
# The converter reads a GGUF source through these (convert/checkpoint.cpp).
GGUF_SRC="src/convert/gguf_source.cpp src/convert/byte_level.cpp src/format/gguf.cpp src/format/gguf_reader.cpp src/format/gguf_dequant.cpp"
declare -A SRC=(
  [fuzz_manifest]="src/format/manifest.cpp src/runtime/memory_plan.cpp src/common/units.cpp src/runtime/mem_status.cpp src/quant/qtensor.cpp
    src/runtime/process_footprint.cpp src/runtime/read_queue.cpp $FILE_IO"
  [fuzz_request]="src/server/request.cpp src/server/chat_request.cpp src/api/schema_check.cpp src/server/xtml_render.cpp
    src/server/pyjson.cpp src/grammar/json_schema.cpp src/grammar/grammar.cpp"
  [fuzz_hotlist]="src/runtime/hotlist.cpp $FILE_IO"
  [fuzz_expert_record]="src/format/expert_record.cpp src/format/crc32.cpp"
  [fuzz_container]="src/format/container.cpp src/format/manifest.cpp $FILE_IO src/quant/qtensor.cpp $SHA256"
  [fuzz_safetensors]="src/format/safetensors.cpp $FILE_IO $SHA256"
  [fuzz_gguf]="src/format/gguf.cpp src/format/gguf_reader.cpp src/format/gguf_dequant.cpp $FILE_IO"
  [fuzz_checkpoint]="src/convert/checkpoint.cpp src/convert/numeric.cpp src/convert/util.cpp
    src/format/safetensors.cpp $FILE_IO $SHA256 $GGUF_SRC"
  [fuzz_tokenizer]="src/tokenizer/load.cpp src/tokenizer/tokenizer.cpp src/tokenizer/chat.cpp src/tokenizer/bpe.cpp
    src/tokenizer/pretokenize.cpp src/tokenizer/unicode.cpp src/common/checked_file.cpp"
  [fuzz_llamakld]="src/kld/io/llamakld.cpp src/kld/io/suite.cpp src/kld/kld_common.cpp $FILE_IO $SHA256"
  [fuzz_suite]="src/kld/io/suite.cpp src/kld/kld_common.cpp $FILE_IO $SHA256"
  # Session state needs a whole engine (and the generator for its model).
  [fuzz_session]="src/model/session_io.cpp $ENGINE src/synth/synth.cpp src/convert/numeric.cpp src/convert/trunk.cpp
    src/convert/vq.cpp src/convert/util.cpp src/convert/checkpoint.cpp src/format/safetensors.cpp src/convert/hfconfig.cpp
    $GGUF_SRC"
)
HARNESSES="fuzz_manifest fuzz_request fuzz_hotlist fuzz_expert_record fuzz_container fuzz_safetensors fuzz_gguf
  fuzz_checkpoint fuzz_tokenizer fuzz_llamakld fuzz_suite fuzz_session"

# The Makefile: one object per source (with -MMD header dependencies), one
# link per harness.
{
  echo "CXX := $CXX"
  echo "CXXFLAGS := -std=c++20 -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -Isrc -Iinclude -MMD -MP"
  echo "NOCOVFLAGS := -std=c++20 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -Isrc -Iinclude -MMD -MP"
  echo "LDFLAGS := -fsanitize=fuzzer,address,undefined -lcrypto -lutf8proc -lz -lpthread"
  echo ".PHONY: all"
  echo "all: $(for h in $HARNESSES; do printf '%s/%s ' "$OUT" "$h"; done)"
  declare -A seen=()
  for h in $HARNESSES; do
    objs=""
    for s in tests/fuzz/$h.cpp ${SRC[$h]}; do
      o="$OUT/obj/${s%.cpp}.o"; objs+=" $o"
      if [ -z "${seen[$s]:-}" ]; then
        seen[$s]=1
        printf '%s: %s\n\t@mkdir -p $(@D)\n\t$(CXX) $(CXXFLAGS) -c %s -o $@\n' "$o" "$s" "$s"
      fi
    done
    printf '%s/%s:%s\n\t$(CXX)%s -o $@ $(LDFLAGS)\n' "$OUT" "$h" "$objs" "$objs"
  done
  # llamakld.cpp's RowStream typeinfo lives with the candidate readers
  # (operand.cpp and what it pulls in); UBSan's vptr check would link them all.
  echo "$OUT/obj/src/kld/io/llamakld.o: CXXFLAGS += -fno-sanitize=vptr"
  # The SHA-extensions block code (called only when CPUID reports them).
  echo "$OUT/obj/src/common/sha256_ni.o: CXXFLAGS += -msha -msse4.1 -mssse3"
  for s in $NOCOV; do echo "$OUT/obj/${s%.cpp}.o: CXXFLAGS := \$(NOCOVFLAGS)"; done
  # The ISA kernels take their instruction sets on these files only, as in CMake.
  echo "$OUT/obj/src/quant/kernels_avx2.o: CXXFLAGS += -mavx2 -mfma"
  echo "$OUT/obj/src/quant/kernels_avx512.o: CXXFLAGS += -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma"
  echo "$OUT/obj/src/vision/stb_impl.o: CXXFLAGS += -I/usr/include/stb"
  echo "-include \$(shell find $OUT/obj -name '*.d' 2>/dev/null)"
} > "$OUT/Makefile"
make -s -f "$OUT/Makefile" -j"${FUZZ_JOBS:-2}" $(for h in ${ONLY:-$HARNESSES}; do printf '%s/%s ' "$OUT" "$h"; done)

seed() {  # harness files...: copy each existing file into the corpus under a content name
  local d="$OUT/corpus-$1"; shift; mkdir -p "$d"
  for f in "$@"; do [ -f "$f" ] && cp -f "$f" "$d/$(md5sum < "$f" | cut -c1-12)"; done
  true
}
for h in ${ONLY:-$HARNESSES}; do seed "$h" tests/fuzz/seeds/"${h#fuzz_}"/*; done
F=../shared/fixtures
seed fuzz_manifest $F/warp/*.waste/manifest.json
seed fuzz_tokenizer $F/warp/*.waste/chat.json
# Session states name their model's manifest hash: the harness writes its
# seeds (saved sessions and cuts of them) at start-up into its corpus.
export SLUICE_FUZZ_SESSION_SEEDS="$OUT/corpus-fuzz_session"
# Fixture-derived multi-file seeds (tokenizer, container, expert record).
if [ -d "$F/warp" ] && command -v python3 >/dev/null; then
  python3 tests/fuzz/fixture_seeds.py "$F" "$OUT" || echo "note: fixture seeds not made"
fi

# The harnesses write their inputs as files (a container directory per
# input): on tmpfs fuzz_container ran 1.3x as many (813-1038 execs/s against
# 607-764 on the VM's disk-backed /tmp, 25 s each, alternated, one corpus;
# docs/RELIABILITY.md). FUZZ_TMPDIR overrides.
if [ -n "${FUZZ_TMPDIR:-}" ]; then export TMPDIR="$FUZZ_TMPDIR"
elif [ -d /dev/shm ] && [ -w /dev/shm ]; then export TMPDIR=/dev/shm; fi

rc=0
for h in ${ONLY:-$HARNESSES}; do
  echo "== $h: ${SECS}s"
  # Sizes near overflow (issue 32) for the parsers that multiply them.
  dict=""
  case "$h" in fuzz_manifest|fuzz_container|fuzz_safetensors|fuzz_checkpoint|fuzz_suite|fuzz_llamakld)
    dict="-dict=tests/fuzz/extremes.dict" ;;
  esac
  # RUNS caps the executions instead of the time (a recorded run of N execs).
  runs=""
  [ -n "${RUNS:-}" ] && runs="-runs=$RUNS"
  # shellcheck disable=SC2086
  if ! ASAN_OPTIONS=detect_leaks=1 "$OUT/$h" -max_total_time="$SECS" $runs $dict -max_len=262144 -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$OUT/" "$OUT/corpus-$h" 2>"$OUT/$h.log"; then
    echo "FAIL: $h (see $OUT/$h.log and $OUT/crash-*)"; tail -30 "$OUT/$h.log"; rc=1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$OUT/$h.log" | sed "s/^/  /"
done
exit $rc
