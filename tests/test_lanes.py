"""A gate shared by lanes (the worlds of a fleet): lanes take turns, one ticket each,
ticket order within a lane; and the ticket office that deals each instant's tickets
the same way every run. Under ``autojump_clock``, times are exact."""

from __future__ import annotations

import math

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from manor import Gate, GateTimeout
from manor.admission import lanes as lanes_module
from manor.admission.lanes import Lanes
from manor.admission.tickets import TicketOffice

Record = list[tuple[str, float]]


async def _call(gate: Gate, name: str, ticket: int, record: Record, *, at: float = 0.0, latency: float = 1.0, timeout: float = math.inf) -> None:
    await trio.sleep_until(at)
    try:
        permit = await gate.acquire(ticket, timeout=timeout)
    except GateTimeout:
        record.append((f"{name} timed out", trio.current_time()))
        return
    record.append((name, trio.current_time()))
    try:
        await trio.sleep(latency)
    finally:
        permit.release()


def _in_time_order(record: Record) -> list[str]:
    """Names in admission order: by time, then (same instant) as the gate admitted them."""
    return [name for name, _ in sorted(record, key=lambda entry: entry[1])]



def _turns(lanes: Lanes) -> list[int | None]:
    """The tickets ``lanes`` serves, in turn, until it is empty."""
    seen = []
    while lanes:
        seen.append(lanes.head())
        lanes.served()
    return seen

#: Random steps on a line (``_heads``): (step, lane, value).
_steps = st.lists(
    st.tuples(st.sampled_from(["append", "serve", "correct", "aside", "restore", "forget", "drop", "head"]), st.integers(0, 7), st.integers(-3, 3)),
    max_size=80,
)


class TestLanes:
    def test_one_lane_is_plain_ticket_order(self) -> None:
        lanes = Lanes()
        for ticket in range(4):
            lanes.append(ticket)
        served = []
        while lanes:
            served.append(lanes.head())
            lanes.served()
        assert served == [0, 1, 2, 3]

    def test_lanes_of_equal_costs_take_turns_lowest_lane_first(self) -> None:
        lanes = Lanes()
        for ticket, lane in [(0, 5), (1, 5), (2, 5), (3, 2), (4, 9), (5, 9)]:
            lanes.append(ticket, lane)
        served = []
        while lanes:
            served.append(lanes.head())
            lanes.served()
        assert served == [3, 0, 4, 1, 5, 2]

    def test_a_dropped_head_keeps_its_lanes_turn(self) -> None:
        """A ticket that left the line (withdrawn) is no turn: the lane's next ticket has it."""
        lanes = Lanes()
        for ticket, lane in [(0, 0), (1, 0), (2, 1)]:
            lanes.append(ticket, lane)
        lanes.drop()
        assert lanes.head() == 1
        lanes.served()
        assert lanes.head() == 2

    def test_an_emptied_lane_rejoins_with_no_credit_for_its_served_turn(self) -> None:
        """Lane 0 was served at virtual time 0 and left; lane 1 is owed its turn at 0 too,
        and lane 0, back, starts at its finish (1): lane 1 first, then the two at 1, the
        lower lane first."""
        lanes = Lanes()
        lanes.append(0, 0)
        lanes.append(1, 1)
        lanes.append(2, 1)
        lanes.served()  # lane 0 empties and leaves the turns
        lanes.append(3, 0)
        served = []
        while lanes:
            served.append(lanes.head())
            lanes.served()
        assert served == [1, 3, 2]

    def test_stale_heap_entries_are_left_out(self) -> None:
        """Lanes moved back by their calls' ends (``correct``) leave stale entries below
        the heap's top, which never reach it while the lanes keep moving back: the heap
        keeps no more than the lanes with tickets, twice, and some slack."""
        lanes = Lanes()
        for lane in range(50):
            lanes.append(lane, lane, cost=100.0)
        for round_ in range(40):
            for lane in range(50):
                lanes.correct(lane, -1.0)
        assert len(lanes._heap) <= 2 * 50 + lanes_module._SLACK
        assert lanes.head() == 0

    def test_an_indexed_line_sets_lanes_aside_without_a_heap(self) -> None:
        """With an index, ``head`` asks the index, also while lanes are set aside, and the
        line keeps no heap (none to push in at ``restore``, no stale entry left to pop):
        the turns after ``restore`` are those the line had before."""

        def line() -> Lanes:
            lanes = Lanes()
            for lane in range(4):
                for ticket in range(3):
                    lanes.append(10 * lane + ticket, lane, cost=1.0 + lane)
            lanes.index({})
            return lanes

        lanes, untouched = line(), line()
        assert lanes.head() == 0
        lanes.set_aside()
        assert lanes.head() == 10  # the next lane in turn, from the index
        lanes.set_aside()
        assert lanes.head() == 20
        lanes.restore()
        assert lanes._heap == []

        assert _turns(lanes) == _turns(untouched)

    @pytest.mark.parametrize("kind", ["one lane", "shared", "indexed", "set aside"])
    def test_an_empty_line_has_no_head(self, kind: str) -> None:
        """``head`` of a line with no tickets is ``None``, as for one whose lanes are all
        capped (the gate's ``_front`` asks no ``bool`` of the line first), whether or not
        the line ever had a second lane, an index or a lane set aside."""
        lanes = Lanes()
        lanes.append(0, 0)
        if kind != "one lane":
            lanes.append(1, 1)
        if kind == "indexed":
            lanes.index({})
        if kind == "set aside":
            assert lanes.head() == 0
            lanes.set_aside()
        while lanes.head() is not None:
            lanes.served()
        if kind == "set aside":
            assert lanes  # the lane set aside still has its ticket, passed over
            lanes.restore()
            assert lanes.head() == 0
            lanes.served()
        assert not lanes
        assert lanes.head() is None
        assert lanes.head(capped={0, 1}) is None

    @settings(max_examples=100, deadline=None)
    @given(batches=st.lists(st.tuples(st.integers(0, 3), st.lists(st.floats(0.1, 5.0), max_size=4)), max_size=8))
    def test_tickets_joining_together_are_served_as_one_by_one(self, batches: list[tuple[int, list[float]]]) -> None:
        """``extend`` (a tick's tickets at once) serves the same turns as ``append`` of
        each ticket in turn, an empty batch changing nothing."""
        together, one_by_one, ticket = Lanes(), Lanes(), 0
        for lane, costs in batches:
            tickets = list(range(ticket, ticket + len(costs)))
            ticket += len(costs)
            together.extend(list(zip(tickets, costs)), lane)
            for each, cost in zip(tickets, costs):
                one_by_one.append(each, lane, cost)

        assert _turns(together) == _turns(one_by_one)

    @settings(max_examples=200, deadline=None)
    @given(steps=_steps, capped=st.frozensets(st.integers(0, 7), max_size=2))
    def test_leaving_out_stale_entries_keeps_the_turns(self, steps: list[tuple[str, int, int]], capped: frozenset[int]) -> None:
        """On random steps, a line that leaves out its stale heap entries at every push
        gives the same heads as one that never does."""

        def heads(slack: int) -> list[int | None]:
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(lanes_module, "_SLACK", slack)
                return _heads(steps, capped)

        assert heads(0) == heads(10**9)

    @settings(max_examples=200, deadline=None)
    @given(steps=_steps, capped=st.frozensets(st.integers(0, 7), max_size=2), indexed_at=st.integers(0, 80))
    def test_an_indexed_line_keeps_the_heaps_turns(self, steps: list[tuple[str, int, int]], capped: frozenset[int], indexed_at: int) -> None:
        """On random steps, a line indexed at any step (it orders its lanes by its index
        from then on, and keeps no heap) gives the same heads as one never indexed."""
        indexed_at %= len(steps) + 1
        indexed = [*steps[:indexed_at], ("index", 0, 0), *steps[indexed_at:]]
        assert _heads(indexed, capped) == _heads(steps, capped)


def _heads(steps: list[tuple[str, int, int]], capped: frozenset[int]) -> list[int | None]:
    """The heads a line gives over ``steps`` (``index``: the line is indexed there),
    then to its end."""
    lanes, seen, ticket = Lanes(), [], 0
    for step, lane, value in steps:
        if step == "append":
            lanes.append(ticket, lane, cost=1.0 + abs(value))
            ticket += 1
        elif step == "correct":
            lanes.correct(lane, value / 2)
        elif step == "forget":
            lanes.forget(lane)
        elif step == "restore":
            lanes.restore()
        elif step == "index":
            lanes.index({})
        elif lanes and step in ("serve", "aside", "drop", "head"):
            head = lanes.head(capped)
            seen.append(head)
            if head is not None and step == "serve":
                lanes.served()
            elif head is not None and step == "aside":
                lanes.set_aside()
            elif head is not None and step == "drop":
                lanes.drop()
    lanes.restore()
    while lanes:
        seen.append(lanes.head())
        lanes.served()
    return seen


class TestGateLanes:
    @pytest.mark.trio
    async def test_two_lanes_share_the_slots_in_turn(self, autojump_clock: trio.testing.MockClock) -> None:
        """A's whole tick was issued first; still B's calls go through every other slot."""
        gate = Gate(size=1)
        record: Record = []
        a = gate.issue(3, lane=0)
        b = gate.issue(3, lane=1)
        async with trio.open_nursery() as nursery:
            for name, ticket in [*zip(("b0", "b1", "b2"), b, strict=True), *zip(("a0", "a1", "a2"), a, strict=True)]:
                nursery.start_soon(_call, gate, name, ticket, record)
        assert record == [("a0", 0.0), ("b0", 1.0), ("a1", 2.0), ("b1", 3.0), ("a2", 4.0), ("b2", 5.0)]

    @pytest.mark.trio
    async def test_a_small_lane_is_not_starved_by_a_big_one(self, autojump_clock: trio.testing.MockClock) -> None:
        """Lane 0 issued 100 calls before lane 1 issued 2: lane 1 is through by 4 s, not 100."""
        gate = Gate(size=2)
        record: Record = []
        big = gate.issue(100, lane=0)
        small = gate.issue(2, lane=1)
        async with trio.open_nursery() as nursery:
            for index, ticket in enumerate(big):
                nursery.start_soon(_call, gate, f"big{index}", ticket, record)
            for index, ticket in enumerate(small):
                nursery.start_soon(_call, gate, f"small{index}", ticket, record)
        admitted = dict(record)
        assert (admitted["small0"], admitted["small1"]) == (0.0, 1.0)
        assert trio.current_time() == 51.0  # the slots never idle

    @pytest.mark.trio
    async def test_a_lane_whose_turn_it_is_holds_the_line_until_its_caller_arrives(self, autojump_clock: trio.testing.MockClock) -> None:
        """Strict, like ticket order: B's caller arrives late; A waits for it."""
        gate = Gate(size=1)
        record: Record = []
        (a0, a1), (b0,) = gate.issue(2, lane=0), gate.issue(1, lane=1)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_call, gate, "a0", a0, record)
            nursery.start_soon(_call, gate, "a1", a1, record)
            nursery.start_soon(lambda: _call(gate, "b0", b0, record, at=3.0))
        assert record == [("a0", 0.0), ("b0", 3.0), ("a1", 4.0)]

    @pytest.mark.trio
    async def test_a_token_bucket_serves_the_lanes_in_the_same_turns(self, autojump_clock: trio.testing.MockClock) -> None:
        """One token a second, burst 1, a gate of 2: tokens and slots both alternate."""
        gate = Gate(size=2, rate=1.0, burst=1)
        record: Record = []
        a, b = gate.issue(3, lane=0), gate.issue(3, lane=1)
        async with trio.open_nursery() as nursery:
            for lane, tickets in (("a", a), ("b", b)):
                for index, ticket in enumerate(tickets):
                    nursery.start_soon(lambda n=f"{lane}{index}", t=ticket: _call(gate, n, t, record, latency=5.0))
        assert _in_time_order(record) == ["a0", "b0", "a1", "b1", "a2", "b2"]
        assert record[:2] == [("a0", 0.0), ("b0", 1.0)]

    @pytest.mark.trio
    async def test_a_withdrawn_or_timed_out_ticket_gives_up_no_turn(self, autojump_clock: trio.testing.MockClock) -> None:
        gate = Gate(size=1)
        record: Record = []
        (a0, a1, a2), (b0, b1) = gate.issue(3, lane=0), gate.issue(2, lane=1)
        gate.withdraw(a1)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: _call(gate, "a0", a0, record, latency=2.0))
            nursery.start_soon(lambda: _call(gate, "b0", b0, record, timeout=1.0))
            nursery.start_soon(_call, gate, "a2", a2, record)
            nursery.start_soon(_call, gate, "b1", b1, record)
        assert record == [("a0", 0.0), ("b0 timed out", 1.0), ("b1", 2.0), ("a2", 3.0)]

    @given(
        calls=st.lists(
            st.tuples(st.integers(0, 3), st.sampled_from([0.5, 1.0, 1.5]), st.sampled_from([math.inf, 2.0, 4.0]), st.booleans()),
            min_size=1, max_size=24,
        ),
        size=st.integers(1, 4),
    )  # fmt: skip
    def test_in_flight_never_above_size_lanes_in_ticket_order_nothing_left(
        self, calls: list[tuple[int, float, float, bool]], size: int
    ) -> None:
        """Random lanes, latencies, timeouts and cancellations: never more than ``size``
        in flight, each lane admitted in its ticket order, and the gate empty at the end."""
        gate = Gate(size=size)
        admitted: list[tuple[int, int, float]] = []  # (lane, ticket, when)
        in_flight = peak = 0

        async def one(lane: int, ticket: int, latency: float, timeout: float, cancel: bool) -> None:
            nonlocal in_flight, peak
            with trio.move_on_after(1.25 if cancel else math.inf):
                try:
                    permit = await gate.acquire(ticket, timeout=timeout)
                except GateTimeout:
                    return
                admitted.append((lane, ticket, trio.current_time()))
                in_flight += 1
                peak = max(peak, in_flight)
                try:
                    await trio.sleep(latency)
                finally:
                    in_flight -= 1
                    permit.release()

        async def main() -> None:
            tickets = [gate.issue(1, lane=lane)[0] for lane, *_ in calls]
            async with trio.open_nursery() as nursery:
                for ticket, (lane, latency, timeout, cancel) in zip(tickets, calls, strict=True):
                    nursery.start_soon(one, lane, ticket, latency, timeout, cancel)

        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
        assert peak <= size
        for lane in {lane for lane, *_ in calls}:
            # Admitted at one instant, calls reach their tasks in trio's order: compare times.
            mine = sorted((ticket, when) for admitted_lane, ticket, when in admitted if admitted_lane == lane)
            assert [when for _, when in mine] == sorted(when for _, when in mine)
        statistics = gate.statistics()
        assert (statistics.in_flight, statistics.waiting) == (0, 0)


class TestTicketOffice:
    def _deal_once(self) -> dict[int, list[int]]:
        """Five worlds ask at the same instant, from tasks trio runs in its own order."""
        gate = Gate(size=2)
        office = TicketOffice(gate)
        dealt: dict[int, list[int]] = {}

        async def world(index: int) -> None:
            dealt[index] = await office.counter(index).issue(index + 1, [1.0] * (index + 1))

        async def main() -> None:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(office.run)
                async with trio.open_nursery() as worlds:
                    for index in range(5):
                        worlds.start_soon(world, index)
                nursery.cancel_scope.cancel()

        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
        return dealt

    def test_asks_of_one_instant_are_dealt_in_world_order_every_run(self) -> None:
        runs = [self._deal_once() for _ in range(50)]
        assert all(run == runs[0] for run in runs)
        assert runs[0] == {0: [0], 1: [1, 2], 2: [3, 4, 5], 3: [6, 7, 8, 9], 4: [10, 11, 12, 13, 14]}

    @pytest.mark.trio
    async def test_no_time_passes_before_the_deal(self, autojump_clock: trio.testing.MockClock) -> None:
        gate = Gate(size=1)
        office = TicketOffice(gate)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(office.run)
            await trio.sleep(2.5)
            assert await office.issue(0, 2) == [0, 1]
            assert trio.current_time() == 2.5
            nursery.cancel_scope.cancel()

    @pytest.mark.trio
    async def test_an_ask_cancelled_before_the_deal_takes_no_ticket(self, autojump_clock: trio.testing.MockClock) -> None:
        """A world cancelled while it waits for its tickets leaves nothing in the gate's line."""
        gate = Gate(size=1)
        office = TicketOffice(gate)
        with trio.CancelScope() as scope:
            scope.cancel()
            await office.issue(0, 3)  # never dealt: the office is not running
        # The ask is gone: the next deal issues only the next world's.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(office.run)
            assert await office.issue(1, 1) == [0]
            nursery.cancel_scope.cancel()
        assert gate.statistics().waiting == 0
