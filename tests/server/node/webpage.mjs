// The chat page at GET / in headless Chromium (Debian's chromium, driven by
// playwright-core): type a message, see a streamed answer with its thinking
// in a collapsible block and a tool call, and save a screenshot.
// Usage (run_webpage.sh): node webpage.mjs SCREENSHOT.png
import assert from 'node:assert/strict';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { startServer } from './serve.mjs';

const shot = process.argv[2] || 'webpage.png';
const dir = mkdtempSync(join(tmpdir(), 'sluice-web-'));
const forced = join(dir, 'forced.json');
// Forced replies (test-only hook): a thought, a streamed answer, then a
// tool call on the second message.
writeFileSync(forced, JSON.stringify([
  'The user says hello; answer warmly.<|close|>think<|sep|><|open|>response<|sep|>Hello! ' +
    'I am a tiny random-weight model, so this reply was forced by the test hook, token by token.' +
    '<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>',
  'A tool is needed.<|close|>think<|sep|><|open|>response<|sep|>Let me check.<|close|>response<|sep|>' +
    '<|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>' +
    '<|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|><|close|>call<|sep|>' +
    '<|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>',
]));
const srv = await startServer(['--test-forced-output', forced]);
const requests = [];
let browser;
try {
  // A fresh profile (--user-data-dir) each run.
  browser = await chromium.launchPersistentContext(join(dir, 'profile'), {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    viewport: { width: 900, height: 700 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = await browser.newPage();
  page.on('request', (r) => requests.push(r.url()));
  await page.goto(srv.base + '/');
  await page.fill('#input', 'Hello there!');
  await page.press('#input', 'Enter');
  await page.waitForSelector('.msg.assistant[data-state="done"]', { timeout: 20000 });
  const answer = await page.textContent('.msg.assistant .answer');
  assert.match(answer, /^Hello! I am a tiny random-weight model/);
  const thought = await page.textContent('.msg.assistant details.think');
  assert.match(thought, /answer warmly/);
  assert.equal(await page.getAttribute('.msg.assistant details.think', 'open'), null, 'thinking starts collapsed');
  await page.click('.msg.assistant details.think summary');

  await page.fill('#input', 'Weather in Paris?');
  await page.press('#input', 'Enter');
  await page.waitForFunction(() => document.querySelectorAll('.msg.assistant[data-state="done"]').length === 2,
                             null, { timeout: 20000 });
  const tool = await page.textContent('.msg.assistant:last-of-type .tool');
  assert.match(tool, /get_weather\(\{"city": "Paris"\}\)/);
  await page.screenshot({ path: shot, fullPage: true });
  // No request left the server: every URL the page asked for is its own.
  const foreign = requests.filter((u) => !u.startsWith(srv.base));
  assert.deepEqual(foreign, [], 'the page made external requests');
  console.log(`web page: streamed answer, thinking block and tool call shown; ${requests.length} requests, all to the server; screenshot ${shot}`);
} finally {
  if (browser) await browser.close();
  const st = await srv.stop();
  rmSync(dir, { recursive: true, force: true });
  if (st.code !== 0) { console.error(srv.stderr()); process.exitCode = 1; }
}
