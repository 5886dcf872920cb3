"""Observability: call latency and outcome counts per caller kind."""

from __future__ import annotations

from typing import final

import attrs

from ..calls import Done, Request
from ..clock import current_time
from .stack import Observer

__all__ = ["LatencyStatistics", "MetricsLayer"]


@attrs.frozen
class LatencyStatistics:
    """Calls of one caller kind: how many, how they ended, how long they took (s)."""

    calls: int
    ok: int
    failed: int
    mean: float
    max: float


@attrs.define
class _Tally:
    calls: int = 0
    ok: int = 0
    failed: int = 0
    total: float = 0.0
    max: float = 0.0


@final
@attrs.define(eq=False)
class MetricsLayer(Observer):
    """Times every call from when it is made to its end, by caller kind."""

    priority = 10

    _tallies: dict[str, _Tally] = attrs.field(factory=dict, init=False)

    def before(self, request: Request) -> float:
        return current_time()

    def after(self, request: Request, state: object, done: Done | None, error: BaseException | None) -> None:
        tally = self._tallies.get(request.caller)
        if tally is None:  # not setdefault: that would build a tally per call
            tally = self._tallies[request.caller] = _Tally()
        elapsed = current_time() - state  # type: ignore[operator]
        ok = error is None
        tally.calls += 1
        tally.ok += ok
        tally.failed += not ok
        tally.total += elapsed
        if elapsed > tally.max:
            tally.max = elapsed

    def statistics(self) -> dict[str, LatencyStatistics]:
        return {
            kind: LatencyStatistics(
                calls=t.calls, ok=t.ok, failed=t.failed, mean=t.total / t.calls if t.calls else 0.0, max=t.max
            )
            for kind, t in self._tallies.items()
        }
