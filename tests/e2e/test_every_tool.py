"""Every forwarded tool in the MCP list, called on a real Linux agent through /mcp,
answers: with real data, or with an error whose code says what happened (Windows-only
tools say `unsupported` and why). Then, with remote control switched off on the PC,
every state-changing tool answers `disabled` and every read-only one still works.
Whatever would touch this machine acts on private stand-ins: a temporary hosts file,
a private network namespace, a private X display, a temporary syslog file."""

from __future__ import annotations

import asyncio
import platform
import subprocess

import pytest

from conftest import AGENT_BIN, call, expect_error, expect_ok

NO_SUCH_PACKAGE = "kenny-no-such-package-xyz"
# Answered by the server from what it stores; test_health.py covers them in depth.
SERVER_TOOLS = (
    "list_agents", "select_agent", "fleet_overview", "agent_health", "agent_snapshot", "agent_changes",
    "alert_silence_set", "alert_silence_list", "alert_silence_clear",
    "webfilter_get", "webfilter_set", "webfilter_push", "web_activity_query", "fleet_run",
    "approval_status",
)


def _cases(kenny, tmp_path) -> dict[str, tuple[dict, str]]:
    """tool -> (arguments, expected outcome: "ok" or an error code)."""
    (tmp_path / "file.txt").write_text("hello\n")
    return {
        "shell_exec": ({"command": "true"}, "ok"),
        "powershell_exec": ({"script": "Get-Date"}, "unsupported"),
        "fs_list": ({"path": str(tmp_path)}, "ok"),
        "fs_read": ({"path": str(tmp_path / "file.txt"), "max_bytes": 3}, "ok"),
        "fs_search": ({"path": str(tmp_path), "pattern": "file"}, "ok"),
        "fs_disk_usage": ({}, "ok"),
        "diag_processes": ({"limit": 3}, "ok"),
        "diag_services": ({"limit": 5}, "ok"),
        "diag_eventlog": ({"limit": 5, "since": "30d"}, "ok"),
        "diag_autostart": ({}, "ok"),
        "net_config": ({}, "ok"),
        "net_dns_flush": ({}, "ok"),
        "net_adapter_reset": ({"adapter": "kd0"}, "ok"),
        "net_ping": ({"host": "127.0.0.1", "count": 1, "wait_s": 1}, "ok"),
        "net_dns_lookup": ({"host": "localhost"}, "ok"),
        "net_port_check": ({"host": "127.0.0.1", "port": kenny.port}, "ok"),
        "screen_capture": ({"max_width": 320}, "ok"),
        "winget_list": ({"query": "bash", "limit": 5}, "ok"),
        "winget_install": ({"id": "--reinstall"}, "bad_args"),
        "winget_uninstall": ({"id": NO_SUCH_PACKAGE}, "not_found"),
        "winget_update": ({}, "bad_args"),
        "webfilter_status": ({}, "ok"),
        "webfilter_apply": ({"domains": ["blocked.example"]}, "ok"),
        "webfilter_clear": ({}, "ok"),
        "remotehelp_status": ({}, "unsupported"),
        "remotehelp_start": ({}, "unsupported"),
        "remotehelp_stop": ({}, "unsupported"),
        "telemetry_collect": ({"sections": ["memory"]}, "ok"),
        # No build on this server to offer (test_agent_update.py does real updates).
        "agent_update": ({}, "not_found"),
        # Nothing here may change this machine's accounts: each case is refused before
        # anything runs (test_accounts.py changes them for real in a private /etc).
        "account_create": ({"name": "-bad-name", "password": "unused-1"}, "bad_args"),
        "account_delete": ({"principal": "root"}, "blocked"),
        "account_set_enabled": ({"principal": "daemon", "enabled": False}, "blocked"),
        "account_set_admin": ({"principal": "root", "admin": False}, "blocked"),
        "account_set_logon_rights": ({"principal": "kenny-no-such-account", "deny": ["network"]}, "not_found"),
        "account_session_action": ({"principal": "kenny-no-such-account", "action": "lock"}, "not_found"),
        "password_policy_set": ({}, "bad_args"),
    }


def _start(kenny, tmp_path, netns, xvfb) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n")
    syslog = tmp_path / "syslog"
    syslog.write_text("2026-11-30T10:00:00.000000+00:00 pc cron[42]: (root) CMD (true)\n")
    kenny.start_agent(
        "pc-a",
        env={
            "KENNY_HOSTS_FILE": str(hosts),
            "KENNY_POLICY_ROOT": str(tmp_path / "policies"),
            "KENNY_NETNS": netns,
            "KENNY_SYSLOG_FILE": str(syslog),
            "DISPLAY": xvfb,
        },
    )


async def _forwarded_tools(client) -> dict[str, bool]:
    """Forwarded tool name -> read-only, from the MCP tool list itself."""
    listed = await client.list_tools()
    return {
        t.name: bool(t.annotations and t.annotations.read_only_hint)
        for t in listed.tools
        if t.name not in SERVER_TOOLS
    }


async def test_every_tool_answers_on_linux(kenny, tmp_path, netns, xvfb):
    _start(kenny, tmp_path, netns, xvfb)
    await kenny.wait_agents(["pc-a"])
    cases = _cases(kenny, tmp_path)
    async with kenny.mcp() as client:
        tools = await _forwarded_tools(client)
        assert set(tools) == set(cases), f"tools without a case here: {set(tools) - set(cases)}; stale cases: {set(cases) - set(tools)}"
        for tool, (args, expected) in cases.items():
            res = await call(client, tool, {"agent_id": "pc-a", **args})
            if expected == "ok":
                result = expect_ok(res)
                assert isinstance(result, dict) and result, (tool, result)
            else:
                message = expect_error(res, expected)
                if expected == "unsupported":
                    assert "windows" in message.lower(), (tool, message)
                if tool.startswith("remotehelp_"):
                    assert "Quick Assist" in message, message


async def test_every_tool_declares_what_it_returns(kenny, tmp_path, netns, xvfb):
    """Every tool lists an `outputSchema`; the SDK then checks each successful result
    against it (and raises on a mismatch), so the calls here prove the schemas true on
    a real agent. A result that breaks its schema is shown to fail the same way."""
    _start(kenny, tmp_path, netns, xvfb)
    await kenny.wait_agents(["pc-a"])
    async with kenny.mcp() as client:
        listed = await client.list_tools()
        for tool in listed.tools:
            schema = tool.output_schema
            assert isinstance(schema, dict) and schema.get("type") == "object", (tool.name, schema)
            assert schema.get("required") or schema.get("anyOf"), f"{tool.name}: its schema promises no field"
        ok = 0
        for tool, (args, expected) in _cases(kenny, tmp_path).items():
            if expected == "ok":
                expect_ok(await call(client, tool, {"agent_id": "pc-a", **args}))
                ok += 1
        expect_ok(await call(client, "list_agents", {}))
        expect_ok(await call(client, "select_agent", {"agent_id": "pc-a"}))
        expect_ok(await call(client, "fleet_overview", {}))
        run = expect_ok(await call(client, "fleet_run", {"agent_ids": ["pc-a", "pc-gone"], "tool": "net_config"}))
        assert [r["ok"] for r in run["results"]] == [True, False], run
        assert run["results"][0]["proof"]["agent_id"] == "pc-a", run
        # The agent pushes a snapshot when it connects; the health tools read it.
        for _ in range(100):
            health = expect_ok(await call(client, "agent_health", {"agent_id": "pc-a"}))
            if health["health"] is not None:
                break
            await asyncio.sleep(0.1)
        assert health["sections"], health
        expect_ok(await call(client, "agent_snapshot", {"agent_id": "pc-a", "section": "disk"}))
        expect_ok(await call(client, "agent_changes", {"agent_id": "pc-a"}))
        expect_ok(await call(client, "alert_silence_set", {"agent_id": "pc-a", "duration": "1h", "reason": "schema check"}))
        expect_ok(await call(client, "alert_silence_list", {}))
        expect_ok(await call(client, "alert_silence_clear", {"agent_id": "pc-a"}))
        # The web filter's server tools (test_webfilter_server.py covers them in depth).
        expect_ok(await call(client, "webfilter_get", {"agent_id": "pc-a"}))
        expect_ok(await call(client, "webfilter_set", {"agent_id": "pc-a", "enabled": True, "add_entries": [{"domain": "blocked.example", "kind": "block"}]}))
        expect_ok(await call(client, "webfilter_push", {"agent_id": "pc-a"}))
        expect_ok(await call(client, "webfilter_get", {"agent_id": "pc-a", "check": True}))
        expect_ok(await call(client, "web_activity_query", {"agent_id": "pc-a", "flagged_only": True}))
        assert ok >= 20, ok
        # The check is real: the same SDK refuses a result that does not match.
        from mcp import types

        bad = types.CallToolResult(content=[], structured_content={"stdout": 1}, is_error=False)
        with pytest.raises(RuntimeError, match="Invalid structured content"):
            await client.session.validate_tool_result("shell_exec", bad)


async def test_remote_control_off_disables_every_state_changing_tool(kenny, tmp_path, netns, xvfb):
    _start(kenny, tmp_path, netns, xvfb)
    await kenny.wait_agents(["pc-a"])
    agent = kenny.agents["pc-a"]
    subprocess.run([str(AGENT_BIN), "remote-control", "off", "--state-dir", str(agent.state_dir)], check=True, capture_output=True)
    cases = _cases(kenny, tmp_path)
    # A build to offer, so that agent_update reaches the agent (which must refuse it).
    releases = kenny.data_dir / "agent-releases"
    releases.mkdir()
    (releases / f"kenny-agent-9.9.9-linux-{platform.machine()}").write_bytes(b"never installed")
    hosts_before = (tmp_path / "hosts").read_text()
    async with kenny.mcp() as client:
        tools = await _forwarded_tools(client)
        changing = sorted(t for t, read_only in tools.items() if not read_only)
        assert {"shell_exec", "net_adapter_reset", "winget_install", "webfilter_apply", "net_dns_flush"} <= set(changing), changing
        for tool in changing:
            args, expected = cases[tool]
            res = await call(client, tool, {"agent_id": "pc-a", **args})
            # Windows-only tools may say so first; nothing state-changing may run.
            code = "unsupported" if expected == "unsupported" and res.structured["error"]["code"] == "unsupported" else "disabled"
            message = expect_error(res, code)
            if code == "disabled":
                assert "remote control" in message, (tool, message)
        for tool in sorted(t for t, read_only in tools.items() if read_only):
            args, expected = cases[tool]
            res = await call(client, tool, {"agent_id": "pc-a", **args})
            if expected == "ok":
                expect_ok(res)
            else:
                expect_error(res, expected)
    assert (tmp_path / "hosts").read_text() == hosts_before, "webfilter_apply must not have run"
