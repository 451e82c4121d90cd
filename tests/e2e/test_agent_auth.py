"""The agent's side of mutual auth: it verifies the server before proving itself."""

from __future__ import annotations

import asyncio
import time

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
