"""The per-call timeout."""

from __future__ import annotations

from typing import final

import attrs
import trio

from ..calls import Done, Request
from ..errors import CallTimeout
from .base import Inner, Layer, Listener

__all__ = ["TimeoutLayer"]


@final
@attrs.define(eq=False)
class TimeoutLayer(Layer):
    """Fail a call with ``CallTimeout`` when it has not finished ``seconds`` after it
    reached this layer. Everything below is cancelled, so every layer under this one
    (platform session, backend) releases what it holds.

    It sits just inside the gate, so a call's clock starts when the gate lets it
    through, as the remote-agent adapter's does when a request gets its worker
    (DESIGN.md, "Bounded waits"). Waiting in our own queue is bounded by the gate's own
    timeout; counted here, it would make a healthy backend look slow to the circuit
    breaker, which counts ``CallTimeout`` as the backend's failure.
    """

    priority = 60

    seconds: float = attrs.field(validator=attrs.validators.gt(0))

    async def call(self, request: Request, listener: Listener, inner: Inner) -> Done:
        with trio.CancelScope(deadline=trio.current_time() + self.seconds):
            return await inner(request, listener)
        raise CallTimeout(f"no answer within {self.seconds:g}s")
