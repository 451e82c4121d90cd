"""A throwaway PostgreSQL for the end-to-end suite run against the second backend
(`KENNY_TEST_DATABASE=postgres`): Debian's binaries, a data directory under /tmp,
127.0.0.1 on a free port, run as the `postgres` account when the tests run as root
(PostgreSQL refuses root), stopped by its PID at the end of the session. Each test's
kenny gets a database of its own."""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

SUPERUSER = "kenny"


def bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    def __init__(self) -> None:
        bins = bin_dir()
        if bins is None:
            raise RuntimeError("PostgreSQL is not installed (Debian: apt-get install postgresql)")
        self.bins = bins
        self.dir = Path(tempfile.mkdtemp(prefix="kenny-e2e-pg-"))
        self.user = "postgres" if os.geteuid() == 0 else None
        if self.user:
            account = pwd.getpwnam(self.user)
            os.chown(self.dir, account.pw_uid, account.pw_gid)
        data = self.dir / "data"
        subprocess.run(
            [str(bins / "initdb"), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--no-sync", "-D", str(data)],
            check=True, capture_output=True, user=self.user, cwd=self.dir,
        )
        self.port = _free_port()
        self.log = self.dir / "postgres.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    str(bins / "postgres"), "-D", str(data), "-p", str(self.port), "-k", str(self.dir),
                    "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
                    "-c", "full_page_writes=off", "-c", "max_connections=500",
                    # A suite's worth of databases: keep the WAL from growing to 1 GB.
                    "-c", "max_wal_size=128MB",
                ],
                stdout=log, stderr=log, user=self.user, cwd=self.dir,
            )
        deadline = time.monotonic() + 30
        while self._psql("postgres", "SELECT 1").returncode != 0:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not start:\n{self.log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)

    def _psql(self, database: str, sql: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.bins / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER, "-d", database,
             "-v", "ON_ERROR_STOP=1", "-q", "-c", sql],
            capture_output=True, text=True,
        )

    def new_database(self) -> str:
        """A fresh, empty database; its URL."""
        name = "t_" + secrets.token_hex(6)
        done = self._psql("postgres", f'CREATE DATABASE "{name}"')
        assert done.returncode == 0, done.stderr
        return f"postgres://{SUPERUSER}@127.0.0.1:{self.port}/{name}"

    def drop_database(self, url: str) -> None:
        """Drops a database `new_database` made, so a whole suite's worth of them does
        not fill the disk; connections left to it are ended."""
        name = url.rsplit("/", 1)[1]
        done = self._psql("postgres", f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        assert done.returncode == 0, done.stderr

    def run(self, url: str, query: str, params: tuple = ()) -> list[tuple]:
        """One statement on the database at `url`, its `?` parameters written in as
        literals (test values only); the rows, integers as ints."""
        parts = query.split("?")
        assert len(parts) == len(params) + 1, f"{len(params)} parameters for {query!r}"
        sql = parts[0]
        for value, rest in zip(params, parts[1:]):
            if value is None:
                literal = "NULL"
            elif isinstance(value, (int, float)):
                literal = str(value)
            else:
                literal = "'" + str(value).replace("'", "''") + "'"
            sql += literal + rest
        database = url.rsplit("/", 1)[1]
        done = subprocess.run(
            [str(self.bins / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER, "-d", database,
             "-v", "ON_ERROR_STOP=1", "-q", "-At", "-F", "\x1f", "-c", sql],
            capture_output=True, text=True,
        )
        assert done.returncode == 0, f"{sql}: {done.stderr}"
        rows = []
        for line in done.stdout.splitlines():
            rows.append(tuple(int(f) if f.lstrip("-").isdigit() else f for f in line.split("\x1f")))
        return rows

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)
