"""The gate as a layer: deferred admission through the shared ``Gate``."""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import final

import attrs

from ..calls import Admitted, Event, Request
from ..gate import Gate
from ..providers.base import Provider
from .base import Layer

__all__ = ["GateLayer"]


@final
@attrs.define(eq=False)
class GateLayer(Layer):
    """Acquire a gate permit on the stream's first iteration, release it exactly once
    when the stream ends, fails, is cancelled or is closed early.

    Args:
        gate: the one gate every caller shares.
        timeout: seconds a call may wait at the gate before ``GateTimeout``.
    """

    priority = 50

    gate: Gate
    timeout: float = math.inf

    async def stream(self, request: Request, inner: Provider) -> AsyncGenerator[Event, None]:
        permit = await self.gate.acquire(request.ticket, timeout=self.timeout)
        try:
            yield Admitted(ticket=permit.ticket, queued_at=permit.queued_at, admitted_at=permit.admitted_at)
            async with aclosing(inner.invoke(request)) as events:
                async for event in events:
                    yield event
        finally:
            permit.release()
