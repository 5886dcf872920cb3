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

``cpu`` is what a fleet costs the process that drives it: CPU time a call (the
process's, ``time.process_time``: on the virtual clock a run is all CPU) of fleets of
``CPU_WORLDS`` worlds with the gate scaled to the worlds (N times the scene's gate and
platform limit: each world's share is one world's gate, so the per-call cost is not
hidden by worlds waiting), beside ``manor run``'s engine on the same scene and ticks,
measured side by side in one run, best of ``CPU_ROUNDS`` rounds; each in a new
interpreter, as each command runs (``manor.bench.fresh_process``), from its first tick to
its last, what was built frozen as the commands freeze it (``manor.run.opening``). ``vs_run`` is the
fleet's CPU a call over the run's, ``vs_smallest`` over the smallest fleet's.

The Redis gate's rows (processes sharing one gate in Redis: admissions per second,
admission latency after a release, fairness, makespans against ``in_process``) belong
beside ``in_process`` in this suite's figures, with their targets in
``manor.bench.report``.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Awaitable, Sequence
from pathlib import Path
from statistics import fmean
from typing import Any, TypeVar

import attrs

from ..clock import MockClock
from ..config import Source
from ..fleet.in_process import build_fleet, configure_worlds, fleet_tenants, scene_share
from ..limits import MAX_SECONDS
from ..records import TickRecord
from ..run import interrupts
from ..run.engine import build_engine, scene_sim
from ..run.opening import LiveRun, open_run
from ..tick.statistics import RunStatistics
from .fresh_process import in_fresh_process
from .suite import BENCH_ORDINAL, BenchContext, Suite, TickCollector

__all__ = ["CLAIMS_OFF", "CPU_ROUNDS", "CPU_WORLDS", "MIXED", "SUITE", "TICKS", "TICKS_QUICK", "WORLDS", "fair_share_bound", "idle_while_waiting", "mixed_scenes"]

#: The fleet sizes the suite runs.
WORLDS = (1, 4, 16)
TICKS = 50
TICKS_QUICK = 10
#: The fleet sizes whose CPU a call the suite measures (gate scaled), its rounds and ticks.
CPU_WORLDS = (16, 64, 256)
CPU_ROUNDS = 3
CPU_TICKS = 10
CPU_TICKS_QUICK = 2
#: What a measured run runs (an engine, a fleet).
T = TypeVar("T")
#: What the suite sets for every fleet: the pipeline, no gate timeout.
_SETTINGS = {"run.policy": "pipeline", "gate.timeout_s": MAX_SECONDS}


def fair_share_bound(record: TickRecord, gate_size: int, worlds: int) -> float:
    """The shortest a world's tick could be with ``gate_size / worlds`` slots of its own."""
    latencies = [call.latency for call in record.calls]
    return max(max(latencies, default=0.0), sum(latencies) * worlds / gate_size)



def _ticks(context: BenchContext) -> int:
    return TICKS_QUICK if context.quick else TICKS


def units(context: BenchContext) -> int:
    mixed = sum(len(entries) for name, entries in MIXED for _ in range(1 + (name in CLAIMS_OFF))) + 3  # the fleets, and each scene alone
    cpu = CPU_ROUNDS * (1 + sum(CPU_WORLDS)) * (CPU_TICKS_QUICK if context.quick else CPU_TICKS)
    return sum(WORLDS) * _ticks(context) + mixed * (MIXED_TICKS_QUICK if context.quick else MIXED_TICKS) + cpu


def _cpu_settings(context: BenchContext, worlds: int) -> list[Source]:
    """The suite's settings with the gate and platform limit ``worlds`` times the scene's."""
    (config, _), = configure_worlds([*context.sources, Source("manor bench", BENCH_ORDINAL, _SETTINGS)], 1)
    gate, limit = config.settings.gate.size, config.settings.platform.limit
    scaled = {**_SETTINGS, "gate.size": gate * worlds, "platform.limit": limit * worlds}
    return [*context.sources, Source("manor bench", BENCH_ORDINAL, scaled)]


def _cpu_per_call(context: BenchContext, worlds: int | None, ticks: int) -> float:
    """CPU seconds a call of a fleet of ``worlds`` (gate scaled), or of ``manor run``'s
    engine on the scene (``None``), over ``ticks`` ticks on the virtual clock, in this
    process: run as the command runs it (``open_run``, which freezes what was built),
    from its first tick to its last, on the simulator's virtual clock whatever backends
    and clock the settings name."""
    sources = _cpu_settings(context, worlds or 1)
    if worlds is None:
        (config, scene), = configure_worlds(sources, 1)
        statistics = RunStatistics()
        engine = _virtual(open_run([(config, scene)], lambda gate: build_engine(config, scene, backend=scene_sim(config, scene), instruments=[statistics], gate=gate)))
        cpu = engine.run(lambda engine: _timed(engine.loop.run(ticks)), after=lambda: "")
        return cpu / statistics.summary(engine.runs)["calls"]
    configured = configure_worlds(sources, worlds)
    fleet = _virtual(open_run(configured, lambda gate: build_fleet(configured, gate=gate, backends=lambda index: scene_sim(*configured[index]))))
    cpu = fleet.run(lambda fleet: _timed(fleet.run(ticks)), after=lambda: "")
    return cpu / fleet.runs.summary()["total"]["calls"]


def _virtual(live: LiveRun[T]) -> LiveRun[T]:
    """``live`` on the virtual clock (its worlds are on the simulator)."""
    return attrs.evolve(live, clock=MockClock(autojump_threshold=0))


async def _timed(run: Awaitable[None]) -> float:
    """The CPU time ``run`` takes."""
    started = time.process_time()
    await run
    return time.process_time() - started


def _cpu(context: BenchContext) -> dict[str, Any]:
    """``manor run``'s CPU a call and each fleet's, side by side, best of the rounds,
    each in a new interpreter as the command is (``manor.bench.fresh_process``)."""
    ticks = CPU_TICKS_QUICK if context.quick else CPU_TICKS
    best: dict[int | None, float] = {}
    for _ in range(CPU_ROUNDS):
        for worlds in (None, *CPU_WORLDS):
            what = f"fleet suite, CPU a call of {'manor run' if worlds is None else f'{worlds} worlds'}"
            per_call = in_fresh_process(_cpu_per_call, context, what, worlds=worlds, ticks=ticks)
            best[worlds] = min(best.get(worlds, per_call), per_call)
            context.advance((worlds or 1) * ticks)
    run_us = best[None] * 1e6
    smallest = best[CPU_WORLDS[0]]
    return {
        "ticks": ticks,
        "rounds": CPU_ROUNDS,
        "run_us_per_call": round(run_us, 2),
        "fleets": [
            {
                "worlds": worlds,
                "us_per_call": round(best[worlds] * 1e6, 2),
                "vs_run": round(best[worlds] / best[None], 3),
                "vs_smallest": round(best[worlds] / smallest, 3),
            }
            for worlds in CPU_WORLDS
        ],
    }


def _fleet(context: BenchContext, worlds: int) -> dict[str, Any]:
    configured = configure_worlds([*context.sources, Source("manor bench", BENCH_ORDINAL, _SETTINGS)], worlds)
    recorders = [TickCollector(context) for _ in configured]
    # The profiles' latencies, whatever backends manor.toml routes agents to.
    fleet = build_fleet(
        configured,
        instruments=lambda index: [recorders[index]],
        backends=lambda index: scene_sim(*configured[index]),
    )
    clock = MockClock(autojump_threshold=0)
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


#: The mixed fleets: (name, the worlds' scenes as ``--scenes`` entries). ``manor`` is
#: the bundled Wacky Manor; ``crowd`` and ``oracle`` are generated (``mixed_scenes``).
MIXED = (
    ("manor beside its twin", ("wacky_manor", "wacky_manor")),
    ("manor beside a crowd (>= 200 calls a tick)", ("wacky_manor", "crowd")),
    ("manor beside an oracle (21 calls of 18 s a tick)", ("wacky_manor", "oracle")),
    ("manor weight 2 beside its twin", ("wacky_manor:2", "wacky_manor")),
    ("manor beside an oracle capped at 2 sessions", ("wacky_manor", "oracle:1:2")),
)
#: The mixed fleets run again with ``gate.claim_s = 0`` (every idle slot lent at once,
#: no claims): what the claims cost and buy. They have no targets.
CLAIMS_OFF = ("manor beside an oracle (21 calls of 18 s a tick)", "manor weight 2 beside its twin")
MIXED_TICKS = 30
MIXED_TICKS_QUICK = 10

_CROWD = """name = "A Crowded Ballroom"
description = "Two hundred beats a tick: a world of many short calls."
seed = 5
platform_limit = 6
rooms = ["ballroom"]
cast = ["hobbes", "countess"]
[beats]
per_tick = 200
speakers = ["hobbes", "countess"]
"""
_ORACLE = """name = "The Slow Oracle"
description = "Twenty beats a tick from an oracle who takes 18 s to answer: a world of long calls."
seed = 11
platform_limit = 6
rooms = ["cave"]
cast = ["oracle"]
[beats]
per_tick = 20
speakers = ["oracle"]
"""
_ORACLE_AGENT = """name = "The Oracle"
persona = "Answers every question, eventually."
[sim]
latency_s = 18.0
jitter = 0.0
"""


def mixed_scenes(folder: Path) -> dict[str, str]:
    """The generated scenes, written to ``folder``: name -> path."""
    (folder / "scenes").mkdir()
    (folder / "agents").mkdir()
    (folder / "agents" / "oracle.toml").write_text(_ORACLE_AGENT, encoding="utf-8")
    paths = {}
    for name, text in (("crowd", _CROWD), ("oracle", _ORACLE)):
        path = folder / "scenes" / f"{name}.toml"
        path.write_text(text, encoding="utf-8")
        paths[name] = str(path)
    return paths


def _mixed_fleet(
    context: BenchContext, entries: Sequence[str], ticks: int, settings: dict[str, Any] | None = None
) -> tuple[dict[str, Any], list[list[TickRecord]]]:
    """Run the worlds of ``entries`` side by side at the default gate timeout (and
    ``settings``): the fleet's summary and every world's tick records."""
    sources = [*context.sources, Source("manor bench", BENCH_ORDINAL, {"run.policy": "pipeline", **(settings or {})})]
    configured = configure_worlds(sources, len(entries), entries)
    recorders = [TickCollector(context) for _ in configured]
    fleet = build_fleet(
        configured,
        instruments=lambda index: [recorders[index]],
        backends=lambda index: scene_sim(*configured[index]),
        tenants=fleet_tenants(configured, entries),
    )
    interrupts.run(fleet.run, ticks, clock=MockClock(autojump_threshold=0))
    return fleet.summary(), [recorder.ticks for recorder in recorders]


def _peak_held(ticks: Sequence[TickRecord]) -> int:
    """The most calls of one world in flight at once, from its records' admissions."""
    events = sorted(
        (time, step)
        for tick in ticks for call in tick.calls if call.admitted_at is not None
        for time, step in ((call.admitted_at, 1), (call.finished_at, -1))
    )  # fmt: skip
    held = peak = 0
    for _, step in events:
        held += step
        peak = max(peak, held)
    return peak


def idle_while_waiting(worlds: Sequence[Sequence[TickRecord]], size: int) -> float:
    """Slot-seconds the gate left free while some call waited at it (from the records:
    what claims cost in work conservation; 0 for a gate that lends every idle slot,
    except at the instants a caller has not arrived yet)."""
    events = sorted(
        (at, held, waiting)
        for ticks in worlds for tick in ticks for call in tick.calls
        for at, held, waiting in (
            ((call.queued_at, 0, 1), (call.admitted_at, 1, -1), (call.finished_at, -1, 0))
            if call.admitted_at is not None else ((call.queued_at, 0, 1), (call.finished_at, 0, -1))
        )
    )  # fmt: skip
    held = waiting = 0
    idle = last = 0.0
    for at, step, wait in events:
        if waiting > 0:
            idle += max(0, size - held) * (at - last)
        last = at
        held += step
        waiting += wait
    return round(idle, 4)


def _mixed(context: BenchContext) -> list[dict[str, Any]]:
    """Each mixed fleet, and each of its worlds alone, with the manor's slowdowns."""
    ticks = MIXED_TICKS_QUICK if context.quick else MIXED_TICKS
    with tempfile.TemporaryDirectory() as folder:
        generated = mixed_scenes(Path(folder))

        def entry(text: str) -> str:
            scene, _, share = text.partition(":")
            return generated.get(scene, scene) + (f":{share}" if share else "")

        alone: dict[str, dict[str, Any]] = {}
        rows = []
        runs = [(name, entries, None) for name, entries in MIXED]
        runs += [(name, entries, 0.0) for name, entries in MIXED if name in CLAIMS_OFF]
        for name, entries, claim_s in runs:
            scenes = [entry(text) for text in entries]
            summary, records = _mixed_fleet(context, scenes, ticks, None if claim_s is None else {"gate.claim_s": claim_s})
            worlds = []
            for world, scene, ticks_of in zip(summary["worlds"], scenes, records, strict=True):
                plain = scene_share(scene)[0]
                if plain not in alone:
                    alone[plain] = _mixed_fleet(context, [plain], ticks)[0]["worlds"][0]
                solo = alone[plain]["tick_seconds"]["mean"]
                worlds.append({
                    "tenant": world["tenant"], "weight": world["weight"], "max_sessions": world["max_sessions"],
                    "calls_per_tick": round(world["calls"] / world["ticks"], 1) if world["ticks"] else 0,
                    "tick_mean_s": world["tick_seconds"]["mean"], "tick_p95_s": world["tick_seconds"]["p95"],
                    "alone_tick_mean_s": solo,
                    "slowdown": round(world["tick_seconds"]["mean"] / solo, 4) if solo else None,
                    "degraded": world["degraded"],
                    "admissions_share": world["admissions_share"], "backlogged_share": world["backlogged_share"],
                    "share_per_weight": world["share_per_weight"], "session_s_backlogged": world["session_s_backlogged"],
                    "gate_wait_s": world["gate_wait_s"],
                    "peak_held": _peak_held(ticks_of),
                })  # fmt: skip
            row = {"fleet": name, "worlds": worlds, **summary["fairness"]}
            row["idle_slot_s_while_waiting"] = idle_while_waiting(records, summary["total"]["gate_size"])
            if claim_s is not None:
                row["claim_s"] = claim_s
            rows.append(row)
    twin = rows[0]["worlds"][0]
    for row in rows:
        manor = row["worlds"][0]
        manor["vs_twin_mean"] = round(manor["tick_mean_s"] / twin["tick_mean_s"], 4)
        manor["vs_twin_p95"] = round(manor["tick_p95_s"] / twin["tick_p95_s"], 4)
        held = [world["session_s_backlogged"] for world in row["worlds"]]
        row["session_s_ratio"] = round(held[0] / held[1], 4) if held[1] else None
    return rows


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
        "mixed": _mixed(context),
        "cpu": _cpu(context),
    }


SUITE = Suite(
    name="fleet",
    title="many worlds on one gate: each world's ticks against its share of the gate, and fairness (virtual clock, exact)",
    units=units,
    run=run,
)
