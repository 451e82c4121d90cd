"""The invariant: a call meant for agent X always reaches X, whatever else is happening.

Two MCP sessions share ONE credential (the server cannot tell them apart by principal),
each interleaving `select_agent` on one agent with `shell_exec` on another. Every agent
runs with its own random MARK env var, so `echo "$MARK"` proves where a call executed.
"""

from __future__ import annotations

import asyncio
import random

from conftest import call, expect_error, expect_ok, shell_stdout

AGENTS = ["pc-a", "pc-b", "pc-c"]
ROUNDS = 30
BURST = 50


async def _echo_mark(client, agent_id: str, delay_ms: int = 0) -> str:
    """`echo "$MARK"` on `agent_id`; a small delay keeps several calls in flight at once
    and makes answers come back out of order."""
    command = f'sleep {delay_ms / 1000:.3f}; echo "$MARK"' if delay_ms else 'echo "$MARK"'
    return shell_stdout(await call(client, "shell_exec", {"agent_id": agent_id, "command": command}))


async def test_two_sessions_same_credential_interleaving_select_and_exec(kenny):
    agents = await kenny.start_agents(AGENTS)
    marks = {a: agents[a].mark for a in AGENTS}
    assert len(set(marks.values())) == len(AGENTS)

    async def session_rounds(seed: int) -> list[tuple[str, str, str]]:
        rng = random.Random(seed)
        seen: list[tuple[str, str, str]] = []
        async with kenny.mcp() as client:  # same PAT for both sessions
            for _ in range(ROUNDS):
                selected = rng.choice(AGENTS)
                target = rng.choice([a for a in AGENTS if a != selected])
                sel = expect_ok(await call(client, "select_agent", {"agent_id": selected}))
                assert sel["agent_id"] == selected and sel["online"] is True, sel
                out = await _echo_mark(client, target, delay_ms=rng.randint(0, 40))
                seen.append((selected, target, out))
                assert out == marks[target] + "\n", (
                    f"call for {target} (after select_agent {selected}) ran elsewhere: got {out!r}, marks {marks}"
                )
        return seen

    results = await asyncio.wait_for(asyncio.gather(session_rounds(1), session_rounds(2)), timeout=100)
    assert sum(len(r) for r in results) == 2 * ROUNDS


async def test_select_agent_is_not_sticky(kenny):
    """select_agent routes nothing: a forwarded call without agent_id is refused, not
    sent to the selected agent."""
    agents = await kenny.start_agents(["pc-a"])
    async with kenny.mcp() as client:
        sel = expect_ok(await call(client, "select_agent", {"agent_id": "pc-a"}))
        assert sel["agent_id"] == "pc-a" and sel["online"] is True
        expect_error(await call(client, "shell_exec", {"command": 'echo "$MARK"'}), "no_agent")
        # and the explicit form still works
        assert await _echo_mark(client, "pc-a") == agents["pc-a"].mark + "\n"


async def test_concurrent_burst_routes_each_call_to_its_agent(kenny):
    agents = await kenny.start_agents(AGENTS)
    marks = {a: agents[a].mark for a in AGENTS}
    rng = random.Random(7)
    targets = [rng.choice(AGENTS) for _ in range(BURST)]
    async with kenny.mcp() as s1, kenny.mcp() as s2:
        sessions = [s1, s2]

        async def one(i: int, target: str):
            client = sessions[i % 2]
            if i % 5 == 0:  # sprinkle selections of some other agent into the burst
                other = AGENTS[(AGENTS.index(target) + 1) % len(AGENTS)]
                expect_ok(await call(client, "select_agent", {"agent_id": other}))
            return await _echo_mark(client, target, delay_ms=rng.randint(0, 300))

        outs = await asyncio.wait_for(asyncio.gather(*(one(i, t) for i, t in enumerate(targets))), timeout=100)
    wrong = [(t, o) for t, o in zip(targets, outs) if o != marks[t] + "\n"]
    assert not wrong, f"{len(wrong)}/{BURST} calls ran on the wrong agent: {wrong[:5]} (marks {marks})"
