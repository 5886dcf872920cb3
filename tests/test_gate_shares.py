"""Fair shares at the gate: lanes served by start-time fair queuing on each ticket's cost,
with weights and caps. Under the virtual clock, times are exact."""

from __future__ import annotations

import json
import math

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from manor import Gate
from manor.fleet.shares import Tenant, tenant_shares

#: A call: (lane, latency); its cost at the gate is its latency (a perfect prediction).
Call = tuple[int, float]


def _run(
    size: int, calls: list[Call], *, weights: dict[int, float] | None = None, caps: dict[int, int] | None = None, claim_s: float = 0.0
) -> dict[str, object]:
    """Issue every call's ticket up front, lane by lane in lane order (as the ticket
    office deals them), run them all, and say what happened."""
    gate = Gate(size=size, claim_s=claim_s)
    for lane, weight in (weights or {}).items():
        gate.set_share(lane, weight, (caps or {}).get(lane))
    for lane, cap in (caps or {}).items():
        if lane not in (weights or {}):
            gate.set_share(lane, 1.0, cap)
    admitted: list[tuple[float, int, int]] = []  # (when, lane, ticket)
    spans: dict[int, list[tuple[float, float | None, float]]] = {}
    holding: dict[int, int] = {}
    peaks: dict[int, int] = {}
    free_while_waiting = []

    waiting: dict[int, int] = {}

    async def one(lane: int, ticket: int, latency: float) -> None:
        queued = trio.current_time()
        waiting[lane] = waiting.get(lane, 0) + 1
        permit = await gate.acquire(ticket)
        waiting[lane] -= 1
        admitted.append((trio.current_time(), lane, ticket))
        holding[lane] = holding.get(lane, 0) + 1
        peaks[lane] = max(peaks.get(lane, 0), holding[lane])
        try:
            await trio.sleep(latency)
        finally:
            holding[lane] -= 1
            permit.release()
            spans.setdefault(lane, []).append((queued, permit.admitted_at, trio.current_time()))

    async def watch() -> None:
        # After every instant: no slot free while an uncapped lane has a waiter.
        while True:
            await trio.testing.wait_all_tasks_blocked()
            eligible = [lane for lane, count in waiting.items() if count and holding.get(lane, 0) < (caps or {}).get(lane, size)]
            if eligible and gate.statistics().in_flight < size:
                free_while_waiting.append(trio.current_time())
            await trio.sleep(0.25)

    async def main() -> None:
        by_lane: dict[int, list[float]] = {}
        for lane, latency in calls:
            by_lane.setdefault(lane, []).append(latency)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            async with trio.open_nursery() as workers:
                for lane in sorted(by_lane):
                    tickets = gate.issue(len(by_lane[lane]), lane=lane, costs=by_lane[lane])
                    for ticket, latency in zip(tickets, by_lane[lane], strict=True):
                        workers.start_soon(one, lane, ticket, latency)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return {"admitted": sorted(admitted), "spans": spans, "peaks": peaks, "free_while_waiting": free_while_waiting, "end": max(t for t, _, _ in admitted)}


calls_strategy = st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0.5, 1.0, 3.0, 20.0])), min_size=1, max_size=30)


class TestInvariants:
    @settings(max_examples=60, deadline=None)
    @given(calls=calls_strategy, size=st.integers(1, 5), caps=st.dictionaries(st.integers(0, 3), st.integers(1, 3), max_size=2))
    def test_caps_and_the_bound_hold_and_no_slot_idles_while_an_eligible_lane_waits(self, calls: list[Call], size: int, caps: dict[int, int]) -> None:
        result = _run(size, calls, caps=caps)
        peaks = result["peaks"]
        assert sum(1 for _ in result["admitted"]) == len(calls)
        for lane, cap in caps.items():
            assert peaks.get(lane, 0) <= cap
        assert all(peak <= size for peak in peaks.values())
        assert result["free_while_waiting"] == []

    @settings(max_examples=40, deadline=None)
    @given(latencies=st.lists(st.sampled_from([0.5, 1.0, 3.0]), min_size=1, max_size=20), size=st.integers(1, 4))
    def test_one_lane_is_plain_ticket_order(self, latencies: list[float], size: int) -> None:
        """A single tenant: whatever the costs, tickets are admitted in their order."""
        result = _run(size, [(0, latency) for latency in latencies])
        tickets = [ticket for _, _, ticket in result["admitted"]]
        assert tickets == sorted(tickets)

    @settings(max_examples=20, deadline=None)
    @given(calls=calls_strategy, size=st.integers(1, 4))
    def test_the_same_admissions_every_run(self, calls: list[Call], size: int) -> None:
        """trio runs the tasks in its own order each time: admissions never change."""
        first = _run(size, calls)["admitted"]
        assert all(_run(size, calls)["admitted"] == first for _ in range(5))


class TestShares:
    def test_long_calls_do_not_take_the_gate_from_short_ones(self) -> None:
        """Lane 0: 40 calls of 20 s; lane 1: 400 calls of 1 s, a gate of 4. Both always
        backlogged: each holds about half the session-time, not 20 times as much."""
        calls = [(0, 20.0)] * 40 + [(1, 1.0)] * 400
        result = _run(4, calls)
        shares = tenant_shares([Tenant("long"), Tenant("short")], [result["spans"][0], result["spans"][1]])
        ratio = shares[0]["session_s_backlogged"] / shares[1]["session_s_backlogged"]
        assert 0.85 < ratio < 1.2, ratio

    def test_weights_two_to_one(self) -> None:
        """Both lanes always backlogged, calls alike: session-time 2:1 within 5 %."""
        calls = [(0, 1.0)] * 300 + [(1, 1.0)] * 300
        result = _run(3, calls, weights={0: 2.0})
        shares = tenant_shares([Tenant("a", 2.0), Tenant("b")], [result["spans"][0], result["spans"][1]])
        ratio = shares[0]["session_s_backlogged"] / shares[1]["session_s_backlogged"]
        assert math.isclose(ratio, 2.0, rel_tol=0.05), ratio
        assert math.isclose(shares[0]["share_per_weight"], 1.0, rel_tol=0.05)


def _ticks(claim_s: float, *, ticks: int = 5, stop: bool = False) -> dict[str, object]:
    """Lane 0: forty calls of 20 s, all issued at 0. Lane 1: ``ticks`` ticks of four
    calls of 1 s, each issued when the last one's calls have ended (as a world's tick
    loop does). A gate of 4. Returns each of lane 1's tick makespans, lane 0's most
    calls in flight while lane 1 had a tick out, and lane 0's admission times."""
    gate = Gate(size=4, claim_s=claim_s)
    holding = {0: 0, 1: 0}
    peak_beside = []
    admitted_0: list[float] = []
    makespans: list[float] = []

    async def one(lane: int, ticket: int, latency: float) -> None:
        permit = await gate.acquire(ticket)
        holding[lane] += 1
        if lane == 0:
            admitted_0.append(trio.current_time())
        try:
            await trio.sleep(latency)
        finally:
            holding[lane] -= 1
            permit.release()

    async def small(first: range) -> None:
        for tick in range(ticks):
            began = trio.current_time()
            async with trio.open_nursery() as calls:
                for ticket in first if not tick else gate.issue(4, lane=1, costs=[1.0] * 4):
                    calls.start_soon(one, 1, ticket, 1.0)
                await trio.sleep(0)
                peak_beside.append(holding[0])
            makespans.append(trio.current_time() - began)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            # Both lanes' first tickets at one instant, as the ticket office deals them.
            long = gate.issue(40, lane=0, costs=[20.0] * 40)
            nursery.start_soon(small, gate.issue(4, lane=1, costs=[1.0] * 4))
            for ticket in long:
                nursery.start_soon(one, 0, ticket, 20.0)
            if not stop:
                await trio.sleep(25.0)
                nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return {"makespans": makespans, "peak_beside": peak_beside, "admitted_0": admitted_0}


class TestClaims:
    """A tenant between its ticks keeps a claim on its share (``claim_s``)."""

    def test_a_tenant_between_ticks_finds_its_share_free(self) -> None:
        """Without claims, the slots the small lane frees at the end of each tick go to
        the long lane for 20 s, and its next ticks crawl on what is left; with them, the
        long lane holds at most its share (2 of 4) and every tick takes 2 s."""
        claimed = _ticks(2.0)
        assert claimed["makespans"] == [2.0] * 5
        assert max(claimed["peak_beside"]) == 2
        lent = _ticks(0.0)
        assert max(lent["makespans"]) > 2.0 and max(lent["peak_beside"]) > 2

    def test_a_claim_lapses_claim_s_after_the_last_call(self) -> None:
        """The small lane's one tick ends at 2 s: the long lane takes its other two
        slots at 2 + claim_s, when the claim lapses (nothing else happens then)."""
        result = _ticks(3.0, ticks=1, stop=True)
        assert result["makespans"] == [2.0]
        assert sorted(result["admitted_0"])[:4] == [0.0, 0.0, 5.0, 5.0]

    @settings(max_examples=40, deadline=None)
    @given(calls=calls_strategy, size=st.integers(1, 5), caps=st.dictionaries(st.integers(0, 3), st.integers(1, 3), max_size=2))
    def test_with_claims_caps_and_the_bound_hold_and_every_call_is_admitted(self, calls: list[Call], size: int, caps: dict[int, int]) -> None:
        result = _run(size, calls, caps=caps, claim_s=1.5)
        assert len(result["admitted"]) == len(calls)
        for lane, cap in caps.items():
            assert result["peaks"].get(lane, 0) <= cap
        assert all(peak <= size for peak in result["peaks"].values())

    @settings(max_examples=15, deadline=None)
    @given(calls=calls_strategy, size=st.integers(1, 4))
    def test_with_claims_the_same_admissions_every_run(self, calls: list[Call], size: int) -> None:
        first = _run(size, calls, claim_s=1.5)["admitted"]
        assert all(_run(size, calls, claim_s=1.5)["admitted"] == first for _ in range(4))

    @settings(max_examples=20, deadline=None)
    @given(latencies=st.lists(st.sampled_from([0.5, 1.0, 3.0]), min_size=1, max_size=20), size=st.integers(1, 4))
    def test_one_lane_claims_nothing(self, latencies: list[float], size: int) -> None:
        calls = [(0, latency) for latency in latencies]
        assert _run(size, calls, claim_s=2.0)["admitted"] == _run(size, calls)["admitted"]


class TestSharesWithCaps:
    """A capped tenant's due is its weight's part of the sessions, never more than its
    cap; the rest goes to the others by weight. Before, a tenant waiting at its cap was
    not counted and one of cap 1 counted only while it held nothing: its share read 0
    and a fleet of capped worlds read Jain 0.5 while the caps were doing their job."""

    def test_a_tenant_at_its_cap_has_its_due(self) -> None:
        # A gate of 3 over 10 s: A (cap 1) holds 1, B holds 2; both always have a call waiting.
        a = [(0.0, 0.0, 10.0), (0.0, 10.0, 11.0)]
        b = [(0.0, 0.0, 10.0), (0.0, 0.0, 10.0), (0.0, 10.0, 11.0)]
        shares = tenant_shares([Tenant("a", max_sessions=1), Tenant("b")], [a, b])
        assert [share["share_per_weight"] for share in shares] == [1.0, 1.0]
        assert shares[0]["backlogged_share"] == pytest.approx(1 / 3, abs=1e-6)

    def test_a_cap_above_the_weights_part_changes_nothing(self) -> None:
        a = [(0.0, 0.0, 10.0), (0.0, 10.0, 11.0)]
        b = [(0.0, 0.0, 10.0), (0.0, 0.0, 10.0), (0.0, 10.0, 11.0)]
        capped = tenant_shares([Tenant("a", max_sessions=5), Tenant("b")], [a, b])
        free = tenant_shares([Tenant("a"), Tenant("b")], [a, b])
        assert capped == free
        # Due 1.5 each, A got 1 and B 2 of the 3 sessions.
        assert [share["share_per_weight"] for share in free] == pytest.approx([2 / 3, 4 / 3], abs=1e-6)

    def test_a_fleet_of_capped_worlds_reads_fair(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Four manors, two capped at one call: every world's share ÷ due near 1."""
        from manor.cli import main

        assert main(["fleet", "--worlds", "4", "--scenes", "wacky_manor:1:1,wacky_manor", "--ticks", "3", "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert [world["max_sessions"] for world in summary["worlds"]] == [1, None, 1, None]
        assert all(world["share_per_weight"] is not None for world in summary["worlds"])
        assert summary["fairness"]["jain_share_per_weight"] >= 0.95, summary["fairness"]
