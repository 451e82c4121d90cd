"""Backups of a running server: taken under load from 64 MCP clients, no audit row
committed before the backup started is missing from it (checked in a second server
restored from it); `verify-backup` catches a damaged file; `restore` refuses to run
under a live server, and brings a lost data directory back with its agents, which
reconnect with their keys because the backup carries the server key they pinned."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import subprocess

import anyio

from conftest import sqlite_only, SERVER_BIN, Kenny, _child_env, call, expect_ok

# Backups are copies of the SQLite file; a PostgreSQL store is backed up with pg_dump
# (and `backup`/`restore`/`--backup-dir` refuse it: test_admin_cli.py).
pytestmark = sqlite_only("backups copy the SQLite file")

CLIENTS = 64


def _cli(kenny, *args: str) -> subprocess.CompletedProcess:
    argv = [str(SERVER_BIN), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=_child_env(), cwd=kenny.root)


def _audit_ids(db, upto: int) -> list[int]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [r[0] for r in con.execute("SELECT id FROM audit WHERE id <= ? ORDER BY id", (upto,))]
    finally:
        con.close()


async def test_a_backup_under_load_restores_into_a_second_server(kenny, tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n")
    await kenny.start_agents(["pc-a"], env={"KENNY_HOSTS_FILE": str(hosts)})
    backup = tmp_path / "kenny-backup.db"
    stop = asyncio.Event()
    made = [0]

    async def client_loop():
        async with kenny.mcp() as client:
            while not stop.is_set():
                expect_ok(await call(client, "webfilter_status", {"agent_id": "pc-a"}))
                made[0] += 1

    async def take_backup():
        # Let the load build up, note the newest committed row, then back up.
        while made[0] < 2 * CLIENTS:
            await asyncio.sleep(0.05)
        before = max(_audit_ids(kenny.data_dir / "kenny.db", 1 << 62) or [0])
        done = await anyio.to_thread.run_sync(lambda: _cli(kenny, "backup", "--out", str(backup), "--data-dir", str(kenny.data_dir)))
        stop.set()
        return before, done

    results = await asyncio.gather(*(client_loop() for _ in range(CLIENTS)), take_backup())
    before, done = results[-1]
    assert done.returncode == 0, done.stderr
    assert "backup written to" in done.stdout
    assert backup.stat().st_mode & 0o077 == 0, "a backup holds the server key: owner only"
    assert made[0] > 2 * CLIENTS

    verified = _cli(kenny, "verify-backup", str(backup))
    assert verified.returncode == 0 and "is a good backup" in verified.stdout, verified.stderr

    # A second server restored from it has every row committed before it started.
    second = Kenny(tmp_path / "second")
    try:
        restored = _cli(second, "restore", str(backup), "--data-dir", str(second.data_dir))
        assert restored.returncode == 0, restored.stderr
        assert _audit_ids(second.data_dir / "kenny.db", before) == _audit_ids(kenny.data_dir / "kenny.db", before)
        assert len(_audit_ids(second.data_dir / "kenny.db", before)) >= 2 * CLIENTS
        second.start_server()
        second.admin_pat = kenny.admin_pat  # the same accounts and tokens
        rows = second.audit(agent_id="pc-a", limit=5)
        assert rows and all(r["tool"] == "webfilter_status" for r in rows), rows
    finally:
        second.close()

    # A damaged copy is caught.
    damaged = tmp_path / "damaged.db"
    shutil.copy(backup, damaged)
    with open(damaged, "r+b") as f:
        f.seek(4096 * 3)
        f.write(b"\xff" * 4096)
    bad = _cli(kenny, "verify-backup", str(damaged))
    assert bad.returncode != 0 and ("damaged" in bad.stderr or "cannot be read" in bad.stderr), bad.stderr
    not_one = tmp_path / "notes.txt"
    not_one.write_text("hello")
    bad = _cli(kenny, "verify-backup", str(not_one))
    assert bad.returncode != 0 and "cannot be read as a kenny backup" in bad.stderr, bad.stderr


async def test_restore_waits_for_the_server_and_brings_the_pcs_back(kenny, tmp_path):
    await kenny.start_agents(["pc-a"])
    backup = tmp_path / "backup.db"
    assert _cli(kenny, "backup", "--out", str(backup), "--data-dir", str(kenny.data_dir)).returncode == 0
    again = _cli(kenny, "backup", "--out", str(backup), "--data-dir", str(kenny.data_dir))
    assert again.returncode != 0 and "never overwrites" in again.stderr, again.stderr

    refused = _cli(kenny, "restore", str(backup), "--data-dir", str(kenny.data_dir))
    assert refused.returncode != 0 and "is running" in refused.stderr, refused.stderr

    # The data directory is lost; restored, the same agent logs in with its key.
    port = kenny.port
    kenny.stop_server()
    shutil.rmtree(kenny.data_dir)
    kenny.data_dir.mkdir()
    restored = _cli(kenny, "restore", str(backup), "--data-dir", str(kenny.data_dir))
    assert restored.returncode == 0 and "restored" in restored.stdout, restored.stderr
    kenny.start_server(port=port)
    async with kenny.mcp() as client:
        await kenny.wait_agents(["pc-a"])
        expect_ok(await call(client, "telemetry_collect", {"agent_id": "pc-a", "sections": ["uptime"]}))

    # Staged: taken in at the next start, and what it replaced is kept aside.
    staged = _cli(kenny, "restore", str(backup), "--staged", "--data-dir", str(kenny.data_dir))
    assert staged.returncode == 0 and "staged" in staged.stdout, staged.stderr
    kenny.stop_server()
    kenny.start_server(port=port)
    assert not (kenny.data_dir / "restore-pending.db").exists()
    assert list(kenny.data_dir.glob("replaced-*/kenny.db")), "the replaced data is kept"
    async with kenny.mcp() as client:
        await kenny.wait_agents(["pc-a"])
