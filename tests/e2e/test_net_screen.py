"""Network probes and changes, and screenshots, on a real Linux agent through /mcp.
The adapter reset acts inside a private network namespace (KENNY_NETNS), so the
test never touches this machine's own interfaces; the screenshot comes from a
private Xvfb display."""

from __future__ import annotations

import base64
import io
import json
import socket
import subprocess

import png

from conftest import call, expect_error, expect_ok


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_network_probes(kenny):
    await kenny.start_agents(["pc-a"])
    async with kenny.mcp() as client:
        ping = expect_ok(await call(client, "net_ping", {"agent_id": "pc-a", "host": "127.0.0.1", "count": 2, "wait_s": 1}))
        assert ping["reachable"] is True and ping["received"] == 2 and ping["sent"] == 2, ping
        assert ping["method"] in ("icmp", "tcp_connect"), ping
        assert ping["rtt_ms"]["min"] <= ping["rtt_ms"]["avg"] <= ping["rtt_ms"]["max"], ping

        dns = expect_ok(await call(client, "net_dns_lookup", {"agent_id": "pc-a", "host": "localhost"}))
        assert dns["resolved"] is True and ("127.0.0.1" in dns["addresses"] or "::1" in dns["addresses"]), dns
        missing = expect_ok(await call(client, "net_dns_lookup", {"agent_id": "pc-a", "host": "kenny-no-such-name.invalid"}))
        assert missing["resolved"] is False and "kenny-no-such-name.invalid" in missing["error"], missing

        open_port = expect_ok(await call(client, "net_port_check", {"agent_id": "pc-a", "host": "127.0.0.1", "port": kenny.port}))
        assert open_port["status"] == "open" and open_port["connect_ms"] >= 0, open_port
        closed = expect_ok(await call(client, "net_port_check", {"agent_id": "pc-a", "host": "127.0.0.1", "port": _free_port()}))
        assert closed["status"] == "refused", closed

        config = expect_ok(await call(client, "net_config", {"agent_id": "pc-a"}))
        assert any(i["name"] == "lo" for i in config["interfaces"]), config
        # The same facts as the OS's own tools give.
        with open("/etc/resolv.conf") as f:
            nameservers = [line.split()[1] for line in f if line.startswith("nameserver") and len(line.split()) > 1]
        if not any(ns.startswith("127.0.0.5") for ns in nameservers):  # systemd-resolved's stub is followed
            assert config["dns_servers"] == list(dict.fromkeys(nameservers)), config
        routes = json.loads(subprocess.run(["ip", "-j", "route", "show", "default"], capture_output=True, text=True, check=True).stdout)
        gateways = [r["gateway"] for r in routes if "gateway" in r]
        assert config["default_gateway"] == (gateways[0] if gateways else None), (config, routes)

        for bad in ({"host": "-f"}, {"host": "a;id"}):
            expect_error(await call(client, "net_ping", {"agent_id": "pc-a", **bad}), "bad_args")
        expect_error(await call(client, "net_port_check", {"agent_id": "pc-a", "host": "127.0.0.1", "port": 70000}), "bad_args")


async def test_dns_flush_and_adapter_reset_in_a_private_namespace(kenny, netns):
    kenny.start_agent("pc-a", env={"KENNY_NETNS": netns})
    await kenny.wait_agents(["pc-a"])
    async with kenny.mcp() as client:
        flush = expect_ok(await call(client, "net_dns_flush", {"agent_id": "pc-a"}))
        # This machine runs neither systemd-resolved nor nscd: the answer must say so.
        if flush["flushed"]:
            assert flush["cache"] in ("systemd-resolved", "nscd"), flush
        else:
            assert flush["cache"] is None and "no local DNS cache" in flush["note"], flush

        reset = expect_ok(await call(client, "net_adapter_reset", {"agent_id": "pc-a", "adapter": "kd0"}))
        assert reset["reset"] is True and reset["is_up"] is True and reset["was_up"] is False, reset
        shown = subprocess.run(["ip", "-n", netns, "-j", "link", "show", "dev", "kd0"], capture_output=True, text=True, check=True)
        assert '"UP"' in shown.stdout, shown.stdout

        msg = expect_error(await call(client, "net_adapter_reset", {"agent_id": "pc-a", "adapter": "kd9"}), "not_found")
        assert "net_config" in msg, msg
        expect_error(await call(client, "net_adapter_reset", {"agent_id": "pc-a", "adapter": "lo"}), "bad_args")
        expect_error(await call(client, "net_adapter_reset", {"agent_id": "pc-a", "adapter": "../eth0"}), "bad_args")


async def test_screen_capture_under_xvfb(kenny, xvfb):
    kenny.start_agent("pc-a", env={"DISPLAY": xvfb})
    await kenny.wait_agents(["pc-a"])
    async with kenny.mcp() as client:
        for args, widest in (({}, 1280), ({"max_width": 640}, 640)):
            result = await client.call_tool("screen_capture", {"agent_id": "pc-a", **args})
            assert not result.is_error, result
            images = [b for b in result.content if b.type == "image"]
            assert len(images) == 1 and images[0].mime_type == "image/png", result.content
            raw = base64.b64decode(images[0].data, validate=True)
            width, height, rows, info = png.Reader(file=io.BytesIO(raw)).read()
            rows = [bytes(r) for r in rows]
            meta = result.structured_content
            assert (width, height) == (meta["width"], meta["height"]), meta
            assert (meta["source_width"], meta["source_height"]) == (1920, 1080), meta
            assert width <= widest and height == width * 1080 // 1920, (width, height)
            assert "data_base64" not in meta, "the picture must travel once, as image content"
            # What an MCP client receives stays well under 150,000 characters.
            total = len(result.model_dump_json(by_alias=True))
            assert total < 150_000, total
            assert len(set(rows)) > 1 or len(set(rows[0])) > 3, "the weave pattern should not be one flat colour"

        # A named display that does not exist: a clear failure, not a hang.
        msg = expect_error(await call(client, "screen_capture", {"agent_id": "pc-a", "display": ":399"}), "exec_failed")
        assert "cannot open X display :399" in msg, msg
