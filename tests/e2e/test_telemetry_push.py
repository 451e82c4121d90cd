"""Telemetry pushed by a real agent right after it authenticates is stored by the
server and readable per agent over the API, within the caller's scope."""

from __future__ import annotations

import time

import httpx


def _latest(kenny, agent_id: str, token: str | None = None) -> httpx.Response:
    with httpx.Client(timeout=10) as http:
        return http.get(
            f"{kenny.base_url}/api/agents/{agent_id}/telemetry",
            headers={"Authorization": f"Bearer {token or kenny.admin_pat}"},
        )


async def test_the_pushed_snapshot_is_stored_and_scoped(kenny):
    await kenny.start_agents(["pc-a", "pc-b"])
    deadline = time.monotonic() + 20
    while (r := _latest(kenny, "pc-a")).status_code == 404:
        assert time.monotonic() < deadline, "no snapshot stored within 20 s of connecting"
        time.sleep(0.2)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["agent_id"] == "pc-a" and body["collected_at"] and body["received_at"], body
    snapshot = body["snapshot"]
    for name in ("disk", "memory", "uptime", "os"):
        section = snapshot[name]
        assert section["status"] in ("ok", "warn", "crit") and section["summary"], (name, section)

    kenny.add_user("kid", "user", hosts=["pc-b"])
    kid = kenny.create_token("kid")
    hidden = _latest(kenny, "pc-a", token=kid)
    unknown = _latest(kenny, "no-such-pc", token=kid)
    assert hidden.status_code == unknown.status_code == 404, (hidden.text, unknown.text)
    assert hidden.json()["error"]["code"] == "not_found"
    while (own := _latest(kenny, "pc-b", token=kid)).status_code == 404:
        assert time.monotonic() < deadline, "pc-b's snapshot should be readable by its user"
        time.sleep(0.2)
    assert own.status_code == 200 and own.json()["agent_id"] == "pc-b", own.text
