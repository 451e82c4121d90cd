"""Local account governance on a real Linux agent, through the official MCP SDK.

The agent runs in a private mount namespace where /etc and /home are bind mounts of
copies in tmp_path (whole directories: useradd replaces /etc/passwd by renaming a new
file over it, which a bind-mounted file would refuse), so the real useradd, usermod,
gpasswd, chpasswd, chage and userdel change only the copies and the host is untouched.

The rails are checked the way they matter: each refusal is `blocked` with its reason,
and the copied passwd, shadow and group are byte for byte what they were before it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import call, expect_error, expect_ok

ACCOUNT_FILES = ("passwd", "shadow", "group")
TOOLS_AND_ARGS = (
    ("account_create", {"name": "sneaky", "password": "whatever-1"}),
    ("account_delete", {"principal": "keeper"}),
    ("account_set_enabled", {"principal": "keeper", "enabled": False}),
    ("account_set_admin", {"principal": "kidacct", "admin": True}),
    ("account_set_logon_rights", {"principal": "keeper", "deny": []}),
    ("account_session_action", {"principal": "keeper", "action": "logoff"}),
    ("password_policy_set", {"min_length": 6}),
)

# This container has no systemd-logind, so the agent finds a scripted loginctl first on
# its PATH inside the namespace: it lists one session for whoever `sessions` names and
# records every argv it gets, which the test asserts on.
FAKE_LOGINCTL = """#!/bin/sh
echo "$*" >> "{log}"
case "$1" in
  list-sessions) cat "{sessions}" 2>/dev/null ;;
  show-session) printf 'State=active\\nTTY=\\n' ;;
  lock-session|terminate-session) ;;
  *) echo "unexpected loginctl call: $*" >&2; exit 1 ;;
esac
"""


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _digests(etc: Path) -> dict[str, str]:
    return {name: _digest(etc / name) for name in ACCOUNT_FILES}


@pytest.fixture
def private_etc(tmp_path: Path):
    """Copies of /etc and /home, and a wrap that puts them in place for the agent."""
    missing = [tool for tool in ("unshare", "useradd", "usermod", "userdel", "chpasswd", "gpasswd", "chage") if not shutil.which(tool)]
    if os.geteuid() != 0 or missing:
        pytest.skip(f"needs root and {', '.join(missing) or 'unshare'} to change accounts in a private /etc")
    etc, home, bin_dir = tmp_path / "etc", tmp_path / "home", tmp_path / "bin"
    subprocess.run(["cp", "-a", "/etc", str(etc)], check=True)
    subprocess.run(["cp", "-a", "/home", str(home)], check=True)
    bin_dir.mkdir()
    log, sessions = tmp_path / "loginctl.argv", tmp_path / "sessions"
    fake = bin_dir / "loginctl"
    fake.write_text(FAKE_LOGINCTL.format(log=log, sessions=sessions))
    fake.chmod(0o755)
    wrap = [
        "unshare", "-m", "--propagation", "private",
        "sh", "-c",
        'mount --bind "$1" /etc && mount --bind "$2" /home && PATH="$3:$PATH" && export PATH && shift 3 && exec "$@"',
        "sh", str(etc), str(home), str(bin_dir),
    ]
    return etc, home, wrap, log, sessions


def _line(etc: Path, name: str, user: str) -> str | None:
    for line in (etc / name).read_text().splitlines():
        if line.split(":", 1)[0] == user:
            return line
    return None


def _group_members(etc: Path, group: str) -> list[str]:
    line = _line(etc, "group", group) or ""
    members = line.rsplit(":", 1)[-1]
    return [m for m in members.split(",") if m]


async def test_accounts_are_governed_for_real_in_a_private_etc_and_the_rails_hold(kenny, private_etc):
    etc, home, wrap, loginctl_log, sessions = private_etc
    host_before = _digests(Path("/etc"))
    admin_group = next(g for g in ("sudo", "wheel", "admin") if _line(etc, "group", g))
    # A password with a colon (chpasswd splits at the first one only) and a space.
    password = "kenny:e2e s3cret-" + os.urandom(6).hex()
    kenny.start_agent("pc-acc", wrap=wrap)
    await kenny.wait_agents(["pc-acc"])
    a = {"agent_id": "pc-acc"}

    async def refused(client, tool: str, args: dict, needle: str) -> str:
        before = _digests(etc)
        message = expect_error(await call(client, tool, {**a, **args}), "blocked")
        assert needle in message and "Nothing was changed" in message, message
        assert _digests(etc) == before, f"{tool} changed the account files although it was refused"
        return message

    async with kenny.mcp() as client:
        # The first admin: alone, it is the last one and stays.
        made = expect_ok(await call(client, "account_create", {**a, "name": "keeper", "password": password, "admin": True}))
        assert made["principal"] == "keeper" and made["kind"] == "local" and made["admin"] is True, made
        assert "keeper" in _group_members(etc, admin_group)
        await refused(client, "account_set_admin", {"principal": "keeper", "admin": False}, "last enabled local administrator")

        # create, with the password set through chpasswd's stdin: the hash verifies.
        made = expect_ok(await call(client, "account_create", {**a, "name": "visitor", "password": password, "display_name": "A Visitor"}))
        assert made == {**made, "ok": True, "principal": "visitor", "kind": "local", "admin": False}, made
        assert _line(etc, "passwd", "visitor").split(":")[4] == "A Visitor"
        stored = _line(etc, "shadow", "visitor").split(":")[1]
        import crypt  # noqa: PLC0415 (deprecated module; only this check needs it)

        assert crypt.crypt(password, stored) == stored, "the stored hash is not of the password given"
        assert (home / "visitor").is_dir()
        expect_error(await call(client, "account_create", {**a, "name": "visitor", "password": password}), "bad_args")

        # make it admin, then disable it (keeper is another enabled admin).
        promoted = expect_ok(await call(client, "account_set_admin", {**a, "principal": "visitor", "admin": True}))
        assert promoted["admin"] is True and promoted["changed"] is True, promoted
        assert "visitor" in _group_members(etc, admin_group)
        disabled = expect_ok(await call(client, "account_set_enabled", {**a, "principal": "visitor", "enabled": False}))
        assert disabled == {**disabled, "principal": "visitor", "kind": "local", "enabled": False, "changed": True}, disabled
        fields = _line(etc, "shadow", "visitor").split(":")
        assert fields[1].startswith("!") and fields[7] == "1", fields[:2] + fields[7:]

        # Now keeper is the last enabled admin again, counted as after the change.
        await refused(client, "account_delete", {"principal": "keeper", "remove_profile": True}, "last enabled local administrator")
        await refused(client, "account_set_enabled", {"principal": "keeper", "enabled": False}, "last enabled local administrator")
        # Built-in accounts and the agent's own (root: the agent runs as root here).
        await refused(client, "account_set_enabled", {"principal": "daemon", "enabled": False}, "built-in")
        await refused(client, "account_delete", {"principal": "nobody"}, "built-in")
        message = await refused(client, "account_set_admin", {"principal": "root", "admin": False}, "the kenny agent runs as")
        assert "`root`" in message, message
        expect_error(await call(client, "account_set_enabled", {**a, "principal": "no-such-one", "enabled": True}), "not_found")

        # lock its session after a warning: loginctl is asked, with the session's id.
        uid = _line(etc, "passwd", "visitor").split(":")[2]
        sessions.write_text(f"     17 {uid} visitor seat0 \n")
        locked = expect_ok(await call(client, "account_session_action", {**a, "principal": "visitor", "action": "lock", "warn_seconds": 1}))
        assert locked["sessions"] == [{"session_id": 17, "state": "active", "acted": True}], locked
        assert locked["action"] == "lock" and locked["warned_seconds"] == 1, locked
        calls = loginctl_log.read_text().splitlines()
        assert calls[0].startswith("list-sessions") and "lock-session --no-pager 17" in calls, calls

        # Refuse it SSH (both rights mean SSH here), then the password policy, edited in
        # place with the rest of each file kept.
        rights = expect_ok(await call(client, "account_set_logon_rights", {**a, "principal": "keeper", "deny": ["network"]}))
        assert rights["deny"] == ["network"] and rights["mechanism"] == "sshd DenyUsers", rights
        drop_in = etc / "ssh/sshd_config.d/90-kenny-logon-rights.conf"
        assert drop_in.read_text().endswith("DenyUsers keeper\n")
        defs_before = (etc / "login.defs").read_text()
        policy = expect_ok(await call(client, "password_policy_set", {**a, "min_length": 10, "max_age_days": 90, "lockout_threshold": 5}))
        assert policy["applies_to"] == "local_only" and policy["policy"] == {"min_length": 10, "max_age_days": 90, "lockout_threshold": 5}, policy
        assert "keeper" in policy["accounts_updated"], policy
        defs_after = (etc / "login.defs").read_text()
        changed = [(x, y) for x, y in zip(defs_before.splitlines(), defs_after.splitlines()) if x != y]
        assert len(defs_after.splitlines()) == len(defs_before.splitlines()) + 1, "only the marker line is new"
        assert "PASS_MAX_DAYS\t90" in defs_after and "# set by kenny" in defs_after, changed
        assert "deny = 5" in (etc / "security/faillock.conf").read_text()
        assert _line(etc, "shadow", "keeper").split(":")[4] == "90"

        # delete it with its home directory.
        deleted = expect_ok(await call(client, "account_delete", {**a, "principal": "visitor", "remove_profile": True}))
        assert deleted == {**deleted, "ok": True, "principal": "visitor", "profile_removed": True}, deleted
        assert _line(etc, "passwd", "visitor") is None and _line(etc, "shadow", "visitor") is None
        assert "visitor" not in _group_members(etc, admin_group)
        assert not (home / "visitor").exists()

    # A `user` principal, even one that may reach the PC, changes no account.
    kenny.add_user("kidacct", "user", ["pc-acc"])
    kid = kenny.create_token("kidacct")
    before = _digests(etc)
    async with kenny.mcp(kid) as client:
        for tool, args in TOOLS_AND_ARGS:
            message = expect_error(await call(client, tool, {**a, **args}), "forbidden")
            assert "operator" in message, (tool, message)
    assert _digests(etc) == before

    # The password is nowhere: server and agent logs, the audit trail.
    assert password not in kenny.logs()
    assert "e2e s3cret" not in kenny.logs()
    audit = kenny.audit(agent_id="pc-acc", limit=200)
    assert any(row.get("tool") == "account_create" for row in audit), audit[:3]
    assert password not in repr(audit) and "e2e s3cret" not in repr(audit)
    # And the host's own account files never changed.
    assert _digests(Path("/etc")) == host_before
    assert not (Path("/home") / "visitor").exists()
