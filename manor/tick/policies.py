"""How a tick's calls are fired: all at once (pipeline), in barriers (batch), or the
original way (legacy). See docs/internals.md, "Policies"."""

from __future__ import annotations

import abc
import functools
import random
from collections.abc import Callable, Iterable, Sequence
from typing import ClassVar, Protocol, final

import attrs
import msgspec
import trio

from ..calls import Request
from ..layers import Stack
from ..records import CallRecord
from .ordered_start import start_now

__all__ = ["Batch", "Firing", "Legacy", "Pipeline", "Policy", "make_policy"]


class Firing(Protocol):
    """What a policy fires a tick's calls through: tickets, the two stacks and the calls
    themselves. ``manor.tick.loop.TickLoop`` is one; a policy needs nothing else of it."""

    #: The world's players' caller kinds (``Caller.player``), which barriers hold.
    players: frozenset[str]
    #: The provider stack with the gate layer, and the same stack without it.
    gated: Stack
    direct: Stack

    @property
    def deadline(self) -> float:
        """The current tick's deadline (``inf`` when there is none)."""

    async def with_tickets(self, requests: Sequence[Request]) -> list[Request]:
        """``requests`` stamped with gate tickets, in their order."""

    async def call(self, request: Request, stack: Stack, *, attempts: int = 1) -> CallRecord:
        """One call through ``stack``; never raises for the call's own failure."""

    async def call_all(
        self,
        requests: Iterable[tuple[int, Request]],
        stack: Stack,
        results: list[CallRecord | None],
        *,
        on_finished: Callable[[int], None] | None = None,
        repairs: int = 0,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Every ``(index, request)`` at once; each record lands at ``results[index]``."""


class Policy(abc.ABC):
    name: ClassVar[str]
    #: Whether its calls go through the shared gate (the tick loop's repairs of
    #: invalid answers go the way the policy's calls went).
    uses_gate: ClassVar[bool] = True

    @abc.abstractmethod
    async def run(self, loop: Firing, requests: Sequence[Request]) -> list[CallRecord]:
        """Make every call of the tick; return their records in planning order."""


@final
@attrs.frozen
class Pipeline(Policy):
    """Every call at once through the shared gate, which pipelines them."""

    name = "pipeline"

    async def run(self, loop: Firing, requests: Sequence[Request]) -> list[CallRecord]:
        results: list[CallRecord | None] = [None] * len(requests)
        await loop.call_all(enumerate(await loop.with_tickets(requests)), loop.gated, results)
        return _complete(results)


def _waves(loop: Firing, requests: Sequence[Request], size: int) -> tuple[list[list[int]], list[int]]:
    """The players' calls' indices in barriers of ``size``, and the indices of the other
    callers (``Caller.player``: the manor world's characters)."""
    players = loop.players
    characters = [i for i, r in enumerate(requests) if r.caller in players]
    others = [i for i, r in enumerate(requests) if r.caller not in players]
    return [characters[i : i + size] for i in range(0, len(characters), size)], others


@final
@attrs.frozen
class Batch(Policy):
    """Characters in barriers of ``size`` — each wave waits for its slowest call — while
    the other callers fire alongside. Every call still goes through the shared gate."""

    name = "batch"

    size: int = attrs.field(validator=attrs.validators.ge(1))

    async def run(self, loop: Firing, requests: Sequence[Request]) -> list[CallRecord]:
        results: list[CallRecord | None] = [None] * len(requests)
        waves, others = _waves(loop, requests, self.size)
        first = waves[0] if waves else []
        # Tickets are issued when a group is fired: the first wave with the others.
        opening = first + others
        stamped = await loop.with_tickets([requests[i] for i in opening])
        # The barrier waits for the first wave only; the others run on beside the waves.
        waiting = set(first)
        wave_done = trio.Event()

        def wave_call_finished(index: int) -> None:
            waiting.discard(index)
            if not waiting:
                wave_done.set()

        if not waiting:
            wave_done.set()
        async with trio.open_nursery() as nursery:
            # The first wave and the others are started as one group, in ticket order
            # (by longest-first, the narrator's ticket may come before a character's):
            # when arrival order decides an outcome, it is ticket order across both.
            await nursery.start(
                functools.partial(loop.call_all, on_finished=wave_call_finished), list(zip(opening, stamped, strict=True)), loop.gated, results
            )
            await wave_done.wait()
            for wave in waves[1:]:
                tickets = await loop.with_tickets([requests[i] for i in wave])
                await loop.call_all(zip(wave, tickets, strict=True), loop.gated, results)
        return _complete(results)


@final
@attrs.frozen
class Legacy(Policy):
    """The original system, faithfully: barriers of ``size`` and no shared gate. Every
    caller goes straight at the platform's fail-fast limiter. A rejected character call
    is retried with exponential backoff and jitter (``retries`` times), then the
    character idles; narrator and summariser rejections propagate as failures; scene
    beats come out speechless.

    With no tickets, who the platform rejects depends on who reaches it first. So that
    a run is the same every time, calls made at the same instant are started one after
    another in planning order (each started once the platform has answered it), and
    the backoff's jitter comes from the seed.
    """

    name = "legacy"
    uses_gate = False

    size: int = attrs.field(validator=attrs.validators.ge(1))
    seed: int = 0
    retries: ClassVar[int] = 2
    backoff: ClassVar[float] = 0.5

    async def run(self, loop: Firing, requests: Sequence[Request]) -> list[CallRecord]:
        results: list[CallRecord | None] = [None] * len(requests)
        waves, others = _waves(loop, requests, self.size)

        async def call(index: int) -> None:
            # Started with start_now, as in TickLoop.call_all: it runs on until it first
            # blocks - past the platform's answer, which needs no wait - before the
            # next one starts.
            request = requests[index]
            record = await loop.call(request, loop.direct)
            if request.caller in loop.players:
                record = await self._retry(loop, request, record)
            results[index] = record

        async with trio.open_nursery() as nursery:
            for wave_number, wave in enumerate(waves or [[]]):
                async with trio.open_nursery() as barrier:
                    # The other callers fire alongside the first wave.
                    for index in wave + (others if wave_number == 0 else []):
                        await start_now(barrier if index in wave else nursery, functools.partial(call, index))
        return _complete(results)

    async def _retry(self, loop: Firing, request: Request, record: CallRecord) -> CallRecord:
        for attempt in range(1, self.retries + 1):
            if record.reason != "platform_rejected":
                break
            jitter = random.Random(f"{self.seed}:{request.agent}:{request.tick}:{attempt}").uniform(0.5, 1.5)
            with trio.move_on_at(loop.deadline):
                await trio.sleep(self.backoff * 2 ** (attempt - 1) * jitter)
            retry = msgspec.structs.replace(request, attempt=attempt)
            record = await loop.call(retry, loop.direct, attempts=attempt + 1)
        return record


def make_policy(name: str, batch_size: int, seed: int) -> Policy:
    """The policy called ``name`` ("pipeline", "batch", "legacy")."""
    if name == "pipeline":
        return Pipeline()
    if name == "batch":
        return Batch(batch_size)
    if name == "legacy":
        return Legacy(batch_size, seed)
    raise ValueError(f"unknown policy {name!r}")


def _complete(results: list[CallRecord | None]) -> list[CallRecord]:
    assert None not in results, "a call left no record"  # (no generator resumed a call)
    return results  # type: ignore[return-value]
