"""README's first command: `kenny up` brings up a server with a connected local agent
and prints a working MCP URL and token; a second run reuses the same data directory."""

from __future__ import annotations

import re
import signal
import subprocess
import time

import pytest

from conftest import BIN_DIR, _child_env, call, expect_ok, shell_stdout

KENNY_BIN = BIN_DIR / "kenny"


def _up(tmp_path, name: str):
    out = tmp_path / f"{name}.out"
    err = tmp_path / f"{name}.err"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen(
            [str(KENNY_BIN), "up", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "quickstart-data"), "--agent-id", "this-pc"],
            stdin=subprocess.DEVNULL, stdout=o, stderr=e, env=_child_env(), cwd=tmp_path,
        )
    deadline = time.monotonic() + 30
    while "Press Ctrl-C to stop." not in out.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"kenny up did not come up:\n{out.read_text()}\n{err.read_text()}")
        time.sleep(0.1)
    return proc, out.read_text()


def _stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(timeout=15) is not None
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("kenny up did not stop on SIGTERM")


async def test_kenny_up_serves_a_local_agent(tmp_path, kenny):
    if not KENNY_BIN.exists():
        pytest.fail(f"{KENNY_BIN} not built")
    proc, banner = _up(tmp_path, "first")
    try:
        url = re.search(r"MCP URL:\s+(http://127\.0\.0\.1:\d+/mcp)", banner).group(1)
        token = re.search(r"Token:\s+(kenny_pat_\S+)", banner).group(1)
        assert "Local agent: this-pc (connected)" in banner, banner
        assert re.search(r"password \(shown once.*\): \S{12,}", banner), "first run prints the new superuser's password"
        assert f'"Authorization": "Bearer {token}"' in banner and '"url": "' + url in banner
        # Reuse the harness's MCP client against the quick-start server.
        kenny.base_url = url.removesuffix("/mcp")
        async with kenny.mcp(token) as client:
            agents = await kenny.list_agents(client)
            assert agents["this-pc"]["online"] is True, agents
            res = await call(client, "shell_exec", {"agent_id": "this-pc", "command": "echo up-ok"})
            assert shell_stdout(res) == "up-ok\n"
    finally:
        _stop(proc)

    proc, banner2 = _up(tmp_path, "second")
    try:
        assert "password (shown once" not in banner2, "the superuser is created only once"
        assert re.search(r"Token:\s+(kenny_pat_\S+)", banner2).group(1) == token, "the quick-start token is reused"
        url2 = re.search(r"MCP URL:\s+(http://127\.0\.0\.1:\d+/mcp)", banner2).group(1)
        kenny.base_url = url2.removesuffix("/mcp")
        async with kenny.mcp(token) as client:
            expect_ok(await call(client, "fs_disk_usage", {"agent_id": "this-pc"}))
    finally:
        _stop(proc)
