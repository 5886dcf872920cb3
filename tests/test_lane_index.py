"""The lane index (``manor.admission.lane_index``): it answers as a walk over the lanes
in turn order would, and a gate that uses it admits exactly as one that walks."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from manor import Gate, GateTimeout
from manor.admission import lanes as lanes_module
from manor.admission.gate import Permit
from manor.admission.lane_index import LaneIndex, place
from manor.admission.lanes import Lanes

_LANES = st.integers(0, 5)
# A few lanes, some far apart and negative: their numbers are the low bits of a place.
_ANY_LANES = st.sampled_from([0, 1, 2, 5, -3, 2**40, -(2**63), 2**63 - 1])
# Starts that tie, cross zero (-0.0 equals 0.0) and differ in their last bits.
_STARTS = st.one_of(st.integers(-4, 12).map(float), st.sampled_from([-0.0, 0.1 + 0.2, 0.3, -1e-300, 1e300, math.inf]))


class TestPlace:
    @given(first=st.tuples(st.floats(allow_nan=False), _ANY_LANES), second=st.tuples(st.floats(allow_nan=False), _ANY_LANES))
    def test_places_sort_as_the_turns(self, first: tuple[float, int], second: tuple[float, int]) -> None:
        """A turn's place (one integer) compares with another's as the turns do."""
        for op in ("__lt__", "__eq__", "__gt__"):
            assert getattr(place(*first), op)(place(*second)) == getattr(first, op)(second)

    def test_a_lane_beyond_64_bits_is_refused(self) -> None:
        with pytest.raises(ValueError, match="64 bits"):
            place(0.0, 2**63)
        with pytest.raises(ValueError, match="64 bits"):
            LaneIndex({}, {}).put(-(2**63) - 1, 0.0)


class TestLaneIndex:
    @settings(max_examples=200, deadline=None)
    @given(
        steps=st.lists(
            st.one_of(
                st.tuples(st.just("put"), _LANES, _STARTS),
                st.tuples(st.just("move"), _LANES, _STARTS),
                st.tuples(st.just("remove"), _LANES, st.just(0)),
                st.tuples(st.just("hold"), _LANES, st.integers(0, 4)),
                st.tuples(st.just("weigh"), _LANES, st.sampled_from([1, 2, 4])),
                st.tuples(st.just("suspect"), _LANES, st.just(0)),
                st.tuples(st.just("clear"), _LANES, st.sampled_from([math.inf, 3, 6])),
                st.tuples(st.just("ask"), st.integers(-5, 12), st.integers(0, 8)),
            ),
            max_size=60,
        ),
        capped=st.frozensets(_LANES, max_size=2),
        share=st.sampled_from([0.5, 1.0, 1.5, 2.0]),
    )
    def test_it_answers_as_the_walk_in_turn_order(self, steps: list[tuple[str, int, float]], capped: frozenset[int], share: float) -> None:
        """On random lanes: the next lane after a turn, the first that is a suspect or
        below its share, and the turns before each lane and last, are those a walk over
        the lanes in turn order finds."""
        index = LaneIndex({}, {})
        # The model: lane -> [start, weight, holding, suspect, cleared until]
        lanes: dict[int, list[float]] = {}
        weights: dict[int, float] = {}
        holdings: dict[int, int] = {}
        now = 0.0
        for step, lane, value in steps:
            if step == "put":
                index.put(lane, value)
                lanes[lane] = [value, weights.get(lane, 1.0), holdings.get(lane, 0), True, math.inf]
            elif step == "move" and lane in lanes:
                index.move(lane, value)
                lanes[lane][0] = value
            elif step == "remove":
                index.remove(lane)
                lanes.pop(lane, None)
            elif step == "hold":
                index.hold(lane, int(value))
                holdings[lane] = int(value)
                if lane in lanes:
                    lanes[lane][2] = value
            elif step == "weigh":
                index.weigh(lane, value)
                weights[lane] = value
                if lane in lanes:
                    lanes[lane][1] = value
            elif step == "suspect":
                index.suspect(lane)
                if lane in lanes:
                    lanes[lane][3], lanes[lane][4] = True, math.inf
            elif step == "clear":
                index.clear(lane, value)
                if lane in lanes and lanes[lane][3]:
                    lanes[lane][3], lanes[lane][4] = False, value
            elif step == "ask":
                now = max(now, float(value))
                turn = (float(lane), 2)
                order = sorted((entry[0], number) for number, entry in lanes.items())
                after = [number for start, number in order if (start, number) > turn and number not in capped]
                for entry in lanes.values():
                    if not entry[3] and entry[4] <= now:
                        entry[3], entry[4] = True, math.inf
                stops = [number for number in after if lanes[number][3] or lanes[number][2] < share * lanes[number][1] - 1e-9]
                assert index.after(place(*turn), capped) == (after[0] if after else None)
                assert index.first_stop(place(*turn), lambda weight: share * weight - 1e-9, now, capped) == (stops[0] if stops else None)
                assert index.last() == (place(*order[-1]) if order else None)
                for before, (start, number) in zip([None, *order], order, strict=False):
                    assert index.before(number) == (None if before is None else place(*before))
        assert len(index) == len(lanes)


@attrs.frozen
class _Call:
    lane: int
    issued_at: int  # quarter seconds
    arrives_after: int
    latency: int
    timeout: float
    cancel_after: float
    withdraws: bool
    parks: bool  # arrives without a task (``Gate.arrive``), as a tick's calls do; never cancelled


_calls = st.lists(
    st.builds(
        _Call,
        lane=_LANES,
        issued_at=st.integers(0, 12),
        arrives_after=st.sampled_from([0, 0, 0, 1, 3]),
        latency=st.integers(1, 12),
        timeout=st.sampled_from([math.inf, math.inf, 0.0, 0.5, 2.0]),
        cancel_after=st.sampled_from([math.inf, math.inf, math.inf, 0.0, 0.75, 2.5]),
        withdraws=st.sampled_from([False] * 7 + [True]),
        parks=st.booleans(),
    ),
    min_size=1,
    max_size=40,
)


@contextmanager
def _walking() -> Iterator[None]:
    """Gates built meanwhile walk their lanes, as before the index."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Lanes, "index", lambda self, holdings: None)
        yield


def _admissions(size: int, claim_s: float, weights: dict[int, float], caps: dict[int, int], calls: list[_Call]) -> dict[int, tuple[str, float]]:
    """What happened to each ticket of ``calls`` on a gate with claims, and when."""
    gate = Gate(size=size, claim_s=claim_s)
    for lane in sorted(set(weights) | set(caps)):
        gate.set_share(lane, weights.get(lane, 1.0), caps.get(lane))
    outcome: dict[int, tuple[str, float]] = {}

    async def hold(ticket: int, permit: Permit, latency: float) -> None:
        outcome[ticket] = ("admitted", permit.admitted_at)
        try:
            await trio.sleep(latency)
        finally:
            permit.release()

    async def waits(call: _Call, ticket: int, nursery: trio.Nursery) -> None:
        await trio.sleep(call.arrives_after / 4)
        if call.withdraws:
            gate.withdraw(ticket)
            outcome[ticket] = ("withdrawn", trio.current_time())
            return
        latency = call.latency / 4
        # A parked caller is not cancelled here: woken with its permit at the instant of
        # its cancellation, it would have to give the permit back, which is the tick's
        # business (``fire_at_admission``), not the gate's.
        with trio.move_on_after(math.inf if call.parks else call.cancel_after):
            if not call.parks:
                try:
                    permit = await gate.acquire(ticket, timeout=call.timeout)
                except GateTimeout:
                    outcome[ticket] = ("timed out", trio.current_time())
                    return
                await hold(ticket, permit, latency)
                return
            woken: list[Permit | None] = []
            event = trio.Event()

            def wake(permit: Permit | None) -> None:
                woken.append(permit)
                event.set()

            arrival = gate.arrive(ticket, timeout=call.timeout, wake=wake)
            if type(arrival) is Permit:
                await hold(ticket, arrival, latency)
                return
            try:
                await event.wait()
            finally:
                if not woken and gate.leave(arrival):  # type: ignore[arg-type]
                    outcome[ticket] = ("left", trio.current_time())
            permit = woken[0]
            if permit is None:
                try:
                    permit = await gate.admitted(arrival)  # type: ignore[arg-type]
                except GateTimeout:
                    outcome[ticket] = ("timed out", trio.current_time())
                    return
            await hold(ticket, permit, latency)
            return
        gate.withdraw(ticket)  # cancelled before it arrived: its ticket stalls nobody
        outcome.setdefault(ticket, ("cancelled", trio.current_time()))

    async def main() -> None:
        with trio.fail_after(10_000):
            await issue()

    async def issue() -> None:
        async with trio.open_nursery() as nursery:
            for instant in sorted({call.issued_at for call in calls}):
                await trio.sleep_until(instant / 4)
                # Tickets are dealt once every task of the instant has run, as the ticket
                # office deals them (``manor.admission.tickets``).
                await trio.testing.wait_all_tasks_blocked()
                now = [call for call in calls if call.issued_at == instant]
                for lane in sorted({call.lane for call in now}):
                    mine = [call for call in now if call.lane == lane]
                    tickets = gate.issue(len(mine), lane=lane, costs=[call.latency / 4 for call in mine])
                    for ticket, call in zip(tickets, mine, strict=True):
                        nursery.start_soon(waits, call, ticket, nursery)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return outcome


class TestGateWithTheIndex:
    @settings(max_examples=100, deadline=None)
    @given(
        calls=_calls,
        size=st.integers(1, 6),
        claim_s=st.sampled_from([0.5, 1.5, 4.0]),
        weights=st.dictionaries(_LANES, st.sampled_from([0.5, 2.0, 3.0]), max_size=3),
        caps=st.dictionaries(_LANES, st.integers(1, 3), max_size=2),
    )
    def test_admits_as_the_walk_does(self, calls: list[_Call], size: int, claim_s: float, weights: dict[int, float], caps: dict[int, int]) -> None:
        """Random lanes with claims, weights and caps, callers that arrive late, withdraw,
        time out, are cancelled or leave, in tasks or parked: every ticket fares the same,
        at the same instant, with the index as with the walk over the lanes."""
        indexed = _admissions(size, claim_s, weights, caps, calls)
        with _walking():
            walked = _admissions(size, claim_s, weights, caps, calls)
        assert indexed == walked

    @settings(max_examples=50, deadline=None)
    @given(
        calls=_calls,
        size=st.integers(1, 6),
        claim_s=st.sampled_from([0.5, 1.5, 4.0]),
        weights=st.dictionaries(_LANES, st.sampled_from([0.5, 2.0, 3.0]), max_size=3),
    )
    def test_admits_the_same_with_stale_heap_entries_left_out(self, calls: list[_Call], size: int, claim_s: float, weights: dict[int, float]) -> None:
        """The lanes' heap left out its stale entries at every push, or never: every
        ticket fares the same, at the same instant (``Lanes._compact``)."""
        fared = []
        for slack in (0, 10**9):
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(lanes_module, "_SLACK", slack)
                fared.append(_admissions(size, claim_s, weights, {}, calls))
        assert fared[0] == fared[1]

    def test_a_crowd_over_its_shares_is_passed_at_one_stroke(self) -> None:
        """Thirty lanes over their shares before the one below it: the dispatch asks the
        index for the next lane that may be let in (not each lane in turn), and admits as
        the walk does."""
        calls = [_Call(lane % 31, 0, 0, 4 if lane % 31 else 1, math.inf, math.inf, False, True) for lane in range(31 * 3)]
        asked = []
        with pytest.MonkeyPatch.context() as patch:
            first_stop = LaneIndex.first_stop
            patch.setattr(LaneIndex, "first_stop", lambda self, *args: asked.append(args) or first_stop(self, *args))
            indexed = _admissions(31, 2.0, {}, {}, calls)
        with _walking():
            walked = _admissions(31, 2.0, {}, {}, calls)
        assert indexed == walked
        assert asked
