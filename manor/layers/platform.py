"""The platform's session limiter as the innermost layer: fail-fast, never queues."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import final

import attrs
import trio

from ..calls import Event, Opened, Request
from ..limiter import SessionLimiter
from ..providers.base import Provider
from .base import Layer

__all__ = ["PlatformLayer"]


@final
@attrs.define(eq=False)
class PlatformLayer(Layer):
    """Open a platform session when the stream is first iterated; close it at the end.

    Raises ``SessionLimitError`` at once when the platform is full.
    """

    priority = 90

    limiter: SessionLimiter

    async def stream(self, request: Request, inner: Provider) -> AsyncGenerator[Event, None]:
        session = self.limiter.try_acquire()
        try:
            yield Opened(opened_at=trio.current_time())
            async with aclosing(inner.invoke(request)) as events:
                async for event in events:
                    yield event
        finally:
            session.release()
