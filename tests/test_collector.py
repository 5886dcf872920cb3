"""The cyclic garbage collector held off while a tick's calls are out (manor/collector.py):
what keeps the cost of a call flat from 100 to 100,000 agents."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

import pytest
import trio
import trio.testing
from scenes_fixture import fixed_scene, make_engine

from manor.calls import Request
from manor.records import CallRecord, StoryEntry, TickRecord
from manor.tick.gc_pause import full_collections_deferred
from manor.tick.instruments import Instrument


@pytest.fixture
def full_collections() -> Iterator[list[str]]:
    """Appended to at the start of every full collection of the cyclic collector."""
    started: list[str] = []

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            started.append(phase)

    gc.collect()  # start from an empty oldest-generation backlog
    gc.callbacks.append(callback)
    try:
        yield started
    finally:
        gc.callbacks.remove(callback)


class _ManyLiveObjects(Instrument):
    """While the tick's calls are out, as many live container objects as the process
    holds already, as a tick of very many agents makes: enough to make a full collection
    due. Records whether one started while they lived, and the threshold then."""

    def __init__(self, full_collections: list[str]) -> None:
        self._full_collections = full_collections
        self.during: list[str] | None = None
        self.threshold_in_tick: tuple[int, int, int] | None = None
        self._alive: list[list[int]] = []

    def call_started(self, request: Request) -> None:
        if not self._alive:
            count = max(200_000, len(gc.get_objects()))
            before = len(self._full_collections)
            self._alive = [[i] for i in range(count)]
            self.during = self._full_collections[before:]
            self.threshold_in_tick = gc.get_threshold()

    def tick_finished(self, record: TickRecord, story: list[StoryEntry]) -> None:
        self._alive = []


class TestFullCollectionsDeferred:
    """No full collection in the middle of a tick; the collector's own settings after."""

    def test_a_tick_full_of_live_objects_triggers_no_full_collection(self, full_collections: list[str]) -> None:
        """Without the deferral, the objects a big tick keeps alive start full
        collections that scan them all (the scale suite's per-call growth)."""
        threshold = gc.get_threshold()
        many = _ManyLiveObjects(full_collections)
        engine = make_engine(fixed_scene(), instruments=[many])
        trio.run(engine.loop.step, clock=trio.testing.MockClock(autojump_threshold=0))
        assert many.during == []
        assert many.threshold_in_tick is not None and many.threshold_in_tick[:2] == threshold[:2]
        assert gc.get_threshold() == threshold

    def test_the_same_objects_outside_a_tick_do_trigger_one(self, full_collections: list[str]) -> None:
        """The check above can fail: the collector does run full collections for them."""
        alive = [[i] for i in range(max(200_000, len(gc.get_objects())))]
        assert full_collections
        del alive

    def test_nested_and_overlapping_deferrals_restore_the_threshold_once_all_end(self) -> None:
        """Ticks of several loops overlap in one process (a fleet)."""
        threshold = gc.get_threshold()
        outer = full_collections_deferred()
        outer.__enter__()
        inner = full_collections_deferred()
        inner.__enter__()
        outer.__exit__(None, None, None)  # the first to start ends first
        assert gc.get_threshold()[2] != threshold[2]
        inner.__exit__(None, None, None)
        assert gc.get_threshold() == threshold

    def test_the_threshold_is_restored_when_the_block_raises(self) -> None:
        threshold = gc.get_threshold()
        with pytest.raises(RuntimeError), full_collections_deferred():
            raise RuntimeError("boom")
        assert gc.get_threshold() == threshold

    def test_records_are_the_same_with_and_without_the_deferral(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """It changes when memory is scanned, never what a tick does."""

        def calls() -> list[tuple[CallRecord, ...]]:
            engine = make_engine(fixed_scene())

            async def main() -> list[tuple[CallRecord, ...]]:
                return [(await engine.loop.step()).calls for _ in range(3)]

            return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))

        deferred = calls()
        monkeypatch.setattr("manor.tick.loop.full_collections_deferred", contextlib.nullcontext)
        assert calls() == deferred
