"""Taking a PC out of the fleet through the API (the dashboard's buttons call the same):
a new enrollment cuts the running agent off and its old key never logs in again, while
the new token enrolls the reinstalled PC; removing a PC cuts it off, takes it out of
every listing and of its users' reach, and its history goes once the retention period
has passed (the audit log stays)."""

from __future__ import annotations

import asyncio
import time

import httpx

from conftest import call, expect_error, expect_ok, shell_stdout


def _api(kenny) -> httpx.Client:
    return httpx.Client(base_url=kenny.base_url, headers={"Authorization": f"Bearer {kenny.admin_pat}"}, timeout=30)


def _rows(kenny, table: str, agent_id: str) -> int:
    return kenny.sql(f"SELECT COUNT(*) FROM {table} WHERE agent_id = ?", (agent_id,))[0][0]


async def _wait_for_log(proc, text: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while text not in proc.logs():
        assert time.monotonic() < deadline, f"no {text!r} in\n{proc.logs()}"
        await asyncio.sleep(0.2)


async def test_a_new_enrollment_cuts_the_old_key_off_and_the_new_token_enrolls(kenny):
    old = kenny.start_agent("pc-rot")
    await kenny.wait_agents(["pc-rot"])
    with _api(kenny) as http:
        r = http.post("/api/agents/pc-rot/rekey")
    assert r.status_code == 200, r.text
    fresh = r.json()
    assert fresh["token"].startswith("kenny_agt_") and "--agent-id pc-rot" in fresh["install_command"], fresh
    # Cut off at once, and its key is refused from now on.
    await kenny.wait_agents(["pc-rot"], online=False)
    await _wait_for_log(old.proc, "authentication refused")
    old.proc.stop()

    # The reinstalled PC (a new state directory, so a new key) enrolls with the new token.
    kenny.start_agent("pc-rot", creds=fresh)
    await kenny.wait_agents(["pc-rot"])
    async with kenny.mcp() as client:
        assert shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-rot", "command": "echo back"})) == "back\n"
    with _api(kenny) as http:
        assert http.post("/api/agents/pc-nowhere/rekey").status_code == 404


async def test_a_removed_pc_is_cut_off_unlisted_and_its_history_purged_after_the_retention(kenny):
    agent = kenny.start_agent("pc-gone")
    kenny.start_agent("pc-stays")
    await kenny.wait_agents(["pc-gone", "pc-stays"])
    kenny.add_user("kid", "user", hosts=["pc-gone"])
    kid = kenny.create_token("kid")
    deadline = time.monotonic() + 20
    while _rows(kenny, "telemetry", "pc-gone") == 0:
        assert time.monotonic() < deadline, "no snapshot stored"
        await asyncio.sleep(0.3)

    with _api(kenny) as http:
        r = http.delete("/api/agents/pc-gone")
        assert r.status_code == 200 and r.json() == {"removed": "pc-gone", "history_kept_days": 30}, r.text
        assert http.delete("/api/agents/pc-gone").status_code == 404
        listed = {a["agent_id"] for a in http.get("/api/agents").json()["agents"]}
    assert listed == {"pc-stays"}, listed
    await _wait_for_log(agent.proc, "authentication refused")
    async with kenny.mcp() as client:
        expect_error(await call(client, "shell_exec", {"agent_id": "pc-gone", "command": "true"}), "unknown_agent")
        overview = expect_ok(await call(client, "fleet_overview", {}))
        assert "pc-gone" not in str(overview), overview
    async with kenny.mcp(token=kid) as client:
        expect_error(await call(client, "shell_exec", {"agent_id": "pc-gone", "command": "true"}), "forbidden")
    agent.proc.stop()
    assert _rows(kenny, "telemetry", "pc-gone") > 0, "history is kept during the retention period"

    # Past the retention (0 days here): purged at the next start, the audit log kept.
    kenny.stop_server()
    kenny.start_server(extra_args=["--removed-pc-retention-days", "0"])
    deadline = time.monotonic() + 20
    while _rows(kenny, "telemetry", "pc-gone"):
        assert time.monotonic() < deadline, kenny.logs()
        await asyncio.sleep(0.3)
    assert _rows(kenny, "removed_agents", "pc-gone") == 0
    assert _rows(kenny, "audit", "pc-gone") > 0, "the audit log follows its own retention"
    assert _rows(kenny, "telemetry", "pc-stays") > 0, "other PCs keep theirs"
