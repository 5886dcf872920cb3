"""Run statistics: the figures ``manor run`` prints and ``--json`` returns."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, final

from .calls import CALLER_KINDS
from .errors import REASONS
from .instruments import Instrument
from .records import StoryEntry, TickRecord

if TYPE_CHECKING:
    from .engine import Engine

__all__ = ["RunStatistics", "empty_degradations", "percentile"]


def empty_degradations() -> dict[str, dict[str, int]]:
    """caller kind -> reason -> 0, for every kind and reason: zero is shown as zero."""
    return {kind: dict.fromkeys(REASONS, 0) for kind in CALLER_KINDS}


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100), interpolating linearly between ranks."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@final
class RunStatistics(Instrument):
    """Counts every call's outcome and every tick's makespan, as ticks finish."""

    def __init__(self) -> None:
        self.ticks = 0
        self.calls = 0
        self.ok = 0
        self.degradations = empty_degradations()
        self.makespans: list[float] = []
        self.world_hash = ""
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost = 0.0

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        self.ticks += 1
        self.makespans.append(record.makespan)
        self.world_hash = record.world_hash
        for call in record.calls:
            self.calls += 1
            self.input_tokens += call.input_tokens
            self.output_tokens += call.output_tokens
            self.cost += call.cost
            if call.ok:
                self.ok += 1
            else:
                self.degradations[call.caller][call.reason or "provider_error"] += 1

    @property
    def degraded(self) -> int:
        return self.calls - self.ok

    def tick_seconds(self) -> dict[str, float]:
        spans = self.makespans
        return {
            "mean": round(sum(spans) / len(spans), 6) if spans else 0.0,
            "p50": round(percentile(spans, 50), 6),
            "p95": round(percentile(spans, 95), 6),
            "max": round(max(spans, default=0.0), 6),
        }

    def summary(self, engine: Engine) -> dict[str, Any]:
        """The run's figures, as ``manor run --json`` prints them."""
        settings = engine.config.settings
        platform = engine.loop.limiter.statistics()
        return {
            "scene": engine.scene.spec.name,
            "policy": engine.loop.policy.name,
            "order": engine.loop.order,
            "ticks": self.ticks,
            "seed": settings.run.seed,
            "platform_limit": platform.limit,
            "gate_size": engine.loop.gate.size,
            "calls": self.calls,
            "ok": self.ok,
            "degraded": self.degraded,
            "degradations": self.degradations,
            "platform_rejections": platform.rejected,
            "peak_platform_sessions": platform.peak,
            "tick_seconds": self.tick_seconds(),
            "tokens": {"input": self.input_tokens, "output": self.output_tokens},
            "cost": round(self.cost, 6),
            # Before any tick (--ticks 0) the world still has its starting hash.
            "world_hash": self.world_hash or engine.loop.world.hash,
        }
