"""Smoke test of the forwarded read-only tools on a real Linux agent, and of the
agent-side `timeout` (which must kill the command's whole process group)."""

from __future__ import annotations

import asyncio
import os
import secrets
import time

from conftest import call, expect_error, expect_ok


def _cmdlines_containing(needle: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if needle.encode() in f.read():
                        pids.append(int(entry))
            except OSError:
                pass
    return pids


async def test_read_only_tools(kenny, tmp_path):
    await kenny.start_agents(["pc-a"])
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    name = f"needle-{secrets.token_hex(4)}.txt"
    (tree / "sub" / name).write_text("hello world\n")
    (tree / "other.log").write_text("x")

    async with kenny.mcp() as client:
        listing = expect_ok(await call(client, "fs_list", {"agent_id": "pc-a", "path": str(tree)}))
        names = {e["name"] for e in listing["entries"]}
        assert names == {"sub", "other.log"}, listing

        read = expect_ok(
            await call(client, "fs_read", {"agent_id": "pc-a", "path": str(tree / "sub" / name), "offset": 6, "max_bytes": 5})
        )
        assert read["content"] == "world", read

        found = expect_ok(await call(client, "fs_search", {"agent_id": "pc-a", "path": str(tree), "pattern": "needle"}))
        assert [m["path"] for m in found["matches"]] == [str(tree / "sub" / name)], found

        volumes = expect_ok(await call(client, "fs_disk_usage", {"agent_id": "pc-a"}))
        assert volumes, volumes
        sized = expect_ok(await call(client, "fs_disk_usage", {"agent_id": "pc-a", "path": str(tree)}))
        assert str(tree) in str(sized), sized

        procs = expect_ok(await call(client, "diag_processes", {"agent_id": "pc-a", "limit": 500}))
        pids = {p["pid"] for p in procs["processes"]}
        assert kenny.agents["pc-a"].proc.pid in pids, "diag_processes should list the agent itself"

        expect_ok(await call(client, "net_config", {"agent_id": "pc-a"}))
        expect_ok(await call(client, "telemetry_collect", {"agent_id": "pc-a"}))

        expect_error(await call(client, "fs_read", {"agent_id": "pc-a", "path": str(tree / "missing")}), "not_found")


async def test_shell_timeout_kills_process_group(kenny):
    await kenny.start_agents(["pc-a"])
    marker = f"sleep 29.{secrets.randbelow(10**6):06d}"  # unique cmdline to look for in /proc
    # A grandchild in the background, so killing only the direct child would leave it behind.
    command = f"sh -c '{marker}' & wait"
    async with kenny.mcp() as client:
        t0 = time.monotonic()
        res = await call(client, "shell_exec", {"agent_id": "pc-a", "command": command, "timeout_s": 1})
        elapsed = time.monotonic() - t0
    expect_error(res, "timeout")
    assert elapsed < 10, f"timeout_s=1 took {elapsed:.1f}s to fail"
    deadline = time.monotonic() + 5
    while _cmdlines_containing(marker):
        assert time.monotonic() < deadline, f"processes of the timed-out command survive: {_cmdlines_containing(marker)}"
        await asyncio.sleep(0.1)


async def test_the_existing_kennys_argument_names_still_work(kenny, tmp_path):
    """Prompts written for the existing kenny use some other argument names; they are
    read as ours, and two names for one argument that disagree are refused."""
    # A log of our own (this machine runs no systemd): three recent lines.
    log = tmp_path / "syslog"
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(time.time() - 60))
    log.write_text("".join(f"{stamp} pc-a app[{n}]: line {n}\n" for n in range(3)))
    await kenny.start_agents(["pc-a"], env={"KENNY_SYSLOG_FILE": str(log)})
    tree = tmp_path / "tree"
    tree.mkdir()
    name = f"needle-{secrets.token_hex(4)}.txt"
    (tree / name).write_text("x")
    a = {"agent_id": "pc-a"}
    async with kenny.mcp() as client:
        found = expect_ok(await call(client, "fs_search", {**a, "root": str(tree), "pattern": "needle"}))
        assert [m["path"] for m in found["matches"]] == [str(tree / name)], found
        msg = expect_error(await call(client, "fs_search", {**a, "root": "/etc", "path": str(tree), "pattern": "x"}), "bad_args")
        assert "`root` and `path`" in msg, msg
        services = expect_ok(await call(client, "diag_services", {**a, "filter": "no-such-unit-here"}))
        assert services["services"] == [], services
        events = expect_ok(await call(client, "diag_eventlog", {**a, "count": 1, "priority": "info"}))
        assert len(events["entries"]) == 1 and events["truncated"] is True, events
        msg = expect_error(await call(client, "winget_update", a), "bad_args")
        assert "all: true" in msg, msg
