"""Starting a tick's calls one after another, in a fixed order.

trio runs tasks that become runnable together in an order of its own choosing, so
calls spawned together reach the layers above the gate (the breaker's half-open trial,
the cost budget) in that order, not ticket order. ``start_now`` starts one task and
lets it run until it first blocks before returning: started in ticket order, the calls
arrive in ticket order (docs/internals.md, "Determinism").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

__all__ = ["start_now"]


async def start_now(nursery: trio.Nursery, function: Callable[[], Awaitable[object]]) -> None:
    """Start ``function()`` in ``nursery``; return once it has run to its first block.

    What ``nursery.start`` does for a task that reports started on its first line, at
    a fraction of the cost (``start`` opens a nursery of its own per task, which costs
    about as much as a whole call to a zero-latency backend). No time passes.
    """
    started = trio.Event()

    async def run() -> None:
        # set() does not yield: this task runs on until it first blocks, and only
        # then does the parent, woken here, get its turn.
        started.set()
        await function()

    nursery.start_soon(run)
    await started.wait()
