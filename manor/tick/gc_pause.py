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

What a run built before its first tick — the interpreter's modules, the scene, the world
and its agents — lives as long as the run: a full collection that walks it finds nothing
to free. Yet it is most of the heap, and a big cast makes full collections come often: a
tick's calls waiting at the gate outlive the young collections, so the collector counts
them as long-lived and, when the tick is over and they are freed, still owes a full
collection. At 10,000 agents that was one full pass over the whole heap a tick, 40 ms,
4 µs a call, where 100 agents run without any. So a run freezes what it built
(``gc.freeze``) while it runs: full collections walk only what the ticks made since.

A fleet runs the ticks of many worlds at once in one process, and a young collection
costs the young objects it finds alive. A call's objects live as long as the call: in a
fleet of N worlds, N times the allocations happen meanwhile, so at the young threshold
of one world (700 allocations) nearly all of them outlive two young collections — each
pass finds nothing to free and walks them all, over a heap whose size grows with the
worlds (a cache miss a reference). Measured with the fleet's CPU a call (``manor bench
--suite fleet``, 256 worlds), the young collections were 20–40 µs of a call against
2.5 at 16 worlds: the largest part of what grows with the worlds. So while N ticks
overlap, the young threshold is N times the collector's own: a call's objects live
through as many young collections as in one world's run, and those that die with their
call die before one finds them. One tick at a time (``manor run``) keeps the
collector's thresholds.

The live dashboard (``manor play``) makes, at every frame, objects that live until the
next: the screen's lines, the story's new lines, the latency panel's figures. A young
collection walks every young object alive, and those survivors go on to the middle
generation, whose passes walk them again, and on to a full pass: flat out, over 60
young passes, 5 middle ones and a full one every 80,000 calls, 0.25-0.34 µs a call. So
while the dashboard runs its young threshold is ten times the collector's
(``set_young_threshold``): 4-5 young passes and nothing older over as many calls,
0.08-0.12 µs a call (benchmarks/notes/dashboard.md).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType

__all__ = ["full_collections_deferred", "set_young_threshold", "what_is_built_frozen"]

#: The oldest generation's threshold while deferred: never reached in a tick.
_NEVER = 2**31 - 1

# Ticks of several loops (a fleet) overlap in one process: the first in sets the
# thresholds aside, each in or out scales the young one to the ticks out, the last out
# puts them back.
_deferred = 0
_saved_threshold: tuple[int, int, int] = (0, 0, 0)


# Named as a function is, like ``contextlib.suppress``: it is used as one.
class full_collections_deferred:
    """No full collection of the cyclic garbage collector inside the block (young
    collections go on, at the collector's young threshold times the blocks open at
    once); the collector's own thresholds again after it. Nests, and overlaps across
    tasks (a fleet's ticks). A class rather than a ``@contextmanager`` generator: the
    tick loop enters it every tick, and a generator's context manager costs twice the
    Python calls."""

    __slots__ = ()

    def __enter__(self) -> None:
        global _deferred, _saved_threshold
        if not _deferred:
            _saved_threshold = gc.get_threshold()
        _deferred += 1
        _scale_young()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None) -> None:
        global _deferred
        _deferred -= 1
        if _deferred:
            _scale_young()
        else:
            gc.set_threshold(*_saved_threshold)


def set_young_threshold(young: int) -> int:
    """The collector's young threshold from now on (as ``gc.set_threshold``, the other
    two kept), also for the ticks under way (``full_collections_deferred`` scales it,
    and gives it back when they end); the threshold it had."""
    global _saved_threshold
    if _deferred:
        before = _saved_threshold[0]
        _saved_threshold = (young, *_saved_threshold[1:])
        _scale_young()
    else:
        threshold = gc.get_threshold()
        before = threshold[0]
        gc.set_threshold(young, *threshold[1:])
    return before


def _scale_young() -> None:
    """The young threshold in proportion to the ticks out at once, and no full collection."""
    young, middle, _ = _saved_threshold
    gc.set_threshold(young * _deferred, middle, _NEVER)


@contextmanager
def what_is_built_frozen() -> Iterator[None]:
    """Everything alive on entry out of the collector's reach inside the block (after
    a collection of the young generations, where what building left behind is): it is
    never walked, nor freed, until the block ends and gives it back. A process that
    froze before (``manor play``) keeps what it froze.

    Not a full collection: in a process that has lived long (a test's, a notebook's) a
    full one walks everything it holds at every run, where the young generations hold
    what the build just left (the peak at 100,000 agents is the same either way); what
    older garbage there is stays frozen with the rest until the block ends."""
    frozen_before = gc.get_freeze_count()
    gc.collect(1)
    gc.freeze()
    try:
        yield
    finally:
        if not frozen_before:
            gc.unfreeze()
