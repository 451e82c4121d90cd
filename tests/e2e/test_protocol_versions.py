"""/mcp speaks the 2025-era handshake revisions (2025-06-18, 2025-11-25: `initialize`)
and the 2026-07-28 revision (`server/discover`, per-request envelope), statelessly."""

from __future__ import annotations

import json

import httpx
import pytest

from conftest import call, expect_ok, shell_stdout

HANDSHAKE_VERSIONS = ["2025-06-18", "2025-11-25"]
MODERN_VERSION = "2026-07-28"


def _rpc(http: httpx.Client, url: str, token: str, body: dict, version: str | None = None) -> tuple[httpx.Response, dict | None]:
    """POST one JSON-RPC message; returns the HTTP response and the JSON-RPC reply (from a
    JSON body or an SSE stream), or None for an accepted notification."""
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {token}",
    }
    if version:
        headers["MCP-Protocol-Version"] = version
    r = http.post(url, json=body, headers=headers)
    if "id" not in body:
        return r, None
    ctype = r.headers.get("content-type", "")
    assert r.status_code == 200, f"{body['method']} -> HTTP {r.status_code} {r.text[:500]!r}"
    if ctype.startswith("application/json"):
        return r, r.json()
    assert ctype.startswith("text/event-stream"), f"unexpected content-type {ctype!r}"
    for event in r.text.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(ln[5:].lstrip() for ln in event.split("\n") if ln.startswith("data:"))
        if not data:
            continue
        msg = json.loads(data)
        if msg.get("id") == body["id"] and ("result" in msg or "error" in msg):
            return r, msg
    raise AssertionError(f"no JSON-RPC reply to id {body['id']} in SSE body {r.text[:500]!r}")


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
async def test_handshake_versions_raw(kenny, version):
    agents = await kenny.start_agents(["pc-a"])
    with httpx.Client(timeout=30) as http:
        r, init = _rpc(
            http,
            kenny.mcp_url,
            kenny.admin_pat,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "e2e-raw", "version": "0"}},
            },
        )
        assert "result" in init, f"initialize({version}) -> {init}"
        assert init["result"]["protocolVersion"] == version, f"asked {version}, server chose {init['result']}"
        assert "tools" in init["result"].get("capabilities", {}), init["result"]
        assert "mcp-session-id" not in r.headers, "a stateless server must not issue an Mcp-Session-Id"

        r, _ = _rpc(http, kenny.mcp_url, kenny.admin_pat, {"jsonrpc": "2.0", "method": "notifications/initialized"}, version)
        assert r.status_code in (200, 202), f"notifications/initialized -> {r.status_code} {r.text[:200]!r}"

        _, listed = _rpc(http, kenny.mcp_url, kenny.admin_pat, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, version)
        tools = {t["name"]: t for t in listed["result"]["tools"]}
        for name in ("list_agents", "select_agent", "shell_exec", "fs_list", "fs_read", "powershell_exec"):
            assert name in tools, f"{name} missing from tools/list: {sorted(tools)}"
        for name in ("shell_exec", "fs_list", "fs_read", "powershell_exec"):
            schema = tools[name]["inputSchema"]
            assert "agent_id" in schema.get("properties", {}) and "agent_id" in schema.get("required", []), (
                f"{name} must require agent_id: {schema}"
            )
        assert "command" in tools["shell_exec"]["inputSchema"].get("required", [])

        _, res = _rpc(
            http,
            kenny.mcp_url,
            kenny.admin_pat,
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "shell_exec", "arguments": {"agent_id": "pc-a", "command": 'echo "$MARK"'}},
            },
            version,
        )
        result = res["result"]
        assert result.get("isError") is not True, result
        assert result["structuredContent"]["stdout"] == agents["pc-a"].mark + "\n", result


async def test_sdk_auto_negotiates_2026(kenny):
    agents = await kenny.start_agents(["pc-a"])
    async with kenny.mcp(mode="auto") as client:
        assert client.protocol_version == MODERN_VERSION, (
            f"SDK auto negotiation settled on {client.protocol_version}; the server should answer server/discover"
        )
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"list_agents", "shell_exec"} <= names
        assert "pc-a" in await kenny.list_agents(client)
        out = shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-a", "command": 'echo "$MARK"'}))
        assert out == agents["pc-a"].mark + "\n"


async def test_sdk_pinned_2026_without_probe(kenny):
    """A client that adopts 2026-07-28 directly (no discover probe) is served per request."""
    agents = await kenny.start_agents(["pc-a"])
    async with kenny.mcp(mode=MODERN_VERSION) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "shell_exec" in names
        out = shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-a", "command": 'echo "$MARK"'}))
        assert out == agents["pc-a"].mark + "\n"


async def test_sdk_legacy_handshake(kenny):
    agents = await kenny.start_agents(["pc-a"])
    async with kenny.mcp(mode="legacy") as client:
        assert client.protocol_version in HANDSHAKE_VERSIONS
        expect_ok(await call(client, "list_agents", {}))
        out = shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-a", "command": 'echo "$MARK"'}))
        assert out == agents["pc-a"].mark + "\n"
