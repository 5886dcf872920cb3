"""The tick loop: exact makespans, determinism, pacing, deadlines, degradation accounting
and instruments — all under a virtual clock."""

from __future__ import annotations

import collections
import logging
import math

import hypothesis
import pytest
import trio
import trio.testing
from hypothesis import strategies as st
from scenes_fixture import (
    TEN_LATENCIES,
    FailingFor,
    TickRecorder,
    fifo_makespan,
    fixed_scene,
    make_engine,
    run_engine,
    settings,
)

from manor.calls import Request
from manor.errors import REASONS, ProviderError
from manor.providers import MockProvider
from manor.records import CallRecord, StoryEntry, TickRecord
from manor.run.engine import build_engine
from manor.tick import loop as tickloop
from manor.tick.instruments import Instrument
from manor.tick.statistics import RunStatistics
from manor.worlds import load_scene
from manor.worlds.manor import CALLERS as MANOR_CALLERS
from manor.worlds.manor import FALLBACKS

NARRATOR, SUMMARISER = 0.2, 0.3


def admission_order(records: tuple[CallRecord, ...] | list[CallRecord]) -> list[str]:
    """Agents in the order the gate let them through (ties in ticket order)."""
    admitted = [r for r in records if r.admitted_at is not None]
    return [r.agent for r in sorted(admitted, key=lambda r: (r.admitted_at, r.ticket))]


class TestExactMakespan:
    """Ten characters with fixed latencies: makespans to the millisecond."""

    def test_the_list_schedule_helper_is_right(self) -> None:
        """The independent FIFO list schedule gives the hand-computed values."""
        assert fifo_makespan([*TEN_LATENCIES, NARRATOR, SUMMARISER], 5) == pytest.approx(5.5)
        assert fifo_makespan([2.0, 2.0, 1.0], 2) == pytest.approx(3.0)
        assert fifo_makespan([1.0, 1.0, 1.0], 1) == pytest.approx(3.0)

    def test_pipeline_with_gate_5_takes_the_fifo_list_schedule(self) -> None:
        """All calls fire at once; the gate pipelines them in ticket (planning) order."""
        engine = make_engine(fixed_scene(narrator=NARRATOR, summariser=SUMMARISER), run_policy="pipeline")
        assert engine.loop.gate.size == 5
        [tick] = run_engine(engine, 1)
        expected = fifo_makespan([*TEN_LATENCIES, NARRATOR, SUMMARISER], 5)
        assert tick.makespan == pytest.approx(expected, abs=1e-3)
        assert tick.makespan == pytest.approx(5.5, abs=1e-3)
        assert [r.ticket for r in tick.calls] == list(range(12))
        assert admission_order(tick.calls) == [f"c{i}" for i in range(10)] + ["narrator", "summariser"]
        # When each was let through, by hand: a slot frees as a call ends.
        admitted = {r.agent: r.admitted_at for r in tick.calls}
        expected_admitted = {"c0": 0, "c1": 0, "c2": 0, "c3": 0, "c4": 0, "c5": 1.0, "c6": 1.5, "c7": 2.0,
                             "c8": 2.0, "c9": 3.0, "narrator": 3.5, "summariser": 3.7}  # fmt: skip
        assert admitted == pytest.approx(expected_admitted, abs=1e-3)
        assert all(r.ok for r in tick.calls)
        assert engine.loop.limiter.statistics().rejected == 0
        assert engine.loop.limiter.statistics().peak == 5

    def test_batch_of_3_takes_the_sum_of_each_waves_slowest_call(self) -> None:
        """Waves [c0-c2] [c3-c5] [c6-c8] [c9]: 3.0 + 4.0 + 3.5 + 1.0; the narrator and
        summariser fire alongside the first wave and end long before it does."""
        engine = make_engine(fixed_scene(narrator=NARRATOR, summariser=SUMMARISER), run_policy="batch", run_batch_size=3)
        [tick] = run_engine(engine, 1)
        waves = [TEN_LATENCIES[i : i + 3] for i in range(0, 10, 3)]
        assert tick.makespan == pytest.approx(sum(max(wave) for wave in waves), abs=1e-3)
        assert tick.makespan == pytest.approx(11.5, abs=1e-3)
        admitted = {r.agent: r.admitted_at for r in tick.calls}
        assert admitted == pytest.approx({"c0": 0, "c1": 0, "c2": 0, "c3": 3.0, "c4": 3.0, "c5": 3.0, "c6": 7.0,
                                          "c7": 7.0, "c8": 7.0, "c9": 10.5, "narrator": 0, "summariser": 0}, abs=1e-3)  # fmt: skip

    def test_batch_of_3_waits_for_gate_slots_taken_by_the_other_callers(self) -> None:
        """Two scene beats also fire with the first wave: 3 + 2 + 2 > 5, so the beats
        queue behind the narrator and summariser but do not slow the waves."""
        scene = fixed_scene(narrator=NARRATOR, summariser=SUMMARISER, beats=2, speakers=("c1", "c6"))
        engine = make_engine(scene, run_policy="batch", run_batch_size=3)
        [tick] = run_engine(engine, 1)
        beats = [r for r in tick.calls if r.caller == "scene_beat"]
        assert [r.admitted_at for r in beats] == pytest.approx([NARRATOR, SUMMARISER], abs=1e-3)
        assert tick.makespan == pytest.approx(11.5, abs=1e-3)

    def test_longest_first_hands_out_tickets_longest_predicted_first(self) -> None:
        """Tickets by predicted latency, longest first (ties keep planning order)."""
        engine = make_engine(fixed_scene(narrator=NARRATOR, summariser=SUMMARISER), run_policy="pipeline", run_order="longest-first")
        [tick] = run_engine(engine, 1)
        expected = ["c3", "c7", "c0", "c5", "c2", "c8", "c4", "c1", "c9", "c6", "summariser", "narrator"]
        assert [r.agent for r in sorted(tick.calls, key=lambda r: r.ticket)] == expected
        assert admission_order(tick.calls) == expected
        latencies = dict(zip([f"c{i}" for i in range(10)], TEN_LATENCIES, strict=True)) | {"narrator": NARRATOR, "summariser": SUMMARISER}
        assert tick.makespan == pytest.approx(fifo_makespan([latencies[a] for a in expected], 5), abs=1e-3)
        assert tick.makespan == pytest.approx(4.5, abs=1e-3)

    def test_the_default_order_plans_the_gates_slots(self) -> None:
        """Built-in defaults hand out tickets longest-first, planned over the gate's
        slots: tea_party's calls (fixed at its profile latencies) on a gate of 2 end at
        6.6 s, where fifo and plain longest-first both end at 6.9 s."""
        scene = fixed_scene((1.4, 1.3, 1.9), narrator=4.2, summariser=2.6, beats=1, speakers=("c1",), platform_limit=3)
        engine = build_engine(settings(platform_limit=3), scene)
        assert engine.loop.order == "longest-first"
        [tick] = run_engine(engine, 1)
        assert tick.makespan == pytest.approx(6.6, abs=1e-3)
        [fifo] = run_engine(make_engine(scene, run_order="fifo"), 1)
        assert fifo.makespan == pytest.approx(6.9, abs=1e-3)

    def test_records_keep_planning_order_whatever_the_ticket_order(self) -> None:
        engine = make_engine(fixed_scene(), run_order="longest-first")
        [tick] = run_engine(engine, 1)
        assert [r.agent for r in tick.calls] == [f"c{i}" for i in range(10)] + ["narrator", "summariser"]

    def test_every_tick_of_a_free_running_loop_starts_when_the_last_ended(self) -> None:
        engine = make_engine(fixed_scene(narrator=NARRATOR, summariser=SUMMARISER))
        ticks = run_engine(engine, 3)
        assert [t.started_at for t in ticks] == pytest.approx([0.0, 5.5, 11.0], abs=1e-3)
        assert [t.makespan for t in ticks] == pytest.approx([5.5] * 3, abs=1e-3)
        assert [t.tick for t in ticks] == [1, 2, 3]

    def test_a_tick_interval_paces_tick_starts(self) -> None:
        engine = make_engine(fixed_scene(narrator=NARRATOR, summariser=SUMMARISER))
        ticks = run_engine(engine, 3, interval=8.0)
        assert [t.started_at for t in ticks] == pytest.approx([0.0, 8.0, 16.0], abs=1e-3)

    def test_a_tick_longer_than_its_interval_is_followed_at_once(self) -> None:
        engine = make_engine(fixed_scene(narrator=NARRATOR, summariser=SUMMARISER))
        ticks = run_engine(engine, 2, interval=2.0)
        assert [t.started_at for t in ticks] == pytest.approx([0.0, 5.5], abs=1e-3)

    def test_a_gate_of_one_serialises_every_call(self) -> None:
        engine = make_engine(fixed_scene(narrator=NARRATOR, summariser=SUMMARISER), gate_size=1)
        [tick] = run_engine(engine, 1)
        assert tick.makespan == pytest.approx(sum(TEN_LATENCIES) + NARRATOR + SUMMARISER, abs=1e-3)


def _signature(tick: TickRecord) -> tuple[object, ...]:
    """Everything timing-related about a tick, calls in admission order."""
    calls = sorted(tick.calls, key=lambda r: math.inf if r.admitted_at is None else r.admitted_at)
    return (
        tick.makespan,
        tuple((r.caller, r.agent, r.ticket, r.admitted_at, r.finished_at, r.outcome, r.reason) for r in calls),
    )


class TestDeterminism:
    """trio shuffles its run queue differently each run; admission must not care."""

    @pytest.mark.parametrize(
        ("policy", "order"), [("pipeline", "fifo"), ("batch", "fifo"), ("legacy", "fifo"), ("pipeline", "longest-first"), ("batch", "longest-first")]
    )
    @pytest.mark.parametrize("scene_name", ["wacky_manor", "ties"])
    def test_the_same_tick_200_times_admits_in_the_same_order(self, policy: str, order: str, scene_name: str) -> None:
        """``ties``: fixed latencies, so several calls end and are let in at one instant,
        on a platform of four where legacy gets rejected."""
        if scene_name == "ties":
            scene = fixed_scene((1.0, 1.0, 2.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0), narrator=1.0, summariser=1.0,
                                beats=2, speakers=("c0", "c3"), platform_limit=4)  # fmt: skip
        else:
            scene = load_scene(scene_name)
        signatures = set()
        for _ in range(200):
            [tick] = run_engine(make_engine(scene, run_policy=policy, run_order=order), 1)
            signatures.add(_signature(tick))
        assert len(signatures) == 1
        if policy == "legacy" and scene_name == "ties":
            [(_, calls)] = signatures
            assert any(reason == "platform_rejected" for *_, reason in calls)

    @pytest.mark.parametrize("policy", ["pipeline", "batch"])
    def test_longest_first_through_a_gate_wider_than_the_platform_is_the_same_every_run(self, policy: str) -> None:
        """Longest-first may give the narrator a ticket before a first-wave character;
        with a gate of 5 on a platform of 3 who reaches the platform first decides who
        is refused, and that must be ticket order, not trio's run order. (Batch started
        the first wave and the others as two groups: the refusals changed run to run.)"""
        scene = load_scene("tea_party")
        signatures = set()
        for _ in range(100):
            ticks = run_engine(make_engine(scene, run_policy=policy, run_order="longest-first", gate_size=5), 3)
            signatures.add(tuple(_signature(tick) for tick in ticks))
        assert len(signatures) == 1
        [ticks] = signatures
        assert any(reason == "platform_rejected" for _, calls in ticks for *_, reason in calls)

    @pytest.mark.parametrize(
        ("policy", "order", "expected"),
        [
            ("pipeline", "fifo", ("c0",)),
            # c3 has the longest predicted latency, so the first ticket.
            ("pipeline", "longest-first", ("c3",)),
            # The trial (c0, first ticket) succeeds and closes the circuit; the later
            # waves are then let through as well.
            ("batch", "fifo", ("c0", "c3", "c4", "c5", "c6", "c7", "c8", "c9")),
        ],
    )
    def test_the_breakers_trial_call_is_the_same_every_run(self, policy: str, order: str, expected: tuple[str, ...]) -> None:
        """Every call of tick 2 fails and opens the breaker; tick 3 starts after the
        cooldown, so exactly one of its calls is let through as the half-open trial:
        the first in ticket order, not whichever task trio happened to run first."""
        scene = fixed_scene()
        kinds = ("character", "narrator", "summariser", "scene_beat")
        outcomes = set()
        for _ in range(40):
            simulator = make_engine(scene).loop.gated.backend
            backend = FailingFor(simulator, {(2, kind) for kind in kinds})
            engine = make_engine(scene, backend=backend, run_policy=policy, run_order=order, breaker_failures=3, breaker_cooldown_s=4.0)
            ticks = run_engine(engine, 3, interval=10.0)
            trial = tuple(r.agent for r in ticks[2].calls if r.reason != "circuit_open")
            outcomes.add((trial, ticks[2].world_hash))
        [(through, _)] = outcomes
        assert through == expected

    def test_outcomes_of_one_instant_move_the_breaker_the_same_every_run(self) -> None:
        """c0 and c2 fail and c1 succeeds, all at t = 1.0. In whatever order trio
        resumes them, the breaker (two failures in a row open it) ends the same."""
        scene = fixed_scene((1.0, 1.0, 1.0))
        outcomes = set()
        for _ in range(60):
            engine = make_engine(scene, backend=_fails_at_one_second({"c0", "c2"}), breaker_failures=2, breaker_cooldown_s=5.0)
            ticks = run_engine(engine, 2)
            outcomes.add((engine.breaker.times_opened, tuple(r.reason for r in ticks[1].calls)))
        # In ticket order: c0 fails, c1 succeeds, c2 fails: never two in a row.
        assert outcomes == {(0, (None,) * 5)}

    @pytest.mark.parametrize("policy", ["pipeline", "batch"])
    @pytest.mark.parametrize("order", ["fifo", "longest-first"])
    @pytest.mark.parametrize("agents", [0, 300])  # 0: the scene's own cast
    def test_spawning_calls_together_changes_nothing(self, policy: str, order: str, agents: int, monkeypatch: pytest.MonkeyPatch) -> None:
        """call_all spawns a tick's calls together when their arrival order cannot
        matter; started one by one in ticket order instead (as if it could), every tick
        must come out the same, record for record, and the instruments hear the calls
        start in the same order."""

        def run(one_by_one: bool) -> tuple[list[TickRecord], list[str]]:
            with monkeypatch.context() as patch:
                if one_by_one:
                    patch.setattr(tickloop.TickLoop, "_arrival_order_matters", lambda self, stack: True)
                hooks = _Everything()
                engine = make_engine(load_scene("wacky_manor", agents=agents or None), instruments=[hooks],
                                     run_policy=policy, run_order=order, sim_error_rate=0.1)  # fmt: skip
                return run_engine(engine, 4), [seen for seen in hooks.seen if seen.startswith("call_started")]

        (together, together_started), (one_by_one, one_by_one_started) = run(False), run(True)
        assert together == one_by_one
        assert together_started == one_by_one_started
        assert any(r.reason == "provider_error" for tick in together for r in tick.calls)

    @pytest.mark.parametrize("policy", ["pipeline", "batch", "legacy"])
    def test_the_same_seed_gives_the_same_world_hash(self, policy: str) -> None:
        scene = load_scene("wacky_manor")
        hashes = {run_engine(make_engine(scene, run_policy=policy), 15)[-1].world_hash for _ in range(3)}
        assert len(hashes) == 1
        other = run_engine(make_engine(scene, run_policy=policy, run_seed=scene.spec.seed + 1), 15)[-1].world_hash
        assert other not in hashes


def _fails_at_one_second(failing: set[str]) -> MockProvider:
    """Every call takes exactly 1 s; tick 1's calls of ``failing`` characters fail."""

    async def handler(request: Request) -> str:
        await trio.sleep(1.0)
        if request.tick == 1 and request.caller == "character" and request.agent in failing:
            raise ProviderError(f"{request.agent}: fails at one second")
        return "Quite."

    return MockProvider(handler)


class TestDefaultScene:
    """The Wacky Manor over 200 ticks, the three policies side by side."""

    @pytest.fixture(scope="class")
    def runs(self) -> dict[str, tuple[RunStatistics, list[list[StoryEntry]], object]]:
        scene = load_scene("wacky_manor")
        results = {}
        for policy in ("pipeline", "batch", "legacy"):
            stats, recorder = RunStatistics(), TickRecorder()
            engine = make_engine(scene, run_policy=policy, instruments=[stats, recorder])
            trio.run(engine.loop.run, 200, 0.0, clock=trio.testing.MockClock(autojump_threshold=0))
            results[policy] = (stats, recorder.stories, engine)
        return results

    def test_pipeline_has_no_rejections_and_no_degradations(self, runs) -> None:
        stats, stories, engine = runs["pipeline"]
        summary = stats.summary(engine)
        assert summary["ticks"] == 200
        assert summary["calls"] == 200 * 14
        assert summary["platform_rejections"] == {"total": 0, "by_limiter": 0, "by_server": 0, "retried": 0}
        assert summary["degraded"] == 0
        assert all(n == 0 for reasons in summary["degradations"].values() for n in reasons.values())
        assert summary["peak_platform_sessions"] == 5
        assert not [e for story in stories for e in story if e.fallback]

    def test_legacy_is_rejected_by_the_platform_and_degrades(self, runs) -> None:
        stats, stories, engine = runs["legacy"]
        summary = stats.summary(engine)
        assert summary["platform_rejections"]["total"] > 0
        assert summary["degraded"] > 0
        assert summary["peak_platform_sessions"] == 6
        counted = collections.Counter((e.caller, e.reason) for story in stories for e in story if e.fallback)
        table = summary["degradations"]
        assert {(kind, reason): table[kind][reason] for kind in MANOR_CALLERS for reason in REASONS if table[kind][reason]} == dict(counted)
        assert sum(counted.values()) == summary["degraded"]
        # The platform's fail-fast "full" is what degrades the legacy calls.
        assert {reason for _, reason in counted} == {"platform_rejected"}
        # One definition: every call degraded platform_rejected, here all by Manor's
        # own limiter (the simulator never answers 429), and the tries a retry replaced
        # apart; every try the limiter refused is one of the two.
        rejections = summary["platform_rejections"]
        assert rejections["total"] == rejections["by_limiter"] == summary["degraded"] and rejections["by_server"] == 0
        assert rejections["total"] + rejections["retried"] == engine.loop.limiter.statistics().rejected

    def test_pipeline_ticks_are_faster_than_batch_ticks(self, runs) -> None:
        pipeline = runs["pipeline"][0].tick_seconds()
        batch = runs["batch"][0].tick_seconds()
        assert pipeline["mean"] < batch["mean"]
        assert runs["batch"][0].degraded == 0


class TestTickDeadline:
    """Outstanding calls are cancelled at the deadline, degraded as ``cancelled``, and
    every permit and session is given back."""

    LATENCIES = (1.0, 1.0, 1.0, 1.0, 1.0, 10.0, 10.0, 10.0, 10.0, 10.0)

    def _assert_nothing_held(self, engine) -> None:
        gate = engine.loop.gate.statistics()
        assert gate.in_flight == 0
        assert gate.waiting == 0
        assert engine.loop.limiter.statistics().in_use == 0

    def test_pipeline_calls_running_and_queued_are_cancelled(self) -> None:
        stats = RunStatistics()
        engine = make_engine(fixed_scene(self.LATENCIES), run_tick_deadline_s=2.5, instruments=[stats])
        ticks = run_engine(engine, 2)
        for tick in ticks:
            assert tick.makespan == pytest.approx(2.5, abs=1e-3)
            cancelled = [r for r in tick.calls if r.reason == "cancelled"]
            assert [r.agent for r in cancelled] == ["c5", "c6", "c7", "c8", "c9", "narrator", "summariser"]
            assert all(r.finished_at == pytest.approx(tick.started_at + 2.5, abs=1e-3) for r in cancelled)
            # The narrator and summariser never got through the gate.
            assert [r.admitted_at for r in cancelled[5:]] == [None, None]
        assert stats.degradations["character"]["cancelled"] == 10
        assert stats.degradations["narrator"]["cancelled"] == 2
        assert stats.degradations["summariser"]["cancelled"] == 2
        assert stats.degraded == 14
        self._assert_nothing_held(engine)
        assert engine.loop.gate.statistics().cancelled == 4
        # Tick 2 was not stalled by tick 1's cancelled calls: it started admitting at once.
        assert min(r.admitted_at for r in ticks[1].calls if r.admitted_at is not None) == ticks[1].started_at

    def test_batch_withdraws_the_tickets_of_waves_never_fired(self) -> None:
        latencies = (1.0, 1.0, 1.0, 1.0, 10.0, 1.0, 1.0, 1.0, 1.0, 1.0)
        engine = make_engine(fixed_scene(latencies), run_policy="batch", run_tick_deadline_s=2.5)
        ticks = run_engine(engine, 2)
        for tick in ticks:
            assert tick.makespan == pytest.approx(2.5, abs=1e-3)
            cancelled = {r.agent: r.admitted_at for r in tick.calls if r.reason == "cancelled"}
            assert list(cancelled) == ["c4", "c6", "c7", "c8", "c9"]
            assert cancelled["c4"] == pytest.approx(tick.started_at + 1.0)
            assert [cancelled[a] for a in ("c6", "c7", "c8", "c9")] == [None] * 4
        self._assert_nothing_held(engine)
        assert min(r.admitted_at for r in ticks[1].calls if r.admitted_at is not None) == ticks[1].started_at

    def test_legacy_cancels_calls_and_backoffs(self) -> None:
        engine = make_engine(fixed_scene(self.LATENCIES, platform_limit=4), run_policy="legacy", run_tick_deadline_s=2.5)
        ticks = run_engine(engine, 2)
        for tick in ticks:
            assert tick.makespan == pytest.approx(2.5, abs=1e-3)
            assert {r.reason for r in tick.calls} <= {None, "cancelled", "platform_rejected"}
            assert any(r.reason == "cancelled" for r in tick.calls)
        self._assert_nothing_held(engine)


class TestDegradationAccounting:
    """Every degraded call counted once, under its kind and reason, with its fallback."""

    def _check_counted_once(self, stats: RunStatistics, ticks: list[TickRecord], stories: list[list[StoryEntry]]) -> collections.Counter:
        records = [r for t in ticks for r in t.calls]
        counted = collections.Counter((r.caller, r.reason) for r in records if not r.ok)
        table = {(kind, reason): n for kind, reasons in stats.degradations.items() for reason, n in reasons.items() if n}
        assert table == dict(counted)
        assert stats.degraded == sum(counted.values()) == stats.calls - stats.ok
        assert stats.calls == len(records)
        fallbacks = collections.Counter((e.caller, e.reason) for story in stories for e in story if e.fallback)
        assert fallbacks == counted
        for story in stories:
            for entry in story:
                assert entry.fallback == (FALLBACKS[entry.caller] if entry.reason else "")
        return counted

    def _run(self, scene, ticks: int, *, backend=None, interval: float = 0.0, **values):
        stats, recorder = RunStatistics(), TickRecorder()
        engine = make_engine(scene, backend=backend, instruments=[stats, recorder], **values)
        trio.run(engine.loop.run, ticks, interval, clock=trio.testing.MockClock(autojump_threshold=0))
        return engine, stats, recorder

    def test_provider_errors_and_an_open_breaker(self) -> None:
        """Random simulated errors, then a tick where every call fails: the breaker
        opens and refuses the next ticks' calls until its cooldown has passed."""
        scene = fixed_scene(beats=2, speakers=("c1", "c2"))
        kinds = ("character", "narrator", "summariser", "scene_beat")
        simulator = make_engine(scene, sim_error_rate=0.2).loop.gated.backend
        backend = FailingFor(simulator, {(3, kind) for kind in kinds})
        engine, stats, recorder = self._run(
            scene, 8, backend=backend, interval=10.0, breaker_failures=3, breaker_cooldown_s=15.0
        )
        counted = self._check_counted_once(stats, recorder.ticks, recorder.stories)
        assert {reason for _, reason in counted} == {"provider_error", "circuit_open"}
        assert {kind for kind, _ in counted} == set(kinds)
        assert engine.breaker.times_opened >= 1
        # In tick 3 every call was let through before the first failure came back (a
        # closed circuit treats every arrival alike), so all fail at the backend and
        # open the circuit; tick 4 is inside the cooldown, refused whole.
        assert [r.reason for r in recorder.ticks[2].calls] == ["provider_error"] * 14
        assert {r.reason for r in recorder.ticks[3].calls} == {"circuit_open"}
        assert recorder.ticks[3].makespan == 0.0
        # After the cooldown exactly one call (the first ticket) is let through as trial.
        assert [r.agent for r in recorder.ticks[4].calls if r.reason != "circuit_open"] == ["c0"]
        # Some random errors before the breaker opened.
        assert 0 < sum(not r.ok for t in recorder.ticks[:2] for r in t.calls) < 2 * 14
        gate = engine.loop.gate.statistics()
        assert gate.in_flight == gate.waiting == 0

    def test_gate_timeouts(self) -> None:
        latencies = (5.0,) * 5 + (1.0,) * 5
        engine, stats, recorder = self._run(fixed_scene(latencies), 2, gate_timeout_s=2.0)
        counted = self._check_counted_once(stats, recorder.ticks, recorder.stories)
        assert counted == {("character", "gate_timeout"): 10, ("narrator", "gate_timeout"): 2, ("summariser", "gate_timeout"): 2}
        for tick in recorder.ticks:
            assert tick.makespan == pytest.approx(5.0, abs=1e-3)
            timed_out = [r for r in tick.calls if r.reason == "gate_timeout"]
            assert all(r.finished_at - r.queued_at == pytest.approx(2.0, abs=1e-3) for r in timed_out)
            assert all(r.admitted_at is None for r in timed_out)
        assert engine.loop.gate.statistics().timeouts == 14

    def test_call_timeouts(self) -> None:
        latencies = (5.0,) + (1.0,) * 9
        engine, stats, recorder = self._run(fixed_scene(latencies), 2, call_timeout_s=3.5)
        counted = self._check_counted_once(stats, recorder.ticks, recorder.stories)
        assert counted == {("character", "call_timeout"): 2}
        for tick in recorder.ticks:
            [late] = [r for r in tick.calls if not r.ok]
            assert late.agent == "c0"
            assert late.finished_at - late.admitted_at == pytest.approx(3.5, abs=1e-3)
            assert tick.makespan == pytest.approx(3.5, abs=1e-3)
        assert engine.loop.limiter.statistics().in_use == 0
        assert engine.loop.gate.statistics().in_flight == 0

    def test_the_call_timeout_counts_from_admission(self) -> None:
        """The call's clock starts when the gate lets it through: a call that queued
        2 s still gets its whole timeout, and a healthy backend never looks slow to the
        breaker because of our own queue."""
        latencies = (1.0,) * 10
        scene = fixed_scene(latencies, narrator=1.0, summariser=1.0)
        engine, stats, recorder = self._run(scene, 1, call_timeout_s=1.5)
        [tick] = recorder.ticks
        assert all(r.ok for r in tick.calls)
        # c0-c4 run 0-1, c5-c9 run 1-2; the narrator and summariser queue until 2.
        waits = {r.agent: r.admitted_at - r.queued_at for r in tick.calls}
        assert waits["narrator"] == pytest.approx(2.0) and waits["summariser"] == pytest.approx(2.0)
        engine, stats, recorder = self._run(fixed_scene((1.0,) * 10, narrator=3.0), 1, call_timeout_s=2.5)
        [tick] = recorder.ticks
        late = {r.agent: (r.admitted_at, r.finished_at) for r in tick.calls if not r.ok}
        assert late == {"narrator": pytest.approx((2.0, 4.5))}
        assert {r.reason for r in tick.calls if not r.ok} == {"call_timeout"}

    def test_each_caller_kind_falls_back_in_the_story(self) -> None:
        scene = fixed_scene(beats=1, speakers=("c1",))
        failing = {(2, "character"), (2, "narrator"), (2, "summariser"), (2, "scene_beat")}
        engine = make_engine(scene)
        backend = FailingFor(engine.loop.gated.backend, failing)  # the seeded simulator
        engine, stats, recorder = self._run(scene, 2, backend=backend, breaker_failures=50)
        self._check_counted_once(stats, recorder.ticks, recorder.stories)
        first, second = recorder.stories
        assert not any(e.fallback for e in first)
        by_caller = collections.defaultdict(list)
        for entry in second:
            by_caller[entry.caller].append(entry)
        assert [e.fallback for e in by_caller["character"]] == ["idle"] * 10
        assert [e.fallback for e in by_caller["narrator"]] == ["narration skipped"]
        assert [e.fallback for e in by_caller["summariser"]] == ["stale summary"]
        assert [(e.fallback, e.speaker) for e in by_caller["scene_beat"]] == [("speechless", "C1")]
        assert all(e.text == "" and e.reason == "provider_error" for e in second)
        # The summary and narration stay those of tick 1; so do the characters' lines.
        world = engine.loop.world
        [summary] = [e.text for e in first if e.caller == "summariser"]
        [narration] = [e.text for e in first if e.caller == "narrator"]
        assert summary and world.summary == summary
        assert narration and world.narration == narration
        assert world.last_lines["c0"] == next(e.text for e in first if e.agent == "c0" and e.caller == "character")


    def test_a_cost_budget_stops_the_calls_once_it_is_spent(self) -> None:
        """The engine's stack has the cost layer only with a budget (without one, what
        calls cost is counted from their records). Tick 1's calls all set off before
        any has cost anything; once they have spent the budget, every call of tick 2
        is refused before it reaches the backend, and says so."""
        engine, stats, recorder = self._run(fixed_scene(), 2, cost_price_per_1k_tokens=1.0, cost_budget=0.001)
        assert engine.cost is not None and "CostLayer" in repr(engine.loop.gated)
        first, second = recorder.ticks
        assert all(call.ok for call in first.calls) and engine.cost.spent >= 0.001
        assert {(call.reason, call.error) for call in second.calls} == {("provider_error", "cost budget 0.001 spent")}
        assert stats.cost == sum(call.cost for call in first.calls) == engine.cost.spent
        self._check_counted_once(stats, recorder.ticks, recorder.stories)
        unbudgeted, _, _ = self._run(fixed_scene(), 1)
        assert unbudgeted.cost is None and "CostLayer" not in repr(unbudgeted.loop.gated)


class _Raising(Instrument):
    def __init__(self) -> None:
        self.calls = 0

    def call_finished(self, record: CallRecord) -> None:
        self.calls += 1
        raise RuntimeError("instrument bug")

    def tick_finished(self, record: TickRecord, story) -> None:
        raise AssertionError("a removed instrument was called again")


class _OnlyTicks(Instrument):
    """Overrides one hook; an instance attribute of another hook's name is not a hook."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.call_started = lambda request: self.seen.append("call_started")  # type: ignore[method-assign]

    def tick_finished(self, record: TickRecord, story) -> None:
        self.seen.append("tick_finished")


class _Everything(Instrument):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def run_started(self, loop) -> None:
        self.seen.append("run_started")

    def tick_started(self, tick, requests) -> None:
        self.seen.append(f"tick_started {tick} {len(requests)}")

    def call_started(self, request) -> None:
        self.seen.append(f"call_started {request.agent}")

    def call_admitted(self, request, admitted_at) -> None:
        self.seen.append(f"call_admitted {request.agent}")

    def call_finished(self, record) -> None:
        self.seen.append(f"call_finished {record.agent}")

    def tick_finished(self, record, story) -> None:
        self.seen.append(f"tick_finished {record.tick}")

    def run_finished(self, loop) -> None:
        self.seen.append("run_finished")


class TestInstruments:
    def test_an_instrument_that_raises_is_removed_and_logged(self, caplog: pytest.LogCaptureFixture) -> None:
        raising, everything = _Raising(), _Everything()
        engine = make_engine(fixed_scene(), instruments=[raising, everything])
        with caplog.at_level(logging.ERROR, logger="manor.tick.instruments"):
            ticks = run_engine(engine, 3)
        assert raising.calls == 1
        assert len(ticks) == 3
        assert sum(e.startswith("call_finished") for e in everything.seen) == 3 * 12
        [message] = [r.getMessage() for r in caplog.records]
        assert "call_finished" in message and "removed" in message
        assert caplog.records[0].exc_info is not None

    def test_only_overridden_hooks_are_called(self) -> None:
        only = _OnlyTicks()
        run_engine(make_engine(fixed_scene(), instruments=[only]), 2)
        assert only.seen == ["tick_finished", "tick_finished"]

    def test_hooks_come_in_order(self) -> None:
        """Calls start in ticket order; through a gate of one, each is admitted and
        finishes before the next is admitted."""
        everything = _Everything()
        scene = fixed_scene((1.0, 2.0), narrator=0.5, summariser=0.5)
        run_engine(make_engine(scene, gate_size=1, instruments=[everything]), 1)
        seen = everything.seen
        agents = ["c0", "c1", "narrator", "summariser"]
        assert seen[:2] == ["run_started", "tick_started 1 4"]
        assert seen[-2:] == ["tick_finished 1", "run_finished"]
        calls = seen[2:-2]
        assert [e for e in calls if e.startswith("call_started")] == [f"call_started {a}" for a in agents]
        assert [e for e in calls if not e.startswith("call_started")] == [
            f"{hook} {a}" for a in agents for hook in ("call_admitted", "call_finished")
        ]
        assert calls.index("call_started summariser") < calls.index("call_finished c0")

    def test_run_finished_is_called_when_the_run_is_cancelled(self) -> None:
        everything = _Everything()
        engine = make_engine(fixed_scene(), instruments=[everything])

        async def main() -> None:
            with trio.move_on_after(7.0):
                await engine.loop.run(100)

        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
        assert everything.seen[-1] == "run_finished"
        assert everything.seen.count("tick_finished 1") == 1


@hypothesis.given(
    tickets=st.lists(st.one_of(st.none(), st.integers(min_value=0, max_value=30)), max_size=12),
    rising=st.booleans(),
)
def test_calls_are_taken_in_ticket_order(tickets: list[int | None], rising: bool) -> None:
    """``_in_ticket_order`` (the order calls are fired in) is ticket order, those without
    a ticket first, ties in the order given, whether the pairs come already in order (its
    pass that returns them as given: ``rising``, distinct tickets rising) or not. Fails if
    the pass takes pairs out of order, or with a ticket missing, for ordered ones."""
    if rising:
        tickets = sorted({t for t in tickets if t is not None})
    requests = [(index, Request(caller="c", agent=f"a{index}", tick=1, model="m", prompt="p", ticket=t)) for index, t in enumerate(tickets)]
    expected = sorted(requests, key=lambda pair: (-1 if pair[1].ticket is None else pair[1].ticket, pair[0]))
    assert tickloop._in_ticket_order(iter(requests)) == expected
