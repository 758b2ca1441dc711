// Agents on a K3 container (XTML markup), through the real `openai` client:
// the tool-call round trip (tools sent, the model's markup parsed into
// tool_calls, the tool result sent back, a final answer), streamed and not;
// reasoning_content and reasoning_tokens; structured output.
//
// A random-weight model cannot write K3's markup, so the server runs with
// its test-only hook --test-forced-output: each chat reply is the next text
// of a JSON array, tokenized in markup mode (the markers become K3's
// marker ids) and fed through the model and the reply parser like sampled
// tokens. Everything after the sampler (parsing, streaming, usage) is real.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { startServer } from './serve.mjs';

const TOOLS = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather for a city.',
    parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city'] },
  },
}];
const CALL = 'I need the weather tool.<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|>' +
  '<|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>' +
  '<|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>' +
  '<|open|>argument key="days" type="number"<|sep|>2<|close|>argument<|sep|>' +
  '<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>';
const ANSWER = 'The tool said 18C.<|close|>think<|sep|><|open|>response<|sep|>It is 18C and clear in Paris.' +
  '<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>';

describe('sluice serve: K3 tool calls with the openai client', () => {
  let srv, client, dir;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-agents-'));
    const forced = join(dir, 'forced.json');
    // Two round trips (not streamed, then streamed): call, answer, call, answer.
    writeFileSync(forced, JSON.stringify([CALL, ANSWER, CALL, ANSWER]));
    srv = await startServer(['--test-forced-output', forced, '--alias', 'k3']);
    client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'none' });
  });
  after(async () => {
    const st = await srv.stop();
    rmSync(dir, { recursive: true, force: true });
    assert.equal(st.code, 0, srv.stderr());
  });

  const USER = { role: 'user', content: 'What is the weather in Paris?' };

  function toolResult(call) {
    return { role: 'tool', tool_call_id: call.id, content: '{"temp_c": 18, "sky": "clear"}' };
  }

  test('round trip, not streamed', async () => {
    const r1 = await client.chat.completions.create({ model: 'k3', messages: [USER], tools: TOOLS, max_tokens: 400 });
    const m1 = r1.choices[0].message;
    assert.equal(r1.choices[0].finish_reason, 'tool_calls');
    assert.equal(m1.reasoning_content, 'I need the weather tool.');
    assert.equal(m1.tool_calls.length, 1);
    assert.equal(m1.tool_calls[0].id, 'call_1');
    assert.equal(m1.tool_calls[0].function.name, 'get_weather');
    assert.deepEqual(JSON.parse(m1.tool_calls[0].function.arguments), { city: 'Paris', days: 2 });
    assert.ok(r1.usage.completion_tokens_details.reasoning_tokens > 0);
    assert.ok(r1.usage.completion_tokens_details.reasoning_tokens < r1.usage.completion_tokens);

    const r2 = await client.chat.completions.create({
      model: 'k3', tools: TOOLS, max_tokens: 400,
      messages: [USER, { role: 'assistant', content: m1.content, tool_calls: m1.tool_calls }, toolResult(m1.tool_calls[0])],
    });
    assert.equal(r2.choices[0].finish_reason, 'stop');
    assert.equal(r2.choices[0].message.content, 'It is 18C and clear in Paris.');
    assert.equal(r2.choices[0].message.reasoning_content, 'The tool said 18C.');
    // The history (call and result) is in the prompt.
    assert.ok(r2.usage.prompt_tokens > r1.usage.prompt_tokens);
  });

  test('round trip, streamed', async () => {
    const s1 = await client.chat.completions.create({
      model: 'k3', messages: [USER], tools: TOOLS, max_tokens: 400, stream: true, stream_options: { include_usage: true },
    });
    let reasoning = '', content = '', finish = null, usage = null;
    const calls = [];
    for await (const ch of s1) {
      if (ch.usage) usage = ch.usage;
      const c = ch.choices[0];
      if (!c) continue;
      if (c.delta.reasoning_content) reasoning += c.delta.reasoning_content;
      if (c.delta.content) content += c.delta.content;
      for (const tc of c.delta.tool_calls || []) {
        const k = calls[tc.index] || (calls[tc.index] = { id: '', name: '', arguments: '' });
        if (tc.id) k.id = tc.id;
        if (tc.function?.name) k.name = tc.function.name;
        if (tc.function?.arguments) k.arguments += tc.function.arguments;
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
    assert.equal(finish, 'tool_calls');
    assert.equal(reasoning, 'I need the weather tool.');
    assert.equal(content, '');
    assert.equal(calls.length, 1);
    assert.equal(calls[0].name, 'get_weather');
    assert.deepEqual(JSON.parse(calls[0].arguments), { city: 'Paris', days: 2 });
    assert.ok(usage.completion_tokens_details.reasoning_tokens > 0);

    const s2 = await client.chat.completions.create({
      model: 'k3', tools: TOOLS, max_tokens: 400, stream: true,
      messages: [USER,
        { role: 'assistant', content: null, tool_calls: [{ id: calls[0].id, type: 'function', function: { name: calls[0].name, arguments: calls[0].arguments } }] },
        toolResult(calls[0])],
    });
    let answer = '', thought = '';
    for await (const ch of s2) {
      const c = ch.choices[0];
      if (c?.delta?.content) answer += c.delta.content;
      if (c?.delta?.reasoning_content) thought += c.delta.reasoning_content;
    }
    assert.equal(answer, 'It is 18C and clear in Paris.');
    assert.equal(thought, 'The tool said 18C.');
  });
});

describe('sluice serve: K3 thinking and structured output (sampled)', () => {
  let srv, client;
  before(async () => {
    srv = await startServer(['--no-thinking']);
    client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'none' });
  });
  after(async () => {
    const st = await srv.stop();
    assert.equal(st.code, 0, srv.stderr());
  });

  test('json_schema is enforced by constrained decoding', async () => {
    const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer' } },
                     required: ['name', 'age'], additionalProperties: false };
    for (const seed of [1, 2, 3]) {
      const r = await client.chat.completions.create({
        messages: [{ role: 'user', content: 'Describe a person.' }], max_tokens: 300, temperature: 1, seed,
        response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } },
      });
      const v = JSON.parse(r.choices[0].message.content);
      assert.equal(typeof v.name, 'string');
      assert.ok(Number.isInteger(v.age));
      assert.equal(r.choices[0].finish_reason, 'stop');
    }
  });

  test('an unenforceable schema is a 400 naming the keyword', async () => {
    await assert.rejects(client.chat.completions.create({
      messages: [{ role: 'user', content: 'x' }],
      response_format: { type: 'json_schema', json_schema: { name: 'p', schema: { type: 'string', pattern: '^a' } } },
    }), (e) => e.status === 400 && /pattern/.test(e.error.message));
  });

  test('reasoning_effort medium is refused as K3 refuses it', async () => {
    await assert.rejects(client.chat.completions.create({
      messages: [{ role: 'user', content: 'x' }], reasoning_effort: 'medium',
    }), (e) => e.status === 400 && e.param === 'reasoning_effort');
  });
});

// tools[].function.strict on K3: the test hook forces the reply up to the
// call's header ({"prefix": ...}); from there the random-weight model
// samples, and the server writes the call's arguments as a raw JSON block
// under the tool's parameters schema (constrained decoding).
describe('sluice serve: K3 strict tool calls (sampled arguments)', () => {
  const SCHEMA = {
    type: 'object',
    properties: {
      city: { type: 'string', maxLength: 12 },
      unit: { enum: ['c', 'f'] },
      days: { type: 'integer' },
      hourly: { type: 'boolean' },
      tags: { type: 'array', items: { type: 'string', maxLength: 6 }, maxItems: 3 },
    },
    required: ['city', 'unit', 'days', 'hourly', 'tags'],
    additionalProperties: false,
  };
  const STRICT = [{ type: 'function', function: { name: 'get_weather', description: 'Weather.', strict: true, parameters: SCHEMA } }];
  const PREFIX = 'Calling it.<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|>' +
    '<|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>';
  const RUNS = 6;
  let srv, client, dir, validate;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sluice-strict-'));
    const forced = join(dir, 'forced.json');
    writeFileSync(forced, JSON.stringify(Array.from({ length: 2 * RUNS }, () => ({ prefix: PREFIX }))));
    srv = await startServer(['--test-forced-output', forced]);
    client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'none' });
    // ajv (installed for the grammar tests) when present; else the checks below.
    try {
      const { createRequire } = await import('node:module');
      const req = createRequire(new URL('../../grammar/node/package.json', import.meta.url));
      const Ajv = req('ajv');
      validate = new (Ajv.default || Ajv)({ strict: false }).compile(SCHEMA);
    } catch { validate = null; }
    console.log(`strict tool arguments validated by ${validate ? 'ajv' : 'the built-in checks only (ajv not installed)'}`);
  });
  after(async () => {
    const st = await srv.stop();
    rmSync(dir, { recursive: true, force: true });
    assert.equal(st.code, 0, srv.stderr());
  });

  function check(args) {
    const v = JSON.parse(args);
    if (validate) assert.ok(validate(v), `${args}: ${JSON.stringify(validate.errors)}`);
    assert.deepEqual(Object.keys(v).sort(), ['city', 'days', 'hourly', 'tags', 'unit']);
    assert.equal(typeof v.city, 'string');
    assert.ok([...v.city].length <= 12);
    assert.ok(['c', 'f'].includes(v.unit));
    assert.ok(Number.isInteger(v.days));
    assert.equal(typeof v.hourly, 'boolean');
    assert.ok(Array.isArray(v.tags) && v.tags.length <= 3 && v.tags.every((t) => typeof t === 'string' && [...t].length <= 6));
    return v;
  }

  test('arguments parse and validate, not streamed', async () => {
    for (let seed = 1; seed <= RUNS; seed++) {
      const r = await client.chat.completions.create({
        messages: [{ role: 'user', content: 'Weather?' }], tools: STRICT, max_tokens: 250, temperature: 1, seed,
      });
      const c = r.choices[0];
      assert.equal(c.finish_reason, 'tool_calls');
      assert.equal(c.message.tool_calls[0].function.name, 'get_weather');
      check(c.message.tool_calls[0].function.arguments);
      console.log(`seed ${seed}: ${c.message.tool_calls[0].function.arguments}`);
    }
  });

  test('arguments parse and validate, streamed', async () => {
    for (let seed = 1; seed <= RUNS; seed++) {
      const s = await client.chat.completions.create({
        messages: [{ role: 'user', content: 'Weather?' }], tools: STRICT, max_tokens: 250, temperature: 1, seed,
        stream: true,
      });
      const calls = [];
      let finish = null;
      for await (const ch of s) {
        const c = ch.choices[0];
        if (!c) continue;
        for (const tc of c.delta.tool_calls || []) {
          const k = calls[tc.index] || (calls[tc.index] = { name: '', arguments: '' });
          if (tc.function?.name) k.name = tc.function.name;
          if (tc.function?.arguments) k.arguments += tc.function.arguments;
        }
        if (c.finish_reason) finish = c.finish_reason;
      }
      assert.equal(finish, 'tool_calls');
      assert.equal(calls[0].name, 'get_weather');
      check(calls[0].arguments);
    }
  });

  test('a strict tool whose parameters cannot be enforced is a 400 naming the field', async () => {
    const bad = [{ type: 'function', function: { name: 'f', strict: true,
      parameters: { type: 'object', properties: { a: { type: 'string', pattern: '^x' } }, required: ['a'] } } }];
    await assert.rejects(client.chat.completions.create({ messages: [{ role: 'user', content: 'x' }], tools: bad }),
      (e) => e.status === 400 && e.param === 'tools[0].function.parameters' && /pattern/.test(e.error.message));
  });
});
