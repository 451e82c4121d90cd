// Fleet health in a real browser against a real server and a live local agent: the
// thresholds form on the Alerts page re-judges the PC, the Today page puts it first with
// its reason, the host page draws its history over a chosen range (a real snapshot's
// point, then a day of points written into the server's database) with a disk forecast,
// "Ask kenny about this" opens a conversation on that PC, and a webhook channel set up
// on the page gets its test message.
//
// With KENNY_SCREENSHOTS=1 it also saves these pages to docs/screenshots/.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:http';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import { launchBrowser, startServer } from './harness.mjs';

const PASSWORD = 'a long enough password';
const SHOTS = process.env.KENNY_SCREENSHOTS === '1' ? resolve(import.meta.dirname, '../../docs/screenshots') : null;

let server;
let chrome;
let receiver;
const received = [];
before(async () => {
  server = await startServer();
  chrome = await launchBrowser();
  server.addUser('root', 'superuser', PASSWORD);
  server.startAgent('den-pc');
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => { received.push({ headers: req.headers, body }); res.end('ok'); });
  });
  await new Promise((ok) => receiver.listen(0, '127.0.0.1', ok));
});
after(async () => { await chrome?.close(); await server?.stop(); receiver?.close(); });

async function signedIn() {
  const context = await chrome.browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(`script error: ${e.message}`));
  await page.goto(`${server.base}/login`);
  await page.fill('#username', 'root');
  await page.fill('#password', PASSWORD);
  await page.click('button');
  await page.waitForURL(`${server.base}/`);
  return { context, page, errors };
}

async function shot(page, name) {
  if (!SHOTS) return;
  mkdirSync(SHOTS, { recursive: true });
  // From the top, so the sticky bar is where it belongs in a full-page picture.
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

async function until(page, what, check, ms = 20000) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return;
    assert.ok(Date.now() < deadline, `${what}:\n${server.logs()}`);
    await page.waitForTimeout(250);
  }
}

// A day of history for den-pc, one point every half hour, written straight into the
// server's SQLite file (as another process may, like the admin CLI): CPU swinging,
// memory steady, the data disk filling a point every four hours, the health warn for a
// while in the afternoon. The other disks stay where the agent's real snapshot put them.
function seedHistory() {
  const script = `
import sqlite3, datetime, json, sys
db = sqlite3.connect(sys.argv[1], timeout=10)
now = datetime.datetime.now(datetime.timezone.utc)
real = json.loads(db.execute("SELECT disks FROM metrics WHERE agent_id = 'den-pc' ORDER BY at DESC LIMIT 1").fetchone()[0])
for i in range(48, 0, -1):
    at = (now - datetime.timedelta(minutes=30 * i)).strftime('%Y-%m-%dT%H:%M:%S.000Z')
    disks = json.dumps({**real, "/data": round(80 + (48 - i) / 8, 1)})
    db.execute("INSERT OR REPLACE INTO metrics (agent_id, tier, at, health, cpu, load, memory, temperature, disks) VALUES (?,?,?,?,?,?,?,?,?)",
        ("den-pc", 0, at, 2 if 20 <= i <= 26 else 0, 15 + 60 * ((i * 7) % 10) / 10, 0.4, 48 + (i % 5), 52 + (i % 7) * 3, disks))
db.commit()
`;
  const r = spawnSync('python3', ['-c', script, join(server.dataDir, 'kenny.db')], { encoding: 'utf8', timeout: 30000 });
  assert.equal(r.status, 0, r.stderr);
}

test('thresholds, Today, the history charts, Ask kenny and a channel test', async () => {
  const { page, errors } = await signedIn();

  // The agent's first snapshot is judged on connect.
  await page.goto(`${server.base}/hosts/den-pc`);
  await until(page, 'the first snapshot is judged', async () => {
    await page.reload();
    return (await page.$('#telemetry-overall .badge')) !== null;
  });
  // Its point is the first of the history.
  assert.match(await page.textContent('#history'), /1 points? over the last 24 hours|\d+ points over the last 24 hours/);

  await page.click('nav.mainnav a[href="/alerts"]');
  // A webhook channel, set up and tested from the page.
  await page.click('#channels details.add summary');
  await page.fill('#channel-form input[name="name"]', 'ops hook');
  await page.selectOption('#channel-form select[name="config.kind"]', 'webhook');
  assert.equal(await page.isVisible('#channel-form input[name="config.host"]'), false, 'e-mail fields hide for a webhook');
  await page.fill('#channel-form input[name="config.url"]', `http://127.0.0.1:${receiver.address().port}/hook`);
  await page.fill('#channel-form input[name="config.secret"]', 'browser-test-secret-0123');
  await page.click('#channel-form button[type="submit"]');
  await page.waitForSelector('#channels tr[data-channel]');
  assert.doesNotMatch(await page.content(), /browser-test-secret-0123/, 'the secret is never shown back');
  await page.click('#channels button:has-text("Send a test")');
  await page.waitForFunction(() => /Sent/.test(document.querySelector('#channels > .result').textContent));
  assert.ok(received.some((r) => JSON.parse(r.body).event === 'test' && /^sha256=/.test(r.headers['x-kenny-signature'])), JSON.stringify(received));
  // Thresholds from the Alerts page: memory at 1% is a warning on any PC.
  await page.fill('#thresholds-form input[name="memory_warn_percent"]', '1');
  await page.click('#thresholds-form button[type="submit"]');

  await page.waitForFunction(() => /Saved/.test(document.querySelector('#thresholds-form .result').textContent));
  // Nonsense is refused with the reason, and changes nothing.
  await page.fill('#thresholds-form input[name="disk_warn_percent"]', '99');
  await page.click('#thresholds-form button[type="submit"]');
  await page.waitForFunction(() => /disk_warn_percent \(99\) is above disk_crit_percent/.test(document.querySelector('#thresholds-form .result').textContent));

  await until(page, 'the memory alert reaches the webhook', async () => received.some((r) => JSON.parse(r.body).key === 'memory'));
  await page.reload();
  await shot(page, 'alerts');

  // Today: den-pc needs attention, with the reason.
  await page.click('nav.mainnav a[href="/today"]');
  const row = page.locator('#attention tr[data-agent="den-pc"][data-key="memory"]');
  await row.waitFor();
  assert.match(await row.textContent(), /memory is \d+% used/);
  assert.match(await page.textContent('#today-count'), /1 PCs · 1 need attention · 0 offline/);
  await shot(page, 'today');

  // The host page: a day of history drawn, the range picker, the disk forecast.
  seedHistory();
  await page.goto(`${server.base}/hosts/den-pc?range=24h`);
  assert.match(await page.textContent('#history'), /\d{2} points over the last 24 hours/);
  for (const chart of ['health', 'cpu', 'memory', 'disks', 'temperature']) {
    assert.ok(await page.$(`#history figure[data-chart="${chart}"] svg`), `${chart} chart`);
  }
  const cpuPoints = await page.getAttribute('#history figure[data-chart="cpu"] polyline', 'points');
  assert.ok(cpuPoints.split(' ').length >= 48, cpuPoints);
  assert.ok(await page.$('#history figure[data-chart="disks"] polyline[data-series="/data"]'));
  assert.match(await page.textContent('#history .forecasts'), /\/data fills in about \d+ days/);
  assert.ok(await page.$('#history rect.band.st-warn'), 'the warn spell shows on the health band');
  await shot(page, 'host-history');
  await page.click('#history nav.ranges a:has-text("7 days")');
  await page.waitForURL(/range=7d/);
  assert.equal(await page.getAttribute('#history nav.ranges a[aria-current="page"]', 'href'), '/hosts/den-pc?range=7d#history');

  // Ask kenny about the section that needs attention: a conversation on this PC, with it.
  const ask = page.locator('details[data-section="memory"] button.ask');
  await page.click('details[data-section="memory"] > summary');
  await ask.click();
  await page.waitForFunction(() => /The memory section of this PC is (warn|crit)/.test(document.querySelector('#chat .chat-log').textContent));
  assert.equal(await page.inputValue('#chat .chat-target'), 'den-pc');

  assert.deepEqual(errors, []);
});
