"""Audit retention: rows older than the setting are pruned in the background (at
start-up, then hourly), newer ones stay; the default keeps a year."""

from __future__ import annotations

import asyncio
import subprocess
import time
from datetime import datetime, timedelta, timezone

from conftest import SERVER_BIN, _child_env, call, shell_stdout

OLD_ROWS = 1200  # more than one pruning batch


def _at(days_ago: int) -> str:
    t = datetime.now(timezone.utc) - timedelta(days=days_ago)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _write_rows(kenny, agent_id: str, days_ago: int, n: int) -> None:
    """Rows as a server from before the audit chain wrote them, `days_ago` days back
    (server stopped): the upgrade leaves them outside the chain, and they go by age."""
    for _ in range(n):
        kenny.sql(
            "INSERT INTO audit (at, agent_id, tool, args_digest, outcome, duration_ms) VALUES (?, ?, 'shell_exec', 'd', 'ok', 1)",
            (_at(days_ago), agent_id),
        )
    kenny.sql("UPDATE audit_chain_start SET before_id = (SELECT MAX(id) FROM audit)")


def _count(kenny, agent_id: str) -> int:
    return kenny.sql("SELECT COUNT(*) FROM audit WHERE agent_id = ?", (agent_id,))[0][0]


async def _wait_pruned(kenny, agent_id: str) -> None:
    deadline = time.monotonic() + 30
    while (left := _count(kenny, agent_id)) > 0:
        assert time.monotonic() < deadline, f"{left} rows of {agent_id} were not pruned"
        await asyncio.sleep(0.2)


async def test_rows_past_the_retention_setting_are_pruned_and_newer_ones_kept(kenny):
    agents = await kenny.start_agents(["pc-a"])
    async with kenny.mcp() as client:
        assert shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-a", "command": "echo $MARK"})) == agents["pc-a"].mark + "\n"
    kenny.stop_server()
    _write_rows(kenny, "pc-40-days", 40, OLD_ROWS)
    _write_rows(kenny, "pc-20-days", 20, 5)
    kenny.start_server(env={"KENNY_AUDIT_RETENTION_DAYS": "30"})
    await _wait_pruned(kenny, "pc-40-days")
    assert _count(kenny, "pc-20-days") == 5, "rows inside the retention period stay"
    assert [e["agent_id"] for e in kenny.audit(agent_id="pc-a")] == ["pc-a"], "today's call is still audited"
    assert "pruned audit rows past the retention period" in kenny.server.err_path.read_text()
    done = subprocess.run(
        [str(SERVER_BIN), "audit", "verify", "--data-dir", str(kenny.data_dir)],
        capture_output=True, text=True, timeout=60, env=_child_env(kenny.store_env()),
    )
    assert done.returncode == 0 and "intact" in done.stdout, done


async def test_the_default_keeps_a_year_and_zero_keeps_everything(kenny):
    kenny.stop_server()
    _write_rows(kenny, "pc-400-days", 400, 10)
    _write_rows(kenny, "pc-300-days", 300, 10)
    kenny.start_server()
    await _wait_pruned(kenny, "pc-400-days")
    assert _count(kenny, "pc-300-days") == 10
    # 0 turns pruning off: nothing is deleted however old.
    kenny.stop_server()
    _write_rows(kenny, "pc-900-days", 900, 10)
    kenny.start_server(extra_args=["--audit-retention-days", "0"])
    async with kenny.mcp() as client:
        await kenny.list_agents(client)
    log = kenny.server.err_path.read_text()
    assert "audit retention is off" in log and "pruned audit rows" not in log
    assert _count(kenny, "pc-900-days") == 10


def test_a_bad_retention_setting_is_refused_and_loses_nothing(kenny):
    kenny.stop_server()
    _write_rows(kenny, "pc-kept", 5000, 3)
    for bad in ["-1", "a year", "40000"]:
        cp = subprocess.run(
            [str(SERVER_BIN), "serve", "--listen", "127.0.0.1:0", "--data-dir", str(kenny.data_dir), f"--audit-retention-days={bad}"],
            capture_output=True, text=True, timeout=30, env=_child_env(kenny.store_env()),
        )
        assert cp.returncode != 0 and "--audit-retention-days" in cp.stderr, (bad, cp.stderr)
    assert _count(kenny, "pc-kept") == 3
