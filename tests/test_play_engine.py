"""The engine side of ``manor play``, host-independent: the tick driver and the paced
clock, under plain ``trio.run`` — no Textual."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import SimpleNamespace

import attrs
import pytest
import trio
import trio.testing
from lost_gate import LOST, LosableGate, LoseGate

from manor.calls import Request
from manor.config import resolve
from manor.config.layering import built_in_source, flags_source, layer_defaults_source
from manor.errors import REASONS, SharedGateError
from manor.paced_clock import PacedClock
from manor.play.speed import SPEEDS, describe, faster, nearest
from manor.play.state import DashboardState
from manor.play.widgets.agents import readable
from manor.records import CallRecord, StoryEntry, TickRecord
from manor.run.engine import Engine, build_engine
from manor.tick.driver import TickDriver
from manor.tick.admitted import Heard
from manor.tick.instruments import Instrument, Instruments
from manor.tick.loop import TickLoop
from manor.tick.statistics import RunStatistics
from manor.worlds import create_world, load_scene
from manor.worlds.manor import CallerKind

LEGACY = {"run.policy": "legacy"}


def engine(settings: Mapping[str, object] | None = None) -> Engine:
    """The Wacky Manor with its own seed and platform limit, and ``settings`` as flags."""
    scene = load_scene("wacky_manor")
    config = resolve(
        [
            built_in_source(),
            layer_defaults_source(),
            flags_source({"platform.limit": 6, "run.seed": scene.spec.seed, **(settings or {})}, {}),
        ]
    )
    return build_engine(config, scene, instruments=[RunStatistics()])


class Ticks(Instrument):
    """Records finished ticks and run_finished calls."""

    def __init__(self) -> None:
        self.ticks: list[int] = []
        self.finished = 0

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        self.ticks.append(record.tick)

    def run_finished(self, loop: TickLoop) -> None:
        self.finished += 1


class TestTickDriver:
    """Run, pause, step: what the dashboard's keys do, without a dashboard."""

    @pytest.mark.trio
    async def test_runs_the_ticks_asked_for_then_finishes(self, autojump_clock: trio.testing.MockClock) -> None:
        """run(3) runs three ticks, reports finished, and calls run_finished once."""
        e = engine()
        ticks = Ticks()
        e.loop.add_instrument(ticks)
        driver = TickDriver(e.loop)
        await driver.run(3)
        assert ticks.ticks == [1, 2, 3]
        assert ticks.finished == 1
        assert driver.statistics().state == "finished"
        assert driver.statistics().ticks == 3

    @pytest.mark.trio
    async def test_paused_runs_nothing_and_a_step_runs_exactly_one(self, autojump_clock: trio.testing.MockClock) -> None:
        """Started paused nothing runs; each step runs one tick and pauses again."""
        e = engine()
        ticks = Ticks()
        e.loop.add_instrument(ticks)
        driver = TickDriver(e.loop, paused=True)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(driver.run)
            await trio.sleep(100)
            assert ticks.ticks == []
            assert driver.statistics().state == "paused"
            driver.step()
            await trio.sleep(100)
            assert ticks.ticks == [1]
            driver.step()
            driver.step()
            await trio.sleep(100)
            assert ticks.ticks == [1, 2, 3]
            assert driver.statistics().state == "paused"
            nursery.cancel_scope.cancel()
        assert ticks.finished == 1

    @pytest.mark.trio
    async def test_a_pause_lets_the_tick_under_way_finish(self, autojump_clock: trio.testing.MockClock) -> None:
        """Paused mid-tick: the tick ends (the world changes by whole ticks), no other starts."""
        e = engine()
        ticks = Ticks()
        e.loop.add_instrument(ticks)
        driver = TickDriver(e.loop)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(driver.run)
            await trio.sleep(1.0)  # inside tick 1 (a tick takes several seconds)
            driver.pause()
            assert driver.statistics().state == "pausing"
            await trio.sleep(100)
            assert ticks.ticks == [1]
            assert driver.statistics().state == "paused"
            driver.resume()
            await trio.sleep(10)
            assert ticks.ticks[:2] == [1, 2]
            assert driver.statistics().state == "running"
            nursery.cancel_scope.cancel()

    @pytest.mark.trio
    async def test_stepping_while_running_pauses_after_the_tick(self, autojump_clock: trio.testing.MockClock) -> None:
        """step() while running means "stop after this tick"."""
        e = engine()
        ticks = Ticks()
        e.loop.add_instrument(ticks)
        driver = TickDriver(e.loop)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(driver.run)
            await trio.sleep(1.0)
            driver.step()
            await trio.sleep(100)
            assert ticks.ticks == [1]
            nursery.cancel_scope.cancel()

    @pytest.mark.trio
    async def test_interval_spaces_tick_starts(self, autojump_clock: trio.testing.MockClock) -> None:
        """With an interval, tick N starts at (N-1) * interval."""
        e = engine()
        starts: list[float] = []

        class Starts(Instrument):
            def tick_started(self, tick: int, requests: Sequence[object]) -> None:
                starts.append(trio.current_time())

        e.loop.add_instrument(Starts())
        await TickDriver(e.loop, interval=20.0).run(3)
        assert starts == [0.0, 20.0, 40.0]


def losing_engine(at: int, for_s: float, wait_s: float) -> tuple[Engine, LoseGate]:
    """The Wacky Manor on a gate lost as tick ``at`` ends, for ``for_s`` seconds, with
    ``gate.unavailable_wait_s`` = ``wait_s``."""
    gate = LosableGate(size=5)
    lose = LoseGate(gate, at, for_s)
    scene = load_scene("wacky_manor")
    config = resolve(
        [
            built_in_source(),
            layer_defaults_source(),
            flags_source({"platform.limit": 6, "run.seed": scene.spec.seed, "gate.unavailable_wait_s": wait_s}, {}),
        ]
    )
    return build_engine(config, scene, gate=gate, instruments=[lose]), lose  # type: ignore[arg-type]


class TestDriverAndALostGate:
    """The dashboard's driver waits for a lost shared gate as a headless run does."""

    @pytest.mark.trio
    async def test_the_next_tick_waits_for_the_gate(self, autojump_clock: trio.testing.MockClock) -> None:
        """Lost for 3 s after tick 1: tick 2 finds no gate, tick 3 starts at the look
        that finds it again (+0.25, +0.75, +1.75, +3.75), not at once."""
        e, lose = losing_engine(at=1, for_s=3.0, wait_s=10.0)
        await TickDriver(e.loop).run(3)
        assert len(lose.started) == 3 and [wait[1:] for wait in lose.waits] == [(LOST, 10.0)]
        assert lose.started[2] - lose.started[1] == pytest.approx(3.75, abs=1e-12)  # ticks start at times of a float's rounding

    @pytest.mark.trio
    async def test_a_tick_that_found_its_gate_opens_no_wait(self, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch) -> None:
        """The driver waits (in a cancel scope a pause can end) only after a tick
        every call of which found no gate: not after every tick."""
        waits: list[int] = []
        wait = TickLoop.wait_for_lost_gate

        async def counted(loop: TickLoop, record: TickRecord) -> None:
            waits.append(record.tick)
            await wait(loop, record)

        monkeypatch.setattr(TickLoop, "wait_for_lost_gate", counted)
        e, lose = losing_engine(at=1, for_s=3.0, wait_s=10.0)
        await TickDriver(e.loop).run(4)
        assert len(lose.started) == 4 and waits == [2]

    def test_the_gate_is_lost_when_every_call_of_a_tick_found_none(self) -> None:
        def call(reason: str | None) -> CallRecord:
            return CallRecord(
                tick=1, ticket=None, caller="character", agent="a", queued_at=0.0, admitted_at=None, finished_at=0.0,
                outcome="ok" if reason is None else "degraded", reason=reason, text="",
            )  # fmt: skip

        def tick(*reasons: str | None) -> TickRecord:
            return TickRecord(tick=1, calls=tuple(call(reason) for reason in reasons), started_at=0.0, finished_at=0.0, world_hash="")

        assert TickLoop.gate_lost(tick("gate_unavailable", "gate_unavailable"))
        assert not TickLoop.gate_lost(tick("gate_unavailable", None))
        assert not TickLoop.gate_lost(tick("gate_unavailable", "gate_timeout"))
        assert not TickLoop.gate_lost(tick())

    @pytest.mark.trio
    async def test_a_gate_lost_past_the_wait_ends_the_run_in_one_line(self, autojump_clock: trio.testing.MockClock) -> None:
        e, lose = losing_engine(at=1, for_s=math.inf, wait_s=10.0)
        ticks = Ticks()
        e.loop.add_instrument(ticks)
        with pytest.raises(SharedGateError, match=r"; no gate for 10s: stopped after tick 2$"):
            await TickDriver(e.loop).run()
        assert trio.current_time() == lose.started[1] + 10.0
        assert ticks.ticks == [1, 2] and ticks.finished == 1

    @pytest.mark.trio
    async def test_a_pause_ends_the_wait_and_a_step_tries_again(self, autojump_clock: trio.testing.MockClock) -> None:
        """Paused while it waits: it stops waiting (nothing runs, nothing ends the run);
        a step runs a tick, which finds no gate, and stays paused without waiting."""
        e, lose = losing_engine(at=1, for_s=math.inf, wait_s=10.0)
        ticks = Ticks()
        e.loop.add_instrument(ticks)
        driver = TickDriver(e.loop)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(driver.run)
            while not lose.waits:
                await trio.sleep(0.1)
            driver.pause()
            await trio.sleep(100)
            assert ticks.ticks == [1, 2] and driver.statistics().state == "paused"
            driver.step()
            await trio.sleep(100)
            assert ticks.ticks == [1, 2, 3] and driver.statistics().state == "paused" and len(lose.waits) == 1
            nursery.cancel_scope.cancel()


def run_with(clock: trio.abc.Clock, ticks: int = 4, settings: Mapping[str, object] | None = None) -> RunStatistics:
    e = engine(settings)
    stats = RunStatistics()
    e.loop.add_instrument(stats)
    trio.run(TickDriver(e.loop).run, ticks, clock=clock)
    return stats


class FakeWall:
    """A wall clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class TestPacedClock:
    """Exact like the virtual clock; paced by the wall clock."""

    def test_at_max_speed_a_run_is_the_virtual_run(self) -> None:
        """Same makespans and world hash as MockClock(autojump_threshold=0)."""
        virtual = run_with(trio.testing.MockClock(autojump_threshold=0))
        paced = run_with(PacedClock(math.inf))
        assert paced.makespans == virtual.makespans
        assert paced.world_hash == virtual.world_hash

    def test_paced_a_run_is_still_the_virtual_run(self) -> None:
        """At 2000x, wall time passing (and host delays) change no simulated figure."""
        virtual = run_with(trio.testing.MockClock(autojump_threshold=0), 2, LEGACY)
        paced = run_with(PacedClock(2000.0), 2, LEGACY)
        assert paced.makespans == virtual.makespans
        assert paced.degradations == virtual.degradations
        assert paced.world_hash == virtual.world_hash

    def test_time_moves_only_to_a_deadline_once_its_wall_time_has_come(self) -> None:
        """At speed 4 a deadline 2 s away is due 0.5 wall seconds later, not before."""
        wall = FakeWall()
        clock = PacedClock(4.0, wall=wall)
        clock.start_clock()
        assert clock.deadline_to_sleep_time(2.0) == pytest.approx(0.5)
        wall.now += 0.25
        assert clock.current_time() == 0.0
        assert clock.peek() == pytest.approx(1.0)
        wall.now += 0.25
        assert clock.current_time() == 2.0

    def test_time_stands_still_while_nothing_is_scheduled(self) -> None:
        """Idle with no deadline (paused), time does not pass; pacing restarts after."""
        wall = FakeWall()
        clock = PacedClock(1.0, wall=wall)
        clock.start_clock()
        assert clock.deadline_to_sleep_time(math.inf) == math.inf
        wall.now += 50
        assert clock.current_time() == 0.0
        assert clock.deadline_to_sleep_time(3.0) == pytest.approx(3.0)

    def test_a_speed_change_keeps_the_part_of_the_wait_already_done(self) -> None:
        """Half way to a deadline 8 s away at 1x, doubling the speed leaves 2 wall seconds."""
        wall = FakeWall()
        clock = PacedClock(1.0, wall=wall)
        clock.start_clock()
        clock.deadline_to_sleep_time(8.0)
        wall.now += 4
        clock.speed = 2.0
        assert clock.deadline_to_sleep_time(8.0) == pytest.approx(2.0)

    def test_a_late_run_catches_up_by_at_most_the_slack(self) -> None:
        """After a 10 s stall, only 0.25 s of lateness is made up by running faster."""
        wall = FakeWall()
        clock = PacedClock(1.0, wall=wall, slack=0.25)
        clock.start_clock()
        clock.deadline_to_sleep_time(1.0)
        wall.now += 11.0  # the host kept trio from running for 10 s past the deadline
        assert clock.current_time() == 1.0
        assert clock.deadline_to_sleep_time(2.0) == pytest.approx(0.75)

    def test_speed_must_be_positive(self) -> None:
        with pytest.raises(ValueError, match="positive"):
            PacedClock(0)


class TestSpeedLadder:
    def test_nearest_is_on_a_log_scale(self) -> None:
        assert nearest(6.8) == 8
        assert nearest(5.3) == 4
        assert nearest(0.0) == SPEEDS[0]

    def test_faster_stops_at_the_ends(self) -> None:
        assert faster(8, 1) == 16
        assert faster(8, -1) == 4
        assert faster(SPEEDS[0], -1) == SPEEDS[0]
        assert faster(SPEEDS[-1], 1) == SPEEDS[-1]
        assert describe(faster(1024, 1)) == "max"


class TestDashboardState:
    """The instrument the panels are drawn from."""

    def test_counts_degradations_per_tick_and_in_total_with_zeros(self) -> None:
        """Under legacy the manor degrades; every kind x reason is present, zeros too,
        and the totals are the run statistics' own."""
        e = engine(LEGACY)
        state, stats = DashboardState(e.scene), RunStatistics()
        e.loop.add_instrument(state)
        e.loop.add_instrument(stats)
        trio.run(TickDriver(e.loop).run, 2, clock=trio.testing.MockClock(autojump_threshold=0))
        assert state.degradations_total == stats.degradations
        assert state.degraded_total == stats.degraded > 0
        assert all(list(reasons) == list(REASONS) for reasons in state.degradations_tick.values())
        assert [t.tick for t in state.ticks] == [1, 2]
        assert [t.makespan for t in state.ticks] == stats.makespans
        assert state.story_count == len(e.loop.world.story)

    def test_tick_figures_worked_out_when_read_are_those_of_each_tick(self) -> None:
        """A finished tick's figures are worked out when the panel reads them, for the
        ticks it keeps only: read once after many ticks, they are the ones read after
        each tick, the newest ``history`` of them."""

        class EveryTick(Instrument):
            def __init__(self, state: DashboardState) -> None:
                self.state, self.figures = state, []

            def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
                self.figures.append(self.state.ticks[-1])

        # The same run twice (one reader a loop): read after each tick, and once.
        each, once = engine(LEGACY), engine(LEGACY)
        read_each, read_once = DashboardState(each.scene), DashboardState(once.scene, history=3)
        every_tick = EveryTick(read_each)
        for e, instruments in ((each, (read_each, every_tick)), (once, (read_once,))):
            for instrument in instruments:
                e.loop.add_instrument(instrument)
            trio.run(TickDriver(e.loop).run, 7, clock=trio.testing.MockClock(autojump_threshold=0))
        assert [t.tick for t in every_tick.figures] == list(range(1, 8))
        assert list(read_once.ticks) == every_tick.figures[-3:]
        assert read_once.shown is not None and read_once.shown.tick == 7
        assert list(read_once.makespans) == [t.makespan for t in every_tick.figures]

    def test_ticks_no_panel_read_keep_only_the_records_the_panel_would_show(self) -> None:
        """Flat out, thousands of ticks end between two frames: the state keeps the
        records of the newest ``history`` of them for the latency panel, not every
        record since the last read."""

        class Calls(Instrument):
            def __init__(self) -> None:
                self.calls: list[Sequence[object]] = []

            def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
                self.calls.append(record.calls)

        e, calls = engine(LEGACY), Calls()
        state = DashboardState(e.scene, history=3)
        e.loop.add_instrument(state)
        e.loop.add_instrument(calls)
        trio.run(TickDriver(e.loop).run, 7, clock=trio.testing.MockClock(autojump_threshold=0))
        kept = [pending.calls for pending in state._ticks_pending]  # (the pending ticks are their records)
        assert len(kept) == 3 and all(a is b for a, b in zip(kept, calls.calls[-3:]))
        assert [t.tick for t in state.ticks] == [5, 6, 7]

    def test_a_read_shows_the_same_however_often_the_state_was_read(self) -> None:
        """What the panels read does not depend on when they read it: read once after
        many ticks (with a short ``history`` too), or after each tick and while each
        runs, the state shows the same rows, histories, counts, story and figures (a
        guard for any change to when the state takes the calls in)."""

        class Reader(Instrument):
            """Reads everything as each tick ends, and as its calls go on."""

            def __init__(self, state: DashboardState) -> None:
                self.state = state

            def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
                shown(self.state)

            def call_finished(self, record: CallRecord) -> None:
                shown(self.state)

        def shown(state: DashboardState) -> tuple[object, ...]:
            rows = {
                key: (row.state, row.line, row.latency, row.reason, row.error, row.mark, [call.tick for call in row.calls])
                for key, row in state.rows.items()
            }
            return (
                rows, state.degradations_tick, state.degradations_total, state.calls_total, state.degraded_total,
                attrs.asdict(state.rejections), list(state.story), state.story_count, list(state.makespans),
                bytes(state.degraded_ticks), state.tick, state.current_tick, state.tick_policy, state.planned,
                state.shown, list(state.ticks)[-2:], state.version > 0,
            )  # fmt: skip

        seen = []
        for history, read in ((120, True), (120, False), (2, False)):
            e = engine(LEGACY)
            state = DashboardState(e.scene, history=history)
            e.loop.add_instrument(state)
            if read:
                e.loop.add_instrument(Reader(state))
            trio.run(TickDriver(e.loop).run, 9, clock=trio.testing.MockClock(autojump_threshold=0))
            seen.append(shown(state))
        assert seen[0][4] > 0  # degraded calls among them
        assert seen[1] == seen[0] and seen[2] == seen[0]

    def test_rows_follow_each_call_and_nothing_is_left_in_flight(self) -> None:
        """After a tick every caller that was called is done or degraded (retries too)."""
        e = engine(LEGACY)
        state = DashboardState(e.scene)
        e.loop.add_instrument(state)
        trio.run(TickDriver(e.loop).run, 1, clock=trio.testing.MockClock(autojump_threshold=0))
        called = {f"{call.caller}:{call.agent}" for call in e.loop.world.story}
        assert {state.rows[key].state for key in called} <= {"done", "degraded"}
        assert (state.queued, state.running, state.current_tick) == (0, 0, None)
        assert state.finished >= state.planned

    def test_no_hook_runs_per_call_the_loop_notes_the_calls_in_bulk(self) -> None:
        """The dashboard hooks no call: the loop appends each call's ``Heard`` to the
        state's notes as it starts, once (``TickLoop.call_notes``), which learns its
        admission and its record, and a read takes them in; a second reader of one
        loop's notes is refused (it would take the first's)."""
        e = engine()
        state = DashboardState(e.scene)
        taken: list[int] = []

        class Notes(Instrument):
            def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
                assert e.loop.call_notes is not None
                # One note per call of the tick, each ended, none taken yet.
                taken.append(len(e.loop.call_notes))
                assert all(heard.record is not None for heard in e.loop.call_notes)

        e.loop.add_instrument(Notes())  # hears a tick end before the state
        e.loop.add_instrument(state)
        per_call = ("call_started", "call_admitted", "call_finished")
        assert all(instrument is not state for hook in per_call for instrument, _ in e.loop.instruments.by_hook[hook])
        trio.run(TickDriver(e.loop).run, 2, clock=trio.testing.MockClock(autojump_threshold=0))
        calls = len(e.loop.world.plan())
        assert taken == [calls, calls]
        assert e.loop.call_notes == []  # the state's tick end took them in
        assert state.calls_total == 2 * calls and state.finished == state.planned == calls
        with pytest.raises(ValueError, match="another reader"):
            DashboardState(e.scene).run_started(e.loop)

    def test_a_call_finds_its_row_by_caller_kind_or_by_its_name(self) -> None:
        """A request and its record reach the one row the agents table shows, whether the
        kind is a CallerKind member or its name, and a caller met only mid-run gets a
        row (and is drawn)."""
        e = engine()
        state = DashboardState(e.scene)
        state.run_started(e.loop)  # the world's callers: rows in planning order
        request = e.loop.world.plan()[0]
        state.take_dirty()
        rows = len(state.rows)
        notes = e.loop.call_notes  # the loop notes its calls for the state (``run_started``)
        assert notes is not None
        heard = Heard(request, Instruments())
        notes.append(heard)
        row = state.rows[f"{request.caller}:{request.agent}"]
        assert (row.state, row.key, state.take_dirty()) == ("queued", f"character:{request.agent}", {row.key})
        assert (state.queued, state.running) == (1, 0)
        heard.at = 1.0  # admitted: nothing more is noted, a read sees it
        assert (state.queued, state.running, row.state, state.take_dirty()) == (0, 1, "running", {row.key})
        heard.record = CallRecord(tick=1, ticket=0, caller="character", agent=request.agent, queued_at=0.0,
                                  admitted_at=1.0, finished_at=3.5, outcome="ok", text="Hello.")  # fmt: skip
        assert state.rows[row.key] is row  # the loop only notes a call: reading the state takes it in
        assert (row.state, row.latency, row.line) == ("done", 2.5, "Hello.")
        assert (state.queued, state.running, state.finished) == (0, 0, 1)
        assert len(state.rows) == rows
        assert state.take_dirty() == {row.key}
        stranger = Request(caller=CallerKind.SCENE_BEAT, agent="stranger", tick=1)
        notes.append(Heard(stranger, Instruments()))
        assert state.rows["scene_beat:stranger"].state == "queued"
        assert state.take_dirty() == {"scene_beat:stranger"}

    def test_the_tick_under_way_is_shown_with_its_counts_growing(self) -> None:
        """At every call's end the tick shown is the one under way, its degraded count
        is the degraded panel's for that tick, and the gate panel's rejections are the
        degraded panel's platform_rejected since the start: the panels never disagree."""
        e = engine(LEGACY)
        state = DashboardState(e.scene)
        disagreements: list[str] = []
        seen: list[tuple[int, int, int]] = []

        class Watch(Instrument):
            def call_finished(self, record: CallRecord) -> None:
                shown = state.shown
                assert shown is not None
                tick_counts = sum(n for counts in state.degradations_tick.values() for n in counts.values())
                rejected = sum(counts["platform_rejected"] for counts in state.degradations_total.values())
                if not (shown.under_way and shown.tick == record.tick == state.current_tick):
                    disagreements.append(f"tick shown {shown.tick} during tick {record.tick}")
                if shown.degraded != tick_counts:
                    disagreements.append(f"{shown.degraded} degraded shown, {tick_counts} counted")
                if state.rejections.total != rejected:
                    disagreements.append(f"{state.rejections.total} rejections, {rejected} platform_rejected")
                seen.append((shown.tick, shown.done, shown.degraded))

        e.loop.add_instrument(state)
        e.loop.add_instrument(Watch())
        trio.run(TickDriver(e.loop).run, 3, clock=trio.testing.MockClock(autojump_threshold=0))
        assert disagreements == []
        # Within a tick the calls ended only grow.
        for tick in (1, 2, 3):
            done = [d for t, d, _ in seen if t == tick]
            assert done == sorted(done) and done[0] == 1
        shown = state.shown
        assert shown is not None and (shown.tick, shown.under_way) == (3, False)
        assert (shown.done, shown.degraded) == (state.ticks[-1].calls, state.ticks[-1].degraded) == (shown.planned, sum(
            n for counts in state.degradations_tick.values() for n in counts.values()))

    def test_every_tick_is_kept_for_the_whole_run_chart(self) -> None:
        e = engine(LEGACY)
        state, stats = DashboardState(e.scene), RunStatistics()
        e.loop.add_instrument(state)
        e.loop.add_instrument(stats)
        trio.run(TickDriver(e.loop).run, 3, clock=trio.testing.MockClock(autojump_threshold=0))
        assert list(state.makespans) == stats.makespans
        assert list(state.degraded_ticks) == [1, 1, 1]

    def test_each_caller_keeps_its_last_calls_within_the_budget(self) -> None:
        """The histories share one budget of calls: a caller keeps its share, newest last."""
        e = engine()
        callers = len({(request.caller, request.agent) for request in e.loop.world.plan()})
        state = DashboardState(e.scene, calls_kept=2 * callers)
        e.loop.add_instrument(state)
        trio.run(TickDriver(e.loop).run, 3, clock=trio.testing.MockClock(autojump_threshold=0))
        assert state.calls_per_caller == 2  # the first tick's callers share the budget
        characters = [row for row in state.rows.values() if row.caller == "character"]
        assert characters and all([call.tick for call in row.calls] == [2, 3] for row in characters)
        assert all(call.agent == row.agent and call.caller == row.caller for row in state.rows.values() for call in row.calls)
        assert DashboardState(e.scene, calls_kept=0).calls_per_caller == 0
        assert DashboardState(e.scene, calls_kept=1).calls_per_caller == 1

    def test_the_degradations_are_counted_by_the_worlds_caller_kinds(self) -> None:
        """A world of kinds of its own: the counts are its kinds, not the manor's four."""
        state = DashboardState(engine().scene)
        world = SimpleNamespace(callers={"wolf": None, "seer": None}, plan=lambda: [])
        state.run_started(SimpleNamespace(world=world, policy=SimpleNamespace(name="pipeline"), call_notes=None))  # type: ignore[arg-type]
        state.tick_started(1, [])
        assert list(state.degradations_total) == list(state.degradations_tick) == ["wolf", "seer"]
        assert all(list(reasons) == list(REASONS) for reasons in state.degradations_total.values())

    @pytest.mark.parametrize("read_under_way", [False, True])
    def test_a_ticks_rows_are_the_same_whether_or_not_it_was_read_under_way(self, read_under_way: bool) -> None:
        """A tick no read saw under way is taken in at its end only: its rows show its
        calls' ends, the tick before's others none ("—", their line kept), as when a
        read saw it queued; a row whose call ended ok and then degraded in one catch-up
        keeps the ok call's line and shows the degraded one."""
        e = engine()
        state = DashboardState(e.scene)
        state.run_started(e.loop)
        notes = e.loop.call_notes
        assert notes is not None
        first, second = e.loop.world.plan()[:2]

        def ended(request: Request, outcome: str = "ok", text: str = "Hi.", tick: int = 1) -> Heard:
            heard = Heard(request, Instruments())
            heard.at = 1.0
            heard.record = CallRecord(tick=tick, ticket=0, caller=str(request.caller), agent=request.agent, queued_at=0.0,
                                      admitted_at=1.0, finished_at=2.0, outcome=outcome,  # type: ignore[arg-type]
                                      reason=None if outcome == "ok" else "provider_error", text=text)  # fmt: skip
            return heard

        state.tick_started(1, [first, second])
        notes.extend([ended(first), ended(second, text="Then."), ended(second, "degraded", "")])
        state.tick_finished(TickRecord(tick=1, started_at=0.0, finished_at=2.0, calls=(), world_hash=""), [])
        state.take_dirty()
        state.tick_started(2, [first])
        if read_under_way:
            assert (state.rows[f"character:{first.agent}"].state, state.queued) == ("queued", 0)
        notes.append(ended(first, text="Again.", tick=2))
        state.tick_finished(TickRecord(tick=2, started_at=2.0, finished_at=4.0, calls=(), world_hash=""), [])
        one, two = state.rows[f"character:{first.agent}"], state.rows[f"character:{second.agent}"]
        assert (one.state, one.line) == ("done", "Again.")
        assert (two.state, two.line, two.reason) == ("—", "Then.", None)
        assert {one.key, two.key} <= state.take_dirty()
        assert state.degraded_total == 1 and state.calls_total == 4

    def test_a_rows_last_call_shows_alike_whichever_way_it_ended(self) -> None:
        """One catch-up, three rows: an ok call at the first try; an ok call followed by
        one degraded before admission (the row shows the degraded call, the ok call's
        line and latency); an ok call retried after one ok at the first try (its own
        line and latency, its rejection counted)."""
        e = engine()
        state = DashboardState(e.scene)
        state.run_started(e.loop)
        notes = e.loop.call_notes
        assert notes is not None
        first, second, third = e.loop.world.plan()[:3]

        def ended(request: Request, text: str, admitted_at: float | None = 1.0, *, degraded: bool = False, attempts: int = 1) -> Heard:
            heard = Heard(request, Instruments())
            heard.at = admitted_at
            heard.record = CallRecord(tick=1, ticket=0, caller=str(request.caller), agent=request.agent, queued_at=0.0,
                                      admitted_at=admitted_at, finished_at=3.0, outcome="degraded" if degraded else "ok",
                                      reason="platform_rejected" if degraded else None, text=text, attempts=attempts)  # fmt: skip
            return heard

        state.tick_started(1, [first, second, third])
        notes.extend([
            ended(first, "One."),
            ended(second, "Two.", 2.0), ended(second, "", None, degraded=True),
            ended(third, "Three."), ended(third, "Three again.", 2.5, attempts=2),
        ])  # fmt: skip
        state.tick_finished(TickRecord(tick=1, started_at=0.0, finished_at=3.0, calls=(), world_hash=""), [])
        rows = [state.rows[f"character:{request.agent}"] for request in (first, second, third)]
        assert [(row.state, row.line, row.latency, row.reason) for row in rows] == [
            ("done", "One.", 2.0, None), ("degraded", "Two.", 1.0, "platform_rejected"), ("done", "Three again.", 0.5, None),
        ]  # fmt: skip
        assert (state.degraded_total, state.calls_total) == (1, 5)
        assert (state.rejections.by_limiter, state.rejections.retried) == (1, 1)

    def test_a_caller_kind_the_dashboard_does_not_know_is_shown_by_its_name(self) -> None:
        """A world's own kind of caller (the lead's open caller kinds): a row labelled
        with the kind, its degradations counted in a column of its own."""
        e = engine()
        state = DashboardState(e.scene)
        state.run_started(e.loop)
        record = CallRecord(tick=1, ticket=0, caller="werewolf", agent="wolf", queued_at=0.0, admitted_at=None,
                            finished_at=30.0, outcome="degraded", reason="gate_timeout", error="no gate slot within 30s")  # fmt: skip
        assert e.loop.call_notes is not None
        heard = Heard(Request(caller="werewolf", agent="wolf", tick=1), Instruments())
        heard.record = record
        e.loop.call_notes.append(heard)
        row = state.rows["werewolf:wolf"]
        assert (row.kind, row.state, row.error) == ("werewolf", "degraded", "no gate slot within 30s")
        assert state.degradations_total["werewolf"]["gate_timeout"] == state.degradations_tick["werewolf"]["gate_timeout"] == 1


class TestAnotherWorld:
    """The dashboard's state on Werewolf: rows are the world's callers, and the dead are
    marked."""

    def test_rows_are_the_worlds_callers_and_the_dead_are_marked(self) -> None:
        scene = load_scene("werewolf_village")
        config = resolve([built_in_source(), layer_defaults_source(), flags_source({"run.seed": scene.spec.seed}, {})])
        e = build_engine(config, scene)
        state = DashboardState(scene)
        assert state.rows == {}  # known once the world can plan
        e.loop.add_instrument(state)
        trio.run(TickDriver(e.loop).run, 100, clock=trio.testing.MockClock(autojump_threshold=0))
        world = e.loop.world
        assert world.over is not None
        assert {row.caller for row in state.rows.values()} <= {*world.callers, ""}
        first = [f"{r.caller}:{r.agent}" for r in create_world(scene, e.config.settings.run.seed).plan()]
        assert list(state.rows)[: len(first)] == first
        dead = {death.agent for death in world.deaths}
        assert dead
        # Every dead player shows, one killed on the first night before any call of
        # theirs too (a row of no caller kind, only for an agent with no other row).
        assert {row.agent for row in state.rows.values() if row.mark == "dead"} == dead
        unplanned = [row.agent for row in state.rows.values() if row.caller == ""]
        assert unplanned and set(unplanned) <= dead
        assert not {row.agent for row in state.rows.values() if row.caller} & set(unplanned)
        assert all(row.mark == "" for row in state.rows.values() if row.agent not in dead)

    def test_a_structured_answer_reads_as_its_fields(self) -> None:
        assert readable('{"target": "Maud"}') == "target: Maud"
        assert readable('{"line": "hi", "move_to": null}') == "line: hi, move_to: None"
        assert readable("{not json") == "{not json"
        assert readable("plain words") == "plain words"

