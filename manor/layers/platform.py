"""The platform's session limiter as the innermost layer: fail-fast, never queues."""

from __future__ import annotations

import functools
from collections.abc import Coroutine
from typing import Any, final

import attrs

from ..admission.limiter import SessionLimiter
from ..calls import Done, Opened, Request
from .stack import Inner, Layer, Listener, ignore

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

    def call(self, request: Request, listener: Listener, inner: Inner) -> Coroutine[Any, Any, Done]:
        return self._session(inner, request, listener)

    def bind(self, inner: Inner, *, deadline_kept_below: bool) -> Inner:
        # ``_session`` with ``inner`` bound, where ``Layer.bind``'s closure would be a
        # frame of its own at every call.
        return functools.partial(self._session, inner)

    async def _session(self, inner: Inner, request: Request, listener: Listener) -> Done:
        """``call``, ``inner`` first (``bind`` binds it)."""
        limiter = self.limiter
        limiter.open()
        try:
            # Not said to ``ignore`` (a call fired at admission passes it): a call for nothing.
            if listener is not ignore:
                listener(_OPENED)
            return await inner(request, listener)
        finally:
            limiter.close()
