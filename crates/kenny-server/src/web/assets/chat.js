// kenny dashboard chat panel. Talks to /api/chat (cookie session + X-CSRF-Token) and
// reads its replies as server-sent events from fetch streams. Everything from the
// server or a PC is shown with textContent, never as HTML.
(() => {
  "use strict";
  const panel = document.getElementById("chat");
  if (!panel) return;
  const csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
  const pageAgent = panel.dataset.agent || "";

  const el = (tag, cls, text) => {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  };

  panel.textContent = "";
  const head = el("div", "chat-head");
  const title = el("h2", "", "Ask kenny");
  const sessions = el("select", "chat-sessions");
  sessions.setAttribute("aria-label", "Conversation");
  const newBtn = el("button", "chat-new", "New");
  newBtn.type = "button";
  const target = el("select", "chat-target");
  target.setAttribute("aria-label", "PC this conversation works on");
  head.append(title, sessions, newBtn, target);
  const notice = el("p", "chat-notice");
  const log = el("div", "chat-log");
  log.setAttribute("aria-live", "polite");
  const form = el("form", "chat-form");
  const input = el("textarea", "chat-input");
  input.rows = 2;
  input.placeholder = "Ask about this PC, e.g. why is it slow?";
  input.setAttribute("aria-label", "Message");
  const send = el("button", "chat-send", "Send");
  send.type = "submit";
  form.append(input, send);
  panel.append(head, notice, log, form);

  let current = null;
  let busy = false;

  async function api(method, path, body) {
    const res = await fetch(path, {
      method,
      credentials: "same-origin",
      headers: Object.assign({ "X-CSRF-Token": csrf }, body ? { "Content-Type": "application/json" } : {}),
      body: body ? JSON.stringify(body) : undefined,
    });
    if (!res.ok && res.status !== 204) {
      let message = res.statusText;
      try { message = (await res.json()).error.message; } catch (_) { /* keep status text */ }
      throw new Error(message);
    }
    return res;
  }

  function say(text, cls) {
    notice.textContent = text || "";
    notice.className = "chat-notice" + (cls ? " " + cls : "");
  }

  function bubble(role) {
    const b = el("div", "msg msg-" + role);
    log.append(b);
    log.scrollTop = log.scrollHeight;
    return b;
  }

  function toolLine(tool, agent, status, summary) {
    const line = el("div", "tool tool-" + status);
    line.append(el("span", "tool-name", tool), el("span", "tool-pc", agent ? " on " + agent : ""));
    if (summary) line.append(el("div", "tool-summary", summary));
    log.append(line);
    log.scrollTop = log.scrollHeight;
    return line;
  }

  function heldCard(call) {
    const card = el("div", "held");
    card.dataset.call = call.id;
    card.append(el("strong", "", "Waiting for your approval"));
    const what = el("div", "held-what");
    what.append(el("span", "tool-name", call.tool), el("span", "", " on "), el("strong", "held-pc", call.agent_id || "(no PC)"));
    card.append(what);
    const reason = call.reason || call.hold_reason;
    if (reason) card.append(el("div", "held-reason", "Held because " + reason + "."));
    // The whole change is shown, except a password's characters.
    const masked = JSON.stringify(call.args, (key, value) =>
      key === "password" && typeof value === "string" ? "\u2022".repeat(8) + " (" + value.length + " characters)" : value, 2);
    card.append(el("pre", "held-args", masked));
    const approve = el("button", "approve", "Approve");
    const deny = el("button", "deny danger", "Deny");
    approve.type = deny.type = "button";
    approve.addEventListener("click", () => decide(call.id, "approve", card));
    deny.addEventListener("click", () => decide(call.id, "deny", card));
    const actions = el("div", "held-actions");
    actions.append(approve, deny);
    card.append(actions);
    log.append(card);
    log.scrollTop = log.scrollHeight;
  }

  // Reads an SSE response body and hands each event to `onEvent`.
  async function stream(res, onEvent) {
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const raw = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        let name = "message";
        const data = [];
        for (const line of raw.split("\n")) {
          if (line.startsWith("event:")) name = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).trim());
        }
        if (data.length) onEvent(name, JSON.parse(data.join("\n")));
      }
    }
  }

  function handler() {
    let text = null;
    return (name, d) => {
      if (name === "text") {
        if (!text) text = bubble("assistant");
        text.textContent += d.text;
      } else if (name === "tool_call") {
        text = null;
        toolLine(d.tool, d.agent_id, "running", "");
      } else if (name === "tool_result") {
        text = null;
        toolLine(d.tool, d.agent_id, d.ok ? "ok" : "failed", d.summary);
      } else if (name === "held") {
        text = null;
        heldCard(d);
      } else if (name === "error") {
        say(d.message, "error");
      } else if (name === "done") {
        text = null;
        if (d.stop_reason === "held") say("A call waits for your approval.");
      }
    };
  }

  async function run(path, body) {
    busy = true;
    send.disabled = true;
    try {
      const res = await api("POST", path, body);
      await stream(res, handler());
    } catch (e) {
      say(e.message, "error");
    } finally {
      busy = false;
      send.disabled = false;
      refreshSessions(current);
    }
  }

  async function decide(id, decision, card) {
    card.querySelectorAll("button").forEach((b) => { b.disabled = true; });
    card.classList.add(decision === "approve" ? "approved" : "denied");
    card.append(el("div", "held-decision", decision === "approve" ? "Approved" : "Denied"));
    say("");
    await run("/api/chat/calls/" + encodeURIComponent(id) + "/" + decision);
  }

  function render(data) {
    log.textContent = "";
    const calls = {};
    for (const c of data.calls) calls[c.id] = c;
    for (const m of data.messages) {
      for (const block of m.content) {
        if (block.type === "text" && block.text) bubble(m.role).textContent = block.text;
        if (block.type === "tool_use") {
          const c = calls[block.id];
          if (!c) continue;
          if (c.status === "held") heldCard(c);
          else toolLine(c.tool, c.agent_id, c.is_error ? "failed" : c.status === "denied" ? "failed" : "ok", c.status === "done" ? "" : c.status);
        }
      }
    }
  }

  async function open(id) {
    current = id;
    const data = await (await api("GET", "/api/chat/sessions/" + encodeURIComponent(id))).json();
    target.value = data.session.selected_agent || "";
    render(data);
  }

  async function refreshSessions(keep) {
    const list = (await (await api("GET", "/api/chat/sessions")).json()).sessions;
    sessions.textContent = "";
    for (const s of list) {
      const o = el("option", "", s.title);
      o.value = s.id;
      sessions.append(o);
    }
    if (keep) sessions.value = keep;
    return list;
  }

  async function create() {
    const s = await (await api("POST", "/api/chat/sessions", target.value ? { selected_agent: target.value } : {})).json();
    await refreshSessions(s.id);
    await open(s.id);
  }

  sessions.addEventListener("change", () => {
    if (sessions.value) open(sessions.value).catch((e) => say(e.message, "error"));
  });
  newBtn.addEventListener("click", () => create().catch((e) => say(e.message, "error")));
  target.addEventListener("change", async () => {
    if (!current) return;
    try {
      await api("PUT", "/api/chat/sessions/" + encodeURIComponent(current) + "/selection", { agent_id: target.value || null });
      say(target.value ? "This conversation now works on " + target.value + "." : "No PC selected.");
    } catch (e) { say(e.message, "error"); }
  });
  // "Ask kenny about this" on a host page's section: a new conversation on that PC,
  // opened with the section's verdict as the question.
  document.addEventListener("kenny:ask", async (ev) => {
    const { agent, text } = ev.detail || {};
    if (!agent || !text || busy) return;
    try {
      if (![...target.options].some((o) => o.value === agent)) {
        say("This PC is not among the ones this chat can work on.", "error");
        return;
      }
      target.value = agent;
      await create();
      input.value = text;
      form.requestSubmit();
      panel.scrollIntoView({ behavior: "smooth", block: "start" });
    } catch (e) { say(e.message, "error"); }
  });
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const text = input.value.trim();
    if (!text || busy) return;
    if (!current) await create();
    input.value = "";
    bubble("user").textContent = text;
    await run("/api/chat/sessions/" + encodeURIComponent(current) + "/messages", { text });
  });

  (async () => {
    const status = await (await api("GET", "/api/chat/status")).json();
    const agents = (await (await api("GET", "/api/agents")).json()).agents;
    const none = el("option", "", "No PC selected");
    none.value = "";
    target.append(none);
    for (const a of agents) {
      const o = el("option", "", a.agent_id + (a.online ? "" : " (offline)"));
      o.value = a.agent_id;
      target.append(o);
    }
    target.value = pageAgent;
    if (!status.enabled) {
      say(status.message, "error");
      form.hidden = true;
      for (const control of [sessions, newBtn, target]) control.hidden = true;
      return;
    }
    const list = await refreshSessions(null);
    const mine = list.find((s) => (s.selected_agent || "") === pageAgent);
    if (mine) {
      sessions.value = mine.id;
      await open(mine.id);
    } else if (list.length && !pageAgent) {
      sessions.value = list[0].id;
      await open(list[0].id);
    } else {
      // A host page with no conversation about this PC yet: the first message starts one.
      const fresh = el("option", "", "New conversation");
      fresh.value = "";
      sessions.prepend(fresh);
      sessions.value = "";
    }
  })().catch((e) => say(e.message, "error"));
})();
