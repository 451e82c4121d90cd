"""Agents of the existing kenny (protocol 0.17) keep working with this server: they log
in with mutual auth although they report "0.17" rather than "0.8", and their tools
answer through kenny's tool surface. The server renames arguments to theirs, refuses
what they would silently ignore, and puts their answers into kenny's shapes, which the
official SDK then checks against each tool's outputSchema.

The agent here is driven by hand over a real WebSocket and answers with results in the
existing agent's shapes, as recorded from its documentation and fixtures. When the
reference frames of kenny-wire-0.17 are beside the repository, its recorded responses
are played back too; without them that test says it was skipped and why."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from conftest import KeyedFakeAgent, call, expect_error, expect_ok

REFERENCE = Path(os.environ.get("KENNY_WIRE_REFERENCE", Path(__file__).resolve().parents[3] / "shared/reference/kenny-wire-0.17"))

# A 1x1 PNG, as that agent sends a screenshot: base64 in `image_b64`.
PNG_1X1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

LEGACY_META = {"hostname": "OLD-PC", "os": "windows", "version": "0.1.0", "arch": "x86_64", "channel": "stable"}


async def _existing_agent(kenny, agent_id: str) -> KeyedFakeAgent:
    creds = kenny.add_agent(agent_id)
    agent = KeyedFakeAgent(kenny.ws_url, agent_id, creds["token"], creds["server_pubkey"], meta=dict(LEGACY_META), protocol="0.17")
    await agent.enroll(kenny.base_url)
    await agent.register()
    await kenny.wait_agents([agent_id])
    return agent


async def _round_trip(client, agent: KeyedFakeAgent, tool: str, args: dict, answer: dict):
    """Calls `tool`; returns (the wire args the agent got, the MCP result)."""
    pending = asyncio.create_task(call(client, tool, {"agent_id": agent.agent_id, **args}))
    request = await agent.next_request(timeout=10, pending=pending)
    await agent.respond(request["id"], result=answer)
    return request["args"], await asyncio.wait_for(pending, 15)


async def test_an_existing_agent_logs_in_and_serves_kennys_tools(kenny):
    agent = await _existing_agent(kenny, "old-pc")
    try:
        async with kenny.mcp() as client:
            wire, res = await _round_trip(client, agent, "powershell_exec", {"script": "Get-Date"}, {"stdout": "Monday\n", "stderr": "", "exit_code": 0})
            # It would wait forever without a timeout of its own; the server gives the catalog's.
            assert wire == {"script": "Get-Date", "timeout_s": 60}, wire
            assert expect_ok(res) == {"stdout": "Monday\n", "stderr": "", "exit_code": 0, "truncated": False}

            wire, res = await _round_trip(client, agent, "fs_search", {"path": "C:\\Users", "pattern": "*.pdf", "max_results": 1}, {"matches": ["C:\\Users\\a.pdf", "C:\\Users\\b.pdf"]})
            assert wire == {"root": "C:\\Users", "pattern": ".pdf", "max_results": 1}, wire
            out = expect_ok(res)
            assert out["matches"] == [{"path": "C:\\Users\\a.pdf"}] and out["truncated"] is True, out

            wire, _ = await _round_trip(client, agent, "diag_services", {"name": "Spooler"}, {"services": [{"name": "Spooler", "display": "Print Spooler", "status": "Running", "start": "Auto"}]})
            assert wire == {"filter": "Spooler"}, wire
            wire, res = await _round_trip(client, agent, "diag_eventlog", {"limit": 5}, {"events": [{"time": "2026-06-01T00:00:00Z", "level": "Error", "source": "Disk", "message": "bad block"}]})
            assert wire == {"log": "System", "count": 5}, wire
            assert expect_ok(res)["entries"][0]["message"] == "bad block"
            wire, res = await _round_trip(client, agent, "net_adapter_reset", {"adapter": "Wi-Fi"}, {"ok": True})
            assert wire == {"name": "Wi-Fi"} and expect_ok(res)["reset"] is True, (wire, res)
            wire, res = await _round_trip(client, agent, "winget_update", {"all": True}, {"ok": True, "log": "2 upgraded"})
            assert wire == {}, "its bare call upgrades everything, which is what `all: true` asked"
            assert expect_ok(res)["output"] == "2 upgraded"

            # A screenshot comes back as an MCP image with kenny's facts about it.
            wire, res = await _round_trip(client, agent, "screen_capture", {}, {"image_b64": PNG_1X1, "format": "png"})
            shot = expect_ok(res)
            assert (shot["mime_type"], shot["width"], shot["height"]) == ("image/png", 1, 1), shot
            assert "image_b64" not in shot and "data_base64" not in shot, shot

            # A bare snapshot is dated and wrapped as kenny's telemetry_collect returns it.
            _, res = await _round_trip(client, agent, "telemetry_collect", {"sections": ["memory"]}, {"memory": {"status": "ok", "summary": "40% used", "percent_used": 40}})
            snap = expect_ok(res)
            assert snap["snapshot"]["memory"]["percent_used"] == 40 and snap["collected_at"].endswith("Z"), snap
    finally:
        await agent.close()


async def test_what_an_existing_agent_would_ignore_is_refused_before_it_runs(kenny):
    """That agent ignores arguments it does not know: a call it would run differently
    from what was asked is refused with `unsupported` and never reaches it."""
    agent = await _existing_agent(kenny, "old-pc2")
    try:
        async with kenny.mcp() as client:
            for tool, args in [
                ("fs_read", {"path": "C:\\a.txt", "offset": 100}),
                ("diag_services", {"state": "failed"}),
                ("fs_search", {"path": "C:\\", "pattern": "a*b?"}),
                ("net_ping", {"host": "127.0.0.1"}),
                ("agent_update", {}),
            ]:
                message = expect_error(await call(client, tool, {"agent_id": "old-pc2", **args}), "unsupported")
                assert "install kenny-agent" in message, (tool, message)
        assert agent.requests.empty(), "nothing refused may reach the agent"
    finally:
        await agent.close()


async def test_recorded_responses_of_the_existing_agent_fit_kennys_schemas(kenny):
    if os.environ.get("KENNY_WIRE_REFERENCE") and not REFERENCE.is_dir():
        pytest.fail(f"KENNY_WIRE_REFERENCE names {REFERENCE}, which is not a directory")
    if not REFERENCE.is_dir():
        pytest.skip(f"SKIPPED: the kenny 0.17 reference frames are not at {REFERENCE} (a plain clone has no ../shared/)")
    agent = await _existing_agent(kenny, "old-pc3")
    args_for = {
        "powershell_exec": {"script": "Get-Process"},
        "winget_list": {},
        "webfilter_status": {},
        "webfilter_apply": {"domains": ["a.example", "b.example"]},
        "webfilter_clear": {},
        "remotehelp_status": {},
        "remotehelp_start": {},
        "remotehelp_stop": {},
    }
    played = 0
    try:
        async with kenny.mcp() as client:
            for tool, args in args_for.items():
                frame = json.loads((REFERENCE / f"response_{tool}.json").read_text())
                _, res = await _round_trip(client, agent, tool, args, frame["result"])
                # The SDK has checked the result against the tool's outputSchema.
                assert expect_ok(res), tool
                played += 1
    finally:
        await agent.close()
    assert played == len(args_for)
