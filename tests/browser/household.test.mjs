// The host page's family cards in a real browser against a real server and a live local
// agent whose hosts file is a temporary one (KENNY_HOSTS_FILE): a superuser turns the web
// filter on with a category, adds a block entry and a school-night window, applies it and
// sees it in the PC's hosts file; the local accounts card lists the PC's accounts with
// their actions; a `user` sees both cards without any form.
//
// The accounts card's buttons are not pressed here: they would change this machine's own
// accounts (tests/e2e/test_accounts.py presses them in a private /etc).
//
// With KENNY_SCREENSHOTS=1 it also saves both cards to docs/screenshots/.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { launchBrowser, signIn, startServer } from './harness.mjs';

const PASSWORD = 'a long enough password';
const SHOTS = process.env.KENNY_SCREENSHOTS === '1' ? resolve(import.meta.dirname, '../../docs/screenshots') : null;

let server;
let chrome;
let scratch;
let hosts;
before(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'kenny-household-'));
  hosts = join(scratch, 'hosts');
  writeFileSync(hosts, '127.0.0.1 localhost\n');
  mkdirSync(join(scratch, 'policy'));
  server = await startServer();
  chrome = await launchBrowser();
  server.addUser('root', 'superuser', PASSWORD);
  server.addUser('kim', 'user', PASSWORD, ['kid-pc']);
  server.startAgent('kid-pc', { KENNY_HOSTS_FILE: hosts, KENNY_POLICY_ROOT: join(scratch, 'policy') });
});
after(async () => { await chrome?.close(); await server?.stop(); rmSync(scratch, { recursive: true, force: true }); });

const signedIn = (user) => signIn(chrome, server, user, PASSWORD, { width: 1280, height: 900 });

async function until(what, check, label, timeout = 20000) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const value = await what();
    if (check(value)) return value;
    assert.ok(Date.now() < deadline, `${label}: last value ${JSON.stringify(value)}\n${server.logs()}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

const blocked = () => {
  const text = readFileSync(hosts, 'utf8');
  return text.split('\n').filter((l) => l.startsWith('0.0.0.0 ')).map((l) => l.split(/\s+/)[1]);
};

test('a superuser sets up a school-night filter and sees the accounts', async () => {
  const { context, page, errors } = await signedIn('root');
  await page.goto(`${server.base}/hosts/kid-pc`);
  await until(async () => {
    await page.reload();
    return page.textContent('#accounts');
  }, (t) => !/No accounts reported yet/.test(t), 'the agent sends its first snapshot');
  assert.equal(await page.getAttribute('.wf-summary', 'data-state'), 'not set up');

  // On, with the games category.
  await page.check('#wf-settings input[name="enabled"]');
  await page.check('#wf-settings input[name="category"][value="games"]');
  await page.click('#wf-settings button[type="submit"]');
  await until(() => page.textContent('#wf-status'), (t) => /Saved/.test(t), 'saved');
  await until(() => blocked(), (b) => b.includes('roblox.com'), 'the server applies the games list to the PC');

  // A block entry of our own.
  await page.fill('#wf-entry input[name="domain"]', 'Bad.Example');
  await page.selectOption('#wf-entry select[name="kind"]', 'block');
  await page.click('#wf-entry button[type="submit"]');
  await until(() => page.textContent('#wf-status'), (t) => /Bad\.Example: block entry added/.test(t), 'entry added');
  assert.match(await page.textContent('#wf-entries'), /bad\.example/);
  await until(() => blocked(), (b) => b.includes('bad.example') && b.includes('www.bad.example'), 'the entry reaches the PC');

  // A school-night window turning social on, in the family's time zone.
  await page.fill('#wf-window input[name="name"]', 'school nights');
  for (const d of ['sun', 'mon', 'tue', 'wed', 'thu']) await page.check(`#wf-window input[name="day"][value="${d}"]`);
  await page.fill('#wf-window input[name="start"]', '20:30');
  await page.fill('#wf-window input[name="end"]', '07:00');
  await page.fill('#wf-window input[name="time_zone"]', 'Europe/London');
  await page.check('#wf-window input[name="window-category"][value="social"]');
  await page.click('#wf-window button[type="submit"]');
  await until(() => page.textContent('#wf-status'), (t) => /Window "school nights" added/.test(t), 'window added');
  const windows = await page.textContent('#wf-windows');
  assert.match(windows, /school nights: mon, tue, wed, thu, sun 20:30–07:00 Europe\/London: social on/);

  // Applied now, by hand: the card says so.
  await page.click('#webfilter button[data-wf="push"]');
  await until(() => page.textContent('#wf-status'), (t) => /Applied: \d+ names blocked/.test(t), 'applied');
  assert.equal(await page.getAttribute('.wf-summary', 'data-state'), 'applied');
  assert.match(await page.textContent('#webfilter'), /Next change/);
  if (SHOTS) {
    mkdirSync(SHOTS, { recursive: true });
    await page.locator('#webfilter').screenshot({ path: join(SHOTS, 'webfilter.png') });
  }

  // A bad name is refused with the reason, and nothing changes.
  await page.fill('#wf-entry input[name="domain"]', 'http://not a name/');
  await page.click('#wf-entry button[type="submit"]');
  await until(() => page.textContent('#wf-status'), (t) => /nothing was changed/.test(t), 'refused');

  // The accounts card: this PC's accounts, each with its actions, and the forms.
  const accounts = await page.textContent('#account-list');
  assert.match(accounts, /root/);
  assert.equal(await page.locator('#account-list button[data-acct="account_delete"][data-principal="root"]').count(), 1);
  assert.equal(await page.locator('#acct-create input[type="password"][autocomplete="new-password"]').count(), 1);
  if (SHOTS) await page.locator('#accounts').screenshot({ path: join(SHOTS, 'accounts.png') });
  assert.deepEqual(errors, []);
  await context.close();
});

test('a user sees the cards without the forms', async () => {
  const { context, page, errors } = await signedIn('kim');
  await page.goto(`${server.base}/hosts/kid-pc`);
  assert.equal(await page.locator('#webfilter').count(), 1);
  assert.equal(await page.locator('#wf-settings, #wf-entry, #wf-window, #acct-create, #acct-policy').count(), 0);
  assert.equal(await page.locator('#webfilter button[data-wf-remove], #accounts button[data-acct]').count(), 0);
  assert.match(await page.textContent('#accounts'), /needs the operator role/);
  assert.deepEqual(errors, []);
  await context.close();
});
