"""The shared gate, example by example, at exact virtual times.

Every trio test runs under ``autojump_clock`` (``MockClock(autojump_threshold=0)``): a
sleep costs no wall time, and ``trio.current_time()`` is exact.
"""

from __future__ import annotations

import functools
import heapq
import math
import random

import msgspec
import pytest
import trio
import trio.testing

from manor import (
    Admitted,
    Event,
    Gate,
    GateLayer,
    GateStatistics,
    GateTimeout,
    Permit,
    PlatformLayer,
    ProviderError,
    Request,
    SessionLimiter,
    SimProfile,
    SimProvider,
    Stack,
)
from manor.admission import gate as gate_module
from manor.worlds.manor import CallerKind

Record = list[tuple[str, str, float]]


async def caller(
    gate: Gate,
    name: str,
    record: Record,
    *,
    ticket: int | None = None,
    at: float = 0.0,
    latency: float = 1.0,
    timeout: float = math.inf,
    fails: bool = False,
) -> None:
    """Arrive at ``at``, wait for a permit, hold it ``latency`` seconds; record each step."""
    await trio.sleep_until(at)
    try:
        permit = await gate.acquire(ticket, timeout=timeout)
    except GateTimeout:
        record.append((name, "timeout", trio.current_time()))
        return
    except trio.Cancelled:
        record.append((name, "cancelled", trio.current_time()))
        raise
    record.append((name, "admitted", trio.current_time()))
    try:
        await trio.sleep(latency)
        if fails:
            raise ProviderError(f"{name} failed")
    except ProviderError:
        record.append((name, "failed", trio.current_time()))
    finally:
        permit.release()


# -- concurrency and ticket order --------------------------------------------------


@pytest.mark.trio
async def test_size_limits_calls_in_flight_and_pipelines_them(autojump_clock: trio.testing.MockClock) -> None:
    """Five 1 s calls through a gate of 2: admitted two at a time, as soon as a slot frees."""
    gate = Gate(size=2)
    record: Record = []
    tickets = gate.issue(5)
    async with trio.open_nursery() as nursery:
        for ticket in reversed(tickets):  # spawned backwards: the tickets decide
            nursery.start_soon(lambda t=ticket: caller(gate, f"c{t}", record, ticket=t))
    # Same-instant admissions reach their tasks in trio's order: compare sorted by time.
    assert sorted(record, key=lambda r: (r[2], r[0])) == [
        ("c0", "admitted", 0.0),
        ("c1", "admitted", 0.0),
        ("c2", "admitted", 1.0),
        ("c3", "admitted", 1.0),
        ("c4", "admitted", 2.0),
    ]
    assert trio.current_time() == 3.0
    assert gate.statistics().peak_in_flight == 2


@pytest.mark.trio
async def test_without_tickets_callers_are_served_in_arrival_order(autojump_clock: trio.testing.MockClock) -> None:
    """A caller that passes no ticket gets the next one when it arrives: first come, first served."""
    gate = Gate(size=1)
    record: Record = []
    async with trio.open_nursery() as nursery:
        for name, at in [("late", 0.3), ("first", 0.1), ("second", 0.2), ("holder", 0.0)]:
            nursery.start_soon(lambda n=name, a=at: caller(gate, n, record, at=a))
    assert record == [
        ("holder", "admitted", 0.0),
        ("first", "admitted", 1.0),
        ("second", "admitted", 2.0),
        ("late", "admitted", 3.0),
    ]


@pytest.mark.trio
async def test_an_issued_ticket_holds_back_later_tickets_until_it_arrives(autojump_clock: trio.testing.MockClock) -> None:
    """Ticket 1 arrives first, with a slot free, yet waits for ticket 0: admission is by ticket."""
    gate = Gate(size=1)
    record: Record = []
    first, second = gate.issue(2)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: caller(gate, "second", record, ticket=second, at=0.0))
        nursery.start_soon(lambda: caller(gate, "first", record, ticket=first, at=2.0))
    assert record == [("first", "admitted", 2.0), ("second", "admitted", 3.0)]
    assert gate.statistics().max_wait == 3.0


@pytest.mark.trio
async def test_a_withdrawn_ticket_lets_the_line_move_on(autojump_clock: trio.testing.MockClock) -> None:
    """Withdrawing a ticket whose caller will not come admits the ticket behind it at once."""
    gate = Gate(size=1)
    record: Record = []
    absent, present = gate.issue(2)

    async def give_up() -> None:
        await trio.sleep(1.5)
        record.append(("absent", "withdrawn", trio.current_time()))
        gate.withdraw(absent)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: caller(gate, "present", record, ticket=present))
        nursery.start_soon(give_up)
    assert record == [("absent", "withdrawn", 1.5), ("present", "admitted", 1.5)]


@pytest.mark.trio
async def test_withdrawing_an_arrived_or_unknown_ticket_changes_nothing(autojump_clock: trio.testing.MockClock) -> None:
    """``withdraw`` is safe in a ``finally``: a ticket already used, or never issued, is left alone."""
    gate = Gate(size=1)
    (ticket,) = gate.issue()
    permit = await gate.acquire(ticket)
    gate.withdraw(ticket)
    gate.withdraw(999)
    assert gate.statistics().in_flight == 1
    permit.release()
    gate.withdraw(ticket)
    assert gate.statistics() == GateStatistics(
        size=1,
        in_flight=0,
        waiting=0,
        peak_in_flight=1,
        admitted=1,
        timeouts=0,
        cancelled=0,
        refunds=0,
        tokens_available=None,
        total_wait=0.0,
        max_wait=0.0,
    )


@pytest.mark.trio
async def test_acquire_rejects_a_ticket_not_issued_or_already_used(autojump_clock: trio.testing.MockClock) -> None:
    """A ticket the gate never issued, or one already admitted, is a ValueError."""
    gate = Gate(size=2)
    with pytest.raises(ValueError, match="ticket 7"):
        await gate.acquire(7)
    (ticket,) = gate.issue()
    permit = await gate.acquire(ticket)
    with pytest.raises(ValueError, match=f"ticket {ticket}"):
        await gate.acquire(ticket)
    permit.release()


@pytest.mark.trio
async def test_a_permit_released_twice_is_an_error(autojump_clock: trio.testing.MockClock) -> None:
    """Release is exactly once: a second release raises and does not free a second slot."""
    gate = Gate(size=1)
    permit = await gate.acquire()
    permit.release()
    assert permit.released
    with pytest.raises(RuntimeError, match="released twice"):
        permit.release()
    assert gate.statistics().in_flight == 0


@pytest.mark.trio
async def test_a_permit_keeps_when_it_was_released(autojump_clock: trio.testing.MockClock) -> None:
    """``released_at``: the instant its releaser says (the call's end, read before the
    slot is freed), or the clock's as it is released; ``None`` while held."""
    gate = Gate(size=2)
    said, unsaid = await gate.acquire(), await gate.acquire()
    assert said.released_at is None and not said.released
    await trio.sleep(3)
    said.release(1.5)
    unsaid.release()
    assert said.released_at == 1.5 and said.released
    assert unsaid.released_at == trio.current_time() == 3.0


@pytest.mark.trio
async def test_permits_are_told_apart_by_identity_and_say_their_ticket(autojump_clock: trio.testing.MockClock) -> None:
    """A permit is itself, not its fields (two permits alike are two slots: a set of
    permits held counts both), and its repr says its ticket's admission, not the gate it
    holds (a Struct's repr would print every field, the gate's included)."""
    gate = Gate(size=2)
    first, second = await gate.acquire(), await gate.acquire()
    twin = Permit(first.ticket, first.queued_at, first.admitted_at, _gate=gate)
    assert first != twin and first == first and len({first, second, twin}) == 3
    assert repr(first) == f"Permit(ticket={first.ticket}, queued_at=0.0, admitted_at=0.0)"
    first.release()
    second.release()


# -- timeouts and cancellation -------------------------------------------------------


@pytest.mark.trio
async def test_acquire_times_out_exactly_at_its_deadline(autojump_clock: trio.testing.MockClock) -> None:
    """A waiter with a 2.5 s timeout leaves at 2.5 with GateTimeout, holding nothing."""
    gate = Gate(size=1)
    record: Record = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: caller(gate, "holder", record, latency=10.0))
        nursery.start_soon(lambda: caller(gate, "impatient", record, at=0.5, timeout=2.5))
    assert record == [("holder", "admitted", 0.0), ("impatient", "timeout", 3.0)]
    stats = gate.statistics()
    assert (stats.admitted, stats.timeouts, stats.waiting, stats.in_flight) == (1, 1, 0, 0)


def test_a_waiter_whose_timeout_ends_as_a_slot_frees_times_out_every_time() -> None:
    """Regression: the slot freeing at b's deadline goes to c, not to b or c by trio's whim."""

    async def one_run() -> Record:
        gate = Gate(size=1)
        record: Record = []
        a, b, c = gate.issue(3)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: caller(gate, "a", record, ticket=a, latency=2.0))
            nursery.start_soon(lambda: caller(gate, "b", record, ticket=b, timeout=2.0))
            nursery.start_soon(lambda: caller(gate, "c", record, ticket=c))
        return record

    runs = {tuple(trio.run(one_run, clock=trio.testing.MockClock(autojump_threshold=0))) for _ in range(60)}
    assert runs == {(("a", "admitted", 0.0), ("b", "timeout", 2.0), ("c", "admitted", 2.0))}


@pytest.mark.trio
async def test_a_zero_timeout_admits_only_when_a_slot_is_free_now(autojump_clock: trio.testing.MockClock) -> None:
    """``timeout=0`` is a try: admitted at once when free, GateTimeout at once when not."""
    gate = Gate(size=1)
    permit = await gate.acquire(timeout=0)
    with pytest.raises(GateTimeout):
        await gate.acquire(timeout=0)
    assert trio.current_time() == 0.0
    permit.release()


@pytest.mark.trio
async def test_a_cancelled_waiter_leaves_the_line_and_holds_nothing(autojump_clock: trio.testing.MockClock) -> None:
    """Cancelled while waiting for a slot: no slot taken, and the next ticket is served in its place."""
    gate = Gate(size=1)
    record: Record = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: caller(gate, "holder", record, latency=2.0))
        doomed = trio.CancelScope()
        nursery.start_soon(lambda: _in_scope(doomed, caller(gate, "doomed", record, at=0.1)))
        nursery.start_soon(lambda: caller(gate, "next", record, at=0.2))
        await trio.sleep(1.0)
        doomed.cancel()
    assert record == [
        ("holder", "admitted", 0.0),
        ("doomed", "cancelled", 1.0),
        ("next", "admitted", 2.0),
    ]
    stats = gate.statistics()
    assert (stats.admitted, stats.cancelled, stats.waiting, stats.in_flight, stats.refunds) == (2, 1, 0, 0, 0)


async def _in_scope(scope: trio.CancelScope, coroutine: object) -> None:
    with scope:
        await coroutine  # type: ignore[misc]


# -- the token bucket ----------------------------------------------------------------


@pytest.mark.trio
async def test_the_token_bucket_paces_calls_in_ticket_order(autojump_clock: trio.testing.MockClock) -> None:
    """Two tokens a second, burst 1: five callers at t=0 are let in half a second apart, by ticket."""
    gate = Gate(size=10, rate=2.0, burst=1)
    record: Record = []
    tickets = gate.issue(5)
    async with trio.open_nursery() as nursery:
        for ticket in random.Random(5).sample(list(tickets), 5):
            nursery.start_soon(lambda t=ticket: caller(gate, f"c{t}", record, ticket=t, latency=0.1))
    assert record == [(f"c{t}", "admitted", t * 0.5) for t in range(5)]


@pytest.mark.trio
async def test_a_burst_lets_that_many_calls_in_at_once(autojump_clock: trio.testing.MockClock) -> None:
    """Burst 3 at one token a second: three at once, then one a second."""
    gate = Gate(size=10, rate=1.0, burst=3)
    record: Record = []
    tickets = gate.issue(5)
    async with trio.open_nursery() as nursery:
        for ticket in tickets:
            nursery.start_soon(lambda t=ticket: caller(gate, f"c{t}", record, ticket=t, latency=0.1))
    assert sorted(record, key=lambda r: (r[2], r[0])) == [
        ("c0", "admitted", 0.0),
        ("c1", "admitted", 0.0),
        ("c2", "admitted", 0.0),
        ("c3", "admitted", 1.0),
        ("c4", "admitted", 2.0),
    ]


@pytest.mark.trio
async def test_tokens_first_then_slots(autojump_clock: trio.testing.MockClock) -> None:
    """A caller takes its token as soon as the bucket allows, then waits for a slot with it in hand."""
    gate = Gate(size=1, rate=1.0, burst=1)
    record: Record = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: caller(gate, "a", record, latency=3.0))
        nursery.start_soon(lambda: caller(gate, "b", record, at=0.5, latency=1.0))
        await trio.sleep(1.5)
        # b took the token that came at 1.0 and is waiting for a slot.
        assert gate.statistics().tokens_available == 0.0
        assert gate.statistics().waiting == 1
    assert record == [("a", "admitted", 0.0), ("b", "admitted", 3.0)]


@pytest.mark.trio
async def test_a_timeout_after_the_token_was_taken_refunds_it(autojump_clock: trio.testing.MockClock) -> None:
    """b takes the token of t=4, times out waiting for a slot at 5: the refund lets d in a second sooner."""
    gate = Gate(size=1, rate=0.25, burst=1)
    record: Record = []
    a, b, c, d = gate.issue(4)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: caller(gate, "a", record, ticket=a, latency=10.0))
        nursery.start_soon(lambda: caller(gate, "b", record, ticket=b, timeout=5.0))
        nursery.start_soon(lambda: caller(gate, "c", record, ticket=c, latency=1.0))
        nursery.start_soon(lambda: caller(gate, "d", record, ticket=d, latency=1.0))
    # Tokens: a at 0, b at 4, then b's refund at 5 hands c one at once, and d gets the
    # next at 8 (without the refund: c at 8, d at 12).
    assert record == [
        ("a", "admitted", 0.0),
        ("b", "timeout", 5.0),
        ("c", "admitted", 10.0),
        ("d", "admitted", 11.0),
    ]
    stats = gate.statistics()
    assert (stats.timeouts, stats.refunds) == (1, 1)


@pytest.mark.trio
async def test_a_timeout_while_waiting_for_a_token_refunds_nothing(autojump_clock: trio.testing.MockClock) -> None:
    """b gives up before any token was its: no refund, and c gets the next token when it comes."""
    gate = Gate(size=10, rate=0.5, burst=1)
    record: Record = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: caller(gate, "a", record))
        nursery.start_soon(lambda: caller(gate, "b", record, at=0.1, timeout=1.0))
        nursery.start_soon(lambda: caller(gate, "c", record, at=0.2))
    assert record == [("a", "admitted", 0.0), ("b", "timeout", 1.1), ("c", "admitted", 2.0)]
    assert gate.statistics().refunds == 0


@pytest.mark.trio
async def test_a_cancellation_after_the_token_was_taken_refunds_it(autojump_clock: trio.testing.MockClock) -> None:
    """Cancelled in the slot wait with a token in hand: the token goes back."""
    gate = Gate(size=1, rate=1.0, burst=1)
    record: Record = []
    async with trio.open_nursery() as nursery:
        first, second = gate.issue(2)
        nursery.start_soon(lambda: caller(gate, "holder", record, ticket=first, latency=5.0))
        doomed = trio.CancelScope()
        nursery.start_soon(lambda: _in_scope(doomed, caller(gate, "doomed", record, ticket=second)))
        await trio.sleep(2.0)  # doomed took the token of t=1 and waits for a slot
        doomed.cancel()
    assert record == [("holder", "admitted", 0.0), ("doomed", "cancelled", 2.0)]
    stats = gate.statistics()
    assert (stats.cancelled, stats.refunds, stats.waiting, stats.in_flight) == (1, 1, 0, 0)


@pytest.mark.trio
async def test_a_failed_call_keeps_its_token_spent(autojump_clock: trio.testing.MockClock) -> None:
    """The bucket limits attempts, not successes: a call that fails is not refunded."""
    gate = Gate(size=10, rate=1.0, burst=1)
    record: Record = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: caller(gate, "a", record, latency=0.1, fails=True))
        nursery.start_soon(lambda: caller(gate, "b", record, at=0.5))
    assert record == [("a", "admitted", 0.0), ("a", "failed", 0.1), ("b", "admitted", 1.0)]
    assert gate.statistics().refunds == 0


@pytest.mark.trio
async def test_a_new_head_of_the_token_line_is_woken_to_its_own_turn(autojump_clock: trio.testing.MockClock) -> None:
    """When the token head times out, the caller behind it takes over its place and its token time."""
    gate = Gate(size=10, rate=0.25, burst=1)
    record: Record = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: caller(gate, "a", record))
        nursery.start_soon(lambda: caller(gate, "b", record, at=0.1, timeout=1.0))
        nursery.start_soon(lambda: caller(gate, "c", record, at=0.2))
    assert record == [("a", "admitted", 0.0), ("b", "timeout", 1.1), ("c", "admitted", 4.0)]


def test_a_refund_and_a_refill_at_the_same_instant_do_not_depend_on_run_order() -> None:
    """Regression: b's refund at t=2, when the bucket also refills for c, once got capped away or not by trio's whim."""

    async def one_run() -> Record:
        gate = Gate(size=1, rate=1.0, burst=1)
        record: Record = []
        a, b, c, d = gate.issue(4)
        async with trio.open_nursery() as nursery:
            # b holds the token of t=1 and times out at 2, the instant c's token comes: the
            # refund must reach d at 2 whichever of b and c trio runs first.
            nursery.start_soon(lambda: caller(gate, "a", record, ticket=a, latency=2.5))
            nursery.start_soon(lambda: caller(gate, "b", record, ticket=b, timeout=2.0))
            nursery.start_soon(lambda: caller(gate, "c", record, ticket=c, latency=0.25))
            nursery.start_soon(lambda: caller(gate, "d", record, ticket=d, latency=0.25))
        return record

    runs = {tuple(trio.run(one_run, clock=trio.testing.MockClock(autojump_threshold=0))) for _ in range(60)}
    assert runs == {
        (("a", "admitted", 0.0), ("b", "timeout", 2.0), ("c", "admitted", 2.5), ("d", "admitted", 2.75)),
    }


# -- resizing ----------------------------------------------------------------------


@pytest.mark.trio
async def test_growing_the_gate_admits_waiters_at_once(autojump_clock: trio.testing.MockClock) -> None:
    """From 1 to 3 at t=1: the next two tickets are admitted at t=1, not when a call ends."""
    gate = Gate(size=1)
    record: Record = []
    tickets = gate.issue(4)
    async with trio.open_nursery() as nursery:
        for ticket in tickets:
            nursery.start_soon(lambda t=ticket: caller(gate, f"c{t}", record, ticket=t, latency=10.0))
        await trio.sleep(1.0)
        gate.size = 3
    assert sorted(record, key=lambda r: (r[2], r[0])) == [
        ("c0", "admitted", 0.0),
        ("c1", "admitted", 1.0),
        ("c2", "admitted", 1.0),
        ("c3", "admitted", 10.0),
    ]


@pytest.mark.trio
async def test_shrinking_the_gate_takes_effect_as_calls_finish(autojump_clock: trio.testing.MockClock) -> None:
    """From 3 to 1 with three in flight: nobody is evicted, and the next waits until all three end."""
    gate = Gate(size=3)
    record: Record = []
    tickets = gate.issue(5)
    async with trio.open_nursery() as nursery:
        for ticket, latency in zip(tickets, [1.0, 2.0, 3.0, 1.0, 1.0], strict=True):
            nursery.start_soon(lambda t=ticket, s=latency: caller(gate, f"c{t}", record, ticket=t, latency=s))
        await trio.sleep(0.5)
        gate.size = 1
        assert gate.statistics().in_flight == 3
    assert sorted(record, key=lambda r: (r[2], r[0])) == [
        ("c0", "admitted", 0.0),
        ("c1", "admitted", 0.0),
        ("c2", "admitted", 0.0),
        ("c3", "admitted", 3.0),
        ("c4", "admitted", 4.0),
    ]


def test_a_size_below_one_is_rejected() -> None:
    """A gate must let at least one call through, at construction and when resized."""
    with pytest.raises(ValueError):
        Gate(size=0)
    gate = Gate(size=2)
    with pytest.raises(ValueError, match="at least 1"):
        gate.size = 0
    assert gate.size == 2
    with pytest.raises(ValueError):
        Gate(size=1, rate=-1.0)


# -- statistics --------------------------------------------------------------------


@pytest.mark.trio
async def test_statistics_count_admissions_and_waits(autojump_clock: trio.testing.MockClock) -> None:
    """Peak, admitted, waiting, total and max wait, exactly."""
    gate = Gate(size=2)
    record: Record = []
    async with trio.open_nursery() as nursery:
        for name, at, latency in [("a", 0.0, 2.0), ("b", 0.0, 3.0), ("c", 0.5, 1.0), ("d", 1.0, 1.0)]:
            nursery.start_soon(lambda n=name, a=at, s=latency: caller(gate, n, record, at=a, latency=s))
        await trio.sleep(1.5)
        mid = gate.statistics()
    assert (mid.in_flight, mid.waiting) == (2, 2)
    # c waits 0.5 -> 2.0 (1.5 s), d waits 1.0 -> 3.0 (2.0 s).
    assert sorted(record) == [("a", "admitted", 0.0), ("b", "admitted", 0.0), ("c", "admitted", 2.0), ("d", "admitted", 3.0)]
    stats = gate.statistics()
    assert (stats.admitted, stats.peak_in_flight, stats.waiting, stats.in_flight) == (4, 2, 0, 0)
    assert (stats.total_wait, stats.max_wait) == (3.5, 2.0)


# -- determinism -----------------------------------------------------------------------

#: One tick of the Wacky Manor: ten characters, the narrator and the summariser.
TICK = [Request(caller=CallerKind.CHARACTER, agent=f"guest{i}", tick=1, prompt="What now?") for i in range(10)] + [
    Request(caller=CallerKind.NARRATOR, agent="narrator", tick=1),
    Request(caller=CallerKind.SUMMARISER, agent="summariser", tick=1),
]
BACKEND = SimProvider(default=SimProfile(latency_s=1.0, jitter=0.5), seed=1789)


async def _one_tick(spawn_seed: int, *, upfront: bool) -> tuple[dict[int, float], float]:
    """The tick through gate(5) ∘ platform(6) ∘ sim, its tasks spawned in a shuffled order;
    returns each call's admission time (by its index in the tick) and the makespan."""
    gate = Gate(size=5)
    limiter = SessionLimiter(6)
    stack = Stack(BACKEND, [GateLayer(gate), PlatformLayer(limiter)])
    requests = list(TICK)
    if upfront:
        tickets = gate.issue(len(requests))
        requests = [msgspec.structs.replace(r, ticket=t) for r, t in zip(requests, tickets, strict=True)]
    admitted: dict[int, float] = {}

    async def one(index: int) -> None:
        def listener(event: Event) -> None:
            if isinstance(event, Admitted):
                admitted[index] = event.admitted_at

        await stack.call(requests[index], listener)

    async with trio.open_nursery() as nursery:
        for index in random.Random(spawn_seed).sample(range(len(requests)), len(requests)):
            nursery.start_soon(one, index)
    assert limiter.statistics().rejected == 0
    return admitted, trio.current_time()


def _list_schedule(latencies: list[float], slots: int) -> tuple[list[float], float]:
    """Admission times and makespan of calls started strictly in order on ``slots`` slots."""
    free = [0.0] * slots
    starts = []
    for latency in latencies:
        start = heapq.heappop(free)
        starts.append(start)
        heapq.heappush(free, start + latency)
    return starts, max(free)


def test_admission_order_and_makespan_never_change_across_200_shuffled_runs() -> None:
    """Tickets issued up front: 200 runs, spawned in random orders, admit alike and end at the same instant."""
    outcomes = set()
    for run in range(200):
        admitted, makespan = trio.run(
            functools.partial(_one_tick, run, upfront=True), clock=trio.testing.MockClock(autojump_threshold=0)
        )
        outcomes.add((tuple(sorted(admitted.items())), makespan))
    assert len(outcomes) == 1
    ((admissions, makespan),) = outcomes
    # Admitted in ticket order (ticket i is call i), pipelined as one list schedule over
    # five slots: each call starts the moment the earliest running one ends.
    starts, expected_makespan = _list_schedule([BACKEND.latency(r) for r in TICK], slots=5)
    assert [at for _, at in admissions] == pytest.approx(starts, abs=1e-9)
    assert makespan == pytest.approx(expected_makespan, abs=1e-9)


async def _tie_heavy_tick(spawn_seed: int) -> tuple[tuple[tuple[str, str, float], ...], float]:
    """Twelve callers with round latencies (so calls end, time out and refill together),
    a token bucket, two gate timeouts and a withdrawn ticket; spawned in a shuffled order."""
    gate = Gate(size=3, rate=4.0, burst=2)
    record: Record = []
    tickets = gate.issue(12)
    latencies = [1.0, 0.5, 1.0, 0.5, 1.0, 1.0, 0.25, 1.0, 0.5, 1.0, 0.75, 1.0]
    timeouts = {4: 1.0, 9: 2.0}

    async def withdraw_later() -> None:
        await trio.sleep(0.5)
        gate.withdraw(tickets[6])
        record.append(("c6", "withdrawn", trio.current_time()))

    async with trio.open_nursery() as nursery:
        for i in random.Random(spawn_seed).sample(range(12), 12):
            if i == 6:
                nursery.start_soon(withdraw_later)
                continue
            nursery.start_soon(
                functools.partial(
                    caller, gate, f"c{i}", record, ticket=tickets[i], latency=latencies[i], timeout=timeouts.get(i, math.inf)
                )
            )
    return tuple(sorted(record, key=lambda r: (r[2], r[0]))), trio.current_time()


def test_a_tie_heavy_tick_is_just_as_repeatable() -> None:
    """Round latencies, a bucket, timeouts and a withdrawal: 200 shuffled runs, one outcome."""
    outcomes = {
        trio.run(_tie_heavy_tick, run, clock=trio.testing.MockClock(autojump_threshold=0)) for run in range(200)
    }
    # Tokens every 0.25 s (two at hand), three slots. c4 got its token at 0.75 and times
    # out at 1.0, the instant two slots free: it leaves, and its refunded token lets c7
    # in beside c5 at that same instant.
    assert outcomes == {
        (
            (
                ("c0", "admitted", 0.0),
                ("c1", "admitted", 0.0),
                ("c2", "admitted", 0.25),
                ("c3", "admitted", 0.5),
                ("c6", "withdrawn", 0.5),
                ("c4", "timeout", 1.0),
                ("c5", "admitted", 1.0),
                ("c7", "admitted", 1.0),
                ("c8", "admitted", 1.25),
                ("c9", "admitted", 1.75),
                ("c10", "admitted", 2.0),
                ("c11", "admitted", 2.0),
            ),
            3.0,
        )
    }


def test_without_tickets_up_front_the_run_order_leaks_into_admission() -> None:
    """The control: callers without tickets are admitted in whatever order trio happens to start them."""
    outcomes = set()
    for run in range(20):
        admitted, makespan = trio.run(
            functools.partial(_one_tick, run, upfront=False), clock=trio.testing.MockClock(autojump_threshold=0)
        )
        outcomes.add((tuple(sorted(admitted.items())), makespan))
    assert len(outcomes) > 1


@pytest.mark.trio
async def test_the_gate_times_its_waits_itself_and_its_timekeeper_ends_with_them(autojump_clock: trio.testing.MockClock) -> None:
    """No caller keeps time for the gate: waits bounded by their timeouts end exactly at
    their deadlines (the earlier one too, though it parked later), with one timekeeper
    task for all; once none waits it holds no deadline, so the clock never jumps for it."""
    gate = Gate(size=1)
    held = await gate.acquire()
    living = trio.lowlevel.current_statistics().tasks_living
    ended: list[tuple[str, float]] = []

    async def wait(name: str, timeout: float) -> None:
        try:
            await gate.acquire(timeout=timeout)
        except GateTimeout:
            ended.append((name, trio.current_time()))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait, "patient", 5.0)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(wait, "hasty", 2.0)
        await trio.testing.wait_all_tasks_blocked()
        assert trio.lowlevel.current_statistics().tasks_living == living + 3  # two waits, one timekeeper
    assert ended == [("hasty", 2.0), ("patient", 5.0)]
    await trio.testing.wait_all_tasks_blocked()
    assert trio.lowlevel.current_statistics().tasks_living == living + 1
    assert trio.lowlevel.current_statistics().seconds_to_next_deadline == math.inf
    held.release()


@pytest.mark.trio
async def test_the_timekeeper_keeps_no_waits_that_are_over_while_others_go_on(autojump_clock: trio.testing.MockClock) -> None:
    """While some wait is always watched (a fleet's: ``_rest`` never clears), the
    timekeeper's heap leaves out the waits that are over rather than keep every waiter
    admitted since; a wait watched all along still times out at its deadline, and the
    calls admitted meanwhile at theirs."""
    gate = Gate(size=1)
    held = await gate.acquire()
    tickets = gate.issue(301)
    timed_out: list[float] = []
    admitted: list[float] = []

    async def last() -> None:  # behind every other ticket: watched until it times out
        try:
            await gate.acquire(tickets[-1], timeout=100)
        except GateTimeout:
            timed_out.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(last)
        for ticket in tickets[:-1]:
            permits: list[Permit] = []

            async def take(ticket: int = ticket, permits: list[Permit] = permits) -> None:
                permits.append(await gate.acquire(ticket, timeout=50))

            nursery.start_soon(take)
            await trio.testing.wait_all_tasks_blocked()  # parked, watched by the timekeeper
            await trio.sleep(0.25)
            held.release()
            await trio.testing.wait_all_tasks_blocked()
            (held,) = permits
            admitted.append(held.admitted_at)
            assert len(gate._watched) <= 2 * 2 + gate_module._WATCH_SLACK  # two waits watched at most
    held.release()
    assert admitted == [0.25 * (index + 1) for index in range(300)]
    assert timed_out == [100.0]


@pytest.mark.trio
async def test_the_slot_given_back_admits_the_next_at_the_instant_it_was_freed(autojump_clock: trio.testing.MockClock) -> None:
    """The next in line is admitted at the permit's ``released_at`` (the call's end, as
    its releaser read it), not at a later reading of the clock: on the real clock the
    two calls' spans meet without a gap or an overlap."""
    gate = Gate(size=1)
    held = await gate.acquire()
    admitted: list[float] = []

    async def wait() -> None:
        permit = await gate.acquire(timeout=30)
        admitted.append(permit.admitted_at)
        permit.release()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        await trio.sleep(3)
        held.release(2.0)  # the call ended at 2.0; its releaser says so now, at 3.0
    assert admitted == [2.0]


def test_on_the_system_clock_a_deadline_left_standing_times_later_waits_at_theirs() -> None:
    """On the system clock the timekeeper keeps its deadline when the last watched wait
    ends (moving it costs more than waking once for nothing): a later wait, with a later
    deadline, still times out at its own, neither at the old one nor never."""

    async def main() -> tuple[float, float]:
        gate = Gate(size=1)
        held = await gate.acquire()
        async with trio.open_nursery() as nursery:

            async def admitted_in_time() -> None:
                (await gate.acquire(timeout=0.2)).release()

            nursery.start_soon(admitted_in_time)
            await trio.testing.wait_all_tasks_blocked()
            held.release()  # the first wait ends admitted, its deadline left standing
        assert trio.lowlevel.current_statistics().seconds_to_next_deadline < math.inf
        held = await gate.acquire()
        start = trio.current_time()
        with pytest.raises(GateTimeout):
            await gate.acquire(timeout=0.6)
        held.release()
        return start, trio.current_time()

    start, timed_out = trio.run(main)
    assert 0.6 <= timed_out - start < 5.0
