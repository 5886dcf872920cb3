"""A backend that answers at once: what the overhead and scale suites run against, so
that what they time is Manor (gate, layers, platform limiter, tick loop), not a model.
A request with a shape gets a valid answer of it (a Werewolf vote), drawn once per
shape: an answer the engine refused would time its repair, not Manor."""

from __future__ import annotations

import functools
import random
from collections.abc import AsyncGenerator
from typing import ClassVar, final

import trio

from ..answers import draw_answer
from ..calls import Done, Event, Request, Usage
from ..clock import current_time
from ..providers.provider import DeadlineReached, Provider, call_deadline

__all__ = ["InstantProvider"]

_DONE = Done(text="ok", usage=Usage(input_tokens=1, output_tokens=1))


@final
class InstantProvider(Provider):
    """Answers every request at once with a one-word ``Done`` (a shaped one, with a
    valid answer of its shape).

    It still passes one checkpoint before answering, as any call that does I/O would:
    without it, a call that needs no wait would never let another task run. That
    checkpoint is the one moment a call's deadline can pass, so it keeps deadlines
    itself (``Provider.keeps_deadline``), as the simulator does: a deadline come by then
    ends the call there, as a cancel scope around it would have.
    """

    keeps_deadline: ClassVar[bool] = True  # answer(): see there

    async def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
        await trio.lowlevel.checkpoint()
        yield _DONE if request.shape is None else _shaped(request.shape)

    async def answer(self, request: Request) -> Done:
        """The answer, keeping the call's deadline (``call_deadline``) itself.

        Raises:
            DeadlineReached: the deadline had come by its checkpoint.
        """
        await trio.lowlevel.checkpoint()
        if current_time() >= call_deadline.get():
            raise DeadlineReached
        return _DONE if request.shape is None else _shaped(request.shape)


@functools.cache
def _shaped(shape: type) -> Done:
    """A valid answer of ``shape``, the same every time."""
    return Done(text=draw_answer(shape, random.Random(0), ("ok",)), usage=_DONE.usage)
