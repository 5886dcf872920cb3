"""The backend interface: one small abstract method, like an httpx transport, and a
documented fast path a backend may add.

A backend implements ``invoke``: a cold stream of events ending in ``Done``. That is all
it must do. If it can answer with less work when nobody watches the stream, it may also
override ``answer`` (the fast path); and if its ``answer`` can end a call at a deadline
itself, to the bit, it says so with ``keeps_deadline = True`` and reads the deadline
from ``call_deadline``, raising ``DeadlineReached`` when it comes. A backend that can
answer calls arriving together differently by their order (a platform refusing those
beyond a capacity) overrides ``arrival_order_matters``. The ``Stack`` reads these once,
as it is built, and chooses each call's way to the backend from them.
"""

from __future__ import annotations

import abc
import math
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextvars import ContextVar
from typing import ClassVar

import trio

from ..calls import Done, Event, Request
from ..errors import ProviderError

__all__ = ["DeadlineReached", "Provider", "by_deadline", "call_deadline", "collect", "stream"]


#: When the call the current task is making must end (trio time; ``inf``: no deadline),
#: handed down by a layer that bounds the call (the timeout layer) instead of a cancel
#: scope of its own, only where the backend keeps deadlines (``Provider.keeps_deadline``)
#: and the call is its ``answer``: the call ends at that instant with ``DeadlineReached``.
call_deadline: ContextVar[float] = ContextVar("manor_call_deadline", default=math.inf)


class DeadlineReached(Exception):
    """The call reached its ``call_deadline`` before its answer. The layer that set the
    deadline turns it into its own error (the timeout layer's ``CallTimeout``)."""


class Provider(abc.ABC):
    """A model backend, or a layer wrapping one.

    ``invoke`` returns a *cold* stream: nothing runs and nothing is acquired until the
    stream is iterated. Implement it as an async generator function, and close it with
    ``contextlib.aclosing`` when not iterating to the end. ``answer`` and
    ``keeps_deadline`` are the optional fast path (the module's docstring).

    Example::

        class Echo(Provider):
            async def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
                yield Started()
                yield Done(text=request.prompt)

    (``MockProvider`` makes a backend of a plain function.)
    """

    #: Whether ``answer`` keeps the call's deadline (``call_deadline``) itself: it ends
    #: the call at that instant, to the bit, raising ``DeadlineReached``, as a cancel
    #: scope around it would have ended it, but with fewer timers (the simulator sleeps
    #: until the earlier of its answer's end and the deadline: one timer, where a
    #: scope would be a second).
    keeps_deadline: ClassVar[bool] = False

    @abc.abstractmethod
    def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
        """Start streaming the answer to ``request`` when first iterated.

        Raises:
            CallError: (from iteration) a subclass naming why the call failed.
        """

    def arrival_order_matters(self) -> bool:
        """Whether calls arriving at the same instant could be answered differently
        depending on which arrives first (a platform refusing those beyond its
        capacity); then the tick loop starts them one by one, in ticket order.

        Never by default. A backend that can be overrides it; a ``Stack`` asks it each
        tick only if its class does (it reads that once, as it is built)."""
        return False

    def answer(self, request: Request) -> Awaitable[Done]:
        """The answer to ``request`` for a caller that does not watch it stream (the
        tick loop's calls: ``Stack.answer``; ``collect`` without a listener).

        By default the stream iterated to its end (that coroutine itself, not one of
        this method's around it: every frame of a call's await chain is passed through
        again each time the call resumes). A backend that can answer with less work
        overrides it with an ``async def`` (the simulator: one timer to the answer's
        end, not one per piece); it must end exactly as the stream would — the same
        ``Done`` or error, at the same time to the bit — only the stream's own events
        go unheard.

        Raises:
            CallError: (when awaited) whatever the stream would raise.
        """
        return stream(self, request, None)


def collect(provider: Provider, request: Request, listener: Callable[[Event], None] | None = None) -> Awaitable[Done]:
    """One call run to the end, its ``Done`` event the result: the provider's ``answer``,
    or with a ``listener``, its stream, every event up to the ``Done`` heard as it comes.
    A ``call_deadline`` set for the call is kept (``DeadlineReached``). (A ``Stack``
    chooses its way to the backend once, as it is built, not call by call.)

    Raises:
        ProviderError: (when awaited) the stream ended without a ``Done`` event.
        DeadlineReached: (when awaited) the call's deadline came first.
        CallError: (when awaited) whatever the stream raised.
    """
    call = provider.answer(request) if listener is None else stream(provider, request, listener)
    deadline = call_deadline.get()
    if deadline == math.inf or (listener is None and provider.keeps_deadline):
        return call
    return by_deadline(deadline, call)


async def by_deadline(deadline: float, call: Awaitable[Done]) -> Done:
    """``call``, cancelled at ``deadline`` if it has not answered by then.

    Raises:
        DeadlineReached: at ``deadline``.
    """
    with trio.move_on_at(deadline):
        return await call
    raise DeadlineReached


async def stream(provider: Provider, request: Request, listener: Callable[[Event], None] | None) -> Done:
    """``provider``'s stream for ``request`` to its ``Done``, each event to ``listener``.

    Raises:
        ProviderError: the stream ended without a ``Done`` event.
        CallError: whatever the stream raised.
    """
    # try/finally rather than ``aclosing``: the same close, without the two coroutines
    # of an async context manager on every call.
    events = provider.invoke(request)
    try:
        async for event in events:
            if listener is not None:
                listener(event)
            if isinstance(event, Done):
                return event
    finally:
        await events.aclose()
    raise ProviderError("the stream ended without an answer")
