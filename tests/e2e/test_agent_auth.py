"""The agent's side of mutual auth: it verifies the server before proving itself."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time

import httpx

from conftest import AGENT_BIN, FakeAgent, KeyedFakeAgent, call, shell_stdout

# The public key of kenny's documented test vector (docs/wire/vectors/mutual_auth.json):
# a valid Ed25519 key that is certainly not this test server's.
NOT_THE_SERVER_KEY = "DXVQdU4IAKXSN+71gmA1dmubPloVhoqUCrKJlYeI47A="


async def test_agent_refuses_a_server_with_another_key(kenny):
    """An agent pinned to a different server key never authenticates: it refuses to
    answer a challenge it cannot verify, so it never comes online or runs anything."""
    creds = kenny.add_agent("pinned")
    assert creds["server_pubkey"] != NOT_THE_SERVER_KEY
    agent = kenny.start_agent("pinned", creds={**creds, "server_pubkey": NOT_THE_SERVER_KEY})
    deadline = time.monotonic() + 10
    while "could not prove it holds the pinned key" not in agent.proc.logs():
        assert time.monotonic() < deadline, f"agent did not refuse the unverifiable server\n{agent.proc.logs()}"
        await asyncio.sleep(0.2)
    async with kenny.mcp() as client:
        assert (await kenny.list_agents(client))["pinned"]["online"] is False
    assert agent.proc.alive(), "the agent keeps retrying (with backoff) rather than exiting"


async def test_token_no_longer_logs_in_once_a_key_is_enrolled(kenny):
    """After enrollment the per-agent token cannot be used to impersonate the agent:
    the legacy handshake with it is refused (4401) and the real agent keeps its calls."""
    agent = kenny.start_agent("den-pc")
    await kenny.wait_agents(["den-pc"])
    impostor = FakeAgent(kenny.ws_url, "den-pc", agent.creds["token"])
    await impostor.register()
    try:
        code, reason = await impostor.wait_closed(timeout=10)
        assert code == 4401 and "mutual auth" in reason, (code, reason)
        async with kenny.mcp() as client:
            out = shell_stdout(await call(client, "shell_exec", {"agent_id": "den-pc", "command": "echo $MARK"}))
        assert out == agent.mark + "\n"
    finally:
        await impostor.close()


async def test_a_second_host_cannot_take_over_a_connected_agent_id(kenny):
    """Two PCs configured with one id (a cloned disk carries the key too) would take
    turns receiving its calls; while the first is connected, a different host claiming
    the id is refused even with the right key."""
    creds = kenny.add_agent("shared-id")
    first = KeyedFakeAgent(kenny.ws_url, "shared-id", creds["token"], creds["server_pubkey"], meta={"hostname": "host-one", "os": "linux", "version": "0"})
    await first.enroll(kenny.base_url)
    await first.register()
    await kenny.wait_agents(["shared-id"])
    second = KeyedFakeAgent(kenny.ws_url, "shared-id", creds["token"], creds["server_pubkey"], meta={"hostname": "host-two", "os": "linux", "version": "0"}, key=first.key)
    await second.register()
    try:
        code, reason = await second.wait_closed(timeout=10)
        assert code == 4401 and "another host" in reason, (code, reason)
        await _first_still_gets_the_calls(kenny, first)
    finally:
        await first.close()
        await second.close()


async def test_a_token_cannot_replace_a_live_connection_even_from_the_same_host(kenny):
    """Regression: a legacy-token connection naming the same host name as the live
    connection replaced it, so anyone holding the token (which sits in a settings file
    and once sat on a command line) took over the agent's calls. Host names are chosen
    by the connecting side; only the enrolled key replaces a live connection."""
    creds = kenny.add_agent("legacy-pc")
    meta = {"hostname": "legacy-host", "os": "linux", "version": "0"}
    first = FakeAgent(kenny.ws_url, "legacy-pc", creds["token"], meta=meta)
    await first.register()
    await kenny.wait_agents(["legacy-pc"])
    impostor = FakeAgent(kenny.ws_url, "legacy-pc", creds["token"], meta=dict(meta))
    await impostor.register()
    try:
        code, reason = await impostor.wait_closed(timeout=10)
        assert code == 4401 and "enrolled key" in reason, (code, reason)
        await _first_still_gets_the_calls(kenny, first)
        assert impostor.requests.empty()
    finally:
        await first.close()
        await impostor.close()


async def _first_still_gets_the_calls(kenny, first: FakeAgent) -> None:
    async with kenny.mcp() as client:
        pending = asyncio.create_task(call(client, "shell_exec", {"agent_id": first.agent_id, "command": "x"}))
        req = await first.next_request(timeout=10, pending=pending)
        await first.respond(req["id"], result={"stdout": "one\n", "stderr": "", "exit_code": 0, "truncated": False})
        assert shell_stdout(await asyncio.wait_for(pending, 10)) == "one\n"
        assert (await kenny.list_agents(client))[first.agent_id]["online"] is True


async def test_rekey_moves_an_agent_to_a_new_key(kenny):
    """`agent rekey` forgets the enrolled key and issues a new token: the old token is
    dead, and an agent given the new token enrolls again and comes back online."""
    agent = kenny.start_agent("rekeyed")
    await kenny.wait_agents(["rekeyed"])
    agent.proc.stop()
    fresh = json.loads(kenny.admin("agent", "rekey", "rekeyed"))
    assert fresh["agent_id"] == "rekeyed" and fresh["token"] != agent.creds["token"]
    assert fresh["server_pubkey"] == agent.creds["server_pubkey"]
    # The same state dir (same key) with the new token: refused once, then enrolls again.
    again = kenny.start_agent("rekeyed", creds=fresh)
    await kenny.wait_agents(["rekeyed"], timeout=20)
    async with kenny.mcp() as client:
        out = shell_stdout(await call(client, "shell_exec", {"agent_id": "rekeyed", "command": "echo $MARK"}))
    assert out == again.mark + "\n"
    async with httpx.AsyncClient(timeout=10) as http:
        r = await http.post(
            f"{kenny.base_url}/api/agents/rekeyed/enroll",
            headers={"Authorization": f"Bearer {agent.creds['token']}"},
            json={"public_key": NOT_THE_SERVER_KEY},
        )
    assert r.status_code == 401, f"the old token must be dead: {r.status_code} {r.text}"


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode(errors="replace")


async def test_the_enrollment_token_can_come_from_a_file_or_the_environment(kenny, tmp_path):
    """A token on the command line is readable by every local user (`ps`, /proc) for as
    long as the agent runs. It can come from a file (--enroll-token-file) or from
    KENNY_ENROLL_TOKEN instead; the flag still works, with a warning."""
    from_file = kenny.add_agent("from-file")
    token_file = tmp_path / "enroll-token"
    token_file.write_text(from_file["token"] + "\n")
    token_file.chmod(0o600)
    from_env = kenny.add_agent("from-env")
    base = [str(AGENT_BIN), "run", "--server", kenny.base_url, "--max-backoff-secs", "1"]
    file_agent = kenny._spawn(
        "agent-from-file",
        base + ["--agent-id", "from-file", "--state-dir", str(tmp_path / "s1"),
                "--server-pubkey", from_file["server_pubkey"], "--enroll-token-file", str(token_file)],
    )
    env_agent = kenny._spawn(
        "agent-from-env",
        base + ["--agent-id", "from-env", "--state-dir", str(tmp_path / "s2"), "--server-pubkey", from_env["server_pubkey"]],
        env={"KENNY_ENROLL_TOKEN": from_env["token"]},
    )
    on_argv = kenny.start_agent("on-argv")
    await kenny.wait_agents(["from-file", "from-env", "on-argv"])
    async with kenny.mcp() as client:
        for agent_id in ("from-file", "from-env"):
            out = shell_stdout(await call(client, "shell_exec", {"agent_id": agent_id, "command": "echo hello"}))
            assert out == "hello\n"
    assert from_file["token"] not in _cmdline(file_agent.pid)
    assert from_env["token"] not in _cmdline(env_agent.pid)
    warning = "--enroll-token was given on the command line"
    assert warning in on_argv.proc.logs(), "the old flag still works, and says why it should not be used"
    assert warning not in file_agent.logs() and warning not in env_agent.logs()


def test_an_unreadable_or_empty_token_file_is_a_clear_error(kenny, tmp_path):
    creds = kenny.add_agent("bad-file")
    empty = tmp_path / "empty"
    empty.write_text("\n")
    for path, says in [(tmp_path / "missing", "cannot read the enrollment token from"), (empty, "on its first line")]:
        cp = subprocess.run(
            [str(AGENT_BIN), "run", "--server", kenny.base_url, "--agent-id", "bad-file", "--state-dir", str(tmp_path / "s"),
             "--server-pubkey", creds["server_pubkey"], "--enroll-token-file", str(path)],
            capture_output=True, text=True, timeout=30,
        )
        assert cp.returncode != 0 and says in cp.stderr and str(path) in cp.stderr, cp.stderr
