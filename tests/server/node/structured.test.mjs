// Structured output under thinking, through the openai client, on a real
// container with the server's defaults (thinking on, the default thinking
// budget): the container's tokenizer carries K3's XTML markers, so it is
// served in the XTML format and thinks by default. A random-weight model
// never ends its thinking by itself: before the reply guide
// (src/server/reply_guide.h), every such request ended with
// finish_reason "length" and content null.
//
// What must hold: response_format json_schema (strict), 12 seeds at
// temperature 1 with max_tokens 400, all parse and validate against the
// schema (ajv when installed); json_object the same, as objects; forced
// tool calls, named and "required", whose arguments parse and validate.
// CTest runs it on kimi-linear-tok (server_structured) and on the K3
// fixture with a tokenizer, vision/k3v-tiny (server_structured_k3).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './serve.mjs';

const SEEDS = Array.from({ length: 12 }, (_, i) => i + 1);
const MAX_TOKENS = 400;
const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 24 },
    age: { type: 'integer' },
    email: { anyOf: [{ type: 'string' }, { type: 'null' }] },
    tags: { type: 'array', items: { type: 'string', maxLength: 12 }, maxItems: 4 },
    role: { enum: ['admin', 'user', 'guest'] },
  },
  required: ['name', 'age', 'email', 'tags', 'role'],
  additionalProperties: false,
};
const WEATHER = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 20 }, unit: { enum: ['c', 'f'] }, days: { type: 'integer' } },
  required: ['city', 'unit', 'days'],
  additionalProperties: false,
};
const TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather for a city.', strict: true, parameters: WEATHER } },
  { type: 'function', function: { name: 'lookup', description: 'Look something up.', strict: true,
    parameters: { type: 'object', properties: { query: { type: 'string', maxLength: 30 } }, required: ['query'], additionalProperties: false } } },
];

let Ajv = null;
try {
  const { createRequire } = await import('node:module');
  const req = createRequire(new URL('../../grammar/node/package.json', import.meta.url));
  const mod = req('ajv');
  Ajv = mod.default || mod;
} catch { Ajv = null; }
console.log(`outputs validated by ${Ajv ? 'ajv' : 'the built-in checks only (ajv not installed: npm ci in tests/grammar/node)'}`);

function validator(schema) {
  if (Ajv) {
    const v = new Ajv({ strict: false }).compile(schema);
    return (x) => [v(x), JSON.stringify(v.errors)];
  }
  // Without ajv: the keys, their types and the caps, for the schemas above.
  return (x) => {
    if (typeof x !== 'object' || x === null || Array.isArray(x)) return [false, 'not an object'];
    const keys = Object.keys(x).sort().join(',');
    if (keys !== Object.keys(schema.properties).sort().join(',')) return [false, `keys ${keys}`];
    for (const [k, s] of Object.entries(schema.properties)) {
      const v = x[k];
      if (s.type === 'string' && (typeof v !== 'string' || [...v].length > (s.maxLength ?? Infinity))) return [false, k];
      if (s.type === 'integer' && !Number.isInteger(v)) return [false, k];
      if (s.enum && !s.enum.includes(v)) return [false, k];
      if (s.type === 'array' && (!Array.isArray(v) || v.length > (s.maxItems ?? Infinity))) return [false, k];
    }
    return [true, ''];
  };
}

function summary(label, rows) {
  const r = rows.map((x) => x.reasoning).sort((a, b) => a - b);
  const c = rows.map((x) => x.completion).sort((a, b) => a - b);
  console.log(`${label}: ${rows.filter((x) => x.ok).length}/${rows.length} parse and validate; ` +
    `reasoning tokens ${r[0]}..${r[r.length - 1]}, completion tokens ${c[0]}..${c[c.length - 1]}, ` +
    `finish ${[...new Set(rows.map((x) => x.finish))].join('/')}`);
}

describe('structured output with the server defaults (thinking on)', () => {
  let srv, client;
  before(async () => {
    srv = await startServer([]);
    client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'none' });
  });
  after(async () => {
    const st = await srv.stop();
    assert.equal(st.code, 0, srv.stderr());
  });

  test('json_schema (strict): 12 seeds at temperature 1, max_tokens 400, all parse and validate', async () => {
    const check = validator(PERSON);
    const rows = [];
    for (const seed of SEEDS) {
      const r = await client.chat.completions.create({
        messages: [{ role: 'user', content: 'Describe a person as JSON.' }], temperature: 1, seed, max_tokens: MAX_TOKENS,
        response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: PERSON } },
      });
      const c = r.choices[0];
      assert.equal(typeof c.message.content, 'string', `seed ${seed}: ${JSON.stringify(c)}`);
      const v = JSON.parse(c.message.content);
      const [ok, why] = check(v);
      assert.ok(ok, `seed ${seed}: ${c.message.content}: ${why}`);
      assert.equal(c.finish_reason, 'stop');
      assert.ok(r.usage.completion_tokens <= MAX_TOKENS);
      // Thinking is on by default here: the budget was spent, then closed.
      assert.ok(r.usage.completion_tokens_details.reasoning_tokens > 0, `seed ${seed}: no reasoning`);
      rows.push({ ok, finish: c.finish_reason, reasoning: r.usage.completion_tokens_details.reasoning_tokens,
                  completion: r.usage.completion_tokens });
    }
    summary('json_schema', rows);
  });

  test('json_object: 12 seeds at temperature 1, max_tokens 400, all parse as objects', async () => {
    const rows = [];
    for (const seed of SEEDS) {
      const r = await client.chat.completions.create({
        messages: [{ role: 'user', content: 'Give me a JSON object.' }], temperature: 1, seed, max_tokens: MAX_TOKENS,
        response_format: { type: 'json_object' },
      });
      const c = r.choices[0];
      const v = JSON.parse(c.message.content);
      assert.ok(typeof v === 'object' && v !== null && !Array.isArray(v), `seed ${seed}: ${c.message.content}`);
      assert.equal(c.finish_reason, 'stop');
      rows.push({ ok: true, finish: c.finish_reason, reasoning: r.usage.completion_tokens_details.reasoning_tokens,
                  completion: r.usage.completion_tokens });
    }
    summary('json_object', rows);
  });

  test('json_schema streamed: the content deltas parse', async () => {
    const s = await client.chat.completions.create({
      messages: [{ role: 'user', content: 'Describe a person.' }], temperature: 1, seed: 77, max_tokens: MAX_TOKENS, stream: true,
      response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: PERSON } },
    });
    let content = '', finish = null;
    for await (const ch of s) {
      const c = ch.choices[0];
      if (c?.delta?.content) content += c.delta.content;
      if (c?.finish_reason) finish = c.finish_reason;
    }
    const [ok, why] = validator(PERSON)(JSON.parse(content));
    assert.ok(ok, `${content}: ${why}`);
    assert.equal(finish, 'stop');
  });

  test('thinking_budget bounds reasoning tokens; a too small max_tokens is a 400', async () => {
    const r = await client.chat.completions.create({
      messages: [{ role: 'user', content: 'Think, then answer.' }], temperature: 1, seed: 3, max_tokens: 120,
      thinking_budget: 20,
    });
    assert.ok(r.usage.completion_tokens_details.reasoning_tokens <= 20, JSON.stringify(r.usage));
    await assert.rejects(client.chat.completions.create({
      messages: [{ role: 'user', content: 'x' }], max_tokens: 5,
      response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: PERSON } },
    }), (e) => e.status === 400 && e.param === 'max_tokens' && e.code === 'max_tokens_too_small');
  });

  test('forced tool calls (named and required): arguments parse and validate', async () => {
    const checks = { get_weather: validator(WEATHER), lookup: validator(TOOLS[1].function.parameters) };
    for (const choice of [{ type: 'function', function: { name: 'get_weather' } }, 'required']) {
      const rows = [];
      for (const seed of SEEDS) {
        const r = await client.chat.completions.create({
          messages: [{ role: 'user', content: 'What is the weather in Paris?' }], temperature: 1, seed,
          max_tokens: MAX_TOKENS, tools: TOOLS, tool_choice: choice,
        });
        const c = r.choices[0];
        assert.equal(c.finish_reason, 'tool_calls', `seed ${seed}: ${JSON.stringify(c)}`);
        assert.equal(c.message.tool_calls.length, 1);
        const fn = c.message.tool_calls[0].function;
        if (typeof choice === 'object') assert.equal(fn.name, 'get_weather');
        assert.ok(fn.name in checks, fn.name);
        const [ok, why] = checks[fn.name](JSON.parse(fn.arguments));
        assert.ok(ok, `seed ${seed}: ${fn.arguments}: ${why}`);
        rows.push({ ok, finish: c.finish_reason, reasoning: r.usage.completion_tokens_details.reasoning_tokens,
                    completion: r.usage.completion_tokens });
      }
      summary(`tool_choice ${typeof choice === 'object' ? 'named' : choice}`, rows);
    }
  });
});
