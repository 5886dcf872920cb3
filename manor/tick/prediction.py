"""Predicted call latency, for handing out tickets longest call first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, final

import attrs

from ..calls import Request
from ..records import CallRecord

__all__ = ["LatencyPredictor", "Predictor"]


class Predictor(Protocol):
    """What the tick loop asks before handing out tickets, and tells after a tick."""

    def latencies(self, requests: Sequence[Request]) -> list[float]:
        """The latency each of ``requests`` is expected to have, in their order (a
        tick's at once: the tick loop asks for every call it makes)."""
        ...

    def observe(self, records: Sequence[CallRecord]) -> None:
        """Learn from a tick's finished calls (its records, in planning order)."""
        ...


@final
@attrs.define(eq=False)
class LatencyPredictor:
    """The mean latency of each agent's calls, per caller kind, starting from its
    typical latency.

    The typical latency counts as ``prior`` calls already seen, so a first, unlucky call
    does not swing the estimate; after that it is the plain mean of what was seen, until
    the newest call's weight falls to ``1 / memory``, from where it is an exponentially
    weighted mean that still follows a backend that slows down or speeds up. Why a mean
    and not a quickly moving average: a call's latency scatters around its agent's mean
    independently from tick to tick (the simulator draws each call on its own, and a
    real model's time varies with the sampled answer), so the recent calls say no more
    about the next one than the older ones do, and a fast average only adds their scatter
    to the prediction (with the old average, alpha 0.3, longest-first reached 0.911 of
    the bound on the default scene and 0.945 on tea_party; with the mean, 0.914 and
    0.953, the rule's planning included: ``manor bench --suite scheduling``).

    It learns only from the records of finished calls, so a replay of the same records
    predicts exactly as the recorded run did.

    Args:
        typical: agent -> typical latency (the scene's latency profile).
        prior: how many calls the typical latency counts as.
        memory: the longest stretch of calls the mean averages over.
    """

    typical: Mapping[str, float]
    prior: int = attrs.field(default=4, validator=attrs.validators.ge(1))
    memory: int = attrs.field(default=32, validator=attrs.validators.ge(1))
    _means: dict[tuple[str, str], tuple[float, int]] = attrs.field(factory=dict, init=False)

    def latencies(self, requests: Sequence[Request]) -> list[float]:
        """The expected latency of each request's agent's next call as its caller kind
        (the tick loop asks it for every call it makes: a tick's at once, not a call of
        this method for each)."""
        means, typical = self._means, self.typical
        predicted = []
        for request in requests:
            agent = request.agent
            seen = means.get((agent, request.caller))
            predicted.append(typical.get(agent, 1.0) if seen is None else seen[0])
        return predicted

    def observe(self, records: Sequence[CallRecord]) -> None:
        # A tick's records at once, not a call of this method for each of them.
        means, typical, prior, memory = self._means, self.typical, self.prior, self.memory
        for record in records:
            admitted_at = record.admitted_at
            if record.outcome == "ok" and admitted_at is not None:
                key = (record.agent, record.caller)
                seen = means.get(key)
                mean, weight = (typical.get(record.agent, 1.0), prior) if seen is None else seen
                weight = weight + 1 if weight < memory else memory
                # record.latency, without the property's call (this runs for every call)
                means[key] = (mean + ((record.finished_at - admitted_at) - mean) / weight, weight)
