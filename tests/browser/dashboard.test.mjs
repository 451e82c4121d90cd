// The dashboard in a real browser against a real server and a live local agent: the
// fleet with its filters, a host page and its actions, the audit log's filters, adding
// an agent on the admin page, the dark theme, and a phone-width layout.
//
// With KENNY_SCREENSHOTS=1 it also saves the main pages to docs/screenshots/.

import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { binDir, launchBrowser, startServer, startXvfb } from './harness.mjs';

const PASSWORD = 'a long enough password';
const SHOTS = process.env.KENNY_SCREENSHOTS === '1' ? resolve(import.meta.dirname, '../../docs/screenshots') : null;

let server;
let chrome;
let xvfb;
before(async () => {
  server = await startServer();
  chrome = await launchBrowser();
  xvfb = await startXvfb();
  server.addUser('root', 'superuser', PASSWORD);
  server.addUser('kim', 'user', PASSWORD, ['den-pc']);
  server.startAgent('den-pc', xvfb ? { DISPLAY: xvfb.display } : {});
  server.addAgent('attic-pc'); // registered, never connected: offline
});
after(async () => { await chrome?.close(); await server?.stop(); await xvfb?.stop(); });

async function signedIn(user, options = {}) {
  const context = await chrome.browser.newContext({ viewport: { width: 1280, height: 860 }, ...options });
  const page = await context.newPage();
  const cspErrors = [];
  page.on('console', (m) => { if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) cspErrors.push(m.text()); });
  page.on('pageerror', (e) => cspErrors.push(`script error: ${e.message}`));
  await page.goto(`${server.base}/login`);
  await page.fill('#username', user);
  await page.fill('#password', PASSWORD);
  await page.click('button');
  await page.waitForURL(`${server.base}/`);
  return { context, page, cspErrors };
}

async function shot(page, name) {
  if (!SHOTS) return;
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: false });
}

const visibleRows = (page) => page.$$eval('#fleet-table tbody tr', (rows) => rows.filter((r) => !r.hidden).map((r) => r.querySelector('.host-link').textContent));

async function waitOnline(page, id) {
  const deadline = Date.now() + 20000;
  for (;;) {
    const state = await page.textContent(`tr:has(a[href="/hosts/${id}"]) .state`);
    if (state === 'Online') return;
    assert.ok(Date.now() < deadline, `${id} did not come online:\n${server.logs()}`);
    await page.waitForTimeout(300);
    await page.reload();
  }
}

test('fleet, host actions, audit and admin as a superuser', async () => {
  const { context, page, cspErrors } = await signedIn('root');
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.base });

  // Fleet: the live agent and the offline one.
  await waitOnline(page, 'den-pc');
  assert.match(await page.textContent('body'), /Signed in as root \(superuser\)/);
  assert.equal(await page.textContent('tr:has(a[href="/hosts/attic-pc"]) .state'), 'Offline');
  assert.match(await page.textContent('tr:has(a[href="/hosts/den-pc"])'), /linux/);
  assert.deepEqual(await visibleRows(page), ['attic-pc', 'den-pc']);
  assert.equal(await page.getAttribute('aside#chat', 'data-agent'), '');

  // Filter and search, client-side.
  await page.fill('#fleet-search', 'ATTIC');
  assert.deepEqual(await visibleRows(page), ['attic-pc']);
  await page.selectOption('#fleet-state', 'online');
  assert.deepEqual(await visibleRows(page), []);
  assert.equal(await page.isVisible('#fleet-none'), true);
  await page.fill('#fleet-search', '');
  assert.deepEqual(await visibleRows(page), ['den-pc']);
  await page.selectOption('#fleet-state', 'offline');
  assert.deepEqual(await visibleRows(page), ['attic-pc']);
  await page.selectOption('#fleet-state', '');
  await shot(page, 'fleet');

  // Host page.
  await page.click('a.host-link[href="/hosts/den-pc"]');
  await page.waitForURL(`${server.base}/hosts/den-pc`);
  assert.equal(await page.getAttribute('aside#chat', 'data-agent'), 'den-pc');
  assert.match(await page.textContent('#facts'), /Online\s*yes/);

  await page.click('button[data-action="refresh"]');
  await page.waitForSelector('#action-status.ok', { timeout: 60000 });
  assert.match(await page.textContent('#action-status'), /Telemetry collected/);
  assert.ok(await page.$('details.section[data-section="disk"]'), 'the disk section is listed');
  assert.match(await page.textContent('#telemetry-when'), /Collected just now/);
  await page.click('details.section[data-section="memory"] summary');
  assert.match(await page.textContent('details.section[data-section="memory"] pre'), /\{/);

  await page.click('button[data-action="screenshot"]');
  await page.waitForSelector('#action-status.ok, #action-status.error', { timeout: 60000 });
  if (xvfb) {
    assert.match(await page.textContent('#action-status'), /Screen captured \(1280×800\)/);
    await page.waitForFunction(() => document.querySelector('#screenshot-img').naturalWidth === 1280);
    assert.match(await page.textContent('#screenshot-caption'), /taken just now by root/);
  } else {
    assert.match(await page.textContent('#action-status'), /display/i);
  }

  await page.click('button[data-action="remotehelp"]');
  await page.waitForSelector('#action-status.error');
  assert.match(await page.textContent('#action-status'), /\(unsupported\)/);

  await page.click('button[data-action="update"]');
  await page.waitForFunction(() => /no kenny-agent newer than/.test(document.querySelector('#action-status').textContent));
  // Recent calls follow the actions.
  await page.waitForFunction(() => /agent_update/.test(document.querySelector('#recent').textContent));
  assert.match(await page.textContent('#recent'), /telemetry_collect/);
  await page.click('button[data-action="refresh"]');
  await page.waitForSelector('#action-status.ok', { timeout: 60000 });
  await shot(page, 'host');

  // Audit log, filtered by tool, then by outcome.
  await page.click('nav.mainnav >> text=Audit');
  await page.waitForURL(`${server.base}/audit`);
  await page.fill('input[name="tool"]', 'telemetry_collect');
  await page.click('.filters button');
  await page.waitForURL(/tool=telemetry_collect/);
  const tools = await page.$$eval('#audit-table tbody td[data-label="Tool"]', (tds) => tds.map((t) => t.textContent));
  assert.ok(tools.length >= 2 && tools.every((t) => t === 'telemetry_collect'), tools.join(','));
  const froms = await page.$$eval('#audit-table tbody td[data-label="From"]', (tds) => tds.map((t) => t.textContent));
  assert.ok(froms.every((f) => f === '127.0.0.1'), froms.join(','));
  await page.fill('input[name="tool"]', '');
  await page.selectOption('select[name="outcome"]', 'refused');
  await page.click('.filters button');
  await page.waitForURL(/outcome=refused/);
  const refused = await page.$$eval('#audit-table tbody tr', (trs) => trs.map((t) => t.textContent));
  // The refused update attempt, and the API action rows of requests answered 4xx.
  assert.ok(refused.some((t) => /agent_update/.test(t)), refused.join('\n'));
  assert.ok(refused.every((t) => /refused/.test(t)), refused.join('\n'));
  await page.click('text=Clear');
  await shot(page, 'audit');

  // Admin: add an agent and get the command to run on the PC.
  await page.click('nav.mainnav >> text=Admin');
  await page.waitForURL(`${server.base}/admin`);
  await page.fill('#agent-form input[name="agent_id"]', 'kitchen-pc');
  await page.click('#agent-form button');
  await page.waitForSelector('#install-command');
  const command = await page.textContent('#install-command');
  const base = server.base.replace(/[.]/g, '\\.');
  assert.match(command, new RegExp(`^kenny-agent install --server ${base} --agent-id kitchen-pc --server-pubkey [A-Za-z0-9+/=]{44} --enroll-token kenny_agt_[A-Za-z0-9_-]+$`));
  await page.waitForSelector('#agents a[href="/hosts/kitchen-pc"]');
  assert.ok(await page.isVisible('#install-command'), 'the command stays on screen after the list refreshes');
  await page.click('#agent-result button[data-copy]');
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), command);
  // A second add of the same id says why it failed.
  await page.fill('#agent-form input[name="agent_id"]', 'kitchen-pc');
  await page.click('#agent-form button');
  await page.waitForSelector('#agent-result.error');
  assert.match(await page.textContent('#agent-result'), /already exists/);

  // The footer names the server's version and build.
  assert.match(await page.textContent('.site-footer'), /^kenny-server \d+\.\d+\.\d+ · build [\w.+-]+$/);

  // Install links: none of the builds yet, then one added from the command line; a link
  // for a Windows PC shows its command once, is listed as active, and can be revoked.
  assert.match(await page.textContent('#install-links'), /no agent builds yet/);
  server.admin(['releases', 'add', join(binDir, 'kenny-agent'), '--version', '0.1.0', '--os', 'linux', '--arch', process.arch === 'arm64' ? 'aarch64' : 'x86_64']);
  await page.reload();
  assert.match(await page.textContent('#agent-builds'), /linux\s*(x86_64|aarch64)\s*0\.1\.0/);
  await page.fill('#link-form input[name="agent_id"]', 'garage-pc');
  await page.click('#link-form button');
  await page.waitForSelector('#link-command');
  const linkCommand = await page.textContent('#link-command');
  assert.match(linkCommand, new RegExp(`irm -Method Post -UseBasicParsing -Uri '${base}/install/kenny_inl_[A-Za-z0-9_-]+'`));
  await page.waitForSelector('#install-links tr[data-link-id] button[data-link-revoke]');
  assert.match(await page.textContent('#install-links tbody'), /garage-pc\s*windows\s*active/);
  await page.click('#install-links button[data-link-revoke]');
  await page.waitForFunction(() => /revoked/.test(document.querySelector('#install-links tbody').textContent));
  assert.match(await page.textContent('#link-result'), /Revoked the link for garage-pc/);

  // A PC's enrollment is rotated (asked first), then the PC is removed.
  page.once('dialog', (d) => d.accept());
  await page.click('#agents tr[data-agent-id="kitchen-pc"] button[data-agent-action="rekey"]');
  await page.waitForFunction(() => /enroll it again/.test(document.querySelector('#agent-result').textContent));
  assert.match(await page.textContent('#install-command'), /--agent-id kitchen-pc .*--enroll-token kenny_agt_/);
  page.once('dialog', (d) => d.accept());
  await page.click('#agents tr[data-agent-id="kitchen-pc"] button[data-agent-action="remove"]');
  await page.waitForFunction(() => !document.querySelector('#agents tr[data-agent-id="kitchen-pc"]'));
  assert.match(await page.textContent('#agent-result'), /Removed kitchen-pc\. Its history is kept 30 days/);

  // Own token: shown once, on the account page.
  await page.click('nav.mainnav >> text=Account');
  await page.waitForURL(`${server.base}/account`);
  await page.fill('#token-form input[name="label"]', 'laptop');
  await page.fill('#token-form input[name="password"]', 'not my password');
  await page.click('#token-form button');
  await page.waitForSelector('#tokens-result.error');
  assert.match(await page.textContent('#tokens-result'), /password is wrong/);
  await page.fill('#token-form input[name="password"]', PASSWORD);
  await page.click('#token-form button');
  await page.waitForSelector('#new-token');
  assert.match(await page.textContent('#new-token'), /^kenny_pat_/);
  await page.waitForSelector('#tokens tr[data-token-id]');

  // A user with a generated password, then given a host.
  await page.goto(`${server.base}/admin`);
  await page.fill('#user-form input[name="username"]', 'sam');
  await page.selectOption('#user-form select[name="role"]', 'user');
  await page.click('#user-form button');
  await page.waitForSelector('#users tr[data-username="sam"]');
  assert.match(await page.textContent('#users-result'), /shown once/);
  await page.fill('#users tr[data-username="sam"] input[name="hosts"]', 'den-pc, attic-pc');
  await page.click('#users tr[data-username="sam"] button[data-user-action="save"]');
  await page.waitForFunction(() => /Saved sam/.test(document.querySelector('#users-result').textContent));
  // The status shows before the section is re-read; the stored (sorted) list follows.
  await page.waitForFunction(() => document.querySelector('#users tr[data-username="sam"] input[name="hosts"]').value === 'attic-pc, den-pc');
  await page.goto(`${server.base}/admin`);
  await shot(page, 'admin');

  // Dark theme: toggled, remembered across pages.
  const light = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  await page.click('#theme-toggle');
  assert.equal(await page.getAttribute('html', 'data-theme'), 'dark');
  const dark = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.notEqual(dark, light);
  await page.goto(`${server.base}/hosts/den-pc`);
  assert.equal(await page.getAttribute('html', 'data-theme'), 'dark');
  assert.equal(await page.evaluate(() => getComputedStyle(document.body).backgroundColor), dark);
  await shot(page, 'host-dark');
  await page.goto(server.base);
  await shot(page, 'fleet-dark');
  await page.click('#theme-toggle');
  assert.equal(await page.getAttribute('html', 'data-theme'), 'light');

  assert.deepEqual(cspErrors, [], 'no script errors or policy violations');
  await context.close();
});

test('a user sees only their own host, and the system dark theme is followed', async () => {
  const { context, page } = await signedIn('kim', { colorScheme: 'dark' });
  assert.deepEqual(await visibleRows(page), ['den-pc']);
  assert.equal(await page.isVisible('nav.mainnav >> text=Admin'), false);
  assert.equal(await page.getAttribute('html', 'data-theme'), null, 'no stored choice');
  assert.equal(await page.textContent('#theme-toggle'), 'Light', 'the system theme is dark');
  const response = await page.goto(`${server.base}/hosts/attic-pc`);
  assert.equal(response.status(), 404);
  await context.close();
});

test('phone width: no page scrolls sideways', async () => {
  const { context, page, cspErrors } = await signedIn('root', { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  for (const path of ['/', '/hosts/den-pc', '/audit', '/account', '/admin']) {
    await page.goto(`${server.base}${path}`);
    const { scroll, inner } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth }));
    assert.ok(scroll <= inner, `${path}: content is ${scroll}px wide in a ${inner}px window`);
  }
  await page.goto(server.base);
  await shot(page, 'fleet-phone');
  assert.deepEqual(cspErrors, []);
  await context.close();
});
