"""End-to-end harness: a real kenny-server, real kenny-agents, real MCP clients.

Everything here starts real processes from the built binaries (``KENNY_BIN_DIR``, default
``<repo>/target/debug``) on ephemeral loopback ports, with data and state directories
under pytest's ``tmp_path``. Processes are only ever stopped by the PID we started them
with (plus, for agents, the PIDs of the command processes they spawned for us).

Main entry point: the ``kenny`` fixture, a :class:`Kenny` with a running server and a
superuser PAT (``kenny.admin_pat``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, NamedTuple

import anyio
import base64
import httpx
import httpx2
import pytest
import websockets
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

REPO = Path(__file__).resolve().parents[2]
BIN_DIR = Path(os.environ.get("KENNY_BIN_DIR") or REPO / "target" / "debug")
# Which store the servers under test keep their data in: the embedded SQLite file
# (default) or PostgreSQL (`KENNY_TEST_DATABASE=postgres`: one throwaway server for the
# session, a database per test).
DATABASE = os.environ.get("KENNY_TEST_DATABASE", "sqlite")
if DATABASE not in ("sqlite", "postgres"):
    raise SystemExit(f"KENNY_TEST_DATABASE must be sqlite or postgres, not {DATABASE!r}")
_POSTGRES = None


def _postgres():
    """The session's PostgreSQL, started on first use."""
    global _POSTGRES
    if _POSTGRES is None:
        from postgres_server import PostgresServer

        _POSTGRES = PostgresServer()
    return _POSTGRES


def pytest_sessionfinish(session, exitstatus):
    if _POSTGRES is not None:
        _POSTGRES.stop()


def sqlite_only(reason: str):
    """Marks a test that reads or writes the SQLite file itself."""
    return pytest.mark.skipif(DATABASE != "sqlite", reason=f"SQLite file only: {reason}")
SERVER_BIN = BIN_DIR / "kenny-server"
AGENT_BIN = BIN_DIR / "kenny-agent"

#: How MCP sessions negotiate: "auto" (server/discover probe, falling back to the
#: initialize handshake, as a current SDK client does), "legacy" or "2026-07-28".
MCP_MODE = os.environ.get("KENNY_MCP_MODE", "auto")

LISTEN_RE = re.compile(r"kenny-server listening on (https?://127\.0\.0\.1:(\d+))")
PAT_RE = re.compile(r"kenny_pat_[A-Za-z0-9_\-]+")

SERVER_START_TIMEOUT = 30.0
ADMIN_TIMEOUT = 30.0
ONLINE_TIMEOUT = 20.0
CALL_TIMEOUT = 60.0


# --------------------------------------------------------------------------- processes


LOOPBACK_PROBES = "gateway=127.0.0.1,dns=127.0.0.1"


def _child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test's environment minus any KENNY_* settings that could leak in, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KENNY_")}
    # An agent's net_quality pings the gateway and the DNS server; tests keep to loopback.
    env["KENNY_NET_QUALITY_TARGETS"] = LOOPBACK_PROBES
    env.setdefault("RUST_LOG", "info")
    env.setdefault("RUST_BACKTRACE", "1")
    if extra:
        env.update(extra)
    return env


def _descendants(pid: int) -> list[int]:
    """PIDs of all live descendants of `pid` (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def _tail(path: Path, limit: int = 6000) -> str:
    try:
        data = path.read_text(errors="replace")
    except OSError:
        return "<no log>"
    return data[-limit:] if len(data) > limit else data


@dataclass
class Proc:
    """A process we started, its logs on disk."""

    name: str
    popen: subprocess.Popen
    out_path: Path
    err_path: Path
    extra_pids: list[int] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def logs(self) -> str:
        return (
            f"--- {self.name} (pid {self.pid}, exit {self.popen.poll()}) stdout ---\n{_tail(self.out_path)}\n"
            f"--- {self.name} stderr ---\n{_tail(self.err_path)}\n"
        )

    def send_signal(self, sig: int) -> None:
        if self.alive():
            os.kill(self.pid, sig)

    def wait(self, timeout: float) -> int | None:
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, sig: int = signal.SIGTERM, grace: float = 10.0) -> None:
        """Signal, wait up to `grace`, then SIGKILL. Also reaps spawned command processes."""
        kids = _descendants(self.pid) if self.alive() else []
        if self.alive():
            self.send_signal(sig)
            if self.wait(grace) is None:
                self.send_signal(signal.SIGKILL)
                self.wait(10)
        for pid in kids + self.extra_pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.extra_pids.clear()

    def kill9(self) -> None:
        """SIGKILL now (the kernel closes its sockets); command processes it spawned are
        killed right after, so the kill looks like a crashed agent, not a finished command."""
        kids = _descendants(self.pid)
        self.send_signal(signal.SIGKILL)
        self.wait(10)
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


@dataclass
class Agent:
    agent_id: str
    mark: str
    proc: Proc
    state_dir: Path
    creds: dict[str, Any]
    legacy: bool


# --------------------------------------------------------------------------- MCP results


class ToolResult(NamedTuple):
    is_error: bool
    structured: Any
    text: str


async def call(client: Client, tool: str, args: dict[str, Any] | None = None, timeout: float = CALL_TIMEOUT) -> ToolResult:
    """Call an MCP tool; returns (is_error, structuredContent, concatenated text)."""
    with anyio.fail_after(timeout):
        result = await client.call_tool(tool, args if args is not None else {}, read_timeout_seconds=timeout)
    text = "".join(getattr(block, "text", "") for block in result.content if getattr(block, "type", None) == "text")
    return ToolResult(bool(result.is_error), result.structured_content, text)


def expect_ok(res: ToolResult) -> Any:
    assert not res.is_error, f"expected success, got error: text={res.text!r} structured={res.structured!r}"
    return res.structured


def expect_error(res: ToolResult, code: str) -> str:
    """Assert the documented error shape and code; return the message."""
    assert res.is_error, f"expected error {code!r}, got success: structured={res.structured!r} text={res.text!r}"
    sc = res.structured
    assert isinstance(sc, dict) and isinstance(sc.get("error"), dict), (
        f"structuredContent must be {{'error': {{'code','message'}}}}, got {sc!r} (text {res.text!r})"
    )
    err = sc["error"]
    assert err.get("code") == code, f"expected code {code!r}, got {err!r} (text {res.text!r})"
    msg = err.get("message")
    assert isinstance(msg, str) and msg.strip(), f"error message must be a non-empty string: {err!r}"
    assert res.text == f"{code}: {msg}", f"text must be '<code>: <message>': got {res.text!r}, structured {err!r}"
    return msg


def shell_stdout(res: ToolResult) -> str:
    sc = expect_ok(res)
    assert isinstance(sc, dict), f"shell_exec structuredContent not an object: {sc!r}"
    missing = {"stdout", "stderr", "exit_code", "truncated"} - set(sc)
    assert not missing, f"shell_exec structuredContent lacks {missing}: {sc!r}"
    assert sc["exit_code"] == 0, f"command failed: {sc!r}"
    return sc["stdout"]


# --------------------------------------------------------------------------- fake agent


class FakeAgent:
    """A hand-driven agent speaking the legacy (token) wire path over a real WebSocket."""

    def __init__(self, ws_url: str, agent_id: str, token: str, meta: dict[str, Any] | None = None):
        self.ws_url = ws_url
        self.agent_id = agent_id
        self.token = token
        self.meta = meta or {"hostname": "fake-host", "os": "linux", "version": "0.0.1", "arch": "x86_64", "dialect": "2"}
        self.ws: Any = None
        self.requests: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.other_frames: list[Any] = []
        self.pings = 0
        self.answer_pings = True
        self.closed: asyncio.Future[tuple[int | None, str]] | None = None
        self._reader: asyncio.Task | None = None

    async def open(self) -> None:
        self.ws = await asyncio.wait_for(
            websockets.connect(self.ws_url, max_size=None, open_timeout=10, close_timeout=2, ping_interval=None),
            timeout=15,
        )
        self.closed = asyncio.get_running_loop().create_future()

    async def send_json(self, frame: Any) -> None:
        await self.ws.send(json.dumps(frame))

    async def register(self) -> None:
        await self.open()
        await self.send_json({"type": "register", "agent_id": self.agent_id, "token": self.token, "meta": self.meta})
        self.start_reader()

    def start_reader(self) -> None:
        self._reader = asyncio.create_task(self._read_loop())

    async def _read_loop(self) -> None:
        assert self.closed is not None
        try:
            async for raw in self.ws:
                try:
                    frame = json.loads(raw)
                except (TypeError, ValueError):
                    self.other_frames.append(raw)
                    continue
                if isinstance(frame, dict) and frame.get("type") == "ping":
                    self.pings += 1
                    if self.answer_pings:
                        await self.send_json({"type": "pong"})
                elif isinstance(frame, dict) and frame.get("type") == "request":
                    await self.requests.put(frame)
                else:
                    self.other_frames.append(frame)
        except websockets.ConnectionClosed:
            pass
        finally:
            if not self.closed.done():
                self.closed.set_result(self.close_info())

    def close_info(self) -> tuple[int | None, str]:
        rcvd = getattr(self.ws, "close_code", None)
        return rcvd, getattr(self.ws, "close_reason", "") or ""

    async def wait_closed(self, timeout: float) -> tuple[int | None, str]:
        """Read until the server closes the connection; returns (close code, reason)."""
        if self._reader is None:
            self.start_reader()
        assert self.closed is not None
        return await asyncio.wait_for(asyncio.shield(self.closed), timeout)

    async def next_request(self, timeout: float = 10.0, pending: asyncio.Task | None = None) -> dict[str, Any]:
        """The next `request` frame. With `pending` (the MCP call expected to produce it),
        fail at once, with that call's outcome, if the call finishes without one."""
        getter = asyncio.ensure_future(self.requests.get())
        waiting = {getter} | ({pending} if pending is not None else set())
        done, _ = await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if getter in done:
            return getter.result()
        getter.cancel()
        if pending is not None and pending in done:
            raise AssertionError(f"the MCP call finished without reaching the agent: {pending.result()!r}")
        raise AssertionError(f"no request frame reached agent {self.agent_id!r} within {timeout}s")

    async def respond(self, request_id: str, ok: bool = True, result: Any = None, error: dict | None = None) -> None:
        frame: dict[str, Any] = {"type": "response", "id": request_id, "ok": ok}
        if result is not None:
            frame["result"] = result
        if error is not None:
            frame["error"] = error
        await self.send_json(frame)

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            try:
                await self._reader
            except (asyncio.CancelledError, Exception):
                pass
        if self.ws is not None:
            try:
                await asyncio.wait_for(self.ws.close(), 5)
            except Exception:
                pass


class KeyedFakeAgent(FakeAgent):
    """A hand-driven agent that holds an Ed25519 key and logs in with mutual auth (it
    checks the server's signature, then signs the transcript), as a real agent does.
    `enroll` registers its key with the enrollment token first."""

    def __init__(
        self,
        ws_url: str,
        agent_id: str,
        enroll_token: str,
        server_pubkey: str,
        meta: dict[str, Any] | None = None,
        key: Ed25519PrivateKey | None = None,
        protocol: str = "0.8",
    ):
        super().__init__(ws_url, agent_id, enroll_token, meta)
        self.key = key or Ed25519PrivateKey.generate()
        self.protocol = protocol
        self.server_key = Ed25519PublicKey.from_public_bytes(base64.b64decode(server_pubkey))

    @property
    def public_key_b64(self) -> str:
        return base64.b64encode(self.key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).decode()

    async def enroll(self, base_url: str) -> None:
        async with httpx.AsyncClient(timeout=10) as http:
            r = await http.post(
                f"{base_url}/api/agents/{self.agent_id}/enroll",
                headers={"Authorization": f"Bearer {self.token}"},
                json={"public_key": self.public_key_b64},
            )
        assert r.status_code in (200, 204), f"enroll -> {r.status_code} {r.text!r}"

    async def register(self) -> None:
        await self.open()
        client_nonce = os.urandom(32)
        await self.send_json(
            {
                "type": "register",
                "agent_id": self.agent_id,
                "protocol": self.protocol,
                "client_nonce": base64.b64encode(client_nonce).decode(),
                "meta": self.meta,
            }
        )
        try:
            raw = await asyncio.wait_for(self.ws.recv(), 10)
        except websockets.ConnectionClosed:
            # Refused before the challenge: let wait_closed report the code and reason.
            self.start_reader()
            return
        challenge = json.loads(raw)
        assert challenge.get("type") == "challenge", f"expected a challenge, got {challenge!r}"
        server_nonce = base64.b64decode(challenge["server_nonce"])
        transcript = b"kenny-mutual-auth-v1\0" + self.agent_id.encode() + b"\0" + client_nonce + b"\0" + server_nonce
        self.server_key.verify(base64.b64decode(challenge["server_sig"]), transcript)
        signature = base64.b64encode(self.key.sign(transcript)).decode()
        await self.send_json({"type": "auth", "agent_sig": signature})
        self.start_reader()


# --------------------------------------------------------------------------- harness


class Kenny:
    """One kenny deployment under test: a server (restartable), its admin CLI, agents."""

    def __init__(self, root: Path):
        if not SERVER_BIN.exists() or not AGENT_BIN.exists():
            pytest.fail(
                f"kenny binaries not found in {BIN_DIR} (build with `cargo build` or set KENNY_BIN_DIR)",
                pytrace=False,
            )
        self.root = root
        self.data_dir = root / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir = root / "logs"
        self.log_dir.mkdir(exist_ok=True)
        self.server: Proc | None = None
        self.server_env: dict[str, str] = {}
        self.port: int | None = None
        self.base_url: str | None = None
        self.all_procs: list[Proc] = []
        self.agents: dict[str, Agent] = {}
        self.admin_pat: str | None = None
        self._seq = 0
        # With KENNY_TEST_DATABASE=postgres: this deployment's own database.
        self.database_url = _postgres().new_database() if DATABASE == "postgres" else None

    def sql(self, query: str, params: tuple = ()) -> list[tuple]:
        """Runs one statement (`?` parameters) on this deployment's database, whichever
        backend it is on, committing it; the rows it returns. For tests that set up or
        look at what the server stored."""
        if self.database_url is None:
            import sqlite3

            with sqlite3.connect(self.data_dir / "kenny.db", timeout=30) as db:
                return db.execute(query, params).fetchall()
        return _postgres().run(self.database_url, query, params)

    def store_env(self) -> dict[str, str]:
        """What every kenny-server process of this deployment needs to find its data."""
        return {"KENNY_DATABASE_URL": self.database_url} if self.database_url else {}

    # -- urls

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}/mcp"

    @property
    def ws_url(self) -> str:
        assert self.base_url
        return self.base_url.replace("http://", "ws://", 1) + "/agent/ws"

    # -- processes

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Proc:
        self._seq += 1
        out_path = self.log_dir / f"{self._seq:02d}-{name}.out"
        err_path = self.log_dir / f"{self._seq:02d}-{name}.err"
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            popen = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=_child_env(env), cwd=self.root
            )
        proc = Proc(name, popen, out_path, err_path)
        self.all_procs.append(proc)
        return proc

    def start_server(
        self,
        port: int = 0,
        heartbeat_secs: int | None = None,
        bind_retry_secs: float = 10.0,
        via_env: bool = False,
        extra_args: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        """Start `kenny-server serve`; wait for its listening line. With a fixed `port`
        (restart), retry while the port is still being released. `via_env` passes the
        listen address and data dir as KENNY_LISTEN / KENNY_DATA_DIR instead of flags.
        `env` adds environment variables, remembered for later restarts."""
        if env is not None:
            self.server_env = dict(env)
        assert self.server is None or not self.server.alive(), "server already running"
        deadline = time.monotonic() + bind_retry_secs
        while True:
            env = {**self.store_env(), **self.server_env}
            if via_env:
                argv = [str(SERVER_BIN), "serve"]
                env.update({"KENNY_LISTEN": f"127.0.0.1:{port}", "KENNY_DATA_DIR": str(self.data_dir)})
            else:
                argv = [str(SERVER_BIN), "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(self.data_dir)]
            if heartbeat_secs is not None:
                argv += ["--heartbeat-secs", str(heartbeat_secs)]
            argv += extra_args or []
            proc = self._spawn("server", argv, env=env)
            try:
                url, got_port = self._await_listening(proc)
                break
            except _EarlyExit as e:
                in_use = "in use" in _tail(proc.err_path).lower()
                if port and in_use and time.monotonic() < deadline:
                    time.sleep(0.3)
                    continue
                raise AssertionError(f"kenny-server exited before listening\n{proc.logs()}") from e
        if port:
            assert got_port == port, f"asked for port {port}, server says {got_port}"
        self.server, self.port, self.base_url = proc, got_port, url
        with httpx.Client(timeout=5) as http:
            r = http.get(f"{url}/healthz")
            assert r.status_code == 200, f"GET /healthz -> {r.status_code} {r.text!r}"

    def _await_listening(self, proc: Proc) -> tuple[str, int]:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while time.monotonic() < deadline:
            m = LISTEN_RE.search(proc.out_path.read_text(errors="replace"))
            if m:
                return m.group(1), int(m.group(2))
            if not proc.alive():
                raise _EarlyExit()
            time.sleep(0.05)
        proc.stop(signal.SIGKILL)
        raise AssertionError(f"no 'kenny-server listening on http://127.0.0.1:PORT' line within {SERVER_START_TIMEOUT}s\n{proc.logs()}")

    def kill_server(self) -> None:
        assert self.server is not None
        self.server.send_signal(signal.SIGKILL)
        assert self.server.wait(10) is not None, "server did not die on SIGKILL"

    def stop_server(self) -> None:
        if self.server is not None:
            self.server.stop(signal.SIGTERM)

    # -- admin CLI

    def admin(self, *args: str, input: str | None = None) -> str:
        argv = [str(SERVER_BIN), *args, "--data-dir", str(self.data_dir)]
        try:
            cp = subprocess.run(
                argv, input=input, capture_output=True, text=True, timeout=ADMIN_TIMEOUT, env=_child_env(self.store_env()), cwd=self.root
            )
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"admin command hung: {argv}") from e
        assert cp.returncode == 0, f"{' '.join(args)} -> exit {cp.returncode}\nstdout: {cp.stdout}\nstderr: {cp.stderr}"
        return cp.stdout

    def add_user(self, name: str, role: str, hosts: list[str] | None = None, password: str = "some-password-123") -> None:
        args = ["user", "add", name, "--role", role]
        if hosts:
            args += ["--hosts", ",".join(hosts)]
        self.admin(*args, input=password + "\n")

    def create_token(self, user: str, label: str | None = None) -> str:
        args = ["token", "create", user]
        if label:
            args += ["--label", label]
        out = self.admin(*args)
        m = PAT_RE.search(out)
        assert m, f"token create printed no kenny_pat_ token: {out!r}"
        return m.group(0)

    def add_agent(self, agent_id: str) -> dict[str, Any]:
        out = self.admin("agent", "add", agent_id)
        try:
            creds = json.loads(out.strip())
        except ValueError:
            line = next((ln for ln in out.splitlines() if ln.strip().startswith("{")), None)
            assert line, f"agent add printed no JSON object: {out!r}"
            creds = json.loads(line)
        for key in ("agent_id", "token", "server_pubkey"):
            assert key in creds, f"agent add JSON lacks {key!r}: {creds!r}"
        assert creds["agent_id"] == agent_id
        return creds

    def bootstrap_admin(self) -> None:
        self.add_user("admin", "superuser")
        self.admin_pat = self.create_token("admin", label="e2e")

    # -- agents

    def start_agent(
        self,
        agent_id: str,
        *,
        legacy: bool = False,
        env: dict[str, str] | None = None,
        creds: dict[str, Any] | None = None,
        enroll: bool = True,
        wrap: list[str] | None = None,
    ) -> Agent:
        """`agent add` (unless creds given) then `kenny-agent run`. Each agent gets a
        distinct MARK env var so a command's output proves where it ran. With
        `enroll=False` a mutual-auth agent gets no enrollment token: it must rely on the
        key already enrolled from its state dir. `wrap` goes before the agent's command
        line (a command that sets up the agent's surroundings, then execs the rest)."""
        assert self.base_url
        creds = creds or self.add_agent(agent_id)
        state_dir = self.root / "agents" / agent_id
        state_dir.mkdir(parents=True, exist_ok=True)
        mark = f"{agent_id}-{secrets.token_hex(6)}"
        argv = [
            str(AGENT_BIN), "run",
            "--server", self.base_url,
            "--agent-id", agent_id,
            "--state-dir", str(state_dir),
            "--max-backoff-secs", "1",
        ]
        if legacy:
            argv += ["--token", creds["token"]]
        else:
            argv += ["--server-pubkey", creds["server_pubkey"]]
            if enroll:
                argv += ["--enroll-token", creds["token"]]
        proc = self._spawn(f"agent-{agent_id}", [*(wrap or []), *argv], env={"MARK": mark, **(env or {})})
        agent = Agent(agent_id, mark, proc, state_dir, creds, legacy)
        self.agents[agent_id] = agent
        return agent

    # -- MCP

    @asynccontextmanager
    async def mcp(
        self, token: str | None = None, mode: str | None = None, base_url: str | None = None, elicitation_callback: Any = None
    ) -> AsyncIterator[Client]:
        """An SDK MCP client session on /mcp with `Authorization: Bearer <token>`; on
        `base_url` (one replica of a cluster, say) instead of the server's own. With
        `elicitation_callback` the client declares elicitation and answers with it."""
        token = token or self.admin_pat
        headers = {"Authorization": f"Bearer {token}"}
        timeout = httpx2.Timeout(30.0, read=CALL_TIMEOUT + 30)
        async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
            url = f"{base_url}/mcp" if base_url else self.mcp_url
            transport = streamable_http_client(url, http_client=http)
            # The handshake is bounded by the SDK's own timeouts (discover probe 10 s,
            # initialize read_timeout_seconds); a cancel scope must not wrap __aenter__,
            # whose task groups outlive it.
            async with Client(
                transport,
                mode=mode or MCP_MODE,
                read_timeout_seconds=CALL_TIMEOUT,
                cache=None,
                elicitation_callback=elicitation_callback,
            ) as client:
                yield client

    async def list_agents(self, client: Client) -> dict[str, dict[str, Any]]:
        sc = expect_ok(await call(client, "list_agents", {}))
        assert isinstance(sc, dict) and isinstance(sc.get("agents"), list), f"list_agents shape: {sc!r}"
        return {a["agent_id"]: a for a in sc["agents"]}

    async def wait_agents(
        self, ids: list[str], online: bool = True, token: str | None = None, timeout: float = ONLINE_TIMEOUT
    ) -> dict[str, dict[str, Any]]:
        """Poll list_agents until every id in `ids` reports `online`; bounded."""
        deadline = time.monotonic() + timeout
        async with self.mcp(token) as client:
            while True:
                agents = await self.list_agents(client)
                if all(agents.get(i, {}).get("online") is online for i in ids):
                    return agents
                dead = [a for a in ids if online and a in self.agents and not self.agents[a].proc.alive()]
                if dead or time.monotonic() > deadline:
                    logs = "\n".join(self.agents[a].proc.logs() for a in ids if a in self.agents)
                    raise AssertionError(
                        f"agents {ids} not online={online} within {timeout}s (dead: {dead}); last list_agents: {agents}\n{logs}"
                    )
                await asyncio.sleep(0.2)

    async def start_agents(self, ids: list[str], **kw: Any) -> dict[str, Agent]:
        agents = {i: self.start_agent(i, **kw) for i in ids}
        await self.wait_agents(ids)
        return agents

    # -- HTTP API

    def audit(self, agent_id: str | None = None, limit: int | None = None, token: str | None = None) -> list[dict]:
        params: dict[str, Any] = {}
        if agent_id is not None:
            params["agent_id"] = agent_id
        if limit is not None:
            params["limit"] = limit
        with httpx.Client(timeout=10) as http:
            r = http.get(
                f"{self.base_url}/api/audit", params=params, headers={"Authorization": f"Bearer {token or self.admin_pat}"}
            )
        assert r.status_code == 200, f"GET /api/audit -> {r.status_code} {r.text!r}"
        body = r.json()
        assert isinstance(body, dict) and isinstance(body.get("entries"), list), f"audit shape: {body!r}"
        return body["entries"]

    # -- cleanup / diagnostics

    def logs(self) -> str:
        return "\n".join(p.logs() for p in self.all_procs)

    def close(self) -> None:
        # Agents first (so they do not spin reconnecting), then the server.
        for proc in reversed(self.all_procs):
            if proc is not self.server:
                try:
                    proc.stop(signal.SIGTERM, grace=5)
                except Exception:
                    pass
        for proc in self.all_procs:
            try:
                proc.stop(signal.SIGTERM, grace=10)
            except Exception:
                pass
        if self.database_url is not None:
            _postgres().drop_database(self.database_url)
            self.database_url = None


class _EarlyExit(Exception):
    pass


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def kenny(tmp_path: Path, request: pytest.FixtureRequest):
    k = Kenny(tmp_path)
    request.node._kenny = k
    try:
        k.start_server()
        k.bootstrap_admin()
        yield k
    finally:
        k.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    k = getattr(item, "_kenny", None)
    if k is not None and report.failed:
        report.sections.append(("kenny process logs", k.logs()))
    return report


def unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


# --------------------------------------------------------------------------- private network and display


@pytest.fixture
def netns():
    name = f"kenny-e2e-{secrets.token_hex(4)}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "add", "kd0", "type", "veth", "peer", "name", "kd1"], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


@pytest.fixture
def xvfb():
    xvfb_bin = shutil.which("Xvfb")
    assert xvfb_bin, "Xvfb is needed (scripts/test installs Debian's xvfb)"
    number = next(n for n in range(140, 400) if not os.path.exists(f"/tmp/.X11-unix/X{n}") and not os.path.exists(f"/tmp/.X{n}-lock"))
    # -retro draws the classic root weave, so the picture is not one flat colour.
    proc = subprocess.Popen(
        [xvfb_bin, f":{number}", "-screen", "0", "1920x1080x24", "-nolisten", "tcp", "-retro"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while not os.path.exists(f"/tmp/.X11-unix/X{number}"):
            assert proc.poll() is None, "Xvfb exited early"
            assert time.monotonic() < deadline, "Xvfb did not start"
            time.sleep(0.05)
        yield f":{number}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
