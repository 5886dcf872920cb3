"""The fastforward suite: how fast a run goes under the virtual clock, against bare trio.

Under the virtual clock (``manor run``'s default with the simulated backend) latencies
cost no wall time: how fast a run goes is the CPU its ticks take. The user's scene and
settings, the simulated backend (whatever backends manor.toml names), one process, the
same ticks three ways:

- **manor**: what ``manor run`` does — the engine with its statistics instrument, ticks
  run by ``TickLoop.run`` under ``MockClock(autojump_threshold=0)``. Nobody watches the
  answers stream, so the simulator answers each call with one timer (``Provider.answer``),
  which keeps the call's timeout too (``Provider.keeps_deadline``);
- **manor_streamed**: the same with every answer streamed in its timed pieces (first
  token, four pieces: five timers), as a listener watching the stream gets it and as
  every call went before fast-forward — and the check that both give the same records,
  every time to the bit (``same_records``);
- **trio**: the same calls without Manor, each a bare trio task sleeping its latency (the
  simulator's draw for it) behind a ``trio.Semaphore`` of the gate's size, the parent
  acquiring before it spawns, tick after tick under the same clock.

Beside them, ``sim_draws_us_per_call``: the simulator's seeded draws alone (latency,
fault, line: a ``random.Random`` seeded per call), a part of Manor's figure that the
trio reference, given its latencies, does not pay.

Engines are built before the clock starts. Each round runs every contender, interleaved,
so a burst of load from elsewhere hits all alike; a contender's figure is its best round
by the process's CPU time (``time.process_time``: a virtual-clock run is all CPU), and
Manor's ratio to bare trio (``ratio_vs_trio``, the one judged) the median of the rounds'
ratios, each measured side by side in its round (``ratio_vs_trio_rounds``). A run
starts at virtual time 0, where the simulator still streams (see ``_one_timer_end`` in
``manor.providers.sim``): ``--quick``'s short runs show a little less of the gain.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from typing import Any, final

import trio

from ..calls import Event, Request
from ..clock import MockClock
from ..config import Config
from ..content import Scene
from ..providers import Provider
from ..records import StoryEntry, TickRecord
from ..run import interrupts
from ..run.engine import Engine, build_engine, scene_seed, scene_sim
from ..tick.instruments import Instrument
from ..tick.statistics import RunStatistics
from .games import NextGame
from .suite import BenchContext, Suite

__all__ = ["SUITE", "TICKS", "TICKS_QUICK", "Streamed", "trio_ticks"]

TICKS = 300
TICKS_QUICK = 30
ROUNDS = 5
ROUNDS_QUICK = 2
#: The contenders, in the order each round runs them.
_CONTENDERS = ("manor", "manor_streamed", "trio")


@final
class Streamed(Provider):
    """``inner``'s answers always streamed: a provider with only ``invoke``, so that an
    unwatched call iterates the stream (``Provider.answer``'s default) as it did before
    the simulator could answer with one timer."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner

    async def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
        async with aclosing(self.inner.invoke(request)) as events:
            async for event in events:
                yield event


class _Records(Instrument):
    def __init__(self) -> None:
        self.ticks: list[TickRecord] = []

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        self.ticks.append(record)


async def trio_ticks(latencies: Sequence[Sequence[float]], limit: int) -> None:
    """Each tick's calls as bare trio tasks sleeping their latencies, at most ``limit``
    at once: acquire, then spawn; release when the sleep ends."""
    for tick in latencies:
        semaphore = trio.Semaphore(limit)

        async def one(latency: float) -> None:
            try:
                await trio.sleep(latency)
            finally:
                semaphore.release()

        async with trio.open_nursery() as nursery:
            for latency in tick:
                await semaphore.acquire()
                nursery.start_soon(one, latency)


def _clock_run(run: Callable[[], Any], jumps: list[float] | None = None) -> float:
    """CPU seconds of ``trio.run(run)`` under a fresh virtual clock; every jump of the
    clock appended to ``jumps`` if given."""
    clock = MockClock(autojump_threshold=0)
    if jumps is not None:
        jump = clock.jump

        def counted(seconds: float) -> None:
            jumps.append(seconds)
            jump(seconds)

        clock.jump = counted  # type: ignore[method-assign]
    started = time.process_time()
    interrupts.run(run, clock=clock)
    return time.process_time() - started


def _engine(config: Config, scene: Scene, streamed: bool, *instruments: Instrument) -> Engine:
    """``manor run``'s engine on the scene's simulator: with its statistics instrument
    (and a game that ends followed by the next, to run every tick asked for)."""
    sim: Provider = scene_sim(config, scene)
    instruments = (RunStatistics(), *instruments, NextGame(scene, scene_seed(config, scene)))
    return build_engine(config, scene, backend=Streamed(sim) if streamed else sim, instruments=instruments)


def _requests(ticks: Sequence[TickRecord]) -> list[list[Request]]:
    """Every call of ``ticks`` as the simulator keys its draws, in the order the gate
    admitted them, tick by tick."""
    return [
        [
            Request(caller=call.caller, agent=call.agent, tick=call.tick, attempt=call.attempts - 1)
            for call in sorted(record.calls, key=lambda call: -1 if call.ticket is None else call.ticket)
        ]
        for record in ticks
    ]


def _ticks(context: BenchContext) -> int:
    return TICKS_QUICK if context.quick else TICKS


def _rounds(context: BenchContext) -> int:
    return ROUNDS_QUICK if context.quick else ROUNDS


def units(context: BenchContext) -> int:
    return 1 + _rounds(context)


def run(context: BenchContext) -> dict[str, Any]:
    config, scene = context.configure()
    ticks = _ticks(context)

    # Once each, untimed: the records (equal both ways?), the calls, the clock's jumps.
    records = {"manor": _Records(), "manor_streamed": _Records()}
    jumps: dict[str, list[float]] = {name: [] for name in _CONTENDERS}
    engines = {name: _engine(config, scene, name == "manor_streamed", records[name]) for name in records}
    for name, engine in engines.items():
        _clock_run(functools.partial(engine.loop.run, ticks), jumps[name])
    limit = engines["manor"].loop.gate.size
    sim = scene_sim(config, scene)
    latencies = [[sim.latency(request) for request in tick] for tick in _requests(records["manor"].ticks)]
    _clock_run(functools.partial(trio_ticks, latencies, limit), jumps["trio"])
    context.advance(1)

    requests = [request for tick in _requests(records["manor"].ticks) for request in tick]
    best = dict.fromkeys(_CONTENDERS, math.inf)
    draws = math.inf
    ratios: list[float] = []
    for _ in range(_rounds(context)):
        started = time.process_time()
        for request in requests:
            sim.latency(request)
        draws = min(draws, time.process_time() - started)
        runs = {
            "manor": functools.partial(_engine(config, scene, False).loop.run, ticks),
            "manor_streamed": functools.partial(_engine(config, scene, True).loop.run, ticks),
            "trio": functools.partial(trio_ticks, latencies, limit),
        }
        seconds = {name: _clock_run(runs[name]) for name in _CONTENDERS}
        for name in _CONTENDERS:
            best[name] = min(best[name], seconds[name])
        # Manor against bare trio in this round, side by side: the figure judged is their median.
        ratios.append(round(seconds["trio"] / seconds["manor"], 4))
        context.advance(1)

    calls = sum(len(tick) for tick in latencies)
    rates = {name: ticks / seconds for name, seconds in best.items()}
    return {
        "ticks": ticks,
        "calls": calls,
        "rounds": _rounds(context),
        "gate_size": limit,
        "manor_ticks_per_s": round(rates["manor"], 1),
        "manor_streamed_ticks_per_s": round(rates["manor_streamed"], 1),
        "trio_ticks_per_s": round(rates["trio"], 1),
        "ratio_vs_trio": round(statistics.median(ratios), 4),
        "ratio_vs_trio_rounds": ratios,
        "ratio_vs_trio_best": round(rates["manor"] / rates["trio"], 4),
        "ratio_streamed_vs_trio": round(rates["manor_streamed"] / rates["trio"], 4),
        "speedup_vs_streamed": round(rates["manor"] / rates["manor_streamed"], 4),
        **{f"{name}_us_per_call": round(best[name] / calls * 1e6, 2) for name in _CONTENDERS},
        "sim_draws_us_per_call": round(draws / calls * 1e6, 2),
        **{f"{name}_clock_jumps_per_call": round(len(jumps[name]) / calls, 3) for name in _CONTENDERS},
        "same_records": records["manor"].ticks == records["manor_streamed"].ticks,
    }


SUITE = Suite(
    name="fastforward",
    title="ticks per second of a virtual-clock run, against bare trio sleeping the same latencies",
    units=units,
    run=run,
)
