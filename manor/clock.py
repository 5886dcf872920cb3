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

A read is one Python call: trio's two clocks are read here by their own formulas
(``SystemClock``: its offset plus ``perf_counter``; ``MockClock``: its virtual base plus
its rate times the real time since its real base), where their ``current_time``
methods would be one frame more (two for ``MockClock``) at each of a call's reads. The
same arithmetic in the same order, so the same float to the bit
(``tests/test_clock.py`` checks it against each clock's own reading, a jump and a
change of rate included). The dashboard's ``PacedClock`` is read so too while no step
of its time is due (its time is where it stands), and asked while one is; a clock of
any other kind, or a trio whose clocks are no longer built so, is asked.
"""

from __future__ import annotations

from contextvars import ContextVar
from time import perf_counter

import trio

from .paced_clock import PacedClock

try:
    from trio._core import MockClock, wait_all_tasks_blocked
except ImportError:  # pragma: no cover - trio moved them: the public, slower, way
    from trio.testing import MockClock, wait_all_tasks_blocked
try:
    from trio._core._run import SystemClock
except ImportError:  # pragma: no cover - trio moved it: every clock is asked
    SystemClock = None

__all__ = ["MockClock", "current_time", "jumps_to_deadlines", "read_clock_directly", "wait_all_tasks_blocked"]

#: How the run's clock is read: by trio's formula for its system clock (``_SYSTEM``) or
#: its mock clock (``_MOCK``), by where a ``PacedClock`` stands (``_PACED``), or by
#: asking it (``_ASK``); and the clock (``None``:
#: ``trio.current_time``, outside a tick's tasks).
_SYSTEM, _MOCK, _PACED, _ASK = 0, 1, 2, 3
_read: ContextVar[tuple[int, trio.abc.Clock | None]] = ContextVar("manor_clock", default=(_ASK, None))

# The attributes ``MockClock.current_time`` reads; a trio whose mock clock has other
# ones has its mock clocks asked. (The formulas are this trio's, 0.35; a test checks them.)
_MOCK_STATE = ("_virtual_base", "_rate", "_real_clock", "_real_base")


def current_time() -> float:
    """The current time of the run: ``trio.current_time()``."""
    how, clock = _read.get()
    if how == _SYSTEM:
        return clock.offset + perf_counter()  # type: ignore[union-attr]
    if how == _MOCK:
        return clock._virtual_base + clock._rate * (clock._real_clock() - clock._real_base)  # type: ignore[union-attr]
    if how == _PACED and clock._pending is None:  # type: ignore[union-attr]
        return clock._now  # type: ignore[union-attr]
    return trio.current_time() if clock is None else clock.current_time()


def jumps_to_deadlines(clock: trio.abc.Clock) -> bool:
    """Whether ``clock`` may move on its own to the next deadline when every task sleeps
    (trio's ``MockClock`` does, with autojump): true of any clock but trio's system
    clock, as far as anyone can tell. On such a clock a deadline left standing moves
    time; on the system clock it only wakes its task."""
    return SystemClock is None or type(clock) is not SystemClock


def read_clock_directly() -> None:
    """From here on, in this task and the tasks it starts, ``current_time`` reads the
    run's clock itself."""
    _read.set(_reading(trio.lowlevel.current_clock()))


def _reading(clock: trio.abc.Clock) -> tuple[int, trio.abc.Clock]:
    """How ``current_time`` reads ``clock``: by trio's formula if it is one of trio's
    two clocks, reading as trio defines it, with the state the formula reads (not a
    subclass, which may read otherwise, nor one whose reading was replaced, on it or on
    its class)."""
    # Asked of its bound method, not of its ``__dict__``: reading that would make every
    # later look-up of the clock's attributes slower (CPython's inline attribute values
    # give way to the dict), trio's own included.
    read = getattr(clock.current_time, "__func__", None)
    kind = type(clock)
    if read is _SYSTEM_READ and kind is SystemClock and hasattr(clock, "offset"):
        return _SYSTEM, clock
    if read is _MOCK_READ and kind is MockClock and all(hasattr(clock, name) for name in _MOCK_STATE):
        return _MOCK, clock
    if read is _PACED_READ and kind is PacedClock:
        return _PACED, clock
    return _ASK, clock


# How trio's two clocks read, as this module repeats it (``current_time``).
_SYSTEM_READ = None if SystemClock is None else SystemClock.current_time
_MOCK_READ = MockClock.current_time
_PACED_READ = PacedClock.current_time
