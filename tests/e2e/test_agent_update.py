"""Agent updates. The caller names at most a version; the server picks the build from its
agent-releases directory and signs a manifest of it (agent, OS, architecture, size,
SHA-256) with the key the agent pinned; the agent downloads it from its own server only,
checks it, and restarts into it on trial. A build that does not log in within the trial
window is rolled back by the previous build, and the failure reaches the caller.

Each test runs a real agent from its own copy of the binary, so replacing it is safe.
"""

from __future__ import annotations

import asyncio
import hashlib
import platform
import shutil
import time

import httpx

from conftest import AGENT_BIN, _descendants, call, expect_error, expect_ok, shell_stdout

ARCH = platform.machine()


def _start_copy(kenny, tmp_path, agent_id: str, trial_secs: int = 30):
    bin_dir = tmp_path / f"bin-{agent_id}"
    bin_dir.mkdir()
    binary = bin_dir / "kenny-agent"
    shutil.copy2(AGENT_BIN, binary)
    creds = kenny.add_agent(agent_id)
    state = tmp_path / f"state-{agent_id}"
    proc = kenny._spawn(
        f"agent-{agent_id}",
        [str(binary), "run", "--server", kenny.base_url, "--agent-id", agent_id, "--state-dir", str(state),
         "--server-pubkey", creds["server_pubkey"], "--enroll-token", creds["token"], "--max-backoff-secs", "1",
         "--update-trial-secs", str(trial_secs)],
    )
    return binary, proc


def _release(kenny, version: str, content: bytes, mode: int = 0o755):
    releases = kenny.data_dir / "agent-releases"
    releases.mkdir(exist_ok=True)
    path = releases / f"kenny-agent-{version}-linux-{ARCH}"
    path.write_bytes(content)
    path.chmod(mode)
    return path


def _http(kenny, token: str | None = None) -> httpx.Client:
    return httpx.Client(base_url=kenny.base_url, headers={"Authorization": f"Bearer {token or kenny.admin_pat}"}, timeout=180)


def _updates(kenny, agent_id: str) -> list[dict]:
    with _http(kenny) as http:
        r = http.get(f"/api/agents/{agent_id}/updates")
    assert r.status_code == 200, r.text
    return r.json()["updates"]


async def test_update_swaps_the_binary_and_the_agent_comes_back(kenny, tmp_path):
    binary, proc = _start_copy(kenny, tmp_path, "pc-u")
    await kenny.wait_agents(["pc-u"])
    original = binary.read_bytes()
    # A newer "build": the same program with bytes appended (an ELF ignores them).
    newer = original + b"\0kenny-test-build-0.1.1"
    _release(kenny, "0.1.1", newer)

    with _http(kenny) as http:
        r = http.post("/api/agents/pc-u/update")
    assert r.status_code == 200, r.text
    body = r.json()
    result = body["result"]
    assert body["from"] == "0.1.0" and result["staged_version"] == "0.1.1", body
    # The call ends when the new build has logged in on trial and reported back.
    assert result["outcome"] == "succeeded" and result["running_version"] == "0.1.1", body
    assert binary.read_bytes() == newer
    assert binary.with_suffix(".old").read_bytes() == original
    await kenny.wait_agents(["pc-u"])
    async with kenny.mcp() as client:
        assert shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-u", "command": "echo back"})) == "back\n"
    assert proc.alive(), "the agent re-executed itself in place"
    rows = [e for e in kenny.audit(agent_id="pc-u") if e["tool"] == "agent_update"]
    assert rows and rows[0]["outcome"] == "ok" and rows[0]["user"] == "admin", rows
    updates = _updates(kenny, "pc-u")
    assert [(u["outcome"], u["to_version"], u["requested_by"]) for u in updates] == [("succeeded", "0.1.1", "admin")], updates


async def test_the_caller_cannot_choose_what_is_downloaded(kenny, tmp_path):
    """The hole: agent_update took the URL and SHA-256 from the caller, so pointing it at
    the server's own /healthz with the hash of `ok` replaced the agent with two bytes."""
    binary, _ = _start_copy(kenny, tmp_path, "pc-v")
    await kenny.wait_agents(["pc-v"])
    original = binary.read_bytes()
    attack = {"agent_id": "pc-v", "version": "9.9.9", "url": f"{kenny.base_url}/healthz",
              "sha256": hashlib.sha256(b"ok").hexdigest()}
    async with kenny.mcp() as client:
        msg = expect_error(await call(client, "agent_update", attack), "bad_args")
        assert "unknown argument" in msg and "it takes: version, allow_downgrade" in msg, msg
        for traversal in ("../../kenny.db", "%2e%2e/%2e%2e/kenny.db"):
            msg = expect_error(await call(client, "agent_update", {"agent_id": "pc-v", "url": f"{kenny.base_url}/d/agent/{traversal}"}), "bad_args")
            assert "unknown argument `url`" in msg, msg
        # A version the server has no build of: nothing to sign, nothing sent.
        msg = expect_error(await call(client, "agent_update", {"agent_id": "pc-v", "version": "9.9.9"}), "not_found")
        assert "kenny-agent-<version>-linux-" in msg, msg
    with _http(kenny) as http:
        r = http.post("/api/agents/pc-v/update", json={"url": f"{kenny.base_url}/healthz", "sha256": "0" * 64})
        assert r.status_code == 400 and "unknown argument" in r.json()["error"]["message"], r.text
        r = http.post("/api/agents/pc-v/update", content=b"not json")
        assert r.status_code == 400, r.text
    assert binary.read_bytes() == original and not binary.with_suffix(".old").exists()
    # The download route serves only release file names, however they are spelt.
    with httpx.Client(timeout=10) as http:
        for path in ("..%2Fkenny.db", "%2e%2e%2fkenny.db", "kenny-agent-0.1.1-linux-x86_64%2f..%2f..%2fkenny.db", "kenny.db"):
            assert http.get(f"{kenny.base_url}/d/agent/{path}").status_code == 404, path


async def test_downgrades_need_a_superuser_naming_the_exact_version(kenny, tmp_path):
    binary, _ = _start_copy(kenny, tmp_path, "pc-d")
    await kenny.wait_agents(["pc-d"])
    original = binary.read_bytes()
    older = original + b"\0kenny-test-build-0.0.9"
    _release(kenny, "0.0.9", older)
    kenny.add_user("olga", "operator")
    olga = kenny.create_token("olga")
    async with kenny.mcp(token=olga) as client:
        msg = expect_error(await call(client, "agent_update", {"agent_id": "pc-d", "version": "0.0.9", "allow_downgrade": True}), "forbidden")
        assert "only a superuser" in msg, msg
        # Without a version there is nothing newer, and no downgrade is ever picked.
        expect_error(await call(client, "agent_update", {"agent_id": "pc-d"}), "not_found")
    async with kenny.mcp() as client:
        msg = expect_error(await call(client, "agent_update", {"agent_id": "pc-d", "version": "0.0.9"}), "bad_args")
        assert "allow_downgrade" in msg, msg
        assert binary.read_bytes() == original
        result = expect_ok(await call(client, "agent_update", {"agent_id": "pc-d", "version": "0.0.9", "allow_downgrade": True}, timeout=180))
    assert result["outcome"] == "succeeded" and result["staged_version"] == "0.0.9", result
    assert binary.read_bytes() == older


async def _rolls_back(kenny, tmp_path, agent_id: str, build: bytes, why: str):
    binary, proc = _start_copy(kenny, tmp_path, agent_id, trial_secs=5)
    await kenny.wait_agents([agent_id])
    original = binary.read_bytes()
    _release(kenny, "0.1.1", build)
    async with kenny.mcp() as client:
        msg = expect_error(await call(client, "agent_update", {"agent_id": agent_id}, timeout=180), "exec_failed")
    assert "rolled back" in msg and why in msg and "restored 0.1.0" in msg, msg
    assert binary.read_bytes() == original, "the previous build was not put back"
    assert binary.with_suffix(".failed").read_bytes() == build
    assert proc.alive()
    # The trial child is gone: nothing of the failed build keeps running.
    deadline = time.monotonic() + 10
    while _descendants(proc.pid):
        assert time.monotonic() < deadline, f"left running: {_descendants(proc.pid)}"
        await asyncio.sleep(0.2)
    await kenny.wait_agents([agent_id])
    async with kenny.mcp() as client:
        assert shell_stdout(await call(client, "shell_exec", {"agent_id": agent_id, "command": "echo still-here"})) == "still-here\n"
    updates = _updates(kenny, agent_id)
    assert updates[0]["outcome"] == "rolled_back" and why in updates[0]["detail"], updates


async def test_a_build_that_never_logs_in_is_rolled_back(kenny, tmp_path):
    await _rolls_back(kenny, tmp_path, "pc-r", b"#!/bin/sh\nexec sleep 300\n", "did not log in within 5s")


async def test_a_build_that_crashes_at_start_is_rolled_back(kenny, tmp_path):
    await _rolls_back(kenny, tmp_path, "pc-c", b"#!/bin/sh\nexit 3\n", "exited")
