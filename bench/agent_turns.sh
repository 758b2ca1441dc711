#!/usr/bin/env bash
# Prompt reuse, as an agent uses the server: five turns over /v1/completions
# with token-id prompts, each resending one shared 1,500-token prefix (a
# system prompt and tool definitions) plus 50-100 tokens of its own. Prints
# each turn's time to first token with cache_prompt on and off, side by
# side, and the time the turn's new tokens take alone (a fresh session fed
# only them), against the target: turns 2-5 at most 1.2 x that + 0.5 s.
# "again": tokens the rewind evaluated again (checkpoint to shared prefix).
#
# usage: bench/agent_turns.sh MODEL [SLUICE] [-- extra `sluice serve` flags]
#   MODEL   a container directory (any family; ids stay under 256)
#   SLUICE  the CLI (default build/sluice)
# Env: PREFIX (1500), TURNS (5), THREADS (serve --threads, default 0), OFF (1; 0 skips the
# cache_prompt-off column).
set -euo pipefail
MODEL=${1:?usage: bench/agent_turns.sh MODEL [SLUICE] [-- serve flags]}
shift
SLUICE=build/sluice
if [ $# -gt 0 ] && [ "$1" != "--" ]; then SLUICE=$1; shift; fi
[ "${1:-}" = "--" ] && shift
[ -x "$SLUICE" ] || { echo "agent_turns: $SLUICE is not an executable (build it: TARGETS=sluice_cli scripts/build.sh)" >&2; exit 2; }
[ -f "$MODEL/manifest.json" ] || { echo "agent_turns: $MODEL has no manifest.json" >&2; exit 2; }

PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
LOG=$(mktemp)
"$SLUICE" serve "$MODEL" --port "$PORT" --threads "${THREADS:-0}" --ctx 4096 "$@" >"$LOG" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -f "$LOG"' EXIT

PORT=$PORT PREFIX=${PREFIX:-1500} TURNS=${TURNS:-5} OFF=${OFF:-1} MODEL=$MODEL /usr/bin/python3 - <<'EOF' || { echo "agent_turns: failed; the server said:" >&2; tail -20 "$LOG" >&2; exit 1; }
import http.client, json, os, random, sys, time

port, prefix_n, turns = int(os.environ["PORT"]), int(os.environ["PREFIX"]), int(os.environ["TURNS"])

def wait_health():
    for _ in range(600):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit("agent_turns: the server did not come up (see its log)")

def ttft(prompt, cache):
    """Seconds from sending the request to its first streamed event, and the usage."""
    body = {"prompt": prompt, "max_tokens": 1, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}, "cache_prompt": cache}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        sys.exit(f"agent_turns: HTTP {r.status}: {r.read()[:300]!r}")
    first, usage = None, None
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: "):
            continue
        if first is None:
            first = time.perf_counter() - t0
        data = line[6:]
        if data == b"[DONE]":
            break
        j = json.loads(data)
        if j.get("usage"):
            usage = j["usage"]
    return first, usage

wait_health()
rng = random.Random(28)
prefix = [rng.randrange(3, 256) for _ in range(prefix_n)]
news = [[rng.randrange(3, 256) for _ in range(rng.randrange(50, 101))] for _ in range(turns)]
prompts = [prefix + n for n in news]
ttft([1, 2, 3], False)  # warm-up: first-touch of the trunk and the expert cache
def reevaluated():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", "/metrics")
    for line in c.getresponse().read().decode().splitlines():
        if line.startswith("sluice_prompt_tokens_reevaluated_total "):
            return int(line.split()[1])
    return -1

on = []
for p in prompts:
    before = reevaluated()
    on.append(ttft(p, True) + (reevaluated() - before,))
# OFF=0 skips the cache_prompt-off column (a whole prefix per turn: about
# 10 minutes a turn on the 48B shape on 2 AVX2 cores).
off = [ttft(p, False) for p in prompts] if os.environ.get("OFF", "1") != "0" else [(float("nan"), None)] * turns
alone = [ttft(n, False) for n in news]
print(f"prefix {prefix_n} tokens, {turns} turns, model {os.environ['MODEL']}")
print("turn  new  cached  again   TTFT on   TTFT off  new alone  target(1.2x+0.5)  met")
ok = True
for i in range(turns):
    (t_on, u_on, again), (t_off, _), (t_al, _) = on[i], off[i], alone[i]
    cached = (u_on or {}).get("prompt_tokens_details", {}).get("cached_tokens", -1)
    target = 1.2 * t_al + 0.5
    met = "-" if i == 0 else ("yes" if t_on <= target else "NO")
    ok = ok and (i == 0 or t_on <= target)
    print(f"{i + 1:>4} {len(news[i]):>4} {cached:>7} {again:>6} {t_on:>8.3f}s {t_off:>9.3f}s {t_al:>9.3f}s {target:>16.3f}s  {met}")
print("target met on turns 2-%d" % turns if ok else "target MISSED")
EOF
