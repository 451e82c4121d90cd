// A person's path through kenny's sign-in, in a real browser: first-run set-up, turning
// on TOTP, signing in with a code, approving an app on the consent page, signing out.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { launchBrowser, pkce, startServer, totp } from './harness.mjs';

let server;
let chrome;
before(async () => { server = await startServer(); chrome = await launchBrowser(); });
after(async () => { await chrome?.close(); await server?.stop(); });

const PASSWORD = 'a long enough password';

test('set-up, TOTP sign-in, consent and sign-out', async () => {
  const page = await (await chrome.browser.newContext()).newPage();

  // First run: the dashboard offers set-up, once.
  await page.goto(server.base);
  assert.match(page.url(), /\/setup$/);
  await page.fill('#username', 'root');
  await page.fill('#password', PASSWORD);
  await page.fill('#confirm', PASSWORD);
  await page.click('button');
  await page.waitForURL(`${server.base}/`);
  assert.match(await page.textContent('body'), /Signed in as root \(superuser\)/);

  // Turn TOTP on through the API, as the settings page will, with the page's CSRF token.
  const secret = await page.evaluate(async (password) => {
    const csrf = document.querySelector('input[name=csrf]').value;
    const start = await (await fetch('/api/me/totp', {
      method: 'POST', headers: { 'X-CSRF-Token': csrf, 'Content-Type': 'application/json' }, body: JSON.stringify({ password }),
    })).json();
    return { csrf, secret: start.secret, uri: start.otpauth_uri };
  }, PASSWORD);
  assert.match(secret.uri, /^otpauth:\/\/totp\/kenny:root\?/);
  const enrolCode = totp(secret.secret);
  const confirmed = await page.evaluate(async ({ csrf, code }) => {
    const r = await fetch('/api/me/totp/confirm', { method: 'POST', headers: { 'X-CSRF-Token': csrf, 'Content-Type': 'application/json' }, body: JSON.stringify({ code }) });
    return { status: r.status, body: await r.json() };
  }, { csrf: secret.csrf, code: enrolCode });
  assert.equal(confirmed.status, 200);
  assert.equal(confirmed.body.recovery_codes.length, 10);

  // Sign out, then in again: the password alone is not enough any more.
  await page.click('text=Sign out');
  await page.waitForURL(/\/login$/);
  await page.fill('#username', 'root');
  await page.fill('#password', PASSWORD);
  await page.click('button');
  assert.match(await page.textContent('[role=alert]'), /authenticator app/);
  await page.fill('#password', PASSWORD);
  // A code for a step not used yet (the enrolment used the current one).
  let code = totp(secret.secret);
  if (code === enrolCode) code = totp(secret.secret, Date.now() + 30000);
  await page.fill('#code', code);
  await page.click('button');
  await page.waitForURL(`${server.base}/`);
  assert.match(await page.textContent('body'), /Signed in as root/);

  // An app asks for access: the consent page names it and what it gets.
  const redirect = 'http://127.0.0.1:9/callback';
  const reg = await (await fetch(`${server.base}/oauth/register`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ client_name: 'Browser Test App', redirect_uris: [redirect] }),
  })).json();
  const { verifier, challenge } = pkce();
  const authorize = new URL(`${server.base}/oauth/authorize`);
  for (const [k, v] of Object.entries({ response_type: 'code', client_id: reg.client_id, redirect_uri: redirect,
    code_challenge: challenge, code_challenge_method: 'S256', state: 'xyz', resource: `${server.base}/mcp` })) authorize.searchParams.set(k, v);
  await page.route('http://127.0.0.1:9/**', (route) => route.fulfill({ status: 200, body: 'back in the app' }));
  await page.goto(authorize.href);
  const consent = await page.textContent('body');
  assert.match(consent, /Allow an app calling itself “Browser Test App” to use kenny\?/);
  assert.match(consent, /act as root/);
  // Named by what identifies it, not only by the name it chose.
  assert.equal(await page.textContent('#consent-client code'), reg.client_id);
  assert.equal(await page.textContent('#consent-redirect code'), 'http://127.0.0.1:9');
  await page.click('button[value=approve]');
  await page.waitForURL(/^http:\/\/127\.0\.0\.1:9\/callback\?/);
  const back = new URL(page.url());
  assert.equal(back.searchParams.get('state'), 'xyz');
  assert.equal(back.searchParams.get('iss'), server.base);
  const tokens = await fetch(`${server.base}/oauth/token`, {
    method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'authorization_code', code: back.searchParams.get('code'), client_id: reg.client_id, redirect_uri: redirect, code_verifier: verifier }),
  });
  assert.equal(tokens.status, 200);
  assert.match((await tokens.json()).access_token, /^kenny_oat_/);

  // Sign out: the session is gone, the dashboard asks to sign in again.
  await page.goto(server.base);
  await page.click('text=Sign out');
  await page.waitForURL(/\/login$/);
  await page.goto(server.base);
  assert.match(page.url(), /\/login$/);
});
