"""diag_services, diag_eventlog and diag_autostart through /mcp on a real Linux agent.

The event log and autostart tests point the agent at files the test writes
(KENNY_SYSLOG_FILE, KENNY_AUTOSTART_ROOT), so they check exact content without
reading or touching the machine's own logs and crontabs."""

from __future__ import annotations

import os
import stat
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from conftest import call, expect_error, expect_ok

SYSTEMD_RUNNING = os.path.isdir("/run/systemd/system")
PID1 = Path("/proc/1/comm").read_text().strip()
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def _init_scripts() -> set[str]:
    """What a SysV listing of this machine must contain."""
    names = set()
    for name in os.listdir("/etc/init.d") if os.path.isdir("/etc/init.d") else []:
        path = os.path.join("/etc/init.d", name)
        if name.startswith(".") or name in {"README", "skeleton", "rc", "rcS", "functions"}:
            continue
        st = os.stat(path)
        if stat.S_ISREG(st.st_mode) and st.st_mode & 0o111:
            names.add(name)
    return names


async def test_services(kenny):
    await kenny.start_agents(["pc-a"])
    async with kenny.mcp() as client:
        out = expect_ok(await call(client, "diag_services", {"agent_id": "pc-a", "limit": 2000}))
        names = [s["name"] for s in out["services"]]
        assert out["count"] == len(names) and out["truncated"] is False, out
        assert names == sorted(names, key=str.lower), "sorted by name"
        if SYSTEMD_RUNNING:
            assert out["source"] == "systemd", out
            assert names and all(n.endswith(".service") for n in names), names
            assert {"name", "description", "load", "active", "sub"} <= set(out["services"][0]), out
        else:
            assert out["source"] == "sysvinit", out
            assert f"systemd is not running on this PC (PID 1 is `{PID1}`)" in out["note"], out
            assert set(names) == _init_scripts(), out
            assert all(s["active"] in {"running", "unknown"} for s in out["services"]), out

        if names:
            fragment = names[0][:3].upper()
            filtered = expect_ok(await call(client, "diag_services", {"agent_id": "pc-a", "name": fragment}))
            assert filtered["count"] >= 1
            assert all(fragment.lower() in s["name"].lower() for s in filtered["services"]), filtered
            one = expect_ok(await call(client, "diag_services", {"agent_id": "pc-a", "limit": 1}))
            assert [s["name"] for s in one["services"]] == names[:1]
            assert one["truncated"] is (len(names) > 1)

        running = expect_ok(await call(client, "diag_services", {"agent_id": "pc-a", "state": "running"}))
        assert all(s.get("sub") == "running" or s.get("active") == "running" for s in running["services"]), running

        msg = expect_error(await call(client, "diag_services", {"agent_id": "pc-a", "state": "bogus"}), "bad_args")
        assert "`all`, `running`, `failed` or `stopped`" in msg, msg


def _rfc3164(t: float) -> str:
    """Classic syslog time: local, no year, day padded with a space."""
    lt = time.localtime(t)
    return f"{MONTHS[lt.tm_mon - 1]} {lt.tm_mday:>2} {lt.tm_hour:02d}:{lt.tm_min:02d}:{lt.tm_sec:02d}"


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).astimezone().isoformat(timespec="microseconds")


async def test_eventlog_from_a_syslog_file(kenny, tmp_path):
    now = time.time()
    log = tmp_path / "syslog"
    lines = [
        f"{_rfc3164(now - 3 * 86400)} pc-a sshd[100]: very old login",
        f"{_rfc3339(now - 2 * 3600)} pc-a sshd[101]: Accepted publickey for kim",
        f"{_rfc3339(now - 90 * 60)} pc-a CRON[200]: (root) CMD (backup)",
        "this line is not syslog",
        f"{_rfc3339(now - 60 * 60)} pc-a sshd[102]: Disconnected from 10.0.0.9",
        f"{_rfc3164(now - 30 * 60)} pc-a kernel: usb 1-1: new high-speed USB device",
        f"{_rfc3339(now - 10 * 60)} pc-a sshd[103]: Connection closed " + "x" * 3000,
    ]
    log.write_text("\n".join(lines) + "\n")
    kenny.start_agent("pc-a", env={"KENNY_SYSLOG_FILE": str(log)})
    await kenny.wait_agents(["pc-a"])

    async def query(**args):
        return expect_ok(await call(client, "diag_eventlog", {"agent_id": "pc-a", **args}))

    async with kenny.mcp() as client:
        day = await query()
        assert day["source"] == "syslog" and day["file"] == str(log), day
        assert [e["pid"] for e in day["entries"]] == [103, None, 102, 200, 101], day
        assert day["count"] == 5 and day["truncated"] is False
        assert any("do not record priorities" in n for n in day["notes"]), day
        assert any("1 line(s) without a syslog timestamp" in n for n in day["notes"]), day
        newest = day["entries"][0]
        assert newest["unit"] == "sshd" and newest["priority"] is None
        assert newest["message"].startswith("Connection closed xxx")
        assert newest["message"].endswith("[message truncated: 3018 characters in all]"), newest["message"][-80:]
        stamp = datetime.fromisoformat(newest["time"].replace("Z", "+00:00"))
        assert abs(stamp.timestamp() - (now - 600)) < 1, newest["time"]
        kernel = day["entries"][1]
        assert kernel["unit"] == "kernel" and kernel["message"] == "usb 1-1: new high-speed USB device"
        # RFC 3164 lines are local time without a year: read back to the same second.
        k_stamp = datetime.fromisoformat(kernel["time"].replace("Z", "+00:00")).timestamp()
        assert abs(k_stamp - (now - 1800)) < 1, kernel["time"]

        ssh = await query(unit="sshd")
        assert [e["pid"] for e in ssh["entries"]] == [103, 102, 101], ssh
        cut = await query(unit="sshd.service", limit=2)
        assert [e["pid"] for e in cut["entries"]] == [103, 102] and cut["truncated"] is True, cut

        recent = await query(since="45m")
        assert [e["pid"] for e in recent["entries"]] == [103, None], recent
        ever = await query(since="4d", unit="sshd")
        assert [e["pid"] for e in ever["entries"]] == [103, 102, 101, 100], ever
        since_time = datetime.fromtimestamp(now - 100 * 60, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        after = await query(since=since_time)
        assert [e["pid"] for e in after["entries"]] == [103, None, 102, 200], after

        msg = expect_error(
            await call(client, "diag_eventlog", {"agent_id": "pc-a", "since": "yesterday-ish"}), "bad_args"
        )
        assert "RFC 3339" in msg and "30m" in msg and "yesterday-ish" in msg, msg
        expect_error(await call(client, "diag_eventlog", {"agent_id": "pc-a", "priority": "loud"}), "bad_args")


async def test_eventlog_without_the_override(kenny):
    """This PC as it is: the journal where systemd runs, else the syslog file, else a
    plain `unsupported` naming PID 1."""
    await kenny.start_agents(["pc-b"])
    async with kenny.mcp() as client:
        res = await call(client, "diag_eventlog", {"agent_id": "pc-b", "limit": 5})
    syslog_files = [f for f in ("/var/log/syslog", "/var/log/messages") if os.path.isfile(f)]
    if SYSTEMD_RUNNING:
        out = expect_ok(res)
        assert out["source"] in {"journal", "syslog"}, out
    elif syslog_files:
        out = expect_ok(res)
        assert out["source"] == "syslog" and out["file"] == syslog_files[0], out
    else:
        msg = expect_error(res, "unsupported")
        assert f"systemd is not running on this PC (PID 1 is `{PID1}`)" in msg, msg
        assert "/var/log/syslog" in msg, msg


async def test_autostart_in_a_fake_root(kenny, tmp_path):
    root = tmp_path / "root"

    def write(rel: str, text: str) -> Path:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    applet = write("etc/xdg/autostart/print-applet.desktop", "[Desktop Entry]\nName=Print Applet\nExec=print-applet --tray\n")
    chat = write("home/kim/.config/autostart/chat.desktop", "[Desktop Entry]\nName=Chat\nExec=chat\nX-GNOME-Autostart-enabled=false\n")
    admin = write("root/.config/autostart/admin.desktop", "[Desktop Entry]\nExec=/opt/admin/run\n")
    crontab = write("etc/crontab", "SHELL=/bin/sh\n17 * * * * root run-parts /etc/cron.hourly\n@reboot root /usr/local/bin/warm-cache --all\n")
    cron_d = write("etc/cron.d/backup", "# nightly\n@reboot backup /usr/bin/backup --now\n")
    write("etc/cron.d/backup.dpkg-old", "@reboot root /never/runs\n")
    user_tab = write("var/spool/cron/crontabs/kim", "@reboot /home/kim/bin/start.sh\n")

    kenny.start_agent("pc-a", env={"KENNY_AUTOSTART_ROOT": str(root)})
    await kenny.wait_agents(["pc-a"])
    async with kenny.mcp() as client:
        out = expect_ok(await call(client, "diag_autostart", {"agent_id": "pc-a"}))

    assert out["truncated"] is False and out["count"] == len(out["entries"]), out
    found = [
        (e["kind"], e["name"], e["command"], e["location"], e["enabled"], e["user"])
        for e in out["entries"]
        if e["kind"] != "systemd"
    ]
    assert found == [
        ("xdg", "Print Applet", "print-applet --tray", str(applet), True, None),
        ("xdg", "Chat", "chat", str(chat), False, "kim"),
        ("xdg", "admin", "/opt/admin/run", str(admin), True, "root"),
        ("cron", "warm-cache", "/usr/local/bin/warm-cache --all", str(crontab), True, "root"),
        ("cron", "backup", "/usr/bin/backup --now", str(cron_d), True, "backup"),
        ("cron", "start.sh", "/home/kim/bin/start.sh", str(user_tab), True, "kim"),
    ], out
    if SYSTEMD_RUNNING:
        assert any(e["kind"] == "systemd" for e in out["entries"]), out
    else:
        assert not any(e["kind"] == "systemd" for e in out["entries"]), out
        assert any(f"systemd is not running on this PC (PID 1 is `{PID1}`)" in n for n in out["notes"]), out
