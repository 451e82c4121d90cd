"""A server killed with SIGKILL comes back on the same port and data dir: agents
reconnect by themselves, calls work again, nothing recorded before is lost."""

from __future__ import annotations

import asyncio
import signal
import time

from conftest import call, shell_stdout

RECONNECT_TIMEOUT = 15.0


async def _settled_audit(kenny, timeout: float = 5.0) -> list[dict]:
    """The audit log once no call is still marked `sent` (outcomes land just after the
    answer reaches the client)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = kenny.audit(limit=1000)
        if all(r["outcome"] != "sent" for r in rows) or time.monotonic() > deadline:
            return rows
        await asyncio.sleep(0.05)


async def test_sigkill_restart_same_port_and_data_dir(kenny):
    agents = await kenny.start_agents(["pc-a", "pc-b"])  # mutual auth: keys enrolled in state dirs
    legacy = kenny.start_agent("pc-legacy", legacy=True)
    await kenny.wait_agents(["pc-legacy"])
    async with kenny.mcp() as client:
        for aid in ("pc-a", "pc-b", "pc-legacy", "pc-a"):
            out = shell_stdout(await call(client, "shell_exec", {"agent_id": aid, "command": 'echo "$MARK"'}))
            assert out == kenny.agents[aid].mark + "\n"
    before = await _settled_audit(kenny)
    before_ids = [e["id"] for e in before]
    assert len(before) >= 4, f"expected >= 4 audit rows before the kill, got {before}"

    port = kenny.port
    kenny.kill_server()
    kenny.start_server(port=port)
    assert kenny.port == port

    # Same PAT still valid; agents come back by themselves (no agent restarted here).
    await kenny.wait_agents(["pc-a", "pc-b", "pc-legacy"], timeout=RECONNECT_TIMEOUT)
    for a in (*agents.values(), legacy):
        assert a.proc.alive(), f"agent {a.agent_id} exited instead of reconnecting\n{a.proc.logs()}"

    async with kenny.mcp() as client:
        for aid in ("pc-b", "pc-a", "pc-legacy"):
            out = shell_stdout(await call(client, "shell_exec", {"agent_id": aid, "command": 'echo "$MARK"'}))
            assert out == kenny.agents[aid].mark + "\n"

    after = await _settled_audit(kenny)
    after_ids = [e["id"] for e in after]
    missing = set(before_ids) - set(after_ids)
    assert not missing, f"audit rows lost across the restart: {missing}"
    assert len(after) >= len(before) + 3, f"{len(before)} rows before, {len(after)} after 3 more calls"
    old_rows = {e["id"]: e for e in before}
    for e in after:
        if e["id"] in old_rows:
            assert e == old_rows[e["id"]], f"audit row changed across the restart: {old_rows[e['id']]} -> {e}"


async def test_agent_restart_reuses_enrolled_key(kenny):
    """Mutual auth enrolls once: a restarted agent with no enrollment token connects with
    the key it kept in its state dir."""
    first = (await kenny.start_agents(["pc-a"]))["pc-a"]
    assert any(first.state_dir.iterdir()), "the agent kept nothing in its state dir"
    first.proc.send_signal(signal.SIGTERM)
    assert first.proc.wait(15) is not None, "agent did not exit on SIGTERM"
    await kenny.wait_agents(["pc-a"], online=False)

    again = kenny.start_agent("pc-a", creds=first.creds, enroll=False)
    await kenny.wait_agents(["pc-a"])
    async with kenny.mcp() as client:
        out = shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-a", "command": 'echo "$MARK"'}))
    assert out == again.mark + "\n" and again.mark != first.mark



async def test_a_call_cut_short_by_a_server_crash_is_audited_as_interrupted(kenny):
    """The audit row is written when a call is sent, so a call that was running when
    the server died is still on record after the restart, as `interrupted`."""
    await kenny.start_agents(["pc-a"])

    async def long_call() -> None:
        try:
            async with kenny.mcp() as client:
                await call(client, "shell_exec", {"agent_id": "pc-a", "command": "sleep 30", "timeout_s": 60})
        except BaseException:  # the client loses its connection mid-call; the record is what matters
            pass

    running = asyncio.create_task(long_call())
    deadline = time.monotonic() + 10
    while not any(r["outcome"] == "sent" for r in kenny.audit(agent_id="pc-a")):
        assert time.monotonic() < deadline, f"no `sent` row while the call runs: {kenny.audit(agent_id='pc-a')}"
        await asyncio.sleep(0.05)
    sent = next(r for r in kenny.audit(agent_id="pc-a") if r["outcome"] == "sent")
    assert sent["tool"] == "shell_exec" and sent["call_id"]
    port = kenny.port
    kenny.kill_server()
    await asyncio.wait_for(running, 15)
    kenny.start_server(port=port)
    rows = {r["id"]: r for r in kenny.audit(agent_id="pc-a")}
    assert rows[sent["id"]]["outcome"] == "interrupted", rows[sent["id"]]
    assert rows[sent["id"]]["call_id"] == sent["call_id"]
