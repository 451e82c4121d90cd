"""A throwaway NATS server with JetStream for the cluster tests: Debian's
`nats-server`, on 127.0.0.1 at a free port, its store under /tmp, stopped by its PID."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from postgres_server import _free_port


def binary() -> str | None:
    return shutil.which("nats-server") or (
        "/usr/sbin/nats-server" if Path("/usr/sbin/nats-server").exists() else None
    )



class NatsServer:
    def __init__(self) -> None:
        exe = binary()
        if exe is None:
            raise RuntimeError("nats-server is not installed (Debian: apt-get install nats-server)")
        self.dir = Path(tempfile.mkdtemp(prefix="kenny-e2e-nats-"))
        self.port = _free_port()
        conf = self.dir / "nats.conf"
        # A relayed result may be as large as an agent frame (8 MiB) plus its envelope.
        conf.write_text(
            f'listen: "127.0.0.1:{self.port}"\n'
            "max_payload: 16MB\n"
            f'jetstream {{ store_dir: "{self.dir / "js"}", max_memory_store: 128MB, max_file_store: 128MB }}\n'
        )
        self.log = self.dir / "nats.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([exe, "-c", str(conf)], stdout=log, stderr=log, cwd=self.dir)
        deadline = time.monotonic() + 15
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"nats-server did not start:\n{self.log.read_text(errors='replace')[-2000:]}")
                time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)
