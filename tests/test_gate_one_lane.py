"""A gate with one lane (a single world's, ``manor run``) orders its line without the
lanes' heap (``Lanes``, until a second lane joins): it must admit exactly as the
general path does — the same callers, in the same order, at the same instants — with
timeouts, cancellations, withdrawals, resizes, pauses and a token bucket.

Each random workload runs three times under the virtual clock: as it is (one lane, no
heap), with the gate's lines ordered by the heap from the start (the general path, all
else equal), and beside a second lane that never queues (a share set: the gate counts
every lane's calls, as a fleet's does).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio
import trio._core._run
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import GRID, GateScenario, gate_scenarios

from manor import Gate, GateTimeout, ProviderError


def _one_lane(gate: Gate) -> None:
    """As built."""


def _heap_from_the_start(gate: Gate) -> None:
    gate._slot_line._share()
    gate._token_line._share()


def _an_idle_second_lane(gate: Gate) -> None:
    gate.set_share(1, 1.0)


def _admissions(
    scenario: GateScenario, pauses: list[tuple[float, float]], allowances: list[tuple[float, int, float]], prepare: Callable[[Gate], None]
) -> list[tuple[object, ...]]:
    """What every caller saw, and when, with the gate's figures then."""

    async def main() -> list[tuple[object, ...]]:
        gate = Gate(size=scenario.size, rate=scenario.rate, burst=scenario.burst)
        prepare(gate)
        seen: list[tuple[object, ...]] = []

        def saw(*what: object) -> None:
            stats = gate.statistics()
            seen.append((trio.current_time(), *what, stats.in_flight, stats.waiting, stats.refunds, stats.admitted))

        tickets: list[int | None] = list(gate.issue(len(scenario.calls))) if scenario.upfront else [None] * len(scenario.calls)

        async def caller(index: int) -> None:
            spec = scenario.calls[index]
            await trio.sleep_until(spec.arrival)
            if spec.withdrawn:
                gate.withdraw(tickets[index])  # type: ignore[arg-type]
                saw("withdrawn", index)
                return
            with trio.move_on_at(spec.cancel_at):
                try:
                    permit = await gate.acquire(tickets[index], timeout=spec.timeout)
                except GateTimeout:
                    saw("timeout", index)
                    return
                except trio.Cancelled:
                    saw("cancelled", index)
                    raise
                saw("admitted", index, permit.ticket, permit.queued_at, permit.admitted_at)
                try:
                    await trio.sleep(spec.latency)
                    if spec.fails:
                        raise ProviderError("simulated failure")
                except ProviderError:
                    pass
                finally:
                    permit.release()
                    saw("released", index)

        async def changes() -> None:
            events = sorted(
                [(at, 0, size, 0.0) for at, size in scenario.resizes]
                + [(at, 1, 0, until) for at, until in pauses]
                + [(at, 2, count, until) for at, count, until in allowances]
            )
            for at, kind, number, until in events:
                await trio.sleep_until(at)
                if kind == 0:
                    gate.size = number
                elif kind == 1:
                    gate.pause(until)
                else:
                    gate.allow(number, until)
                saw("changed", kind)

        with trio.fail_after(10_000):  # a gate that loses a caller fails, not hangs
            async with trio.open_nursery() as nursery:
                nursery.start_soon(changes)
                for index in scenario.spawn_order:
                    nursery.start_soon(caller, index)
        return seen

    trio._core._run._r.seed(26)
    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


# Off the grid, as the scenarios' resizes are, so that they never tie with a call's event.
_off_grid = st.integers(0, 40).map(lambda step: step * GRID + 3 * GRID / 16)
_pauses = st.lists(st.tuples(_off_grid, st.integers(1, 16).map(lambda n: n * GRID / 2)), max_size=3).map(
    lambda drawn: [(at, at + length) for at, length in drawn]
)
_allowances = st.lists(
    st.tuples(_off_grid, st.integers(0, 3), st.integers(1, 16).map(lambda n: n * GRID / 2)), max_size=2
).map(lambda drawn: [(at, count, at + length) for at, count, length in drawn])


@pytest.mark.parametrize("general", [_heap_from_the_start, _an_idle_second_lane])
@settings(max_examples=150, deadline=None)
@given(scenario=gate_scenarios(resizes=True), pauses=_pauses, allowances=_allowances)
def test_one_lane_admits_as_the_general_path(
    general: Callable[[Gate], None], scenario: GateScenario, pauses: list[tuple[float, float]], allowances: list[tuple[float, int, float]]
) -> None:
    one_lane = _admissions(scenario, pauses, allowances, _one_lane)
    assert one_lane == _admissions(scenario, pauses, allowances, general)


def test_a_second_lane_builds_the_heap_in_the_same_order() -> None:
    """A second lane joins a line that had one (no heap): both are ordered as if the
    heap had been kept from the start."""
    gate, general = Gate(size=1), Gate(size=1)
    _heap_from_the_start(general)
    order: dict[str, list[int]] = {}
    for name, each in (("one", gate), ("general", general)):

        async def main(each: Gate = each, name: str = name) -> None:
            first = each.issue(3, lane=0, costs=[1.0, 2.0, 0.5])
            second = each.issue(3, lane=1, costs=[0.5, 0.5, 0.5])
            admitted: list[int] = order.setdefault(name, [])

            async def call(ticket: int) -> None:
                permit = await each.acquire(ticket)
                admitted.append(permit.ticket)
                await trio.sleep(1.0)
                permit.release()

            async with trio.open_nursery() as nursery:
                for ticket in [*second, *first]:
                    nursery.start_soon(call, ticket)

        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert order["one"] == order["general"]
    assert sorted(order["one"]) == list(range(6))
