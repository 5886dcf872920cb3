"""The gate shared through Redis, against a real redis-server: the in-process gate's
semantics across processes (several ``RedisGate`` objects on one gate name stand for
several processes: each has its own connection and process id), crashes, a lost server."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from redis_server import SEEN_WITHIN_S, RedisServer

from manor.admission import redis_gate as gate_redis
from manor.admission.gate import Gate, SharedGate
from manor.admission.redis_gate import RedisGate, claim_shares, gate_status, resize_shared_gate
from manor.errors import GateTimeout, GateUnavailable, SharedGateError


def _name() -> str:
    return f"test-{uuid.uuid4().hex[:10]}"


@asynccontextmanager
async def _processes(url: str, count: int, *, size: int, name: str | None = None, **options: Any) -> AsyncIterator[list[RedisGate]]:
    """``count`` connected gates on one name: as many processes sharing it."""
    name = name or _name()
    async with AsyncExitStack() as stack:
        gates = []
        for index in range(count):
            gate = RedisGate(url, name, size=size, world=f"world {index}", **options)
            gates.append(await stack.enter_async_context(gate.connected()))
        yield gates


async def _settled(url: str, name: str, timeout: float = 10.0) -> Any:
    """The gate's status once nothing is in flight or waiting (releases are sent by a
    task of their process, a moment after ``release()``)."""
    with trio.fail_after(timeout):
        while True:
            status = await gate_status(url, name)
            if status is None or (status.statistics.in_flight == 0 and status.statistics.waiting == 0):
                return status
            await trio.sleep(0.02)


# -- the protocol, both gates -------------------------------------------------------------

GateFactory = Callable[..., Any]


@pytest.fixture(params=["in-process", "redis"])
def make_gate(request: pytest.FixtureRequest, redis_url: str) -> GateFactory:
    """An async context manager giving a connected gate of either kind (``size=...``)."""

    def factory(**options: Any) -> Any:
        gate: SharedGate = Gate(**options) if request.param == "in-process" else RedisGate(redis_url, _name(), **options)
        return gate.connected()

    return factory


async def _admitted(gate: SharedGate, arrivals: Iterable[int]) -> list[int]:
    """The tickets in the order ``gate`` admits them, their callers arriving in the
    order of ``arrivals``, 10 ms apart, each holding its permit for 5 ms."""
    admitted: list[int] = []

    async def call(ticket: int) -> None:
        permit = await gate.acquire(ticket, timeout=10)
        admitted.append(permit.ticket)
        await trio.sleep(0.005)
        permit.release()

    async with trio.open_nursery() as nursery:
        for ticket in arrivals:
            nursery.start_soon(call, ticket)
            await trio.sleep(0.01)
    return admitted


class TestTheSharedGateProtocol:
    """What the tick loop relies on, the same from both gates (in real time)."""

    @pytest.mark.trio
    async def test_tickets_issued_ahead_are_admitted_in_their_order(self, make_gate: GateFactory) -> None:
        async with make_gate(size=1) as gate:
            tickets = gate.issue(4)
            admitted = await _admitted(gate, reversed(tickets))  # arrive in the reverse order
        assert admitted == list(tickets)

    @pytest.mark.trio
    async def test_tickets_in_lanes_are_admitted_in_turns(self, make_gate: GateFactory) -> None:
        """A fleet's worlds on one gate: a lane each, one ticket of each lane in turn."""
        async with make_gate(size=1) as gate:
            first, second = gate.issue(3, lane=0), gate.issue(3, lane=1)
            admitted = await _admitted(gate, [*first, *second])  # the first lane's callers arrive first
        assert admitted == [ticket for pair in zip(first, second, strict=True) for ticket in pair]

    @pytest.mark.trio
    async def test_a_withdrawn_ticket_does_not_stall_the_ones_behind_it(self, make_gate: GateFactory) -> None:
        async with make_gate(size=2) as gate:
            first, second = gate.issue(2)
            gate.withdraw(first)
            permit = await gate.acquire(second, timeout=10)
            assert permit.ticket == second
            permit.release()

    @pytest.mark.trio
    async def test_a_wait_longer_than_its_timeout_is_a_gate_timeout(self, make_gate: GateFactory) -> None:
        async with make_gate(size=1) as gate:
            held = await gate.acquire(timeout=10)
            with pytest.raises(GateTimeout):
                await gate.acquire(timeout=0.05)
            held.release()
            (await gate.acquire(timeout=10)).release()  # the timed-out waiter left nothing behind

    @pytest.mark.trio
    async def test_an_allowance_lets_its_calls_through_then_pauses_until_its_window_resets(self, make_gate: GateFactory) -> None:
        """Rate headers saying 2 requests remain for 0.3 s (``allow``, the ticket book's)."""
        async with make_gate(size=4) as gate:
            reset = trio.current_time() + 0.3
            gate.allow(2, reset)
            first, second = await gate.acquire(timeout=10), await gate.acquire(timeout=10)
            assert trio.current_time() < reset and gate.paused_until == reset
            third = await gate.acquire(timeout=10)
            assert trio.current_time() >= reset
            for permit in (first, second, third):
                permit.release()

    @pytest.mark.trio
    async def test_a_pause_admits_nobody_until_it_ends_and_a_shorter_one_changes_nothing(self, make_gate: GateFactory) -> None:
        """A server's retry-after (``pause``, the ticket book's; each gate says what
        follows it)."""
        async with make_gate(size=2) as gate:
            assert gate.paused_until is None
            until = trio.current_time() + 0.3
            gate.pause(until)
            gate.pause(until - 0.2)
            assert gate.paused_until == until
            permit = await gate.acquire(timeout=10)
            assert trio.current_time() >= until
            permit.release()

    @pytest.mark.trio
    async def test_a_cancelled_waiter_holds_nothing(self, make_gate: GateFactory) -> None:
        async with make_gate(size=1) as gate:
            held = await gate.acquire(timeout=10)
            with trio.move_on_after(0.05):
                await gate.acquire(timeout=10)
            held.release()
            (await gate.acquire(timeout=10)).release()

    @pytest.mark.trio
    async def test_a_permit_is_released_once(self, make_gate: GateFactory) -> None:
        async with make_gate(size=1) as gate:
            permit = await gate.acquire(timeout=10)
            permit.release()
            with pytest.raises(RuntimeError, match="released twice"):
                permit.release()

    @pytest.mark.trio
    async def test_the_ticket_book_refuses_what_it_cannot_keep(self, make_gate: GateFactory) -> None:
        """The ledger both gates keep (``manor.admission.book``): costs that do not
        match the count number no ticket, a ticket is used once, and a size is at least 1."""
        async with make_gate(size=2, rate=5.0, burst=3) as gate:
            assert (gate.size, gate.rate, gate.burst) == (2, 5.0, 3)
            with pytest.raises(ValueError, match="2 costs for 3 tickets"):
                gate.issue(3, costs=[1.0, 2.0])
            assert gate.issue(2, costs=[0.5, 0.5]) == range(0, 2)
            permit = await gate.acquire(0, timeout=10)
            with pytest.raises(ValueError, match="ticket 0 was not issued by this gate, or is already used"):
                await gate.acquire(0, timeout=10)
            with pytest.raises(ValueError, match="ticket 7 was not issued by this gate"):
                await gate.acquire(7, timeout=10)
            gate.withdraw(0)  # arrived already: left alone
            gate.withdraw(1)
            with pytest.raises(ValueError, match="ticket 1 was not issued by this gate, or is already used"):
                await gate.acquire(1, timeout=10)
            with pytest.raises(ValueError, match="gate size must be at least 1, not 0"):
                gate.size = 0
            assert gate.size == 2
            permit.release()


@asynccontextmanager
async def _tenants(
    kind: str, redis_url: str, size: int, shares: list[tuple[float, int | None]], claim_s: float = 0.5
) -> AsyncIterator[list[tuple[SharedGate, int]]]:
    """Tenants of one gate, each with its (weight, cap): lanes of one in-process gate, or
    processes (each a ``RedisGate`` with a tenant of its own) on one Redis gate. Each is
    given as (its gate, its lane)."""
    if kind == "in-process":
        gate = Gate(size=size, claim_s=claim_s)
        for lane, (weight, cap) in enumerate(shares):
            gate.set_share(lane, weight, cap)
        yield [(gate, lane) for lane in range(len(shares))]
        return
    name = _name()
    async with AsyncExitStack() as stack:
        gates = []
        for index, (weight, cap) in enumerate(shares):
            gate = RedisGate(redis_url, name, size=size, claim_s=claim_s, tenant=f"tenant-{index}", weight=weight, max_sessions=cap)
            gates.append((await stack.enter_async_context(gate.connected()), 0))
        yield gates


async def _hold_all(tenant: tuple[SharedGate, int], count: int, seconds: float, spans: list[tuple[float, float]], holding: list[int], peak: list[int]) -> None:
    """``count`` calls of ``tenant``, issued at once, each holding its slot ``seconds``."""
    gate, lane = tenant

    async def call(ticket: int) -> None:
        permit = await gate.acquire(ticket, timeout=30)
        holding[0] += 1
        peak[0] = max(peak[0], holding[0])
        began = trio.current_time()
        await trio.sleep(seconds)
        holding[0] -= 1
        permit.release()
        spans.append((began, trio.current_time()))

    async with trio.open_nursery() as nursery:
        for ticket in gate.issue(count, lane=lane, costs=[seconds] * count):
            nursery.start_soon(call, ticket)


class TestTenants:
    """Tenants share the gate by session-time, the same on both gates (in real time)."""

    @pytest.mark.trio
    @pytest.mark.parametrize("kind", ["in-process", "redis"])
    @pytest.mark.slow(2.5)
    async def test_a_tenant_of_long_calls_does_not_take_the_gate(self, kind: str, redis_url: str) -> None:
        """A gate of 2. Tenant 0: eight calls of 0.5 s; tenant 1, a moment later: eight
        of 0.05 s. First come, first served, tenant 1 would wait 2 s for the long ones;
        by session-time its calls go as the first long ones end (some 0.9 s)."""
        async with _tenants(kind, redis_url, 2, [(1.0, None), (1.0, None)]) as (long, short):
            spans: list[list[tuple[float, float]]] = [[], []]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_hold_all, long, 8, 0.5, spans[0], [0], [0])
                await trio.sleep(0.02)
                nursery.start_soon(_hold_all, short, 8, 0.05, spans[1], [0], [0])
        # In order, not against a clock (a loaded machine stretches every call): first
        # come, first served, tenant 1's calls would start once the last long ones had.
        assert max(end for _, end in spans[1]) < max(began for began, _ in spans[0]), spans

    @pytest.mark.trio
    @pytest.mark.parametrize("kind", ["in-process", "redis"])
    async def test_a_tenant_claims_its_share_from_its_join(self, kind: str, redis_url: str) -> None:
        """A gate of 4, claims of 0.5 s; both tenants have joined (on Redis, their
        processes; in process, a lane joins with its first tickets, none here). Tenant
        0 comes first with four calls of 1 s, tenant 1's two calls 0.05 s later: they
        get tenant 1's share at once. Without a claim from its join, tenant 0 would
        take all four slots (nobody else claimed any) and tenant 1 would wait 1 s:
        separate ``manor run``s reach the server one after the other."""
        async with _tenants(kind, redis_url, 4, [(1.0, None), (1.0, None)]) as (first, second):
            second[0].issue(0, lane=second[1])
            spans: list[list[tuple[float, float]]] = [[], []]
            peak = [0]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_hold_all, first, 4, 1.0, spans[0], [0], peak)
                await trio.sleep(0.05)
                nursery.start_soon(_hold_all, second, 2, 0.05, spans[1], [0], [0])
        assert max(began for began, _ in spans[1]) < min(end for _, end in spans[0]), spans  # before any 1 s call ended
        assert peak == [4]  # the claim lapsed: tenant 0 took the slots tenant 1 left

    @pytest.mark.trio
    async def test_tenants_that_start_long_after_their_joins_claim_their_shares_again(self, redis_url: str) -> None:
        """A gate of 4, claims of 0.3 s. Both processes joined 0.4 s ago (a fleet's
        parts wait for each other to join): their claims from the join have lapsed.
        Before the word to start, the parent renews both in one transition
        (``claim_shares``); tenant 0's four calls of 1 s reach the server first, tenant
        1's two 0.05 s later get its share at once."""
        async with _tenants("redis", redis_url, 4, [(1.0, None), (1.0, None)], claim_s=0.3) as (first, second):
            await trio.sleep(0.4)
            gates = [gate for gate, _ in (first, second)]
            assert all(isinstance(gate, RedisGate) for gate in gates)
            await claim_shares(redis_url, gates[0].name, [gate.tenant for gate in gates])  # type: ignore[attr-defined]
            spans: list[list[tuple[float, float]]] = [[], []]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_hold_all, first, 4, 1.0, spans[0], [0], [0])
                await trio.sleep(0.05)
                nursery.start_soon(_hold_all, second, 2, 0.05, spans[1], [0], [0])
        assert max(began for began, _ in spans[1]) < min(end for _, end in spans[0]), spans  # before any 1 s call ended

    @pytest.mark.trio
    @pytest.mark.parametrize("kind", ["in-process", "redis"])
    async def test_a_join_no_call_follows_lends_every_slot_once_its_claim_lapses(self, kind: str, redis_url: str) -> None:
        """A gate of 4, claims of 0.3 s. Tenant 1 joins and never calls; tenant 0 comes
        0.4 s later with four calls: all four go at once (the gate is work-conserving)."""
        async with _tenants(kind, redis_url, 4, [(1.0, None), (1.0, None)], claim_s=0.3) as (first, second):
            second[0].issue(0, lane=second[1])
            await trio.sleep(0.4)
            spans: list[tuple[float, float]] = []
            await _hold_all(first, 4, 0.2, spans, [0], [0])
        assert max(began for began, _ in spans) < min(end for _, end in spans), spans  # none waited for another to end

    @pytest.mark.trio
    @pytest.mark.parametrize("kind", ["in-process", "redis"])
    async def test_a_tenant_in_line_is_charged_what_its_calls_held_at_its_next_waiters(self, kind: str, redis_url: str) -> None:
        """A gate of 2, no claims. Tenant 0 has four calls predicted at 10 s each; two
        are admitted (starts 0 and 10), then tenant 1 comes with two of 1 s (it joins at
        the virtual time, 10). Tenant 0's two calls end at once, far short of their 10 s:
        what they held is charged at its next waiters, as the in-process gate charges
        a lane at its next tickets, so both slots go to tenant 1 (starts 10 and 11,
        before tenant 0's 20). Charged as each call ended, tenant 0's head would have
        moved back to 0 while it stayed in line, and it would have taken the second."""
        async with _tenants(kind, redis_url, 2, [(1.0, None), (1.0, None)], claim_s=0.0) as ((first, lane0), (second, lane1)):
            admitted: list[str] = []
            permits: dict[str, Any] = {}
            let_go = trio.Event()

            async def call(gate: SharedGate, name: str, ticket: int) -> None:
                permit = await gate.acquire(ticket, timeout=30)
                admitted.append(name)
                permits[name] = permit
                if let_go.is_set():
                    permit.release()

            # Each step waits for what it caused (a transition at the server, and its
            # word back), not for a time a loaded machine can overrun: the gate has two
            # slots, so no admission can come beyond the one awaited.
            async def waiting(count: int) -> None:
                with trio.fail_after(SEEN_WITHIN_S):
                    while True:
                        status = first.statistics() if kind == "in-process" else (await gate_status(redis_url, first.name)).statistics  # type: ignore[attr-defined, union-attr]
                        if status.waiting == count:
                            return
                        await trio.sleep(0.01)

            async def admissions(count: int) -> list[str]:
                with trio.fail_after(SEEN_WITHIN_S):
                    while len(admitted) < count:
                        await trio.sleep(0.01)
                return admitted

            async with trio.open_nursery() as nursery:
                for index, ticket in enumerate(first.issue(4, lane=lane0, costs=[10.0] * 4)):
                    nursery.start_soon(call, first, f"a{index}", ticket)
                await waiting(2)
                assert sorted(await admissions(2)) == ["a0", "a1"]
                for index, ticket in enumerate(second.issue(2, lane=lane1, costs=[1.0] * 2)):
                    nursery.start_soon(call, second, f"b{index}", ticket)
                await waiting(4)
                permits.pop("a0").release()
                assert (await admissions(3))[2:] == ["b0"]
                permits.pop("a1").release()
                assert (await admissions(4))[2:] == ["b0", "b1"]
                let_go.set()
                for permit in permits.values():
                    permit.release()
        assert sorted(admitted) == ["a0", "a1", "a2", "a3", "b0", "b1"]

    @pytest.mark.trio
    async def test_a_cap_holds_across_processes(self, redis_url: str) -> None:
        """Two processes of one tenant capped at 1, on a gate of 3: never two at once."""
        name = _name()
        async with AsyncExitStack() as stack:
            gates = [
                await stack.enter_async_context(RedisGate(redis_url, name, size=3, tenant="capped", max_sessions=1).connected())
                for _ in range(2)
            ]
            holding, peak = [0], [0]
            spans: list[tuple[float, float]] = []
            async with trio.open_nursery() as nursery:
                for gate in gates:
                    nursery.start_soon(_hold_all, (gate, 0), 4, 0.03, spans, holding, peak)
            assert peak == [1] and len(spans) == 8
            status = await gate_status(redis_url, name)
            assert status is not None
            (tenant,) = [tenant for tenant in status.tenants if tenant.name == "capped"]
            assert (tenant.max_sessions, tenant.weight) == (1, 1.0)
            assert tenant.session_s_last_minute >= 0.2 and tenant.share_last_minute == 1.0

    @pytest.mark.trio
    @pytest.mark.parametrize("kind", ["in-process", "redis"])
    async def test_a_lane_s_cap_is_never_exceeded(self, kind: str, redis_url: str) -> None:
        """One process, a gate of 3, two lanes (a fleet's worlds). Lane 0, capped at 2,
        has twelve calls of 0.03 s and is alone at first (uncapped, it would take all 3
        slots); lane 1, not capped, comes 0.05 s later with twelve more: lane 0 never
        holds more than 2, and lane 1 gets the slot it leaves."""
        gate: SharedGate = Gate(size=3, claim_s=0.5) if kind == "in-process" else RedisGate(redis_url, _name(), size=3, claim_s=0.5)
        async with gate.connected():
            gate.set_share(0, 1.0, 2)
            peaks: list[list[int]] = [[0], [0]]
            spans: list[tuple[float, float]] = []
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_hold_all, (gate, 0), 12, 0.03, spans, [0], peaks[0])
                await trio.sleep(0.05)
                nursery.start_soon(_hold_all, (gate, 1), 12, 0.03, spans, [0], peaks[1])
        assert peaks[0] == [2] and peaks[1][0] >= 1 and len(spans) == 24

    @pytest.mark.trio
    async def test_the_process_that_brings_a_tenant_in_sets_its_weight_and_cap(self, redis_url: str) -> None:
        """A tenant's weight and cap are set by the process that brings it in and kept
        while any process of it is on the gate: one that joins it with others shares
        them as they are (and its cap holds for its calls) and says so in one line; once
        every process of it has left, the next one sets them again."""
        name = _name()
        first = RedisGate(redis_url, name, size=5, tenant="game", weight=2.0, max_sessions=3)
        async with first.connected():
            second = RedisGate(redis_url, name, size=5, tenant="game")
            async with second.connected():
                assert first.notices == []
                assert second.notices == [
                    (
                        f"gate {second.where}: tenant game is in use with weight 2 and max_sessions 3, as the process that "
                        "brought it in set them; this process counts under them, not its own settings (weight 1 and no cap)"
                    )
                ]
                assert (second.weight, second.max_sessions) == (2.0, 3)
                holding, peak = [0], [0]
                await _hold_all((second, 0), 6, 0.03, [], holding, peak)
                assert peak == [3]
            # The first process is still on the gate: the tenant keeps its settings.
            third = RedisGate(redis_url, name, size=5, tenant="game", weight=5.0)
            async with third.connected():
                assert (third.weight, third.max_sessions) == (2.0, 3) and len(third.notices) == 1
        # Nobody of the tenant is left: the next process sets it.
        fourth = RedisGate(redis_url, name, size=5, tenant="game", weight=4.0)
        async with fourth.connected():
            assert fourth.notices == [] and (fourth.weight, fourth.max_sessions) == (4.0, None)
            status = await gate_status(redis_url, name)
            assert status is not None
            (tenant,) = [tenant for tenant in status.tenants if tenant.name == "game"]
            assert (tenant.weight, tenant.max_sessions) == (4.0, None)

    @pytest.mark.trio
    async def test_the_first_process_on_a_gate_sets_its_claim_and_lease(self, redis_url: str) -> None:
        """``claim_s`` and ``lease_s`` are the first process's while any process is on
        the gate (one that joins with others takes them and says so); a process that
        comes to a gate nobody is on sets them to its own."""
        name = _name()
        async with RedisGate(redis_url, name, size=3, claim_s=0.5, lease_s=5.0).connected():
            joining = RedisGate(redis_url, name, size=3, claim_s=2.0, lease_s=5.0)
            async with joining.connected():
                assert joining.notices == [
                    f"gate {joining.where} is in use with claim_s 0.5; this process shares it as it is (its own settings: claim_s 2)"
                ]
                assert joining.claim_s == 0.5
        later = RedisGate(redis_url, name, size=3, claim_s=2.0, lease_s=3.0)
        async with later.connected():
            assert later.notices == [] and (later.claim_s, later.lease_s) == (2.0, 3.0)
            status = await gate_status(redis_url, name)
            assert status is not None and status.lease_s == 3.0

    @pytest.mark.trio
    async def test_a_process_s_lanes_keep_their_turns_at_the_server(self, redis_url: str) -> None:
        """One process, a gate of 2, two lanes: forty calls of 0.1 s of lane 0 arrive
        first, then, 0.05 s later, four of lane 1. Sent to the server as they arrived,
        lane 1's would wait behind all forty (2 s); the process keeps no more at the
        server than the gate's size, so they take their turns as slots free (some 0.6 s)."""
        async with RedisGate(redis_url, _name(), size=2).connected() as gate:
            spans: list[list[tuple[float, float]]] = [[], []]
            async with trio.open_nursery() as nursery:
                # Both lanes' first ticks come together (a fleet's first deal); lane 1's
                # is one call, and its next tick comes while lane 0's is still out.
                nursery.start_soon(_hold_all, (gate, 0), 40, 0.1, spans[0], [0], [0])
                nursery.start_soon(_hold_all, (gate, 1), 1, 0.01, [], [0], [0])
                await trio.sleep(0.05)
                nursery.start_soon(_hold_all, (gate, 1), 4, 0.1, spans[1], [0], [0])
        # In order, not against a clock a loaded machine can overrun: behind all forty,
        # lane 1's calls would start once the last of lane 0's had.
        assert max(end for _, end in spans[1]) < max(began for began, _ in spans[0]), spans


# -- across processes ---------------------------------------------------------------------

#: One waiter: which process, how long it holds its permit (ms), its timeout (ms, or
#: none), and after how long its caller cancels it (ms, or never).
_waiter = st.tuples(
    st.integers(0, 2),
    st.integers(0, 15),
    st.none() | st.integers(1, 60),
    st.none() | st.integers(0, 40),
)


class TestInvariants:
    @settings(max_examples=25)
    @given(size=st.integers(1, 4), waiters=st.lists(_waiter, min_size=1, max_size=24), shuffle=st.randoms())
    def test_in_flight_at_most_size_global_ticket_order_and_nothing_left(self, redis_url: str, gate_operations: Any, size: int, waiters: list[Any], shuffle: Any) -> None:
        """Three processes, random holds, timeouts and cancellations: never more than
        ``size`` in flight; admitted in global ticket order, each process's in its own
        ticket order; once every task has ended the server holds no permit and no waiter."""
        name = _name()
        admitted: list[tuple[int, int, int, int]] = []  # (order, global ticket, process, ticket)
        outcomes: dict[str, int] = {"ok": 0, "timeout": 0, "cancelled": 0}
        in_flight = 0

        async def call(gate: RedisGate, process: int, ticket: int, hold: int, timeout: int | None, cancel: int | None) -> None:
            nonlocal in_flight
            with trio.move_on_after(math.inf if cancel is None else cancel / 1000) as scope:
                try:
                    permit = await gate.acquire(ticket, timeout=math.inf if timeout is None else timeout / 1000)
                except GateTimeout:
                    outcomes["timeout"] += 1
                    return
                finally:
                    gate.withdraw(ticket)  # as the tick loop does: a call cancelled before it arrived
                in_flight += 1
                assert in_flight <= size
                admitted.append((permit.order, permit.global_ticket, process, ticket))
                try:
                    await trio.sleep(hold / 1000)
                finally:
                    in_flight -= 1
                    permit.release()
                    gate_operations.releases += 1
            if scope.cancelled_caught:
                outcomes["cancelled"] += 1
            else:
                outcomes["ok"] += 1

        async def main() -> Any:
            async with _processes(redis_url, 3, size=size, name=name) as gates:
                # Each process issues its tickets up front (a tick), then its calls arrive
                # in a shuffled order: the server must still see them in ticket order.
                plans = []
                for process, gate in enumerate(gates):
                    mine = [w for w in waiters if w[0] == process]
                    plans += [(gate, process, ticket, *w[1:]) for ticket, w in zip(gate.issue(len(mine)), mine, strict=True)]
                shuffle.shuffle(plans)
                async with trio.open_nursery() as nursery:
                    for plan in plans:
                        nursery.start_soon(call, *plan)
                        gate_operations.acquires += 1
                await _settled(redis_url, name)  # every release has reached the server
            return await gate_status(redis_url, name)

        status = trio.run(main)
        gate_operations.examples += 1
        assert sum(outcomes.values()) == len(waiters)
        by_order = [global_ticket for _, global_ticket, _, _ in sorted(admitted)]
        assert by_order == sorted(by_order)
        for process in range(3):
            mine = sorted((global_ticket, ticket) for _, global_ticket, p, ticket in admitted if p == process)
            assert [ticket for _, ticket in mine] == sorted(ticket for _, ticket in mine)
        # The processes left: nothing of them remains, and nothing was ever over the size.
        assert status.statistics.in_flight == status.statistics.waiting == 0 and status.holders == ()
        assert status.statistics.peak_in_flight <= size


class TestAcrossProcesses:
    @pytest.mark.trio
    async def test_a_release_in_one_process_admits_a_waiter_of_another_without_polling(self, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
        """With the poll an hour apart, only the wake-up through the server can do it."""
        monkeypatch.setattr(gate_redis, "POLL_S", 3600.0)
        async with _processes(redis_url, 2, size=1, lease_s=3600) as (a, b):
            held = await a.acquire(timeout=10)
            async with trio.open_nursery() as nursery:
                got: list[Any] = []

                async def wait() -> None:
                    got.append(await b.acquire(timeout=30))

                nursery.start_soon(wait)
                await trio.sleep(0.1)
                assert not got
                held.release()
            got[0].release()
        assert b.admission_latencies() and all(0 <= latency < 30 for latency in b.admission_latencies())

    @pytest.mark.trio
    async def test_a_grant_whose_word_is_lost_is_picked_up_by_the_poll(self, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
        async def deaf(self: RedisGate) -> None:
            await trio.sleep_forever()

        async with _processes(redis_url, 1, size=1) as (a,):
            monkeypatch.setattr(RedisGate, "_receive_grants", deaf)
            async with _processes(redis_url, 1, size=1, name=a.name) as (b,):
                held = await a.acquire(timeout=10)
                got: list[Any] = []

                async def wait() -> None:
                    got.append(await b.acquire(timeout=30))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(wait)
                    await trio.sleep(0.05)
                    held.release()
                # b never hears of its grant but through its poll, about a second later.
                got[0].release()

    @pytest.mark.trio
    async def test_waiters_granted_together_are_admitted_when_the_grant_arrives(self, redis_url: str) -> None:
        """Two waiters of one process, granted by one step of another's: each stalls the
        loop once it runs again (a first call's imports do), yet both were admitted at
        the same moment, in whichever order their tasks ran, so that the admissions a
        fleet world's save records keep their ticket order (``manor replay --verify``)."""
        async with _processes(redis_url, 2, size=2, lease_s=3600) as (a, b):
            held = [await a.acquire(timeout=10), await a.acquire(timeout=10)]
            permits: dict[int, Any] = {}

            async def call(ticket: int) -> None:
                permit = await b.acquire(ticket, timeout=30)
                time.sleep(0.05)  # the stall: the other waiter's task runs after it
                permits[ticket] = permit

            async with trio.open_nursery() as nursery:
                for ticket in b.issue(2):
                    nursery.start_soon(call, ticket)
                await trio.sleep(0.1)
                for permit in held:
                    permit.release()
            first, second = sorted(permits)
            assert permits[first].admitted_at == permits[second].admitted_at
            for permit in permits.values():
                permit.release()

    @pytest.mark.trio
    async def test_a_waiter_whose_word_comes_first_waits_for_the_waiters_granted_before_it(self, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
        """b's first waiter is granted by a's release, whose word to b is lost; its
        second by b's own release, whose reply says so at once. The second waits for the
        first's word (the poll's), and both are admitted at that moment: in order."""

        async def deaf(self: RedisGate) -> None:
            await trio.sleep_forever()

        async with _processes(redis_url, 1, size=2, lease_s=3600) as (a,):
            monkeypatch.setattr(RedisGate, "_receive_grants", deaf)
            async with _processes(redis_url, 1, size=2, name=a.name, lease_s=3600) as (b,):
                held_by_a, held_by_b = await a.acquire(timeout=10), await b.acquire(timeout=10)
                permits: dict[int, Any] = {}

                async def call(ticket: int) -> None:
                    permits[ticket] = await b.acquire(ticket, timeout=30)

                async with trio.open_nursery() as nursery:
                    first, second = b.issue(2)
                    nursery.start_soon(call, first)
                    await trio.sleep(0.05)
                    nursery.start_soon(call, second)
                    await trio.sleep(0.1)
                    held_by_a.release()  # grants b's first, in a's transition
                    await trio.sleep(0.1)
                    held_by_b.release()  # grants b's second, in b's own
                    await trio.sleep(0.1)
                    assert permits == {}, "the second was let through before the first"
                assert permits[first].admitted_at == permits[second].admitted_at
                for permit in permits.values():
                    permit.release()

    @pytest.mark.trio
    async def test_an_admission_undone_keeps_its_place_in_the_order(self, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
        """b's two waiters are granted by a's releases, whose word to b is lost, and time
        out before b's poll hears of it: their admissions are undone at the server. a's
        next permit still comes after them in the order (it once reused their places, and
        a permit admitted later could show an earlier order than one admitted before)."""

        async def deaf(self: RedisGate) -> None:
            await trio.sleep_forever()

        monkeypatch.setattr(gate_redis, "POLL_S", 3600.0)  # no poll hears of the grants either
        async with _processes(redis_url, 1, size=2, lease_s=3600) as (a,):
            monkeypatch.setattr(RedisGate, "_receive_grants", deaf)
            async with _processes(redis_url, 1, size=2, name=a.name, lease_s=3600) as (b,):
                first, second = await a.acquire(timeout=10), await a.acquire(timeout=10)
                timed_out: list[int] = []

                async def wait(ticket: int) -> None:
                    try:
                        await b.acquire(ticket, timeout=0.5)
                    except GateTimeout:
                        timed_out.append(ticket)

                async with trio.open_nursery() as nursery:
                    for ticket in b.issue(2):
                        nursery.start_soon(wait, ticket)
                    # Both in line at the server before a releases (a blind 0.1 s could
                    # be too short on a loaded machine): the grants must find them.
                    with trio.fail_after(SEEN_WITHIN_S):
                        while (status := await gate_status(redis_url, a.name)) is None or status.statistics.waiting < 2:
                            await trio.sleep(0.01)
                    first.release()
                    second.release()  # grants b's two, in a's transitions: b never hears
                assert len(timed_out) == 2
                third = await a.acquire(timeout=10)
                assert (first.order, second.order, third.order) == (1, 2, 5)
                third.release()
                assert (await _settled(redis_url, a.name)).statistics.admitted == 3

    @pytest.mark.trio
    async def test_a_resize_from_any_process_is_seen_by_all_within_a_poll(self, redis_url: str) -> None:
        async with _processes(redis_url, 3, size=2) as (a, b, c):
            b.size = 5
            with trio.fail_after(SEEN_WITHIN_S):
                while (a.size, c.size) != (5, 5):
                    await trio.sleep(0.01)
            status = await resize_shared_gate(redis_url, a.name, 3)
            assert status is not None and status[1].statistics.size == 3
            with trio.fail_after(SEEN_WITHIN_S):
                while (a.size, b.size, c.size) != (3, 3, 3):
                    await trio.sleep(0.01)

    @pytest.mark.trio
    async def test_growing_the_gate_admits_waiters_of_every_process_at_once(self, redis_url: str) -> None:
        async with _processes(redis_url, 2, size=1) as (a, b):
            held = await a.acquire(timeout=10)
            admitted: list[Any] = []
            async with trio.open_nursery() as nursery:

                async def wait(gate: RedisGate) -> None:
                    permit = await gate.acquire(timeout=30)
                    admitted.append(permit)

                for gate in (a, b, b):
                    nursery.start_soon(wait, gate)
                await trio.sleep(0.1)
                assert not admitted
                a.size = 4
            assert len(admitted) == 3
            for permit in [held, *admitted]:
                permit.release()

    @pytest.mark.trio
    async def test_a_joining_process_shares_the_gate_as_it_is_and_says_so(self, redis_url: str) -> None:
        async with _processes(redis_url, 1, size=3) as (a,):
            late = RedisGate(redis_url, a.name, size=7, world="late")
            async with late.connected():
                assert late.size == 3
                (notice,) = late.notices
                assert "size 3" in notice and "size 7" in notice
        assert a.notices == []

    @pytest.mark.trio
    async def test_the_token_bucket_is_shared_and_a_timed_out_token_is_refunded(self, redis_url: str) -> None:
        """Rate 20/s, burst 2, over two processes: the first two go at once, the rest
        no faster than the rate; a waiter that times out after taking its token gives it back."""
        async with _processes(redis_url, 2, size=1, rate=20.0, burst=2) as (a, b):
            started = trio.current_time()
            times = []
            for gate in (a, b, a, b, a):
                permit = await gate.acquire(timeout=10)
                times.append(trio.current_time() - started)
                permit.release()
            assert times[-1] >= (len(times) - 2) / 20 * 0.9
            held = await a.acquire(timeout=10)
            await trio.sleep(0.2)  # the bucket fills up again
            with pytest.raises(GateTimeout):
                await b.acquire(timeout=0.1)  # takes a token, then finds no slot
            held.release()
            status = await _settled(redis_url, a.name)
        assert status.statistics.refunds >= 1 and status.statistics.timeouts >= 1

    @pytest.mark.trio
    async def test_status_names_every_process_and_what_it_holds(self, redis_url: str) -> None:
        async with _processes(redis_url, 2, size=3) as (a, b):
            permits = [await a.acquire(timeout=10), await a.acquire(timeout=10), await b.acquire(timeout=10)]
            status = await gate_status(redis_url, a.name)
            assert status is not None
            rows = {holder.world: (holder.host, holder.pid, holder.holding) for holder in status.holders}
            assert rows == {"world 0": (os.uname().nodename, str(os.getpid()), 2), "world 1": (os.uname().nodename, str(os.getpid()), 1)}
            assert status.statistics.in_flight == 3
            for permit in permits:
                permit.release()
        assert await gate_status(redis_url, a.name) is not None  # the gate stays; its processes have gone
        assert (await gate_status(redis_url, a.name)).holders == ()  # type: ignore[union-attr]

    @pytest.mark.trio
    async def test_status_says_the_rate_and_burst_the_gate_keeps(self, redis_url: str) -> None:
        """The token bucket, like the size, is the creator's and stays after every process
        has left: the status says it (a later process's own is only in its notice)."""
        async with _processes(redis_url, 1, size=3, rate=2.0, burst=3) as (gate,):
            name = gate.name
        async with _processes(redis_url, 1, size=3, name=name) as (later,):
            assert later.notices and "rate 2/s, burst 3" in later.notices[0]
        status = await gate_status(redis_url, name)
        assert status is not None and (status.rate, status.burst, status.holders) == (2.0, 3, ())


# -- crashes ----------------------------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import sys, trio
    from manor.admission.redis_gate import RedisGate

    async def main(url, name, holds, lease):
        async with RedisGate(url, name, size=2, lease_s=lease, world="child").connected() as gate:
            permits = [await gate.acquire(timeout=60) for _ in range(holds)]
            print("ready", flush=True)
            if not holds:
                await gate.acquire(timeout=60)  # waits in line until killed
            await trio.sleep_forever()

    trio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    """
)


def _child(url: str, name: str, holds: int, lease: float) -> subprocess.Popen[str]:
    """A process that takes ``holds`` permits (or, none, waits in line) and stays."""
    child = subprocess.Popen([sys.executable, "-c", _CHILD, url, name, str(holds), str(lease)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    if holds:
        assert child.stdout.readline().strip() == "ready"
    return child


class TestCrashes:
    @pytest.mark.trio
    async def test_permits_of_a_killed_process_come_back_within_the_lease_and_a_poll(self, redis_url: str) -> None:
        name = _name()
        child = _child(redis_url, name, holds=2, lease=1.0)
        try:
            async with _processes(redis_url, 1, size=2, name=name) as (gate,):
                assert gate.lease_s == 1.0  # the gate's own, as its creator set it
                child.send_signal(signal.SIGKILL)
                child.wait()
                started = trio.current_time()
                permits = [await gate.acquire(timeout=10), await gate.acquire(timeout=10)]
                # Within the lease and one poll of the survivor, which sweeps expired
                # leases (docs/fleet.md says so); 0.5 s more for a loaded machine.
                assert trio.current_time() - started < 1.0 + min(gate_redis.POLL_S, 1.0 / 3) + 0.5
                for permit in permits:
                    permit.release()
            status = await _settled(redis_url, name)
        finally:
            child.kill()
        assert status.holders == () and status.statistics.in_flight == 0

    @pytest.mark.trio
    async def test_a_killed_waiter_leaves_the_line(self, redis_url: str) -> None:
        name = _name()
        # A lease of 3 s, not 1: on a machine loaded 13 deep the holder's renewals were
        # starved past a 1 s lease, its permit lapsed to the child, and no waiter ever
        # appeared. The dead waiter leaves within the lease and a poll.
        async with _processes(redis_url, 1, size=1, name=name, lease_s=3.0) as (gate,):
            held = await gate.acquire(timeout=10)
            child = _child(redis_url, name, holds=0, lease=3.0)
            try:
                with trio.fail_after(60):  # a bound, not a wait: the child's start under load
                    while (await gate_status(redis_url, name)).statistics.waiting != 1:  # type: ignore[union-attr]
                        await trio.sleep(0.02)
                child.send_signal(signal.SIGKILL)
                child.wait()
                async with trio.open_nursery() as nursery:
                    got: list[Any] = []

                    async def wait() -> None:
                        got.append(await gate.acquire(timeout=30))

                    nursery.start_soon(wait)
                    await trio.sleep(0.05)
                    held.release()  # the dead waiter is first in line; it must not get the slot forever
            finally:
                child.kill()
            got[0].release()
        status = await _settled(redis_url, name)
        assert status.holders == ()

    @pytest.mark.trio
    async def test_losing_redis_fails_waiters_keeps_calls_and_comes_back(self, redis_server: RedisServer) -> None:
        """Redis killed: the waiter degrades (gate_unavailable), the call in flight goes on,
        new calls degrade at once; Redis back (empty): the gate is made again and admits."""
        async with _processes(redis_server.url, 2, size=1, lease_s=1.0) as (a, b):
            held = await a.acquire(timeout=10)
            async with trio.open_nursery() as nursery:
                failures: list[BaseException] = []

                async def wait() -> None:
                    try:
                        await b.acquire(timeout=30)
                    except GateUnavailable as exc:
                        failures.append(exc)

                nursery.start_soon(wait)
                await trio.sleep(0.1)
                redis_server.kill()
            assert failures and str(redis_server.port) in str(failures[0])
            with pytest.raises(GateUnavailable, match="Redis unreachable"):
                await a.acquire(timeout=10)
            assert not a.available
            held.release()  # the call in flight ended: nothing to send, nothing raised
            redis_server.start()
            with trio.fail_after(15):
                while not (a.available and b.available):
                    await trio.sleep(0.05)
            permit = await b.acquire(timeout=10)  # after the hold that lets holders come back
            permit.release()
            assert a.losses >= 1 and b.losses >= 1

    @pytest.mark.trio
    async def test_an_unreachable_server_at_start_is_one_line_naming_it(self) -> None:
        with pytest.raises(SharedGateError, match=r"^gate redis://127.0.0.1:1/0 \(gate x\): cannot reach Redis: "):
            async with RedisGate("redis://127.0.0.1:1/0", "x", size=1).connected():
                pass

    def test_check_reachable_says_so_in_one_line(self) -> None:
        with pytest.raises(SharedGateError, match=r"^gate redis://:\*\*\*@127.0.0.1:1/0 \(gate x\): cannot reach Redis"):
            trio.run(RedisGate("redis://:hunter22@127.0.0.1:1/0", "x", size=1).check_reachable)

    def test_without_the_redis_extra_the_error_says_what_to_install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setitem(sys.modules, "coredis", None)
        with pytest.raises(SharedGateError, match=r"pip install 'manor\[redis\]'"):
            RedisGate("redis://127.0.0.1:1/0", "x", size=1)


def test_the_dashboard_has_a_gate_unavailable_row_only_for_a_shared_gate() -> None:
    """Only a gate on a server can be lost: its panel has the row, the in-process one not;
    only structured answers can be invalid: the invalid_output row likewise."""
    from manor.errors import REASONS
    from manor.play.widgets.degradations import SHORT_REASONS, shown_reasons

    assert shown_reasons(shared_gate=True, shaped=True) == REASONS
    assert shown_reasons(shared_gate=False, shaped=True) == tuple(reason for reason in REASONS if reason != "gate_unavailable")
    assert shown_reasons(shared_gate=True, shaped=False) == tuple(reason for reason in REASONS if reason != "invalid_output")
    assert set(SHORT_REASONS) == set(REASONS)
