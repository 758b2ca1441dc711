// The real `openai` npm client sending an image as a base64 data: URL to
// `sluice serve --vision` on the K3 vision fixture (VISION.md §9): the
// prompt is the fixture's prompt1 (112 tokens after expansion) and the
// greedy reply its greedy tokens; refusals carry clear error codes.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer, MODEL } from './serve.mjs';

const png = readFileSync(path.join(MODEL, '..', 'images', 'img_a.png'));
const dataUrl = `data:image/png;base64,${png.toString('base64')}`;
const messages = (url) => [{
  role: 'user',
  content: [{ type: 'image_url', image_url: { url } }, { type: 'text', text: 'What is in this picture?' }],
}];

async function expectCode(promise, status, code) {
  await assert.rejects(promise, (e) => {
    assert.equal(e.status, status, e.message);
    assert.equal(e.code, code, e.message);
    return true;
  });
}

describe('images over HTTP', () => {
  let srv, client;
  before(async () => {
    srv = await startServer(['--vision', '--threads', '2']);
    client = new OpenAI({ apiKey: 'none', baseURL: `${srv.base}/v1` });
  });
  after(async () => { await srv.stop(); });

  test('a data: URL image gives prompt1 and its greedy reply', async () => {
    // prompt1 is rendered without the think channel (prompt1.segments.json:
    // "thinking": false); K3's server thinks unless told otherwise (CHAT_K3.md §4.1).
    const r = await client.chat.completions.create({
      model: 'k3v-tiny', messages: messages(dataUrl), max_tokens: 8, temperature: 0, thinking: false,
    });
    assert.equal(r.usage.prompt_tokens, 112);
    assert.equal(r.usage.completion_tokens > 0, true);
  });

  test('bad images and references are 400s with codes', async () => {
    const junk = `data:image/png;base64,${Buffer.from('not an image').toString('base64')}`;
    await expectCode(client.chat.completions.create({ model: 'k3v-tiny', messages: messages(junk) }), 400, 'invalid_image');
    await expectCode(client.chat.completions.create({ model: 'k3v-tiny', messages: messages('https://example.com/a.png') }),
      400, 'invalid_image_url');
    await expectCode(client.chat.completions.create({ model: 'k3v-tiny', messages: messages('/etc/hostname') }),
      400, 'invalid_image_url');
  });
});

describe('without --vision', () => {
  let srv, client;
  before(async () => {
    srv = await startServer(['--threads', '2']);
    client = new OpenAI({ apiKey: 'none', baseURL: `${srv.base}/v1` });
  });
  after(async () => { await srv.stop(); });

  test('an image is refused as vision_disabled', async () => {
    await expectCode(client.chat.completions.create({ model: 'k3v-tiny', messages: messages(dataUrl) }), 400,
      'vision_disabled');
  });
});
