"""The backend interface: one small abstract method, like an httpx transport."""

from __future__ import annotations

import abc
import math
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextvars import ContextVar
from typing import ClassVar, TypeVar

import trio

from ..calls import Done, Event, Request
from ..errors import ProviderError

__all__ = ["DeadlineReached", "Provider", "answer_only", "by_deadline", "call_deadline", "collect", "hears_stream"]

_Listener = TypeVar("_Listener", bound=Callable[[Event], None])

#: When the call the current task is making must end (trio time; ``inf``: no deadline),
#: handed down by a layer that bounds the call (the timeout layer) instead of a cancel
#: scope of its own. ``collect`` keeps it: through the backend's ``answer``, if the
#: backend keeps deadlines itself (``Provider.keeps_deadline``), else with a cancel
#: scope; either way the call ends at that instant with ``DeadlineReached``.
call_deadline: ContextVar[float] = ContextVar("manor_call_deadline", default=math.inf)


class DeadlineReached(Exception):
    """The call reached its ``call_deadline`` before its answer. The layer that set the
    deadline turns it into its own error (the timeout layer's ``CallTimeout``)."""


class Provider(abc.ABC):
    """A model backend, or a layer wrapping one.

    ``invoke`` returns a *cold* stream: nothing runs and nothing is acquired until the
    stream is iterated. Implement it as an async generator function, and close it with
    ``contextlib.aclosing`` when not iterating to the end.
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
        capacity); then the tick loop starts them one by one, in ticket order."""
        return False

    def answer(self, request: Request) -> Awaitable[Done]:
        """The answer to ``request`` for a caller that does not watch it stream
        (``collect`` without a listener that hears the stream).

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
        return _stream(self, request, None)


def answer_only(listener: _Listener) -> _Listener:
    """Mark ``listener`` as one that ignores the backend's own events (``Started``,
    ``TextDelta``, ``Done``): it hears only what the layers above the backend say
    (``Admitted``, ``Opened``), and the backend may answer without streaming
    (``Provider.answer``). The tick loop's listener is one.
    """
    listener.hears_stream = False  # type: ignore[attr-defined]
    return listener


def hears_stream(listener: Callable[[Event], None] | None) -> bool:
    """Whether ``listener`` wants the backend's events as they stream (``answer_only``)."""
    return listener is not None and getattr(listener, "hears_stream", True)


def collect(provider: Provider, request: Request, listener: Callable[[Event], None] | None = None) -> Awaitable[Done]:
    """One call run to the end, its ``Done`` event the result; ``listener``, if given,
    hears every event up to it as it streams — unless it is ``answer_only``: then the
    call is the provider's ``answer``, which ends the same way with less work. A
    ``call_deadline`` set for the call is kept (``DeadlineReached``).

    It returns the call's coroutine rather than awaiting it in one of its own: the
    call runs innermost in a stack, where a frame more is passed through on every
    resumption.

    Raises:
        ProviderError: (when awaited) the stream ended without a ``Done`` event.
        DeadlineReached: (when awaited) the call's deadline came first.
        CallError: (when awaited) whatever the stream raised.
    """
    if listener is not None and getattr(listener, "hears_stream", True):  # hears_stream(listener), inline: per call
        answer = None
        call = _stream(provider, request, listener)
    else:
        answer = getattr(provider, "answer", None)  # a duck-typed backend may have only invoke
        call = _stream(provider, request, None) if answer is None else answer(request)
    deadline = call_deadline.get()
    if deadline == math.inf or (answer is not None and getattr(provider, "keeps_deadline", False)):
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


async def _stream(provider: Provider, request: Request, listener: Callable[[Event], None] | None) -> Done:
    """``provider``'s stream for ``request`` to its ``Done``, each event to ``listener``."""
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
