"""An in-process gate that can be lost and found again, as a shared gate whose Redis
goes away: while lost, every caller that comes to it degrades as ``gate_unavailable``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import trio

from manor.admission.gate import Gate, SharedPermit
from manor.errors import GateUnavailable
from manor.records import StoryEntry, TickRecord
from manor.tick.instruments import Instrument

__all__ = ["LOST", "LosableGate", "LoseGate"]

#: What a caller hears while the gate is lost.
LOST = "gate redis://127.0.0.1:6379/0 (gate manor): Redis unreachable: Connection refused"


class LosableGate:
    """``Gate`` of ``size``, but lost from ``lost_from`` until ``found_at`` (trio time):
    meanwhile it is not ``available`` and ``acquire`` raises ``GateUnavailable`` (the
    ticket is left to the caller's withdraw, as the tick loop does)."""

    def __init__(self, size: int) -> None:
        self.gate = Gate(size=size)
        self.lost_from = self.found_at = math.inf

    def lose(self, *, for_s: float = math.inf) -> None:
        """Lost from now, for ``for_s`` seconds."""
        self.lost_from = trio.current_time()
        self.found_at = self.lost_from + for_s

    def __getattr__(self, name: str) -> Any:
        return getattr(self.gate, name)

    @property
    def available(self) -> bool:
        return not self.lost_from <= trio.current_time() < self.found_at

    async def acquire(self, ticket: int | None = None, *, timeout: float = math.inf) -> SharedPermit:
        if not self.available:
            raise GateUnavailable(LOST)
        return await self.gate.acquire(ticket, timeout=timeout)


class LoseGate(Instrument):
    """Loses ``gate`` as tick ``at`` ends, for ``for_s`` seconds; notes when each tick
    starts and each wait for the gate the loop begins."""

    def __init__(self, gate: LosableGate, at: int, for_s: float) -> None:
        self.gate, self.at, self.for_s = gate, at, for_s
        self.started: list[float] = []
        self.waits: list[tuple[float, str, float]] = []

    def tick_started(self, tick: int, requests: Sequence[object]) -> None:
        self.started.append(trio.current_time())

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        if record.tick == self.at:
            self.gate.lose(for_s=self.for_s)

    def gate_lost(self, message: str, limit_s: float) -> None:
        self.waits.append((trio.current_time(), message, limit_s))
