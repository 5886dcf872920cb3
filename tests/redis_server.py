"""A real ``redis-server`` on a free loopback port, started and stopped by the tests.

Nothing is written to disk (no RDB, no AOF), so a server killed and started again on the
same port comes back empty, as a crashed Redis without persistence does.

Under pytest-xdist each worker takes its ports from a class of its own (port modulo the
number of workers), so two workers never pick the same one, not even the port of a
server one of them has killed and will start again. A port another program takes
meanwhile is found out (the server that answers must be this one) and another is tried.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import time

import attrs

__all__ = ["SEEN_WITHIN_S", "RedisServer", "free_port"]


#: How long a change to a shared gate (its size) may take to reach every process: the
#: gate's poll (``redis_gate.POLL_S``, 1 s), and room for a loaded machine that runs
#: the poll late (a grace of 1.5 s was missed under load). A change never seen still fails.
SEEN_WITHIN_S = 6.0
#: Where the ports are drawn from: the kernel's usual ephemeral range.
_PORTS = range(32768, 61000)
#: Its own generator: the tests' seeding of ``random`` does not make workers' draws alike.
_DRAWS = random.Random()


def _worker() -> tuple[int, int]:
    """This pytest-xdist worker's number and the number of workers ((0, 1) without xdist)."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(name.removeprefix("gw")), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


def free_port() -> int:
    """A loopback port nothing listens on now, of this worker's class."""
    worker, workers = _worker()
    while _taken(port := _DRAWS.randrange(_PORTS.start + worker, _PORTS.stop, workers)):
        pass
    return port


@attrs.define
class RedisServer:
    """One ``redis-server`` process on 127.0.0.1:``port``."""

    port: int = attrs.field(factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    #: Whether it has run (a server started again keeps its port).
    ran: bool = False

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        """Start it and wait until it answers. If another program has taken the port
        before the server first ran, start it on another.

        Raises:
            RuntimeError: ``redis-server`` is not installed (CI installs it: .ci/run),
                does not come up, or finds its port taken when started again.
        """
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed: apt-get install -y redis-server (.ci/run does)")
        for _ in range(10):
            if self._started(binary):
                self.ran = True
                return self
            if self.ran:
                raise RuntimeError(f"port {self.port} was taken by another program while redis-server was down")
            self.port = free_port()
        raise RuntimeError("redis-server found every port it tried taken")

    def _started(self, binary: str) -> bool:
        """Whether a server of its own now answers on ``port`` (False: the port is taken).

        Raises:
            RuntimeError: it did not come up for another reason.
        """
        argv = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--protected-mode", "no"]
        process = self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if process.poll() is not None:
                self.process = None
                if _taken(self.port):
                    return False
                raise RuntimeError(f"redis-server exited at once with status {process.returncode} (port {self.port})")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as connection:
                    connection.sendall(b"INFO server\r\n")
                    answer = _read_reply(connection)
            except OSError:
                answer = b""
            if f"process_id:{process.pid}\r\n".encode() in answer:
                return True
            # Not up yet; or another program's server answered, and ours is about to
            # find its port taken.
            time.sleep(0.02)
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def kill(self) -> None:
        """``kill -9``: gone at once, its data with it."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


def _taken(port: int) -> bool:
    """Whether something listens on the loopback ``port``."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False


def _read_reply(connection: socket.socket) -> bytes:
    """One bulk-string reply (``$LEN\\r\\n...\\r\\n``), whole."""
    reply = b""
    while True:
        chunk = connection.recv(65536)
        if not chunk:
            return reply
        reply += chunk
        header, _, body = reply.partition(b"\r\n")
        if header.startswith(b"$") and len(body) >= int(header[1:]) + 2:
            return reply
        if header.startswith(b"-"):
            return reply  # loading, or an error: not ready
