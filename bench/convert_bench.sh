#!/usr/bin/env bash
# `sluice convert` throughput: MB of source per second and peak RSS, at
# --jobs 1 and 2 (and the ratio), on random-weight Kimi-Linear-shaped
# checkpoints written by tools/make_checkpoint.py. A program, not a test;
# results go to docs/PERF.md.
#
# Usage: bench/convert_bench.sh [BUILD_DIR [WORK_DIR]]
#   BUILD_DIR  a Release build with the sluice CLI (default: build)
#   WORK_DIR   where checkpoints and containers go (default:
#              /tmp/sluice-convert-bench; needs about 2.5 x SIZE_GB free);
#              removed at the end unless KEEP=1
# Environment:
#   SIZE_GB    bf16 source size to reach, in 10^9 bytes (default 1.1)
#   CASES      "bf16 mxfp4-fp8" (default both): bf16 everywhere; or MXFP4
#              routed experts + fp8 (E4M3, 128x128 tiles) trunk matrices with
#              the same shapes and expert count as the bf16 case
#   JOBS       "1 2" (default)
#   LAYERS, VOCAB  the shape (default 2 layers: one dense, one MoE with as many
#              experts as SIZE_GB needs; vocab 16384). Kimi-Linear 48B widths.
#
# Each run's output is hashed: every --jobs value must give the same bytes.
# Load average is printed with every run, since other processes may share
# the cores.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
work=${2:-/tmp/sluice-convert-bench}
size_gb=${SIZE_GB:-1.1}
cases=${CASES:-bf16 mxfp4-fp8}
jobs_list=${JOBS:-1 2}
layers=${LAYERS:-2}
vocab=${VOCAB:-16384}
sluice=$build/sluice
py=/usr/bin/python3
[ -x "$sluice" ] || { echo "convert_bench: $sluice is missing (cmake --build $build)"; exit 2; }
[ -x /usr/bin/time ] || { echo "convert_bench: /usr/bin/time is missing (apt-get install time)"; exit 2; }
$py -c 'import numpy' 2>/dev/null || { echo "convert_bench: $py cannot import numpy"; exit 2; }
mkdir -p "$work"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT

echo "commit $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- src/convert src/format src/common || echo ' + uncommitted changes in src/convert, src/format or src/common')"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GB", $2 / 1e6}' /proc/meminfo)"
echo "disk: $(df -h "$work" | awk 'NR == 2 {print $4 " free on " $1}')"

# n_experts of the bf16 case, reused by the others so they convert the same model.
experts=
rows=()
for c in $cases; do
  src=$work/src-$c
  case $c in
    bf16) gen=(--size-gb "$size_gb") ;;
    mxfp4-fp8) gen=(--expert-dtype mxfp4 --trunk-dtype fp8) ;;
    *) echo "convert_bench: unknown case $c"; exit 2 ;;
  esac
  if [ -n "$experts" ]; then gen+=(--experts "$experts"); elif [ "$c" != bf16 ]; then gen+=(--size-gb "$size_gb"); fi
  t0=$(date +%s.%N)
  $py "$root/tools/make_checkpoint.py" "$src" --family kimi-linear --scale full --layers "$layers" \
      --vocab "$vocab" --shard-mb 512 "${gen[@]}" | tail -1
  echo "  generated in $(echo "$(date +%s.%N) - $t0" | bc) s"
  [ -n "$experts" ] || experts=$($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["num_experts"])' "$src/config.json")
  src_bytes=$($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["metadata"]["total_size"])' "$src/model.safetensors.index.json")
  params=$($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["metadata"]["total_parameters"])' "$src/model.safetensors.index.json")
  sync
  base_wall=
  ref_hash=
  for j in $jobs_list; do
    out=$work/out-$c-j$j.waste
    rm -rf "$out"
    load_before=$(cut -d' ' -f1-3 /proc/loadavg)
    /usr/bin/time -v "$sluice" convert --src "$src" --out "$out" --jobs "$j" 2> "$work/time-$c-$j.log" >/dev/null
    load_after=$(cut -d' ' -f1-3 /proc/loadavg)
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s}' "$work/time-$c-$j.log")
    user=$(awk -F': ' '/User time/ {print $2}' "$work/time-$c-$j.log")
    sys=$(awk -F': ' '/System time/ {print $2}' "$work/time-$c-$j.log")
    rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.1f", $2 / 1024}' "$work/time-$c-$j.log")
    phases=$(grep -o 'in [0-9.]* s (k-means.*)' "$work/time-$c-$j.log" | sed 's/^in [0-9.]* s //')
    hash=$(cd "$out" && cat $(ls | sort) | sha256sum | cut -c1-16)
    [ -n "$ref_hash" ] || ref_hash=$hash
    same=$([ "$hash" = "$ref_hash" ] && echo same || echo DIFFERENT)
    [ -n "$base_wall" ] || base_wall=$wall
    rows+=("$(printf '| %s | %.0f | %.0f | %s | %.1f | %.1f / %.1f | %.1f | %.2f | %.2fx | %s | %s | %s -> %s | %s |' \
      "$c" "$(echo "$src_bytes / 1000000" | bc -l)" "$(echo "$params / 1000000" | bc -l)" "$j" "$wall" "$user" "$sys" \
      "$(echo "$src_bytes / 1000000 / $wall" | bc -l)" "$(echo "$params / 1000000 / $wall" | bc -l)" \
      "$(echo "$base_wall / $wall" | bc -l)" "$rss" "$phases" "$load_before" "$load_after" "$same")")
    echo "${rows[-1]}"
    rm -rf "$out"
    [ "$same" = same ] || { echo "convert_bench: --jobs $j changed the output bytes"; exit 1; }
  done
  rm -rf "$src"
done
echo
echo "| source | MB | M weights | jobs | wall s | user / sys s | MB/s | M weights/s | speed-up vs first | peak RSS MiB | converter's phase times | load avg before -> after | bytes vs first |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
