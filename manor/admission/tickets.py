"""Dealing one gate's tickets to many tick loops (a fleet), the same way every run.

A tick loop takes its tick's tickets in one go (``TickLoop.with_tickets``). With one
loop on a gate that is the whole story. Several worlds on one gate start ticks at the
same (virtual) instant, and trio runs their tasks in an order of its own choosing: if
each took its tickets from the gate itself, whoever ran first would take the first
tickets, and which lane joined the gate's turns first — admission, and every figure
after it — would change from run to run (docs/internals.md, "Determinism").

So a fleet's worlds ask the ``TicketOffice`` instead. A world asks and waits; once every
task is blocked — every world that asks at this instant has asked — the office deals
them in world order, each world's tickets in its own lane of the gate (its number), where
the lanes take turns (``manor.admission.lanes``). Nothing is held back beyond the instant: a world
that asks alone gets its tickets at once (after the same scheduling pass), and its
tickets keep the order its tick planned (longest-first).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, final

import attrs
import trio

from ..clock import wait_all_tasks_blocked
from .gate import SharedGate

__all__ = ["TicketOffice", "Tickets"]


class Tickets(Protocol):
    """Where a tick loop gets its gate tickets (``TickLoop.tickets``)."""

    async def issue(self, count: int, costs: Sequence[float]) -> list[int]:
        """``count`` tickets of the loop's gate, in the order the gate admits them,
        costing ``costs`` (each call's predicted seconds in its slot)."""
        ...


@attrs.define(eq=False)
class _Ask:
    world: int
    count: int
    costs: Sequence[float]
    tickets: list[int] = attrs.field(factory=list)
    dealt: trio.Event = attrs.field(factory=trio.Event)


@final
@attrs.define(eq=False)
class TicketOffice:
    """Deals ``gate``'s tickets to the worlds of a fleet: at each instant, in world
    order, each world's in its own lane.

    Run ``run`` in a task beside the worlds for as long as they run; give world ``i``
    ``counter(i)`` as its ``Tickets``.

    Args:
        gate: the gate every world shares.
    """

    gate: SharedGate
    _asks: list[_Ask] = attrs.field(factory=list, init=False)
    _asked: trio.Event = attrs.field(factory=trio.Event, init=False)

    def counter(self, world: int) -> Tickets:
        """The tickets of world number ``world`` (its lane at the gate)."""
        return _Counter(self, world)

    async def issue(self, world: int, count: int, costs: Sequence[float] | None = None) -> list[int]:
        """``count`` tickets for ``world``, costing ``costs`` (default 1 each), dealt
        with those of every world that asks at this instant. Cancelled before the deal,
        the ask is withdrawn."""
        ask = _Ask(world, count, [1.0] * count if costs is None else costs)
        self._asks.append(ask)
        self._asked.set()
        try:
            await ask.dealt.wait()
        except BaseException:
            if ask.dealt.is_set():  # dealt, but never to be used: free the line behind them
                for ticket in ask.tickets:
                    self.gate.withdraw(ticket)
            else:
                self._asks.remove(ask)
            raise
        return ask.tickets

    async def run(self) -> None:
        """Deal the tickets asked for, instant by instant, until cancelled."""
        while True:
            if not self._asks:
                self._asked = trio.Event()
                await self._asked.wait()
            # Every task blocked: every world that asks at this instant has asked (and
            # under the virtual clock, no time passes before this task runs).
            await wait_all_tasks_blocked()
            self._deal()

    def _deal(self) -> None:
        asks = sorted(self._asks, key=lambda ask: ask.world)
        self._asks.clear()
        for ask in asks:
            ask.tickets = list(self.gate.issue(ask.count, lane=ask.world, costs=ask.costs))
            ask.dealt.set()


@final
@attrs.frozen
class _Counter:
    """One world's window at the office."""

    office: TicketOffice
    world: int

    async def issue(self, count: int, costs: Sequence[float]) -> list[int]:
        return await self.office.issue(self.world, count, costs)
