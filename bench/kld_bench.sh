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
#   KLD_BENCH_NUMPY_WINDOWS (numpy on a subset: "0"; "all" for every window),
#   KLD_BENCH_KEEP=1 keeps the data.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-kld}
D=${2:-/tmp/sluice-kld-bench}
W=${KLD_BENCH_WINDOWS:-8}
T=${KLD_BENCH_CONTEXT:-512}
V=${KLD_BENCH_VOCAB:-163840}
NPW=${KLD_BENCH_NUMPY_WINDOWS:-0}
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

echo "== machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, commit $(git rev-parse --short HEAD)$(git diff --quiet -- src/kld cli/kld || echo ' (+ uncommitted src/kld)')"
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

npsel=()
[[ $NPW == all ]] || npsel=(--windows "$NPW")
run_numpy() {  # appends "wall cpu% cpu_s rss_kB load gb_per_s" to $D/runs-numpy.txt
    drop
    local l; l=$(cut -d' ' -f1 /proc/loadavg)
    /usr/bin/time -v /usr/bin/python3 tools/kld_ref.py --suite "$D/suite" --reference "$D/ref" --candidate "$D/cand" \
        "${npsel[@]}" --json "$D/numpy.json" > /dev/null 2> "$D/numpy.time"
    awk -F': ' -v l="$l" -v g="$(python3 -c "import json;print(json.load(open('$D/numpy.json'))['gb_per_s'])")" \
        '/Elapsed \(wall clock\)/ {n=split($2,t,":"); w=0; for(i=1;i<=n;i++) w=w*60+t[i]}
        /Percent of CPU/ {c=$2} /User time/ {u=$2} /System time/ {s=$2} /Maximum resident set size/ {r=$2}
        END {print w, c, u + s, r, l, g}' "$D/numpy.time" >> "$D/runs-numpy.txt"
}
REPS=${KLD_BENCH_REPS:-3}
# Configurations, run round-robin (rep 1 of each, then rep 2, ...) so that
# the other work on this shared machine weighs on all of them alike.
names=(default-t2 t1 t2-buffered t2-no-js t2-no-hash t2-fp64 t2-cap-320MiB)
args=("--threads 2" "--threads 1" "--threads 2 --io buffered" "--threads 2 --no-js" "--threads 2 --verify-hashes off"
      "--threads 2 --precision fp64" "--threads 2 --max-ram 335544320")
reps=("$REPS" "$REPS" "$REPS" "$REPS" "$REPS" 1 1)
run_once() {  # index, rep: appends "wall cpu% cpu_s rss_kB load" to $D/runs-NAME.txt
    local i=$1 name=${names[$1]}
    drop
    local l; l=$(cut -d' ' -f1 /proc/loadavg)
    # shellcheck disable=SC2086
    /usr/bin/time -v "$SLUICE" kld compare --suite "$D/suite" --reference "$D/ref" --candidate "$D/cand" \
        --json "$D/$name.json" ${args[$i]} > "$D/$name.out" 2> "$D/$name.time"
    awk -F': ' -v l="$l" '/Elapsed \(wall clock\)/ {n=split($2,t,":"); w=0; for(i=1;i<=n;i++) w=w*60+t[i]}
        /Percent of CPU/ {c=$2} /User time/ {u=$2} /System time/ {s=$2} /Maximum resident set size/ {r=$2}
        END {print w, c, u + s, r, l}' "$D/$name.time" >> "$D/runs-$name.txt"
}
echo "== (b)+(e) sluice kld compare, uncached (page cache dropped before each run), configurations round-robin"
rm -f "$D"/runs-*.txt
for ((rep = 0; rep < REPS; rep++)); do
    for i in "${!names[@]}"; do (( rep < reps[i] )) && run_once "$i"; done
    run_numpy  # the baseline takes its turn in every round too
done
np_bytes=$(python3 -c "import json;print(json.load(open('$D/numpy.json'))['bytes_read'])")
np_gbs=$(sort -g -k6 "$D/runs-numpy.txt" | awk '{a[NR]=$6} END {printf "%.4f", a[int((NR+1)/2)]}')
np_cpg=$(sort -g -k3 "$D/runs-numpy.txt" | awk -v b="$np_bytes" '{a[NR]=$3} END {printf "%.2f", a[int((NR+1)/2)] / (b / 1e9)}')
echo "numpy tools/kld_ref.py, windows $NPW ($np_bytes bytes), each round: $(awk '{printf "%.4f GB/s (%s s, %s CPU, load %s); ", $6, $1, $2, $5}' "$D/runs-numpy.txt")"
echo "numpy median $np_gbs GB/s, $np_cpg CPU s per GB, peak RSS $(sort -g -k4 "$D/runs-numpy.txt" | tail -1 | awk '{print int($4/1024)}') MiB"
# numpy and sluice fp64 on the same windows: the agreement check.
drop
"$SLUICE" kld compare --suite "$D/suite" --reference "$D/ref" --candidate "$D/cand" --threads 2 --precision fp64 \
    "${npsel[@]}" --json "$D/sub64.json" > /dev/null
python3 - "$D/sub64.json" "$D/numpy.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1])); n = json.load(open(sys.argv[2]))
a, b = s["kl_reference_to_candidate"]["mean"], n["kl_mean"]
print("same windows: sluice fp64 mean KL %.15g, numpy %.15g, |diff| %.3g" % (a, b, abs(a - b)))
EOF

echo "| run | options | wall s (each run) | GB/s median | GB/s best | median / disk | median / numpy | CPU (each run) | CPU s per GB | numpy CPU s per GB / this | peak RSS MiB | mean KL | 1-min load before each |" | tee "$D/table.md"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|" | tee -a "$D/table.md"
for i in "${!names[@]}"; do
    name=${names[$i]}
    mean=$(python3 -c "import json;r=json.load(open('$D/$name.json'));print('%.12g' % r['kl_reference_to_candidate']['mean'])")
    # CPU seconds (user + system) per GB: what a run costs whatever the load.
    awk -v n="$name" -v o="${args[$i]}" -v b="$bytes" -v d="$disk" -v np="$np_gbs" -v npc="$np_cpg" -v k="$mean" '
        {w[NR]=$1; c[NR]=$2; cs[NR]=$3; if ($4 > r) r=$4; l[NR]=$5}
        END {
            for (i = 1; i <= NR; i++) { ws = ws sprintf("%s ", w[i]); cc = cc c[i] " "; ll = ll l[i] " "; s[i] = w[i]; t[i] = cs[i] }
            for (i = 1; i <= NR; i++) for (j = i + 1; j <= NR; j++) { if (s[j] < s[i]) { x = s[i]; s[i] = s[j]; s[j] = x } if (t[j] < t[i]) { x = t[i]; t[i] = t[j]; t[j] = x } }
            m = s[int((NR + 1) / 2)]; g = b / m / 1e9
            cpg = t[int((NR + 1) / 2)] / (b / 1e9)
            printf "| %s | `%s` | %s| %.3f | %.3f | %.0f%% | %.1fx | %s| %.2f | %.1fx | %d | %s | %s|\n", n, o, ws, g, b / s[1] / 1e9, 100 * g / d, g / np, cc, cpg, npc / cpg, r / 1024, k, ll
        }' "$D/runs-$name.txt" | tee -a "$D/table.md"
done
plan=$(python3 -c "import json;print(json.load(open('$D/t2-cap-320MiB.json'))['sluice']['timing']['ram_plan_bytes'])")
echo "RAM plan of the 2-thread runs: $plan bytes ($(( plan / 1048576 )) MiB); peak RSS is in the table"
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
