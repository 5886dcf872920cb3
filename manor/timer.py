"""A sleep to an instant that ends without raising ``Cancelled`` at that instant.

``trio.sleep_until`` is a cancel scope with the deadline around a wait that only a
cancellation ends: when the deadline comes, trio cancels the scope, builds a
``Cancelled``, throws it into the task and catches it again at the scope. Under the
virtual clock a simulated call is that one timer, and the exception's round trip was
about 5 µs of the call's 81 (``manor bench --suite fastforward``). ``sleep_until``
here reschedules the task plainly when its deadline comes.

It ends exactly as ``trio.sleep_until`` does, at the same instant, and a cancellation
from outside ends it with ``Cancelled`` as before. Even at a tie: when an enclosing
scope's deadline is the same instant (a tick's deadline, a timeout), trio cancels both
scopes before any task runs, in an order of its own; whichever comes first, the
``Cancelled`` of the enclosing scope is raised, as it is from ``trio.sleep_until``
(there the enclosing scope's cancellation is the one that shows, whatever the order).

Under the virtual clock a call's whole wait is this one timer, and the cancel scope
around it was the costliest part of a simulated call that Manor adds: a scope built,
entered (a cancel status made, linked into the task's, the deadline registered through
a context manager) and exited again, and at its instant cancelled (a reason, the
status's tasks walked, an abort). So in a run of trio's own, not hosted in another
loop's (guest mode), the timer is put on trio's deadline heap directly: an entry that
looks there as a cancel scope does (its registered deadline, ``_cancel`` when it comes)
and, when it comes, reschedules the task as the scope's abort did. The task waits in
the scope of its caller, so an enclosing scope's cancellation reaches it as before, and
either way the sleep ends as it did: woken plainly, then ``checkpoint_if_cancelled``.
trio's heap takes any such entry (it reads those two names, hashes it, orders it by the
entry's ``id`` at a tie as it orders scopes); a trio whose run keeps its deadlines
elsewhere gets the scope (benchmarks/notes/sim_draws.md).
"""

from __future__ import annotations

from math import inf, isfinite

import trio

try:
    from trio._core._run import GLOBAL_RUN_CONTEXT
except ImportError:  # pragma: no cover - trio moved it: every sleep is a scope's
    GLOBAL_RUN_CONTEXT = None

__all__ = ["sleep_until"]


@trio.lowlevel.enable_ki_protection
async def sleep_until(deadline: float) -> None:
    """``trio.sleep_until(deadline)``, woken at the deadline without a ``Cancelled``.

    Raises:
        Cancelled: an enclosing scope was cancelled before the deadline, or at it.
    """
    task = trio.lowlevel.current_task()

    def wake(raise_cancel: object) -> trio.lowlevel.Abort:
        # Whatever cancelled: its own deadline, or an enclosing scope.
        trio.lowlevel.reschedule(task)
        return trio.lowlevel.Abort.FAILED

    runner = _runner()
    if runner is not None and isfinite(deadline):
        timer = _Timer(deadline, task, runner.deadlines)

        def withdraw(raise_cancel: object) -> trio.lowlevel.Abort:
            timer.withdraw()
            return wake(raise_cancel)

        await trio.lowlevel.wait_task_rescheduled(withdraw)
    else:
        with trio.CancelScope(deadline=deadline):
            await trio.lowlevel.wait_task_rescheduled(wake)
    # Outside its own scope, the Cancelled of an enclosing one, if it was cancelled
    # too (before the deadline, or at it: then whichever trio cancelled first).
    await trio.lowlevel.checkpoint_if_cancelled()


def _runner() -> object | None:
    """This run's runner, if its deadlines can take a ``_Timer``: trio's, not a guest."""
    if GLOBAL_RUN_CONTEXT is None:
        return None  # pragma: no cover
    runner = GLOBAL_RUN_CONTEXT.runner
    return None if runner.is_guest or not hasattr(runner, "deadlines") else runner


class _Timer:
    """A sleep's entry in trio's deadline heap, where a cancel scope's would be: what
    the heap reads of a scope (``_registered_deadline``: ``inf`` once it no longer
    counts) and what it calls at the deadline (``_cancel``), which wakes the sleeper.
    Added when made; it counts in the heap's ``_active`` until it fires or is
    withdrawn, as a scope's deadline counts until it is cancelled or exited."""

    __slots__ = ("_registered_deadline", "deadlines", "task")

    def __init__(self, deadline: float, task: trio.lowlevel.Task, deadlines: object) -> None:
        self._registered_deadline, self.task, self.deadlines = deadline, task, deadlines
        deadlines.add(deadline, self)  # type: ignore[attr-defined]

    def _cancel(self, reason: object = None) -> None:
        """The deadline came: trio's heap calls it as a scope's ``_cancel(reason)``
        (an older trio's, which ``trio>=0.27`` allows, as its ``cancel()``)."""
        self.withdraw()
        trio.lowlevel.reschedule(self.task)

    cancel = _cancel

    def withdraw(self) -> None:
        """No longer counted: the heap drops the entry when it meets it."""
        if self._registered_deadline != inf:
            self.deadlines.remove(self._registered_deadline, self)  # type: ignore[attr-defined]
            self._registered_deadline = inf
