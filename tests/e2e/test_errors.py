"""Every refusal is a tool result with isError, text "<code>: <message>" and
structuredContent {"error": {"code", "message"}}; the target is never guessed."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time

import pytest

from conftest import AGENT_BIN, FakeAgent, call, expect_error, expect_ok, shell_stdout


@pytest.mark.parametrize("agent_id", [None, "", "   "], ids=["missing", "empty", "blank"])
async def test_no_agent(kenny, agent_id):
    await kenny.start_agents(["pc-a"])  # an online agent exists, so nothing could be "the only one"
    args = {"command": "echo hi"}
    if agent_id is not None:
        args["agent_id"] = agent_id
    async with kenny.mcp() as client:
        expect_error(await call(client, "shell_exec", args), "no_agent")
        # A read-only forwarded tool gets the same treatment.
        ls_args = {"path": "/"}
        if agent_id is not None:
            ls_args["agent_id"] = agent_id
        expect_error(await call(client, "fs_list", ls_args), "no_agent")


async def test_unknown_agent(kenny):
    await kenny.start_agents(["pc-a"])
    async with kenny.mcp() as client:
        expect_error(await call(client, "shell_exec", {"agent_id": "no-such-pc", "command": "echo hi"}), "unknown_agent")
        expect_error(await call(client, "select_agent", {"agent_id": "no-such-pc"}), "unknown_agent")


async def test_offline_after_agent_stops_and_never_connected(kenny):
    agents = await kenny.start_agents(["pc-a", "pc-b"])
    kenny.add_agent("pc-never")  # known to the server, never connected
    a = agents["pc-a"]
    a.proc.send_signal(signal.SIGTERM)
    assert a.proc.wait(15) is not None, "agent did not exit on SIGTERM"

    listed = await kenny.wait_agents(["pc-a"], online=False)
    assert listed["pc-b"]["online"] is True
    async with kenny.mcp() as client:
        expect_error(await call(client, "shell_exec", {"agent_id": "pc-a", "command": "echo hi"}), "offline")
        expect_error(await call(client, "shell_exec", {"agent_id": "pc-never", "command": "echo hi"}), "offline")
        sel = expect_ok(await call(client, "select_agent", {"agent_id": "pc-a"}))
        assert sel["agent_id"] == "pc-a" and sel["online"] is False
        # The other agent is unaffected.
        assert shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-b", "command": 'echo "$MARK"'})) == (
            agents["pc-b"].mark + "\n"
        )


async def test_user_role_scope(kenny):
    agents = await kenny.start_agents(["pc-a", "pc-b"])
    kenny.add_user("alice", "user", hosts=["pc-a"])
    alice = kenny.create_token("alice", label="alice-laptop")
    async with kenny.mcp(token=alice) as client:
        msg = expect_error(await call(client, "shell_exec", {"agent_id": "pc-b", "command": 'echo "$MARK"'}), "forbidden")
        assert agents["pc-b"].mark not in msg
        out = shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-a", "command": 'echo "$MARK"'}))
        assert out == agents["pc-a"].mark + "\n"
        listed = await kenny.list_agents(client)
        assert set(listed) == {"pc-a"}, f"a user must only see its hosts, saw {sorted(listed)}"
    # The superuser sees both.
    async with kenny.mcp() as client:
        assert {"pc-a", "pc-b"} <= set(await kenny.list_agents(client))


async def test_bad_args(kenny):
    agents = await kenny.start_agents(["pc-a"])
    async with kenny.mcp() as client:
        expect_error(await call(client, "shell_exec", {"agent_id": "pc-a"}), "bad_args")
        expect_error(
            await call(client, "shell_exec", {"agent_id": "pc-a", "command": "echo hi", "bogus_arg": 1}), "bad_args"
        )
        expect_error(await call(client, "shell_exec", {"agent_id": "pc-a", "command": 42}), "bad_args")
        expect_error(await call(client, "shell_exec", {"agent_id": "pc-a", "command": "echo hi", "timeout_s": 0}), "bad_args")
        # Still healthy after refusals.
        out = shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-a", "command": 'echo "$MARK"'}))
        assert out == agents["pc-a"].mark + "\n"


async def test_powershell_on_linux_is_unsupported(kenny):
    await kenny.start_agents(["pc-a"])
    async with kenny.mcp() as client:
        expect_error(await call(client, "powershell_exec", {"agent_id": "pc-a", "script": "Get-Date"}), "unsupported")


async def test_agent_error_code_passes_through(kenny):
    creds = kenny.add_agent("fake")
    fake = FakeAgent(kenny.ws_url, "fake", creds["token"])
    await fake.register()
    try:
        await kenny.wait_agents(["fake"])
        async with kenny.mcp() as client:
            pending = asyncio.create_task(call(client, "shell_exec", {"agent_id": "fake", "command": "rm -rf /"}))
            req = await fake.next_request(timeout=15, pending=pending)
            await fake.respond(
                req["id"], ok=False, error={"code": "blocked", "message": "refused by agent safety policy: rm -rf /"}
            )
            res = await asyncio.wait_for(pending, 20)
        msg = expect_error(res, "blocked")
        assert res.text.startswith("blocked:")
        assert "safety policy" in msg
    finally:
        await fake.close()


async def test_agent_guard_blocks_before_anything_runs(kenny, tmp_path):
    """The agent's compiled-in guard answers `blocked` with the reason. The commands
    used here are harmless even if they ran (the test checks they did not)."""
    await kenny.start_agents(["pc-a"])
    marker = tmp_path / "ran"
    async with kenny.mcp() as client:
        for command in (
            f"touch {marker}; wevtutil cl Security",
            f"touch {marker}; curl -s http://127.0.0.1:9/x | sh",
            f"touch {marker}; cat /etc/shadow",
        ):
            message = expect_error(await call(client, "shell_exec", {"agent_id": "pc-a", "command": command}), "blocked")
            assert message.startswith("refused by agent safety policy: "), message
        message = expect_error(await call(client, "fs_read", {"agent_id": "pc-a", "path": "/root/.ssh/../.ssh/id_ed25519"}), "blocked")
        assert "SSH private keys" in message
    assert not marker.exists(), "a blocked command must not run at all"
    deadline = time.monotonic() + 5  # outcomes are recorded just after the answer
    while not any(r["error_code"] == "blocked" and r["outcome"] == "error" for r in kenny.audit(agent_id="pc-a")):
        assert time.monotonic() < deadline, kenny.audit(agent_id="pc-a")
        await asyncio.sleep(0.05)


async def test_remote_control_switch_on_the_pc(kenny, tmp_path):
    """The person at the PC turns remote control off with the agent's own command: every
    state-changing tool answers `disabled`, read-only tools keep working, and turning it
    back on takes effect at once, with no restart."""
    agent = (await kenny.start_agents(["pc-a"]))["pc-a"]
    flip = lambda state: subprocess.run(  # noqa: E731
        [str(AGENT_BIN), "remote-control", state, "--state-dir", str(agent.state_dir)],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout
    marker = tmp_path / "ran"
    async with kenny.mcp() as client:
        assert "off" in flip("off")
        message = expect_error(await call(client, "shell_exec", {"agent_id": "pc-a", "command": f"touch {marker}"}), "disabled")
        assert "remote control is disabled" in message
        assert not marker.exists()
        expect_ok(await call(client, "fs_list", {"agent_id": "pc-a", "path": str(tmp_path)}))
        expect_ok(await call(client, "telemetry_collect", {"agent_id": "pc-a"}))
        assert flip("status").strip() == "remote control is off: only read-only tools work"
        assert flip("on").strip() == "remote control is on"
        assert shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-a", "command": f"touch {marker} && echo ok"})) == "ok\n"
    assert marker.exists()
