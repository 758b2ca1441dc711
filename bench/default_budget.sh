#!/usr/bin/env bash
# Does the default budget serve the user (issue 14 item 3)? Decode tok/s at
# the budget sluice picks by itself against a sweep of fixed budgets from the
# floor up to what the model can use (or what this machine has available,
# whichever is less: past it the run would page), plus the rule before
# 2026-12-03 (floor + 3 token working sets). Each run starts cold: the page
# cache is dropped when this runs as root (the table says when it was not).
#   bash bench/default_budget.sh MODEL [BUILD]
# Environment: THREADS=2, PROMPT=16, GEN=16, FRACTIONS="0 0.125 0.25 0.5 0.75 1"
# (of the range floor .. top).
set -euo pipefail
MODEL=${1:?usage: bench/default_budget.sh MODEL [BUILD]}
BUILD=${2:-build}
THREADS=${THREADS:-2}
PROMPT=${PROMPT:-16}
GEN=${GEN:-16}
FRACTIONS=${FRACTIONS:-"0 0.125 0.25 0.5 0.75 1"}
BIN="$BUILD/sluice"
[ -x "$BIN" ] || { echo "default_budget: $BIN not built" >&2; exit 2; }
[ -f "$MODEL/manifest.json" ] || { echo "default_budget: no container at $MODEL" >&2; exit 2; }

drop() {
    sync
    if [ -w /proc/sys/vm/drop_caches ]; then echo 3 > /proc/sys/vm/drop_caches; echo dropped; else echo kept; fi
}

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo '+dirty')"
echo "# $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GB RAM, $(awk '/MemAvailable/{printf "%.1f", $2/1048576}' /proc/meminfo) GiB available; load $(cut -d' ' -f1-3 /proc/loadavg)"
"$BIN" plan "$MODEL" --threads "$THREADS" --json > "$OUT/plan.json"
"$BIN" plan "$MODEL" --threads "$THREADS" | sed 's/^/# /'

# The budgets: "default" (0: sluice chooses), the old rule, and the sweep.
/usr/bin/python3 - "$OUT/plan.json" "$FRACTIONS" > "$OUT/budgets" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
floor, useful, ws = p["floor"], p["max_useful"], p["working_set"]
avail = p["available"] or p["ram_limit"]
# Past what is available now the run would page the machine: not swept.
top = max(floor, min(useful, avail - (256 << 20)))
print("default 0")
old = floor + 3 * ws
if old <= top:
    print("floor+3ws %d" % old)
seen = set()
for f in sys.argv[2].split():
    b = int(floor + float(f) * (top - floor))
    if b not in seen:
        seen.add(b)
        print("fixed-%s %d" % (f, b))
EOF

while read -r LABEL B; do
    PAGE=$(drop)
    if "$BIN" bench "$MODEL" --budget "$B" --threads "$THREADS" --prompt "$PROMPT" -n "$GEN" --json --no-progress -q \
        > "$OUT/run.json" 2> "$OUT/run.err"; then
        sed -E "s/\}$/,\"label\":\"$LABEL\",\"page_cache\":\"$PAGE\"}/" "$OUT/run.json" >> "$OUT/all.jsonl"
    else
        echo "# $LABEL (budget $B): $(tail -1 "$OUT/run.err")"
    fi
done < "$OUT/budgets"

/usr/bin/python3 - "$OUT/all.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
# Cache hits and read-ahead hits apart: their sum is not a hit rate (a
# record read ahead of its layer was still read).
hdr = ("run", "budget GiB", "cache GiB", "decode tok/s", "cache hits", "read-ahead hits", "GB read/token",
       "peak RSS GiB", "RSS/budget", "page cache")
print("| " + " | ".join(hdr) + " |")
print("|" + "---|" * len(hdr))
G = 1 << 30
for r in rows:
    print("| %s | %.2f | %.2f | %.3f | %.1f %% | %.1f %% | %.3f | %.2f | %.3f | %s |" % (
        r["label"], r["budget_bytes"] / G, r["cache_bytes"] / G, r["decode_tok_s"], 100 * r["cache_hit_rate"],
        100 * r["readahead_hit_rate"],
        r["gb_read_per_token"], r["peak_rss_bytes"] / G, r["peak_rss_bytes"] / r["budget_bytes"], r["page_cache"]))
dflt = [r for r in rows if r["label"] == "default"]
fixed = [r for r in rows if r["label"] != "default"]
if dflt and fixed:
    best = max(fixed, key=lambda r: r["decode_tok_s"])
    d = dflt[0]
    print("\ndefault budget %.2f GiB: %.3f tok/s; best fixed budget %.2f GiB (%s): %.3f tok/s; default / best = %.2f" % (
        d["budget_bytes"] / G, d["decode_tok_s"], best["budget_bytes"] / G, best["label"], best["decode_tok_s"],
        d["decode_tok_s"] / best["decode_tok_s"] if best["decode_tok_s"] > 0 else float("nan")))
EOF
