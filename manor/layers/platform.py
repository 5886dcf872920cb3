"""The platform's session limiter as the innermost layer: fail-fast, never queues."""

from __future__ import annotations

from typing import final

import attrs

from ..admission.limiter import SessionLimiter
from ..calls import Done, Opened, Request
from .stack import Inner, Layer, Listener

__all__ = ["PlatformLayer"]

#: What the layer says as a session opens: the same for every call (``Opened`` holds
#: nothing, so that no call builds one, nor reads the clock, for listeners that ignore it).
_OPENED = Opened()


@final
@attrs.define(eq=False)
class PlatformLayer(Layer):
    """Open a platform session when the call is made; close it when the call ends.

    Raises ``SessionLimitError`` at once when the platform is full.
    """

    priority = 90
    passes_deadline = True  # it opens a session or refuses at once: it never waits

    limiter: SessionLimiter

    async def call(self, request: Request, listener: Listener, inner: Inner) -> Done:
        session = self.limiter.try_acquire()
        try:
            listener(_OPENED)
            return await inner(request, listener)
        finally:
            session.release()
