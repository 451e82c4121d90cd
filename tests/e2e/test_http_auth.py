"""Bearer auth on /mcp and /api, and the audit log's filtering, order and redaction."""

from __future__ import annotations

import datetime as dt

import httpx
import pytest

from conftest import call, expect_error, shell_stdout, unique

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "0"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
AUDIT_FIELDS = {
    "id", "at", "user", "credential_kind", "credential_id", "agent_id", "tool",
    "args_digest", "outcome", "error_code", "duration_ms", "client_addr",
}


@pytest.mark.parametrize(
    "auth",
    [None, "Bearer kenny_pat_definitelynotarealtoken", "Bearer", "Basic YWRtaW46c29tZS1wYXNzd29yZA=="],
    ids=["none", "bad-pat", "empty-bearer", "basic"],
)
def test_mcp_requires_bearer(kenny, auth):
    headers = dict(MCP_HEADERS)
    if auth is not None:
        headers["Authorization"] = auth
    with httpx.Client(timeout=10) as http:
        r = http.post(kenny.mcp_url, json=INIT, headers=headers)
    assert r.status_code == 401, f"POST /mcp with auth={auth!r} -> {r.status_code} {r.text[:300]!r}"
    www = r.headers.get("www-authenticate", "")
    assert www.startswith("Bearer"), f"WWW-Authenticate: {www!r}"


def test_mcp_accepts_valid_pat(kenny):
    with httpx.Client(timeout=10) as http:
        r = http.post(kenny.mcp_url, json=INIT, headers={**MCP_HEADERS, "Authorization": f"Bearer {kenny.admin_pat}"})
    assert r.status_code == 200, f"{r.status_code} {r.text[:300]!r}"


def test_mcp_refuses_unknown_host_and_says_how_to_fix_it(kenny):
    """DNS-rebinding guard: /mcp answers only for configured hosts, and the refusal
    names the setting to change."""
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {kenny.admin_pat}", "Host": f"rebound.example:{kenny.port}"}
    with httpx.Client(timeout=10) as http:
        r = http.post(kenny.mcp_url, json=INIT, headers=headers)
    assert r.status_code == 403, f"{r.status_code} {r.text[:300]!r}"
    assert r.json()["error"]["code"] == "forbidden_host"
    assert "--public-url" in r.json()["error"]["message"]


def test_agent_token_is_not_a_pat(kenny):
    """A per-agent token must not open /mcp or /api (foreign token kind)."""
    creds = kenny.add_agent("pc-x")
    with httpx.Client(timeout=10) as http:
        r = http.post(kenny.mcp_url, json=INIT, headers={**MCP_HEADERS, "Authorization": f"Bearer {creds['token']}"})
        assert r.status_code == 401, f"agent token on /mcp -> {r.status_code}"
        r = http.get(f"{kenny.base_url}/api/audit", headers={"Authorization": f"Bearer {creds['token']}"})
        assert r.status_code == 401, f"agent token on /api/audit -> {r.status_code}"


@pytest.mark.parametrize("auth", [None, "Bearer kenny_pat_definitelynotarealtoken"], ids=["none", "bad-pat"])
def test_audit_requires_bearer(kenny, auth):
    headers = {"Authorization": auth} if auth else {}
    with httpx.Client(timeout=10) as http:
        r = http.get(f"{kenny.base_url}/api/audit", headers=headers)
    assert r.status_code == 401, f"GET /api/audit auth={auth!r} -> {r.status_code} {r.text[:300]!r}"


def _parse_at(value) -> dt.datetime:
    if isinstance(value, (int, float)):
        return dt.datetime.fromtimestamp(value, dt.timezone.utc)
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


async def test_audit_filter_order_and_redaction(kenny):
    await kenny.start_agents(["pc-a", "pc-b"])
    kenny.add_user("bob", "user", hosts=["pc-b"])
    bob = kenny.create_token("bob")
    secret_a = [unique("secret-a") for _ in range(3)]
    secret_b = unique("secret-b")
    async with kenny.mcp() as client:
        for s in secret_a:
            assert shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-a", "command": f"echo {s}"})) == s + "\n"
        assert shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-b", "command": f"echo {secret_b}"}))
        # An agent-side failure is audited as an error.
        res = await call(client, "fs_read", {"agent_id": "pc-a", "path": f"/nonexistent/{secret_a[0]}"})
        assert res.is_error
    async with kenny.mcp(token=bob) as client:
        expect_error(await call(client, "shell_exec", {"agent_id": "pc-a", "command": f"echo {secret_a[0]}"}), "forbidden")

    rows = kenny.audit(agent_id="pc-a", limit=100)
    assert rows, "no audit rows for pc-a"
    for e in kenny.audit(limit=1000):
        assert kenny.admin_pat not in str(e) and bob not in str(e), f"a bearer token leaked into the audit log: {e}"
    for e in rows:
        assert AUDIT_FIELDS <= set(e), f"audit row lacks {AUDIT_FIELDS - set(e)}: {e}"
        assert isinstance(e["credential_kind"], str) and e["credential_kind"], e
        assert e["client_addr"] == "127.0.0.1", f"where the call came from must be recorded: {e}"
        assert e["agent_id"] == "pc-a", f"filter agent_id=pc-a returned {e}"
        for s in [*secret_a, secret_b]:
            assert s not in str(e["args_digest"]), f"raw argument in args_digest: {e}"
            assert s not in str(e), f"raw argument leaked into an audit row: {e}"
    ok = [e for e in rows if e["tool"] == "shell_exec" and e["outcome"] == "ok"]
    assert len(ok) == 3, f"expected 3 ok shell_exec rows for pc-a, got {rows}"
    assert all(e["user"] == "admin" for e in ok), ok
    errors = [e for e in rows if e["tool"] == "fs_read"]
    assert len(errors) == 1 and errors[0]["outcome"] == "error" and errors[0]["error_code"], errors
    refused = [e for e in rows if e["outcome"] == "refused"]
    assert len(refused) == 1 and refused[0]["error_code"] == "forbidden" and refused[0]["user"] == "bob", refused
    assert len(rows) == 5, f"one row per forwarded call and per refusal; got {len(rows)}: {rows}"

    # Newest first: the refusal was the last call made.
    ats = [_parse_at(e["at"]) for e in rows]
    assert ats == sorted(ats, reverse=True), f"not newest first: {[e['at'] for e in rows]}"
    assert rows[0]["outcome"] == "refused", rows[0]

    only_b = kenny.audit(agent_id="pc-b", limit=100)
    assert len(only_b) == 1 and only_b[0]["agent_id"] == "pc-b" and only_b[0]["outcome"] == "ok", only_b
    assert len(kenny.audit(limit=2)) == 2
    assert len(kenny.audit(agent_id="pc-a", limit=1)) == 1
    assert kenny.audit(agent_id="pc-a", limit=1)[0]["id"] == rows[0]["id"]


def test_server_configured_by_env(kenny):
    """KENNY_LISTEN / KENNY_DATA_DIR work in place of --listen / --data-dir."""
    kenny.stop_server()
    kenny.start_server(via_env=True)  # same data dir: the admin PAT still works
    with httpx.Client(timeout=10) as http:
        assert http.get(f"{kenny.base_url}/healthz").status_code == 200
        r = http.get(f"{kenny.base_url}/api/audit", headers={"Authorization": f"Bearer {kenny.admin_pat}"})
        assert r.status_code == 200, r.text
