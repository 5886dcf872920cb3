"""How fast simulated time runs in ``manor play``: a ladder of speeds, and the one to
start at, where a tick takes about a second of wall time."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..run.engine import Engine

__all__ = [
    "MAX",
    "SECONDS_PER_TICK",
    "SPEEDS",
    "describe",
    "estimate_makespan",
    "faster",
    "nearest",
    "starting_speed",
]

#: As fast as the engine can go: simulated time never waits for the wall clock.
MAX = math.inf

#: What a tick should take on screen, in wall seconds, at the starting speed.
SECONDS_PER_TICK = 1.0

#: Simulated seconds per wall second; the speed keys move along it.
SPEEDS: tuple[float, ...] = (0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, MAX)


def nearest(speed: float, speeds: Sequence[float] = SPEEDS) -> float:
    """The ladder speed closest to ``speed`` on a log scale."""
    finite = [s for s in speeds if math.isfinite(s)]
    if speed <= 0:
        return finite[0]
    return min(finite, key=lambda s: abs(math.log(s / speed)))


def estimate_makespan(engine: Engine) -> float:
    """Simulated seconds the next tick should take, from predicted latencies.

    Through the gate a tick takes about its summed call time spread over the gate's
    slots, at least its longest call, and no more than the gate timeout (after which
    the calls still waiting degrade) plus its longest call.
    """
    loop = engine.loop
    predicted = loop.predictor.latencies(loop.world.plan())
    if not predicted:
        return 1.0
    longest = max(predicted)
    spread = sum(predicted) / loop.gate.size
    return max(longest, min(spread, engine.config.settings.gate.timeout_s + longest))


def starting_speed(engine: Engine, seconds_per_tick: float = SECONDS_PER_TICK) -> float:
    """The ladder speed at which a tick of ``engine`` takes about ``seconds_per_tick``."""
    return nearest(estimate_makespan(engine) / seconds_per_tick)


def describe(speed: float) -> str:
    """``×8``, ``×0.25``, ``max``."""
    if not math.isfinite(speed):
        return "max"
    return f"×{speed:g}"


def faster(speed: float, steps: int) -> float:
    """``steps`` rungs up the ladder (down when negative), stopping at its ends."""
    index = SPEEDS.index(speed) if speed in SPEEDS else SPEEDS.index(nearest(speed))
    return SPEEDS[max(0, min(len(SPEEDS) - 1, index + steps))]
