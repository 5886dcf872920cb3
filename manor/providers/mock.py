"""A backend that is a plain function, for tests and for trying Manor out (httpx's
``MockTransport``)."""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import final

from ..calls import Done, Event, Request, Started
from .provider import Provider

__all__ = ["Handler", "MockProvider"]

#: What a ``MockProvider`` calls for each request: the answer's text or its whole
#: ``Done``, returned or awaited; or it raises (a ``CallError`` degrades the call with its
#: reason, as a real backend's would).
Handler = Callable[[Request], "str | Done | Awaitable[str | Done]"]


@final
class MockProvider(Provider):
    """A backend made of one function: ``handler(request)`` returns the answer's text (or
    a whole ``Done``, with its usage), or raises. An ``async def`` handler may wait first
    (``await trio.sleep(1.5)``: the call's latency, exact under the virtual clock).

    The stream it makes is ``Started``, then the answer's ``Done``; nothing runs until
    it is iterated, as with every backend.

    Example::

        backend = MockProvider(lambda request: f"{request.agent} bows.")
        engine = build_engine(config, scene, backend=backend)

        async def slow(request: Request) -> str:
            await trio.sleep(2.0)
            if request.agent == "ghost":
                raise ProviderError("the ghost is not answering")
            return "Quite."

    Args:
        handler: request -> its answer (``Handler``).
    """

    def __init__(self, handler: Handler) -> None:
        self.handler = handler

    def __repr__(self) -> str:
        return f"MockProvider({getattr(self.handler, '__qualname__', self.handler)!r})"

    async def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
        yield Started()
        answer = self.handler(request)
        if inspect.isawaitable(answer):
            answer = await answer
        yield answer if isinstance(answer, Done) else Done(text=answer)
