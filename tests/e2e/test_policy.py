"""Operator guard rules: a superuser changes the policy over the API, the server pushes
it to connected agents at once (no restart), stores it, and sends it again to agents
as they connect. Rules only add refusals; bad lists are refused whole."""

from __future__ import annotations

import asyncio
import time

import httpx

from conftest import call, expect_error, expect_ok, shell_stdout

WORD = "kenny-policy-canary"
RULE = {"id": "no_canary", "applies_to": "shell", "pattern": rf"(?i)\b{WORD}\b", "reason": "operator: canary word is off-limits"}


def _put(kenny, body, token=None) -> httpx.Response:
    with httpx.Client(timeout=10) as http:
        return http.put(
            f"{kenny.base_url}/api/policy", json=body, headers={"Authorization": f"Bearer {token or kenny.admin_pat}"}
        )


def _get(kenny, token=None) -> dict:
    with httpx.Client(timeout=10) as http:
        r = http.get(f"{kenny.base_url}/api/policy", headers={"Authorization": f"Bearer {token or kenny.admin_pat}"})
    assert r.status_code == 200, r.text
    return r.json()


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


async def test_a_pushed_rule_takes_effect_without_restart_and_survives_reconnects(kenny):
    agent = (await kenny.start_agents(["pc-a"]))["pc-a"]
    pid = agent.proc.pid
    assert _get(kenny)["rules"] == []
    async with kenny.mcp() as client:
        out = shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-a", "command": f"echo {WORD}"}))
        assert WORD in out

        r = _put(kenny, {"rules": [RULE]})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["pushed_to"] == 1 and body["not_reached"] == [] and body["updated_by"] == "admin", body
        message = await _blocked_within(client, "pc-a")
        assert "canary word is off-limits" in message, message
        assert agent.proc.pid == pid and agent.proc.alive(), "the agent must not have restarted"
        # Other commands are untouched; the built-in guard still applies too.
        assert "fine" in shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-a", "command": "echo fine"}))
        expect_error(await call(client, "shell_exec", {"agent_id": "pc-a", "command": "cat /etc/shadow"}), "blocked")

    # A reconnecting agent gets the rules before its first call; so does a restarted server.
    agent.proc.stop()
    kenny.start_agent("pc-a", creds=agent.creds, enroll=False)
    await kenny.wait_agents(["pc-a"])
    async with kenny.mcp() as client:
        await _blocked_within(client, "pc-a", seconds=0.5)
    port = kenny.port
    kenny.stop_server()
    kenny.start_server(port=port)
    await kenny.wait_agents(["pc-a"])
    assert [r["id"] for r in _get(kenny)["rules"]] == ["no_canary"]
    async with kenny.mcp() as client:
        await _blocked_within(client, "pc-a", seconds=0.5)

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


async def test_bad_policies_are_refused_whole_and_only_superusers_change_it(kenny):
    await kenny.start_agents(["pc-a"])
    assert _put(kenny, {"rules": [RULE]}).status_code == 200
    before = _get(kenny)

    bad = {
        "rules": [
            {"id": "ok_one", "applies_to": "path", "pattern": "secret", "reason": "operator: r"},
            {"id": "broken", "applies_to": "shell", "pattern": "(unclosed", "reason": "operator: r"},
            {"id": "weird", "applies_to": "everything", "pattern": "x", "reason": "operator: r"},
        ]
    }
    r = _put(kenny, bad)
    assert r.status_code == 400, r.text
    message = r.json()["error"]["message"]
    assert "policy not changed" in message and "broken" in message and "weird" in message, message
    for junk in ({"rules": "nope"}, {"rules": [RULE], "extra": 1}, {"rules": [{"id": "x"}]}):
        r = _put(kenny, junk)
        assert r.status_code == 400, (junk, r.status_code, r.text)
        assert r.json()["error"]["code"] == "bad_request", r.text
    assert _get(kenny) == before, "a refused change must leave the policy as it was"

    kenny.add_user("opal", "operator")
    op_token = kenny.create_token("opal")
    r = _put(kenny, {"rules": []}, token=op_token)
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", r.text
    assert _get(kenny, token=op_token)["rules"] == before["rules"], "operators may read the rules"

    async with kenny.mcp() as client:
        await _blocked_within(client, "pc-a")
        expect_ok(await call(client, "shell_exec", {"agent_id": "pc-a", "command": "true"}))
    # The refusal is the agent's, audited like any other failed call.
    deadline = time.monotonic() + 5
    while not any(e["error_code"] == "blocked" for e in kenny.audit(agent_id="pc-a")):
        assert time.monotonic() < deadline, kenny.audit(agent_id="pc-a")
        await asyncio.sleep(0.05)
