"""A line of gate tickets in lanes that share the gate fairly, by the time they hold it.

A gate serves its waiters in ticket order. When several tenants share it (the worlds of
a fleet), plain ticket order serves them tick by tick: a world whose tick took its
tickets first has the whole tick served before the next world's, and a world with a
thousand calls a tick makes a world with fourteen wait for all thousand, every tick.
Taking turns one ticket each is no better when calls differ in length: a turn of 20 s
counts the same as one of 0.5 s, and the world of long calls holds the platform.

So each tenant queues in a lane of its own, and the lanes are served by *start-time fair
queuing* (Goyal, Vin and Cheng, 1996), counted in the resource a call holds: session-
seconds. Each ticket comes with its cost, the seconds it is expected to hold its slot
(the tick loop's predicted latency). A lane has a virtual finish time; its head ticket
starts at ``max(virtual time, the lane's finish)`` and, when served, moves the lane's
finish on by ``cost / weight``. The next ticket served is the head with the earliest
start (ties: the lower lane number), and the line's virtual time is the start of the
last ticket served (as of the last ``mark``, for lanes that join). So backlogged lanes get slot-time in proportion to
their weights; a lane that was idle rejoins at the virtual time, with no credit saved
up; a lane alone gets every ticket (work-conserving). When a call ends, what it really
held is known: ``correct`` moves its lane's finish by the difference (as Kubernetes'
API Priority and Fairness does with seat-seconds).

Within a lane tickets keep their order (a tick's longest-first plan). With one lane —
a single world — this is plain ticket order. With equal costs and weights the lanes
take turns one ticket each.

Like the gate, the line is strict: the ticket whose turn it is goes first, and if its
caller has not arrived yet the tickets behind it wait (docs/internals.md, "Determinism"). Lanes
the gate says are at their cap (``max_sessions``) are passed over until a call of theirs
ends.

A line that has only ever had one lane (a single world's gate, ``manor run``) keeps no
heap: its one lane is the head's. The heap is built from the lanes with tickets the
moment a second lane joins (or a lane set aside), and the order is the same as if it
had been kept all along: only a lane's one live entry counts. An indexed line keeps no
heap either: its index (``manor.admission.lane_index``) has every lane with tickets in
the heap's order, by start and lane, and its first lane is the head's.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Container, Sequence
from typing import final

from .lane_index import LaneIndex, Place, place

__all__ = ["Lanes"]

# Stale heap entries allowed beyond the lanes with tickets before they are left out
# (``Lanes._compact``): a line of a few lanes is never compacted.
_SLACK = 64


@final
class _Lane:
    """A lane with tickets: its queue of ``(ticket, cost)``, its head's start tag."""

    __slots__ = ("entry", "live", "queue", "start")

    def __init__(self, start: float) -> None:
        self.queue: deque[tuple[int, float]] = deque()
        # Its tickets not yet served nor forgotten (``Lanes.forget``).
        self.live = 0
        self.start = start
        # The number of its one live entry in the heap: the lane's older ones are stale.
        self.entry = 0


@final
class Lanes:
    """Tickets in lanes, served by start-time fair queuing on each ticket's cost."""

    __slots__ = (
        "_active", "_aside", "_base", "_chosen", "_entries", "_finish", "_frontier", "_heap", "_index", "_now", "_one", "_shared", "_weights",
    )  # fmt: skip

    def __init__(self) -> None:
        # Lanes with tickets.
        self._active: dict[int, _Lane] = {}
        # (start, lane, entry number, lane) of every lane with tickets, the lane's number
        # breaking ties; stale entries are skipped as they come to the top. Empty once
        # the line is indexed: the index orders the lanes.
        self._heap: list[tuple[float, int, int, int]] = []
        self._entries = 0
        # Every lane ever seen: its virtual finish, and its weight if not 1.
        self._finish: dict[int, float] = {}
        self._weights: dict[int, float] = {}
        self._now = 0.0
        # The virtual time lanes join at: ``_now`` as of the last ``mark``.
        self._base = 0.0
        # The lane whose head ``head`` returned, which ``drop`` and ``served`` act on.
        self._chosen: int | None = None
        # Lanes passed over until ``restore`` (``set_aside``; without an index, their
        # heap entries stale until then), and the place of the last
        # (``manor.admission.lane_index``): with an index, every lane up to it in turn
        # order is passed over.
        self._aside: list[int] = []
        self._frontier: Place | None = None
        # The lanes by turn and by slots held (``index``), once asked for.
        self._index: LaneIndex | None = None
        # Until a second lane joins (``_share``): the one lane that has had tickets, and
        # no heap.
        self._one: int | None = None
        self._shared = False

    def __bool__(self) -> bool:
        return bool(self._active)

    def weigh(self, lane: int, weight: float) -> None:
        """Give ``lane`` a share of ``weight`` (default 1) against the others.

        Raises:
            ValueError: ``weight`` is not a positive, finite number.
        """
        if not 0 < weight < float("inf"):
            raise ValueError(f"a lane's weight must be a positive number, not {weight}")
        self._weights[lane] = weight
        if self._index is not None:
            self._index.weigh(lane, weight)

    def weight(self, lane: int) -> float:
        return self._weights.get(lane, 1.0)

    def __contains__(self, lane: object) -> bool:
        """Whether ``lane`` has tickets in the line."""
        return lane in self._active

    def append(self, ticket: int, lane: int = 0, cost: float = 1.0) -> None:
        """``ticket`` joins the back of ``lane``, expected to hold its slot ``cost``
        seconds; a lane new to the line starts at the virtual time (or its own finish,
        if that is later: what it had beyond its share is not forgotten)."""
        self.extend(((ticket, cost),), lane)

    def extend(self, tickets: Sequence[tuple[int, float]], lane: int = 0) -> None:
        """``tickets`` (``(ticket, cost)``, in their order) join the back of ``lane``,
        as ``append`` each would: one call for a tick's tickets, not one a ticket."""
        if not tickets:
            return
        queue = self._active.get(lane)
        if queue is None:
            if not self._shared:
                if self._one is None:
                    self._one = lane
                elif lane != self._one:
                    self._share()
            start = max(self._base, self._finish.get(lane, self._base))
            self._active[lane] = queue = _Lane(start)
            if self._index is not None:
                self._index.put(lane, start)
            elif self._shared:
                self._push(lane, queue)
        queue.queue.extend(tickets)
        queue.live += len(tickets)

    def mark(self) -> None:
        """Lanes that join from now on join at the virtual time as it is now.

        Call it where the order of what happens is the same every run (the gate does
        when it issues tickets): a lane that joins later at the same instant — when a
        token lets its ticket into the slots' line — must not join at a virtual time
        moved by whichever tickets trio happened to admit before it.
        """
        self._base = self._now

    def forget(self, lane: int) -> None:
        """One of ``lane``'s tickets has left the line unserved (withdrawn, given up).
        When it was the lane's last, the lane leaves the line at once, with the tickets
        it still lists: whether it rejoins at the virtual time must not depend on
        whether its dead tickets were met at the head before (``drop``)."""
        queue = self._active.get(lane)
        if queue is not None:
            queue.live -= 1
            if queue.live <= 0:
                del self._active[lane]  # its heap entry is stale from now on
                if self._index is not None:
                    self._index.remove(lane)
            elif self._index is not None:
                self._index.suspect(lane)

    def correct(self, lane: int, seconds: float) -> None:
        """``lane``'s calls held their slots ``seconds`` longer than their costs said
        (negative: shorter): its virtual finish, and its head's start, move by
        ``seconds / weight``."""
        if not seconds:
            return
        shift = seconds / self._weights.get(lane, 1.0)
        self._finish[lane] = self._finish.get(lane, self._now) + shift
        queue = self._active.get(lane)
        if queue is not None:
            queue.start += shift
            if self._index is not None:
                self._index.move(lane, queue.start)
            elif self._shared:
                self._push(lane, queue)

    def head(self, capped: Container[int] = ()) -> int | None:
        """The ticket whose turn it is, passing over the lanes in ``capped``; ``None``
        when the line is empty or every lane with tickets is capped."""
        heap, active = self._heap, self._active
        if not self._shared:  # one lane: its head is the line's
            lane = self._one
            queue = None if lane is None or lane in capped else active.get(lane)
            self._chosen = None if queue is None else lane
            return None if queue is None else queue.queue[0][0]
        if self._index is not None:  # the first lane in turn, or after those set aside
            lane = self._chosen = self._index.after(self._frontier, capped)
            return None if lane is None else active[lane].queue[0][0]
        passed = []
        self._chosen = None
        while heap:
            _, _, entry, lane = heap[0]
            queue = active.get(lane)
            if queue is None or queue.entry != entry:
                heapq.heappop(heap)
            elif lane in capped:
                passed.append(heapq.heappop(heap))
            else:
                self._chosen = lane
                break
        for entry in passed:
            heapq.heappush(heap, entry)
        return None if self._chosen is None else active[self._chosen].queue[0][0]

    def next_ready(self, limit: Callable[[float], float], now: float, capped: Container[int] = ()) -> int | None:
        """As ``head``, after a lane set aside (``set_aside``) and with an index: the
        ticket of the first lane that is below its share (holds fewer slots than
        ``limit(its weight)``) or whose head is not known to be ready at ``now``; the
        lanes before it are set aside with the others. ``None`` when there is none."""
        index, frontier = self._index, self._frontier
        assert frontier is not None and index is not None
        lane = self._chosen = index.first_stop(frontier, limit, now, capped)
        # The lanes passed over are aside as those set aside: the frontier moves past them.
        passed = index.last() if lane is None else index.before(lane)
        if passed is not None and passed > frontier:
            self._frontier = passed
        return None if lane is None else self._active[lane].queue[0][0]

    def drop(self) -> int:
        """Forget the head, which has left the line unserved: its lane keeps its start.
        Returns its lane."""
        lane = self._take()
        queue = self._active[lane]
        queue.queue.popleft()
        if not queue.queue:
            del self._active[lane]  # its heap entry is stale from now on
            if self._index is not None:
                self._index.remove(lane)
        elif self._index is not None:
            self._index.suspect(lane)
        return lane

    def served(self) -> None:
        """The head was served: the lane's finish moves on by its cost over its weight,
        and the lane's next ticket starts there."""
        # The lane ``head`` chose, as ``_take`` would give it, without its call when
        # there is one (the usual case: this runs for every admission).
        lane = self._chosen
        if lane is None:
            lane = self._take()
        self._chosen = None
        queue = self._active[lane]
        _, cost = queue.queue.popleft()
        queue.live -= 1
        start = queue.start
        if start > self._now:
            self._now = start
        finish = self._finish[lane] = start + cost / self._weights.get(lane, 1.0)
        if queue.queue:
            queue.start = finish
            if self._index is not None:
                self._index.put(lane, finish)
                return
            if not self._shared:
                return
            heap = self._heap
            if heap and heap[0][2] == queue.entry:
                # Its live entry on top, as ``head`` left it: replaced there rather than
                # left stale for the next ``head`` to pop (the same order either way).
                self._entries += 1
                queue.entry = self._entries
                heapq.heapreplace(heap, (finish, lane, self._entries, lane))
            else:
                self._push(lane, queue)
        else:
            del self._active[lane]
            if self._index is not None:
                self._index.remove(lane)

    def set_aside(self) -> None:
        """Pass over the lane of the head ``head`` last returned until ``restore``: a
        gate that holds a lane back for the rest of a dispatch looks past it once, not
        at every ``head``.

        With an index (and no heap), ``head`` asks the index for the lane after the
        last set aside until ``restore``: nothing to take out and push back, where the
        heap's cost a push and a stale pop per lane set aside, at a depth that grows
        with the lanes (some three a call in a fleet)."""
        lane = self._take()
        self._share()
        queue = self._active[lane]
        if self._index is None:
            self._entries += 1
            queue.entry = self._entries  # its heap entry is stale until restored
            self._aside.append(lane)
            # Should the line be indexed before ``restore``, the lanes up to it are passed over.
            self._frontier = place(queue.start, lane)
        else:
            self._frontier = self._index.place(lane)

    def restore(self) -> None:
        """The lanes set aside take their places in the line again."""
        if self._index is None:
            for lane in self._aside:
                queue = self._active.get(lane)
                if queue is not None:
                    self._push(lane, queue)
        self._aside.clear()
        self._frontier = None

    def _take(self) -> int:
        """The lane of the head ``head`` last returned (without a call since, the line's
        head with no lane passed over), which the caller now changes."""
        lane = self._chosen
        if lane is None:
            self.head()
            lane = self._chosen
        assert lane is not None, "the line is empty"
        self._chosen = None
        return lane

    def _share(self) -> None:
        """From now on the heap orders the lanes: each lane with tickets put in it."""
        if not self._shared:
            self._shared = True
            for lane, queue in self._active.items():
                self._push(lane, queue)

    def _push(self, lane: int, queue: _Lane) -> None:
        """Put ``lane`` in the heap at its start; its older entries go stale."""
        self._entries += 1
        queue.entry = self._entries
        heap = self._heap
        heapq.heappush(heap, (queue.start, lane, self._entries, lane))
        if len(heap) > 2 * len(self._active) + _SLACK:
            self._compact()

    def _compact(self) -> None:
        """Leave out the heap's stale entries. They leave only as they come to the top,
        and a lane held back for long (over its share, by the claims) or moved back by
        ``correct`` leaves stale entries below a top that does not reach them: a fleet
        of 256 worlds had some 2,800 entries for 190 lanes with tickets, every push and
        pop walking the taller heap. A lane's one live entry stays, so the order is the
        same; done when the stale are as many as the lanes again, its cost is a push's."""
        active = self._active
        self._heap = heap = [entry for entry in self._heap if (queue := active.get(entry[3])) is not None and queue.entry == entry[2]]
        heapq.heapify(heap)

    # -- the index (``manor.admission.lane_index``) ---------------------------------------

    def index(self, holdings: dict[int, int]) -> None:
        """Keep the lanes indexed by turn and by slots held from now on (each lane's
        ``holdings`` as now; then as ``hold`` says), for ``next_ready``; the index
        orders the lanes from now on, not the heap.

        The heap's order and the index's are one (by start, then lane), so the heap,
        which every admission pushed a lane's new start in and every ``head`` popped
        stale entries from, some ten tuple comparisons a step at 256 lanes, is dropped."""
        if self._index is None:
            self._shared = True
            self._heap = []
            self._index = index = LaneIndex(self._weights, holdings)
            for lane, queue in self._active.items():
                index.put(lane, queue.start)

    @property
    def indexed(self) -> bool:
        return self._index is not None

    def hold(self, lane: int, holding: int) -> None:
        """``lane`` holds ``holding`` slots now."""
        if self._index is not None:
            self._index.hold(lane, holding)

    def suspect(self, lane: int) -> None:
        """``lane``'s head may have stopped being ready (it parks in a task)."""
        if self._index is not None:
            self._index.suspect(lane)

    def clear(self, lane: int, until: float) -> None:
        """``lane``'s head is ready, until it changes or the instant ``until``."""
        if self._index is not None:
            self._index.clear(lane, until)
