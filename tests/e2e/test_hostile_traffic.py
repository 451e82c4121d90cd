"""The server under hostile traffic: slow and idle HTTP clients, too many connections,
agent connections that never authenticate or send too much first, and an
authenticated agent flooding logs and telemetry. Each test names the hole it pins."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
import time

import httpx
import pytest
import websockets

from conftest import SERVER_BIN, FakeAgent, _child_env, call, shell_stdout


async def _raw(kenny):
    return await asyncio.wait_for(asyncio.open_connection("127.0.0.1", kenny.port), 10)


async def _closed_by_server(reader: asyncio.StreamReader, timeout: float) -> bytes:
    """Everything the server sends until it closes the connection (bounded)."""
    got = b""
    async def drain():
        nonlocal got
        while True:
            try:
                chunk = await reader.read(65536)
            except (ConnectionResetError, BrokenPipeError):
                return
            if not chunk:
                return
            got += chunk
    await asyncio.wait_for(drain(), timeout)
    return got


def _server_sockets_open_to(server_port: int, client_ports: set[int]) -> list[int]:
    """Client ports whose connection the server side still has open (ESTABLISHED in
    /proc/net/tcp); a socket the server closed shows FIN_WAIT1 or later, or is gone."""
    found = []
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].split(":")[1], 16)
        remote_port = int(fields[2].split(":")[1], 16)
        if local_port == server_port and remote_port in client_ports and fields[3] == "01":
            found.append(remote_port)
    return found


def _server_log(kenny) -> str:
    return kenny.server.err_path.read_text(errors="replace")


async def test_a_client_sending_headers_byte_by_byte_is_cut_off(kenny):
    """Regression (slowloris): the server had no deadline for a request's headers, so
    a client trickling them a byte at a time held its connection for ever."""
    kenny.stop_server()
    kenny.start_server(extra_args=["--http-header-timeout-secs", "2"])
    reader, writer = await _raw(kenny)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    stop = asyncio.Event()

    async def trickle():
        try:
            while not stop.is_set():
                writer.write(b"a")
                await writer.drain()
                await asyncio.sleep(0.2)
        except (ConnectionResetError, BrokenPipeError):
            pass

    trickling = asyncio.create_task(trickle())
    try:
        got = await _closed_by_server(reader, timeout=20)
    finally:
        stop.set()
        await trickling
        writer.close()
    assert b"200 OK" not in got, f"the trickled request was served: {got!r}"
    assert trickling.done()
    # The server itself is fine.
    async with httpx.AsyncClient(timeout=10) as http:
        assert (await http.get(f"{kenny.base_url}/healthz")).status_code == 200


async def test_a_request_body_sent_byte_by_byte_is_cut_off(kenny):
    """Regression (slow body): once its headers were in, a request could take for ever
    to send its body, holding its connection meanwhile. Now the body has three header
    timeouts to arrive (6 s here); this one would need minutes."""
    kenny.stop_server()
    kenny.start_server(extra_args=["--http-header-timeout-secs", "2"])
    reader, writer = await _raw(kenny)
    writer.write(
        b"POST /api/agents/pc/enroll HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer kenny_agt_x\r\n"
        b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
    )
    sent = {"bytes": 1}
    stop = asyncio.Event()

    async def trickle():
        try:
            while not stop.is_set() and sent["bytes"] < 1000:
                writer.write(b" ")
                await writer.drain()
                sent["bytes"] += 1
                await asyncio.sleep(0.2)
        except (ConnectionResetError, BrokenPipeError):
            pass

    trickling = asyncio.create_task(trickle())
    try:
        got = await _closed_by_server(reader, timeout=30)
    finally:
        stop.set()
        await trickling
        writer.close()
    assert sent["bytes"] < 1000, "the whole body went through"
    assert got.startswith(b"HTTP/1.1 400"), got[:300]
    assert b"did not arrive within 6s" in got, got


async def test_silent_and_idle_keep_alive_connections_are_closed(kenny):
    """Regression: a connection that sent nothing, or went quiet after a response
    (keep-alive), stayed open for ever and held its socket."""
    kenny.stop_server()
    kenny.start_server(extra_args=["--http-header-timeout-secs", "2"])
    silent_r, silent_w = await _raw(kenny)
    idle_r, idle_w = await _raw(kenny)
    idle_w.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    head = await asyncio.wait_for(idle_r.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 200"), head
    assert b"connection: close" not in head.lower(), "kept alive, as HTTP/1.1 does"
    body = await asyncio.wait_for(idle_r.readexactly(2), 10)
    assert body == b"ok"
    try:
        assert await _closed_by_server(idle_r, timeout=20) == b"", "closed without another response"
        assert await _closed_by_server(silent_r, timeout=20) == b""
    finally:
        idle_w.close()
        silent_w.close()


async def test_shutdown_does_not_wait_for_idle_clients(kenny):
    """Regression: stopping the server waited for every open connection to end, so one
    client that connected and said nothing kept SIGTERM from ever finishing."""
    reader, writer = await _raw(kenny)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a")
    await writer.drain()
    silent_r, silent_w = await _raw(kenny)
    try:
        kenny.server.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(kenny.server.wait, 20)
        assert code is not None, "the server was still running 20 s after SIGTERM"
    finally:
        writer.close()
        silent_w.close()


async def test_connections_over_the_cap_are_refused_at_once(kenny):
    """Regression: there was no cap on open connections, so a client could open
    sockets until the process ran out of file descriptors. Over the cap a connection
    is closed at once (no queue to wait in); one freed slot lets the next one in."""
    kenny.stop_server()
    kenny.start_server(extra_args=["--max-connections", "16", "--http-header-timeout-secs", "60"])
    held = []
    try:
        # Sixteen keep-alive connections, each served once: each holds a slot.
        for _ in range(16):
            reader, writer = await _raw(kenny)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            assert head.startswith(b"HTTP/1.1 200"), head
            await reader.readexactly(2)
            held.append((reader, writer))
        reader, writer = await _raw(kenny)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert await _closed_by_server(reader, timeout=10) == b"", "the seventeenth was served"
        writer.close()
        deadline = time.monotonic() + 10
        while "connections refused" not in _server_log(kenny):
            assert time.monotonic() < deadline, "no warning about refused connections"
            await asyncio.sleep(0.1)
        _, first = held.pop(0)
        first.close()
        # Freeing one slot lets a new client in (bounded wait: the server notices the close).
        await _until_a_new_client_is_served(kenny, time.monotonic() + 10, "a freed slot did not let a new connection in")
    finally:
        for _, w in held:
            w.close()


async def _until_a_new_client_is_served(kenny, deadline: float, why: str) -> None:
    """Retries `/healthz` on new connections until one is answered, failing with `why`
    at `deadline` (a `time.monotonic()` value)."""
    while True:
        try:
            async with httpx.AsyncClient(timeout=5) as http:
                if (await http.get(f"{kenny.base_url}/healthz")).status_code == 200:
                    return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, why
        await asyncio.sleep(0.1)


async def test_a_client_that_never_reads_a_large_response_loses_its_slot(kenny):
    """Regression: writes had no deadline, so a client that asked for something large
    (an agent build, on a route that needs no sign-in) and never read it kept its
    connection, and its slot under --max-connections, for ever."""
    releases = kenny.data_dir / "agent-releases"
    releases.mkdir(exist_ok=True)
    build = releases / "kenny-agent-0.0.1-linux-x86_64"
    with build.open("wb") as f:
        f.truncate(256 * 1024 * 1024)  # sparse: far more than any socket buffers hold
    kenny.stop_server()
    kenny.start_server(extra_args=["--max-connections", "16", "--http-header-timeout-secs", "1"])
    held = []
    try:
        # Every slot: a download started and then never read.
        for _ in range(16):
            reader, writer = await _raw(kenny)
            writer.write(f"GET /d/agent/{build.name} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            assert head.startswith(b"HTTP/1.1 200"), head
            writer.transport.pause_reading()  # and never read again
            held.append((reader, writer))
        # Every slot is taken by a reader that stopped; the server must take them back.
        deadline = time.monotonic() + 90
        await _until_a_new_client_is_served(kenny, deadline, "the stalled readers still hold every slot")
        # Every one of them is closed on the server's side (the kernel still holds what
        # was written, but no socket of the server's is open for it), not only the one
        # whose slot let the probe in.
        ports = {w.get_extra_info("sockname")[1] for _, w in held}
        while open_ones := _server_sockets_open_to(kenny.port, ports):
            assert time.monotonic() < deadline, f"still open on the server: {open_ones}"
            await asyncio.sleep(0.2)
        # Reading again now gets what was buffered, then the end: well short of the build.
        reader, writer = held[0]
        writer.transport.resume_reading()
        got = await _closed_by_server(reader, timeout=60)
        assert len(got) < build.stat().st_size, len(got)
    finally:
        for _, w in held:
            w.close()


async def test_an_agent_connection_that_never_registers_is_closed_at_the_deadline(kenny):
    kenny.stop_server()
    kenny.start_server(extra_args=["--agent-handshake-timeout-secs", "2"])
    silent = FakeAgent(kenny.ws_url, "nobody", "unused")
    await silent.open()
    try:
        code, reason = await silent.wait_closed(timeout=20)
        assert code == 4400 and "not completed within 2s" in reason, (code, reason)
    finally:
        await silent.close()


async def _ws_upgrade(kenny):
    reader, writer = await _raw(kenny)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        (
            f"GET /agent/ws HTTP/1.1\r\nHost: 127.0.0.1:{kenny.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 101"), head
    return reader, writer


def _close_frame(data: bytes) -> tuple[int, str]:
    assert len(data) >= 4 and data[0] == 0x88, f"expected a close frame, got {data[:40]!r}"
    n = data[1] & 0x7F
    payload = data[2 : 2 + n]
    return int.from_bytes(payload[:2], "big"), payload[2:].decode(errors="replace")


async def test_a_big_frame_before_authenticating_is_cut_off_without_waiting_for_it(kenny):
    """Regression: until authenticated a connection could send an 8 MiB frame (the
    limit for authenticated agents) and the server buffered all of it before looking;
    one that announced a big frame and sent it slowly held the buffer until the
    deadline. Now the server reads at most a few small frames' worth before the agent
    has proved anything, and says why it closes."""
    reader, writer = await _ws_upgrade(kenny)
    # A masked text frame announcing 4 MiB; 100 KiB of it sent, then nothing.
    mask = os.urandom(4)
    header = bytes([0x81, 0x80 | 127]) + (4 * 1024 * 1024).to_bytes(8, "big") + mask
    payload = bytes(b ^ mask[i % 4] for i, b in enumerate(b"A" * (100 * 1024)))
    writer.write(header + payload)
    try:
        got = await _closed_by_server(reader, timeout=30)
    finally:
        writer.close()
    code, reason = _close_frame(got)
    assert code == 4400 and "before authenticating" in reason, (code, reason)


async def test_slow_unauthenticated_clients_do_not_keep_a_real_agent_out(kenny):
    """Regression: at most 64 connections could be in their handshake and the rest
    queued for a slot, so a client opening many silent tunnels made a real agent wait
    until the silent ones' deadlines passed. Now nothing queues: the agent is online
    while every silent connection is still open (none has reached its deadline; a long
    one here, so a slow machine cannot close them first)."""
    kenny.stop_server()
    kenny.start_server(extra_args=["--agent-handshake-timeout-secs", "60"])
    silent = [FakeAgent(kenny.ws_url, f"silent-{i}", "unused") for i in range(80)]
    await asyncio.gather(*(s.open() for s in silent))
    for s in silent:
        s.start_reader()
    try:
        await kenny.start_agents(["real-pc"])
        closed = [s.agent_id for s in silent if s.closed.done()]
        assert not closed, f"the agent got in only after silent connections were closed: {closed[:5]}..."
        async with kenny.mcp() as client:
            out = shell_stdout(await call(client, "shell_exec", {"agent_id": "real-pc", "command": "echo $MARK"}))
        assert out == kenny.agents["real-pc"].mark + "\n"
    finally:
        await asyncio.gather(*(s.close() for s in silent))


def _telemetry_rows(kenny, agent_id: str) -> list[str]:
    return [r[0] for r in kenny.sql("SELECT snapshot FROM telemetry WHERE agent_id = ?", (agent_id,))]


async def test_log_and_telemetry_floods_are_bounded_and_calls_still_answered(kenny):
    """Regression: every log frame an agent pushed became a line of the server's log
    and every dropped telemetry frame a warning, without limit, and snapshots of any
    size were stored. A hostile PC could fill the disk. Now: log lines at a rate, one
    warning per minute about the rest, snapshots bounded in rate and size, and the
    connection's calls keep being answered through the flood."""
    creds = kenny.add_agent("noisy")
    fake = FakeAgent(kenny.ws_url, "noisy", creds["token"])
    await fake.register()
    await kenny.wait_agents(["noisy"])
    started = time.monotonic()
    huge = {"disk": {"status": "ok", "summary": "HUGE-MARKER" + "x" * (600 * 1024)}}
    await fake.send_json({"type": "telemetry", "agent_id": "noisy", "collected_at": "2026-11-30T00:00:00Z", "snapshot": huge})
    stop = asyncio.Event()
    sent = {"log": 0, "telemetry": 0}

    async def flood():
        while not stop.is_set() and sent["log"] < 20000:
            for _ in range(50):
                await fake.send_json(
                    {"type": "log", "agent_id": "noisy", "at": "2026-11-30T00:00:00Z", "level": "info", "target": "flood",
                     "message": f"line {sent['log']}\nFORGED 2026-11-30 INFO kenny_server: fake"}
                )
                sent["log"] += 1
            await fake.send_json(
                {"type": "telemetry", "agent_id": "noisy", "collected_at": "2026-11-30T00:00:00Z",
                 "snapshot": {"disk": {"status": "ok", "summary": "small"}}}
            )
            sent["telemetry"] += 1
            await asyncio.sleep(0)

    flooding = asyncio.create_task(flood())
    try:
        async with kenny.mcp() as client:
            for i in range(3):
                pending = asyncio.create_task(call(client, "shell_exec", {"agent_id": "noisy", "command": f"during-{i}"}))
                req = await fake.next_request(timeout=20, pending=pending)
                await fake.respond(req["id"], result={"stdout": f"answered {i}\n", "stderr": "", "exit_code": 0, "truncated": False})
                assert shell_stdout(await asyncio.wait_for(pending, 20)) == f"answered {i}\n"
    finally:
        stop.set()
        await flooding
    # The small snapshots that passed reach the store (the writer is asynchronous).
    deadline = time.monotonic() + 10
    while not _telemetry_rows(kenny, "noisy"):
        assert time.monotonic() < deadline, "no telemetry stored at all"
        await asyncio.sleep(0.1)
    _, res = await asyncio.wait_for(_answer_one(kenny, fake), 30)
    elapsed = time.monotonic() - started
    log = _server_log(kenny)
    lines = log.count("agent log:")
    assert sent["log"] >= 1000, sent
    assert lines <= 100 + 10 * (elapsed + 1), f"{lines} agent log lines for {sent['log']} sent in {elapsed:.1f}s"
    assert log.count("agent log lines dropped") <= 1 + elapsed / 60 + 1, "one warning per minute"
    assert log.count("telemetry dropped") <= 2 + 2 * (elapsed / 60 + 1), "one warning per minute"
    assert "FORGED" not in log.replace("\\nFORGED", ""), "an agent's newline started a line of the server's log"
    rows = _telemetry_rows(kenny, "noisy")
    assert 1 <= len(rows) <= 1 + elapsed / 10 + 1, f"{len(rows)} snapshots stored of {sent['telemetry']} sent"
    assert not any("HUGE-MARKER" in r for r in rows), "a snapshot over the size limit was stored"
    await fake.close()


async def _answer_one(kenny, fake: FakeAgent):
    """One more call after the flood, answered: the connection is still healthy."""
    async with kenny.mcp() as client:
        pending = asyncio.create_task(call(client, "shell_exec", {"agent_id": fake.agent_id, "command": "after"}))
        req = await fake.next_request(timeout=20, pending=pending)
        await fake.respond(req["id"], result={"stdout": "after\n", "stderr": "", "exit_code": 0, "truncated": False})
        res = await asyncio.wait_for(pending, 20)
    assert shell_stdout(res) == "after\n"
    return req, res


@pytest.mark.parametrize("flag, value", [("--max-connections", "8"), ("--http-header-timeout-secs", "0"), ("--agent-handshake-timeout-secs", "soon")])
def test_bad_limits_are_refused_with_a_clear_error(kenny, flag, value):
    """A limit out of range stops the server before it listens, naming the flag."""
    kenny.stop_server()
    cp = subprocess.run(
        [str(SERVER_BIN), "serve", "--listen", "127.0.0.1:0", "--data-dir", str(kenny.data_dir), flag, value],
        capture_output=True, text=True, timeout=30, env=_child_env(),
    )
    assert cp.returncode != 0 and flag in cp.stderr, cp.stderr
    assert "listening" not in cp.stdout
