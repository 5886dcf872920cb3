"""The cyclic garbage collector, kept out of the way of a tick's calls.

CPython runs a *full* collection — every container object in the process, scanned —
once enough objects have survived into its oldest generation (more than a quarter of
those already there). While a tick's calls are out, each call is a live trio task with
its coroutines, a few dozen tracked objects that live as long as the tick: at 10,000
agents that is hundreds of thousands of objects surviving the young generations, and
the full collections they trigger scan them again and again. Measured with the scale
suite (``manor bench --suite scale``), that doubled the CPU time of a call from 100 to
10,000 agents, and it is the whole of the growth: with full collections held off, a
call costs about the same at 100,000 agents as at 100.

Those objects do not need the collector: they are freed by reference counting when
their calls end. So while a tick's calls are out, full collections wait. Young
collections still run (cyclic garbage that dies young is collected as before), and the
full collection that came due runs as soon as the tick's calls are done (the first
young collection after them, applying the tick, starts it), over a heap the finished
calls no longer fill. What game engines do with their frames: no full collection in
the middle of one.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["full_collections_deferred"]

#: The oldest generation's threshold while deferred: never reached in a tick.
_NEVER = 2**31 - 1

# Ticks of several loops (a fleet) overlap in one process: the first in sets the
# threshold aside, the last out puts it back.
_deferred = 0
_saved_threshold = 0


@contextmanager
def full_collections_deferred() -> Iterator[None]:
    """No full collection of the cyclic garbage collector inside the block (young
    collections go on); the collector's own threshold again after it. Nests, and
    overlaps across tasks."""
    global _deferred, _saved_threshold
    if not _deferred:
        young, middle, _saved_threshold = gc.get_threshold()
        gc.set_threshold(young, middle, _NEVER)
    _deferred += 1
    try:
        yield
    finally:
        _deferred -= 1
        if not _deferred:
            young, middle, _ = gc.get_threshold()
            gc.set_threshold(young, middle, _saved_threshold)
