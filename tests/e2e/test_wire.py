"""The agent wire protocol, seen from a hand-driven fake agent on a real WebSocket."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from conftest import FakeAgent, KeyedFakeAgent, call, expect_error, shell_stdout

OVERSIZED_BYTES = 9 * 1024 * 1024  # above the 8 MiB bound for authenticated frames


async def _fake(kenny, agent_id: str = "fake") -> FakeAgent:
    creds = kenny.add_agent(agent_id)
    fake = FakeAgent(kenny.ws_url, agent_id, creds["token"])
    await fake.register()
    await kenny.wait_agents([agent_id])
    return fake


async def _round_trip(kenny, fake: FakeAgent, command: str) -> tuple[dict, object]:
    """MCP shell_exec on the fake agent; returns (request frame seen, MCP result)."""
    async with kenny.mcp() as client:
        pending = asyncio.create_task(call(client, "shell_exec", {"agent_id": fake.agent_id, "command": command}))
        req = await fake.next_request(timeout=15, pending=pending)
        await fake.respond(
            req["id"], ok=True, result={"stdout": f"fake ran {command}\n", "stderr": "", "exit_code": 0, "truncated": False}
        )
        res = await asyncio.wait_for(pending, 20)
    return req, res


async def test_request_frame_shape_and_agent_id_stripped(kenny):
    fake = await _fake(kenny)
    try:
        req, res = await _round_trip(kenny, fake, "x")
        assert set(req) == {"type", "id", "tool", "args"}, f"request frame keys: {sorted(req)}"
        assert req["type"] == "request" and req["tool"] == "shell_exec"
        assert isinstance(req["id"], str) and req["id"]
        assert "agent_id" not in req["args"], f"agent_id leaked to the wire: {req['args']}"
        assert req["args"] == {"command": "x"}, f"args on the wire: {req['args']}"
        assert "fake" not in json.dumps(req), f"the frame must carry no agent identifier: {req}"
        assert shell_stdout(res) == "fake ran x\n"
    finally:
        await fake.close()


async def test_register_meta_is_listed(kenny):
    agents = await kenny.start_agents(["pc-a"])
    fake = await _fake(kenny)
    try:
        async with kenny.mcp() as client:
            listed = await kenny.list_agents(client)
        fields = {"agent_id", "online", "os", "hostname", "version", "last_seen"}
        for aid in ("pc-a", "fake"):
            assert fields <= set(listed[aid]), f"list_agents entry lacks {fields - set(listed[aid])}: {listed[aid]}"
            assert listed[aid]["online"] is True and listed[aid]["last_seen"], listed[aid]
        f = listed["fake"]
        assert (f["hostname"], f["os"], f["version"]) == ("fake-host", "linux", "0.0.1"), f
        assert listed["pc-a"]["os"] == "linux", listed["pc-a"]
        assert agents["pc-a"].mark not in str(listed)
    finally:
        await fake.close()


async def test_request_ids_are_unique_per_call(kenny):
    fake = await _fake(kenny)
    try:
        async with kenny.mcp() as client:
            calls = [
                asyncio.create_task(call(client, "shell_exec", {"agent_id": "fake", "command": f"cmd-{i}"}))
                for i in range(5)
            ]
            reqs = [await fake.next_request(timeout=15) for _ in calls]
            assert len({r["id"] for r in reqs}) == 5, reqs
            # answer out of order; each answer must reach the call that asked
            for r in reversed(reqs):
                cmd = r["args"]["command"]
                await fake.respond(r["id"], result={"stdout": cmd, "stderr": "", "exit_code": 0, "truncated": False})
            outs = await asyncio.wait_for(asyncio.gather(*calls), 20)
        assert [shell_stdout(o) for o in outs] == [f"cmd-{i}" for i in range(5)]
    finally:
        await fake.close()


@pytest.mark.parametrize("which", ["wrong-token", "unknown-agent"])
async def test_bad_token_closes_4401(kenny, which):
    creds = kenny.add_agent("fake")
    if which == "wrong-token":
        fake = FakeAgent(kenny.ws_url, "fake", creds["token"] + "x")
    else:
        fake = FakeAgent(kenny.ws_url, "nobody", creds["token"])
    await fake.register()
    try:
        code, reason = await fake.wait_closed(10)
        assert code == 4401, f"close code {code} ({reason!r}), expected 4401"
    finally:
        await fake.close()
    async with kenny.mcp() as client:
        listed = await kenny.list_agents(client)
        assert not listed.get("fake", {}).get("online"), listed


@pytest.mark.parametrize(
    "first", [{"type": "ping"}, {"type": "pong"}, "not json at all"], ids=["ping", "pong", "garbage"]
)
async def test_first_frame_not_register_closes_4400(kenny, first):
    fake = FakeAgent(kenny.ws_url, "fake", "unused")
    await fake.open()
    try:
        await fake.ws.send(first if isinstance(first, str) else json.dumps(first))
        code, reason = await fake.wait_closed(10)
        assert code == 4400, f"close code {code} ({reason!r}), expected 4400"
    finally:
        await fake.close()


async def test_oversized_frame_after_auth(kenny):
    agents = await kenny.start_agents(["pc-a"])
    fake = await _fake(kenny)
    try:
        huge = json.dumps(
            {
                "type": "log",
                "agent_id": "fake",
                "at": "2026-01-01T00:00:00Z",
                "level": "info",
                "target": "e2e",
                "message": "A" * OVERSIZED_BYTES,
            }
        )
        try:
            await asyncio.wait_for(fake.ws.send(huge), 20)
        except Exception:
            pass  # the server may cut us off mid-frame
        try:
            code, reason = await fake.wait_closed(5)
            closed = True
        except asyncio.TimeoutError:
            closed = False
        if closed:
            # Connection dropped: a fresh connection of the same agent works again.
            await fake.close()
            fake = FakeAgent(kenny.ws_url, "fake", fake.token)
            await fake.register()
            await kenny.wait_agents(["fake"])
        # Either way the (re)connected fake agent still serves calls: the frame was dropped.
        _, res = await _round_trip(kenny, fake, "after-oversize")
        assert shell_stdout(res) == "fake ran after-oversize\n"
    finally:
        await fake.close()
    # The server is up and other agents are unaffected.
    with httpx.Client(timeout=5) as http:
        assert http.get(f"{kenny.base_url}/healthz").status_code == 200
    async with kenny.mcp() as client:
        out = shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-a", "command": 'echo "$MARK"'}))
        assert out == agents["pc-a"].mark + "\n"
        assert (await kenny.list_agents(client))["pc-a"]["online"] is True


async def test_heartbeat_pings(kenny):
    """With --heartbeat-secs 1 the server pings a connected agent; an agent that answers
    with pongs stays online."""
    kenny.stop_server()
    kenny.start_server(heartbeat_secs=1)
    fake = await _fake(kenny)
    try:
        deadline = asyncio.get_running_loop().time() + 10
        while fake.pings < 3:
            assert asyncio.get_running_loop().time() < deadline, f"only {fake.pings} pings in 10 s at --heartbeat-secs 1"
            await asyncio.sleep(0.1)
        async with kenny.mcp() as client:
            assert (await kenny.list_agents(client))["fake"]["online"] is True
        _, res = await _round_trip(kenny, fake, "after-pings")
        assert shell_stdout(res) == "fake ran after-pings\n"
    finally:
        await fake.close()


async def test_silent_agent_is_marked_offline(kenny):
    """An agent that stops sending anything (no pongs) is noticed within the heartbeat
    window (three beats): the server closes its socket and lists it offline."""
    kenny.stop_server()
    kenny.start_server(heartbeat_secs=1)
    fake = await _fake(kenny)
    fake.answer_pings = False
    try:
        start = asyncio.get_running_loop().time()
        await kenny.wait_agents(["fake"], online=False, timeout=10)
        took = asyncio.get_running_loop().time() - start
        assert took <= 8, f"silent agent noticed only after {took:.1f}s at --heartbeat-secs 1"
        await fake.wait_closed(timeout=5)
    finally:
        await fake.close()


async def test_pushed_frames_for_another_agent_are_dropped(kenny):
    """telemetry/log frames naming another agent are dropped with a logged reason; the
    connection and its calls are unaffected."""
    fake = await _fake(kenny)
    try:
        await fake.send_json(
            {
                "type": "telemetry",
                "agent_id": "someone-else",
                "collected_at": "2026-11-30T00:00:00Z",
                "snapshot": {"disk": {"status": "ok", "summary": "fine"}},
            }
        )
        await fake.send_json(
            {"type": "log", "agent_id": "someone-else", "at": "2026-11-30T00:00:00Z", "level": "info", "target": "x", "message": "m"}
        )
        _, res = await _round_trip(kenny, fake, "still-here")
        assert shell_stdout(res) == "fake ran still-here\n"
        deadline = asyncio.get_running_loop().time() + 5
        while "agent_id is not the authenticated agent" not in kenny.server.logs():
            assert asyncio.get_running_loop().time() < deadline, "no log line for the dropped frames"
            await asyncio.sleep(0.1)
        assert kenny.server.logs().count("agent_id is not the authenticated agent") >= 2
    finally:
        await fake.close()


async def test_reconnect_replaces_old_connection(kenny):
    """A second connection that proves the agent's key (from the same host) replaces the
    first: calls go to the new one, and the old socket closing afterwards does not mark
    the agent offline."""
    creds = kenny.add_agent("twin")
    old = KeyedFakeAgent(kenny.ws_url, "twin", creds["token"], creds["server_pubkey"])
    await old.enroll(kenny.base_url)
    await old.register()
    await kenny.wait_agents(["twin"])
    new = KeyedFakeAgent(kenny.ws_url, "twin", creds["token"], creds["server_pubkey"], key=old.key)
    await new.register()
    try:
        await old.wait_closed(timeout=10)
        await old.close()
        await asyncio.sleep(0.5)
        _, res = await _round_trip(kenny, new, "on-new")
        assert shell_stdout(res) == "fake ran on-new\n"
        assert old.requests.empty(), "a call reached the replaced connection"
        async with kenny.mcp() as client:
            assert (await kenny.list_agents(client))["twin"]["online"] is True
    finally:
        await new.close()


async def test_agent_that_never_answers_times_out(kenny):
    """A call the agent never answers fails with `timeout` after the server's call
    timeout, and the connection stays usable for the next call."""
    kenny.stop_server()
    kenny.start_server(extra_args=["--call-timeout-secs", "2"])
    fake = await _fake(kenny)
    try:
        async with kenny.mcp() as client:
            pending = asyncio.create_task(call(client, "fs_list", {"agent_id": "fake", "path": "/"}))
            await fake.next_request(timeout=10, pending=pending)  # received, never answered
            started = asyncio.get_running_loop().time()
            res = await asyncio.wait_for(pending, 15)
            waited = asyncio.get_running_loop().time() - started
        message = expect_error(res, "timeout")
        assert "fake" in message and "2s" in message, message
        assert waited < 5, f"timed out only after {waited:.1f}s"
        _, res = await _round_trip(kenny, fake, "after-timeout")
        assert shell_stdout(res) == "fake ran after-timeout\n"
    finally:
        await fake.close()
