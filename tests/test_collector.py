"""The cyclic garbage collector held off while a tick's calls are out, and kept off what
a run built (manor/tick/gc_pause.py): what keeps the cost of a call flat from 100 to
100,000 agents."""

from __future__ import annotations

import contextlib
import enum
import gc
from collections.abc import Iterator

import pytest
import trio
import trio.testing
from scenes_fixture import fixed_scene, make_engine

from manor.bench.instant import InstantProvider
from manor.bench.suite import BenchContext
from manor.calls import Request
from manor.records import CallRecord, StoryEntry, TickRecord
from manor.run.engine import build_engine
from manor.tick.gc_pause import full_collections_deferred, set_young_threshold, what_is_built_frozen
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

    def test_overlapping_ticks_scale_the_young_threshold_to_their_number(self) -> None:
        """A fleet's calls live through N times the allocations with N ticks out: the
        young collections come N times as far apart, and back as the ticks end."""
        young, middle, _ = threshold = gc.get_threshold()
        with contextlib.ExitStack() as ticks:
            for out in range(1, 4):
                ticks.enter_context(full_collections_deferred())
                assert gc.get_threshold()[:2] == (young * out, middle)
            first = full_collections_deferred()
            first.__enter__()
            first.__exit__(None, None, None)
            assert gc.get_threshold()[:2] == (young * 3, middle)
        assert gc.get_threshold() == threshold

    def test_a_young_threshold_set_during_a_tick_outlives_it(self) -> None:
        """The dashboard sets its own (``set_young_threshold``) between two steps of the
        engine's run, which may be inside a tick: the tick's end gives back the new one,
        not the one it saw on entry."""
        young, middle, full = gc.get_threshold()
        try:
            with full_collections_deferred():
                assert set_young_threshold(young * 10) == young
                assert gc.get_threshold()[:2] == (young * 10, middle)
            assert gc.get_threshold() == (young * 10, middle, full)
            assert set_young_threshold(young) == young * 10
            assert gc.get_threshold() == (young, middle, full)
        finally:
            gc.set_threshold(young, middle, full)

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


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """A process that froze nothing (an earlier test may have left objects frozen)."""
    gc.unfreeze()
    yield
    gc.unfreeze()


class TestWhatIsBuiltFrozen:
    """A run's full collections walk what its ticks made, not the world it built."""

    @pytest.mark.usefixtures("unfrozen")
    def test_a_full_collection_in_a_run_of_a_big_cast_walks_only_what_its_ticks_made(self) -> None:
        """Unfrozen, the oldest generation holds the interpreter, the scene and the
        world: every object of the process; frozen, a small part of it."""
        config, scene = BenchContext().configure({"run.agents": 2_000, "run.policy": "pipeline", "run.order": "fifo"})
        engine = build_engine(config, scene, backend=InstantProvider())
        walked: list[int] = []

        def callback(phase: str, info: dict[str, int]) -> None:
            if phase == "start" and info["generation"] == 2:
                walked.append(len(gc.get_objects(generation=2)))

        async def ticks() -> None:
            for _ in range(3):
                await engine.loop.step()

        built = len(gc.get_objects())
        with what_is_built_frozen():
            gc.callbacks.append(callback)
            try:
                trio.run(ticks, clock=trio.testing.MockClock(autojump_threshold=0))
                gc.collect()  # at least one, after the ticks
            finally:
                gc.callbacks.remove(callback)
        assert built > 10_000 and walked
        assert max(walked) < built / 4, (walked, built)

    @pytest.mark.usefixtures("unfrozen")
    def test_what_was_frozen_is_given_back_after_the_block_even_when_it_raises(self) -> None:
        kept = [[1]]
        with pytest.raises(RuntimeError), what_is_built_frozen():
            assert gc.get_freeze_count() > 0
            raise RuntimeError("boom")
        assert gc.get_freeze_count() == 0 and gc.is_tracked(kept)

    @pytest.mark.usefixtures("unfrozen")
    def test_a_process_that_froze_before_keeps_what_it_froze(self) -> None:
        """``manor play`` freezes what it loaded before its run. (Not the freeze count:
        a frozen object that dies by its references leaves the frozen set, so the count
        can fall by itself; the collector's own generations say whether it came back.)"""
        kept = [[1]]
        gc.freeze()
        with what_is_built_frozen():
            pass
        assert gc.get_freeze_count() > 0 and gc.is_tracked(kept)
        assert not any(o is kept for o in gc.get_objects()), "given back to the collector"


class _Caller(enum.StrEnum):
    CHARACTER = "character"


def test_a_request_is_never_tracked_by_the_collector() -> None:
    """Its fields cannot lead back to it; a world's ``StrEnum`` caller (a tracked
    object) made every request of the Wacky Manor a container the collector walked."""
    request = Request(caller=_Caller.CHARACTER, agent="hobbes", tick=1, prompt="The gong.", shape=CallRecord)
    assert gc.is_tracked(_Caller.CHARACTER) and not gc.is_tracked(request)
