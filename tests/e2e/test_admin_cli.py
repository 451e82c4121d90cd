"""`kenny-server user` and `token` on the data directory of a running server: list,
passwd, disable, enable and delete accounts; list and revoke tokens. What they change
takes effect on the running server (a revoked or disabled user's token stops working
within the server's short token cache)."""

from __future__ import annotations

import subprocess
import time

import httpx

from conftest import SERVER_BIN, _child_env
from signin_helpers import _client, _login


def _cli(kenny, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(SERVER_BIN), *args, "--data-dir", str(kenny.data_dir)], input=input,
                          capture_output=True, text=True, timeout=60, env=_child_env(kenny.store_env()))


def _status_with(kenny, token: str) -> int:
    return httpx.get(f"{kenny.base_url}/api/me", headers={"Authorization": f"Bearer {token}"}, timeout=10).status_code


def _until(kenny, token: str, status: int) -> None:
    """The server caches a token's owner for a few seconds: wait for it to see the change."""
    deadline = time.monotonic() + 20
    while (got := _status_with(kenny, token)) != status:
        assert time.monotonic() < deadline, f"still {got}, wanted {status}"
        time.sleep(0.5)


def test_accounts_and_tokens_are_managed_from_the_command_line(kenny):
    kenny.add_user("bob", "operator", password="bobs first password")
    token = kenny.create_token("bob", label="laptop")
    assert _status_with(kenny, token) == 200

    listed = kenny.admin("user", "list")
    assert "admin\tsuperuser\tactive\thosts=*" in listed and "bob\toperator\tactive\thosts=*\ttokens=1" in listed, listed
    tokens = kenny.admin("token", "list", "bob").strip().splitlines()
    assert len(tokens) == 1 and "\tlaptop\t" in tokens[0] and tokens[0].endswith("\tlive"), tokens
    token_id = tokens[0].split("\t")[0]

    # A new password: the old one stops signing in, the new one does.
    short = _cli(kenny, "user", "passwd", "bob", input="short\n")
    assert short.returncode != 0 and "too short" in short.stderr, short
    assert kenny.admin("user", "passwd", "bob", input="bobs second password\n").startswith("new password set for bob")
    with _client(kenny) as http:
        assert _login(http, "bob", "bobs first password").status_code != 303
    with _client(kenny) as http:
        assert _login(http, "bob", "bobs second password").status_code == 303

    # Disabled: the token stops working; enabled: it works again (it was not revoked).
    assert kenny.admin("user", "disable", "bob").startswith("disabled bob")
    _until(kenny, token, 401)
    assert "bob\toperator\tdisabled" in kenny.admin("user", "list")
    kenny.admin("user", "enable", "bob")
    _until(kenny, token, 200)

    # Revoked: for good.
    assert "revoked token" in kenny.admin("token", "revoke", "bob", token_id)
    _until(kenny, token, 401)
    again = _cli(kenny, "token", "revoke", "bob", token_id)
    assert again.returncode != 0 and "has no live token" in again.stderr, again
    assert "\trevoked 20" in kenny.admin("token", "list", "bob")

    # Deleted; and the last superuser can be neither disabled nor deleted.
    assert kenny.admin("user", "delete", "bob") == "deleted bob\n"
    assert "bob" not in kenny.admin("user", "list")
    for args in (("user", "disable", "admin"), ("user", "delete", "admin")):
        res = _cli(kenny, *args)
        assert res.returncode != 0 and "superuser" in res.stderr, (args, res.stderr)
    missing = _cli(kenny, "user", "disable", "nobody")
    assert missing.returncode != 0 and "nobody" in missing.stderr, missing


def test_backups_refuse_a_postgresql_store(tmp_path):
    """Backups copy the SQLite file; against a PostgreSQL store they would copy an empty
    one. Each refuses before touching anything and names the tool to use instead (no
    PostgreSQL is needed to see it: the refusal comes before connecting)."""
    url = "postgres://kenny@127.0.0.1:1/kenny"
    data = tmp_path / "data"
    runs = {
        "backup": [str(SERVER_BIN), "backup", "--out", str(tmp_path / "b.db"), "--data-dir", str(data)],
        "restore": [str(SERVER_BIN), "restore", str(tmp_path / "b.db"), "--data-dir", str(data)],
        "serve": [str(SERVER_BIN), "serve", "--listen", "127.0.0.1:0", "--data-dir", str(data),
                  "--backup-dir", str(tmp_path / "backups")],
    }
    for name, argv in runs.items():
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                              env=_child_env({"KENNY_DATABASE_URL": url}))
        assert done.returncode != 0, (name, done.stdout, done.stderr)
        assert "pg_dump" in done.stderr and "PostgreSQL" in done.stderr, (name, done.stderr)
        assert url not in done.stderr + done.stdout, "the URL (and any password in it) is never echoed"
    assert not (tmp_path / "b.db").exists() and not (tmp_path / "backups").exists()
