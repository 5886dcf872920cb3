"""The gate as a layer: deferred admission through the shared ``Gate``."""

from __future__ import annotations

import math
from typing import final

import attrs

from ..admission.adaptive import GateAdjuster
from ..admission.gate import SharedGate, SharedPermit
from ..calls import Admitted, Done, Released, Request
from ..clock import current_time
from ..errors import CallError
from ..providers.provider import DeadlineReached, call_deadline
from .stack import Answered, Bracket, HandedDown, Inner, Layer, Listener, ignore

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
        adjuster: hears every call it lets through and how it ended, before its slot
            is given back (a learned gate's size, ``manor.admission.adaptive``).
    """

    priority = 50
    admits = True

    gate: SharedGate
    timeout: float = math.inf
    adjuster: GateAdjuster | None = None

    async def call(self, request: Request, listener: Listener, inner: Inner) -> Done:
        permit = await self.gate.acquire(request.ticket, timeout=self.timeout)
        try:
            listener(Admitted(ticket=permit.ticket, queued_at=permit.queued_at, admitted_at=permit.admitted_at))
        except BaseException:
            permit.release()
            raise
        try:
            return await self.through(permit, request, listener, inner)
        finally:
            listener(Released(released_at=permit.released_at))  # type: ignore[arg-type]

    async def through(self, permit: SharedPermit, request: Request, listener: Listener, inner: Inner, last: bool = False) -> Done:
        """The call once ``permit`` let it through: ``inner``, the slot given back exactly
        once as it ends, at the instant the call ended (``permit.released_at``).
        ``call``'s second half, which a caller that waits for the permit itself
        (``manor.tick.admitted``) makes alone: it learns its admission and its release
        from the permit, where ``call``'s listener hears them as ``Admitted`` and
        ``Released`` (``listener`` hears only the layers below).

        ``last``: the caller's task makes no other call after this one (a call's own
        task, ``manor.tick.admitted``), so the deadline handed down (``call_deadline``)
        is left set as the call ends rather than reset: nothing after the call in that
        task reads it, and its context dies with the task. Reset, it would build the task's
        context a new mapping once more for every call. A task
        that makes more calls (``call``'s callers may) must have it reset, or a later
        call through no timeout would see this one's deadline."""
        if self.adjuster is not None:
            return await self._adjusted(permit, request, listener, inner)
        try:
            if type(inner) is not HandedDown:
                return await inner(request, listener)
            # The deadline a layer right below hands down (the timeout's), set in this
            # frame rather than one of its own, and the session the layer below that
            # holds for the call (the platform's ``Bracket``) opened and closed here too,
            # in the order their own frames would: two frames fewer in the call's await chain.
            reset = call_deadline.set(current_time() + inner.seconds)
            try:
                below = inner.inner
                if type(below) is not Bracket:
                    return await below(request, listener)
                below.opens()
                try:
                    if below.said is not None and listener is not ignore:
                        listener(below.said)
                    answered = below.inner  # (the backend's answer asked here, under the session)
                    if type(answered) is Answered:
                        return await answered.answer(request)
                    return await answered(request, listener)
                finally:
                    below.closes()
            except DeadlineReached:
                raise inner.expired() from None
            finally:
                if not last:
                    call_deadline.reset(reset)
        finally:
            # The call ends now, before its slot is freed: the admission the release
            # makes comes after it, on any clock.
            permit.release(current_time())

    async def _adjusted(self, permit: SharedPermit, request: Request, listener: Listener, inner: Inner) -> Done:
        """``through``'s, telling the adjuster how the call ended before its slot is
        given back: a shrink made on a refusal holds back the next waiter."""
        adjuster = self.adjuster
        assert adjuster is not None
        admitted = adjuster.admitted()
        outcome: Done | CallError | None = None
        try:
            outcome = await inner(request, listener)
            return outcome
        except CallError as exc:
            outcome = exc
            raise
        finally:
            ended = current_time()
            adjuster.ended(permit.ticket, admitted, outcome)
            permit.release(ended)
