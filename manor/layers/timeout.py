"""The per-call timeout."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import final

import attrs
import trio

from ..calls import Event, Request
from ..errors import CallTimeout
from ..providers.base import Provider
from .base import Layer

__all__ = ["TimeoutLayer"]


@final
@attrs.define(eq=False)
class TimeoutLayer(Layer):
    """Fail a call with ``CallTimeout`` when it has not finished ``seconds`` after its
    stream was first iterated. The stream below is cancelled, so every layer under this
    one (platform session, backend) releases what it holds.

    It sits just inside the gate, so a call's clock starts when the gate lets it
    through, as the remote-agent adapter's does when a request gets its worker
    (DESIGN.md, "Bounded waits"). Waiting in our own queue is bounded by the gate's own
    timeout; counted here, it would make a healthy backend look slow to the circuit
    breaker, which counts ``CallTimeout`` as the backend's failure.

    The deadline is applied around each wait on the inner stream, never across a
    ``yield``: a cancel scope must not be left open while the consumer runs.
    """

    priority = 60

    seconds: float = attrs.field(validator=attrs.validators.gt(0))

    async def stream(self, request: Request, inner: Provider) -> AsyncGenerator[Event, None]:
        deadline = trio.current_time() + self.seconds
        async with aclosing(inner.invoke(request)) as events:
            while True:
                with trio.move_on_at(deadline) as scope:
                    try:
                        event = await anext(events)
                    except StopAsyncIteration:
                        return
                if scope.cancelled_caught:
                    raise CallTimeout(f"{request.agent}: no answer within {self.seconds:g}s")
                yield event
