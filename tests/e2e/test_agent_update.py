"""Agent self-update from the dashboard's route: the server offers the newest build for
the agent's OS and architecture from its agent-releases directory; the agent downloads
it from its own server, checks the SHA-256, swaps its binary (keeping the old one) and
comes back online running it. Updates from anywhere else, or that do not match, are
refused and change nothing."""

from __future__ import annotations

import asyncio
import platform
import shutil
import time

import httpx

from conftest import AGENT_BIN, call, expect_error, shell_stdout


def _start_copy(kenny, tmp_path, agent_id: str):
    """A real agent running from its own copy of the binary, so replacing it is safe."""
    bin_dir = tmp_path / "agent-bin"
    bin_dir.mkdir()
    binary = bin_dir / "kenny-agent"
    shutil.copy2(AGENT_BIN, binary)
    creds = kenny.add_agent(agent_id)
    state = tmp_path / f"state-{agent_id}"
    proc = kenny._spawn(
        f"agent-{agent_id}",
        [str(binary), "run", "--server", kenny.base_url, "--agent-id", agent_id, "--state-dir", str(state),
         "--server-pubkey", creds["server_pubkey"], "--enroll-token", creds["token"], "--max-backoff-secs", "1"],
    )
    return binary, proc


async def test_update_swaps_the_binary_and_the_agent_comes_back(kenny, tmp_path):
    binary, proc = _start_copy(kenny, tmp_path, "pc-u")
    await kenny.wait_agents(["pc-u"])
    original = binary.read_bytes()
    releases = kenny.data_dir / "agent-releases"
    releases.mkdir()
    # A newer "build": the same program with bytes appended (an ELF ignores them).
    newer = original + b"\0kenny-test-build-0.1.1"
    (releases / f"kenny-agent-0.1.1-linux-{platform.machine()}").write_bytes(newer)

    with httpx.Client(base_url=kenny.base_url, headers={"Authorization": f"Bearer {kenny.admin_pat}"}, timeout=120) as http:
        r = http.post("/api/agents/pc-u/update")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["from"] == "0.1.0" and body["result"]["staged_version"] == "0.1.1", body

    deadline = time.monotonic() + 20
    while binary.read_bytes() != newer:
        assert time.monotonic() < deadline, "the binary was not replaced"
        await asyncio.sleep(0.1)
    assert binary.with_suffix(".old").read_bytes() == original
    # The agent restarts into the new binary and reconnects by itself.
    await asyncio.sleep(1.5)
    await kenny.wait_agents(["pc-u"])
    async with kenny.mcp() as client:
        assert shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-u", "command": "echo back"})) == "back\n"
    assert proc.alive()
    rows = [e for e in kenny.audit(agent_id="pc-u") if e["tool"] == "agent_update"]
    assert rows and rows[0]["outcome"] == "ok" and rows[0]["user"] == "admin", rows


async def test_updates_from_elsewhere_or_not_matching_are_refused(kenny, tmp_path):
    binary, _ = _start_copy(kenny, tmp_path, "pc-v")
    await kenny.wait_agents(["pc-v"])
    original = binary.read_bytes()
    releases = kenny.data_dir / "agent-releases"
    releases.mkdir()
    (releases / f"kenny-agent-0.1.1-linux-{platform.machine()}").write_bytes(original + b"\0x")
    url = f"{kenny.base_url}/d/agent/kenny-agent-0.1.1-linux-{platform.machine()}"
    async with kenny.mcp() as client:
        msg = expect_error(await call(client, "agent_update", {"agent_id": "pc-v", "version": "0.1.1", "url": url, "sha256": "0" * 64}), "exec_failed")
        assert "does not match its sha256" in msg and "nothing was changed" in msg, msg
        msg = expect_error(await call(client, "agent_update", {"agent_id": "pc-v", "version": "0.1.1", "url": "http://127.0.0.2:9/evil", "sha256": "0" * 64}), "bad_args")
        assert "only taken from this agent's own server" in msg, msg
        msg = expect_error(await call(client, "agent_update", {"agent_id": "pc-v", "version": "0.0.9", "url": url, "sha256": "0" * 64}), "bad_args")
        assert "not newer" in msg, msg
    assert binary.read_bytes() == original and not binary.with_suffix(".old").exists()
    # The download route serves only release file names.
    with httpx.Client(timeout=10) as http:
        assert http.get(f"{kenny.base_url}/d/agent/..%2Fkenny.db").status_code == 404
        assert http.get(url).content == original + b"\0x"
