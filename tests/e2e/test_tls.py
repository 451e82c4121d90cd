"""Agents reach a server behind TLS (the recommended deployment: a TLS-terminating
proxy in front of kenny-server): enrollment over https://, the tunnel over wss://,
with the server certificate checked against the trust store (SSL_CERT_FILE here)."""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
import time
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from conftest import SERVER_BIN, call, shell_stdout


def _test_pki(tmp: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a leaf certificate for localhost/127.0.0.1 signed by it.
    Returns (ca cert, leaf cert, leaf key)."""
    ca_key, ca, key, csr, cert, ext = (tmp / n for n in ("ca.key", "ca.pem", "key.pem", "leaf.csr", "cert.pem", "leaf.ext"))
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True, timeout=30)  # noqa: E731
    run("req", "-x509", *ec, "-keyout", str(ca_key), "-out", str(ca), "-days", "1", "-subj", "/CN=kenny test CA")
    run("req", *ec, "-keyout", str(key), "-out", str(csr), "-subj", "/CN=localhost")
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
        "-out", str(cert), "-days", "1", "-extfile", str(ext))
    return ca, cert, key


async def _tls_proxy(cert: Path, key: Path, backend_port: int) -> asyncio.Server:
    """TLS on 127.0.0.1:0, plain TCP to the kenny server: a minimal terminating proxy."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection("127.0.0.1", backend_port)
        await asyncio.gather(pipe(client_r, server_w), pipe(server_r, client_w))

    return await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)


@asynccontextmanager
async def _agent_behind_tls(kenny, tmp_path: Path, agent_id: str, trust_ca: bool):
    """Starts `agent_id` against a TLS proxy in front of the kenny server; yields it."""
    ca, cert, key = _test_pki(tmp_path)
    proxy = await _tls_proxy(cert, key, kenny.port)
    port = proxy.sockets[0].getsockname()[1]
    plain_base = kenny.base_url
    try:
        kenny.base_url = f"https://localhost:{port}"
        agent = kenny.start_agent(agent_id, env={"SSL_CERT_FILE": str(ca)} if trust_ca else None)
        kenny.base_url = plain_base
        yield agent
    finally:
        kenny.base_url = plain_base
        proxy.close()
        await proxy.wait_closed()


async def test_agent_over_tls(kenny, tmp_path):
    async with _agent_behind_tls(kenny, tmp_path, "tls-pc", trust_ca=True) as agent:
        await kenny.wait_agents(["tls-pc"])
        async with kenny.mcp() as client:
            out = shell_stdout(await call(client, "shell_exec", {"agent_id": "tls-pc", "command": "echo $MARK"}))
        assert out == agent.mark + "\n"


async def test_agent_rejects_an_untrusted_certificate(kenny, tmp_path):
    # The system trust store does not know the test CA.
    async with _agent_behind_tls(kenny, tmp_path, "tls-untrusted", trust_ca=False) as agent:
        deadline = asyncio.get_running_loop().time() + 10
        while "certificate" not in agent.proc.logs().lower():
            assert asyncio.get_running_loop().time() < deadline, f"no certificate error logged\n{agent.proc.logs()}"
            await asyncio.sleep(0.2)
        async with kenny.mcp() as client:
            assert (await kenny.list_agents(client))["tls-untrusted"]["online"] is False


def _leaf(tmp: Path, ca: Path, name: str) -> tuple[Path, Path]:
    """Another leaf certificate from the CA `_test_pki` made (its key is beside `ca`)."""
    key, csr, cert = tmp / f"{name}.key", tmp / f"{name}.csr", tmp / f"{name}.pem"
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True, timeout=30)  # noqa: E731
    run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key),
        "-out", str(csr), "-subj", f"/CN=localhost {name}")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca.with_name("ca.key")), "-CAcreateserial",
        "-out", str(cert), "-days", "1", "-extfile", str(tmp / "leaf.ext"))
    return cert, key


def _served_certificate(port: int, ca: Path) -> str:
    """The subject of the certificate a new TLS connection to the server is shown."""
    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        return dict(x[0] for x in tls.getpeercert()["subject"])["commonName"]


async def test_builtin_tls_serves_agents_and_clients_and_picks_up_a_renewed_certificate(kenny, tmp_path, monkeypatch):
    ca, cert, key = _test_pki(tmp_path)
    live_cert, live_key = tmp_path / "live-cert.pem", tmp_path / "live-key.pem"
    shutil.copy(cert, live_cert)
    shutil.copy(key, live_key)
    # This test process (MCP SDK, httpx) and the agents it starts trust the test CA.
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    kenny.stop_server()
    kenny.start_server(extra_args=["--tls-cert", str(live_cert), "--tls-key", str(live_key), "--tls-reload-secs", "1"])
    assert kenny.base_url.startswith("https://127.0.0.1:"), kenny.base_url
    assert _served_certificate(kenny.port, ca) == "localhost"

    agent = kenny.start_agent("tls-builtin")
    await kenny.wait_agents(["tls-builtin"])
    async with kenny.mcp() as client:
        out = shell_stdout(await call(client, "shell_exec", {"agent_id": "tls-builtin", "command": "echo $MARK"}))
    assert out == agent.mark + "\n"
    # Plain HTTP on the TLS port gets no answer kenny would give.
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{kenny.port}/healthz", timeout=5)

    # A renewed certificate is served to new connections without a restart; the agent's
    # tunnel and the server stay up.
    renewed_cert, renewed_key = _leaf(tmp_path, ca, "renewed")
    shutil.copy(renewed_key, live_key)
    shutil.copy(renewed_cert, live_cert)
    deadline = time.monotonic() + 15
    while _served_certificate(kenny.port, ca) != "localhost renewed":
        assert time.monotonic() < deadline, kenny.logs()
        await asyncio.sleep(0.3)
    assert "TLS certificate reloaded" in kenny.server.logs()

    # A broken file is reported and the renewed certificate stays in use.
    live_cert.write_text("-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n")
    deadline = time.monotonic() + 15
    while "TLS certificate not reloaded" not in kenny.server.logs():
        assert time.monotonic() < deadline, kenny.logs()
        await asyncio.sleep(0.3)
    assert _served_certificate(kenny.port, ca) == "localhost renewed"
    async with kenny.mcp() as client:
        out = shell_stdout(await call(client, "shell_exec", {"agent_id": "tls-builtin", "command": "echo still"}))
    assert out == "still\n"


def test_the_server_does_not_start_with_unusable_certificate_files(tmp_path):
    ca, cert, key = _test_pki(tmp_path)
    base = [str(SERVER_BIN), "serve", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "data")]
    for args, said in (
        (["--tls-cert", str(tmp_path / "missing.pem"), "--tls-key", str(key)], "cannot read the TLS certificate file"),
        (["--tls-cert", str(key), "--tls-key", str(key)], "holds no PEM certificate"),
        (["--tls-cert", str(cert), "--tls-key", str(cert)], "holds no PEM private key"),
        (["--tls-cert", str(cert), "--tls-key", str(ca.with_name("ca.key"))], "do not make a usable pair"),
        (["--tls-cert", str(cert)], "--tls-key"),
    ):
        res = subprocess.run([*base, *args], capture_output=True, text=True, timeout=30)
        assert res.returncode != 0 and said in res.stderr, (args, res.stderr)


pytestmark = pytest.mark.skipif(subprocess.run(["which", "openssl"], capture_output=True).returncode != 0, reason="openssl CLI needed to make a test certificate")
