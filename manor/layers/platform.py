"""The platform's session limiter as the innermost layer: fail-fast, never queues."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, final

import attrs

from ..admission.limiter import SessionLimiter
from ..calls import Done, Opened, Request
from .stack import Bracket, Inner, Layer, Listener

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
        return self.bind(inner, deadline_kept_below=False)(request, listener)  # type: ignore[return-value]

    def bind(self, inner: Inner, *, deadline_kept_below: bool) -> Inner:
        # The session around ``inner`` as a ``Bracket``, not a coroutine of this layer's:
        # the gate layer above opens and closes it in its own frame (``GateLayer.through``),
        # a frame fewer at every call. (``Opened`` is not said to ``ignore``: a call fired
        # at admission passes it.)
        return Bracket(self.limiter.open, self.limiter.close, _OPENED, inner)
