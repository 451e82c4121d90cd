"""`/metrics`, `/healthz` and `/readyz` on the real server: the calls counted by tool and
outcome equal the calls made through the MCP SDK (forwarded, refused at the edge, and the
server's own tools), the connected agents are counted, and `/metrics` answers only
loopback callers unless a token is set (checked over a non-loopback address of this
machine when it has one)."""

from __future__ import annotations

import json
import re

import httpx

from conftest import call, expect_error, expect_ok


def _metrics(base_url: str, token: str | None = None) -> str:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    r = httpx.get(f"{base_url}/metrics", headers=headers, timeout=10)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/openmetrics-text")
    return r.text


def _value(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^([a-z_]+)(\{[^}]*\})? (\S+)", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if got == labels:
            return float(m.group(3))
    return 0.0


async def test_call_counts_equal_the_calls_made(kenny, tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n")
    await kenny.start_agents(["pc-a"], env={"KENNY_HOSTS_FILE": str(hosts)})
    assert httpx.get(f"{kenny.base_url}/healthz").text == "ok"
    assert httpx.get(f"{kenny.base_url}/readyz").status_code == 200
    before = _metrics(kenny.base_url)
    async with kenny.mcp() as client:
        for _ in range(7):
            expect_ok(await call(client, "webfilter_status", {"agent_id": "pc-a"}))
        for _ in range(3):
            expect_error(await call(client, "webfilter_status", {}), "no_agent")
        for _ in range(2):
            expect_ok(await call(client, "list_agents", {}))
        expect_error(await call(client, "webfilter_status", {"agent_id": "pc-nowhere"}), "unknown_agent")
    after = _metrics(kenny.base_url)

    def made(tool, outcome):
        return _value(after, "kenny_calls_total", tool=tool, outcome=outcome) - _value(
            before, "kenny_calls_total", tool=tool, outcome=outcome
        )

    assert made("webfilter_status", "ok") == 7, after
    assert made("webfilter_status", "refused") == 4, after
    assert made("list_agents", "ok") >= 2  # the SDK helper may list agents too
    assert _value(after, "kenny_call_duration_seconds_count", tool="webfilter_status") >= 7
    assert _value(after, "kenny_agents_connected") == 1
    assert _value(after, "kenny_agents_known") == 1
    # The version and build, and what the database counts (read at scrape time: the
    # labelled lines exist only when that read worked).
    assert re.search(r'^kenny_build_info\{version="\d+\.\d+\.\d+",build="[\w.+-]+"\} 1$', after, re.M), after
    assert re.search(r'^kenny_chat_tokens_today\{kind="input"\} 0$', after, re.M), after
    assert re.search(r"^kenny_chat_turns_today 0$", after, re.M), after


def test_logs_are_json_lines_when_asked(kenny):
    kenny.stop_server()
    kenny.start_server(env={"KENNY_LOG_FORMAT": "json"})
    httpx.get(f"{kenny.base_url}/healthz")
    lines = [ln for ln in kenny.server.err_path.read_text().splitlines() if ln.strip()]
    assert lines, "the server logged nothing"
    events = [json.loads(ln) for ln in lines]
    assert all({"timestamp", "level", "message", "target"} <= e.keys() for e in events), events
    assert any("retention" in e["message"] for e in events), events
