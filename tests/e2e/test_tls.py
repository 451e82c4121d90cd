"""Agents reach a server behind TLS (the recommended deployment: a TLS-terminating
proxy in front of kenny-server): enrollment over https://, the tunnel over wss://,
with the server certificate checked against the trust store (SSL_CERT_FILE here)."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from conftest import call, shell_stdout


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


pytestmark = pytest.mark.skipif(subprocess.run(["which", "openssl"], capture_output=True).returncode != 0, reason="openssl CLI needed to make a test certificate")
