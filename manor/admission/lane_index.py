"""The lanes of a fair line in turn order, indexed by the slots each holds.

A gate with claims (``manor.admission.claims``) that holds a lane back over its share
holds back alike every lane over its share behind it whose head is ready (arrived,
waiting for a slot, not cancelled, not timing out): the same claims keep them out. Only
a lane below its share, or one whose head is not known to be ready, can change what the
dispatch does. Walking to that lane one lane at a time costs a dispatch as many steps as
there are lanes over their shares before it (some 45 in a fleet of 256 worlds).

So the in-process gate's line keeps its lanes here as well: every lane with tickets by
its turn (its head's start tag and number, the fair queue's order); those whose head has
not been seen ready since it last changed (*suspects*); and the others by weight and
slots held (a suspect is a stop whatever it holds, so it is in no bucket, and what it
holds changes no list). Each list is sorted by the lanes' *places* (a turn as one
integer, ``place``). ``after`` is the next lane in turn after a given place; ``first_stop`` the
first lane after it that is below its share or a suspect. Each answer costs a binary
search per (weight, holding) pair present, whatever the number of lanes.

A lane is a suspect from the moment its head changes (served, dropped, a lane new to
the line, a ticket of its forgotten) or its head parks in a task (which a cancellation
can abort) until the gate sees its head ready (``clear``), and again from its head's
deadline on.
"""

from __future__ import annotations

import heapq
import struct
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Container
from typing import final

__all__ = ["LaneIndex", "Place", "place"]

#: A lane's place in the fair queue: its head's start tag, then its number, as one
#: integer that sorts as the pair does (``place``).
Place = int

_LANE_BITS = 64
_LANE_OFFSET = 1 << (_LANE_BITS - 1)
_LANE_MASK = (1 << _LANE_BITS) - 1
_SIGN = 1 << 63
_float_bytes = struct.Struct("<d").pack


def place(start: float, lane: int) -> Place:
    """The place of a head starting at ``start`` in ``lane``: ``(start, lane)`` as one
    integer, in the same order as the pairs.

    The index's sorted lists hold these, not the pairs: a bisection compares two
    integers, where comparing two pairs compares their floats for equality, then for
    order, some three times the instructions; at 256 lanes with tickets, some nine
    comparisons a bisection and eleven bisections an admission
    (benchmarks/notes/fleet_cpu.md). Its lane, offset to be non-negative, fills the
    low 64 bits (``_low``); its start the bits above (``_high``).

    Raises:
        ValueError: ``lane`` does not fit in 64 bits.
    """
    return _high(start) + _low(lane)


def _high(start: float) -> int:
    """``start``'s part of a place. A float's bits, read as an unsigned integer, sort as
    the floats for those ≥ 0 (below the sign bit) and in reverse for the negative (the
    sign bit and their magnitude), so a negative one's are turned into minus its
    magnitude: -0.0 then reads 0, as 0.0 does (equal floats, one place)."""
    bits = int.from_bytes(_float_bytes(start), "little")
    if bits >= _SIGN:
        bits = _SIGN - bits
    return bits << _LANE_BITS


def _low(lane: int) -> int:
    """``lane``'s part of a place.

    Raises:
        ValueError: ``lane`` does not fit in 64 bits.
    """
    if not -_LANE_OFFSET <= lane < _LANE_OFFSET:
        raise ValueError(f"a lane's number must fit in 64 bits, not {lane}")
    return lane + _LANE_OFFSET


def _lane(at: Place) -> int:
    """The lane of a place."""
    return (at & _LANE_MASK) - _LANE_OFFSET


@final
class _Entry:
    """A lane with tickets: its head's start and place, weight, slots held, and whether
    it is a suspect."""

    __slots__ = ("at", "holding", "low", "queued", "start", "suspect", "until", "weight")

    def __init__(self, start: float, lane: int, weight: float, holding: int) -> None:
        self.start = start
        self.low = _low(lane)
        self.at = _high(start) + self.low
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
        # Places of every lane with tickets, sorted; and per weight, per holding; and of
        # the suspects.
        self._order: list[Place] = []
        self._groups: dict[float, dict[int, list[Place]]] = {}
        self._suspects: list[Place] = []
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
            entry = self._entries[lane] = _Entry(start, lane, self._weights.get(lane, 1.0), self._holdings.get(lane, 0))
            insort(self._order, entry.at)
        elif entry.suspect:
            self._move(entry, start)
            return
        else:
            # Out of its bucket, into the suspects at its new place: ``suspect`` then
            # ``_move`` in one, where the two in turn would put it in the suspects and
            # take it out again (a bisection each, at every admission in a fleet).
            _discard(self._bucket(entry), entry.at)
            if entry.start != start:
                _discard(self._order, entry.at)
                entry.start, entry.at = start, _high(start) + entry.low
                insort(self._order, entry.at)
        entry.suspect = True
        entry.until = float("inf")
        insort(self._suspects, entry.at)

    def move(self, lane: int, start: float) -> None:
        """``lane``'s head (the same ticket) starts at ``start`` now."""
        entry = self._entries.get(lane)
        if entry is not None:
            self._move(entry, start)

    def remove(self, lane: int) -> None:
        """``lane`` has no tickets left."""
        entry = self._entries.pop(lane, None)
        if entry is not None:
            _discard(self._order, entry.at)
            _discard(self._suspects if entry.suspect else self._bucket(entry), entry.at)

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
        """``entry`` weighs ``weight`` and holds ``holding`` now: a suspect's is noted
        (it is in no bucket), another's moves to the bucket of its new weight and holding."""
        if entry.suspect:
            entry.weight, entry.holding = weight, holding
            return
        _discard(self._bucket(entry), entry.at)
        entry.weight, entry.holding = weight, holding
        insort(self._bucket(entry), entry.at)

    def suspect(self, lane: int) -> None:
        """``lane``'s head may not be ready: a dispatch must look at it."""
        entry = self._entries.get(lane)
        if entry is not None and not entry.suspect:
            _discard(self._bucket(entry), entry.at)
            entry.suspect = True
            entry.until = float("inf")
            insort(self._suspects, entry.at)

    def clear(self, lane: int, until: float) -> None:
        """``lane``'s head was seen ready, and stays so (as far as the index needs to
        know) until it changes, parks in a task, or the instant ``until`` comes."""
        entry = self._entries.get(lane)
        if entry is not None and entry.suspect:
            entry.suspect = False
            _discard(self._suspects, entry.at)
            insort(self._bucket(entry), entry.at)
            entry.until = until
            if until != float("inf") and entry.queued != until:  # the same head cleared again
                entry.queued = until
                heapq.heappush(self._until, (until, lane))
                if len(self._until) > 2 * len(self._entries) + 16:
                    self._until = [(at, lane) for at, lane in self._until if self._deadline(lane) == at]
                    heapq.heapify(self._until)

    # -- what a dispatch asks -----------------------------------------------------------

    def place(self, lane: int) -> Place:
        """``lane``'s place (it has tickets)."""
        return self._entries[lane].at

    def after(self, at: Place | None, capped: Container[int] = ()) -> int | None:
        """The first lane after ``at`` in turn order (``None``: the first), passing over
        ``capped``."""
        found = _first_after(self._order, at, capped)
        return None if found is None else _lane(found)

    def first_stop(self, at: Place, limit: Callable[[float], float], now: float, capped: Container[int] = ()) -> int | None:
        """The first lane after ``at`` in turn order, passing over ``capped``, that is
        a suspect (at ``now``) or holds fewer slots than ``limit(its weight)``."""
        until = self._until
        while until and until[0][0] <= now:
            at, lane = heapq.heappop(until)
            if self._deadline(lane) == at:
                self.suspect(lane)
            entry = self._entries.get(lane)
            if entry is not None and entry.queued == at:
                entry.queued = float("inf")
        best = _first_after(self._suspects, at, capped)
        for weight, holdings in self._groups.items():
            below = limit(weight)
            for holding, places in holdings.items():
                if holding < below and places:
                    found = _first_after(places, at, capped)
                    if found is not None and (best is None or found < best):
                        best = found
        return None if best is None else _lane(best)

    def before(self, lane: int) -> Place | None:
        """The place just before ``lane``'s in turn order (``None``: it is first)."""
        order = self._order
        index = bisect_left(order, self._entries[lane].at)
        return order[index - 1] if index else None

    def last(self) -> Place | None:
        """The last place in turn order (``None``: no lane has tickets)."""
        return self._order[-1] if self._order else None

    # -- internals ----------------------------------------------------------------------

    def _deadline(self, lane: int) -> float | None:
        entry = self._entries.get(lane)
        return None if entry is None or entry.suspect else entry.until

    def _bucket(self, entry: _Entry) -> list[Place]:
        holdings = self._groups.get(entry.weight)
        if holdings is None:
            holdings = self._groups[entry.weight] = {}
        places = holdings.get(entry.holding)
        if places is None:
            places = holdings[entry.holding] = []
        return places

    def _move(self, entry: _Entry, start: float) -> None:
        """``entry``'s head starts at ``start``: a new place, in the order and in the
        suspects or its bucket (whichever it is in)."""
        if entry.start == start:  # equal floats have one place
            return
        own = self._suspects if entry.suspect else self._bucket(entry)
        _discard(self._order, entry.at)
        _discard(own, entry.at)
        entry.start, entry.at = start, _high(start) + entry.low
        insort(self._order, entry.at)
        insort(own, entry.at)


def _discard(places: list[Place], at: Place) -> None:
    del places[bisect_left(places, at)]


def _first_after(places: list[Place], at: Place | None, capped: Container[int]) -> Place | None:
    """The first of ``places`` after ``at`` (``None``: the first) whose lane is not in
    ``capped``."""
    index = 0 if at is None else bisect_right(places, at)
    if not capped:  # the usual case: no lane at its cap, no lane to read
        return places[index] if index < len(places) else None
    while index < len(places):
        if _lane(places[index]) not in capped:
            return places[index]
        index += 1
    return None
