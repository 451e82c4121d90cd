"""Scheduled backups of a running server (`serve --backup-dir`): taken on the interval,
each verified, copied to `--backup-copy-dir`, the oldest pruned to `--backup-keep` in
both places while files kenny did not name stay; owner-only; the newest restores into
a second data directory with what was there before it; a restart does not take an
extra backup; a copy directory that is missing is logged and counted while the local
backups go on; a backup that fails is logged, counted and retried while the server
serves; `/metrics` shows the last success and the failures."""

from __future__ import annotations

import json
import re
import stat
import subprocess
import time
from pathlib import Path

import httpx

from conftest import sqlite_only, SERVER_BIN, Kenny, _child_env

# Backups are copies of the SQLite file; a PostgreSQL store is backed up with pg_dump
# (and `backup`/`restore`/`--backup-dir` refuse it: test_admin_cli.py).
pytestmark = sqlite_only("backups copy the SQLite file")

NAME = re.compile(r"^kenny-\d{8}T\d{6}Z\.kennybackup$")
KEEP = 2
# JSON log lines, so the test reads fields rather than coloured text.
LOG_ENV = {"KENNY_LOG_FORMAT": "json"}


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(SERVER_BIN), *args], capture_output=True, text=True, timeout=60, env=_child_env(), cwd=cwd)


def _events(kenny: Kenny, message: str) -> list[dict]:
    """The server's JSON log events (this run's) whose message starts with `message`."""
    assert kenny.server is not None
    found = []
    for line in kenny.server.err_path.read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if str(event.get("message", "")).startswith(message):
            found.append(event)
    return found


def _wait_for(kenny: Kenny, message: str, count: int, timeout: float = 40.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = _events(kenny, message)
        if len(got) >= count:
            return got
        assert kenny.server is not None and kenny.server.alive(), kenny.logs()
        time.sleep(0.2)
    raise AssertionError(f"fewer than {count} {message!r} log lines within {timeout}s\n{kenny.logs()}")


def _ours(d: Path) -> list[Path]:
    return sorted(p for p in d.iterdir() if NAME.match(p.name))


def _metrics(kenny: Kenny) -> str:
    r = httpx.get(f"{kenny.base_url}/metrics", timeout=10)
    assert r.status_code == 200, r.text
    return r.text


def _gauge(text: str, name: str) -> float:
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert m, f"{name} not in /metrics:\n{text}"
    return float(m.group(1))


def test_backups_on_a_schedule_are_kept_copied_pruned_and_restore(kenny, tmp_path):
    kenny.add_user("made-before", "operator")
    kenny.add_agent("pc-before")
    backups = tmp_path / "backups"  # created by the server
    copies = tmp_path / "nas"
    copies.mkdir()
    # Files kenny did not name, some of them close to its names: never deleted.
    strays = {
        backups: ["notes.txt", "kenny-2026-01-01.db", "kenny-20200101T000000Z.kennybackup.bak"],
        copies: ["README", "my-kenny-20200101T000000Z.kennybackup"],
    }
    backups.mkdir(mode=0o700)
    for d, names in strays.items():
        for n in names:
            (d / n).write_text("not kenny's to delete")
    schedule = ["--backup-dir", str(backups), "--backup-copy-dir", str(copies), "--backup-keep", str(KEEP)]

    kenny.stop_server()
    kenny.start_server(extra_args=[*schedule, "--backup-every-secs", "2"], env=LOG_ENV)
    made = _wait_for(kenny, "scheduled backup written", 3 + KEEP)
    _wait_for(kenny, "scheduled backup copied", 3 + KEEP)
    assert not _events(kenny, "scheduled backup failed") and not _events(kenny, "scheduled backup not copied"), kenny.logs()
    assert all(e.get("bytes", 0) > 0 for e in made), made

    # /metrics: the newest backup's time, no failures.
    text = _metrics(kenny)
    last = _gauge(text, "kenny_backup_last_success_timestamp_seconds")
    assert abs(last - time.time()) < 30, last
    assert _gauge(text, 'kenny_backup_failures_total{stage="backup"}') == 0
    assert _gauge(text, 'kenny_backup_failures_total{stage="copy"}') == 0

    # Stopped, so no backup is half-way while the directories are counted.
    port = kenny.port
    kenny.stop_server()
    for d in (backups, copies):
        kept = _ours(d)
        assert len(kept) == KEEP, (d, sorted(p.name for p in d.iterdir()))
        for n in strays[d]:
            assert (d / n).read_text() == "not kenny's to delete", n
        assert not [p for p in d.iterdir() if p.name.endswith(".part")], "no half-written file left"
        for p in kept:
            assert stat.S_IMODE(p.stat().st_mode) == 0o600, (p, oct(p.stat().st_mode))
            verified = _cli(tmp_path, "verify-backup", str(p))
            assert verified.returncode == 0 and "is a good backup" in verified.stdout, verified.stderr
    assert [p.name for p in _ours(backups)] == [p.name for p in _ours(copies)]
    assert stat.S_IMODE(backups.stat().st_mode) == 0o700
    newest = _ours(copies)[-1]
    assert newest.name == Path(made[-1]["file"]).name

    # The newest copy restores into a second data directory with what came before it.
    second_root = tmp_path / "second"
    second_root.mkdir()
    restored = _cli(second_root, "restore", str(newest), "--data-dir", str(second_root / "data"))
    assert restored.returncode == 0 and "restored" in restored.stdout, restored.stderr
    users = _cli(second_root, "user", "list", "--data-dir", str(second_root / "data"))
    assert users.returncode == 0 and "made-before" in users.stdout, users.stdout + users.stderr
    second = Kenny(second_root)
    try:
        second.start_server()
        second.admin_pat = kenny.admin_pat  # the same accounts and tokens
        with httpx.Client(timeout=10) as http:
            r = http.get(f"{second.base_url}/api/agents", headers={"Authorization": f"Bearer {second.admin_pat}"})
        assert r.status_code == 200 and "pc-before" in r.text, r.text
    finally:
        second.close()

    # A restart with a long interval takes no backup at once: the newest is recent.
    before = [p.name for p in _ours(backups)]
    kenny.start_server(port=port, extra_args=[*schedule, "--backup-every-secs", "3600"], env=LOG_ENV)
    _wait_for(kenny, "scheduled backups are on", 1)
    time.sleep(3)
    assert [p.name for p in _ours(backups)] == before
    assert not _events(kenny, "scheduled backup written")
    # After a restart /metrics still shows the newest backup's time.
    assert _gauge(_metrics(kenny), "kenny_backup_last_success_timestamp_seconds") >= last
    kenny.stop_server()

    # The copy directory is gone (an unmounted disk): each failure is logged with the
    # reason and counted, and local backups go on; kenny does not create it, while a
    # missing backup directory is created, owner-only.
    gone = tmp_path / "unmounted"
    created = tmp_path / "made-by-kenny" / "deeper"
    kenny.start_server(
        port=port,
        extra_args=[
            "--backup-dir", str(created), "--backup-copy-dir", str(gone),
            "--backup-keep", str(KEEP), "--backup-every-secs", "2",
        ],
        env=LOG_ENV,
    )
    failed = _wait_for(kenny, "scheduled backup not copied", 2)
    assert all("does not exist" in e["message"] and str(gone) in e["message"] for e in failed), failed
    assert not gone.exists(), "kenny never creates the copy directory"
    assert _gauge(_metrics(kenny), 'kenny_backup_failures_total{stage="copy"}') >= 2
    kenny.stop_server()
    assert len(_ours(created)) == KEEP
    assert stat.S_IMODE(created.stat().st_mode) == 0o700, oct(created.stat().st_mode)

    # A backup directory that cannot be made (a file is in the way): each failure is
    # logged with the reason and counted, tried again, and the server goes on serving.
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    kenny.start_server(
        port=port, extra_args=["--backup-dir", str(blocker / "backups"), "--backup-every-secs", "1"], env=LOG_ENV
    )
    failed = _wait_for(kenny, "scheduled backup failed", 2)
    assert all("--backup-dir" in e["message"] and str(blocker) in e["message"] for e in failed), failed
    text = _metrics(kenny)
    assert _gauge(text, 'kenny_backup_failures_total{stage="backup"}') >= 2
    assert _gauge(text, "kenny_backup_last_success_timestamp_seconds") == 0
    assert httpx.get(f"{kenny.base_url}/readyz", timeout=5).status_code == 200
    assert blocker.read_text() == ""


def test_scheduled_backup_flags_are_checked(tmp_path):
    """Out-of-range values and a copy directory without a backup directory are refused
    before the server starts, saying what is accepted."""
    data = ["--data-dir", str(tmp_path / "data"), "--listen", "127.0.0.1:0"]
    for bad, says in [
        (["--backup-dir", str(tmp_path / "b"), "--backup-keep", "0"], "1..=1000"),
        (["--backup-dir", str(tmp_path / "b"), "--backup-every-hours", "721"], "1..=720"),
        (["--backup-copy-dir", str(tmp_path / "c")], "--backup-dir"),
    ]:
        cp = _cli(tmp_path, "serve", *data, *bad)
        assert cp.returncode != 0 and says in cp.stderr, (bad, cp.stderr)
