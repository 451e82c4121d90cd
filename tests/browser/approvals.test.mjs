// The Approvals page in a real browser: an operator requires approval for a user's
// MCP changes, sees the call that user's MCP client made waiting with its PC and
// arguments, approves it once, and reads what it did; what the PC printed is shown as
// text, never as markup.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { launchBrowser, signIn, startServer } from './harness.mjs';

const PASSWORD = 'a long enough password';

let server;
let chrome;
before(async () => {
  server = await startServer();
  chrome = await launchBrowser();
  server.addUser('lou', 'operator', PASSWORD);
  server.addUser('kim', 'operator', PASSWORD);
  server.startAgent('den-pc');
});
after(async () => { await chrome?.close(); await server?.stop(); });

// One tools/call over /mcp with a token, the way a 2025-era client without elicitation
// makes it: the JSON-RPC result.
async function mcpCall(token, name, args) {
  const headers = {
    Authorization: `Bearer ${token}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
    'MCP-Protocol-Version': '2025-06-18',
  };
  const init = await fetch(`${server.base}/mcp`, { method: 'POST', headers, body: JSON.stringify({
    jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'browser-test', version: '0' } },
  }) });
  assert.equal(init.status, 200);
  const r = await fetch(`${server.base}/mcp`, { method: 'POST', headers, body: JSON.stringify({
    jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name, arguments: args },
  }) });
  assert.equal(r.status, 200);
  return (await r.json()).result;
}

async function waitOnline(id) {
  const token = server.admin(['token', 'create', 'lou']).match(/kenny_pat_[A-Za-z0-9_-]+/)[0];
  const deadline = Date.now() + 30000;
  for (;;) {
    const listed = await mcpCall(token, 'list_agents', {});
    if (listed.structuredContent.agents.some((a) => a.agent_id === id && a.online)) return;
    assert.ok(Date.now() < deadline, `${id} did not come online:\n${server.logs()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

test('an operator sets a rule, sees the held call and approves it once', async () => {
  await waitOnline('den-pc');
  const { page, errors } = await signIn(chrome, server, 'lou', PASSWORD);
  page.on('dialog', (d) => d.accept());

  await page.click('nav.mainnav >> text=Approvals');
  await page.waitForURL(`${server.base}/approvals`);
  assert.match(await page.locator('#approvals-waiting').textContent(), /No call is waiting/);
  await page.selectOption('#rule-user-form select[name=id]', { label: 'kim (operator)' });
  await page.click('#rule-user-form button');
  await page.locator('#approvals-rules tr[data-rule^="user-"]').waitFor();
  assert.match(await page.locator('#approvals-rules tr[data-rule^="user-"]').textContent(), /kim/);

  // kim's MCP client cannot be asked, so the call waits here.
  const kimToken = server.admin(['token', 'create', 'kim']).match(/kenny_pat_[A-Za-z0-9_-]+/)[0];
  const held = await mcpCall(kimToken, 'shell_exec', { agent_id: 'den-pc', command: "echo '<b id=pwn>from the pc</b>'" });
  assert.equal(held.isError, true);
  assert.equal(held.structuredContent.error.code, 'awaiting_approval');
  const id = held._meta['kenny/approval'].approval_id;
  assert.match(id, /^apr_[0-9a-f]{32}$/);

  await page.reload();
  const row = page.locator(`#approvals-waiting tr[data-approval="${id}"]`);
  assert.match(await row.textContent(), /shell_exec on den-pc/);
  assert.match(await row.textContent(), /<b id=pwn>from the pc<\/b>/, 'the arguments are shown as text');
  await row.locator('button', { hasText: 'Approve' }).click();
  await page.locator(`#approvals-recent tr[data-approval="${id}"]`).waitFor();

  // It runs in the background; its row says done once it ended.
  const deadline = Date.now() + 30000;
  for (;;) {
    await page.reload();
    const status = await page.locator(`#approvals-recent tr[data-approval="${id}"]`).getAttribute('data-status');
    if (status === 'done') break;
    assert.ok(Date.now() < deadline, `the approved call did not finish (status ${status})`);
    await new Promise((r) => setTimeout(r, 300));
  }
  const done = page.locator(`#approvals-recent tr[data-approval="${id}"]`);
  assert.match(await done.textContent(), /lou/);
  assert.match(await done.textContent(), /<b id=pwn>from the pc<\/b>/, 'what the PC printed is text');
  assert.equal(await page.locator('#pwn').count(), 0, 'and never markup');
  assert.equal(await page.locator(`#approvals-waiting tr[data-approval="${id}"]`).count(), 0);

  // A second approval finds nothing to run.
  const again = await page.evaluate(async (call) => (await window.kenny.api('POST', `/api/approvals/${call}/approve`)).status, id);
  assert.equal(again, 409);
  assert.deepEqual(errors, []);
});

test('a user does not get the Approvals page', async () => {
  server.addUser('sam', 'user', PASSWORD, ['den-pc']);
  const { page, errors } = await signIn(chrome, server, 'sam', PASSWORD);
  assert.equal(await page.locator('nav.mainnav >> text=Approvals').count(), 0);
  const r = await page.goto(`${server.base}/approvals`);
  assert.equal(r.status(), 403);
  assert.deepEqual(errors, []);
});
