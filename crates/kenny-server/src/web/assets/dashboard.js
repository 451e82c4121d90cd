// kenny dashboard: the one script every dashboard page loads (from <head>, so the
// theme is set before the page paints). Plain JavaScript, no build step.
//
// Rules kept here: text from the server or an agent only ever reaches the page through
// textContent / text nodes (never innerHTML); every request that changes something
// carries the session's CSRF token from <meta name="csrf-token">.
//
// The chat panel's script (added separately) finds its container at <aside id="chat">
// and the helpers below at window.kenny; it may wait for the `kenny:ready` event.
'use strict';

(() => {
  const THEME_KEY = 'kenny-theme';
  const root = document.documentElement;

  function storedTheme() {
    try { return localStorage.getItem(THEME_KEY); } catch { return null; }
  }
  const initial = storedTheme();
  if (initial === 'dark' || initial === 'light') root.dataset.theme = initial;

  const systemDark = () => window.matchMedia && window.matchMedia('(prefers-color-scheme: dark)').matches;
  const effectiveTheme = () => root.dataset.theme || (systemDark() ? 'dark' : 'light');

  const $ = (sel, from = document) => from.querySelector(sel);
  const $$ = (sel, from = document) => Array.from(from.querySelectorAll(sel));
  const csrf = () => $('meta[name="csrf-token"]')?.getAttribute('content') ?? '';

  // Builds an element; attributes are set as attributes, children as nodes or text.
  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') node.className = v;
      else node.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  // One JSON request to kenny's API. Never throws: { ok, status, data } or
  // { ok: false, status, error: { code, message } }.
  async function api(method, path, body) {
    const init = { method, credentials: 'same-origin', headers: { 'X-CSRF-Token': csrf(), Accept: 'application/json' } };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      return { ok: false, status: 0, error: { code: 'network', message: `The server could not be reached (${e.message}).` } };
    }
    let data = null;
    if (res.status !== 204) {
      try { data = await res.json(); } catch { data = null; }
    }
    if (res.ok) return { ok: true, status: res.status, data };
    const error = data && data.error && typeof data.error.message === 'string'
      ? data.error
      : { code: `http_${res.status}`, message: `The server answered ${res.status}.` };
    return { ok: false, status: res.status, error };
  }

  const enc = encodeURIComponent;
  const errorText = (e) => `${e.message} (${e.code})`;

  // ---- times: UTC text from the server becomes local, relative time ---------------

  function relative(date) {
    const s = Math.round((Date.now() - date.getTime()) / 1000);
    if (s < 45 && s > -45) return 'just now';
    const units = [['day', 86400], ['hour', 3600], ['minute', 60]];
    for (const [unit, secs] of units) {
      const n = Math.round(Math.abs(s) / secs);
      if (n >= 1 && Math.abs(s) >= secs) {
        if (unit === 'day' && n > 6) break;
        const word = `${n} ${unit}${n === 1 ? '' : 's'}`;
        return s > 0 ? `${word} ago` : `in ${word}`;
      }
    }
    return date.toLocaleString();
  }

  function localTimes(scope = document) {
    for (const t of $$('time[datetime]', scope)) {
      const d = new Date(t.getAttribute('datetime'));
      if (Number.isNaN(d.getTime())) continue;
      t.title = d.toLocaleString();
      t.textContent = relative(d);
    }
  }

  const timeEl = (iso) => {
    const t = el('time', { datetime: iso }, iso);
    localTimes(el('span', {}, t));
    return t;
  };

  // ---- re-reading parts of the current page ----------------------------------------

  // Fetches this page again and swaps in the sections with these ids. Elements marked
  // data-keep (a secret shown once, a message) stay as they are.
  async function refreshSections(ids) {
    let html;
    try {
      const res = await fetch(location.href, { credentials: 'same-origin', headers: { Accept: 'text/html' } });
      if (!res.ok) return;
      html = await res.text();
    } catch { return; }
    const fresh = new DOMParser().parseFromString(html, 'text/html');
    for (const id of ids) {
      const now = document.getElementById(id);
      const next = fresh.getElementById(id);
      if (!now || !next) continue;
      const adopted = document.importNode(next, true);
      for (const keep of $$('[data-keep][id]', now)) {
        const slot = adopted.querySelector(`#${CSS.escape(keep.id)}`);
        if (slot) slot.replaceWith(keep);
      }
      now.replaceWith(adopted);
      localTimes(adopted);
    }
  }

  // ---- shared widgets ----------------------------------------------------------------

  function showStatus(node, text, kind) {
    if (!node) return;
    node.hidden = false;
    node.classList.remove('ok', 'error');
    if (kind) node.classList.add(kind);
    node.replaceChildren(...(Array.isArray(text) ? text : [text]));
  }

  async function copyText(text, button) {
    let done = false;
    try {
      await navigator.clipboard.writeText(text);
      done = true;
    } catch {
      // Clipboard API missing (plain http on another host): select for a manual copy.
      const pre = button.parentElement && $('pre', button.parentElement);
      if (pre) window.getSelection().selectAllChildren(pre);
    }
    const label = button.textContent;
    button.textContent = done ? 'Copied' : 'Selected: press Ctrl+C';
    setTimeout(() => { button.textContent = label; }, 2000);
  }

  // A value shown once, with a copy button.
  function secretBox(title, value, note, preId) {
    const pre = el('pre', { id: preId }, value);
    const button = el('button', { type: 'button', class: 'secondary', 'data-copy': '' }, 'Copy');
    button.addEventListener('click', () => copyText(pre.textContent, button));
    return el('div', { class: 'secret' }, el('strong', {}, title), pre, button, note ? el('p', { class: 'muted' }, note) : null);
  }

  // A modal confirmation (<dialog>): says what will happen, optionally offers one more
  // thing to do with it (a checkbox), and resolves { ok, checked }. Escape cancels.
  function confirmDialog({ title, text = [], option = null, confirm = 'Confirm', danger = false }) {
    return new Promise((resolve) => {
      const box = option ? el('input', { type: 'checkbox', name: 'option' }) : null;
      const dialog = el('dialog', { class: 'confirm', 'aria-labelledby': 'confirm-title' },
        el('form', { method: 'dialog' },
          el('h2', { id: 'confirm-title' }, title),
          text.filter(Boolean).map((t) => el('p', {}, t)),
          box ? el('label', { class: 'check' }, box, ` ${option}`) : null,
          el('div', { class: 'dialog-actions' },
            el('button', { value: 'cancel', class: 'secondary' }, 'Cancel'),
            el('button', { value: 'ok', class: danger ? 'danger-solid' : null, 'data-confirm': '' }, confirm))));
      dialog.addEventListener('close', () => {
        resolve({ ok: dialog.returnValue === 'ok', checked: Boolean(box && box.checked) });
        dialog.remove();
      });
      document.body.append(dialog);
      dialog.showModal();
    });
  }

  const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;

  // ---- theme ----------------------------------------------------------------------------

  function setupTheme() {
    const button = $('#theme-toggle');
    if (!button) return;
    const label = () => {
      const dark = effectiveTheme() === 'dark';
      button.textContent = dark ? 'Light' : 'Dark';
      button.setAttribute('aria-pressed', String(dark));
      button.title = dark ? 'Switch to the light theme' : 'Switch to the dark theme';
    };
    label();
    button.addEventListener('click', () => {
      const next = effectiveTheme() === 'dark' ? 'light' : 'dark';
      root.dataset.theme = next;
      try { localStorage.setItem(THEME_KEY, next); } catch { /* private mode: this page only */ }
      label();
    });
    if (window.matchMedia) window.matchMedia('(prefers-color-scheme: dark)').addEventListener?.('change', label);
  }

  // ---- fleet -----------------------------------------------------------------------------

  function setupFleet() {
    const table = $('#fleet-table');
    if (!table) return;
    const search = $('#fleet-search');
    const state = $('#fleet-state');
    const none = $('#fleet-none');
    const rows = $$('tbody tr', table);
    const apply = () => {
      const terms = search.value.toLowerCase().split(/\s+/).filter(Boolean);
      const want = state.value;
      let shown = 0;
      for (const tr of rows) {
        const text = tr.dataset.search || '';
        const match = terms.every((t) => text.includes(t))
          && (!want || (want === 'online') === (tr.dataset.online === 'true'));
        tr.hidden = !match;
        if (match) shown += 1;
      }
      none.hidden = shown > 0 || rows.length === 0;
    };
    search.addEventListener('input', apply);
    state.addEventListener('change', apply);
    apply();
  }

  // ---- host page -------------------------------------------------------------------------

  const RANK = { ok: 0, unknown: 1, warn: 2, crit: 3 };
  const statusOf = (s) => (s && typeof s.status === 'string' && s.status in RANK ? s.status : 'unknown');
  const badge = (status) => el('span', { class: `badge st-${status.replace(/[^a-z0-9_]/gi, '')}` }, status);

  // The server's verdicts (data.health) decide each section's badge, reason and
  // advice; the agent's own fields are only shown as details.
  function renderTelemetry(data) {
    const box = $('#sections');
    if (!box) return;
    const snapshot = data.snapshot || {};
    const health = data.health || { status: 'unknown', reasons: [], sections: [], skipped: [] };
    const details = (name) => {
      const value = snapshot[name];
      const rest = value && typeof value === 'object' ? { ...value } : { value };
      delete rest.status;
      delete rest.summary;
      return el('pre', {}, JSON.stringify(rest, null, 2));
    };
    const judged = (health.sections || []).map((v) => el('details', { class: 'section', 'data-section': v.section, 'data-status': statusOf(v) },
      el('summary', {}, badge(statusOf(v)), ' ', el('strong', {}, v.section), ' ', el('span', { class: 'summary' }, v.summary || '')),
      v.reason ? el('p', { class: 'reason' }, v.reason) : '',
      v.attention ? el('p', { class: 'attention' }, `What to do: ${v.attention}`) : '',
      ['warn', 'crit'].includes(statusOf(v))
        ? el('button', { type: 'button', class: 'ask secondary', 'data-ask-section': v.section,
          'data-ask-text': `The ${/^[A-Za-z0-9_]+$/.test(v.section) ? v.section : 'flagged'} section of this PC is ${statusOf(v)}. Look into it (agent_health and agent_snapshot have the details) and tell me what is wrong and what to do.` },
        'Ask kenny about this')
        : '',
      details(v.section)));
    const skipped = (health.skipped || []).map((name) => el('details', { class: 'section', 'data-section': name, 'data-status': 'n/a' },
      el('summary', {}, badge('n/a'), ' ', el('strong', {}, name), ' ', el('span', { class: 'summary muted' }, "does not apply to this PC's OS")),
      details(name)));
    box.replaceChildren(...judged, ...skipped);
    const overall = $('#telemetry-overall');
    if (overall) overall.replaceChildren(badge(statusOf(health)), ' ', headline(health));
    const when = $('#telemetry-when');
    if (when) when.replaceChildren('Collected ', timeEl(data.collected_at));
  }

  const headline = (health) => (health.reasons && health.reasons.length
    ? health.reasons[0]
    : `all ${(health.sections || []).length} sections ok`);

  function showScreenshot(data) {
    const img = $('#screenshot-img');
    const caption = $('#screenshot-caption');
    const shot = data.screenshot;
    if (img) {
      img.src = `${data.url}?t=${Date.now()}`;
      img.width = shot.width;
      img.height = shot.height;
      img.hidden = false;
    }
    if (caption) {
      caption.classList.remove('muted');
      caption.replaceChildren(`${shot.width}×${shot.height}, taken `, timeEl(shot.taken_at), ` by ${shot.taken_by}`);
    }
  }

  function setupHost() {
    const box = $('#host-actions');
    if (!box) return;
    const id = box.dataset.agent;
    $('main').addEventListener('click', (ev) => {
      const ask = ev.target.closest('button[data-ask-text]');
      if (!ask) return;
      document.dispatchEvent(new CustomEvent('kenny:ask', { detail: { agent: id, text: ask.dataset.askText } }));
    });
    const status = $('#action-status');
    const actions = {
      refresh: {
        url: `/api/agent/${enc(id)}/refresh`, busy: 'Collecting telemetry…',
        done: (d) => { renderTelemetry(d); return `Telemetry collected: ${d.health ? headline(d.health) : 'no sections'}.`; },
      },
      screenshot: {
        url: `/api/agent/${enc(id)}/screenshot`, busy: 'Capturing the screen…',
        done: (d) => { showScreenshot(d); return `Screen captured (${d.screenshot.width}×${d.screenshot.height}).`; },
      },
      remotehelp: {
        url: `/api/agent/${enc(id)}/remotehelp`, busy: 'Starting remote help…',
        done: (d) => `Remote help started on ${id}${d.result && d.result.note ? `: ${d.result.note}` : '.'}`,
      },
      update: {
        url: `/api/agents/${enc(id)}/update`, busy: 'Asking the agent to update…',
        done: () => `Update requested on ${id}.`,
      },
    };
    box.addEventListener('click', async (ev) => {
      const button = ev.target.closest('button[data-action]');
      const action = button && actions[button.dataset.action];
      if (!action) return;
      const buttons = $$('button', box);
      buttons.forEach((b) => { b.disabled = true; });
      showStatus(status, action.busy);
      const r = await api('POST', action.url);
      if (r.ok) showStatus(status, action.done(r.data), 'ok');
      else showStatus(status, errorText(r.error), 'error');
      buttons.forEach((b) => { b.disabled = false; });
      // The call's audit row is written in the background; give it a moment.
      setTimeout(() => refreshSections(['recent', 'facts']), 400);
    });
  }

  // The page's form handlers, by form id. The listener sits on `main`, not on the forms:
  // sections are swapped for fresh copies after each change.
  function formHandlers(main) {
    const forms = {};
    main.addEventListener('submit', (ev) => {
      const handler = forms[ev.target.id];
      if (!handler) return;
      ev.preventDefault();
      handler(ev.target);
    });
    return forms;
  }

  // ---- admin -------------------------------------------------------------------------------

  const hostList = (text) => text.split(/[\s,]+/).map((h) => h.trim()).filter(Boolean);

  function setupAdmin() {
    if (!$('#users')) return;
    const main = $('main');
    const forms = formHandlers(main);

    forms['user-form'] = async (f) => {
      const body = { username: f.username.value.trim(), role: f.role.value };
      if (body.role === 'user') body.hosts = hostList(f.hosts.value);
      if (f.password.value) body.password = f.password.value;
      const r = await api('POST', '/api/users', body);
      const out = $('#users-result');
      if (!r.ok) return showStatus(out, errorText(r.error), 'error');
      f.reset();
      showStatus(out, r.data.password
        ? [`Added ${r.data.user.username}.`, secretBox('Their password (shown once):', r.data.password, 'Hand it over privately; they can change it after signing in.')]
        : `Added ${r.data.user.username}.`, 'ok');
      refreshSections(['users']);
    };

    forms['agent-form'] = async (f) => {
      const r = await api('POST', '/api/agents', { agent_id: f.agent_id.value.trim() });
      const out = $('#agent-result');
      if (!r.ok) return showStatus(out, errorText(r.error), 'error');
      f.reset();
      const d = r.data;
      out.classList.remove('error');
      showStatus(out, [
        secretBox(`Run this on ${d.agent_id}, as root (Linux) or in an administrator prompt (Windows):`, d.install_command,
          'The enrollment token works once, to register the PC\'s own key; it is not shown again.', 'install-command'),
        el('dl', { class: 'facts' },
          el('dt', {}, 'Server'), el('dd', {}, d.server),
          el('dt', {}, 'Agent id'), el('dd', {}, d.agent_id),
          el('dt', {}, 'Server key'), el('dd', {}, el('code', {}, d.server_pubkey))),
      ], 'ok');
      refreshSections(['agents']);
    };

    forms['link-form'] = async (f) => {
      const body = { agent_id: f.agent_id.value.trim(), os: f.os.value, expires_minutes: Number(f.expires_minutes.value) };
      const r = await api('POST', '/api/install-links', body);
      const out = $('#link-result');
      if (!r.ok) return showStatus(out, errorText(r.error), 'error');
      f.reset();
      const d = r.data;
      const where = d.os === 'windows' ? 'in PowerShell started as Administrator' : 'in a terminal';
      showStatus(out, [
        secretBox(`On the PC that should become ${d.agent_id}, run this ${where}:`, d.command,
          'It works once, until the time below; whoever runs it enrolls that PC, so send it privately.', 'link-command'),
        el('dl', { class: 'facts' },
          el('dt', {}, 'Link'), el('dd', {}, el('code', {}, d.url)),
          el('dt', {}, 'Expires'), el('dd', {}, timeEl(d.expires_at))),
      ], 'ok');
      refreshSections(['install-links']);
    };

    main.addEventListener('click', async (ev) => {
      const agentButton = ev.target.closest('button[data-agent-action]');
      if (agentButton) {
        const id = agentButton.closest('tr[data-agent-id]').dataset.agentId;
        const out = $('#agent-result');
        if (agentButton.dataset.agentAction === 'rekey') {
          if (!window.confirm(`Forget ${id}'s key and make a new enrollment token? The PC is cut off until it enrolls again with the new token.`)) return;
          const r = await api('POST', `/api/agents/${enc(id)}/rekey`);
          if (!r.ok) return showStatus(out, errorText(r.error), 'error');
          showStatus(out, secretBox(`Run this on ${id} to enroll it again:`, r.data.install_command,
            'The old key no longer logs in; this token works once.', 'install-command'), 'ok');
        } else {
          if (!window.confirm(`Remove ${id}? It is cut off at once and can never log in with its key again; its history is deleted after the retention period.`)) return;
          const r = await api('DELETE', `/api/agents/${enc(id)}`);
          if (!r.ok) return showStatus(out, errorText(r.error), 'error');
          showStatus(out, `Removed ${id}. Its history is kept ${plural(r.data.history_kept_days, 'day')}, then deleted.`, 'ok');
        }
        return refreshSections(['agents']);
      }
      const revoke = ev.target.closest('button[data-link-revoke]');
      if (revoke) {
        const r = await api('DELETE', `/api/install-links/${enc(revoke.dataset.linkRevoke)}`);
        const out = $('#link-result');
        if (!r.ok) return showStatus(out, errorText(r.error), 'error');
        showStatus(out, `Revoked the link for ${r.data.link.agent_id}.`, 'ok');
        return refreshSections(['install-links']);
      }
      const userButton = ev.target.closest('button[data-user-action]');
      if (userButton) {
        const tr = userButton.closest('tr[data-user-id]');
        const id = tr.dataset.userId;
        const name = tr.dataset.username;
        const out = $('#users-result');
        let r;
        let done;
        switch (userButton.dataset.userAction) {
          case 'save': {
            const role = $('select[name="role"]', tr).value;
            const body = { role };
            if (role === 'user') body.hosts = hostList($('input[name="hosts"]', tr).value);
            r = await api('PATCH', `/api/users/${enc(id)}`, body);
            done = `Saved ${name}.`;
            break;
          }
          case 'toggle': {
            const disable = tr.dataset.disabled !== 'true';
            if (!disable) {
              r = await api('PATCH', `/api/users/${enc(id)}`, { disabled: false });
              done = `Enabled ${name}.`;
              break;
            }
            const live = Number(tr.dataset.liveTokens || 0);
            const c = await confirmDialog({
              title: `Disable ${name}?`,
              text: [`${name} is signed out everywhere and every app they connected is disconnected, at once.`,
                live ? `While the account is disabled its tokens (${plural(live, 'personal access token')}) are refused; they work again if you enable it, unless you revoke them now.` : null],
              option: live ? `Also revoke their ${plural(live, 'token')} for good` : null,
              confirm: 'Disable', danger: true,
            });
            if (!c.ok) return;
            r = await api('PATCH', `/api/users/${enc(id)}`, { disabled: true, revoke_tokens: c.checked });
            done = r.ok ? `Disabled ${name}; their sessions and apps have ended${r.data.tokens_revoked ? ` and ${plural(r.data.tokens_revoked, 'token')} revoked` : ''}.` : '';
            break;
          }
          case 'password': {
            const live = Number(tr.dataset.liveTokens || 0);
            const c = await confirmDialog({
              title: `Reset the password of ${name}?`,
              text: [`${name} is signed out everywhere and every app they connected is disconnected.`,
                live ? `Their tokens (${plural(live, 'personal access token')}) keep working unless you revoke them too.` : null],
              option: live ? `Also revoke their ${plural(live, 'token')}: they stop working at once` : null,
              confirm: 'Reset password', danger: true,
            });
            if (!c.ok) return;
            r = await api('POST', `/api/users/${enc(id)}/password`, c.checked ? { revoke_tokens: true } : {});
            done = r.ok ? [`New password for ${name}${r.data.tokens_revoked ? `; ${plural(r.data.tokens_revoked, 'token')} revoked` : ''}.`,
              secretBox('Their new password (shown once):', r.data.password)] : '';
            break;
          }
          case 'delete':
            if (!window.confirm(`Delete the account ${name}? This cannot be undone.`)) return;
            r = await api('DELETE', `/api/users/${enc(id)}`);
            done = `Deleted ${name}.`;
            break;
          default:
            return;
        }
        if (!r.ok) return showStatus(out, `${name}: ${errorText(r.error)}`, 'error');
        showStatus(out, done, 'ok');
        refreshSections(['users']);
      }
    });
  }

  // ---- alerts page: forms and buttons that speak JSON to the API -------------------------

  // A form's inputs as a JSON body: `a.b` names nest, data-type says number, bool,
  // list (comma-separated text) or int-list; empty and hidden fields are left out.
  function formJson(f) {
    const body = {};
    for (const input of $$('input[name], select[name], textarea[name]', f)) {
      if (input.closest('[hidden]')) continue;
      const type = input.dataset.type;
      let value;
      if (type === 'bool') value = input.checked;
      else if (input.value.trim() === '') continue;
      else if (type === 'number') value = Number(input.value);
      else if (type === 'list') value = input.value.split(/[,\n]/).map((s) => s.trim()).filter(Boolean);
      else if (type === 'int-list') value = input.value.split(/[,\s]+/).filter(Boolean).map(Number);
      else value = input.value.trim();
      const path = input.name.split('.');
      let node = body;
      for (const key of path.slice(0, -1)) node = node[key] = node[key] || {};
      node[path[path.length - 1]] = value;
    }
    return body;
  }

  function showKinds(form) {
    const select = $('select[data-kind-select]', form);
    if (!select) return;
    for (const field of $$('[data-kinds]', form)) field.hidden = !field.dataset.kinds.split(' ').includes(select.value);
  }

  async function callApi(spec, body, out, refresh, doneText) {
    const [method, url] = spec.split(' ');
    const r = await api(method, url, body);
    if (!r.ok) return showStatus(out, errorText(r.error), 'error');
    if (r.data && r.data.sent === false) return showStatus(out, `Not sent: ${r.data.error}`, 'error');
    showStatus(out, doneText(r.data), 'ok');
    if (refresh) refreshSections(refresh.split(','));
  }

  function setupAlerts() {
    // The updates and approvals pages' buttons and forms work the same way.
    if (!$('#alerts-page') && !$('#updates-page') && !$('#approvals-page')) return;
    const main = $('main');
    for (const f of $$('form[data-api]', main)) showKinds(f);
    main.addEventListener('change', (ev) => {
      if (ev.target.matches('select[data-kind-select]')) showKinds(ev.target.form);
    });
    main.addEventListener('submit', async (ev) => {
      const f = ev.target.closest('form[data-api]');
      if (!f) return;
      ev.preventDefault();
      await callApi(f.dataset.api, formJson(f), $('.result', f), f.dataset.refresh, () => 'Saved.');
    });
    main.addEventListener('click', async (ev) => {
      const b = ev.target.closest('button[data-api]');
      if (!b) return;
      if (b.dataset.confirm && !window.confirm(b.dataset.confirm)) return;
      const out = $('.result', b.closest('section'));
      const body = b.dataset.body ? JSON.parse(b.dataset.body) : undefined;
      b.disabled = true;
      try {
        await callApi(b.dataset.api, body, out, b.dataset.refresh, (d) => (d && d.sent ? 'Sent: check that it arrived.' : 'Done.'));
      } finally { b.disabled = false; }
    });
  }

  // ---- account -----------------------------------------------------------------------------

  function setupAccount() {
    if (!$('#password-form')) return;
    const main = $('main');
    const forms = formHandlers(main);

    forms['password-form'] = async (f) => {
      const out = $('#password-result');
      if (f.new_password.value !== f.confirm.value) return showStatus(out, 'The two new passwords differ.', 'error');
      let revoke = false;
      if (f.revoke_tokens.checked) {
        // Count now, not when the page was drawn: the dialog says what will stop.
        const list = await api('GET', '/api/me/tokens');
        if (!list.ok) return showStatus(out, errorText(list.error), 'error');
        const live = list.data.tokens.filter((t) => !t.revoked_at).length;
        if (live > 0) {
          const c = await confirmDialog({
            title: `Revoke your ${plural(live, 'token')} too?`,
            text: [`${plural(live, 'personal access token')} will stop working at once: every MCP client or script that uses one needs a new token.`],
            confirm: `Change password and revoke ${live}`, danger: true,
          });
          if (!c.ok) return;
          revoke = true;
        }
      }
      const r = await api('POST', '/api/me/password', {
        current_password: f.current_password.value, new_password: f.new_password.value, revoke_tokens: revoke,
      });
      if (!r.ok) return showStatus(out, errorText(r.error), 'error');
      f.reset();
      showStatus(out, `Password changed. Your other sessions have ended and your connected apps are disconnected${revoke ? '; your tokens are revoked' : ''}.`, 'ok');
      refreshSections(['apps', 'tokens']);
    };

    forms['token-form'] = async (f) => {
      const label = f.label.value.trim();
      const body = { password: f.password.value };
      if (label) body.label = label;
      const r = await api('POST', '/api/me/tokens', body);
      const out = $('#tokens-result');
      if (!r.ok) return showStatus(out, errorText(r.error), 'error');
      f.reset();
      showStatus(out, [secretBox('Your new token (shown once):', r.data.token, 'Paste it into your MCP client as Authorization: Bearer <token>.', 'new-token')], 'ok');
      refreshSections(['tokens']);
    };

    main.addEventListener('click', async (ev) => {
      const tokenButton = ev.target.closest('button[data-token-action]');
      const grantButton = ev.target.closest('button[data-grant-action]');
      if (tokenButton) {
        const tr = tokenButton.closest('tr[data-token-id]');
        const c = await confirmDialog({ title: 'Revoke this token?', text: ['Clients using it stop working at once.'], confirm: 'Revoke', danger: true });
        if (!c.ok) return;
        const r = await api('DELETE', `/api/me/tokens/${enc(tr.dataset.tokenId)}`);
        const out = $('#tokens-result');
        if (!r.ok) return showStatus(out, errorText(r.error), 'error');
        showStatus(out, 'Token revoked.', 'ok');
        refreshSections(['tokens']);
      } else if (grantButton) {
        const tr = grantButton.closest('tr[data-grant-id]');
        const app = tr.dataset.app;
        const c = await confirmDialog({
          title: `Disconnect ${app}?`,
          text: ['It loses access at once. To use it with kenny again, connect it again from the app.'],
          confirm: 'Disconnect', danger: true,
        });
        if (!c.ok) return;
        const r = await api('DELETE', `/api/me/grants/${enc(tr.dataset.grantId)}`);
        const out = $('#apps-result');
        if (!r.ok) return showStatus(out, errorText(r.error), 'error');
        showStatus(out, `Disconnected ${app}.`, 'ok');
        refreshSections(['apps']);
      }
    });
  }

  // ---- host page: web filter and local accounts ---------------------------------------

  function setupHousehold() {
    const card = $('#webfilter');
    if (!card) return;
    const id = card.dataset.agent;
    const main = $('main');
    const wfStatus = () => $('#wf-status');
    const acctStatus = () => $('#acct-status');
    const zone = (() => { try { return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC'; } catch { return 'UTC'; } })();
    const fillZone = () => { for (const i of $$('input[data-default-zone]')) if (!i.value) i.value = zone; };
    fillZone();
    const schedules = () => { try { return JSON.parse($('#webfilter').dataset.schedules || '[]') || []; } catch { return []; } };
    const checked = (form, name) => $$(`input[name="${name}"]:checked`, form).map((i) => i.value);

    async function afterFilter(text) {
      await refreshSections(['webfilter', 'recent']);
      fillZone();
      showStatus(wfStatus(), text, 'ok');
    }
    async function setFilter(body, doneText) {
      showStatus(wfStatus(), 'Saving…');
      const r = await api('PUT', `/api/agent/${enc(id)}/webfilter`, body);
      if (!r.ok) return showStatus(wfStatus(), errorText(r.error), 'error');
      await afterFilter(doneText);
    }
    async function account(tool, body, doneText) {
      showStatus(acctStatus(), 'Asking the PC…');
      const r = await api('POST', `/api/agent/${enc(id)}/accounts/${enc(tool)}`, body);
      if (!r.ok) return showStatus(acctStatus(), errorText(r.error), 'error');
      // The list comes from the latest snapshot: take a fresh one.
      await api('POST', `/api/agent/${enc(id)}/refresh`);
      await refreshSections(['accounts', 'telemetry', 'recent']);
      showStatus(acctStatus(), doneText, 'ok');
      return true;
    }

    const forms = formHandlers(main);
    forms['wf-settings'] = (f) => setFilter({
      enabled: f.elements.enabled.checked,
      mode: f.elements.mode.value,
      categories: checked(f, 'category'),
      doh_lockdown: f.elements.doh_lockdown.checked,
      record_activity: f.elements.record_activity.checked,
    }, 'Saved: the server applies it to the PC now and keeps it there.');
    forms['wf-entry'] = (f) => {
      const domain = f.elements.domain.value.trim();
      setFilter({ add_entries: [{ domain, kind: f.elements.kind.value }] }, `${domain}: ${f.elements.kind.value} entry added.`);
    };
    forms['wf-window'] = (f) => {
      const days = checked(f, 'day');
      if (!days.length) return showStatus(wfStatus(), 'Pick the days the window starts on.', 'error');
      const w = {
        name: f.elements.name.value.trim(), days,
        start: f.elements.start.value, end: f.elements.end.value,
        time_zone: f.elements.time_zone.value.trim() || zone, set: f.elements.set.value,
      };
      const cats = checked(f, 'window-category');
      if (cats.length) w.categories = cats;
      setFilter({ schedules: [...schedules(), w] }, `Window "${w.name}" added.`);
    };
    forms['acct-create'] = async (f) => {
      const body = { name: f.elements.name.value.trim(), password: f.elements.password.value, admin: f.elements.admin.checked };
      const display = f.elements.display_name.value.trim();
      if (display) body.display_name = display;
      f.elements.password.value = '';
      await account('account_create', body, `Account ${body.name} created.`);
    };
    forms['acct-policy'] = (f) => account('password_policy_set', formJson(f), 'Password policy set.');

    main.addEventListener('click', async (ev) => {
      const b = ev.target.closest('button[data-wf], button[data-wf-remove], button[data-wf-window], button[data-acct]');
      if (!b) return;
      if (b.dataset.wf === 'push') {
        showStatus(wfStatus(), 'Applying…');
        const r = await api('POST', `/api/agent/${enc(id)}/webfilter/push`);
        if (!r.ok) return showStatus(wfStatus(), errorText(r.error), 'error');
        const p = r.data.pushed;
        await afterFilter(p.action === 'applied' ? `Applied: ${plural(p.count, 'name')} blocked.` : `Cleared: ${p.why}.`);
      } else if (b.dataset.wf === 'check') {
        showStatus(wfStatus(), 'Asking the PC…');
        const r = await api('GET', `/api/agent/${enc(id)}/webfilter?check=true`);
        if (!r.ok) return showStatus(wfStatus(), errorText(r.error), 'error');
        await afterFilter(r.data.checked === true ? `Checked: ${r.data.state.summary}.` : `Not checked: ${r.data.checked || 'no filter set up'}.`);
      } else if (b.dataset.wfRemove) {
        setFilter({ remove_entries: [b.dataset.wfRemove] }, `${b.dataset.wfRemove} removed.`);
      } else if (b.dataset.wfWindow !== undefined) {
        const list = schedules();
        const [gone] = list.splice(Number(b.dataset.wfWindow), 1);
        setFilter({ schedules: list }, `Window "${gone ? gone.name : ''}" removed.`);
      } else if (b.dataset.acct) {
        const principal = b.dataset.principal;
        const tool = b.dataset.acct;
        const value = b.dataset.value;
        if (tool === 'account_set_enabled') await account(tool, { principal, enabled: value === 'true' }, `${principal} ${value === 'true' ? 'enabled' : 'disabled'}.`);
        else if (tool === 'account_set_admin') await account(tool, { principal, admin: value === 'true' }, `${principal} ${value === 'true' ? 'is now an administrator' : 'is no longer an administrator'}.`);
        else if (tool === 'account_session_action') await account(tool, { principal, action: value, warn_seconds: 30 }, `${principal}: ${value === 'lock' ? 'locked' : 'signed out'} after a 30 s warning.`);
        else if (tool === 'account_delete') {
          const answer = await confirmDialog({
            title: `Delete ${principal}?`,
            text: [`The account ${principal} is removed from ${id}; it can no longer sign in.`],
            option: 'Also delete its files (the home folder or profile)', confirm: 'Delete', danger: true,
          });
          if (answer.ok) await account(tool, { principal, remove_profile: answer.checked }, `${principal} deleted.`);
        }
      }
    });
  }

  window.kenny = Object.freeze({ api, csrf, el, refreshSections, localTimes });

  document.addEventListener('DOMContentLoaded', () => {
    setupTheme();
    localTimes();
    setupFleet();
    setupHost();
    setupAdmin();
    setupAlerts();
    setupAccount();
    setupHousehold();
    document.dispatchEvent(new CustomEvent('kenny:ready', { detail: window.kenny }));
  });
})();
