"""A backend that answers at once: what the overhead and scale suites run against, so
that what they time is Manor (gate, layers, platform limiter, tick loop), not a model."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import final

import trio

from ..calls import Done, Event, Request, Usage
from ..providers.base import Provider

__all__ = ["InstantProvider"]

_DONE = Done(text="ok", usage=Usage(input_tokens=1, output_tokens=1))


@final
class InstantProvider(Provider):
    """Answers every request at once with a one-word ``Done``.

    It still passes one checkpoint before answering, as any call that does I/O would:
    without it, a call that needs no wait would never let another task run.
    """

    async def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
        await trio.lowlevel.checkpoint()
        yield _DONE
