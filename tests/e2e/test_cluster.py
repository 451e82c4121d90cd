"""Three kenny replicas sharing one PostgreSQL, carrying calls between them over NATS,
with real agents spread across them by a load balancer: the targeting promise holds
whichever replica a call enters at, and a replica killed mid-load costs only the calls
that were running on its own connections, which fail `offline` at once.

PostgreSQL and NATS are Debian's, started by the test on loopback ports with throwaway
directories. The load balancer is a small TCP proxy here (round robin, skipping a
backend that refuses), standing in for the one a deployment puts in front.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from conftest import Kenny, KeyedFakeAgent, _postgres, call, expect_error, shell_stdout
import nats_server

REPLICAS = 3
AGENTS = [f"pc-{c}" for c in "abcdef"]


def _need_services():
    missing = []
    if nats_server.binary() is None:
        missing.append("nats-server (apt-get install nats-server)")
    import postgres_server

    if postgres_server.bin_dir() is None:
        missing.append("postgresql (apt-get install postgresql)")
    if missing:
        why = "cluster tests need " + " and ".join(missing)
        if os.environ.get("CI") == "true":
            pytest.fail(why + "; CI must install them", pytrace=False)
        pytest.skip(why)


class Balancer:
    """A TCP load balancer on 127.0.0.1: each new connection goes to the next backend
    in turn that accepts it, as an L4 balancer with health checks would."""

    def __init__(self, ports: list[int]):
        self.ports = list(ports)
        self.turn = 0
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        assert ready.wait(10), "the balancer did not start"

    def _run(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._accept, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]
        ready.set()
        self.loop.run_forever()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = self.turn
        self.turn += 1
        for i in range(len(self.ports)):
            port = self.ports[(first + i) % len(self.ports)]
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
                break
            except OSError:
                continue
        else:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                try:
                    dst.close()
                except Exception:
                    pass

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        def shut() -> None:
            self.server.close()
            for task in asyncio.all_tasks(self.loop):
                task.cancel()
            self.loop.stop()

        self.loop.call_soon_threadsafe(shut)
        self.thread.join(10)


class Deployment:
    """A kenny cluster under test: the shared database, NATS, the replicas, the balancer
    the agents dial, and the `Kenny` that runs admin commands and agents."""

    def __init__(self, kenny: Kenny, nats: nats_server.NatsServer):
        self.kenny = kenny
        self.nats = nats
        self.replicas = []
        self.urls: list[str] = []
        for _ in range(REPLICAS):
            self.add_replica()
        self.balancer = Balancer([int(u.rsplit(":", 1)[1]) for u in self.urls])
        # Agents dial the balancer; MCP clients pick their replica.
        kenny.base_url = self.balancer.url

    def add_replica(self) -> str:
        """Starts one more replica (not behind the balancer); its URL."""
        i = len(self.replicas)
        argv = [
            str(kenny_bin()), "serve", "--listen", "127.0.0.1:0",
            "--data-dir", str(self.kenny.root / f"replica-{i}"), "--heartbeat-secs", "2",
        ]
        proc = self.kenny._spawn(f"replica-{i}", argv, env={**self.kenny.store_env(), "KENNY_NATS_URL": self.nats.url})
        url, _ = self.kenny._await_listening(proc)
        self.replicas.append(proc)
        self.urls.append(url)
        return url

    def gauge(self, i: int, name: str) -> int:
        text = httpx.get(f"{self.urls[i]}/metrics", timeout=10).text
        m = re.search(rf"^kenny_{name} (\d+)$", text, re.M)
        assert m, f"no kenny_{name} in replica {i}'s metrics"
        return int(m.group(1))

    def held(self, i: int) -> int:
        """How many agents replica `i` holds, by its own count."""
        return self.gauge(i, "agents_connected")

    def leaders(self, among: list[int]) -> list[int]:
        return [i for i in among if self.gauge(i, "leading") == 1]

    def agents_on(self, i: int) -> list[str]:
        """The agents replica `i` holds, by its log of connections."""
        held: set[str] = set()
        for line in self.replicas[i].logs().splitlines():
            line = re.sub(r"\x1b\[[0-9;]*m", "", line)
            m = re.search(r"agent (connected|disconnected) agent=(\S+)", line)
            if m:
                (held.add if m.group(1) == "connected" else held.discard)(m.group(2))
        return sorted(held)

    def agents_on_now(self) -> set[str]:
        """Every agent some live replica holds, by their logs."""
        return {a for i, p in enumerate(self.replicas) if p.alive() for a in self.agents_on(i)}

    def close(self) -> None:
        self.balancer.stop()


def kenny_bin() -> Path:
    from conftest import SERVER_BIN

    return SERVER_BIN


@pytest.fixture
def deployment(tmp_path: Path, request: pytest.FixtureRequest):
    _need_services()
    nats = nats_server.NatsServer()
    k = Kenny(tmp_path)
    k.database_url = _postgres().new_database()
    request.node._kenny = k
    d = None
    try:
        d = Deployment(k, nats)
        k.bootstrap_admin()
        yield d
    finally:
        k.close()
        if d is not None:
            d.close()
        nats.stop()


async def _online_everywhere(d: Deployment, ids: list[str], timeout: float = 30.0, urls: list[str] | None = None) -> None:
    """Every replica (or those at `urls`) lists every agent in `ids` as online: presence
    is cluster-wide."""
    deadline = time.monotonic() + timeout
    for url in urls or d.urls:
        async with d.kenny.mcp(base_url=url) as client:
            while True:
                agents = await d.kenny.list_agents(client)
                if all(agents.get(i, {}).get("online") is True for i in ids):
                    break
                assert time.monotonic() < deadline, f"{url} does not list {ids} online: {agents}\n{d.kenny.logs()[-6000:]}"
                await asyncio.sleep(0.2)


async def _echo_mark(client, agent_id: str, delay_ms: int = 0) -> str:
    command = f'sleep {delay_ms / 1000:.3f}; echo "$MARK"' if delay_ms else 'echo "$MARK"'
    return shell_stdout(await call(client, "shell_exec", {"agent_id": agent_id, "command": command}))


async def test_calls_entering_at_every_replica_reach_their_agent(deployment):
    d = deployment
    # One at a time, each waited for at a replica directly (not through the balancer):
    # the balancer's turns then spread them evenly. Started all at once, their
    # connections interleave and a replica may draw none.
    agents = {}
    for a in AGENTS:
        agents[a] = d.kenny.start_agent(a)
        await _online_everywhere(d, [a], urls=[d.urls[0]])
    await _online_everywhere(d, AGENTS)
    held = [d.held(i) for i in range(REPLICAS)]
    assert sum(held) == len(AGENTS) and all(h >= 1 for h in held), f"agents not spread across replicas: {held}"
    marks = {a: agents[a].mark for a in AGENTS}

    async def session(url: str, seed: int) -> list[tuple[str, str]]:
        rng = random.Random(seed)
        seen = []
        async with d.kenny.mcp(base_url=url) as client:  # one PAT for every session
            for _ in range(12):
                batch = [rng.choice(AGENTS) for _ in range(4)]
                if rng.random() < 0.5:
                    await call(client, "select_agent", {"agent_id": rng.choice(AGENTS)})
                outs = await asyncio.gather(*(_echo_mark(client, t, rng.randint(0, 60)) for t in batch))
                seen += list(zip(batch, outs))
        return seen

    sessions = [session(url, seed) for seed, url in enumerate(d.urls * 2)]
    results = await asyncio.wait_for(asyncio.gather(*sessions), timeout=100)
    calls = [c for r in results for c in r]
    wrong = [(t, out) for t, out in calls if out != marks[t] + "\n"]
    assert not wrong, f"{len(wrong)} of {len(calls)} calls ran on the wrong PC: {wrong[:5]}"
    assert len(calls) == 6 * 12 * 4
    # Every call was audited once, as ok, by the replica it entered at.
    rows = d.kenny.sql("SELECT outcome, COUNT(*) FROM audit WHERE tool = 'shell_exec' GROUP BY outcome")
    assert dict(rows) == {"ok": len(calls)}, rows


async def test_a_replica_started_later_knows_where_every_agent_is(deployment):
    d = deployment
    agents = {a: d.kenny.start_agent(a) for a in AGENTS[:3]}
    await _online_everywhere(d, list(agents))
    late = d.add_replica()
    await _online_everywhere(d, list(agents), timeout=10, urls=[late])
    async with d.kenny.mcp(base_url=late) as client:
        for a, agent in agents.items():
            assert await _echo_mark(client, a) == agent.mark + "\n"


async def test_a_change_made_on_one_replica_reaches_agents_on_every_replica(deployment):
    """The operator policy saved through one replica is pushed by every replica to the
    agents it holds; a PC removed through one replica is cut off by the one holding it."""
    d = deployment
    await_ids = AGENTS[:REPLICAS * 2]
    for a in await_ids:
        d.kenny.start_agent(a)
    await _online_everywhere(d, await_ids)
    far = [a for a in await_ids if a not in d.agents_on(0)]
    assert far, "every agent is on replica 0"
    word = "kenny-cluster-canary"
    rule = {"id": "no_canary", "applies_to": "shell", "pattern": rf"\b{word}\b", "reason": "operator: canary word"}
    headers = {"Authorization": f"Bearer {d.kenny.admin_pat}"}
    r = httpx.put(f"{d.urls[0]}/api/policy", json={"rules": [rule]}, headers=headers, timeout=10)
    assert r.status_code == 200, r.text
    async with d.kenny.mcp(base_url=d.urls[0]) as client:
        for agent_id in far:
            deadline = time.monotonic() + 5
            while True:
                res = await call(client, "shell_exec", {"agent_id": agent_id, "command": f"echo {word}"})
                if res.is_error:
                    assert "canary word" in expect_error(res, "blocked")
                    break
                assert time.monotonic() < deadline, f"the rule saved on replica 0 never reached {agent_id}: {res}"
                await asyncio.sleep(0.1)
        victim = far[0]
        r = httpx.delete(f"{d.urls[0]}/api/agents/{victim}", headers=headers, timeout=10)
        assert r.status_code in (200, 204), r.text
        deadline = time.monotonic() + 5
        while victim in d.agents_on_now():
            assert time.monotonic() < deadline, f"{victim} removed on replica 0 is still connected elsewhere"
            await asyncio.sleep(0.1)
        expect_error(await call(client, "shell_exec", {"agent_id": victim, "command": "true"}), "unknown_agent")


async def test_an_agent_connected_to_two_replicas_keeps_only_its_newest_connection(deployment):
    """A reconnect racing its old socket on another replica: the older connection is
    closed wherever it is, and calls entering at any replica reach the newer one."""
    d = deployment
    creds = d.kenny.add_agent("pc-twice")
    ws = [u.replace("http://", "ws://", 1) + "/agent/ws" for u in d.urls]
    old = KeyedFakeAgent(ws[0], "pc-twice", creds["token"], creds["server_pubkey"])
    await old.enroll(d.urls[0])
    await old.register()
    await _online_everywhere(d, ["pc-twice"])
    new = KeyedFakeAgent(ws[1], "pc-twice", creds["token"], creds["server_pubkey"], key=old.key)
    await new.register()
    # The server closes a replaced connection as a single server does (no status).
    await old.wait_closed(10)
    for url in d.urls:
        async with d.kenny.mcp(base_url=url) as client:
            pending = asyncio.create_task(call(client, "shell_exec", {"agent_id": "pc-twice", "command": "echo here"}))
            request = await new.next_request(10, pending)
            await new.respond(request["id"], result={"stdout": "new\n", "stderr": "", "exit_code": 0, "truncated": False})
            assert shell_stdout(await pending) == "new\n"
    assert old.requests.empty(), "a call reached the replaced connection"
    # The rule a single server keeps holds across replicas: a live connection is not
    # replaced from another host, whichever replica the newcomer reaches.
    meta = {**new.meta, "hostname": "another-pc"}
    stranger = KeyedFakeAgent(ws[2], "pc-twice", creds["token"], creds["server_pubkey"], meta=meta, key=old.key)
    await stranger.register()
    code, reason = await stranger.wait_closed(10)
    assert code == 4401 and "another host" in reason, (code, reason)
    await stranger.close()
    await new.close()
    await old.close()


def _list_agents_status(url: str, token: str) -> int:
    """The HTTP status of one stateless MCP `list_agents` call with `token`."""
    r = httpx.post(
        f"{url}/mcp",
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-06-18",
        },
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_agents", "arguments": {}}},
        timeout=10,
    )
    return r.status_code


async def test_a_user_disabled_on_one_replica_is_refused_at_once_on_the_others(deployment):
    """Each replica caches token lookups for 10 s; disabling a user through one replica
    makes every replica forget them, so the user's token stops working everywhere at once."""
    d = deployment
    d.kenny.add_user("bob", "operator")
    token = d.kenny.create_token("bob")
    assert _list_agents_status(d.urls[1], token) == 200  # now cached on replica 1
    headers = {"Authorization": f"Bearer {d.kenny.admin_pat}"}
    users = httpx.get(f"{d.urls[0]}/api/users", headers=headers, timeout=10).json()["users"]
    bob = next(u for u in users if u["username"] == "bob")
    r = httpx.patch(f"{d.urls[0]}/api/users/{bob['id']}", json={"disabled": True}, headers=headers, timeout=10)
    assert r.status_code == 200, r.text
    started = time.monotonic()
    while _list_agents_status(d.urls[1], token) == 200:
        assert time.monotonic() - started < 3, "replica 1 still takes the disabled user's token (its 10 s cache)"
        await asyncio.sleep(0.05)


async def test_sign_in_works_on_any_replica_and_failures_count_on_all(deployment):
    """A dashboard session made through one replica works on the others (sessions are
    in the database, form tokens are cookies), and wrong passwords tried through one
    replica count on every replica: the sixth try within a minute is refused wherever
    it lands."""
    from signin_helpers import PASSWORD, _login

    d = deployment
    d.kenny.add_user("carol", "operator", password=PASSWORD)
    with httpx.Client(base_url=d.urls[0], follow_redirects=False, timeout=15) as first:
        signed_in = _login(first, "carol", PASSWORD)
        assert signed_in.status_code == 303, signed_in.text
        session = first.cookies
        me = httpx.get(f"{d.urls[1]}/api/me", cookies=session, timeout=10)
        assert me.status_code == 200 and me.json()["user"]["username"] == "carol", me.text
    for attempt in range(5):
        with httpx.Client(base_url=d.urls[attempt % 2], follow_redirects=False, timeout=15) as http:
            wrong = _login(http, "carol", "not the password")
            assert wrong.status_code != 303, f"a wrong password signed in: {wrong.status_code}"
    await asyncio.sleep(0.5)  # the counts travel between replicas
    with httpx.Client(base_url=d.urls[2], follow_redirects=False, timeout=15) as third:
        refused = _login(third, "carol", PASSWORD)
        assert refused.status_code == 429, (
            f"after five wrong passwords on replicas 0 and 1, replica 2 answered {refused.status_code}"
        )


async def test_one_replica_leads_and_another_takes_over_when_it_dies(deployment):
    d = deployment
    everyone = list(range(REPLICAS))
    leaders = d.leaders(everyone)
    assert len(leaders) == 1, f"replicas leading the background work: {leaders}"
    d.replicas[leaders[0]].send_signal(signal.SIGKILL)
    assert d.replicas[leaders[0]].wait(10) is not None
    rest = [i for i in everyone if i != leaders[0]]
    deadline = time.monotonic() + 15
    while not (now := d.leaders(rest)) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert len(now) == 1, f"after the leader died, replicas leading: {now}"


async def test_a_killed_replica_fails_only_its_own_calls_and_its_agents_come_back(deployment):
    d = deployment
    agents = {a: d.kenny.start_agent(a) for a in AGENTS}
    await _online_everywhere(d, AGENTS)
    victim = REPLICAS - 1
    on_victim = d.held(victim)
    assert on_victim >= 1, "the replica to kill holds no agent"
    marks = {a: agents[a].mark for a in AGENTS}
    survivors = d.urls[:victim]

    held_by_victim = d.agents_on(victim)
    assert len(held_by_victim) == on_victim, (held_by_victim, on_victim)
    others = [a for a in AGENTS if a not in held_by_victim]
    assert others, "every agent is on the replica to kill"

    async with d.kenny.mcp(base_url=survivors[0]) as c0, d.kenny.mcp(base_url=survivors[1]) as c1:
        clients = [c0, c1]
        killed_at: list[float] = []

        async def long_call(i: int, agent_id: str):
            res = await call(clients[i % 2], "shell_exec", {"agent_id": agent_id, "command": 'sleep 6; echo "$MARK"'})
            return agent_id, res, time.monotonic()

        # Short calls to the agents the survivors hold keep going throughout.
        async def steady(i: int) -> list:
            rng = random.Random(i)
            outs = []
            while not killed_at or time.monotonic() < killed_at[0] + 6:
                target = rng.choice(others)
                outs.append((target, await call(clients[i % 2], "shell_exec", {"agent_id": target, "command": 'echo "$MARK"'})))
                await asyncio.sleep(0.05)
            return outs

        # A call in flight on every agent, entering at the surviving replicas.
        inflight = [asyncio.create_task(long_call(i, a)) for i, a in enumerate(AGENTS)]
        background = [asyncio.create_task(steady(i)) for i in range(4)]
        await asyncio.sleep(1.5)
        killed_at.append(time.monotonic())
        d.replicas[victim].send_signal(signal.SIGKILL)
        assert d.replicas[victim].wait(10) is not None
        done = await asyncio.wait_for(asyncio.gather(*inflight), timeout=60)
        steady_calls = [c for outs in await asyncio.wait_for(asyncio.gather(*background), timeout=60) for c in outs]

    bad = [(t, r.text) for t, r in steady_calls if r.is_error or shell_stdout(r) != marks[t] + "\n"]
    assert not bad, f"{len(bad)} of {len(steady_calls)} calls to agents on the surviving replicas failed: {bad[:5]}"
    failed = [(a, res, at - killed_at[0]) for a, res, at in done if res.is_error]
    assert sorted(a for a, _, _ in failed) == sorted(held_by_victim), (failed, held_by_victim)
    succeeded = [(a, res) for a, res, _ in done if not res.is_error]
    assert len(failed) == on_victim, (
        f"{on_victim} agents were on the killed replica but {len(failed)} in-flight calls failed: "
        f"{[(a, r.text) for a, r, _ in failed]}"
    )
    for agent_id, res, after in failed:
        expect_error(res, "offline")
        print(f"in-flight call on {agent_id} failed offline {after:.2f}s after the kill")
        assert after < 5, f"the call on {agent_id} took {after:.1f}s to fail after its replica died"
    for agent_id, res in succeeded:
        assert shell_stdout(res) == marks[agent_id] + "\n", (agent_id, res)

    # The killed replica's agents are back, on the survivors, within their backoff.
    back_from = time.monotonic()
    await _online_everywhere(d, AGENTS, timeout=15, urls=survivors)
    print(f"every agent online again {time.monotonic() - back_from:.2f}s after the calls ended")
    assert sum(d.held(i) for i in range(victim)) == len(AGENTS)
    async with d.kenny.mcp(base_url=survivors[1]) as client:
        for a in AGENTS:
            assert await _echo_mark(client, a) == marks[a] + "\n"

    # Every call the survivors answered is in the audit trail, with its outcome.
    rows = dict(d.kenny.sql("SELECT outcome, COUNT(*) FROM audit WHERE tool = 'shell_exec' GROUP BY outcome"))
    assert rows.get("ok") == len(succeeded) + len(steady_calls) + len(AGENTS), rows
    assert rows.get("error") == on_victim, rows
    assert "sent" not in rows, rows
