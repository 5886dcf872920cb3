"""Predicted call latency, for handing out tickets longest call first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import final

import attrs

from .records import CallRecord

__all__ = ["LatencyPredictor"]


@final
@attrs.define(eq=False)
class LatencyPredictor:
    """An exponentially weighted mean of each agent's past call latencies, per caller
    kind, seeded from its typical latency before its first call.

    It learns only from the records of finished calls, so a replay of the same records
    predicts exactly as the recorded run did.

    Args:
        typical: agent -> typical latency (the scene's latency profile).
        alpha: weight of the newest observation.
    """

    typical: Mapping[str, float]
    alpha: float = attrs.field(default=0.3, validator=[attrs.validators.gt(0), attrs.validators.le(1)])
    _means: dict[tuple[str, str], float] = attrs.field(factory=dict, init=False)

    def predict(self, agent: str, caller: str) -> float:
        return self._means.get((agent, caller), self.typical.get(agent, 1.0))

    def observe(self, record: CallRecord) -> None:
        if record.ok and record.admitted_at is not None:
            key = (record.agent, record.caller)
            previous = self.predict(record.agent, record.caller)
            self._means[key] = previous + self.alpha * (record.latency - previous)
