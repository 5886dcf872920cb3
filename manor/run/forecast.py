"""What a run's settings promise before its first tick: warnings a user should read
before waiting for a result (a gate too small for the tick it must carry)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..worlds.failures import world_code

if TYPE_CHECKING:
    from .engine import Engine

__all__ = ["gate_overload"]


def gate_overload(*engines: Engine) -> str | None:
    """One line, when a tick's predicted work at the gate exceeds the gate's timeout.

    The work is the tick's predicted call time shared among the gate's slots (the sum of
    the predicted latencies over the gate size): the time its last call would wait to be
    let through. Longer than ``gate.timeout_s``, and most calls of every tick degrade
    as ``gate_timeout``. ``None`` when it fits, or when the policy uses no gate.

    Given the worlds of a fleet (which share the first one's gate), the work is a tick
    of every world: the worlds' ticks overlap at the one gate.
    """
    loop = engines[0].loop
    if loop.policy.name == "legacy":
        return None
    calls = 0
    total = 0.0
    for engine in engines:
        with world_code(engine.loop.world, "plan", engine.loop.world.tick + 1):
            requests = engine.loop.world.plan()
        calls += len(requests)
        total += sum(engine.loop.predictor.latencies(requests))
    work = total / loop.gate.size
    timeout = engines[0].config.settings.gate.timeout_s
    if work <= timeout:
        return None
    what = f"a tick's {calls} calls need" if len(engines) == 1 else f"a tick of each of the {len(engines)} worlds, {calls} calls, needs"
    return (
        f"{what} about {work:.0f} s at the gate (their predicted time over "
        f"{loop.gate.size} slots) but a call waits at most {timeout:g} s (gate.timeout_s): most will degrade "
        f"as gate_timeout; raise --gate-timeout to {math.ceil(work)}, or give the gate more slots: "
        f"--platform-limit {_size_for(total, timeout) + 1} if your provider allows that many sessions"
    )


def _size_for(total: float, timeout: float) -> int:
    """The smallest gate that carries ``total`` seconds of calls within ``timeout``."""
    return max(1, math.ceil(total / timeout))
