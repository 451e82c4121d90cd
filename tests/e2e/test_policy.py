"""Operator guard rules enforced by a real agent: a rule pushed over the API blocks a
command at once, without restarting the agent, alongside the built-in guard, and
clearing the list lifts it. What the server does with the rules (storing them, pushing
them to agents as they connect and after a restart, refusing bad lists whole, who may
change them, auditing a refusal) is tested in Rust, in
`crates/kenny-server/tests/kit/policy_api.rs`."""

from __future__ import annotations

import asyncio
import time

import httpx

from conftest import call, expect_error, shell_stdout

WORD = "kenny-policy-canary"
RULE = {"id": "no_canary", "applies_to": "shell", "pattern": rf"(?i)\b{WORD}\b", "reason": "operator: canary word is off-limits"}


def _put(kenny, body) -> httpx.Response:
    with httpx.Client(timeout=10) as http:
        return http.put(f"{kenny.base_url}/api/policy", json=body, headers={"Authorization": f"Bearer {kenny.admin_pat}"})


async def _blocked_within(client, agent_id: str, seconds: float = 5.0) -> str:
    """The frame is queued before the API answers, but the agent applies it on its own
    reader task; allow it a moment rather than racing it."""
    deadline = time.monotonic() + seconds
    while True:
        res = await call(client, "shell_exec", {"agent_id": agent_id, "command": f"echo {WORD}"})
        if res.is_error:
            return expect_error(res, "blocked")
        assert time.monotonic() < deadline, f"rule not in force after {seconds}s: {res}"
        await asyncio.sleep(0.1)


async def test_a_pushed_rule_takes_effect_without_restart_and_clearing_lifts_it(kenny):
    agent = (await kenny.start_agents(["pc-a"]))["pc-a"]
    pid = agent.proc.pid
    async with kenny.mcp() as client:
        out = shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-a", "command": f"echo {WORD}"}))
        assert WORD in out

        r = _put(kenny, {"rules": [RULE]})
        assert r.status_code == 200, r.text
        message = await _blocked_within(client, "pc-a")
        assert "canary word is off-limits" in message, message
        assert agent.proc.pid == pid and agent.proc.alive(), "the agent must not have restarted"
        # Other commands are untouched; the built-in guard still applies too.
        assert "fine" in shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-a", "command": "echo fine"}))
        expect_error(await call(client, "shell_exec", {"agent_id": "pc-a", "command": "cat /etc/shadow"}), "blocked")

        # Clearing the list lifts the operator rule at once.
        r = _put(kenny, {"rules": []})
        assert r.status_code == 200, r.text
        deadline = time.monotonic() + 5
        while True:
            res = await call(client, "shell_exec", {"agent_id": "pc-a", "command": f"echo {WORD}"})
            if not res.is_error:
                break
            assert time.monotonic() < deadline, res
            await asyncio.sleep(0.1)
        assert WORD in shell_stdout(res)
