"""A sleep to an instant that ends without raising ``Cancelled`` at that instant.

``trio.sleep_until`` is a cancel scope with the deadline around a wait that only a
cancellation ends: when the deadline comes, trio cancels the scope, builds a
``Cancelled``, throws it into the task and catches it again at the scope. Under the
virtual clock a simulated call is that one timer, and the exception's round trip was
about 5 µs of the call's 81 (``manor bench --suite fastforward``). ``sleep_until``
here keeps the scope — in trio a timer is a cancel scope's deadline, there is no
other — but when its own deadline wakes the task it reschedules the task plainly.

It ends exactly as ``trio.sleep_until`` does, at the same instant, and a cancellation
from outside ends it with ``Cancelled`` as before. Even at a tie: when an enclosing
scope's deadline is the same instant (a tick's deadline, a timeout), trio cancels both
scopes before any task runs, in an order of its own; whichever comes first, the
``Cancelled`` of the enclosing scope is raised, as it is from ``trio.sleep_until``
(there the enclosing scope's cancellation is the one that shows, whatever the order).
"""

from __future__ import annotations

import trio

__all__ = ["sleep_until"]


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

    with trio.CancelScope(deadline=deadline):
        await trio.lowlevel.wait_task_rescheduled(wake)
    # Outside its own scope, the Cancelled of an enclosing one, if it was cancelled
    # too (before the deadline, or at it: then whichever trio cancelled first).
    await trio.lowlevel.checkpoint_if_cancelled()
