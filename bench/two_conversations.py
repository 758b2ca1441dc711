#!/usr/bin/env python3
"""Two conversations taking turns through one server (issue 28): an agent
and its sub-agent, or two chats. Each conversation has a prefix of its own
(PREFIX tokens: its system prompt and tools) and grows by its reply and
50-100 new tokens a turn; the turns alternate A, B, A, B, ... over
/v1/completions with token-id prompts (cache_prompt on). The same
sequence runs against `sluice serve --session-cache-bytes auto` (the other
conversation kept aside) and `--session-cache-bytes 0` (only the live one
kept), one server after the other, and prints each turn's time to first
token, the prompt tokens reused (usage.prompt_tokens_details.cached_tokens)
and the time the turn's new tokens take alone (a fresh evaluation of only
them), with the target of bench/agent_turns.sh: a turn from the second on
within 1.2 x that + 0.5 s.

usage: two_conversations.py MODEL [--sluice build/sluice] [--prefix 1500] [--turns 6] [--threads 2]
"""
import argparse, http.client, json, os, random, subprocess, sys, time

from benchlib import free_port, header

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("--sluice", default="build/sluice")
ap.add_argument("--prefix", type=int, default=1500)
ap.add_argument("--turns", type=int, default=6)
ap.add_argument("--threads", type=int, default=2)
a = ap.parse_args()
if not os.path.isfile(os.path.join(a.model, "manifest.json")):
    sys.exit(f"two_conversations: no container at {a.model}")
if not os.access(a.sluice, os.X_OK):
    sys.exit(f"two_conversations: {a.sluice} is not an executable (build it: TARGETS=sluice_cli scripts/build.sh)")


def ttft(port, prompt, cache=True):
    """Seconds to the first streamed event, the usage, and the reply's token ids."""
    body = {"prompt": prompt, "max_tokens": 8, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}, "cache_prompt": cache}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        sys.exit(f"two_conversations: HTTP {r.status}: {r.read()[:300]!r}")
    first, usage, ids = None, None, []
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
        for ch in j.get("choices", []):
            ids += ch.get("token_ids", []) or []
    return first, usage, ids


def run(keep):
    port = free_port()
    p = subprocess.Popen([a.sluice, "serve", a.model, "--port", str(port), "--threads", str(a.threads), "--ctx",
                          "8192", "--session-cache-bytes", keep], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    if "listening" not in p.stdout.readline().decode():
        p.kill()
        sys.exit("two_conversations: serve did not start")
    try:
        ttft(port, [1, 2, 3], False)  # warm-up
        rng = random.Random(28)
        convs = [[rng.randrange(3, 256) for _ in range(a.prefix)] for _ in range(2)]
        rows, news = [], []
        for t in range(a.turns):
            ci = t % 2
            new = [rng.randrange(3, 256) for _ in range(rng.randrange(50, 101))]
            prompt = convs[ci] + new
            first, usage, reply = ttft(port, prompt)
            cached = (usage or {}).get("prompt_tokens_details", {}).get("cached_tokens", -1)
            rows.append([t + 1, "AB"[ci], len(prompt), cached, first])
            news.append(new)
            convs[ci] = prompt + reply
        # After the turns: a cache_prompt false request resets the live
        # session, which would have ended the conversations' sessions.
        for r, new in zip(rows, news):
            r.append(ttft(port, new, False)[0])
        return rows
    finally:
        p.terminate()
        p.wait()


header()
print(f"# model {a.model}, prefix {a.prefix} tokens per conversation, {a.turns} turns alternating A/B")
results = {k: run(k) for k in ("auto", "0")}
print("| turn | conv | prompt | cached (kept) | TTFT kept (s) | cached (none) | TTFT none (s) | new alone (s) | "
      "target 1.2x+0.5 (s) | met (kept) |")
print("|---|---|---|---|---|---|---|---|---|---|")
ok = True
for (t, c, n, ck, fk, al), (_, _, _, cn, fn, _) in zip(results["auto"], results["0"]):
    target = 1.2 * al + 0.5
    met = "-" if t <= 2 else ("yes" if fk <= target else "NO")
    ok = ok and (t <= 2 or fk <= target)
    print(f"| {t} | {c} | {n} | {ck} | {fk:.3f} | {cn} | {fn:.3f} | {al:.3f} | {target:.3f} | {met} |")
print("target met on every returning turn" if ok else "target MISSED")
