"""A backend that answers at once: what the overhead and scale suites run against, so
that what they time is Manor (gate, layers, platform limiter, tick loop), not a model.
A request with a shape gets a valid answer of it (a Werewolf vote), drawn once per
shape: an answer the engine refused would time its repair, not Manor."""

from __future__ import annotations

import functools
import random
from collections.abc import AsyncGenerator
from typing import final

import trio

from ..answers import draw_answer
from ..calls import Done, Event, Request, Usage
from ..providers.base import Provider

__all__ = ["InstantProvider"]

_DONE = Done(text="ok", usage=Usage(input_tokens=1, output_tokens=1))


@final
class InstantProvider(Provider):
    """Answers every request at once with a one-word ``Done`` (a shaped one, with a
    valid answer of its shape).

    It still passes one checkpoint before answering, as any call that does I/O would:
    without it, a call that needs no wait would never let another task run.
    """

    async def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
        await trio.lowlevel.checkpoint()
        yield _DONE if request.shape is None else _shaped(request.shape)


@functools.cache
def _shaped(shape: type) -> Done:
    """A valid answer of ``shape``, the same every time."""
    return Done(text=draw_answer(shape, random.Random(0), ("ok",)), usage=_DONE.usage)
