"""Issue 9, item 3: the kernel layer under shell_exec. A command that gets past the text
guard on purpose (it writes a script file and runs it, so the guard never sees what the
script does) still cannot write a block device, touch the agent's key, or signal the
agent: the kernel refuses. And `kenny up`'s server data directory is out of reach of
shell_exec and the file tools.

The block device is a stand-in made with mknod in a temporary directory (major 240, a
number no driver uses), named to the agent through KENNY_GUARD_DEVICE_DIRS, a hook that
can only add protection."""

from __future__ import annotations

import ctypes
import os
import re
import signal
import stat
import subprocess
import time

import pytest

from conftest import BIN_DIR, _child_env, call, expect_error, expect_ok, shell_stdout


def _landlock_abi() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    # landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    return max(int(libc.syscall(444, None, 0, 1)), 0)


ABI = _landlock_abi()
needs_landlock = pytest.mark.skipif(ABI < 1, reason="this kernel has no Landlock (or it is disabled): nothing to test")

# Each attempt prints `<what> <errno name>` (or `<what> OK`).
PROBE = """
import errno, os, signal, sys
def attempt(what, f):
    try:
        f()
        print(what, "OK")
    except OSError as e:
        print(what, errno.errorcode.get(e.errno, e.errno))
def write(path):
    with open(path, "wb") as f:
        f.write(b"overwritten")
def read(path):
    with open(path, "rb") as f:
        f.read()
attempt("blockdev-write", lambda: write(DEVICE))
attempt("blockdev-read", lambda: read(DEVICE))
attempt("key-write", lambda: write(KEY))
attempt("key-read", lambda: read(KEY))
attempt("signal-agent", lambda: os.kill(AGENT_PID, signal.SIGTERM))
"""


def _results(stdout: str) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in stdout.strip().splitlines())


@needs_landlock
async def test_a_command_past_the_text_guard_still_cannot_reach_disks_the_key_or_the_agent(kenny, tmp_path):
    devs = tmp_path / "devs"
    devs.mkdir()
    standin = devs / "standin"
    try:
        os.mknod(standin, 0o600 | stat.S_IFBLK, os.makedev(240, 0))
    except PermissionError:
        pytest.skip("mknod is not allowed here (not root): no block device to protect")
    work = tmp_path / "work"
    work.mkdir()
    agent = kenny.start_agent("pc-k", env={"KENNY_GUARD_DEVICE_DIRS": str(devs)})
    await kenny.wait_agents(["pc-k"])
    key = agent.state_dir / "agent_ed25519.key"
    key_before = key.read_bytes()
    pid = agent.proc.pid

    async with kenny.mcp() as client:
        # The kernel layer reports itself in telemetry.
        snapshot = expect_ok(await call(client, "telemetry_collect", {"agent_id": "pc-k", "sections": ["sandbox"]}))
        sandbox = snapshot["snapshot"]["sandbox"]
        assert sandbox["landlock_abi"] == ABI and sandbox["landlock"] == "enforced", sandbox
        assert sandbox["signals_scoped"] is (ABI >= 6), sandbox

        # Spelled out, the text guard refuses it already.
        expect_error(await call(client, "shell_exec", {"agent_id": "pc-k", "command": f"echo x > {standin}"}), "blocked")
        expect_error(await call(client, "shell_exec", {"agent_id": "pc-k", "command": f"kill -TERM $PPID"}), "blocked")

        # The bypass: a script file the guard cannot see into, then run. The paths and
        # the pid are only in the script's text.
        script = work / "probe.py"
        code = f"DEVICE = {str(standin)!r}\nKEY = {str(key)!r}\nAGENT_PID = {pid}\n{PROBE}"
        write = f"cat > {script} <<'EOF'\n{code}\nEOF"
        expect_ok(await call(client, "shell_exec", {"agent_id": "pc-k", "command": write}))
        res = expect_ok(await call(client, "shell_exec", {"agent_id": "pc-k", "command": f"python3 {script}"}))
        got = _results(res["stdout"])
        # Landlock: no access at all to a disk device, whatever the path.
        assert got["blockdev-write"] == "EACCES", res
        assert got["blockdev-read"] == "EACCES", res
        # Mount isolation: the state directory is an empty, read-only directory for the command.
        assert got["key-write"] in ("EROFS", "EACCES"), res
        assert got["key-read"] in ("ENOENT", "EACCES"), res
        # Landlock's signal scope: the command cannot signal the agent.
        if ABI >= 6:
            assert got["signal-agent"] == "EPERM", res

        # The same through a shell script run by sh.
        sh_script = work / "probe.sh"
        body = f"echo x > {standin} 2>/dev/null || echo blockdev refused\nkill -TERM {pid} 2>&1 || true\n"
        expect_ok(
            await call(client, "shell_exec", {"agent_id": "pc-k", "command": f"cat > {sh_script} <<'EOF'\n{body}EOF"})
        )
        res = expect_ok(await call(client, "shell_exec", {"agent_id": "pc-k", "command": f"sh {sh_script}"}))
        assert "blockdev refused" in res["stdout"], res
        if ABI >= 6:
            assert "Operation not permitted" in res["stdout"] + res["stderr"], res

        # Everyday work in the same sandbox still works: /tmp, /dev/null, pipes, /proc.
        everyday = f"echo hi > {work}/note && cat {work}/note | tr a-z A-Z > /dev/null && head -c 5 /proc/uptime >/dev/null && ls /dev >/dev/null && echo fine"
        assert shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-k", "command": everyday})) == "fine\n"

    assert key.read_bytes() == key_before, "the agent's key is unchanged"
    assert agent.proc.alive(), "the agent was not signalled"
    async with kenny.mcp() as client:
        assert shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-k", "command": "echo still-here"})) == "still-here\n"


KENNY_BIN = BIN_DIR / "kenny"


@needs_landlock
async def test_kenny_up_keeps_the_server_data_directory_from_its_own_agent(tmp_path, kenny):
    data = tmp_path / "quickstart-data"
    out = tmp_path / "up.out"
    with open(out, "wb") as o, open(tmp_path / "up.err", "wb") as e:
        proc = subprocess.Popen(
            [str(KENNY_BIN), "up", "--listen", "127.0.0.1:0", "--data-dir", str(data), "--agent-id", "this-pc"],
            stdin=subprocess.DEVNULL, stdout=o, stderr=e, env=_child_env(), cwd=tmp_path,
        )
    try:
        deadline = time.monotonic() + 30
        while "Press Ctrl-C to stop." not in out.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, out.read_text()
            time.sleep(0.1)
        banner = out.read_text()
        url = re.search(r"MCP URL:\s+(http://127\.0\.0\.1:\d+/mcp)", banner).group(1)
        token = re.search(r"Token:\s+(kenny_pat_\S+)", banner).group(1)
        kenny.base_url = url.removesuffix("/mcp")
        db = data / "kenny.db"
        db_before = db.stat().st_size
        assert db_before > 0
        async with kenny.mcp(token) as client:
            # The file tools refuse it, by any name.
            for path in (str(db), f"{data}/local-agent/../kenny.db", str(data)):
                expect_error(await call(client, "fs_read", {"agent_id": "this-pc", "path": path}), "blocked")
            expect_error(await call(client, "fs_list", {"agent_id": "this-pc", "path": str(data)}), "blocked")
            # The text guard refuses it spelled out...
            expect_error(await call(client, "shell_exec", {"agent_id": "this-pc", "command": f"cat {db}"}), "blocked")
            # ...and past the text guard, the command finds an empty, read-only directory.
            script = tmp_path / "peek.sh"
            body = f"ls -A {data} | wc -l\ncat {db} 2>&1 | head -c 200\necho x > {db} 2>&1\n"
            expect_ok(
                await call(client, "shell_exec", {"agent_id": "this-pc", "command": f"cat > {script} <<'EOF'\n{body}EOF"})
            )
            res = expect_ok(await call(client, "shell_exec", {"agent_id": "this-pc", "command": f"sh {script}"}))
            said = res["stdout"] + res["stderr"]
            assert res["stdout"].splitlines()[0].strip() == "0", res
            assert "No such file" in said and "Read-only file system" in said, res
            assert "SQLite" not in said, res
        assert db.stat().st_size >= db_before
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
