"""An agent that dies mid-call fails that call promptly with `offline`; other agents'
calls in flight are untouched."""

from __future__ import annotations

import asyncio
import time

from conftest import call, expect_error, shell_stdout

FAIL_WITHIN_S = 2.0


async def _wait_for_file(path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} not created within {timeout}s: the call never started"
        await asyncio.sleep(0.05)


async def test_agent_killed_mid_call(kenny, tmp_path):
    agents = await kenny.start_agents(["pc-a", "pc-b"])
    started = tmp_path / "a-started"
    async with kenny.mcp() as client_a, kenny.mcp() as client_b:
        call_a = asyncio.create_task(
            call(
                client_a,
                "shell_exec",
                {"agent_id": "pc-a", "command": f"touch {started}; sleep 30", "timeout_s": 60},
                timeout=60,
            )
        )
        call_b = asyncio.create_task(
            call(client_b, "shell_exec", {"agent_id": "pc-b", "command": "sleep 1; echo done"}, timeout=30)
        )
        # Kill A once its command is provably running (~0.5 s into the call).
        await _wait_for_file(started, 15)
        await asyncio.sleep(0.5)
        assert not call_a.done(), f"A's call ended before the kill: {call_a.result()!r}"
        agents["pc-a"].proc.kill9()
        killed_at = time.monotonic()

        done, _ = await asyncio.wait({call_a}, timeout=10)
        failed_after = time.monotonic() - killed_at
        assert done, "A's call was still pending 10 s after its agent was killed (expected `offline` within 2 s)"
        res_a = call_a.result()
        msg = expect_error(res_a, "offline")
        assert "disconnect" in msg.lower(), f"offline message should say the agent disconnected: {msg!r}"
        assert failed_after < FAIL_WITHIN_S, f"A's call failed {failed_after:.2f}s after the kill (> {FAIL_WITHIN_S}s)"

        res_b = await asyncio.wait_for(call_b, 30)
        assert shell_stdout(res_b) == "done\n"

        # And B is still reachable afterwards while A is reported offline.
        listed = await kenny.list_agents(client_b)
        assert listed["pc-b"]["online"] is True
        out = shell_stdout(await call(client_b, "shell_exec", {"agent_id": "pc-b", "command": 'echo "$MARK"'}))
        assert out == agents["pc-b"].mark + "\n"
