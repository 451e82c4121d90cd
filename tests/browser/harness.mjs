// Starts a real kenny-server on 127.0.0.1:0 with a fresh data directory, real agents
// and an X display for them when needed, and headless Chromium (Debian's
// /usr/bin/chromium) for playwright-core to drive.

import { spawn, spawnSync } from 'node:child_process';
import { createHmac, createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium } from 'playwright-core';

const repo = resolve(import.meta.dirname, '../..');
export const binDir = process.env.KENNY_BIN_DIR ?? join(repo, 'target', 'debug');

export async function startServer(extraArgs = [], env = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'kenny-browser-'));
  const proc = spawn(join(binDir, 'kenny-server'), ['serve', '--listen', '127.0.0.1:0', '--data-dir', join(dir, 'data'), ...extraArgs], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, KENNY_LOG: 'warn', ...env },
  });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const base = await new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`kenny-server did not start:\n${stderr}`)), 30000);
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/kenny-server listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) { clearTimeout(timer); ok(m[1]); }
    });
    proc.on('exit', (code) => { clearTimeout(timer); fail(new Error(`kenny-server exited (${code}):\n${stderr}`)); });
  });
  const dataDir = join(dir, 'data');
  const agents = [];
  return {
    base,
    dataDir,
    logs: () => stderr,
    // Runs `kenny-server <args> --data-dir <ours>` (the admin CLI works while the server
    // runs); returns stdout, throws with stderr on failure.
    admin(args, input) {
      const r = spawnSync(join(binDir, 'kenny-server'), [...args, '--data-dir', dataDir], { input, encoding: 'utf8', timeout: 30000 });
      if (r.status !== 0) throw new Error(`kenny-server ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
      return r.stdout;
    },
    addUser(name, role, password, hosts = []) {
      const args = ['user', 'add', name, '--role', role];
      if (hosts.length) args.push('--hosts', hosts.join(','));
      this.admin(args, `${password}\n`);
    },
    addAgent(id) {
      const out = this.admin(['agent', 'add', id]);
      return JSON.parse(out.split('\n').find((l) => l.trim().startsWith('{')));
    },
    // `agent add` then a real `kenny-agent run` against this server; stopped with the server.
    startAgent(id, env = {}) {
      const creds = this.addAgent(id);
      const stateDir = join(dir, 'agents', id);
      mkdirSync(stateDir, { recursive: true });
      const agent = spawn(join(binDir, 'kenny-agent'), ['run', '--server', base, '--agent-id', id, '--state-dir', stateDir,
        '--server-pubkey', creds.server_pubkey, '--enroll-token', creds.token, '--max-backoff-secs', '1'], {
        stdio: ['ignore', 'ignore', 'pipe'],
        // net_quality pings the gateway and DNS server: tests keep to loopback.
        env: { ...cleanEnv(), KENNY_LOG: 'warn', KENNY_NET_QUALITY_TARGETS: 'gateway=127.0.0.1,dns=127.0.0.1', ...env },
      });
      let log = '';
      agent.stderr.on('data', (d) => { log += d; });
      agents.push(agent);
      return { id, logs: () => log };
    },
    async stop() {
      for (const a of agents) a.kill('SIGTERM');
      await Promise.all(agents.map((a) => new Promise((r) => (a.exitCode !== null ? r() : a.on('exit', r)))));
      proc.kill('SIGTERM');
      await new Promise((r) => (proc.exitCode !== null ? r() : proc.on('exit', r)));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// The environment minus KENNY_* settings that could leak into a child.
function cleanEnv() {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('KENNY_')));
}

// A virtual X display (Debian's Xvfb) for an agent's screen capture, or null when Xvfb
// is not installed.
export async function startXvfb(width = 1280, height = 800) {
  if (!existsSync('/usr/bin/Xvfb')) return null;
  let n = 170;
  while (existsSync(`/tmp/.X11-unix/X${n}`) || existsSync(`/tmp/.X${n}-lock`)) n += 1;
  const proc = spawn('/usr/bin/Xvfb', [`:${n}`, '-screen', '0', `${width}x${height}x24`, '-nolisten', 'tcp'], { stdio: 'ignore' });
  const deadline = Date.now() + 15000;
  while (!existsSync(`/tmp/.X11-unix/X${n}`)) {
    if (proc.exitCode !== null || Date.now() > deadline) throw new Error('Xvfb did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    display: `:${n}`,
    async stop() {
      proc.kill('SIGTERM');
      await new Promise((r) => (proc.exitCode !== null ? r() : proc.on('exit', r)));
    },
  };
}

export async function launchBrowser() {
  // playwright gives the browser a fresh temporary profile of its own.
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  return { browser, close: () => browser.close() };
}

// A browser context signed in as `user`, and the CSP violations and script errors seen
// on its pages (a test ends by checking there were none).
export async function signIn(chrome, server, user, password, viewport = { width: 1280, height: 860 }) {
  const context = await chrome.browser.newContext({ viewport });
  const page = await context.newPage();
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(`script error: ${e.message}`));
  await page.goto(`${server.base}/login`);
  await page.fill('#username', user);
  await page.fill('#password', password);
  await page.click('button');
  await page.waitForURL(`${server.base}/`);
  return { context, page, errors };
}

// RFC 6238 TOTP (SHA-1, 6 digits, 30 s) for a base32 secret, as an authenticator app computes it.
export function totp(secretB32, atMs = Date.now()) {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = '';
  for (const c of secretB32.replace(/=+$/, '').toUpperCase()) bits += alphabet.indexOf(c).toString(2).padStart(5, '0');
  const key = Buffer.from(bits.match(/.{8}/g).map((b) => parseInt(b, 2)));
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(atMs / 30000)));
  const mac = createHmac('sha1', key).update(counter).digest();
  const off = mac[mac.length - 1] & 15;
  const n = ((mac[off] & 0x7f) << 24) | (mac[off + 1] << 16) | (mac[off + 2] << 8) | mac[off + 3];
  return String(n % 1e6).padStart(6, '0');
}

export function pkce() {
  const verifier = randomBytes(48).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}
