"""Update campaigns: one release pinned to a set of PCs, rolled out by the server as PCs
come online, at most `max_parallel` at a time, each PC tracked; paused, resumed and
cancelled through the API; a PC that rolls back twice is held.

Real agents, each from its own copy of the binary. The failing PC is not given a broken
build: its connection to the server goes through a loopback proxy the test runs, which
stops letting it in once its tunnel closes for the restart, so the new build's trial
never logs in and the agent rolls back by itself.
"""

from __future__ import annotations

import asyncio
import platform
import shutil
import socket
import threading
import time

import httpx
import pytest

from conftest import AGENT_BIN

ARCH = platform.machine()
TRIAL_SECS = 5


class GateProxy:
    """A TCP proxy on loopback in front of the server, in a thread of its own (the test's
    blocking HTTP calls must not stall it). Modes: `pass`; `trip` (pass, but once an agent
    tunnel, a connection that starts `GET /agent/ws`, closes, switch to `refuse`);
    `refuse` (every new connection is closed at once)."""

    def __init__(self, upstream_port: int):
        self.upstream_port = upstream_port
        self.mode = "pass"
        self.refused = 0
        self.loop = asyncio.new_event_loop()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self._sock = sock
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._ready.wait(5), "proxy did not start"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def main():
            self._stop = asyncio.Event()
            self._handlers: set[asyncio.Task] = set()
            server = await asyncio.start_server(self._track, sock=self._sock)
            self._ready.set()
            await self._stop.wait()
            server.close()
            for task in self._handlers:
                task.cancel()
            await asyncio.gather(*self._handlers, return_exceptions=True)

        self.loop.run_until_complete(main())
        self.loop.close()

    async def _track(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._handlers.add(task)
        try:
            await self._handle(reader, writer)
        except asyncio.CancelledError:
            writer.close()
        finally:
            self._handlers.discard(task)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode == "refuse":
            self.refused += 1
            writer.close()
            return
        try:
            head = await asyncio.wait_for(reader.read(65536), 10)
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except (OSError, asyncio.TimeoutError):
            writer.close()
            return
        tunnel = head.startswith(b"GET /agent/ws")
        up_writer.write(head)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except OSError:
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer), return_exceptions=True)
        if tunnel and self.mode == "trip":
            self.mode = "refuse"

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


def _start_copy(kenny, tmp_path, agent_id: str, server_url: str):
    bin_dir = tmp_path / f"bin-{agent_id}"
    bin_dir.mkdir()
    binary = bin_dir / "kenny-agent"
    shutil.copy2(AGENT_BIN, binary)
    creds = kenny.add_agent(agent_id)
    state = tmp_path / f"state-{agent_id}"
    proc = kenny._spawn(
        f"agent-{agent_id}",
        [str(binary), "run", "--server", server_url, "--agent-id", agent_id, "--state-dir", str(state),
         "--server-pubkey", creds["server_pubkey"], "--enroll-token", creds["token"], "--max-backoff-secs", "1",
         "--update-trial-secs", str(TRIAL_SECS)],
    )
    return binary, proc


def _release(kenny, version: str, content: bytes):
    releases = kenny.data_dir / "agent-releases"
    releases.mkdir(exist_ok=True)
    path = releases / f"kenny-agent-{version}-linux-{ARCH}"
    path.write_bytes(content)
    path.chmod(0o755)
    return path


def _http(kenny, token: str | None = None) -> httpx.Client:
    return httpx.Client(base_url=kenny.base_url, headers={"Authorization": f"Bearer {token or kenny.admin_pat}"}, timeout=30)


def _campaign(kenny, cid: int) -> dict:
    with _http(kenny) as http:
        r = http.get(f"/api/campaigns/{cid}")
    assert r.status_code == 200, r.text
    return r.json()


def _pcs(campaign: dict) -> dict[str, dict]:
    return {p["agent_id"]: p for p in campaign["agents"]}


async def _until(what: str, check, timeout: float = 60.0, kenny=None):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        await asyncio.sleep(0.1)


def _stamp(path):
    """Tells one copy of a file from the next (the agent removes `.failed` and copies it
    anew, which may get the freed inode back)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def _campaign_audit(kenny, agent_id: str) -> list[dict]:
    return [e for e in kenny.audit(agent_id=agent_id) if e["tool"] == "agent_update"]


async def test_bad_campaigns_are_refused_and_a_paused_one_starts_nothing(kenny, tmp_path):
    kenny.add_user("olga", "operator")
    kenny.add_user("uma", "user", hosts=["pc-p"])
    olga, uma = kenny.create_token("olga"), kenny.create_token("uma")
    kenny.add_agent("pc-p")
    creds_q = kenny.add_agent("pc-q")  # comes online later
    with _http(kenny) as http:
        # No build of the version yet: refused, and saying where to put one.
        r = http.post("/api/campaigns", json={"version": "0.1.1", "all": True})
        assert r.status_code == 400 and "agent-releases" in r.json()["error"]["message"], r.text
        _release(kenny, "0.1.1", AGENT_BIN.read_bytes() + b"\0kenny-test-build-0.1.1")
        for body, words in [
            ({"version": "latest", "all": True}, "1.2.3"),
            ({"version": "0.1.1"}, "exactly one"),
            ({"version": "0.1.1", "all": True, "agents": ["pc-p"]}, "exactly one"),
            ({"version": "0.1.1", "agents": ["pc-p", "pc-nope"]}, '"pc-nope"'),
            ({"version": "0.1.1", "channel": "nightly"}, "stable or beta"),
            ({"version": "0.1.1", "channel": "beta"}, "PUT /api/agents/<id>/channel"),
            ({"version": "0.1.1", "all": True, "max_parallel": 0}, "1 to 50"),
            ({"version": "0.1.1", "all": True, "max_parallel": 51}, "1 to 50"),
            ({"version": "0.1.1", "all": True, "rate": 3}, "unknown field"),
        ]:
            r = http.post("/api/campaigns", json=body)
            assert r.status_code == 400 and words in r.json()["error"]["message"], (body, r.text)
        r = http.put("/api/agents/pc-q/channel", json={"channel": "nightly"})
        assert r.status_code == 400 and "stable or beta" in r.text, r.text
        assert http.get("/api/campaigns").json() == {"campaigns": []}, "nothing stored"

    # Who may do what: operators read and set channels, only superusers run campaigns,
    # a `user` does neither.
    with _http(kenny, olga) as http:
        r = http.post("/api/campaigns", json={"version": "0.1.1", "all": True})
        assert r.status_code == 403 and "superuser" in r.text, r.text
        r = http.put("/api/agents/pc-q/channel", json={"channel": "beta"})
        assert r.status_code == 200 and r.json()["channel"] == "beta", r.text
        assert http.get("/api/campaigns").status_code == 200
    with _http(kenny, uma) as http:
        assert http.get("/api/campaigns").status_code == 403
        assert http.put("/api/agents/pc-p/channel", json={"channel": "beta"}).status_code == 403
        assert http.post("/api/campaigns", json={"version": "0.1.1", "all": True}).status_code == 403
    with _http(kenny) as http:
        listed = {a["agent_id"]: a["channel"] for a in http.get("/api/agents").json()["agents"]}
        assert listed == {"pc-p": "stable", "pc-q": "beta"}, listed

        # The beta channel is pc-q alone, offline: nothing starts; pause it.
        r = http.post("/api/campaigns", json={"version": "0.1.1", "channel": "beta"})
        assert r.status_code == 201, r.text
        beta = r.json()
        assert beta["target"] == "channel:beta" and [p["agent_id"] for p in beta["agents"]] == ["pc-q"], beta
        r = http.post(f"/api/campaigns/{beta['id']}/pause")
        assert r.status_code == 200 and r.json()["state"] == "paused", r.text
        assert http.post(f"/api/campaigns/{beta['id']}/pause").status_code == 409

    # pc-q comes online while its campaign is paused: nothing starts.
    creds_dir = tmp_path / "bin-pc-q"
    creds_dir.mkdir()
    q_binary = creds_dir / "kenny-agent"
    shutil.copy2(AGENT_BIN, q_binary)
    creds = creds_q
    kenny._spawn(
        "agent-pc-q",
        [str(q_binary), "run", "--server", kenny.base_url, "--agent-id", "pc-q", "--state-dir", str(tmp_path / "state-pc-q"),
         "--server-pubkey", creds["server_pubkey"], "--enroll-token", creds["token"], "--max-backoff-secs", "1",
         "--update-trial-secs", str(TRIAL_SECS)],
    )
    await kenny.wait_agents(["pc-q"])
    await asyncio.sleep(4)
    assert _pcs(_campaign(kenny, beta["id"]))["pc-q"]["status"] == "pending"
    assert _campaign_audit(kenny, "pc-q") == [], "a paused campaign started an update"
    with _http(kenny) as http:
        r = http.post(f"/api/campaigns/{beta['id']}/cancel")
        assert r.status_code == 200, r.text
    done = _campaign(kenny, beta["id"])
    assert done["state"] == "cancelled" and _pcs(done)["pc-q"]["status"] == "skipped", done
    with _http(kenny) as http:
        r = http.post(f"/api/campaigns/{beta['id']}/resume")
        assert r.status_code == 409 and "cancelled" in r.text, r.text
        assert http.post("/api/campaigns/999/pause").status_code == 404
    assert q_binary.read_bytes() == AGENT_BIN.read_bytes()
    # Every change was audited under the route and the caller.
    actions = {e["tool"] for e in kenny.audit() if e.get("user") in ("admin", "olga")}
    for action in ("POST /api/campaigns", "POST /api/campaigns/{id}/{action}", "PUT /api/agents/{id}/channel"):
        assert action in actions, actions


@pytest.mark.timeout(360)
async def test_a_campaign_updates_three_agents_and_holds_the_one_that_rolls_back_twice(kenny, tmp_path):
    proxy = GateProxy(kenny.port)
    try:
        a_bin, _ = _start_copy(kenny, tmp_path, "pc-a", kenny.base_url)
        b_bin, _ = _start_copy(kenny, tmp_path, "pc-b", kenny.base_url)
        c_bin, c_proc = _start_copy(kenny, tmp_path, "pc-c", proxy.url)
        await kenny.wait_agents(["pc-a", "pc-b", "pc-c"])
        original = a_bin.read_bytes()
        build = original + b"\0kenny-test-build-0.1.1"
        _release(kenny, "0.1.1", build)
        # pc-c's tunnel will close when it restarts into the new build; from then on the
        # proxy lets nothing in, so the build's trial cannot log in.
        proxy.mode = "trip"
        with _http(kenny) as http:
            r = http.post("/api/campaigns", json={"version": "0.1.1", "all": True, "max_parallel": 1})
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        assert {p["status"] for p in r.json()["agents"]} <= {"pending", "updating"}

        # Pause as soon as the first PC is done: nothing new starts while paused.
        await _until("pc-a done", lambda: _pcs(_campaign(kenny, cid))["pc-a"]["status"] == "done", 90)
        with _http(kenny) as http:
            assert http.post(f"/api/campaigns/{cid}/pause").status_code == 200
        at_pause = {a: p["attempts"] for a, p in _pcs(_campaign(kenny, cid)).items()}
        await asyncio.sleep(4)
        paused = _campaign(kenny, cid)
        assert paused["state"] == "paused"
        assert {a: p["attempts"] for a, p in _pcs(paused).items()} == at_pause, "a paused campaign started an update"
        with _http(kenny) as http:
            assert http.post(f"/api/campaigns/{cid}/resume").json()["state"] == "running"

        # pc-c: two rollbacks, each caused by the proxy and ended by letting it in again.
        failed = c_bin.with_suffix(".failed")
        for round_ in (1, 2):
            seen = _stamp(failed)
            await _until(
                f"pc-c rollback {round_}: {_pcs(_campaign(kenny, cid))['pc-c']}",
                lambda: _stamp(failed) not in (None, seen) and c_bin.read_bytes() == original,
                120,
            )
            assert proxy.mode == "refuse" and proxy.refused > 0
            # The previous build is back; let it reach the server to report.
            proxy.mode = "trip" if round_ == 1 else "pass"
            want = "rolled_back" if round_ == 1 else "held"
            await _until(
                f"pc-c {want}", lambda: _pcs(_campaign(kenny, cid))["pc-c"]["status"] in (want, "updating"), 60
            )
            pc = _pcs(_campaign(kenny, cid))["pc-c"]
            assert pc["rollbacks"] == round_ or pc["status"] == "updating", pc

        final = await _until(
            "campaign finished",
            lambda: (c := _campaign(kenny, cid))["state"] == "finished" and c,
            60,
        )
        pcs = _pcs(final)
        assert pcs["pc-a"]["status"] == "done" and pcs["pc-b"]["status"] == "done", pcs
        held = pcs["pc-c"]
        assert (held["status"], held["rollbacks"], held["attempts"]) == ("held", 2, 2), held
        assert "did not log in" in held["detail"] and "held" in held["detail"], held
        # The two others run the new build, the held one its original.
        assert a_bin.read_bytes() == build and b_bin.read_bytes() == build
        assert c_bin.read_bytes() == original
        assert c_proc.alive()
        await kenny.wait_agents(["pc-a", "pc-b", "pc-c"])
        # Each update is audited under the server, naming the campaign.
        rows = _campaign_audit(kenny, "pc-c")
        assert len(rows) == 2 and all(r["user"] == "kenny" and f"update campaign {cid}" in r["credential_id"] for r in rows), rows
        with _http(kenny) as http:
            updates = http.get("/api/agents/pc-c/updates").json()["updates"]
        assert [u["outcome"] for u in updates] == ["rolled_back", "rolled_back"], updates
        # A held PC is never tried again by this campaign.
        await asyncio.sleep(3)
        assert len(_campaign_audit(kenny, "pc-c")) == 2
    finally:
        proxy.close()
