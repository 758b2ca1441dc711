#!/usr/bin/env bash
# Expert streaming under a RAM budget (issue 5): for the full-scale synthetic
# container, decode tok/s, hit rate, bytes read per token and peak RSS at each
# budget, against the I/O floor = bytes read per decoded token / sequential
# O_DIRECT bandwidth of the same disk, measured in the same run.
#   bash bench/budget_sweep.sh [MODEL] [BUILD]     (MODEL default /tmp/kl48.waste)
# Needs root to drop the page cache (each run starts cold); without it the
# runs still happen and the table says the cache was not dropped.
# Environment: BUDGETS="1.5G 2G 4G 8G", THREADS=2, PROMPT=16, GEN=32.
set -euo pipefail
MODEL=${1:-/tmp/kl48.waste}
BUILD=${2:-build}
BUDGETS=${BUDGETS:-"1.5G 2G 4G 8G"}
THREADS=${THREADS:-2}
PROMPT=${PROMPT:-16}
GEN=${GEN:-32}
BIN="$BUILD/bench/bench_budget"
[ -x "$BIN" ] || { echo "budget_sweep: $BIN not built (configure with -DSLUICE_BUILD_BENCH=ON)" >&2; exit 2; }
[ -f "$MODEL/manifest.json" ] || {
    echo "budget_sweep: no container at $MODEL; write one with: $BUILD/sluice synth --out $MODEL --jobs 2" >&2
    exit 2
}

drop() {
    sync
    if [ -w /proc/sys/vm/drop_caches ]; then echo 3 > /proc/sys/vm/drop_caches; echo dropped; else echo kept; fi
}

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo '+dirty')"
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GB; load $(cut -d' ' -f1-3 /proc/loadavg)"

# The disk: two expert banks read one request at a time, then two others as
# two parallel streams, cold; the floor uses the faster rate.
BANKS=$(ls "$MODEL"/experts-L*.bin | head -4)
PAGE=$(drop)
"$BIN" --disk $BANKS > "$OUT/disk.json"
DISK=$(sed -E 's/.*"disk_gbps":([0-9.]+).*/\1/' "$OUT/disk.json")
echo "# sequential O_DIRECT read: $DISK GB/s, the faster of $(sed -E 's/.*"disk_serial_gbps":([0-9.]+).*/\1/' "$OUT/disk.json") (one request at a time) and $(sed -E 's/.*"disk_parallel_gbps":([0-9.]+).*/\1/' "$OUT/disk.json") (two streams) (page cache $PAGE)"

for B in $BUDGETS; do
    PAGE=$(drop)
    if "$BIN" "$MODEL" "$B" --threads "$THREADS" --prompt "$PROMPT" --gen "$GEN" > "$OUT/$B.json" 2> "$OUT/$B.err"; then
        sed -E "s/\}$/,\"page_cache\":\"$PAGE\",\"label\":\"$B\"}/" "$OUT/$B.json" >> "$OUT/all.jsonl"
    else
        echo "# budget $B: $(tail -1 "$OUT/$B.err")"
    fi
done

/usr/bin/python3 - "$OUT/all.jsonl" "$DISK" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])] if len(sys.argv) > 1 else []
disk = float(sys.argv[2]) * 1e9
hdr = ("budget", "cache", "decode tok/s", "hit rate", "MB read/token", "reads GB/s", "I/O floor s/tok",
       "compute s/tok", "measured s/tok", "vs I/O floor", "vs max floor", "peak RSS", "RSS/budget")
print("| " + " | ".join(hdr) + " |")
print("|" + "---|" * len(hdr))
for r in rows:
    g = r["gen"]
    s_tok = r["decode_s"] / g
    io_floor = r["bytes_per_token"] / disk
    comp = r["compute_s"] / g
    hits, misses = r["hits"], r["misses"]
    rate = hits / (hits + misses) if hits + misses else 0.0
    rss = r["vm_hwm_kb"] * 1024
    print("| %s | %.2f GB | %.2f | %.1f %% | %.0f | %.2f | %.3f | %.3f | %.3f | %.2fx | %.2fx | %.2f GB | %.2f |" % (
        r["label"], r["cache_bytes"] / 1e9, r["decode_tps"], 100 * rate, r["bytes_per_token"] / 1e6,
        r["bytes_read"] / r["decode_s"] / 1e9,
        io_floor, comp, s_tok, s_tok / io_floor if io_floor > 0 else float("inf"),
        s_tok / max(io_floor, comp), rss / 1e9, rss / r["budget"]))
print()
for r in rows:
    print("# " + json.dumps(r))
EOF
