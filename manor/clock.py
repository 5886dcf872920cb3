"""The run's clock, read in one call.

``trio.current_time()`` finds the clock through the run on every read: two calls more
than asking the clock itself. A call through the stack reads the time about ten times
(queued, admitted, its timeout, the observers' before and after, finished), so the tick
loop has the tasks of its ticks read the run's clock directly (``read_clock_directly``),
and the hot paths read it through ``current_time``. Either way the value is the run
clock's: the same, to the bit. Elsewhere ``current_time`` is ``trio.current_time``.

The clock's reader lives in a context variable, so it is the task's own: trio copies a
task's context into the tasks it starts, and no task outlives its run.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

import trio

__all__ = ["current_time", "read_clock_directly"]

_read: ContextVar[Callable[[], float]] = ContextVar("manor_clock", default=trio.current_time)


def current_time() -> float:
    """The current time of the run: ``trio.current_time()``."""
    return _read.get()()


def read_clock_directly() -> None:
    """From here on, in this task and the tasks it starts, ``current_time`` asks the
    run's clock itself."""
    _read.set(trio.lowlevel.current_clock().current_time)
