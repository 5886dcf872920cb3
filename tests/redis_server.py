"""A real ``redis-server`` on a free loopback port, started and stopped by the tests.

Nothing is written to disk (no RDB, no AOF), so a server killed and started again on the
same port comes back empty, as a crashed Redis without persistence does.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

import attrs

__all__ = ["RedisServer", "free_port"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@attrs.define
class RedisServer:
    """One ``redis-server`` process on 127.0.0.1:``port``."""

    port: int = attrs.field(factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        """Start it and wait until it answers.

        Raises:
            RuntimeError: ``redis-server`` is not installed (CI installs it: .ci/run) or
                does not come up.
        """
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed: apt-get install -y redis-server (.ci/run does)")
        argv = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--protected-mode", "no"]
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited at once with status {self.process.returncode} (port {self.port})")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as connection:
                    connection.sendall(b"PING\r\n")
                    if connection.recv(64).startswith(b"+PONG"):
                        return self
            except OSError:
                pass
            time.sleep(0.02)
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def kill(self) -> None:
        """``kill -9``: gone at once, its data with it."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None
