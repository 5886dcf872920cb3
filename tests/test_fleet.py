"""Many worlds on one gate (``manor.fleet``): the same every run, fair, and what it refuses.

Every fleet here runs on the simulated backend under the virtual clock, in this process.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st
from scenes_fixture import TickRecorder

from manor.config import Config, flags_source
from manor.config.layering import built_in_source, layer_defaults_source
from manor.content import Scene
from manor.errors import ConfigError
from manor.fleet.in_process import (
    Fleet,
    build_fleet,
    configure_worlds,
)
from manor.fleet.shares import jain_index
from manor.records import TickRecord
from manor.run.engine import build_engine, configure
from manor.run.opening import open_run
from manor.tick.statistics import RunStatistics

#: No degradation from waiting: the fleets here are larger than the scene's gate timeout.
NO_GATE_TIMEOUT = {"gate.timeout_s": 604_800.0}


def _sources(**values: Any) -> list:
    return [built_in_source(), layer_defaults_source(), flags_source(values, {})]


def _configured(worlds: int | None = None, scenes: tuple[str, ...] = (), **values: Any) -> list[tuple[Config, Scene]]:
    return configure_worlds(_sources(**values), worlds, scenes)


def _run(configured: list[tuple[Config, Scene]], ticks: int) -> tuple[Fleet, list[list[TickRecord]]]:
    """Run the fleet; it and every world's tick records."""
    recorders = [TickRecorder() for _ in configured]
    live = open_run(configured, lambda gate: build_fleet(configured, gate=gate, instruments=lambda index: [recorders[index]]))
    fleet = live.runs
    live.run(lambda fleet: fleet.run(ticks), after=str)
    return fleet, [recorder.ticks for recorder in recorders]


def _solo(config: Config, scene: Scene, ticks: int) -> list[TickRecord]:
    recorder = TickRecorder()
    engine = build_engine(config, scene, instruments=[recorder])
    trio.run(engine.loop.run, ticks, clock=trio.testing.MockClock(autojump_threshold=0))
    return recorder.ticks


class TestDeterminism:
    """trio runs the worlds' tasks in a different order every run; nothing may change."""

    @pytest.mark.parametrize(
        "values",
        [
            pytest.param({}, id="pipeline"),
            pytest.param({"run.policy": "batch"}, id="batch"),
            pytest.param({"run.order": "fifo", "gate.timeout_s": 12.0}, id="fifo-gate-timeouts"),
            pytest.param({"gate.rate": 2.0, "gate.burst": 3, "run.tick_deadline_s": 15.0}, id="token-bucket-deadline"),
        ],
    )  # fmt: skip
    def test_the_same_fleet_gives_the_same_records_every_run(self, values: dict[str, Any]) -> None:
        configured = _configured(5, **values)
        runs = {msgspec.msgpack.encode(_run(configured, 4)[1]) for _ in range(25)}
        assert len(runs) == 1

    def test_the_same_summary_every_run(self) -> None:
        summaries = [_run(_configured(4), 3)[0].summary() for _ in range(5)]
        assert all(summary == summaries[0] for summary in summaries)

    @pytest.mark.parametrize("policy", ["pipeline", "batch"])
    def test_a_fleet_of_one_is_a_single_run(self, policy: str) -> None:
        """The office deals a lone world its tickets as the gate would: the same records."""
        ((config, scene),) = configured = _configured(1, **{"run.policy": policy})
        assert _run(configured, 6)[1] == [_solo(config, scene, 6)]

    def test_undegraded_worlds_tell_the_stories_they_tell_alone(self) -> None:
        """Sharing the gate changes when calls run, not what they say: with no call
        degraded, each world's hash after every tick is its single run's."""
        configured = _configured(4, **NO_GATE_TIMEOUT)
        fleet, records = _run(configured, 5)
        assert fleet.summary()["total"]["degraded"] == 0
        for (config, scene), ticks in zip(configured, records, strict=True):
            assert [tick.world_hash for tick in ticks] == [tick.world_hash for tick in _solo(config, scene, 5)]


class TestWorlds:
    def test_world_i_runs_the_seed_plus_i(self) -> None:
        seeds = [config.settings.run.seed for config, _ in _configured(4, **{"run.seed": 100})]
        assert seeds == [100, 101, 102, 103]

    def test_each_scene_runs_its_own_seed_and_a_repeat_the_next(self) -> None:
        configured = _configured(scenes=("wacky_manor", "tea_party", "wacky_manor"), **{"platform.limit": 4})
        assert [(scene.spec.name, config.settings.run.seed) for config, scene in configured] == [
            ("The Wacky Manor", 1789),
            ("Tea in the Conservatory", 42),
            ("The Wacky Manor", 1790),
        ]

    def test_worlds_take_the_scenes_in_turn(self) -> None:
        configured = _configured(5, scenes=("wacky_manor", "tea_party"), **{"platform.limit": 4})
        assert [scene.path.rsplit("/", 1)[-1] for _, scene in configured] == ["wacky_manor.toml", "tea_party.toml"] * 2 + ["wacky_manor.toml"]

    def test_every_world_shares_the_one_gate_and_limiter(self) -> None:
        fleet = build_fleet(_configured(3))
        assert {id(world.engine.loop.gate) for world in fleet.worlds} == {id(fleet.gate)}
        assert {id(world.engine.loop.limiter) for world in fleet.worlds} == {id(fleet.limiter)}
        assert fleet.gate.size == 5 and fleet.limiter.limit == 6

    def test_the_platform_never_sees_more_than_the_gate(self) -> None:
        fleet, records = _run(_configured(6, **NO_GATE_TIMEOUT), 3)
        total = fleet.summary()["total"]
        assert total["peak_platform_sessions"] == 5
        assert total["platform_rejections"]["total"] == 0
        # No instant with more than 5 calls of all worlds running.
        changes = sorted(
            (when, step)
            for ticks in records for tick in ticks for call in tick.calls if call.admitted_at is not None
            for when, step in ((call.admitted_at, 1), (call.finished_at, -1))
        )  # fmt: skip
        running = peak = 0
        for _, step in changes:
            running += step
            peak = max(peak, running)
        assert peak == 5


class TestSummary:
    def test_worlds_total_and_fairness(self) -> None:
        fleet, _ = _run(_configured(3, **{"gate.timeout_s": 10.0}), 4)
        summary = fleet.summary()
        worlds, total = summary["worlds"], summary["total"]
        assert [world["index"] for world in worlds] == [0, 1, 2]
        assert [world["seed"] for world in worlds] == [1789, 1790, 1791]
        assert total["calls"] == sum(world["calls"] for world in worlds) == 3 * 4 * 14
        assert total["degraded"] == sum(world["degraded"] for world in worlds) > 0
        assert total["degradations"]["character"]["gate_timeout"] == sum(world["degradations"]["character"]["gate_timeout"] for world in worlds)
        assert total["tick_seconds"]["max"] == max(world["tick_seconds"]["max"] for world in worlds)
        for world in worlds:
            assert world["calls_per_s"] == pytest.approx(world["ok"] / world["elapsed_s"], rel=1e-5)
        assert set(summary["fairness"]) == {"jain_share_per_weight", "makespan_min_max"}

    def test_jain_index(self) -> None:
        assert jain_index([2.0, 2.0, 2.0]) == 1.0
        assert jain_index([1.0, 0.0, 0.0, 0.0]) == 0.25
        assert jain_index([]) is None and jain_index([0.0, 0.0]) is None

    def test_no_tick_no_fairness(self) -> None:
        fleet, _ = _run(_configured(2), 0)
        assert fleet.summary()["fairness"] == {"jain_share_per_weight": None, "makespan_min_max": None}


class TestFairness:
    @settings(max_examples=20)
    @given(
        worlds=st.integers(2, 8),
        seed=st.integers(0, 10**6),
        policy=st.sampled_from(["pipeline", "batch"]),
        platform=st.integers(2, 12),
    )
    def test_equal_worlds_get_equal_service(self, worlds: int, seed: int, policy: str, platform: int) -> None:
        """Worlds alike in everything, their draws included, over 20 ticks: Jain's index
        of their session-time share over their due (when they competed at all) and the
        shortest over the longest mean tick are both at least 0.95."""
        config, scene = configure(_sources(**{"run.seed": seed, "run.policy": policy, "platform.limit": platform}, **NO_GATE_TIMEOUT))
        fleet, _ = _run([(config, scene)] * worlds, 20)
        fairness = fleet.summary()["fairness"]
        assert fairness["jain_share_per_weight"] is None or fairness["jain_share_per_weight"] >= 0.95
        assert fairness["makespan_min_max"] >= 0.95

    def test_a_greedy_world_does_not_starve_a_small_one(self) -> None:
        """A world of 204 calls a tick beside one of 14: the small world gets half the
        gate while it has calls waiting, so its ticks take about twice what they take
        alone — where serving whole ticks in turn would make each of them wait for a
        greedy tick (some 13 times as long)."""
        greedy = configure(_sources(**{"run.agents": 200, "run.seed": 1}, **NO_GATE_TIMEOUT))
        small = configure(_sources(**{"run.seed": 2}, **NO_GATE_TIMEOUT))
        fleet, _ = _run([greedy, small], 8)
        alone = RunStatistics()
        for tick in _solo(*small, 8):
            alone.tick_finished(tick, ())
        shared = fleet.worlds[1].statistics.tick_seconds()["mean"]
        assert shared < 2.5 * alone.tick_seconds()["mean"]
        # ...and the greedy world is not starved either: it got more calls through.
        worlds = fleet.summary()["worlds"]
        assert worlds[0]["calls_per_s"] > worlds[1]["calls_per_s"]


class TestRefused:
    def test_the_legacy_policy(self) -> None:
        with pytest.raises(ConfigError, match=r"run.policy = legacy: a fleet's worlds share one gate, and legacy has none"):
            _configured(2, **{"run.policy": "legacy"})

    def test_a_gate_above_the_platform(self) -> None:
        with pytest.raises(ConfigError, match=r"gate.size 7 is above platform.limit 6"):
            _configured(2, **{"gate.size": 7})

    def test_scenes_that_disagree_on_the_platform(self) -> None:
        with pytest.raises(ConfigError) as caught:
            _configured(scenes=("wacky_manor", "tea_party"))
        assert str(caught.value) == (
            "the worlds of a fleet share one platform and one gate, but their platform.limit differs: "
            "6 (world 0: scene wacky_manor.toml), 3 (world 1: scene tea_party.toml); set platform.limit once for every "
            "world (on the command line, in manor.toml or as MANOR_PLATFORM_LIMIT)"
        )

    @pytest.mark.parametrize("worlds", [0, 1001])
    def test_too_few_or_too_many_worlds(self, worlds: int) -> None:
        with pytest.raises(ConfigError, match="a fleet has 1 to 1,000 worlds"):
            _configured(worlds)
