"""The scheduling suite: how close each policy gets to the best any schedule could do.

Virtual clock, so every figure is exact and the same on every machine. A *draw* is one
tick: configuration by configuration, the suite runs one free-running run of R ticks of
the scene on its simulated backend. The backend keys every call's latency on (seed,
agent, caller, tick), so tick r of every configuration draws the same latencies — the
comparison between policies is paired, draw by draw. Tick 1 of a run predicts (for
longest-first) from the scene's latency profiles; later ticks from each caller's own
past calls, as a game does once it is running.

The lower bound of a tick on a gate of size g is ``max(longest call, total call time /
g)``, from the calls' actual latencies (``finished_at - admitted_at``): no schedule can
finish before its longest call, nor run more than g calls at once. ``efficiency`` is the
mean over draws of ``lower bound / makespan``; ``speedup`` is the ratio of the mean
makespans, batch over pipeline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from statistics import fmean
from typing import Any

import attrs
import trio
import trio.testing

from ..config import Config, Settings
from ..content import Scene
from ..engine import build_engine, scene_sim
from ..instruments import Instrument
from ..records import StoryEntry, TickRecord
from ..statistics import RunStatistics, percentile
from .suite import BenchContext, Suite

__all__ = ["CAST_SIZES", "SUITE", "VARIANTS", "lower_bound", "summarise"]

#: The three ways of firing a tick the suite compares, as the settings that select them.
VARIANTS: dict[str, dict[str, Any]] = {
    "batch": {"run.policy": "batch", "run.order": "fifo"},
    "pipeline": {"run.policy": "pipeline", "run.order": "fifo"},
    "longest_first": {"run.policy": "pipeline", "run.order": "longest-first"},
}
_LEGACY = {"run.policy": "legacy", "run.order": "fifo"}
#: The cast sizes of the cast sweep (generated characters, ``--agents N``).
CAST_SIZES = (10, 20, 50)


def lower_bound(record: TickRecord, gate_size: int) -> float:
    """The shortest makespan any schedule of this tick's calls could have on the gate."""
    latencies = [call.latency for call in record.calls]
    return max(max(latencies, default=0.0), sum(latencies) / gate_size)


def summarise(ticks: Sequence[TickRecord], gate_size: int) -> dict[str, float]:
    """Makespan mean and p95, mean lower bound and efficiency over ``ticks``."""
    spans = [tick.makespan for tick in ticks]
    bounds = [lower_bound(tick, gate_size) for tick in ticks]
    ratios = [bound / span if span > 0 else 1.0 for bound, span in zip(bounds, spans, strict=True)]
    return {
        "makespan_mean_s": round(fmean(spans), 4),
        "makespan_p95_s": round(percentile(spans, 95), 4),
        "lower_bound_mean_s": round(fmean(bounds), 4),
        "efficiency": round(fmean(ratios), 4),
    }


class _TickCollector(Instrument):
    """Keeps every tick's record and reports each one to the progress bar."""

    def __init__(self, context: BenchContext) -> None:
        self.context = context
        self.ticks: list[TickRecord] = []

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        self.ticks.append(record)
        self.context.advance(1)


@attrs.frozen
class _Outcome:
    """What the suite keeps of one configuration's run (not its records: a full run
    makes a few hundred thousand of them)."""

    figures: dict[str, float]
    calls_per_tick: int
    gate_size: int
    statistics: RunStatistics


class _Runs:
    """Runs configurations once each: a sweep point equal to a headline run reuses it."""

    def __init__(self, context: BenchContext) -> None:
        self.context = context
        self._done: dict[Settings, _Outcome] = {}

    def configure(self, overrides: Mapping[str, Any]) -> tuple[Config, Scene]:
        return self.context.configure(overrides)

    def run(self, overrides: Mapping[str, Any]) -> _Outcome:
        config, scene = self.configure(overrides)
        if config.settings not in self._done:
            collector, statistics = _TickCollector(self.context), RunStatistics()
            # The profiles' latencies, whatever backends manor.toml routes agents to.
            backend = scene_sim(config, scene)
            engine = build_engine(config, scene, backend=backend, instruments=[collector, statistics])
            clock = trio.testing.MockClock(autojump_threshold=0)
            trio.run(engine.loop.run, self.context.draws, clock=clock)
            ticks = collector.ticks
            self._done[config.settings] = _Outcome(
                figures=summarise(ticks, engine.loop.gate.size),
                calls_per_tick=len(ticks[0].calls) if ticks else 0,
                gate_size=engine.loop.gate.size,
                statistics=statistics,
            )
        return self._done[config.settings]

    def figures(self, overrides: Mapping[str, Any]) -> dict[str, float]:
        return self.run(overrides).figures


def _plan(context: BenchContext) -> list[dict[str, Any]]:
    """Every configuration the suite runs, headline first, in order."""
    runs = _Runs(context)
    config, scene = runs.configure(VARIANTS["pipeline"])
    plan = [dict(overrides) for overrides in VARIANTS.values()]
    plan.append(dict(_LEGACY))
    for size in _gate_sizes(config, scene):
        plan += [{**VARIANTS[name], "gate.size": size} for name in ("pipeline", "longest_first")]
    for characters in CAST_SIZES:
        plan += [{**overrides, "run.agents": characters} for overrides in VARIANTS.values()]
    return plan


def _gate_sizes(config: Config, scene: Scene) -> range:
    """1..platform limit; with an unlimited platform, 1..calls per tick."""
    limit = config.settings.platform.limit
    if not limit:
        spec = scene.spec
        limit = len(spec.cast) + 2 + spec.beats.per_tick
    return range(1, limit + 1)


def units(context: BenchContext) -> int:
    runs = _Runs(context)
    distinct = {runs.configure(overrides)[0].settings for overrides in _plan(context)}
    return len(distinct) * context.draws


def run(context: BenchContext) -> dict[str, Any]:
    runs = _Runs(context)
    result: dict[str, Any] = {name: runs.figures(overrides) for name, overrides in VARIANTS.items()}
    result["speedup"] = _speedup(result["batch"], result["pipeline"])
    result["speedup_longest_first"] = _speedup(result["batch"], result["longest_first"])
    result["legacy"] = _legacy(runs)
    config, scene = runs.configure(VARIANTS["pipeline"])
    result["gate_sweep"] = [
        {"gate_size": size, **{name: runs.figures({**VARIANTS[name], "gate.size": size}) for name in ("pipeline", "longest_first")}}
        for size in _gate_sizes(config, scene)
    ]
    result["cast_sweep"] = list(_cast_sweep(runs))
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
        "draw": "tick r of one run of R ticks per configuration; longest-first predicts tick 1 "
        "from the latency profiles, later ticks from each caller's past calls",
        "efficiency": "mean over draws of lower_bound / makespan",
        "speedup": "mean batch makespan / mean pipeline makespan",
    }
    return result


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
        "degradations": statistics.degradations,
    }


def _cast_sweep(runs: _Runs) -> Iterable[dict[str, Any]]:
    for characters in CAST_SIZES:
        figures = {name: runs.figures({**overrides, "run.agents": characters}) for name, overrides in VARIANTS.items()}
        yield {
            "characters": characters,
            "calls_per_tick": runs.run({**VARIANTS["pipeline"], "run.agents": characters}).calls_per_tick,
            **figures,
            "speedup": _speedup(figures["batch"], figures["pipeline"]),
        }


SUITE = Suite(
    name="scheduling",
    title="tick makespan against the lower bound, per policy (virtual clock, exact)",
    units=units,
    run=run,
)
