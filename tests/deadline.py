"""A real-time bound for code that could hang or livelock: under a virtual clock a
livelock stops time itself, so ``trio.fail_after`` alone cannot catch it."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["Hang", "wall_deadline"]


class Hang(BaseException):
    """The code under test ran past its wall-clock deadline. A BaseException, so that no
    ``except Exception`` in the code under test swallows it."""


@contextmanager
def wall_deadline(seconds: float) -> Iterator[None]:
    """Raise ``Hang`` in the main thread if the block runs longer than ``seconds`` of
    real time (SIGALRM: main thread only, Unix only, which the suite is)."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise Hang(f"still running after {seconds:g} s of real time: a hang or a livelock")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
