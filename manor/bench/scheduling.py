"""The scheduling suite: how close each policy gets to the best any schedule could do.

Virtual clock, so every figure is exact and the same on every machine. A *draw* is one
tick: configuration by configuration, the suite runs one free-running run of R ticks of
the scene on its simulated backend (a game that ends is followed by the next one,
``NextGame``). The backend keys every call's latency on (seed,
agent, caller, tick), so tick r of every configuration draws the same latencies — the
comparison between policies is paired, draw by draw. Tick 1 of a run predicts (for
longest-first) from the scene's latency profiles; later ticks from each caller's own
past calls, as a game does once it is running.

The lower bound of a tick on a gate of size g is ``max(longest call, total call time /
g)``, from the calls' actual latencies (``finished_at - admitted_at``): no schedule can
finish before its longest call, nor run more than g calls at once. ``efficiency`` is the
mean over draws of ``lower bound / makespan``; ``speedup`` is the ratio of the mean
makespans, batch over pipeline. ``use_over_run`` is the platform's use over the whole run:
session-seconds the calls held over ``g × run time``. A tick whose bound is its longest
call can be efficient and still leave slots idle until that call ends, because the next
tick waits for it: the barrier between ticks, which efficiency does not count.

Where longest-first falls short of the bound is split in two: it runs once more handed
each call's *actual* latency (``ActualLatency``: the simulator's draw, known in advance),
so ``gap.prediction`` is what prediction error costs and ``gap.schedule`` what the rule
leaves even with perfect predictions; ``prediction`` scores the predictor call by call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from statistics import fmean, stdev
from typing import Any, final

import attrs

from ..calls import Request
from ..clock import MockClock
from ..config import Config, Settings
from ..content import Scene, bundled_scenes
from ..providers import SimProvider
from ..records import CallRecord, TickRecord
from ..run import interrupts
from ..run.engine import build_engine, scene_seed, scene_sim
from ..tick.prediction import Predictor
from ..tick.statistics import RunStatistics, percentile
from ..worlds import create_world
from .games import NextGame
from .suite import BenchContext, Suite, TickCollector

__all__ = ["ACTUAL", "CAST_SIZES", "MEAN", "ORACLES", "SUITE", "VARIANTS", "ActualLatency", "MeanLatency", "lower_bound", "summarise", "use_over_run"]

#: The ways of firing a tick the suite compares, as the settings that select them.
#: ``batch`` and ``pipeline`` keep the user's ticket order (by default longest-first):
#: they are the policies as a run gets them. ``fifo`` and ``longest_first`` name theirs.
VARIANTS: dict[str, dict[str, Any]] = {
    "batch": {"run.policy": "batch"},
    "pipeline": {"run.policy": "pipeline"},
    "fifo": {"run.policy": "pipeline", "run.order": "fifo"},
    "longest_first": {"run.policy": "pipeline", "run.order": "longest-first"},
}
#: Longest-first handed the calls' actual latencies instead of predictions (``ActualLatency``).
ACTUAL = "longest_first_actual"
#: Longest-first handed each agent's true mean latency (``MeanLatency``).
MEAN = "longest_first_mean"

_BATCH_FIFO = {"run.policy": "batch", "run.order": "fifo"}
_LEGACY = {"run.policy": "legacy", "run.order": "fifo"}
#: The cast sizes of the cast sweep (generated characters, ``--agents N``).
CAST_SIZES = (10, 20, 50)


@final
@attrs.frozen
class ActualLatency:
    """A predictor that knows: each call's latency as the simulated backend will draw it
    (its draws are keyed on the call, not on when it runs). Longest-first handed these
    shows how far the rule itself is from the bound; the distance between it and
    longest-first on predictions is what prediction error costs."""

    backend: SimProvider

    def latencies(self, requests: Sequence[Request]) -> list[float]:
        return [self.backend.latency(request) for request in requests]

    def observe(self, records: Sequence[CallRecord]) -> None:
        pass


@final
@attrs.frozen
class MeanLatency:
    """A predictor that knows each agent's mean latency exactly: the profile's
    ``latency_s``, around which the simulator draws every call. No predictor that does
    not see the draw itself can do better on average, so longest-first handed these
    shows how much of the prediction error is the calls' own scatter."""

    backend: SimProvider

    def latencies(self, requests: Sequence[Request]) -> list[float]:
        profiles, default = self.backend.profiles, self.backend.default
        return [profiles.get(request.agent, default).latency_s for request in requests]

    def observe(self, records: Sequence[CallRecord]) -> None:
        pass


@final
@attrs.define(eq=False)
class _ScoredPredictor:
    """Passes a run's predictor through, and scores each prediction against the latency
    the call then had (calls that did not finish ok have no latency to score)."""

    predictor: Predictor
    _predicted: dict[tuple[int, str, str], float] = attrs.field(factory=dict, init=False)
    errors: list[tuple[float, float]] = attrs.field(factory=list, init=False)

    def latencies(self, requests: Sequence[Request]) -> list[float]:
        predicted = self.predictor.latencies(requests)
        for request, latency in zip(requests, predicted, strict=True):
            self._predicted[request.tick, request.agent, request.caller] = latency
        return predicted

    def observe(self, records: Sequence[CallRecord]) -> None:
        for record in records:
            predicted = self._predicted.pop((record.tick, record.agent, record.caller), None)
            if predicted is not None and record.ok and record.latency > 0:
                self.errors.append((abs(predicted - record.latency), record.latency))
        self.predictor.observe(records)

    def figures(self) -> dict[str, float]:
        if not self.errors:
            return {"calls": 0, "mean_abs_error_s": 0.0, "mean_rel_error": 0.0}
        return {
            "calls": len(self.errors),
            "mean_abs_error_s": round(fmean(error for error, _ in self.errors), 4),
            "mean_rel_error": round(fmean(error / latency for error, latency in self.errors), 4),
        }


def lower_bound(record: TickRecord, gate_size: int) -> float:
    """The shortest makespan any schedule of this tick's calls could have on the gate."""
    latencies = [call.latency for call in record.calls]
    return max(max(latencies, default=0.0), sum(latencies) / gate_size)


def _ratios(ticks: Sequence[TickRecord], gate_size: int) -> list[float]:
    """Each tick's lower bound / makespan."""
    return [lower_bound(tick, gate_size) / tick.makespan if tick.makespan > 0 else 1.0 for tick in ticks]


def use_over_run(ticks: Sequence[TickRecord], gate_size: int) -> float:
    """The session-seconds the run's calls held (admission to end) over what the gate
    offered from the first tick's start to the last tick's end: ``gate_size`` sessions
    the whole time. Where efficiency judges each tick against its own bound, this counts
    the slots left idle while a tick's last, longest calls finish before the next tick
    may start — what the barrier between ticks costs."""
    if not ticks:
        return 0.0
    run_time = ticks[-1].finished_at - ticks[0].started_at
    used = sum(call.latency for tick in ticks for call in tick.calls)
    return used / (gate_size * run_time) if run_time > 0 else 0.0


def summarise(ticks: Sequence[TickRecord], gate_size: int) -> dict[str, float]:
    """Makespan mean and p95, mean lower bound, efficiency and use over the run, over ``ticks``."""
    spans = [tick.makespan for tick in ticks]
    bounds = [lower_bound(tick, gate_size) for tick in ticks]
    ratios = _ratios(ticks, gate_size)
    return {
        "makespan_mean_s": round(fmean(spans), 4),
        "makespan_p95_s": round(percentile(spans, 95), 4),
        "lower_bound_mean_s": round(fmean(bounds), 4),
        "efficiency": round(fmean(ratios), 4),
        "use_over_run": round(use_over_run(ticks, gate_size), 4),
    }



@attrs.frozen
class _Outcome:
    """What the suite keeps of one configuration's run (not its records: a full run
    makes a few hundred thousand of them)."""

    figures: dict[str, float]
    calls_per_tick: int
    gate_size: int
    statistics: RunStatistics
    prediction: dict[str, float]
    #: Each draw's lower bound / makespan, for comparing two runs draw by draw.
    ratios: tuple[float, ...]


class _Runs:
    """Runs configurations once each: a sweep point equal to a headline run reuses it."""

    def __init__(self, context: BenchContext) -> None:
        self.context = context
        self._done: dict[tuple[Settings, str], _Outcome] = {}

    def configure(self, overrides: Mapping[str, Any]) -> tuple[Config, Scene]:
        return self.context.configure(overrides)

    def key(self, name: str, overrides: Mapping[str, Any]) -> tuple[Settings, str]:
        """What makes a run of variant ``name`` distinct: its settings, and its oracle."""
        return self.configure({**VARIANTS.get(name, VARIANTS["longest_first"]), **overrides})[0].settings, name if name in ORACLES else ""

    def run(self, overrides: Mapping[str, Any], oracle: str = "") -> _Outcome:
        """One configuration's run; with an ``oracle`` (a name in ``ORACLES``),
        longest-first on what that oracle knows instead of on predictions."""
        config, scene = self.configure({**overrides, "run.order": "longest-first"} if oracle else overrides)
        key = (config.settings, oracle)
        if key not in self._done:
            collector, statistics = TickCollector(self.context), RunStatistics()
            # The profiles' latencies, whatever backends manor.toml routes agents to.
            backend = scene_sim(config, scene)
            next_game = NextGame(scene, scene_seed(config, scene))
            engine = build_engine(config, scene, backend=backend, instruments=[collector, statistics, next_game])
            scored = _ScoredPredictor(ORACLES[oracle](backend) if oracle else engine.loop.predictor)
            engine.loop.predictor = scored
            clock = MockClock(autojump_threshold=0)
            interrupts.run(engine.loop.run, self.context.draws, clock=clock)
            ticks = collector.ticks
            self._done[key] = _Outcome(
                figures=summarise(ticks, engine.loop.gate.size),
                # A game's ticks differ (a night asks fewer players than a day): the mean.
                calls_per_tick=round(sum(len(tick.calls) for tick in ticks) / len(ticks)) if ticks else 0,
                gate_size=engine.loop.gate.size,
                statistics=statistics,
                prediction=scored.figures(),
                ratios=tuple(_ratios(ticks, engine.loop.gate.size)),
            )
        return self._done[key]

    def figures(self, overrides: Mapping[str, Any], oracle: str = "") -> dict[str, float]:
        return self.run(overrides, oracle).figures

    def variant(self, name: str, overrides: Mapping[str, Any] | None = None) -> _Outcome:
        """Variant ``name`` (in ``VARIANTS`` or ``ORACLES``) with ``overrides``."""
        if name in ORACLES:
            return self.run({**VARIANTS["longest_first"], **(overrides or {})}, name)
        return self.run({**VARIANTS[name], **(overrides or {})})

    def policies(self, overrides: Mapping[str, Any], names: Iterable[str]) -> dict[str, dict[str, float]]:
        """The figures of each variant called ``names``, with ``overrides``."""
        return {name: self.variant(name, overrides).figures for name in names}


#: The variants of the headline, and of each sweep point.
_HEADLINE = (*VARIANTS, MEAN, ACTUAL)
_GATE_POINT = ("fifo", "longest_first", ACTUAL)
_CAST_POINT = ("batch", "pipeline", "fifo", ACTUAL)
_SCENE_POINT = ("fifo", "pipeline", ACTUAL)


#: The oracles, by variant name: what each knows in place of a prediction.
ORACLES: dict[str, Callable[[SimProvider], Predictor]] = {ACTUAL: ActualLatency, MEAN: MeanLatency}


def _plan(context: BenchContext) -> list[tuple[str, dict[str, Any]]]:
    """Every run the suite makes, as (variant, overrides), in order."""
    runs = _Runs(context)
    config, scene = runs.configure(VARIANTS["pipeline"])
    plan = [(name, {}) for name in _HEADLINE] + [("fifo", _BATCH_FIFO), ("fifo", _LEGACY)]
    for size in _gate_sizes(config, scene):
        plan += [(name, {"gate.size": size}) for name in _GATE_POINT]
    for characters in CAST_SIZES:
        plan += [(name, {"run.agents": characters}) for name in _CAST_POINT]
    for scene_name in bundled_scenes():
        plan += [(name, {"run.scene": scene_name}) for name in _SCENE_POINT]
    return plan


def _gate_sizes(config: Config, scene: Scene) -> range:
    """1..platform limit; with an unlimited platform, 1..the calls of a full tick: one
    per agent, or the first tick's calls if it plans more (the manor's beats are calls
    of characters who also speak)."""
    limit = config.settings.platform.limit
    if not limit:
        limit = max(len(scene.agents), len(create_world(scene, scene_seed(config, scene)).plan()))
    return range(1, limit + 1)


def units(context: BenchContext) -> int:
    runs = _Runs(context)
    distinct = {runs.key(name, overrides) for name, overrides in _plan(context)}
    return len(distinct) * context.draws


def run(context: BenchContext) -> dict[str, Any]:
    runs = _Runs(context)
    result: dict[str, Any] = runs.policies({}, _HEADLINE)
    result["speedup"] = _speedup(result["batch"], result["pipeline"])
    result["speedup_fifo"] = _speedup(runs.figures(_BATCH_FIFO), result["fifo"])
    result["prediction"] = {
        "predictor": runs.variant("longest_first").prediction,
        "mean": runs.variant(MEAN).prediction,
    }
    efficiency = {name: result[name]["efficiency"] for name in ("longest_first", MEAN, ACTUAL)}
    result["gap"] = {
        "prediction": round(efficiency[ACTUAL] - efficiency["longest_first"], 4),
        "scatter": round(efficiency[ACTUAL] - efficiency[MEAN], 4),
        "estimation": round(efficiency[MEAN] - efficiency["longest_first"], 4),
        "schedule": round(1 - efficiency[ACTUAL], 4),
    }
    result["legacy"] = _legacy(runs)
    config, scene = runs.configure(VARIANTS["pipeline"])
    result["gate_sweep"] = [
        {"gate_size": size, **runs.policies({"gate.size": size}, _GATE_POINT)} for size in _gate_sizes(config, scene)
    ]
    result["cast_sweep"] = list(_cast_sweep(runs))
    result["scene_sweep"] = list(_scene_sweep(runs))
    points = [
        ("the scene", {}),
        *((f"scene {name}", {"run.scene": name}) for name in bundled_scenes()),
        *((f"{characters} characters", {"run.agents": characters}) for characters in CAST_SIZES),
    ]
    result["versus_fifo"], result["versus_mean"], seen = [], [], set()
    for where, overrides in points:  # a run named twice (the scene is a shipped one) once
        if (key := runs.key("pipeline", overrides)) not in seen:
            seen.add(key)
            result["versus_fifo"].append(_versus(runs, where, overrides, "fifo"))
            result["versus_mean"].append(_versus(runs, where, overrides, MEAN, relative=True))
    headline = runs.run(VARIANTS["pipeline"])
    settings = config.settings
    result["setup"] = {
        "scene": scene.spec.name,
        "seed": settings.run.seed,
        "draws": context.draws,
        "calls_per_tick": headline.calls_per_tick,
        "gate_size": headline.gate_size,
        "platform_limit": settings.platform.limit,
        "batch_size": settings.run.batch_size,
        "order": settings.run.order,
        "draw": "tick r of one run of R ticks per configuration; longest-first predicts tick 1 "
        "from the latency profiles, later ticks from each caller's past calls",
        "efficiency": "mean over draws of lower_bound / makespan",
        "use_over_run": "session-seconds the calls held / (gate size x run time), over the whole run",
        "speedup": "mean batch makespan / mean pipeline makespan",
        ACTUAL: "longest-first handed each call's actual latency (the simulator's draw) instead of a prediction",
        MEAN: "longest-first handed each agent's true mean latency (its profile's latency_s) instead of a prediction",
    }
    return result


def _versus(runs: _Runs, where: str, overrides: Mapping[str, Any], other: str, *, relative: bool = False) -> dict[str, Any]:
    """The default order's efficiency minus ``other``'s (a variant: fifo, or longest-first
    on the agents' true means), draw by draw (the draws are paired), and the standard
    error of that mean difference (``None`` from one draw); ``relative``: both as a
    share of ``other``'s mean efficiency."""
    default, baseline = runs.variant("pipeline", overrides).ratios, runs.variant(other, overrides).ratios
    differences = [ours - theirs for ours, theirs in zip(default, baseline, strict=True)]
    error = stdev(differences) / math.sqrt(len(differences)) if len(differences) > 1 else None
    scale = fmean(baseline) if relative else 1.0
    return {
        "at": where,
        "margin": round(fmean(differences) / scale, 4),
        "margin_se": None if error is None else round(error / scale, 4),
    }


def _speedup(slow: Mapping[str, float], fast: Mapping[str, float]) -> float:
    return round(slow["makespan_mean_s"] / fast["makespan_mean_s"], 4) if fast["makespan_mean_s"] else 0.0


def _legacy(runs: _Runs) -> dict[str, Any]:
    """The original system: no gate, fail-fast platform, retries with backoff."""
    outcome = runs.run(_LEGACY)
    statistics = outcome.statistics
    return {
        "makespan_mean_s": outcome.figures["makespan_mean_s"],
        "calls": statistics.calls,
        "degraded": statistics.degraded,
        "degraded_per_tick": round(statistics.degraded / max(1, statistics.ticks), 4),
        "platform_rejections": statistics.rejections.as_dict(),
        "degradations": statistics.degradation_counts(statistics.degradations),  # the world's kinds, in its order
    }


def _cast_sweep(runs: _Runs) -> Iterable[dict[str, Any]]:
    for characters in CAST_SIZES:
        overrides = {"run.agents": characters}
        figures = runs.policies(overrides, _CAST_POINT)
        yield {
            "characters": characters,
            "calls_per_tick": runs.variant("pipeline", overrides).calls_per_tick,
            **figures,
            "speedup": _speedup(figures["batch"], figures["pipeline"]),
        }


def _scene_sweep(runs: _Runs) -> Iterable[dict[str, Any]]:
    """Every scene Manor ships, with its own cast, gate and seed."""
    for name in bundled_scenes():
        overrides = {"run.scene": name}
        outcome = runs.variant("pipeline", overrides)
        yield {"scene": name, "calls_per_tick": outcome.calls_per_tick, "gate_size": outcome.gate_size, **runs.policies(overrides, _SCENE_POINT)}


SUITE = Suite(
    name="scheduling",
    title="tick makespan against the lower bound, per ticket order and policy (virtual clock, exact)",
    units=units,
    run=run,
)
