"""The run's clock, read in one call.

``trio.current_time()`` finds the clock through the run on every read: two calls more
than asking the clock itself. A call through the stack reads the time about ten times
(queued, admitted, its timeout, the observers' before and after, finished), so the tick
loop has the tasks of its ticks read the run's clock directly (``read_clock_directly``),
and the hot paths read it through ``current_time``. Either way the value is the run
clock's: the same, to the bit. Elsewhere ``current_time`` is ``trio.current_time``.

The clock's reader lives in a context variable, so it is the task's own: trio copies a
task's context into the tasks it starts, and no task outlives its run.

The virtual clock is trio's ``MockClock``, and the ticket office settles a virtual
instant with ``wait_all_tasks_blocked``: both are ``trio.testing``'s, which imports
pytest wherever pytest is installed (some 85 ms of every start of a process that runs
the engine); this module takes them from where ``trio.testing`` itself does.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

import trio

try:
    from trio._core import MockClock, wait_all_tasks_blocked
except ImportError:  # pragma: no cover - trio moved them: the public, slower, way
    from trio.testing import MockClock, wait_all_tasks_blocked

__all__ = ["MockClock", "current_time", "read_clock_directly", "wait_all_tasks_blocked"]

_read: ContextVar[Callable[[], float]] = ContextVar("manor_clock", default=trio.current_time)


def current_time() -> float:
    """The current time of the run: ``trio.current_time()``."""
    return _read.get()()


def read_clock_directly() -> None:
    """From here on, in this task and the tasks it starts, ``current_time`` asks the
    run's clock itself."""
    _read.set(trio.lowlevel.current_clock().current_time)
