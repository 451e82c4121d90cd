"""`kenny-agent install` / `uninstall`, staged under a private root (this machine does
not run systemd, and a test must not install services on it): the files it writes are
checked, and the installed binary, started with the written settings file alone,
connects and serves calls."""

from __future__ import annotations

import filecmp
import os
import stat
import subprocess

from conftest import AGENT_BIN, call, expect_error, shell_stdout


def _agent(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(AGENT_BIN), *args], capture_output=True, text=True, timeout=60)


async def test_install_writes_a_service_that_runs_and_uninstall_removes_it(kenny, tmp_path):
    creds = kenny.add_agent("pc-svc")
    root = tmp_path / "root"
    res = _agent(
        "install", "--root", str(root),
        "--server", kenny.base_url, "--agent-id", "pc-svc",
        "--server-pubkey", creds["server_pubkey"], "--enroll-token", creds["token"],
    )
    assert res.returncode == 0, res.stderr
    assert "not started" in res.stdout, res.stdout

    binary = root / "usr/local/bin/kenny-agent"
    config = root / "etc/kenny-agent/agent.env"
    unit = root / "etc/systemd/system/kenny-agent.service"
    assert filecmp.cmp(binary, AGENT_BIN, shallow=False) and binary.stat().st_mode & 0o111
    assert stat.S_IMODE(config.stat().st_mode) == 0o600, oct(config.stat().st_mode)
    settings = config.read_text()
    assert f"KENNY_ENROLL_TOKEN={creds['token']}\n" in settings and f"KENNY_SERVER={kenny.base_url}\n" in settings
    unit_text = unit.read_text()
    for line in (
        "ExecStart=/usr/local/bin/kenny-agent run --config /etc/kenny-agent/agent.env",
        "Restart=always",
        "WantedBy=multi-user.target",
    ):
        assert f"\n{line}\n" in unit_text, unit_text
    assert stat.S_IMODE((root / "var/lib/kenny-agent").stat().st_mode) == 0o700
    # The remote-control switch belongs to the people at the PC: any local user may flip it.
    assert stat.S_IMODE((root / "var/lib/kenny-agent-switch").stat().st_mode) == 0o1777
    assert "KENNY_SWITCH_DIR=/var/lib/kenny-agent-switch\n" in settings

    # What the unit would start, with only the settings file (state kept in the test dir).
    switch = tmp_path / "switch"
    kenny._spawn(
        "agent-svc",
        [str(binary), "run", "--config", str(config), "--state-dir", str(tmp_path / "state"), "--switch-dir", str(switch)],
    )
    await kenny.wait_agents(["pc-svc"])
    async with kenny.mcp() as client:
        assert shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-svc", "command": "echo via-service"})) == "via-service\n"
        # The settings file's secrets are not handed down to the programs the agent runs.
        env = shell_stdout(await call(client, "shell_exec", {"agent_id": "pc-svc", "command": "env"}))
        assert creds["token"] not in env and "KENNY_ENROLL_TOKEN" not in env, env
        assert _agent("remote-control", "off", "--switch-dir", str(switch)).returncode == 0
        expect_error(await call(client, "shell_exec", {"agent_id": "pc-svc", "command": "true"}), "disabled")

    res = _agent("uninstall", "--root", str(root))
    assert res.returncode == 0, res.stderr
    assert not unit.exists() and not binary.exists()
    assert config.exists(), "settings and the agent's key stay unless --purge"
    res = _agent("uninstall", "--root", str(root), "--purge")
    assert res.returncode == 0, res.stderr
    assert not config.exists() and not (root / "var/lib/kenny-agent").exists()
    assert not (root / "var/lib/kenny-agent-switch").exists()


def test_install_refuses_bad_settings_before_writing_anything(tmp_path):
    root = tmp_path / "root"
    res = _agent(
        "install", "--root", str(root), "--server", "http://kenny.example.com",
        "--agent-id", "pc", "--server-pubkey", "a2V5", "--enroll-token", "t",
    )
    assert res.returncode != 0 and "--allow-plaintext" in res.stderr, res.stderr
    res = _agent(
        "install", "--root", str(root), "--server", "https://kenny.example.com",
        "--agent-id", "pc $HOME", "--server-pubkey", "a2V5",
    )
    assert res.returncode != 0 and "KENNY_AGENT_ID" in res.stderr, res.stderr
    assert not root.exists(), "nothing may be written for refused settings"


def test_a_settings_file_with_unknown_keys_is_refused(tmp_path):
    config = tmp_path / "agent.env"
    config.write_text("KENNY_SERVER=http://127.0.0.1:9\nKENNY_AGNET_ID=typo\n")
    res = _agent("run", "--config", str(config))
    assert res.returncode != 0
    assert "line 2" in res.stderr and '"KENNY_AGNET_ID" is not a kenny agent setting' in res.stderr, res.stderr


def test_install_takes_the_enrollment_token_from_a_file_or_the_environment(tmp_path):
    """The token reaches the private settings file, never the service's command line,
    and need not pass through install's own command line either."""
    token_file = tmp_path / "token"
    token_file.write_text("kenny_agt_fromfile123\n")
    token_file.chmod(0o600)
    common = ["install", "--server", "https://kenny.example.com", "--agent-id", "pc", "--server-pubkey", "a2V5"]
    for name, extra, env in [
        ("file", ["--enroll-token-file", str(token_file)], {}),
        ("env", [], {"KENNY_ENROLL_TOKEN": "kenny_agt_fromenv456"}),
    ]:
        root = tmp_path / name
        res = subprocess.run(
            [str(AGENT_BIN), *common, "--root", str(root), *extra],
            capture_output=True, text=True, timeout=60, env={**os.environ, **env},
        )
        assert res.returncode == 0, res.stderr
        assert "command line" not in res.stderr, res.stderr
        settings = (root / "etc/kenny-agent/agent.env").read_text()
        token = "kenny_agt_fromfile123" if name == "file" else "kenny_agt_fromenv456"
        assert f"KENNY_ENROLL_TOKEN={token}\n" in settings, settings
        assert token not in (root / "etc/systemd/system/kenny-agent.service").read_text()
    res = _agent(*common, "--root", str(tmp_path / "argv"), "--enroll-token", "kenny_agt_onargv")
    assert res.returncode == 0 and "--enroll-token was given on the command line" in res.stderr, res.stderr
