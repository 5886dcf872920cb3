"""The fleet suite: many worlds on one gate — how close each world's ticks come to their
share of the gate, and how evenly the gate serves the worlds.

Virtual clock, so every figure is exact. Fleets of 1, 4 and 16 worlds of the scene
(seeds seed, seed+1, ...; ``manor fleet --worlds N``), each world ``TICKS`` ticks
(``--quick``: ``TICKS_QUICK``) on the simulated backend, the pipeline policy, the
scene's gate — and no gate timeout, so that what is measured is service, not calls
given up (16 worlds of the default scene need some 85 s a tick at a gate of 5).

A world's tick on a gate of g shared by N busy worlds cannot end before its longest
call, nor before its calls have had their share of the gate, g / N slots: its
**fair-share lower bound** is ``max(longest call, total call time × N / g)`` (with one
world, the scheduling suite's bound). ``efficiency`` is the mean over every world's
ticks of that bound over the tick's makespan; ``efficiency_worst_world`` the lowest
world's mean. A world can beat its share now and then (the others between ticks), so
a tick's ratio may pass 1. ``gate_busy`` is the gate's slot time used by calls over
the slot time the fleet's run had (a gate kept full: 1). Fairness as ``manor fleet``
reports it: Jain's index of the worlds' answered calls per second, and the shortest
world's mean tick over the longest's.

The Redis gate's rows (processes sharing one gate in Redis: admissions per second,
admission latency after a release, fairness, makespans against ``in_process``) belong
beside ``in_process`` in this suite's figures, with their targets in
``manor.bench.report``.
"""

from __future__ import annotations

from statistics import fmean
from typing import Any

import trio
import trio.testing

from ..config import Source
from ..fleet.in_process import build_fleet, configure_worlds
from ..limits import MAX_SECONDS
from ..records import TickRecord
from ..run import interrupts
from ..run.engine import scene_sim
from .suite import BENCH_ORDINAL, BenchContext, Suite, TickCollector

__all__ = ["SUITE", "TICKS", "TICKS_QUICK", "WORLDS", "fair_share_bound"]

#: The fleet sizes the suite runs.
WORLDS = (1, 4, 16)
TICKS = 50
TICKS_QUICK = 10
#: What the suite sets for every fleet: the pipeline, no gate timeout.
_SETTINGS = {"run.policy": "pipeline", "gate.timeout_s": MAX_SECONDS}


def fair_share_bound(record: TickRecord, gate_size: int, worlds: int) -> float:
    """The shortest a world's tick could be with ``gate_size / worlds`` slots of its own."""
    latencies = [call.latency for call in record.calls]
    return max(max(latencies, default=0.0), sum(latencies) * worlds / gate_size)



def _ticks(context: BenchContext) -> int:
    return TICKS_QUICK if context.quick else TICKS


def units(context: BenchContext) -> int:
    return sum(WORLDS) * _ticks(context)


def _fleet(context: BenchContext, worlds: int) -> dict[str, Any]:
    configured = configure_worlds([*context.sources, Source("manor bench", BENCH_ORDINAL, _SETTINGS)], worlds)
    recorders = [TickCollector(context) for _ in configured]
    # The profiles' latencies, whatever backends manor.toml routes agents to.
    fleet = build_fleet(
        configured,
        instruments=lambda index: [recorders[index]],
        backends=lambda index: scene_sim(*configured[index]),
    )
    clock = trio.testing.MockClock(autojump_threshold=0)
    interrupts.run(fleet.run, _ticks(context), clock=clock)
    size = fleet.gate.size
    per_world = [[fair_share_bound(tick, size, worlds) / tick.makespan if tick.makespan > 0 else 1.0 for tick in recorder.ticks] for recorder in recorders]
    ticks = [tick for recorder in recorders for tick in recorder.ticks]
    busy = sum(call.latency for tick in ticks for call in tick.calls)
    span = max((tick.finished_at for tick in ticks), default=0.0)
    summary = fleet.summary()
    return {
        "worlds": worlds,
        "calls_per_tick": sum(len(recorder.ticks[0].calls) for recorder in recorders if recorder.ticks),
        "makespan_mean_s": round(fmean(tick.makespan for tick in ticks), 4),
        "lower_bound_mean_s": round(fmean(fair_share_bound(tick, size, worlds) for tick in ticks), 4),
        "efficiency": round(fmean(ratio for ratios in per_world for ratio in ratios), 4),
        "efficiency_worst_world": round(min(fmean(ratios) for ratios in per_world), 4),
        "gate_busy": round(busy / (size * span), 4) if span > 0 else 0.0,
        "degraded": summary["total"]["degraded"],
        **summary["fairness"],
    }


def run(context: BenchContext) -> dict[str, Any]:
    configured = configure_worlds([*context.sources, Source("manor bench", BENCH_ORDINAL, _SETTINGS)], 1)
    (config, scene), = configured
    settings = config.settings
    return {
        "setup": {
            "scene": scene.spec.name,
            "seed": settings.run.seed,
            "ticks": _ticks(context),
            "gate_size": settings.gate.size,
            "platform_limit": settings.platform.limit,
            "order": settings.run.order,
            "lower_bound": "max(longest call, total call time x worlds / gate size): the tick with its fair share of the gate",
            "efficiency": "mean over every world's ticks of lower_bound / makespan",
        },
        "in_process": [_fleet(context, worlds) for worlds in WORLDS],
    }


SUITE = Suite(
    name="fleet",
    title="many worlds on one gate: each world's ticks against its share of the gate, and fairness (virtual clock, exact)",
    units=units,
    run=run,
    by_default=False,
)
