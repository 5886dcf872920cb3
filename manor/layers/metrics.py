"""Observability: call latency and outcome counts per caller kind."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import final

import attrs
import trio

from ..calls import Done, Event, Request
from ..providers.base import Provider
from .base import Layer

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
class MetricsLayer(Layer):
    """Times every call from its first iteration to its end, by caller kind."""

    priority = 10

    _tallies: dict[str, _Tally] = attrs.field(factory=dict, init=False)

    async def stream(self, request: Request, inner: Provider) -> AsyncGenerator[Event, None]:
        started = trio.current_time()
        ok = False
        try:
            async with aclosing(inner.invoke(request)) as events:
                async for event in events:
                    # Done is success, even if the consumer closes the stream right after
                    # it (as ``collect`` does) instead of iterating to the end.
                    ok = ok or isinstance(event, Done)
                    yield event
            ok = True
        finally:
            tally = self._tallies.setdefault(request.caller.value, _Tally())
            elapsed = trio.current_time() - started
            tally.calls += 1
            tally.ok += ok
            tally.failed += not ok
            tally.total += elapsed
            tally.max = max(tally.max, elapsed)

    def statistics(self) -> dict[str, LatencyStatistics]:
        return {
            kind: LatencyStatistics(
                calls=t.calls, ok=t.ok, failed=t.failed, mean=t.total / t.calls if t.calls else 0.0, max=t.max
            )
            for kind, t in self._tallies.items()
        }
