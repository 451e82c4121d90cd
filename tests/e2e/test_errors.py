"""Refusals that take a real agent: `unsupported` from the PC's own OS, the agent's
guard answering `blocked` before anything runs, and the remote-control switch on the PC;
and what the official SDK raises for a tool name the server does not have.
The server's own refusals (`no_agent`, `unknown_agent`, `offline`, `forbidden`,
`bad_args`, an agent's code passed through) are tested in Rust:
`crates/kenny-server/tests/kit/mcp_errors.rs`."""

from __future__ import annotations

import asyncio
import subprocess
import time

import pytest
from mcp import MCPError

from conftest import AGENT_BIN, call, expect_error, expect_ok, shell_stdout


async def test_powershell_on_linux_is_unsupported(kenny):
    await kenny.start_agents(["pc-a"])
    async with kenny.mcp() as client:
        expect_error(await call(client, "powershell_exec", {"agent_id": "pc-a", "script": "Get-Date"}), "unsupported")


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_unknown_tool_is_invalid_params_whatever_the_target(kenny, mode):
    """The SDK raises the protocol's error naming the tool, on either wire, whether the
    `agent_id` is online, unknown or out of the caller's reach (the answer must not
    tell them apart)."""
    await kenny.start_agents(["pc-a"])
    kenny.add_user("scoped", "user", hosts=["pc-b"])
    scoped = kenny.create_token("scoped")
    for token, args in [
        (kenny.admin_pat, {"agent_id": "pc-a", "command": "true"}),
        (kenny.admin_pat, {"agent_id": "no-such-pc"}),
        (scoped, {"agent_id": "pc-a"}),
        (scoped, {}),
    ]:
        async with kenny.mcp(token, mode=mode) as client:
            with pytest.raises(MCPError) as raised:
                await call(client, "no_such_tool", args)
        assert raised.value.code == -32602, (args, raised.value.error)
        assert '"no_such_tool"' in raised.value.message and "tools/list" in raised.value.message, raised.value.message


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
