// The account page and the admin's account actions in a real browser: a person sees
// the apps they connected and disconnects one; changing the password asks, with the
// number of tokens, before revoking them; a superuser disabling an account is told how
// many tokens it has and may revoke them for good.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { launchBrowser, pkce, signIn, startServer } from './harness.mjs';

const PASSWORD = 'a long enough password';
const NEW_PASSWORD = 'another long password';

let server;
let chrome;
before(async () => {
  server = await startServer();
  chrome = await launchBrowser();
  server.addUser('root', 'superuser', PASSWORD);
  server.addUser('kim', 'user', PASSWORD);
  server.addUser('lou', 'operator', PASSWORD);
});
after(async () => { await chrome?.close(); await server?.stop(); });

const signedIn = (user, password = PASSWORD) => signIn(chrome, server, user, password);

const pat = (user) => server.admin(['token', 'create', user]).match(/kenny_pat_[A-Za-z0-9_-]+/)[0];

async function status(path, token) {
  return (await fetch(`${server.base}${path}`, { headers: { Authorization: `Bearer ${token}` } })).status;
}

async function mcpStatus(token) {
  const r = await fetch(`${server.base}/mcp`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '0' } } }),
  });
  return r.status;
}

// Connects an app as the person signed in on `page`: registration, consent, code exchange.
async function connectApp(page, name) {
  const redirect = 'http://127.0.0.1:9/callback';
  const reg = await (await fetch(`${server.base}/oauth/register`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ client_name: name, redirect_uris: ['http://127.0.0.1/callback'] }),
  })).json();
  const { verifier, challenge } = pkce();
  const authorize = new URL(`${server.base}/oauth/authorize`);
  for (const [k, v] of Object.entries({ response_type: 'code', client_id: reg.client_id, redirect_uri: redirect,
    code_challenge: challenge, code_challenge_method: 'S256', state: 's', resource: `${server.base}/mcp` })) authorize.searchParams.set(k, v);
  await page.route('http://127.0.0.1:9/**', (route) => route.fulfill({ status: 200, body: 'back in the app' }));
  await page.goto(authorize.href);
  await page.click('button[value=approve]');
  await page.waitForURL(/^http:\/\/127\.0\.0\.1:9\/callback\?/);
  const code = new URL(page.url()).searchParams.get('code');
  const tokens = await (await fetch(`${server.base}/oauth/token`, {
    method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'authorization_code', code, client_id: reg.client_id, redirect_uri: redirect, code_verifier: verifier }),
  })).json();
  return { clientId: reg.client_id, access: tokens.access_token };
}

test('connected apps are listed and disconnected; a password change asks before revoking tokens', async () => {
  const { context, page, errors } = await signedIn('kim');
  const app = await connectApp(page, 'Browser App');
  assert.equal(await mcpStatus(app.access), 200);
  const token = pat('kim');
  assert.equal(await status('/api/me', token), 200);

  // Every signed-in person has an account page, a user included.
  await page.goto(server.base);
  await page.click('nav.mainnav >> text=Account');
  await page.waitForURL(`${server.base}/account`);
  const row = page.locator('#apps tr[data-grant-id]');
  assert.equal(await row.count(), 1);
  assert.match(await row.textContent(), /“Browser App”/);
  assert.match(await row.textContent(), new RegExp(app.clientId));
  assert.match(await row.textContent(), /http:\/\/127\.0\.0\.1:9/);
  assert.equal(await page.locator('#tokens tr[data-token-id]').count(), 1);

  // Disconnecting asks first; cancelling changes nothing.
  await page.click('#apps button[data-grant-action="revoke"]');
  assert.match(await page.textContent('dialog.confirm'), /Disconnect “Browser App”\?/);
  await page.click('dialog.confirm button[value="cancel"]');
  assert.equal(await mcpStatus(app.access), 200, 'cancelled: still connected');
  await page.click('#apps button[data-grant-action="revoke"]');
  await page.click('dialog.confirm button[data-confirm]');
  await page.waitForFunction(() => /Disconnected/.test(document.querySelector('#apps-result').textContent));
  await page.waitForSelector('#no-apps');
  assert.equal(await mcpStatus(app.access), 401, 'the app lost access at once');

  // Changing the password with "revoke my tokens": the dialog says how many stop working.
  await page.fill('#password-form input[name="current_password"]', PASSWORD);
  await page.fill('#password-form input[name="new_password"]', NEW_PASSWORD);
  await page.fill('#password-form input[name="confirm"]', NEW_PASSWORD);
  await page.check('#password-form input[name="revoke_tokens"]');
  await page.click('#password-form button');
  await page.waitForSelector('dialog.confirm');
  assert.match(await page.textContent('dialog.confirm'), /1 personal access token will stop working at once/);
  await page.click('dialog.confirm button[value="cancel"]');
  assert.equal(await status('/api/me', token), 200, 'cancelled: nothing was sent');
  await page.click('#password-form button');
  await page.click('dialog.confirm button[data-confirm]');
  await page.waitForSelector('#password-result.ok');
  assert.match(await page.textContent('#password-result'), /Password changed.*tokens are revoked/);
  assert.equal(await status('/api/me', token), 401, 'the token stopped working');
  await page.waitForFunction(() => document.querySelectorAll('#tokens tr[data-token-id]').length === 0);
  assert.match(await page.textContent('body'), /Signed in as kim/, 'this session stays');

  // The new password is the one that works.
  const again = await signedIn('kim', NEW_PASSWORD);
  await again.context.close();
  assert.deepEqual(errors, []);
  await context.close();
});

test('disabling an account says how many tokens it has and can revoke them for good', async () => {
  const token = pat('lou');
  const { context, page, errors } = await signedIn('root');
  await page.goto(`${server.base}/admin`);
  const row = '#users tr[data-username="lou"]';
  assert.equal(await page.getAttribute(row, 'data-live-tokens'), '1');
  await page.click(`${row} button[data-user-action="toggle"]`);
  const text = await page.textContent('dialog.confirm');
  assert.match(text, /Disable lou\?/);
  assert.match(text, /1 personal access token/);
  await page.check('dialog.confirm input[name="option"]');
  await page.click('dialog.confirm button[data-confirm]');
  await page.waitForFunction(() => /Disabled lou.*1 token revoked/.test(document.querySelector('#users-result').textContent));
  assert.equal(await status('/api/me', token), 401);
  await page.waitForFunction(() => document.querySelector('#users tr[data-username="lou"]').dataset.disabled === 'true');
  await page.click(`${row} button[data-user-action="toggle"]`);
  await page.waitForFunction(() => /Enabled lou/.test(document.querySelector('#users-result').textContent));
  assert.equal(await status('/api/me', token), 401, 'revoked for good: enabling does not bring it back');
  assert.deepEqual(errors, []);
  await context.close();
});
