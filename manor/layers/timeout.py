"""The per-call timeout."""

from __future__ import annotations

from typing import final

import attrs
import trio

from ..calls import Done, Request
from ..clock import current_time
from ..errors import CallTimeout
from .stack import HandedDown, Inner, Layer, Listener

__all__ = ["TimeoutLayer"]


@final
@attrs.define(eq=False)
class TimeoutLayer(Layer):
    """Fail a call with ``CallTimeout`` when it has not finished ``seconds`` after it
    reached this layer. Everything below is cancelled, so every layer under this one
    (platform session, backend) releases what it holds.

    It sits just inside the gate, so a call's clock starts when the gate lets it
    through, as the remote-agent adapter's does when a request gets its worker
    (docs/internals.md, "The lessons it is built on": bounded waits). Waiting in our own
    queue is bounded by the gate's own timeout; counted here, it would make a healthy
    backend look slow to the circuit breaker, which counts ``CallTimeout`` as the
    backend's failure.

    For example, 30 seconds for each call from its admission::

        stack = Stack(backend, [GateLayer(gate), TimeoutLayer(seconds=30.0)])
    """

    # Where the backend keeps a call's deadline itself and nothing in between waits
    # (``Layer.bind``), the deadline is handed down (``call_deadline``) instead of a
    # cancel scope opened here: the call ends at the same instant, one timer fewer (under
    # the virtual clock the simulator's answer is a timer, and a scope is a second one).

    priority = 60

    seconds: float = attrs.field(validator=attrs.validators.gt(0))

    async def call(self, request: Request, listener: Listener, inner: Inner) -> Done:
        with trio.CancelScope(deadline=current_time() + self.seconds):
            return await inner(request, listener)
        raise CallTimeout(self._message())

    def bind(self, inner: Inner, *, deadline_kept_below: bool) -> Inner:
        if not deadline_kept_below:
            return super().bind(inner, deadline_kept_below=deadline_kept_below)

        return HandedDown(self.seconds, inner, self._expired)

    def _expired(self) -> CallTimeout:
        return CallTimeout(self._message())

    def _message(self) -> str:
        return f"no answer within {self.seconds:g}s"
