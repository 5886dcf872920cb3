"""The backend interface: one small abstract method, like an httpx transport."""

from __future__ import annotations

import abc
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TypeVar

from ..calls import Done, Event, Request
from ..errors import ProviderError

__all__ = ["Provider", "answer_only", "collect", "hears_stream"]

_Listener = TypeVar("_Listener", bound=Callable[[Event], None])


class Provider(abc.ABC):
    """A model backend, or a layer wrapping one.

    ``invoke`` returns a *cold* stream: nothing runs and nothing is acquired until the
    stream is iterated. Implement it as an async generator function, and close it with
    ``contextlib.aclosing`` when not iterating to the end.
    """

    @abc.abstractmethod
    def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
        """Start streaming the answer to ``request`` when first iterated.

        Raises:
            CallError: (from iteration) a subclass naming why the call failed.
        """

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
    call is the provider's ``answer``, which ends the same way with less work.

    It returns the call's coroutine rather than awaiting it in one of its own: the
    call runs innermost in a stack, where a frame more is passed through on every
    resumption.

    Raises:
        ProviderError: (when awaited) the stream ended without a ``Done`` event.
        CallError: (when awaited) whatever the stream raised.
    """
    if hears_stream(listener):
        return _stream(provider, request, listener)
    answer = getattr(provider, "answer", None)  # a duck-typed backend may have only invoke
    if answer is None:
        return _stream(provider, request, None)
    return answer(request)


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
