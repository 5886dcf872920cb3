"""A line of gate tickets in lanes that take turns: how one gate serves many worlds fairly.

A gate serves its waiters in ticket order. When the worlds of a fleet share it, plain
ticket order serves them tick by tick: a world whose tick took its tickets first has
the whole tick served before the next world's, and a world with a thousand calls a tick
makes a world with fourteen wait for all thousand, every tick. So each world queues
in a lane of its own, and the lanes take turns: one ticket from the lane whose turn it
is, then that lane goes to the back. Within a lane, tickets keep their order (a tick's
longest-first plan). A lane that empties leaves the turns; it joins at the back when
it has tickets again. With one lane — a single world — this is plain ticket order.

Like the gate, the line is strict: the ticket whose turn it is goes first, and if its
caller has not arrived yet the tickets behind it wait (docs/internals.md, "Determinism").
"""

from __future__ import annotations

from collections import deque
from typing import final

__all__ = ["Lanes"]


@final
class Lanes:
    """Tickets in lanes that take turns, one ticket each."""

    __slots__ = ("_lanes", "_turns")

    def __init__(self) -> None:
        self._lanes: dict[int, deque[int]] = {}
        # Lanes with tickets, the one whose turn it is first.
        self._turns: deque[int] = deque()

    def __bool__(self) -> bool:
        return bool(self._turns)

    def append(self, ticket: int, lane: int = 0) -> None:
        """``ticket`` joins the back of ``lane``; a lane new to the line joins the turns last."""
        queue = self._lanes.get(lane)
        if queue is None:
            self._lanes[lane] = queue = deque()
            self._turns.append(lane)
        queue.append(ticket)

    def head(self) -> int:
        """The ticket whose turn it is (the line must not be empty)."""
        return self._lanes[self._turns[0]][0]

    def drop(self) -> None:
        """Forget the head, which has left the line: its lane keeps the turn."""
        queue = self._lanes[self._turns[0]]
        queue.popleft()
        if not queue:
            del self._lanes[self._turns.popleft()]

    def served(self) -> None:
        """The head was served: it leaves, and its lane goes to the back of the turns."""
        lane = self._turns.popleft()
        queue = self._lanes[lane]
        queue.popleft()
        if queue:
            self._turns.append(lane)
        else:
            del self._lanes[lane]
