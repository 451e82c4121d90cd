"""The dashboard's host actions (`/api/agent/{id}/...`, `/api/agents/{id}/update`) and
pages: scope-checked like MCP calls, each leaving an audit row with who and from where,
errors in the API's one shape with sensible statuses, and pages that a scoped user
cannot use to learn about other hosts."""

from __future__ import annotations

import asyncio
import time
from contextlib import closing

import httpx

from conftest import FakeAgent
from test_signin import PASSWORD, _client, _csrf, _login

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _session(kenny, user: str) -> tuple[httpx.Client, str]:
    """A signed-in browser-like client and its CSRF token (from the page's meta tag)."""
    http = _client(kenny)
    assert _login(http, user, PASSWORD).status_code == 303
    page = http.get("/")
    assert page.status_code == 200, page.text
    csrf = _csrf(page)
    assert f'<meta name="csrf-token" content="{csrf}">' in page.text
    http.headers["X-CSRF-Token"] = csrf
    http.timeout = 90
    return http, csrf


def _bearer(kenny, token: str) -> httpx.Client:
    return httpx.Client(base_url=kenny.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=90)


def _error(r: httpx.Response, status: int, code: str) -> str:
    assert r.status_code == status, f"expected {status} {code}, got {r.status_code}: {r.text}"
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code, body
    assert body["error"]["message"].strip(), body
    return body["error"]["message"]


def _audit_row(kenny, *, tool: str, user: str, agent_id: str | None, outcome: str, timeout: float = 10) -> dict:
    """The newest audit row for this tool and user, once it has the wanted outcome (rows
    are written in the background)."""
    deadline = time.monotonic() + timeout
    rows: list[dict] = []
    while time.monotonic() < deadline:
        rows = [r for r in kenny.audit(limit=200) if r["tool"] == tool and r["user"] == user]
        if rows and rows[0]["outcome"] == outcome:
            assert rows[0]["agent_id"] == agent_id, rows[0]
            return rows[0]
        time.sleep(0.1)
    raise AssertionError(f"no {outcome!r} audit row for {tool} by {user}; rows: {rows}")


async def test_every_host_action_is_audited_with_who_and_where(kenny):
    kenny.add_user("dana", "operator", password=PASSWORD)
    await kenny.start_agents(["pc-a"])
    http, _ = _session(kenny, "dana")
    with closing(http):
        facts = http.get("/api/agent/pc-a")
        assert facts.status_code == 200, facts.text
        body = facts.json()
        assert body["agent"]["agent_id"] == "pc-a" and body["agent"]["online"] is True
        assert body["agent"]["os"] == "linux" and body["screenshot"] is None

        r = http.post("/api/agent/pc-a/refresh")
        assert r.status_code == 200, r.text
        refreshed = r.json()
        snapshot = refreshed["snapshot"]
        assert {"disk", "memory", "cpu", "os"} <= set(snapshot), sorted(snapshot)
        assert refreshed["health"]["status"] in {"ok", "warn", "crit", "unknown"}
        assert refreshed["health"]["sections"] == len(snapshot)
        # Kept as the latest snapshot, where the telemetry API and the pages read it.
        deadline = time.monotonic() + 10
        while True:
            latest = http.get("/api/agents/pc-a/telemetry")
            if latest.status_code == 200 and latest.json()["collected_at"] == refreshed["collected_at"]:
                break
            assert time.monotonic() < deadline, f"refreshed snapshot not stored: {latest.text[:300]}"
            await asyncio.sleep(0.1)
        assert latest.json()["snapshot"].keys() == snapshot.keys()
        facts = http.get("/api/agent/pc-a").json()
        assert facts["telemetry"]["collected_at"] == refreshed["collected_at"]
        assert facts["telemetry"]["health"] == refreshed["health"]

        # No X display for this agent: the capture fails and says why.
        msg = _error(http.post("/api/agent/pc-a/screenshot"), 502, "exec_failed")
        assert "display" in msg.lower(), msg
        _error(http.get("/api/agent/pc-a/screenshot"), 404, "not_found")

        msg = _error(http.post("/api/agent/pc-a/remotehelp"), 422, "unsupported")
        assert "Windows" in msg or "Quick Assist" in msg, msg

        # No newer build on this server: said plainly, with where to put one.
        msg = _error(http.post("/api/agents/pc-a/update"), 404, "not_found")
        assert "agent-releases" in msg and "kenny-agent-<version>-linux-" in msg, msg

    expected = [
        ("agent_health", "ok", None),
        ("telemetry_collect", "ok", None),
        ("screen_capture", "error", "exec_failed"),
        ("remotehelp_start", "error", "unsupported"),
        ("agent_update", "refused", "not_found"),
    ]
    for tool, outcome, code in expected:
        row = _audit_row(kenny, tool=tool, user="dana", agent_id="pc-a", outcome=outcome)
        assert row["client_addr"] == "127.0.0.1", row
        assert row["credential_kind"] == "session", row
        assert row["error_code"] == code, row

    # The target is the one in the URL: a body naming another PC is refused, not obeyed.
    http, _ = _session(kenny, "dana")
    with closing(http):
        msg = _error(http.post("/api/agents/pc-a/update", json={"agent_id": "pc-b"}), 400, "bad_args")
        assert "pc-b" in msg and "pc-a" in msg, msg


async def test_a_capture_is_kept_and_served_as_png(kenny, xvfb):
    kenny.start_agent("pc-a", env={"DISPLAY": xvfb})
    await kenny.wait_agents(["pc-a"])
    with _bearer(kenny, kenny.admin_pat) as api:
        r = api.post("/api/agent/pc-a/screenshot")
        assert r.status_code == 201, r.text
        shot = r.json()["screenshot"]
        assert r.json()["url"] == "/api/agent/pc-a/screenshot"
        assert shot["agent_id"] == "pc-a" and shot["taken_by"] == "admin"
        assert shot["width"] == 1280 and shot["height"] == 720, shot

        img = api.get("/api/agent/pc-a/screenshot")
        assert img.status_code == 200 and img.headers["content-type"] == "image/png"
        assert img.content.startswith(PNG_SIGNATURE) and len(img.content) == shot["bytes"]
        assert img.headers["x-kenny-taken-by"] == "admin"
        assert img.headers["x-kenny-taken-at"] == shot["taken_at"]
        assert api.get("/api/agent/pc-a").json()["screenshot"] == shot
    row = _audit_row(kenny, tool="screen_capture", user="admin", agent_id="pc-a", outcome="ok")
    assert row["client_addr"] == "127.0.0.1" and row["credential_kind"] == "pat", row


async def test_hosts_out_of_scope_look_unknown_and_their_refusals_are_audited(kenny):
    kenny.add_user("kim", "user", hosts=["pc-a"], password=PASSWORD)
    await kenny.start_agents(["pc-a", "pc-b"])
    with _bearer(kenny, kenny.create_token("kim")) as kim:
        assert kim.get("/api/agent/pc-a").status_code == 200
        unknown = _error(kim.get("/api/agent/nowhere"), 404, "not_found")
        hidden = _error(kim.get("/api/agent/pc-b"), 404, "not_found")
        assert hidden.replace("pc-b", "X") == unknown.replace("nowhere", "X"), (hidden, unknown)
        for path in ("refresh", "screenshot", "remotehelp"):
            a = _error(kim.post(f"/api/agent/pc-b/{path}"), 404, "not_found")
            b = _error(kim.post(f"/api/agent/nowhere/{path}"), 404, "not_found")
            assert a.replace("pc-b", "X") == b.replace("nowhere", "X"), (path, a, b)
        _error(kim.post("/api/agents/pc-b/update"), 404, "not_found")
        _error(kim.get("/api/agent/pc-b/screenshot"), 404, "not_found")
        # Her own host works.
        assert kim.post("/api/agent/pc-a/refresh").status_code == 200

    for tool in ("agent_health", "telemetry_collect", "screen_capture", "remotehelp_start", "agent_update"):
        refused = [r for r in kenny.audit(agent_id="pc-b", limit=200) if r["tool"] == tool and r["user"] == "kim"]
        assert refused, f"no refusal audited for {tool} on pc-b"
        assert all(r["outcome"] == "refused" and r["error_code"] == "forbidden" for r in refused), refused
        assert all(r["client_addr"] == "127.0.0.1" for r in refused), refused
    # Nothing ran on pc-b for her: every pc-b row of hers is a refusal.
    assert all(r["outcome"] == "refused" for r in kenny.audit(agent_id="pc-b", limit=200) if r["user"] == "kim")


async def test_offline_timeout_and_bad_input(kenny):
    kenny.add_agent("pc-off")
    with _bearer(kenny, kenny.admin_pat) as api:
        msg = _error(api.post("/api/agent/pc-off/refresh"), 409, "offline")
        assert "not connected" in msg, msg
        assert api.get("/api/agent/pc-off").json()["agent"]["online"] is False
        # Ids that cannot be agents, and a host that does not exist.
        for bad in ("-x", "a%20b", "x" * 65, "nope"):
            _error(api.post(f"/api/agent/{bad}/refresh"), 404, "not_found")
            _error(api.get(f"/api/agent/{bad}"), 404, "not_found")
        _error(api.post("/api/agents/nope/update"), 404, "not_found")
        assert api.get("/api/agent/pc-off/refresh").status_code == 405
    with httpx.Client(base_url=kenny.base_url, timeout=10) as anon:
        _error(anon.post("/api/agent/pc-off/refresh"), 401, "unauthorized")
        _error(anon.get("/api/agent/pc-off/screenshot"), 401, "unauthorized")

    # A signed-in page's request without the CSRF header changes nothing.
    kenny.add_user("dana", "operator", password=PASSWORD)
    http, _ = _session(kenny, "dana")
    with closing(http):
        del http.headers["X-CSRF-Token"]
        _error(http.post("/api/agents/pc-off/update"), 403, "csrf")
    assert not [r for r in kenny.audit(limit=200) if r["user"] == "dana"], "a CSRF refusal reaches no handler"

    # An agent that never answers: 504 after the server's call timeout.
    kenny.stop_server()
    kenny.start_server(extra_args=["--call-timeout-secs", "2"])
    creds = kenny.add_agent("fake")
    fake = FakeAgent(kenny.ws_url, "fake", creds["token"])
    await fake.register()
    try:
        await kenny.wait_agents(["fake"])
        with _bearer(kenny, kenny.admin_pat) as api:
            pending = asyncio.create_task(asyncio.to_thread(api.post, "/api/agent/fake/refresh"))
            req = await fake.next_request(timeout=10)
            assert req["tool"] == "telemetry_collect" and req["args"] == {}, req
            msg = _error(await asyncio.wait_for(pending, 20), 504, "timeout")
            assert "fake" in msg, msg

            # An answer that is not what the tool returns is a 502, not a stored snapshot.
            pending = asyncio.create_task(asyncio.to_thread(api.post, "/api/agent/fake/screenshot"))
            req = await fake.next_request(timeout=10)
            await fake.respond(req["id"], result={"mime_type": "image/png", "data_base64": "PHN2Zz4="})
            _error(await asyncio.wait_for(pending, 20), 502, "exec_failed")
            _error(api.get("/api/agent/fake/screenshot"), 404, "not_found")
    finally:
        await fake.close()


def test_superusers_add_agents_and_get_the_install_command(kenny):
    kenny.add_user("op", "operator", password=PASSWORD)
    with _bearer(kenny, kenny.create_token("op")) as op:
        _error(op.post("/api/agents", json={"agent_id": "den-pc"}), 403, "forbidden")
    with _bearer(kenny, kenny.admin_pat) as api:
        r = api.post("/api/agents", json={"agent_id": "den-pc"})
        assert r.status_code == 201, r.text
        d = r.json()
        assert d["server"] == kenny.base_url and d["token"].startswith("kenny_agt_")
        assert d["install_command"] == (
            f"kenny-agent install --server {kenny.base_url} --agent-id den-pc "
            f"--server-pubkey {d['server_pubkey']} --enroll-token {d['token']}"
        )
        # The same values the CLI prints.
        assert d["server_pubkey"] == kenny.add_agent("other-pc")["server_pubkey"]
        _error(api.post("/api/agents", json={"agent_id": "den-pc"}), 409, "conflict")
        assert "not valid" in _error(api.post("/api/agents", json={"agent_id": "bad id"}), 400, "bad_request")
        _error(api.post("/api/agents", json={"agent_id": "x", "extra": 1}), 400, "bad_request")
        listed = {a["agent_id"]: a for a in api.get("/api/agents").json()["agents"]}
        assert listed["den-pc"]["enrolled"] is False


async def test_pages_show_only_what_the_viewer_may_see(kenny):
    kenny.add_user("kim", "user", hosts=["pc-a"], password=PASSWORD)
    await kenny.start_agents(["pc-a", "pc-b"])
    with _client(kenny) as anon:
        r = anon.get("/hosts/pc-a")
        assert r.status_code == 303 and r.headers["location"] == "/login?next=%2Fhosts%2Fpc-a"
        assert anon.get("/audit").headers["location"] == "/login?next=%2Faudit"
        css = anon.get("/assets/dashboard.css")
        js = anon.get("/assets/dashboard.js")
        assert css.headers["content-type"].startswith("text/css") and ":root" in css.text
        assert js.headers["content-type"].startswith("text/javascript") and "X-CSRF-Token" in js.text
        assert ".innerHTML" not in js.text and "insertAdjacentHTML" not in js.text and "document.write" not in js.text

    http, _ = _session(kenny, "kim")
    with closing(http):
        fleet = http.get("/")
        assert "Signed in as <strong>kim</strong> (user)" in fleet.text
        assert 'href="/hosts/pc-a"' in fleet.text and "pc-b" not in fleet.text
        assert '<aside id="chat"' in fleet.text and "Chat loads here" in fleet.text
        assert 'href="/admin"' not in fleet.text
        csp = fleet.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp, csp
        assert "<script>" not in fleet.text and " onclick=" not in fleet.text

        host = http.get("/hosts/pc-a")
        assert host.status_code == 200
        assert '<aside id="chat" class="card chat" data-agent="pc-a"' in host.text
        for action in ("refresh", "screenshot", "remotehelp", "update"):
            assert f'data-action="{action}"' in host.text
        hidden, unknown = http.get("/hosts/pc-b"), http.get("/hosts/nowhere")
        assert hidden.status_code == unknown.status_code == 404
        assert hidden.text.replace("pc-b", "X") == unknown.text.replace("nowhere", "X")

        assert http.get("/admin").status_code == 403
        audit = http.get("/audit", params={"agent_id": "pc-a"})
        assert audit.status_code == 200 and "Audit log" in audit.text
        assert http.get("/audit", params={"before": "x"}).status_code == 400

    # The sign-in pages keep their own (framing-only) policy and inline style.
    with _client(kenny) as anon:
        login = anon.get("/login")
        assert login.headers["content-security-policy"] == "frame-ancestors 'none'"
