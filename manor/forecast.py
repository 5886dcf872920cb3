"""What a run's settings promise before its first tick: warnings a user should read
before waiting for a result (a gate too small for the tick it must carry)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .engine import Engine

__all__ = ["gate_overload"]


def gate_overload(engine: Engine) -> str | None:
    """One line, when a tick's predicted work at the gate exceeds the gate's timeout.

    The work is the tick's predicted call time shared among the gate's slots (the sum of
    the predicted latencies over the gate size): the time its last call would wait to be
    let through. Longer than ``gate.timeout_s``, and most calls of every tick degrade
    as ``gate_timeout``. ``None`` when it fits, or when the policy uses no gate.
    """
    loop = engine.loop
    if loop.policy.name == "legacy":
        return None
    requests = loop.world.plan()
    work = sum(loop.predictor.latency(request) for request in requests) / loop.gate.size
    timeout = engine.config.settings.gate.timeout_s
    if work <= timeout:
        return None
    return (
        f"a tick's {len(requests)} calls need about {work:.0f} s at the gate (their predicted time over "
        f"{loop.gate.size} slots) but a call waits at most {timeout:g} s (gate.timeout_s): most will degrade "
        f"as gate_timeout; raise --gate-timeout to {math.ceil(work)}, or give the gate more slots: "
        f"--platform-limit {_size_for(work * loop.gate.size, timeout) + 1} if your provider allows that many sessions"
    )


def _size_for(total: float, timeout: float) -> int:
    """The smallest gate that carries ``total`` seconds of calls within ``timeout``."""
    return max(1, math.ceil(total / timeout))
