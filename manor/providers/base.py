"""The backend interface: one small abstract method, like an httpx transport."""

from __future__ import annotations

import abc
from collections.abc import AsyncGenerator, Callable

from ..calls import Done, Event, Request
from ..errors import ProviderError

__all__ = ["Provider", "collect"]


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


async def collect(provider: Provider, request: Request, listener: Callable[[Event], None] | None = None) -> Done:
    """Run one call to the end and return its ``Done`` event; ``listener``, if given,
    hears every event up to it as it streams.

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
