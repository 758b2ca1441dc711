#!/usr/bin/python3
"""Structured output under thinking, measured against a running `sluice serve`.

Starts `sluice serve CONTAINER --port 0` with the server's defaults (plus
any --serve-arg), sends N seeded requests per mode at temperature 1, and
prints one line per request (finish_reason, reasoning and completion
tokens, whether the answer parses and validates) and a summary per mode.
Exit status 1 if any answer fails to parse or validate.

Modes: json_schema (strict), json_object, tool_named, tool_required.
Validation uses the `jsonschema` package when installed, else only parsing
and the top-level keys are checked (said in the output).

    scripts/check_structured_output.py build/sluice ../shared/fixtures/warp/kimi-linear-tok.waste
    scripts/check_structured_output.py build/sluice ../shared/fixtures/vision/k3v-tiny.waste --modes tool_named,tool_required
"""
import argparse
import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

try:
    import jsonschema
except ImportError:  # checked by keys only
    jsonschema = None

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer"},
        "email": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 4},
        "role": {"enum": ["admin", "user", "guest"]},
    },
    "required": ["name", "age", "email", "tags", "role"],
    "additionalProperties": False,
}
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 20}, "unit": {"enum": ["c", "f"]}, "days": {"type": "integer"}},
    "required": ["city", "unit", "days"],
    "additionalProperties": False,
}
LOOKUP = {"type": "object", "properties": {"query": {"type": "string", "maxLength": 30}}, "required": ["query"],
          "additionalProperties": False}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "strict": True, "parameters": WEATHER}},
    {"type": "function", "function": {"name": "lookup", "strict": True, "parameters": LOOKUP}},
]
SCHEMAS = {"get_weather": WEATHER, "lookup": LOOKUP}


def valid(value, schema):
    if jsonschema is not None:
        try:
            jsonschema.validate(value, schema)
            return True, ""
        except jsonschema.ValidationError as e:
            return False, e.message
    ok = isinstance(value, dict) and sorted(value) == sorted(schema.get("properties", value))
    return ok, "" if ok else "keys differ"


def post(base, body):
    req = urllib.request.Request(base + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def request_for(mode, seed, max_tokens):
    body = {"messages": [{"role": "user", "content": "Answer in the requested form."}], "temperature": 1,
            "seed": seed, "max_tokens": max_tokens}
    if mode == "json_schema":
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "person", "strict": True, "schema": PERSON}}
    elif mode == "json_object":
        body["response_format"] = {"type": "json_object"}
    else:
        body["tools"] = TOOLS
        body["tool_choice"] = ({"type": "function", "function": {"name": "get_weather"}} if mode == "tool_named"
                               else "required")
    return body


def check(mode, resp):
    msg = resp["choices"][0]["message"]
    try:
        if mode in ("json_schema", "json_object"):
            if msg.get("content") is None:
                return False, "content is null"
            value = json.loads(msg["content"])
            if mode == "json_object":
                return isinstance(value, dict), "" if isinstance(value, dict) else "not an object"
            return valid(value, PERSON)
        calls = msg.get("tool_calls") or []
        if len(calls) != 1:
            return False, f"{len(calls)} tool calls"
        fn = calls[0]["function"]
        if mode == "tool_named" and fn["name"] != "get_weather":
            return False, "called " + fn["name"]
        if fn["name"] not in SCHEMAS:
            return False, "unknown tool " + fn["name"]
        return valid(json.loads(fn["arguments"]), SCHEMAS[fn["name"]])
    except (ValueError, KeyError, TypeError) as e:
        return False, str(e)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sluice")
    ap.add_argument("container")
    ap.add_argument("--modes", default="json_schema,json_object,tool_named,tool_required")
    ap.add_argument("--seeds", type=int, default=12)
    ap.add_argument("--max-tokens", type=int, default=400)
    ap.add_argument("--serve-arg", action="append", default=[], help="extra argument for sluice serve (repeatable)")
    a = ap.parse_args()

    proc = subprocess.Popen([a.sluice, "serve", a.container, "--host", "127.0.0.1", "--port", "0", *a.serve_arg],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        port = None
        t0 = time.time()
        while port is None and time.time() - t0 < 60:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                sys.exit("sluice serve exited before listening")
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                port = int(m.group(1))
        if port is None:
            sys.exit("sluice serve did not start in 60 s")
        base = f"http://127.0.0.1:{port}"
        print(f"validation: {'jsonschema ' + jsonschema.__version__ if jsonschema else 'parse and keys only'}")
        failures = 0
        for mode in a.modes.split(","):
            rows = []
            for seed in range(1, a.seeds + 1):
                status, resp = post(base, request_for(mode, seed, a.max_tokens))
                if status != 200:
                    print(f"{mode} seed {seed}: HTTP {status}: {resp.get('error', {}).get('message')}")
                    rows.append((False, "", 0, 0))
                    continue
                ok, why = check(mode, resp)
                u = resp["usage"]
                rt = (u.get("completion_tokens_details") or {}).get("reasoning_tokens", 0)
                fr = resp["choices"][0]["finish_reason"]
                rows.append((ok, fr, rt, u["completion_tokens"]))
                print(f"{mode} seed {seed}: finish {fr}, reasoning {rt}, completion {u['completion_tokens']}, "
                      f"{'ok' if ok else 'FAIL: ' + why}")
            good = sum(r[0] for r in rows)
            failures += len(rows) - good
            print(f"== {mode}: {good}/{len(rows)} parse and validate; finish "
                  f"{'/'.join(sorted({r[1] for r in rows}))}; reasoning tokens "
                  f"{min(r[2] for r in rows)}..{max(r[2] for r in rows)}; completion tokens "
                  f"{min(r[3] for r in rows)}..{max(r[3] for r in rows)}")
        return 1 if failures else 0
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
