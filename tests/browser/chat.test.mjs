// The chat panel in a real browser: the server talks to a local scripted stand-in for
// the Anthropic Messages API (anthropic-mock.mjs, real HTTP and streaming). Sign in,
// open a live PC's page, ask in the chat, see a read-only call run at once, approve a
// held change and see it run on that PC; and without a key the panel says how to set one.

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { API_KEY, startAnthropicMock } from './anthropic-mock.mjs';
import { launchBrowser, startServer } from './harness.mjs';

const PASSWORD = 'a long enough password';
const SHOTS = process.env.KENNY_SCREENSHOTS === '1' ? resolve(import.meta.dirname, '../../docs/screenshots') : null;

let model;
let server;
let plain;
let chrome;
before(async () => {
  model = await startAnthropicMock();
  server = await startServer(['--anthropic-base-url', model.baseUrl, '--chat-model', 'claude-test'], { KENNY_ANTHROPIC_API_KEY: API_KEY });
  plain = await startServer();
  chrome = await launchBrowser();
  for (const s of [server, plain]) s.addUser('root', 'superuser', PASSWORD);
  server.startAgent('den-pc');
});
after(async () => { await chrome?.close(); await server?.stop(); await plain?.stop(); await model?.close(); });

async function signedIn(base) {
  const context = await chrome.browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) errors.push(m.text()); });
  await page.goto(`${base}/login`);
  await page.fill('#username', 'root');
  await page.fill('#password', PASSWORD);
  await page.click('button');
  await page.waitForURL(`${base}/`);
  return { context, page, errors };
}

async function openHost(page, id) {
  const deadline = Date.now() + 20000;
  for (;;) {
    await page.goto(`${server.base}/hosts/${id}`);
    if (await page.$('.state:text("Online")')) return;
    assert.ok(Date.now() < deadline, `${id} did not come online:\n${server.logs()}`);
    await page.waitForTimeout(300);
  }
}

test('ask, see a read-only call run, approve a held change on the frozen PC', async () => {
  const { context, page, errors } = await signedIn(server.base);
  await openHost(page, 'den-pc');
  await page.waitForSelector('#chat .chat-form');
  assert.equal(await page.$eval('#chat .chat-target', (s) => s.value), 'den-pc');

  await page.fill('#chat .chat-input', 'call fs_disk_usage {}');
  await page.click('#chat .chat-send');
  await page.waitForSelector('#chat .tool-ok');
  await page.waitForSelector('#chat .msg-assistant:has-text("Result: Output of fs_disk_usage on PC den-pc")');

  const marker = join(mkdtempSync(join(tmpdir(), 'kenny-chat-')), 'approved');
  await page.fill('#chat .chat-input', `call shell_exec ${JSON.stringify({ command: `echo approved > ${marker}` })}`);
  await page.click('#chat .chat-send');
  const held = await page.waitForSelector('#chat .held');
  assert.equal(await held.$eval('.held-pc', (e) => e.textContent), 'den-pc');
  assert.equal(await held.$eval('.held-reason', (e) => e.textContent), 'Held because it changes the PC.');
  assert.match(await held.$eval('.held-args', (e) => e.textContent), /echo approved/);
  assert.equal(existsSync(marker), false, 'nothing runs before approval');
  if (SHOTS) { mkdirSync(SHOTS, { recursive: true }); await page.screenshot({ path: join(SHOTS, 'chat-held.png') }); }

  await held.$eval('.approve', (b) => b.click());
  await page.waitForSelector('#chat .held.approved');
  await page.waitForSelector('#chat .msg-assistant:has-text("Result: Output of shell_exec on PC den-pc")');
  assert.equal(readFileSync(marker, 'utf8').trim(), 'approved');

  // The conversation is kept: reopening the page shows it, with the decided call.
  await page.reload();
  await page.waitForSelector('#chat .msg-user:has-text("call fs_disk_usage")');
  assert.equal(await page.$$eval('#chat .held button:not([disabled])', (b) => b.length), 0);
  assert.deepEqual(errors, []);
  await context.close();
});

test('without an API key the panel says how to set one and the page works', async () => {
  const { context, page, errors } = await signedIn(plain.base);
  await page.waitForSelector('#chat .chat-notice.error');
  assert.match(await page.textContent('#chat .chat-notice'), /KENNY_ANTHROPIC_API_KEY/);
  assert.equal(await page.$eval('#chat .chat-form', (f) => f.hidden), true);
  assert.ok(await page.$('#fleet-table'), 'the fleet still shows');
  assert.deepEqual(errors, []);
  await context.close();
});
