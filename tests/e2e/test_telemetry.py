"""telemetry_collect through /mcp on a real Linux agent: every section present and
sensible, real content (the server's own listening port, root, bash), section
selection, unknown sections refused, and the /etc override the accounts section honours."""

from __future__ import annotations

import os
from urllib.parse import urlparse

from conftest import call, expect_error, expect_ok

SECTIONS = [
    "disk",
    "memory",
    "cpu",
    "processes",
    "uptime",
    "os",
    "time_sync",
    "thermals",
    "battery",
    "disk_smart",
    "peripherals",
    "printers",
    "network",
    "routing",
    "wifi_quality",
    "net_quality",
    "failed_services",
    "services",
    "scheduled_tasks",
    "autostart",
    "listening_ports",
    "firewall",
    "installed_software",
    "app_updates",
    "local_accounts",
    "logon_failures",
    "defender",
    "defender_quarantine",
    "av_thirdparty",
    "win_update",
    "reboot_pending",
    "encryption",
    "reliability",
    "backup_status",
    "screen_time",
    "web_activity",
    "browser_extensions",
    "sandbox",
]
PERSONAL = ["web_activity", "screen_time"]


def _check_section(name: str, section: dict) -> None:
    assert isinstance(section, dict), f"{name}: {section!r}"
    assert section.get("status") in ("ok", "warn", "crit"), f"{name}: {section!r}"
    summary = section.get("summary")
    assert isinstance(summary, str) and summary.strip() and "\n" not in summary, f"{name}: {section!r}"
    assert not summary.startswith("collector failed"), f"{name} failed: {section!r}"


async def test_every_section_with_real_content(kenny):
    await kenny.start_agents(["pc-a"])
    server_port = urlparse(kenny.base_url).port
    async with kenny.mcp() as client:
        out = expect_ok(await call(client, "telemetry_collect", {"agent_id": "pc-a"}))
    assert out["collected_at"].endswith("Z"), out["collected_at"]
    snapshot = out["snapshot"]
    # The personal sections come only when named (test_personal_sections_only_when_named).
    assert sorted(snapshot) == sorted(set(SECTIONS) - set(PERSONAL)), sorted(snapshot)
    for name in snapshot:
        _check_section(name, snapshot[name])

    # The kenny server listens on 127.0.0.1:<port>; the agent finds it and its owner.
    ports = snapshot["listening_ports"]
    mine = [p for p in ports["ports"] if p["proto"] == "tcp" and p["port"] == server_port]
    assert mine, f"server port {server_port} not among {ports['ports']}"
    assert mine[0]["address"] == "127.0.0.1", mine
    assert mine[0]["pid"] == kenny.server.pid and mine[0]["process"] == "kenny-server", mine
    assert ports["count"] >= 1 and ports["truncated"] in (True, False)

    accounts = snapshot["local_accounts"]
    root = next(a for a in accounts["accounts"] if a["name"] == "root")
    assert root["is_admin"] is True and root["builtin_admin"] is True and root["kind"] == "local", root
    assert "root" in accounts["admins"]
    assert accounts["count"] == len(accounts["accounts"])

    software = snapshot["installed_software"]
    assert software["source"] == "dpkg", software["summary"]
    bash = [a for a in software["apps"] if a["name"] == "bash"]
    assert bash and bash[0]["version"], software["apps"][:20]
    assert software["count"] >= len(software["apps"]) and software["truncated"] == (software["count"] > len(software["apps"]))

    cpu = snapshot["cpu"]
    assert cpu["cores"] == os.cpu_count(), cpu
    assert isinstance(cpu["load_1"], (int, float)) and 0 <= cpu["usage_percent"] <= 100, cpu
    processes = snapshot["processes"]
    assert processes["count"] > 1 and len(processes["top_cpu"]) == 5 and len(processes["top_memory"]) == 5, processes

    network = snapshot["network"]
    assert network["status"] == ("ok" if network["default_routes"] and network["dns_servers"] else "warn"), network
    with open("/proc/net/route") as f:
        has_v4_default = any(line.split()[1] == "00000000" for line in f.readlines()[1:] if line.split())
    assert any(r["family"] == "ipv4" for r in network["default_routes"]) == has_v4_default, network

    release = snapshot["os"]
    assert release["support_source"] in ("os-release SUPPORT_END", "built-in table", "unknown"), release
    with open("/etc/os-release") as f:
        os_id = next((line.split("=", 1)[1].strip().strip('"') for line in f if line.startswith("ID=")), None)
    assert release["distro"]["id"] == os_id, release

    if not os.path.isdir("/run/systemd/system"):
        failed = snapshot["failed_services"]
        assert (failed["status"], failed["summary"]) == ("ok", "systemd not running; nothing to check"), failed
        assert "PID 1" in failed["note"], failed

    assert snapshot["time_sync"]["status"] != "crit", snapshot["time_sync"]
    assert all("temperature_c" in s for s in snapshot["thermals"]["sensors"]), snapshot["thermals"]
    failures = snapshot["logon_failures"]
    assert failures["window_hours"] == 24 and failures["count"] >= failures["unmatched_count"], failures
    for name in ("defender", "defender_quarantine", "av_thirdparty", "win_update"):
        assert snapshot[name]["summary"] == "n/a on this platform", snapshot[name]
        assert snapshot[name]["applicable"] is False and "Windows" in snapshot[name]["reason"], snapshot[name]

    # net_quality probes only what the test allows (conftest: loopback).
    quality = snapshot["net_quality"]
    assert quality["gateway"]["host"] == "127.0.0.1" and quality["dns"]["host"] == "127.0.0.1", quality
    assert quality["gateway"]["loss_percent"] == 0 and quality["gateway"]["latency_ms"] < 100, quality


async def test_each_section_alone_answers_with_data_or_says_why_not(kenny):
    """Item 1 of issue 12: every section, named on its own through /mcp, carries real
    data from this PC, or is `n/a` with the reason; none is a failure or a placeholder."""
    await kenny.start_agents(["pc-a"])
    async with kenny.mcp() as client:
        for name in SECTIONS:
            out = expect_ok(await call(client, "telemetry_collect", {"agent_id": "pc-a", "sections": [name]}))
            assert list(out["snapshot"]) == [name], out
            section = out["snapshot"][name]
            _check_section(name, section)
            assert section.get("collected") is not False, f"{name} is not collected on Linux: {section}"
            if section.get("applicable") is False:
                assert isinstance(section.get("reason"), str) and section["reason"].strip(), section
                assert section["summary"].startswith("n/a"), section
            else:
                data = set(section) - {"status", "summary"}
                assert data, f"{name} carries no data: {section}"


async def test_only_the_sections_asked_for(kenny):
    await kenny.start_agents(["pc-a"])
    async with kenny.mcp() as client:
        out = expect_ok(await call(client, "telemetry_collect", {"agent_id": "pc-a", "sections": ["cpu", "thermals"]}))
        assert sorted(out["snapshot"]) == ["cpu", "thermals"], out
        for name, section in out["snapshot"].items():
            _check_section(name, section)

        msg = expect_error(
            await call(client, "telemetry_collect", {"agent_id": "pc-a", "sections": ["cpu", "registry"]}),
            "bad_args",
        )
    assert "`registry`" in msg and ", ".join(SECTIONS) in msg, msg


async def test_accounts_read_from_an_etc_override_and_never_leak_hashes(kenny, tmp_path):
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "passwd").write_text(
        "root:x:0:0:root:/root:/bin/bash\n"
        "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
        "papa:x:1000:1000:Papa,,,:/home/papa:/bin/bash\n"
        "kid:x:1001:1001:Kid:/home/kid:/bin/bash\n"
    )
    (etc / "shadow").write_text(
        "root:!:20000:0:99999:7:::\n"
        "daemon:*:20000:0:99999:7:::\n"
        "papa:$6$e2esalt$e2eSECREThash:20468:0:99999:7:::\n"
        "kid:$6$e2esalt$e2eOTHERhash:20504:0:99999:7:::\n"
    )
    (etc / "group").write_text("root:x:0:\nsudo:x:27:papa\npapa:x:1000:\nkid:x:1001:\n")
    kenny.start_agent("pc-b", env={"KENNY_ETC_ROOT": str(etc)})
    await kenny.wait_agents(["pc-b"])
    async with kenny.mcp() as client:
        res = await call(client, "telemetry_collect", {"agent_id": "pc-b", "sections": ["local_accounts"]})
    out = expect_ok(res)
    assert "e2esalt" not in res.text and "SECRET" not in res.text and "e2esalt" not in str(out)
    accounts = out["snapshot"]["local_accounts"]
    assert [a["name"] for a in accounts["accounts"]] == ["kid", "papa", "root"], accounts
    assert accounts["admins"] == ["papa", "root"], accounts
    assert accounts["summary"] == "3 accounts, 2 admins", accounts
    papa = next(a for a in accounts["accounts"] if a["name"] == "papa")
    assert papa["display"] == "Papa" and papa["password_last_set"] == "2026-01-15T00:00:00Z", papa
