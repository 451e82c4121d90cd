"""`kenny-server install` staged under a private root (this machine does not run
systemd, and a test must not install services on it), and the settings file it writes,
read by `serve --config` with flags and KENNY_* variables overriding it."""

from __future__ import annotations

import stat
import subprocess

import httpx

from conftest import SERVER_BIN


def _server(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(SERVER_BIN), *args], capture_output=True, text=True, timeout=60, env=env)


def test_install_stages_the_binary_a_settings_file_and_a_sandboxed_unit(tmp_path):
    root = tmp_path / "root"
    res = _server("install", "--root", str(root), "--listen", "0.0.0.0:8443", "--public-url", "https://kenny.example.com")
    assert res.returncode == 0, res.stderr
    assert "nothing was started" in res.stdout, res.stdout
    binary = root / "usr/local/bin/kenny-server"
    settings = root / "etc/kenny/server.toml"
    unit = root / "etc/systemd/system/kenny-server.service"
    assert binary.read_bytes() == SERVER_BIN.read_bytes() and binary.stat().st_mode & 0o111
    assert stat.S_IMODE(settings.stat().st_mode) == 0o640
    text = settings.read_text()
    for line in ('listen = "0.0.0.0:8443"', 'data_dir = "/var/lib/kenny"', 'public_url = "https://kenny.example.com"'):
        assert f"\n{line}\n" in text, text
    unit_text = unit.read_text()
    for line in ("User=kenny", "ExecStart=/usr/local/bin/kenny-server serve --config /etc/kenny/server.toml",
                 "StateDirectory=kenny", "ProtectSystem=strict", "Restart=on-failure"):
        assert f"\n{line}\n" in unit_text, unit_text

    # A second install keeps the administrator's settings.
    settings.write_text(text + "heartbeat_secs = 30\n")
    res = _server("install", "--root", str(root))
    assert res.returncode == 0 and "kept the settings" in res.stdout, res
    assert "heartbeat_secs = 30" in settings.read_text()


def test_serve_reads_its_settings_file_and_flags_and_variables_win(tmp_path):
    conf = tmp_path / "server.toml"
    conf.write_text(f'listen = "127.0.0.1:0"\ndata_dir = "{tmp_path / "data"}"\npublic_url = "https://from-the-file.example"\n')
    env = {"PATH": "/usr/bin:/bin", "KENNY_PUBLIC_URL": "https://from-the-env.example"}
    proc = subprocess.Popen([str(SERVER_BIN), "serve", "--config", str(conf), "--heartbeat-secs", "7"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line.startswith("kenny-server listening on http://127.0.0.1:"), line
        base = line.split()[-1]
        meta = httpx.get(f"{base}/.well-known/oauth-protected-resource/mcp", timeout=10).json()
        assert meta["resource"].startswith("https://from-the-env.example"), meta
        assert (tmp_path / "data" / "kenny.db").exists(), "the data directory came from the file"
    finally:
        proc.terminate()
        proc.wait(timeout=15)

    # A typo in the file, a value out of range, a missing file: refused with what to do.
    conf.write_text('public_ulr = "x"\n')
    res = _server("serve", "--config", str(conf))
    assert res.returncode != 0 and "`public_ulr` is not a setting" in res.stderr and "public_url" in res.stderr, res.stderr
    conf.write_text("heartbeat_secs = 0\n")
    res = _server("serve", "--config", str(conf))
    assert res.returncode != 0 and "heartbeat-secs" in res.stderr and "1..=3600" in res.stderr, res.stderr
    res = _server("serve", "--config", str(tmp_path / "missing.toml"))
    assert res.returncode != 0 and "cannot read the settings file" in res.stderr, res.stderr
