"""The gate as a layer: deferred admission through the shared ``Gate``."""

from __future__ import annotations

import math
from typing import final

import attrs

from ..admission.gate import SharedGate
from ..calls import Admitted, Done, Released, Request
from ..clock import current_time
from .base import Inner, Layer, Listener

__all__ = ["GateLayer"]


@final
@attrs.define(eq=False)
class GateLayer(Layer):
    """Acquire a gate permit when the call is made, release it exactly once when the
    call ends, fails or is cancelled; the listener hears ``Admitted`` first and
    ``Released`` last.

    Args:
        gate: the one gate every caller shares.
        timeout: seconds a call may wait at the gate before ``GateTimeout``.
    """

    priority = 50

    gate: SharedGate
    timeout: float = math.inf

    async def call(self, request: Request, listener: Listener, inner: Inner) -> Done:
        permit = await self.gate.acquire(request.ticket, timeout=self.timeout)
        try:
            listener(Admitted(ticket=permit.ticket, queued_at=permit.queued_at, admitted_at=permit.admitted_at))
            return await inner(request, listener)
        finally:
            # The call ends now, before its slot is freed: the admission the release
            # makes comes after it, on any clock.
            ended = current_time()
            permit.release()
            listener(Released(released_at=ended))
