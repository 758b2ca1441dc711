#!/usr/bin/env bash
# The long fuzz run of docs/RELIABILITY.md: harnesses one at a time, each
# for its total time in chunks of at most CHUNK seconds (default 300), so
# other work can take the machine between chunks. Each chunk runs
# `ONLY=HARNESS scripts/fuzz.sh SECONDS` behind $WRAP (a command prefix, e.g.
# a CPU-sharing wrapper; empty by default) and continues the harness's
# corpus. One line per chunk is appended to build-fuzz/long-run.tsv:
# harness, seconds, executions, exit status, new crash/leak/timeout/oom files.
#   scripts/fuzz_long.sh fuzz_expert_record:900 fuzz_tokenizer:300 ...
# STOP_AT (seconds since the epoch) ends the run early: no chunk is planned
# to run past it. Exit 1 once a chunk fails (its artifacts are kept).
set -uo pipefail
cd "$(dirname "$0")/.."
CHUNK=${CHUNK:-300}
OUT=${FUZZ_OUT:-build-fuzz}
LEDGER="$OUT/long-run.tsv"
mkdir -p "$OUT"
[ -f "$LEDGER" ] || printf 'utc\tharness\tseconds\texecs\trc\tartifacts\n' >"$LEDGER"
for spec in "$@"; do
  h=${spec%%:*}
  left=${spec#*:}
  while [ "$left" -gt 0 ]; do
    secs=$((left < CHUNK ? left : CHUNK))
    if [ -n "${STOP_AT:-}" ]; then
      room=$((STOP_AT - $(date +%s) - 30))  # 30 s for the start-up and the seeding
      [ "$room" -lt "$secs" ] && secs=$room
      if [ "$secs" -lt 10 ]; then echo "STOP_AT reached"; exit 0; fi
    fi
    before=$(ls "$OUT" | grep -cE '^(crash|leak|timeout|oom|slow-unit)-' || true)
    # shellcheck disable=SC2086
    ${WRAP:-} env ONLY="$h" bash scripts/fuzz.sh "$secs" >"$OUT/long-$h.out" 2>&1
    rc=$?
    after=$(ls "$OUT" | grep -cE '^(crash|leak|timeout|oom|slow-unit)-' || true)
    execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$OUT/$h.log" | grep -o '[0-9]*$' || echo 0)
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$h" "$secs" "${execs:-0}" "$rc" "$((after - before))" >>"$LEDGER"
    tail -1 "$LEDGER"
    if [ "$rc" -ne 0 ]; then echo "FAIL: $h (see $OUT/long-$h.out, $OUT/$h.log)"; exit 1; fi
    left=$((left - secs))
  done
done
