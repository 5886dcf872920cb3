"""``manor bench``: the smoke run, exact scheduling figures on a hand-computable scene,
the targets, the plot, and the overhead suite's honest "unavailable" answer without aiometer."""

from __future__ import annotations

import importlib.util
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any, Literal

import msgspec
import pytest
import trio
import trio.testing
from scenes_fixture import make_engine, run_engine

from manor.answers import decode_answer
from manor.bench import fastforward, overhead, scale, scheduling
from manor.bench import play as play_suite
from manor.bench.games import NextGame
from manor.bench.instant import InstantProvider
from manor.bench.plot import charts, check_plot_path, render_svg, write_plot
from manor.bench.report import evaluate_targets
from manor.bench.suite import BenchContext, BenchError
from manor.calls import Done, Request
from manor.cli import main
from manor.config import flags_source, standard_sources
from manor.config.layering import built_in_source
from manor.providers.provider import DeadlineReached, by_deadline, call_deadline
from manor.records import CallRecord, TickRecord
from manor.run.engine import configure as run_configure
from manor.worlds import load_scene
from manor.worlds.manor import CallerKind

POLICIES = ("batch", "pipeline", "fifo", "longest_first", "longest_first_mean", "longest_first_actual")
FIGURES = ("makespan_mean_s", "makespan_p95_s", "lower_bound_mean_s", "efficiency", "use_over_run")


def bench_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["bench", *args, "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1, "--json prints one line, nothing else"
    return json.loads(out)


def call(latency: float, admitted_at: float = 0.0) -> CallRecord:
    return CallRecord(
        tick=1, ticket=0, caller="character", agent="a", queued_at=0.0,
        admitted_at=admitted_at, finished_at=admitted_at + latency, outcome="ok",
    )


def tick(*calls: CallRecord, makespan: float) -> TickRecord:
    return TickRecord(tick=1, started_at=0.0, finished_at=makespan, calls=calls, world_hash="")


class TestSmoke:
    """``manor bench --quick --json``: every key the issue names, and sane numbers."""

    @pytest.mark.slow(5)
    def test_quick_json_has_every_key_and_sane_numbers(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        """Every suite reports; positive figures, efficiency <= 1, bound <= makespan.
        The play suite in one round, not two: a round is most of a --quick run's CPU
        (the dashboard's), and a second one, its best of two, adds no figure. The scale
        suite in one round, not three (each size's round is a Python of its own): how
        rounds make a size's figures is ``test_a_scale_point_is_the_median_of_its_rounds``."""
        monkeypatch.setattr(play_suite, "ROUNDS_QUICK", 1)
        monkeypatch.setattr(scale, "ROUNDS", 1)
        result = bench_json(capsys, "--quick")
        assert result["suites"] == ["scheduling", "overhead", "fastforward", "scale", "replay", "play"]
        sched = result["scheduling"]
        for name in POLICIES:
            figures = sched[name]
            assert set(FIGURES) <= set(figures)
            assert all(figures[key] > 0 for key in FIGURES)
            assert figures["efficiency"] <= 1.0 and figures["use_over_run"] <= 1.0
            assert figures["lower_bound_mean_s"] <= figures["makespan_mean_s"] <= figures["makespan_p95_s"] + 1e-9
        # The draws are paired: every policy faced the same latencies.
        assert len({sched[name]["lower_bound_mean_s"] for name in POLICIES}) == 1
        assert sched["speedup"] == pytest.approx(sched["batch"]["makespan_mean_s"] / sched["pipeline"]["makespan_mean_s"], rel=1e-3)
        assert [point["gate_size"] for point in sched["gate_sweep"]] == [1, 2, 3, 4, 5, 6]
        assert [point["characters"] for point in sched["cast_sweep"]] == [10, 20, 50]
        assert [point["scene"] for point in sched["scene_sweep"]] == ["reading_of_the_will", "tea_party", "wacky_manor", "werewolf_village"]
        for point in sched["scene_sweep"]:
            assert all(0 < point[name]["use_over_run"] <= 1.0 for name in ("fifo", "pipeline", "longest_first_actual")), point["scene"]
        assert sched["setup"]["order"] == "longest-first"
        # Against fifo: the default scene is a shipped one, so it is compared once.
        assert [point["at"] for point in sched["versus_fifo"]] == [
            "the scene", "scene reading_of_the_will", "scene tea_party", "scene werewolf_village",
            "10 characters", "20 characters", "50 characters",
        ]  # fmt: skip
        # Against longest-first on the true means: at the same points, as a share of its efficiency.
        assert [point["at"] for point in sched["versus_mean"]] == [point["at"] for point in sched["versus_fifo"]]
        assert sched["prediction"]["predictor"]["calls"] == sched["prediction"]["mean"]["calls"] > 0
        assert sched["gap"]["prediction"] == pytest.approx(sched["gap"]["scatter"] + sched["gap"]["estimation"], abs=2e-4)
        assert sched["legacy"]["calls"] > 0
        head = result["overhead"]
        for key in ("calls", "manor_calls_per_s", "trio_calls_per_s", "ratio_vs_trio", "trio_bounded_calls_per_s", "manor_unbounded_calls_per_s"):
            assert head[key] > 0, key
        if importlib.util.find_spec("aiometer") is not None:
            assert head["aiometer_calls_per_s"] > 0
        else:  # aiometer is the optional 'bench' extra
            assert head["aiometer_calls_per_s"] is None and head["aiometer"].startswith("unavailable")
        assert head["ratio_vs_trio_best"] == pytest.approx(head["manor_calls_per_s"] / head["trio_calls_per_s"], rel=1e-2)
        assert len(head["ratio_vs_trio_rounds"]) == head["rounds"]
        assert head["ratio_vs_trio"] == pytest.approx(statistics.median(head["ratio_vs_trio_rounds"]), abs=1e-4)
        ahead = result["fastforward"]
        for key in ("manor_ticks_per_s", "manor_streamed_ticks_per_s", "trio_ticks_per_s", "ratio_vs_trio", "sim_draws_us_per_call"):
            assert ahead[key] > 0, key
        assert ahead["same_records"] is True
        assert ahead["ratio_vs_trio"] == pytest.approx(statistics.median(ahead["ratio_vs_trio_rounds"]), abs=1e-4)
        assert [point["agents"] for point in result["scale"]] == [100, 1000]
        for point in result["scale"]:
            assert {"agents", "tick_wall_s", "per_call_us", "peak_rss_mb"} <= set(point)
            # Every size timed over the same calls: rounds of whole ticks, each of 1,000 or more.
            assert point["rounds"] == scale.ROUNDS
            assert point["ticks_per_round"] * point["calls_per_tick"] >= 1_000 > (point["ticks_per_round"] - 1) * point["calls_per_tick"]
            assert point["tick_wall_s"] > 0 and point["per_call_us"] > 0
            assert point["peak_rss_mb"] >= point["baseline_rss_mb"] >= point["startup_rss_mb"] > 0
            # From the unrounded figures: the two printed to 0.1 MB may each be 0.05 off.
            rounding = 0.1 * 1024 / point["agents"] + 0.01
            assert point["rss_per_agent_kb"] == pytest.approx((point["peak_rss_mb"] - point["startup_rss_mb"]) * 1024 / point["agents"], abs=rounding)
        assert result["replay"].get("replay_ticks_per_second", 1) > 0
        play = result["play"]
        for name in ("headless", "instrument", "dashboard"):
            assert play[f"{name}_calls_per_s"] > 0 and play[f"{name}_us_per_call"] > 0, name
        assert play["ratio"] == pytest.approx(play["dashboard_calls_per_s"] / play["headless_calls_per_s"], rel=1e-2)
        assert play["calls"] == play["ticks"] * play["calls_per_tick"] >= 1_500
        names = [target["target"] for target in result["targets"]]
        assert "scheduling.default - longest_first_mean efficiency, worst" in names and "overhead.ratio_vs_trio" in names
        assert "fastforward.ratio_vs_trio" in names and "fastforward.same_records" in names
        assert "play.ratio" in names


def write_scene(root: Path) -> str:
    """Four one-second characters, a 4 s narrator, a 1 s summariser; platform 3, so
    gate 2. Fixed latencies: every figure can be worked out by hand."""
    agents = root / "agents"
    agents.mkdir()
    for agent_id, role, latency in [("c0", "character", 1), ("c1", "character", 1), ("c2", "character", 1),
                                     ("c3", "character", 1), ("narrator", "narrator", 4), ("summariser", "summariser", 1)]:
        (agents / f"{agent_id}.toml").write_text(f'name = "{agent_id}"\nrole = "{role}"\n[sim]\nlatency_s = {latency}\njitter = 0\n')
    scenes = root / "scenes"
    scenes.mkdir()
    path = scenes / "fixed.toml"
    path.write_text('name = "Fixed"\nseed = 3\nplatform_limit = 3\nrooms = ["hall"]\ncast = ["c0", "c1", "c2", "c3"]\n')
    return str(path)


class TestSchedulingFigures:
    """The scheduling suite on a scene whose every schedule is known."""

    def test_exact_figures_on_a_fixed_scene(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """Lower bound max(4, 9/2) = 4.5; FIFO ends at 6, longest-first (the default) at 5,
        batch at 5."""
        result = bench_json(capsys, "--suite", "scheduling", "--draws", "3", "--scene", write_scene(tmp_path))
        sched = result["scheduling"]
        # FIFO on gate 2: c0,c1 0-1; c2,c3 1-2; narrator 2-6 and summariser 2-3.
        assert sched["fifo"]["makespan_mean_s"] == pytest.approx(6.0)
        # Narrator first: 0-4 beside c0..c3 one after another 0-4; summariser 4-5. No
        # schedule does better with whole calls: the predictions are the latencies.
        for name in ("pipeline", "longest_first", "longest_first_mean", "longest_first_actual"):
            assert sched[name]["makespan_mean_s"] == pytest.approx(5.0)
        # Narrator first beside the wave c0,c1,c2 and the summariser, one after another
        # 0-4; then c3 waits for a slot until 4: 4-5. Under fifo: c0,c1 0-1; c2 1-2,
        # narrator 1-5; summariser 2-3; c3 3-4. Both end at 5.
        assert sched["batch"]["makespan_mean_s"] == pytest.approx(5.0)
        for name in POLICIES:
            assert sched[name]["lower_bound_mean_s"] == pytest.approx(4.5)
            assert sched[name]["makespan_p95_s"] == pytest.approx(sched[name]["makespan_mean_s"])
        assert sched["fifo"]["efficiency"] == pytest.approx(0.75)
        assert sched["pipeline"]["efficiency"] == pytest.approx(0.9)
        # 9 session-seconds a tick on 2 sessions, ticks back to back: 9 / (2 x makespan).
        for name in POLICIES:
            assert sched[name]["use_over_run"] == pytest.approx(9 / (2 * sched[name]["makespan_mean_s"]), abs=1e-4), name
        assert sched["speedup"] == pytest.approx(1.0)
        assert sched["speedup_fifo"] == pytest.approx(5 / 6, abs=1e-3)
        # Fixed latencies: nothing to mispredict, the gap to the bound is the rule's.
        assert sched["prediction"]["predictor"]["mean_abs_error_s"] == 0.0
        assert sched["gap"] == {"prediction": 0.0, "scatter": 0.0, "estimation": 0.0, "schedule": pytest.approx(0.1)}
        assert sched["versus_fifo"][0] == {"at": "the scene", "margin": pytest.approx(0.15), "margin_se": 0.0}
        # Fixed latencies: the predictor learns the true means, so it orders as they do.
        assert sched["versus_mean"][0] == {"at": "the scene", "margin": 0.0, "margin_se": 0.0}
        # Gate 1 runs the calls one after another: the bound, exactly.
        first = sched["gate_sweep"][0]
        assert first["gate_size"] == 1
        assert first["fifo"]["makespan_mean_s"] == pytest.approx(9.0)
        assert first["fifo"]["efficiency"] == pytest.approx(1.0)
        assert first["fifo"]["use_over_run"] == pytest.approx(1.0)
        assert [point["gate_size"] for point in sched["gate_sweep"]] == [1, 2, 3]

    def test_the_oracles_know_the_draws(self) -> None:
        """ActualLatency answers what the simulator will draw for the call; MeanLatency
        its agent's mean, around which the draws scatter."""
        from manor.providers import SimProfile, SimProvider

        backend = SimProvider({"a": SimProfile(latency_s=2.0, jitter=0.3)}, seed=5)
        requests = [Request(caller=CallerKind.CHARACTER, agent="a", tick=tick) for tick in range(1, 6)]
        actual, mean = scheduling.ActualLatency(backend), scheduling.MeanLatency(backend)
        assert actual.latencies(requests) == [backend.latency(r) for r in requests]
        assert len(set(actual.latencies(requests))) == 5
        assert set(mean.latencies(requests)) == {2.0}

    def test_lower_bound_is_the_longest_call_or_the_work_per_slot(self) -> None:
        """max(longest, total / gate): either side can be the bound."""
        assert scheduling.lower_bound(tick(call(5.0), call(1.0), call(1.0), makespan=5.0), 2) == 5.0
        assert scheduling.lower_bound(tick(call(2.0), call(2.0), call(2.0), makespan=4.0), 2) == 3.0

    def test_use_over_the_run_counts_what_the_barrier_leaves_idle(self) -> None:
        """Gate 2. Tick 1, 0-5 s: calls of 5, 1 and 1 s, as good as a schedule gets
        (efficiency 1), yet one slot idles 3 s while the 5 s call ends. Tick 2 starts
        1 s later, 6-10 s: three 2 s calls (bound 3, efficiency 0.75). Held: 13
        session-seconds, of 2 x 10 offered from 0 to 10 s, the pause between ticks
        included: 0.65."""
        first = TickRecord(tick=1, started_at=0.0, finished_at=5.0, calls=(call(5.0), call(1.0), call(1.0, admitted_at=1.0)), world_hash="")
        second = TickRecord(tick=2, started_at=6.0, finished_at=10.0, calls=(call(2.0, 6.0), call(2.0, 6.0), call(2.0, 8.0)), world_hash="")
        assert scheduling.use_over_run([first, second], 2) == pytest.approx(0.65)
        figures = scheduling.summarise([first, second], 2)
        assert figures["efficiency"] == pytest.approx(0.875)
        assert figures["use_over_run"] == pytest.approx(0.65)
        assert scheduling.use_over_run([], 2) == 0.0

    def test_efficiency_is_the_mean_of_per_draw_ratios(self) -> None:
        """Two draws at 1.0 and 0.5 give 0.75, not the ratio of the means."""
        figures = scheduling.summarise([tick(call(2.0), makespan=2.0), tick(call(2.0), makespan=4.0)], 1)
        assert figures["efficiency"] == pytest.approx(0.75)
        assert figures["makespan_mean_s"] == pytest.approx(3.0)
        assert figures["lower_bound_mean_s"] == pytest.approx(2.0)


@pytest.mark.parametrize(("scene", "calls"), [("wacky_manor", 14), ("tea_party", 6), ("werewolf_village", 10)])
def test_on_an_unlimited_platform_the_gate_sweep_goes_to_a_full_tick(scene: str, calls: int) -> None:
    """One call per agent, or the first tick's plan if it is longer: the manor's ten
    characters, narrator, summariser and two beats; Werewolf's eight players, narrator
    and summariser (its first night calls only five). The sweep read the manor's beats
    from every scene before; the figures are those it gave."""
    config, loaded = run_configure([built_in_source(), flags_source({"run.scene": scene, "platform.limit": 0}, {})])
    assert scheduling._gate_sizes(config, loaded) == range(1, calls + 1)


class TestTargets:
    """Each target is judged from the figures, and says when it was not measured."""

    bounded = {"trio_calls_per_s": 100.0, "trio_bounded_calls_per_s": 50.0, "ratio_vs_trio_bounded": 1.2, "ratio_unbounded_vs_trio": 0.7}

    def result(self, **changes: Any) -> dict[str, Any]:
        result: dict[str, Any] = {
            "scheduling": {
                "setup": {"order": "longest-first"},
                "pipeline": {"efficiency": 0.91}, "longest_first": {"efficiency": 0.91}, "longest_first_actual": {"efficiency": 0.97},
                "gap": {"prediction": 0.01, "scatter": 0.008, "estimation": 0.002, "schedule": 0.03},
                "versus_fifo": [{"at": "the scene", "margin": 0.1, "margin_se": 0.01}, {"at": "scene tea_party", "margin": 0.004, "margin_se": 0.002}],
                "versus_mean": [{"at": "the scene", "margin": 0.0, "margin_se": 0.001}, {"at": "20 characters", "margin": -0.004, "margin_se": 0.002}],
                "speedup": 1.2, "speedup_fifo": 1.1,
            },
            "overhead": {**self.bounded, "ratio_vs_trio": 0.6, "ratio_vs_aiometer": 1.5},
            "scale": [{"agents": 100, "per_call_us": 10.0}, {"agents": 10_000, "per_call_us": 16.0}],
        }
        result.update(changes)
        return result

    def test_met_and_missed(self) -> None:
        met = {target["target"]: target["met"] for target in evaluate_targets(self.result())}
        notes = {target["target"]: target.get("note", "") for target in evaluate_targets(self.result())}
        assert notes["overhead.ratio_vs_trio"] == (
            "bare trio with the same two bounds runs at 0.500; manor / that: 1.200; manor without the bounds / bare trio: 0.700"
        )
        assert notes["scheduling.default - fifo efficiency, worst"] == "at scene tea_party"
        assert notes["scheduling.default - longest_first_mean efficiency, worst"] == "at 20 characters"
        assert met == {
            "scheduling.longest_first_actual.efficiency": True,
            "scheduling.default - longest_first_mean efficiency, worst": True,
            "scheduling.default - fifo efficiency, worst": True,
            "scheduling.speedup": False,
            "overhead.ratio_vs_trio": True,
            "overhead.manor / aiometer": True,
            "scale.per_call_us 10,000 / 100 agents": False,
            "scale.per_call_us 100,000 / 100 agents": None,
            "scale.peak_rss_mb 100,000 agents": None,
        }

    @pytest.mark.parametrize(("ratio", "met"), [(0.55, False), (0.6, True)])
    def test_overhead_and_fastforward_judged_at_six_tenths_of_bare_trio(self, ratio: float, met: bool) -> None:
        """The issue's bar is 0.6 of bare trio for both (it was 0.5 before)."""
        fast = {"ratio_vs_trio": ratio, "ratio_streamed_vs_trio": ratio, "same_records": True}
        result = self.result(overhead={**self.bounded, "ratio_vs_trio": ratio, "ratio_vs_aiometer": 1.5}, fastforward=fast)
        judged = {target["target"]: target for target in evaluate_targets(result)}
        for name in ("overhead.ratio_vs_trio", "fastforward.ratio_vs_trio"):
            assert (judged[name]["goal"], judged[name]["met"]) == (">= 0.6", met)

    def test_a_hundred_thousand_agents_flat_and_under_400_mb(self) -> None:
        """Judged from the 100,000-agent point; its memory is stated per agent."""
        large = {"agents": 100_000, "per_call_us": 12.5, "peak_rss_mb": 350.0, "startup_rss_mb": 40.0, "rss_per_agent_kb": 3.18}
        points = [{"agents": 100, "per_call_us": 10.0}, {"agents": 10_000, "per_call_us": 16.0}, large]
        judged = {target["target"]: target for target in evaluate_targets(self.result(scale=points))}
        assert judged["scale.per_call_us 100,000 / 100 agents"]["value"] == pytest.approx(1.25)
        assert judged["scale.per_call_us 100,000 / 100 agents"]["met"] is True
        memory = judged["scale.peak_rss_mb 100,000 agents"]
        assert (memory["value"], memory["met"]) == (350.0, True)
        assert memory["note"] == "3.18 KB an agent above the 40 MB of a started process"
        points[2] = {**large, "per_call_us": 13.5, "peak_rss_mb": 450.0}
        judged = {target["target"]: target for target in evaluate_targets(self.result(scale=points))}
        assert judged["scale.per_call_us 100,000 / 100 agents"]["met"] is False
        assert judged["scale.peak_rss_mb 100,000 agents"]["met"] is False

    @pytest.mark.parametrize(
        ("margin", "error", "met"),
        [(0.0, 0.01, True), (-0.005, 0.01, None), (-0.005, None, None), (-0.03, 0.01, False)],
    )
    def test_below_fifo_within_the_noise_of_the_draws_is_neither(self, margin: float, error: float | None, met: bool | None) -> None:
        """Below fifo by more than two standard errors is missed; by less, with a few
        draws, it cannot be told from luck."""
        result = self.result()
        result["scheduling"]["versus_fifo"] = [{"at": "scene tea_party", "margin": margin, "margin_se": error}]
        [judged] = [t for t in evaluate_targets(result) if t["target"] == "scheduling.default - fifo efficiency, worst"]
        assert judged["met"] is met and judged["note"].startswith("at scene tea_party")

    @pytest.mark.parametrize(
        ("margin", "error", "met"),
        [(-0.005, 0.01, True), (-0.008, 0.002, None), (-0.008, None, None), (-0.02, 0.004, False)],
    )
    def test_the_default_within_half_a_percent_of_longest_first_on_the_true_means(
        self, margin: float, error: float | None, met: bool | None
    ) -> None:
        """The issue's standard: the default order within 0.5 % of longest-first handed
        the agents' true means, at every point; further below by more than two standard
        errors is missed, by less it cannot be told from the luck of the draws. The
        default's own efficiency (0.91 here) is a figure, no longer a target."""
        result = self.result()
        result["scheduling"]["versus_mean"] = [{"at": "the scene", "margin": 0.002, "margin_se": 0.001}, {"at": "10 characters", "margin": margin, "margin_se": error}]
        judged = {t["target"]: t for t in evaluate_targets(result)}
        mean = judged["scheduling.default - longest_first_mean efficiency, worst"]
        assert (mean["goal"], mean["met"]) == (">= -0.005", met) and mean["note"].startswith("at 10 characters")
        assert "scheduling.pipeline.efficiency" not in judged and "scheduling.longest_first.efficiency" not in judged

    def test_not_measured_is_neither_met_nor_missed(self) -> None:
        result = self.result(
            overhead={**self.bounded, "ratio_vs_trio": 0.6, "ratio_vs_aiometer": None, "aiometer": "unavailable: aiometer is not installed"},
            scale=[{"agents": 100, "per_call_us": 10.0}, {"agents": 1_000, "per_call_us": 30.0}],
        )
        judged = {target["target"]: target for target in evaluate_targets(result)}
        assert judged["overhead.manor / aiometer"]["met"] is None
        assert "not installed" in judged["overhead.manor / aiometer"]["note"]
        assert judged["scale.per_call_us 10,000 / 100 agents"]["met"] is None


class TestFastForward:
    """The fastforward suite: Manor's virtual-clock run, the same streamed, bare trio."""

    def test_figures_side_by_side(self) -> None:
        """One timer a call against five streamed, the same records, and the ratios
        the rates make."""
        figures = fastforward.run(BenchContext(sources=standard_sources(environ={}), quick=True))
        assert figures["same_records"] is True
        assert figures["ticks"] == fastforward.TICKS_QUICK and figures["calls"] == 14 * fastforward.TICKS_QUICK
        # Every answer of the Wacky Manor has four words or more: a first token and four pieces.
        assert figures["manor_streamed_clock_jumps_per_call"] == 5.0
        assert figures["trio_clock_jumps_per_call"] == 1.0
        # The first seconds of a run still stream (their jumps could round): a few calls.
        assert 1.0 <= figures["manor_clock_jumps_per_call"] < 1.5
        assert figures["ratio_vs_trio_best"] == pytest.approx(figures["manor_ticks_per_s"] / figures["trio_ticks_per_s"], rel=1e-2)
        assert figures["ratio_vs_trio"] == pytest.approx(statistics.median(figures["ratio_vs_trio_rounds"]), abs=1e-4)
        assert figures["speedup_vs_streamed"] == pytest.approx(
            figures["manor_ticks_per_s"] / figures["manor_streamed_ticks_per_s"], rel=1e-2
        )

    @pytest.mark.parametrize(("ratio", "same", "met"), [(0.6, True, (True, True)), (0.4, True, (False, True)), (0.6, False, (True, False))])
    def test_targets(self, ratio: float, same: bool, met: tuple[bool, bool]) -> None:
        figures = {"ratio_vs_trio": ratio, "ratio_streamed_vs_trio": 0.15, "same_records": same}
        judged = {target["target"]: target["met"] for target in evaluate_targets({"fastforward": figures})}
        assert (judged["fastforward.ratio_vs_trio"], judged["fastforward.same_records"]) == met


class TestPlayTarget:
    """The dashboard's cost is judged from the live run against the headless one."""

    def test_met_and_missed_with_the_instrument_alone_beside(self) -> None:
        play = {"ratio": 0.93, "ratio_instrument": 0.97}
        (target,) = evaluate_targets({"play": play})
        assert (target["target"], target["value"], target["met"]) == ("play.ratio", 0.93, True)
        assert target["note"] == "the instrument alone, headless: 0.970"
        (target,) = evaluate_targets({"play": {**play, "ratio": 0.85}})
        assert target["met"] is False


class TestUnavailable:
    """A suite whose tool is missing says so instead of reporting a figure."""

    def test_overhead_without_aiometer(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setitem(sys.modules, "aiometer", None)  # import fails
        figures = overhead.run(BenchContext(sources=standard_sources(environ={}), quick=True))
        assert figures["aiometer_calls_per_s"] is None
        assert figures["aiometer"].startswith("unavailable: aiometer is not installed")
        assert figures["manor_calls_per_s"] > 0


class TestPlot:
    """--plot: SVG drawn by hand; a bad request is refused before anything runs."""

    def test_svg_has_the_three_charts(self, tmp_path: Path) -> None:
        result = {
            "scheduling": {
                "setup": {"scene": "S", "draws": 3},
                **{name: {"makespan_mean_s": 5.0, "makespan_p95_s": 6.0, "lower_bound_mean_s": 4.5} for name in POLICIES},
                "gate_sweep": [{"gate_size": g, "fifo": {"makespan_mean_s": 9.0 / g, "lower_bound_mean_s": 8.0 / g},
                                "longest_first": {"makespan_mean_s": 8.5 / g}} for g in (1, 2, 3)],
            },
            "scale": [{"agents": 100, "per_call_us": 50.0}, {"agents": 1000, "per_call_us": 55.0}],
        }
        assert [chart.kind for chart in charts(result)] == ["bars", "lines", "lines"]
        path = tmp_path / "bench.svg"
        write_plot(path, result)
        svg = path.read_text()
        assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
        assert svg.count("<rect x=") >= 12  # 4 policies x 3 bars (and the legend)
        assert svg.count("<polyline") == 4  # 3 lines in the sweep, 1 scale curve (no references given)
        assert "Cost per call as the cast grows" in svg
        assert render_svg([]).startswith("<svg")

    @pytest.mark.parametrize(
        ("name", "message"),
        [("bench.jpg", "must end in .png or .svg"), ("missing/bench.svg", "no such folder")],
    )
    def test_a_bad_plot_path_is_one_line_before_any_suite(self, capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, message: str) -> None:
        assert main(["bench", "--quick", "--plot", str(tmp_path / name)]) == 1
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err.count("\n") == 1 and message in captured.err

    def test_png_without_matplotlib_says_how_to_get_it(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        monkeypatch.setitem(sys.modules, "matplotlib", None)
        with pytest.raises(BenchError, match=r"pip install 'manor\[plot\]'"):
            check_plot_path(tmp_path / "bench.png", ["scheduling"])

    def test_a_plot_needs_a_suite_that_draws(self, tmp_path: Path) -> None:
        with pytest.raises(BenchError, match="scheduling and scale"):
            check_plot_path(tmp_path / "bench.svg", ["overhead"])


class TestCommandLine:
    """Mistakes on the command line: one line, non-zero, nothing run."""

    @pytest.mark.parametrize("args", [["--suite", "nope"], ["--draws", "0"], ["--draws", "many"]])
    def test_bad_flags(self, capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
        with pytest.raises(SystemExit) as exit_:
            main(["bench", *args])
        assert exit_.value.code == 2
        assert capsys.readouterr().err.count("\n") == 1

    def test_an_unknown_scene_is_one_line(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["bench", "--quick", "--scene", "no_such_scene"]) == 1
        assert capsys.readouterr().err.startswith("manor: error: unknown scene 'no_such_scene'")

    def test_tables_for_a_person(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """Without --json: the suite's tables and the targets, and the plot written."""
        plot = tmp_path / "bench.svg"
        assert main(["bench", "--suite", "scheduling", "--draws", "2", "--plot", str(plot)]) == 0
        out = capsys.readouterr().out
        for heading in ("scheduling", "legacy", "gate size sweep", "cast size sweep", "shipped scenes", "targets", "lf on actuals", "prediction error"):
            assert heading in out
        assert plot.read_text().startswith("<svg")


class TestAtEightyColumns:
    """At 80 columns no name or heading is cut with an ellipsis (two targets read
    ``scheduling.longest_…``), and no remark has double parentheses."""

    def test_the_scheduling_tables(self, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("COLUMNS", "80")
        assert main(["bench", "--suite", "scheduling", "--draws", "2"]) == 0
        out = capsys.readouterr().out
        assert max(len(line) for line in out.splitlines()) <= 80
        assert "…" not in out and "((" not in out and "))" not in out
        folded = "".join(line.split("│")[1].strip() for line in out[out.index("\ntargets"):].splitlines() if line.startswith("│"))
        for name in (
            "scheduling.longest_first_actual.efficiency", "scheduling.default - longest_first_mean efficiency, worst",
            "scheduling.default - fifo efficiency, worst",
        ):  # fmt: skip
            assert name.replace(" ", "") in folded.replace(" ", "")  # (a name may wrap where it has a space)

    def test_quick_is_described_as_it_is(self, capsys: pytest.CaptureFixture[str]) -> None:
        """It took 39 s on two busy cores (benchmarks/notes/bench-quick-duration.md), 81 s in the issue."""
        with pytest.raises(SystemExit):
            main(["bench", "--help"])
        assert "(seconds)" not in capsys.readouterr().out


class TestInstantProvider:
    def test_cold_then_one_done(self) -> None:
        """Nothing runs until iterated; then one Done and the end."""
        stream = InstantProvider().invoke(Request(caller=CallerKind.CHARACTER, agent="a"))

        async def events() -> list[object]:
            return [event async for event in stream]

        [done] = trio.run(events)
        assert isinstance(done, Done)


    def test_a_shaped_request_gets_a_valid_answer(self) -> None:
        shape = msgspec.defstruct("Vote", [("target", Literal["Ann", "Bob"])])

        async def done() -> Done:
            return [event async for event in InstantProvider().invoke(Request(caller="vote", agent="a", shape=shape))][-1]

        assert decode_answer(trio.run(done).text, shape).target in ("Ann", "Bob")  # type: ignore[attr-defined]

    @pytest.mark.parametrize("after", [-1.0, 0.0, 1e-9, 1.0, math.inf])
    def test_it_keeps_a_deadline_as_a_cancel_scope_would(self, after: float) -> None:
        """Its answer, keeping the call's deadline itself, ends as its stream does inside
        a cancel scope at that deadline: the same answer, or ``DeadlineReached``."""
        request = Request(caller=CallerKind.CHARACTER, agent="a")

        async def ends(kept: bool) -> str:
            await trio.sleep(10.0)
            deadline = trio.current_time() + after
            reset = call_deadline.set(deadline)
            try:
                done = await (InstantProvider().answer(request) if kept else by_deadline(deadline, stream(request)))
            except DeadlineReached:
                return "deadline"
            finally:
                call_deadline.reset(reset)
            return done.text

        async def stream(request: Request) -> Done:
            return [event async for event in InstantProvider().invoke(request)][-1]  # type: ignore[return-value]

        def run(kept: bool) -> str:
            return trio.run(ends, kept, clock=trio.testing.MockClock(autojump_threshold=0))

        assert InstantProvider.keeps_deadline
        assert run(kept=True) == run(kept=False) == ("deadline" if after <= 0 else "ok")


def test_flags_source_is_what_the_context_sees() -> None:
    """Settings given to the context are the ones its runs use; a suite's own
    overrides (a gate size for the sweep) beat the user's flags."""
    sources = standard_sources(flags=flags_source({"gate.size": 2}, {}), environ={})
    context = BenchContext(sources=sources)
    assert context.configure()[0].settings.gate.size == 2
    assert context.configure({"gate.size": 4})[0].settings.gate.size == 4


class TestGameWorlds:
    """A world whose game ends (Werewolf): a suite plays game after game and gets every
    tick it asked for; the scale suite says why it cannot measure it."""

    def test_next_game_keeps_a_loop_going(self) -> None:
        scene = load_scene("werewolf_village")
        engine = make_engine(scene)
        next_game = NextGame(scene, 5)
        engine.loop.add_instrument(next_game)
        ticks = run_engine(engine, 60)
        assert len(ticks) == 60 and next_game.games >= 3
        assert {len(tick.calls) for tick in ticks} > {5, 10}  # nights, days, and fewer as players die
        assert ticks[0].tick == 1 and 1 in [tick.tick for tick in ticks[1:]]  # a new game starts at its tick 1

    def test_a_quick_bench_of_werewolf(self, capsys: pytest.CaptureFixture[str]) -> None:
        result = bench_json(capsys, "--quick", "--scene", "werewolf_village", "--suite", "overhead", "--suite", "fastforward",
                            "--suite", "scale", "--suite", "replay")  # fmt: skip
        assert result["suites"] == ["overhead", "fastforward", "scale", "replay"]
        assert "scale" not in result and result["skipped"]["scale"].endswith("The Werewolves of Hollowmere plays world 'werewolf'")
        assert result["overhead"]["manor_calls_per_s"] > 0 and result["fastforward"]["ticks"] == fastforward.TICKS_QUICK
        assert result["fastforward"]["same_records"] is True
        assert result["replay"]["verified"] is True and 3 <= result["replay"]["ticks"] <= 18


def test_a_scale_point_is_the_median_of_its_rounds() -> None:
    """A size's figures from its rounds (each in a process of its own): the median of
    each time, the memory of the round that peaked highest, every round's cost a call."""
    rounds = [
        {"agents": 100, "tick_wall_s": wall, "per_call_us": per_call, "trio_all_at_once_per_call_us": 1.0,
         "trio_acquire_first_per_call_us": 2.0, "peak_rss_mb": peak, "baseline_rss_mb": 50.0 + peak}
        for wall, per_call, peak in ((0.3, 30.0, 80.0), (0.1, 10.0, 90.0), (0.2, 50.0, 70.0))
    ]  # fmt: skip
    assert scale._point(rounds) == {
        "agents": 100, "tick_wall_s": 0.2, "per_call_us": 30.0, "trio_all_at_once_per_call_us": 1.0,
        "trio_acquire_first_per_call_us": 2.0, "peak_rss_mb": 90.0, "baseline_rss_mb": 140.0,
        "rounds": 3, "per_call_us_rounds": [30.0, 10.0, 50.0],
    }  # fmt: skip


def test_a_scale_worker_s_peak_memory_is_its_own_not_its_parent_s() -> None:
    """The parent has grown by 256 MB (a full ``manor bench`` has, after the other
    suites); the worker it starts for 100 agents reports what it took itself.
    ``getrusage`` would report the parent's peak: on Linux it survives ``execve``."""
    grown = bytearray(256 * 1024 * 1024)
    grown[:: 4096] = b"\1" * len(grown[:: 4096])  # touched: resident, not just reserved
    point = scale._in_fresh_process(BenchContext(quick=True), 100)
    assert point["startup_rss_mb"] < 200 and point["peak_rss_mb"] < 200, point
    del grown
