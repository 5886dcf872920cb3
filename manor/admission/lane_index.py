"""The lanes of a fair line in turn order, indexed by the slots each holds.

A gate with claims (``manor.admission.claims``) that holds a lane back over its share
holds back alike every lane over its share behind it whose head is ready (arrived,
waiting for a slot, not cancelled, not timing out): the same claims keep them out. Only
a lane below its share, or one whose head is not known to be ready, can change what the
dispatch does. Walking to that lane one lane at a time costs a dispatch as many steps as
there are lanes over their shares before it (some 45 in a fleet of 256 worlds).

So the in-process gate's line keeps its lanes here as well: every lane with tickets by
its turn (its head's start tag and number, the fair queue's order), and the same lanes
by weight and slots held, and those whose head has not been seen ready since it last
changed (*suspects*). ``after`` is the next lane in turn after a given turn;
``first_stop`` the first lane after it that is below its share or a suspect. Each
answer costs a binary search per (weight, holding) pair present, whatever the number of
lanes.

A lane is a suspect from the moment its head changes (served, dropped, a lane new to
the line, a ticket of its forgotten) or its head parks in a task (which a cancellation
can abort) until the gate sees its head ready (``clear``), and again from its head's
deadline on.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Container
from typing import final

__all__ = ["LaneIndex", "Turn"]

#: A lane's place in the fair queue: its head's start tag, then its number.
Turn = tuple[float, int]


@final
class _Entry:
    """A lane with tickets: its turn, weight, slots held, and whether it is a suspect."""

    __slots__ = ("holding", "queued", "suspect", "turn", "until", "weight")

    def __init__(self, turn: Turn, weight: float, holding: int) -> None:
        self.turn = turn
        self.weight = weight
        self.holding = holding
        self.suspect = False
        # Cleared with a head whose deadline is this instant: a suspect again from then.
        self.until = float("inf")
        # The deadline of its newest entry in ``LaneIndex._until`` (inf: none).
        self.queued = float("inf")


@final
class LaneIndex:
    """Lanes with tickets in turn order, by weight and holding, and the suspects."""

    __slots__ = ("_entries", "_groups", "_holdings", "_order", "_suspects", "_until", "_weights")

    def __init__(self, weights: dict[int, float], holdings: dict[int, int]) -> None:
        # Every lane's weight if not 1 and slots held (also of lanes without tickets).
        self._weights = dict(weights)
        self._holdings = {lane: holding for lane, holding in holdings.items() if holding}
        self._entries: dict[int, _Entry] = {}
        # Turns of every lane with tickets, sorted; and per weight, per holding.
        self._order: list[Turn] = []
        self._groups: dict[float, dict[int, list[Turn]]] = {}
        self._suspects: list[Turn] = []
        # (deadline, lane) of lanes cleared with a head that has a deadline; stale
        # entries (the lane's ``until`` changed) are skipped.
        self._until: list[tuple[float, int]] = []

    def __len__(self) -> int:
        return len(self._entries)

    # -- what the line tells it ---------------------------------------------------------

    def put(self, lane: int, start: float) -> None:
        """``lane`` has tickets, its head starting at ``start``: a new head, a suspect."""
        entry = self._entries.get(lane)
        if entry is None:
            entry = self._entries[lane] = _Entry((start, lane), self._weights.get(lane, 1.0), self._holdings.get(lane, 0))
            insort(self._order, entry.turn)
            insort(self._bucket(entry), entry.turn)
        else:
            self._move(entry, (start, lane))
        self.suspect(lane)

    def move(self, lane: int, start: float) -> None:
        """``lane``'s head (the same ticket) starts at ``start`` now."""
        entry = self._entries.get(lane)
        if entry is not None:
            self._move(entry, (start, lane))

    def remove(self, lane: int) -> None:
        """``lane`` has no tickets left."""
        entry = self._entries.pop(lane, None)
        if entry is not None:
            _discard(self._order, entry.turn)
            _discard(self._bucket(entry), entry.turn)
            if entry.suspect:
                _discard(self._suspects, entry.turn)

    def weigh(self, lane: int, weight: float) -> None:
        self._weights[lane] = weight
        entry = self._entries.get(lane)
        if entry is not None and entry.weight != weight:
            self._rebucket(entry, weight, entry.holding)

    def hold(self, lane: int, holding: int) -> None:
        """``lane`` holds ``holding`` slots now."""
        self._holdings[lane] = holding
        entry = self._entries.get(lane)
        if entry is not None and entry.holding != holding:
            self._rebucket(entry, entry.weight, holding)

    def _rebucket(self, entry: _Entry, weight: float, holding: int) -> None:
        """Move ``entry`` to the bucket of its new weight and holding."""
        _discard(self._bucket(entry), entry.turn)
        entry.weight, entry.holding = weight, holding
        insort(self._bucket(entry), entry.turn)

    def suspect(self, lane: int) -> None:
        """``lane``'s head may not be ready: a dispatch must look at it."""
        entry = self._entries.get(lane)
        if entry is not None and not entry.suspect:
            entry.suspect = True
            entry.until = float("inf")
            insort(self._suspects, entry.turn)

    def clear(self, lane: int, until: float) -> None:
        """``lane``'s head was seen ready, and stays so (as far as the index needs to
        know) until it changes, parks in a task, or the instant ``until`` comes."""
        entry = self._entries.get(lane)
        if entry is not None and entry.suspect:
            entry.suspect = False
            _discard(self._suspects, entry.turn)
            entry.until = until
            if until != float("inf") and entry.queued != until:  # the same head cleared again
                entry.queued = until
                heapq.heappush(self._until, (until, lane))
                if len(self._until) > 2 * len(self._entries) + 16:
                    self._until = [(at, lane) for at, lane in self._until if self._deadline(lane) == at]
                    heapq.heapify(self._until)

    # -- what a dispatch asks -----------------------------------------------------------

    def after(self, turn: Turn, capped: Container[int] = ()) -> int | None:
        """The first lane after ``turn`` in turn order, passing over ``capped``."""
        order = self._order
        index = bisect_right(order, turn)
        while index < len(order):
            lane = order[index][1]
            if lane not in capped:
                return lane
            index += 1
        return None

    def first_stop(self, turn: Turn, limit: Callable[[float], float], now: float, capped: Container[int] = ()) -> int | None:
        """The first lane after ``turn`` in turn order, passing over ``capped``, that is
        a suspect (at ``now``) or holds fewer slots than ``limit(its weight)``."""
        until = self._until
        while until and until[0][0] <= now:
            at, lane = heapq.heappop(until)
            if self._deadline(lane) == at:
                self.suspect(lane)
            entry = self._entries.get(lane)
            if entry is not None and entry.queued == at:
                entry.queued = float("inf")
        best = _first_after(self._suspects, turn, capped)
        for weight, holdings in self._groups.items():
            below = limit(weight)
            for holding, turns in holdings.items():
                if holding < below and turns:
                    found = _first_after(turns, turn, capped)
                    if found is not None and (best is None or found < best):
                        best = found
        return None if best is None else best[1]

    def before(self, lane: int) -> Turn | None:
        """The turn just before ``lane``'s in turn order (``None``: it is first)."""
        order = self._order
        index = bisect_left(order, self._entries[lane].turn)
        return order[index - 1] if index else None

    def last(self) -> Turn | None:
        """The last turn in turn order (``None``: no lane has tickets)."""
        return self._order[-1] if self._order else None

    # -- internals ----------------------------------------------------------------------

    def _deadline(self, lane: int) -> float | None:
        entry = self._entries.get(lane)
        return None if entry is None or entry.suspect else entry.until

    def _bucket(self, entry: _Entry) -> list[Turn]:
        holdings = self._groups.get(entry.weight)
        if holdings is None:
            holdings = self._groups[entry.weight] = {}
        turns = holdings.get(entry.holding)
        if turns is None:
            turns = holdings[entry.holding] = []
        return turns

    def _move(self, entry: _Entry, turn: Turn) -> None:
        if entry.turn == turn:
            return
        _discard(self._order, entry.turn)
        _discard(self._bucket(entry), entry.turn)
        if entry.suspect:
            _discard(self._suspects, entry.turn)
        entry.turn = turn
        insort(self._order, turn)
        insort(self._bucket(entry), turn)
        if entry.suspect:
            insort(self._suspects, turn)


def _discard(turns: list[Turn], turn: Turn) -> None:
    del turns[bisect_left(turns, turn)]


def _first_after(turns: list[Turn], turn: Turn, capped: Container[int]) -> Turn | None:
    index = bisect_right(turns, turn)
    while index < len(turns):
        if turns[index][1] not in capped:
            return turns[index]
        index += 1
    return None
