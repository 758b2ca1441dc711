#!/bin/bash
# KLD throughput bench (KLD.md §7.8), one run:
#   (a) the disk's sequential read bandwidth (O_DIRECT, page cache dropped);
#   (b) `sluice kld compare` end to end on uncached data (GB/s, both operands);
#   (c) the numpy baseline tools/kld_ref.py on the same data;
#   (d) the kernel in memory (GB/s per core, JS on and off);
#   (e) peak RSS of the sluice runs (/usr/bin/time -v) against --max-ram.
# Needs root (drop_caches), a build with -DSLUICE_BUILD_BENCH=ON, numpy for
# /usr/bin/python3. Generated data go under DATA_DIR and are deleted after.
#
# usage: bench/kld_bench.sh [BUILD_DIR] [DATA_DIR]
#   KLD_BENCH_WINDOWS (8), KLD_BENCH_CONTEXT (512), KLD_BENCH_VOCAB (163840),
#   KLD_BENCH_NUMPY_WINDOWS (numpy on a subset: "0-1"; "all" for every window),
#   KLD_BENCH_KEEP=1 keeps the data.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-kld}
D=${2:-/tmp/sluice-kld-bench}
W=${KLD_BENCH_WINDOWS:-8}
T=${KLD_BENCH_CONTEXT:-512}
V=${KLD_BENCH_VOCAB:-163840}
NPW=${KLD_BENCH_NUMPY_WINDOWS:-0-1}
SLUICE=$B/sluice
BK=$B/bench/bench_kld
for f in "$SLUICE" "$BK"; do [[ -x $f ]] || { echo "missing $f (build with -DSLUICE_BUILD_BENCH=ON)"; exit 2; }; done
[[ $(id -u) == 0 ]] || { echo "needs root to drop the page cache"; exit 2; }

need=$(( 2 * W * (T - 1) * V * 4 ))
mkdir -p "$(dirname "$D")"
avail=$(( $(df --output=avail -B1 "$(dirname "$D")" | tail -1) ))
echo "== data: $W windows x $((T - 1)) rows x V $V, $(( need / 1000000 )) MB needed, $(( avail / 1000000 )) MB free"
df -h "$(dirname "$D")" | tail -1
(( avail > need + need / 10 )) || { echo "not enough free disk"; exit 1; }
cleanup() { [[ ${KLD_BENCH_KEEP:-0} == 1 ]] || rm -rf "$D"; }
trap cleanup EXIT
rm -rf "$D"

drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

echo "== machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, commit $(git rev-parse --short HEAD)$(git diff --quiet -- src/eval || echo ' (+ uncommitted src/eval)')"
echo "== load average before: $(load); CPU pressure: $(head -1 /proc/pressure/cpu 2>/dev/null)"
"$BK" gen --out "$D" --windows "$W" --context "$T" --vocab "$V"
bytes=$(( $(cat "$D"/ref/*.safetensors "$D"/cand/*.safetensors | wc -c) ))
echo "== operand files: $bytes bytes"

echo "== (a) disk: O_DIRECT 16 MiB reads, 1/4/8 files at once; buffered (kernel read-ahead) for comparison"
: > "$D/disk.txt"
for s in 1 4 8; do drop; "$BK" disk --streams $s "$D"/ref/*.safetensors "$D"/cand/*.safetensors | tee -a "$D/disk.txt"; done
drop; "$BK" disk --streams 4 --buffered "$D"/ref/*.safetensors "$D"/cand/*.safetensors | tee -a "$D/disk.txt"
# The reference for "% of disk": the best O_DIRECT rate (the conservative choice).
disk=$(grep O_DIRECT "$D/disk.txt" | grep -o '= [0-9.]* GB/s' | awk '{print $2}' | sort -g | tail -1)

echo "== (c) numpy baseline tools/kld_ref.py (windows $NPW), uncached"
npsel=()
[[ $NPW == all ]] || npsel=(--windows "$NPW")
drop
/usr/bin/time -v /usr/bin/python3 tools/kld_ref.py --suite "$D/suite" --reference "$D/ref" --candidate "$D/cand" \
    "${npsel[@]}" --json "$D/numpy.json" > /dev/null 2> "$D/numpy.time"
np_gbs=$(python3 -c "import json;print('%.4f' % json.load(open('$D/numpy.json'))['gb_per_s'])")
np_s=$(python3 -c "import json;print('%.1f' % json.load(open('$D/numpy.json'))['seconds'])")
np_mean=$(python3 -c "import json;print('%.12g' % json.load(open('$D/numpy.json'))['kl_mean'])")
np_rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$D/numpy.time")
echo "numpy: $np_gbs GB/s ($np_s s, peak RSS $(( np_rss / 1024 )) MiB, mean KL over its windows $np_mean)"
# The same windows through sluice (fp64 and fast), for the agreement check.
drop
"$SLUICE" kld compare --suite "$D/suite" --reference "$D/ref" --candidate "$D/cand" --threads 2 --precision fp64 \
    "${npsel[@]}" --json "$D/sub64.json" > /dev/null
python3 - "$D/sub64.json" "$D/numpy.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1])); n = json.load(open(sys.argv[2]))
a, b = s["kl_reference_to_candidate"]["mean"], n["kl_mean"]
print("same windows: sluice fp64 mean KL %.15g, numpy %.15g, |diff| %.3g" % (a, b, abs(a - b)))
EOF

REPS=${KLD_BENCH_REPS:-3}
run_sluice() {  # name, reps, extra args...: every wall time, median and best
    local name=$1 reps=$2; shift 2
    local walls=() cpus=() cpusec=() rss=0 loads=""
    for ((i = 0; i < reps; i++)); do
        drop
        loads+="$(cut -d' ' -f1 /proc/loadavg) "
        /usr/bin/time -v "$SLUICE" kld compare --suite "$D/suite" --reference "$D/ref" --candidate "$D/cand" \
            --json "$D/$name.json" "$@" > "$D/$name.out" 2> "$D/$name.time"
        walls+=("$(awk -F': ' '/Elapsed \(wall clock\)/ {n=split($2,t,":"); s=0; for(i=1;i<=n;i++) s=s*60+t[i]; print s}' "$D/$name.time")")
        cpus+=("$(awk -F': ' '/Percent of CPU/ {print $2}' "$D/$name.time")")
        cpusec+=("$(awk -F': ' '/User time/ {u=$2} /System time/ {s=$2} END {print u + s}' "$D/$name.time")")
        local r; r=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$D/$name.time")
        (( r > rss )) && rss=$r
    done
    local med best mean
    med=$(printf '%s\n' "${walls[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    best=$(printf '%s\n' "${walls[@]}" | sort -g | head -1)
    mean=$(python3 -c "import json;r=json.load(open('$D/$name.json'));print('%.12g' % r['kl_reference_to_candidate']['mean'])")
    # CPU seconds (user + system) per GB: what the run costs whatever the load.
    local cpg; cpg=$(printf '%s\n' "${cpusec[@]}" | sort -g | awk -v b="$bytes" '{a[NR]=$1} END {printf "%.2f", a[int((NR+1)/2)] / (b / 1e9)}')
    awk -v n="$name" -v o="$*" -v m="$med" -v bw="$best" -v b="$bytes" -v d="$disk" -v np="$np_gbs" -v c="${cpus[*]}" \
        -v r="$(( rss / 1024 ))" -v k="$mean" -v l="$loads" -v w="${walls[*]}" -v cpg="$cpg" \
        'BEGIN {g = b / m / 1e9; printf "| %s | `%s` | %s | %.3f | %.3f | %.0f%% | %.1fx | %s | %s | %s | %s | %s |\n", n, o, w, g, b / bw / 1e9, 100 * g / d, g / np, c, cpg, r, k, l}' \
        | tee -a "$D/table.md"
}

echo "== (b)+(e) sluice kld compare, uncached (page cache dropped before each run)"
echo "| run | options | wall s (each run) | GB/s median | GB/s best | median / disk | median / numpy | CPU (each run) | CPU s per GB | peak RSS MiB | mean KL | 1-min load before each |" | tee "$D/table.md"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|" | tee -a "$D/table.md"
run_sluice default-t2 "$REPS" --threads 2
run_sluice t1 "$REPS" --threads 1
run_sluice t2-buffered "$REPS" --threads 2 --io buffered
run_sluice t2-no-js "$REPS" --threads 2 --no-js
run_sluice t2-no-hash "$REPS" --threads 2 --verify-hashes off
run_sluice t2-fp64 1 --threads 2 --precision fp64
run_sluice t2-cap-256MiB 1 --threads 2 --max-ram 268435456
if "$SLUICE" kld compare --suite "$D/suite" --reference "$D/ref" --candidate "$D/cand" --threads 2 --max-ram 33554432 > /dev/null 2> "$D/cap.err"; then
    echo "--max-ram 32 MiB was NOT refused"; else echo "--max-ram 32 MiB refused: $(cat "$D/cap.err")"; fi

echo "== (d) kernel in memory, one core"
"$BK" kernel --vocab "$V" --rows 32 | tee "$D/kernel.txt"

echo "== load average after: $(load); CPU pressure: $(head -1 /proc/pressure/cpu 2>/dev/null)"
echo
cat "$D/disk.txt"
echo "disk reference for the ratios: the best O_DIRECT rate, $disk GB/s"
echo "numpy baseline: $np_gbs GB/s on windows $NPW"
cat "$D/table.md"
echo "(GB/s = $bytes bytes of both operands / wall time; page cache dropped before every run)"
