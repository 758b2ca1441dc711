// Bounded loopback load test of `sluice serve`: LOAD_REQUESTS requests
// (default 240) from LOAD_CLIENTS concurrent clients (default 8), mixing
// streamed, non-streamed, aborted and malformed requests, against a server
// with a small queue (--max-queue 2) so that 429s happen. Stops by itself:
// a fixed request count, a per-request timeout and an overall time limit
// (LOAD_TIME_LIMIT_S, default 240). Checks: no crash (clean exit on
// SIGTERM), every response valid for its kind, the queue bound held (health
// polled throughout), 429 counts agree with the server's. Prints a summary;
// LOAD_OUT=FILE also writes it as JSON. Traffic goes to 127.0.0.1 only.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { startServer } from './serve.mjs';

const N = Number(process.env.LOAD_REQUESTS ?? 240);
const CLIENTS = Number(process.env.LOAD_CLIENTS ?? 8);
const TIME_LIMIT_S = Number(process.env.LOAD_TIME_LIMIT_S ?? 240);
const MAX_QUEUE = 2;
const KEY = 'load-key';

// Malformed classes and the answer each must get. The context check needs
// the tokenizer, so it runs on the worker: that request takes a queue slot
// and may get 429 like any other.
const MALFORMED = [
  { name: 'bad-json', path: '/v1/chat/completions', body: '{"messages": [', status: [400] },
  { name: 'wrong-type', path: '/v1/chat/completions', body: '{"messages": "hi", "max_tokens": "x"}', status: [400] },
  { name: 'unknown-model', path: '/v1/completions', body: '{"model": "nope", "prompt": "x"}', status: [404] },
  { name: 'bad-key', path: '/v1/chat/completions', body: '{"messages": [{"role": "user", "content": "x"}]}', status: [401], key: 'wrong' },
  { name: 'too-many-tokens', path: '/v1/completions', body: '{"prompt": "x", "max_tokens": 100000}', status: [400, 429] },
  { name: 'bad-ids', path: '/v1/completions', body: '{"prompt": [1, -5]}', status: [400, 429] },
];

function kindOf(i) {
  const k = i % 12;
  if (k === 11) return 'aborted';
  if (k === 5 || k === 10) return 'malformed';
  return ['chat', 'chat', 'chat-stream', 'completion', 'completion-stream'][k % 5];
}

function isErrorObject(j) {
  return j && typeof j.error === 'object' && typeof j.error.message === 'string' && typeof j.error.type === 'string';
}

function checkUsage(u, maxTokens) {
  return u && Number.isInteger(u.prompt_tokens) && u.prompt_tokens > 0 && Number.isInteger(u.completion_tokens) &&
    u.completion_tokens >= 0 && u.completion_tokens <= maxTokens && u.total_tokens === u.prompt_tokens + u.completion_tokens;
}

// Validates a 200 SSE body: JSON chunks, one finish_reason, usage, [DONE] last.
function checkStream(text, maxTokens) {
  const events = text.split('\n\n').filter((e) => e.length);
  if (events.at(-1) !== 'data: [DONE]') return 'no [DONE] at the end';
  let finishes = 0, usage = null;
  for (const e of events.slice(0, -1)) {
    if (!e.startsWith('data: ')) return `not an SSE data line: ${e.slice(0, 60)}`;
    let j;
    try { j = JSON.parse(e.slice(6)); } catch { return `bad JSON in chunk: ${e.slice(0, 80)}`; }
    if (j.error) return `error event: ${j.error.message}`;
    if (j.usage) usage = j.usage;
    for (const c of j.choices) if (c.finish_reason) { finishes++; if (!['stop', 'length'].includes(c.finish_reason)) return 'bad finish_reason'; }
  }
  if (finishes !== 1) return `${finishes} finish_reasons`;
  if (!checkUsage(usage, maxTokens)) return `bad usage ${JSON.stringify(usage)}`;
  return null;
}

function percentile(sorted, p) {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

test(`load: ${N} requests, ${CLIENTS} clients, --max-queue ${MAX_QUEUE}`, { timeout: (TIME_LIMIT_S + 60) * 1000 }, async () => {
  const srv = await startServer(['--api-key', KEY, '--max-queue', String(MAX_QUEUE), '--ctx', '1024']);
  const base = srv.base;
  const deadline = Date.now() + TIME_LIMIT_S * 1000;
  const results = [];
  const invalid = [];
  let next = 0;

  // Watch the queue while the load runs.
  let maxWaiting = 0, maxRunning = 0, polling = true;
  const poller = (async () => {
    while (polling) {
      try {
        const h = await srv.health();
        maxWaiting = Math.max(maxWaiting, h.queue.waiting);
        maxRunning = Math.max(maxRunning, h.queue.running);
      } catch (e) { invalid.push({ kind: 'health', why: String(e) }); }
      await new Promise((r) => setTimeout(r, 20));
    }
  })();

  async function one(i) {
    const kind = kindOf(i);
    const maxTokens = 8 + (i % 17);
    let path = '/v1/chat/completions', body, key = KEY, expect = [200, 429], mal = null;
    const messages = [{ role: 'user', content: `Request ${i}: tell me something.` }];
    if (kind === 'malformed') {
      mal = MALFORMED[Math.floor(i / 5) % MALFORMED.length];
      ({ path, body } = mal);
      key = mal.key ?? KEY;
      expect = mal.status;
    } else if (kind.startsWith('chat')) {
      body = JSON.stringify({ messages, max_tokens: maxTokens, seed: i, stream: kind === 'chat-stream',
        ...(kind === 'chat-stream' && i % 2 ? { stream_options: { include_usage: true } } : {}) });
    } else if (kind.startsWith('completion')) {
      path = '/v1/completions';
      body = JSON.stringify({ prompt: `Request ${i}`, max_tokens: maxTokens, seed: i, logprobs: 2, stream: kind === 'completion-stream' });
    } else {  // aborted: a long stream the client walks away from
      path = '/v1/completions';
      body = JSON.stringify({ prompt: 'Once', max_tokens: 400, seed: i, stream: true });
    }
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), 30000);
    const t0 = performance.now();
    let status = 0, why = null, completion = 0;
    try {
      const r = await fetch(base + path, {
        method: 'POST', body, signal: ac.signal,
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
      });
      status = r.status;
      if (kind === 'aborted' && status === 200) {
        const rd = r.body.getReader();
        await rd.read();
        ac.abort();
        rd.cancel().catch(() => {});
      } else {
        const text = await r.text();
        if (!expect.includes(status)) why = `status ${status} not in ${expect}: ${text.slice(0, 120)}`;
        else if (status === 200) {
          if (r.headers.get('content-type')?.includes('text/event-stream')) why = checkStream(text, maxTokens);
          else {
            const j = JSON.parse(text);
            if (!['stop', 'length'].includes(j.choices?.[0]?.finish_reason)) why = 'bad finish_reason';
            else if (!checkUsage(j.usage, maxTokens)) why = `bad usage ${JSON.stringify(j.usage)}`;
            else completion = j.usage.completion_tokens;
          }
          if (!why && text.includes('"usage":{')) {
            const m = [...text.matchAll(/"completion_tokens":(\d+)/g)];
            if (m.length) completion = Number(m.at(-1)[1]);
          }
        } else {
          let j = null;
          try { j = JSON.parse(text); } catch { /* below */ }
          if (!isErrorObject(j)) why = `status ${status} without an error object: ${text.slice(0, 120)}`;
          else if (status === 429 && j.error.code !== 'rate_limit_exceeded') why = '429 without rate_limit_exceeded';
        }
      }
    } catch (e) {
      if (!(kind === 'aborted' && ac.signal.aborted)) why = `request failed: ${e.message}`;
    } finally {
      clearTimeout(timer);
    }
    const ms = performance.now() - t0;
    results.push({ i, kind, status, ms, completion, malformed: mal?.name });
    if (why) invalid.push({ i, kind, why });
    // Back off after a 429, as Retry-After asks (shortened: bounded test).
    if (status === 429) await new Promise((r) => setTimeout(r, 100));
  }

  const t0 = performance.now();
  await Promise.all(Array.from({ length: CLIENTS }, async () => {
    while (next < N && Date.now() < deadline) await one(next++);
  }));
  const wall = (performance.now() - t0) / 1000;
  polling = false;
  await poller;

  const h = await srv.health();
  const st = await srv.stop();

  const ok = results.filter((r) => r.status === 200 && r.kind !== 'aborted');
  const lat = ok.map((r) => r.ms).sort((a, b) => a - b);
  const rej = results.filter((r) => r.status === 429);
  const rejLat = rej.map((r) => r.ms).sort((a, b) => a - b);
  const tokens = ok.reduce((s, r) => s + r.completion, 0);
  const count = (k) => results.filter((r) => r.kind === k).length;
  const summary = {
    requests: results.length, clients: CLIENTS, max_queue: MAX_QUEUE, wall_s: +wall.toFixed(3),
    by_kind: Object.fromEntries(['chat', 'chat-stream', 'completion', 'completion-stream', 'malformed', 'aborted'].map((k) => [k, count(k)])),
    status: results.reduce((m, r) => ({ ...m, [r.status]: (m[r.status] ?? 0) + 1 }), {}),
    ok_200: ok.length, rejected_429: rej.length, invalid: invalid.length,
    latency_ms_200: { p50: +percentile(lat, 50)?.toFixed(1), p99: +percentile(lat, 99)?.toFixed(1), max: +lat.at(-1)?.toFixed(1) },
    latency_ms_429: { p50: +percentile(rejLat, 50)?.toFixed(1), p99: +percentile(rejLat, 99)?.toFixed(1) },
    throughput: { ok_requests_per_s: +(ok.length / wall).toFixed(2), all_requests_per_s: +(results.length / wall).toFixed(2), completion_tokens_per_s: +(tokens / wall).toFixed(1) },
    queue: { max_waiting_seen: maxWaiting, max_running_seen: maxRunning, server_peak_waiting: h.queue.peak_waiting },
    server: h.requests, exit: st,
  };
  console.log(JSON.stringify(summary, null, 1));
  if (process.env.LOAD_OUT) writeFileSync(process.env.LOAD_OUT, JSON.stringify(summary, null, 1) + '\n');

  assert.deepEqual(invalid, [], 'every response valid');
  assert.ok(results.length >= Math.min(N, 200), `at least 200 requests ran (${results.length}; time limit hit?)`);
  assert.equal(st.code, 0, `no crash: clean exit on SIGTERM (${JSON.stringify(st)})\n${srv.stderr().slice(-2000)}`);
  assert.ok(maxWaiting <= MAX_QUEUE && h.queue.peak_waiting <= MAX_QUEUE, 'the queue bound held');
  assert.ok(maxRunning <= 1, 'one generation at a time');
  assert.ok(rej.length > 0, '429s happened with 8 clients and a queue of 2');
  assert.equal(h.requests.rejected, rej.length, 'every 429 the clients saw is one the server counted');
  assert.ok(ok.length > 0);
  assert.ok(h.requests.cancelled >= 1, 'aborted streams were cancelled');
});
