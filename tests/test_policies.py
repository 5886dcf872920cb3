"""Policies: pipeline, batch and legacy — what each does to a tick, exactly."""

from __future__ import annotations

import random

import pytest
import trio
import trio.testing
from scenes_fixture import TEN_LATENCIES, fixed_scene, make_engine, run_engine

from manor.tick.policies import Batch, Legacy, Pipeline, make_policy


class TestMakePolicy:
    @pytest.mark.parametrize(("name", "kind"), [("pipeline", Pipeline), ("batch", Batch), ("legacy", Legacy)])
    def test_each_name_makes_its_policy(self, name: str, kind: type) -> None:
        policy = make_policy(name, 4, 9)
        assert isinstance(policy, kind)
        assert policy.name == name

    def test_batch_and_legacy_take_the_batch_size_and_seed(self) -> None:
        assert make_policy("batch", 4, 9) == Batch(4)
        assert make_policy("legacy", 4, 9) == Legacy(4, 9)

    def test_an_unknown_name_is_refused(self) -> None:
        with pytest.raises(ValueError, match="unknown policy 'fastest'"):
            make_policy("fastest", 3, 0)

    @pytest.mark.parametrize("kind", [Batch, Legacy])
    def test_a_batch_size_below_one_is_refused(self, kind: type) -> None:
        with pytest.raises(ValueError):
            kind(0)

    def test_the_engine_uses_the_configured_policy(self) -> None:
        engine = make_engine(fixed_scene(), run_policy="legacy", run_batch_size=4, run_seed=11)
        assert engine.loop.policy == Legacy(4, 11)


class TestBatch:
    def test_every_call_still_goes_through_the_shared_gate(self) -> None:
        """Gate of 2, waves of 3: a wave is list-scheduled on two slots, and the
        narrator and summariser (tickets after the first wave) hold both slots when
        the second wave is fired. By hand: 3.0, then 3.3 + 4.0, 7.3 + 3.5, 10.8 + 1.0."""
        engine = make_engine(fixed_scene(narrator=0.2, summariser=0.3), run_policy="batch", gate_size=2)
        [tick] = run_engine(engine, 1)
        admitted = {r.agent: r.admitted_at for r in tick.calls}
        assert admitted == pytest.approx({"c0": 0.0, "c1": 0.0, "c2": 1.0, "narrator": 3.0, "summariser": 3.0,
                                          "c3": 3.2, "c4": 3.3, "c5": 4.8, "c6": 7.3, "c7": 7.3, "c8": 7.8,
                                          "c9": 10.8}, abs=1e-3)  # fmt: skip
        assert tick.makespan == pytest.approx(11.8, abs=1e-3)
        assert engine.loop.gate.statistics().peak_in_flight == 2

    def test_a_batch_as_large_as_the_cast_is_one_wave(self) -> None:
        engine = make_engine(fixed_scene(narrator=0.2, summariser=0.3), run_policy="batch", run_batch_size=10, gate_size=20, platform_limit=0)
        [tick] = run_engine(engine, 1)
        assert tick.makespan == pytest.approx(max(TEN_LATENCIES), abs=1e-3)

    def test_the_policy_can_be_switched_between_ticks(self) -> None:
        engine = make_engine(fixed_scene(narrator=0.2, summariser=0.3))

        async def main() -> list[float]:
            spans = [(await engine.loop.step()).makespan]
            engine.loop.policy = Batch(3)
            spans.append((await engine.loop.step()).makespan)
            engine.loop.policy = Pipeline()
            spans.append((await engine.loop.step()).makespan)
            return spans

        spans = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
        assert spans == pytest.approx([5.5, 11.5, 5.5], abs=1e-3)


class TestPipeline:
    def test_a_gate_as_large_as_the_platform_is_never_rejected(self) -> None:
        """A finished call gives back its platform session before its gate permit."""
        engine = make_engine(fixed_scene(), gate_size=6, platform_limit=6)
        ticks = run_engine(engine, 3)
        assert all(r.ok for t in ticks for r in t.calls)
        assert engine.loop.limiter.statistics().rejected == 0
        assert engine.loop.limiter.statistics().peak == 6

    def test_a_gate_larger_than_the_platform_is_rejected(self) -> None:
        """Why the gate is sized below the platform limit."""
        engine = make_engine(fixed_scene(), gate_size=8, platform_limit=4)
        [tick] = run_engine(engine, 1)
        # A rejected call gives its permit back at once, and the next one is let
        # through into the same full platform: everything past the first four fails.
        rejected = [r.agent for r in tick.calls if not r.ok]
        assert rejected == ["c4", "c5", "c6", "c7", "c8", "c9", "narrator", "summariser"]
        assert {r.reason for r in tick.calls if not r.ok} == {"platform_rejected"}
        assert engine.loop.limiter.statistics().rejected == 8


def _jitter(seed: int, agent: str, tick: int, attempt: int) -> float:
    """The legacy backoff's jitter, drawn as the policy draws it."""
    return random.Random(f"{seed}:{agent}:{tick}:{attempt}").uniform(0.5, 1.5)


class TestLegacy:
    """No gate: every caller goes straight at the platform's fail-fast limiter."""

    def test_with_room_on_the_platform_it_takes_the_sum_of_each_waves_slowest(self) -> None:
        engine = make_engine(fixed_scene(narrator=0.2, summariser=0.3), run_policy="legacy", platform_limit=0)
        [tick] = run_engine(engine, 1)
        assert tick.makespan == pytest.approx(11.5, abs=1e-3)
        assert all(r.ok and r.ticket is None for r in tick.calls)

    def test_a_rejected_character_backs_off_twice_then_idles(self) -> None:
        """Platform of 2, a wave of 3: c2 is rejected at once, retried after
        0.5 s x jitter and again 1.0 s x jitter later, rejected both times, and idles.
        The narrator and summariser, fired alongside, are rejected and not retried."""
        scene = fixed_scene((10.0, 10.0, 10.0), seed=5)
        engine = make_engine(scene, run_policy="legacy", platform_limit=2)
        [tick] = run_engine(engine, 1)
        calls = {r.agent: r for r in tick.calls}
        c2 = calls["c2"]
        assert (c2.outcome, c2.reason, c2.attempts) == ("degraded", "platform_rejected", 3)
        second_retry = 0.5 * _jitter(5, "c2", 1, 1) + 1.0 * _jitter(5, "c2", 1, 2)
        assert c2.queued_at == pytest.approx(second_retry, abs=1e-9)
        assert c2.admitted_at is None
        for agent in ("narrator", "summariser"):
            assert (calls[agent].reason, calls[agent].attempts, calls[agent].finished_at) == ("platform_rejected", 1, 0.0)
        assert calls["c0"].ok and calls["c1"].ok
        assert engine.loop.limiter.statistics().rejected == 3 + 2
        assert tick.makespan == pytest.approx(10.0, abs=1e-3)

    def test_a_retry_that_finds_room_succeeds(self) -> None:
        scene = fixed_scene((0.2, 10.0, 1.0), narrator=0.2, summariser=0.3, seed=5)
        engine = make_engine(scene, run_policy="legacy", platform_limit=2)
        [tick] = run_engine(engine, 1)
        c2 = next(r for r in tick.calls if r.agent == "c2")
        retry_at = 0.5 * _jitter(5, "c2", 1, 1)
        assert (c2.outcome, c2.attempts) == ("ok", 2)
        assert c2.admitted_at == pytest.approx(retry_at, abs=1e-9)
        assert c2.finished_at == pytest.approx(retry_at + 1.0, abs=1e-3)

    def test_scene_beats_come_out_speechless(self) -> None:
        scene = fixed_scene((1.0, 1.0, 1.0), beats=2, speakers=("c0", "c1"))
        engine = make_engine(scene, run_policy="legacy", platform_limit=4)
        recorder_ticks = run_engine(engine, 1)
        beats = [r for r in recorder_ticks[0].calls if r.caller == "scene_beat"]
        assert [(r.reason, r.attempts) for r in beats] == [("platform_rejected", 1)] * 2
        assert engine.loop.world.story[-1].fallback == "speechless"
        assert engine.loop.world.story[-1].speaker == "C1"

    def test_calls_of_one_instant_reach_the_platform_in_planning_order(self) -> None:
        """Who is rejected does not depend on trio's scheduling: the first wave, then
        the narrator, the summariser, the beats, in that order."""
        scene = fixed_scene((1.0,) * 6, narrator=1.0, summariser=1.0, beats=2, speakers=("c0", "c1"))
        for limit, rejected in [(3, ["narrator", "summariser", "c0", "c1"]), (4, ["summariser", "c0", "c1"]), (5, ["c0", "c1"])]:
            engine = make_engine(scene, run_policy="legacy", platform_limit=limit)
            [tick] = run_engine(engine, 1)
            assert [r.agent for r in tick.calls if r.attempts == 1 and not r.ok] == rejected
