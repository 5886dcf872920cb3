"""Property tests of the gate: random arrivals, latencies, failures, timeouts,
cancellations and withdrawals, with and without the token bucket, under the virtual
clock.

Each example runs real tasks against a real ``Gate`` and records what every caller saw
(arrived, admitted, timed out, cancelled, released) with the gate's counters at that
moment, plus a probe of the settled state between instants. A reference model of the
gate's rules then replays the record, instant by instant, with exact arithmetic, and
checks every step: admissions strictly by ticket and only into a free slot with a token
in hand, no slot or token left unused while a waiter could take it, timeouts exactly at
their deadline, a refund exactly when a waiter leaves holding a token.

Same-instant events can legitimately go either way when trio's run order decides (a
waiter whose deadline is the instant a slot frees may be admitted or time out). Where
that is so, the model accepts either outcome and follows the one observed; everywhere
else it demands the one outcome the rules allow.
"""

from __future__ import annotations

import itertools
import math
import unittest.mock
from fractions import Fraction
from typing import TYPE_CHECKING

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from strategies import GRID, CallSpec, GateScenario, gate_scenarios

from manor import Gate, GateTimeout, ProviderError
from manor.admission import gate as gate_module

if TYPE_CHECKING:
    from conftest import GateOperations

# -- recording a run ---------------------------------------------------------------


@attrs.frozen
class Obs:
    """One thing one caller saw, with the gate's counters right after it."""

    time: float
    kind: str  # arrived, withdrawn, admitted, timeout, cancelled, released, resized, probe
    index: int  # the caller (-1 for the probe and resizes)
    refunds: int
    in_flight: int
    waiting: int
    ticket: int | None = None
    queued_at: float | None = None
    admitted_at: float | None = None
    size: int | None = None


async def _run(scenario: GateScenario, ops: GateOperations) -> tuple[Gate, list[Obs]]:
    gate = Gate(size=scenario.size, rate=scenario.rate, burst=scenario.burst)
    trace: list[Obs] = []
    holding = 0  # permits held, by our own count
    ceiling = scenario.size  # in flight may exceed size only after a shrink, until calls finish

    def observe(kind: str, index: int, **extra: object) -> None:
        stats = gate.statistics()
        # At every instant, in flight <= size: the gate's own count and ours.
        assert stats.in_flight <= ceiling, (kind, index, stats)
        assert holding <= stats.in_flight
        trace.append(Obs(trio.current_time(), kind, index, stats.refunds, stats.in_flight, stats.waiting, **extra))

    tickets: list[int | None] = list(gate.issue(len(scenario.calls))) if scenario.upfront else [None] * len(scenario.calls)

    async def caller(index: int) -> None:
        nonlocal holding, ceiling
        spec = scenario.calls[index]
        await trio.sleep_until(spec.arrival)
        if spec.withdrawn:
            gate.withdraw(tickets[index])  # type: ignore[arg-type]
            ops.withdrawals += 1
            observe("withdrawn", index)
            return
        with trio.move_on_at(spec.cancel_at):
            observe("arrived", index)
            ops.acquires += 1
            try:
                permit = await gate.acquire(tickets[index], timeout=spec.timeout)
            except GateTimeout:
                observe("timeout", index)
                return
            except trio.Cancelled:
                observe("cancelled", index)
                raise
            holding += 1
            observe("admitted", index, ticket=permit.ticket, queued_at=permit.queued_at, admitted_at=permit.admitted_at)
            try:
                await trio.sleep(spec.latency)
                if spec.fails:
                    raise ProviderError("simulated failure")
            except ProviderError:
                pass  # the call failed; its permit is released all the same, its token stays spent
            finally:
                permit.release()
                ops.releases += 1
                holding -= 1
                ceiling = max(gate.size, min(ceiling, gate.statistics().in_flight))
                observe("released", index)

    async def resizer() -> None:
        nonlocal ceiling
        for at, size in scenario.resizes:
            await trio.sleep_until(at)
            ceiling = max(size, gate.statistics().in_flight)
            gate.size = size
            observe("resized", -1, size=size)

    async def probe() -> None:
        # Events fall on the grid, or (after a resize) at most 7/64 s past it: half-way
        # between grid points the state the gate shows is settled.
        for step in itertools.count():
            await trio.sleep_until(step * GRID + GRID / 2)
            observe("probe", -1)

    with trio.fail_after(10_000):
        async with trio.open_nursery() as outer:
            outer.start_soon(probe)
            async with trio.open_nursery() as callers:
                callers.start_soon(resizer)
                for index in scenario.spawn_order:
                    callers.start_soon(caller, index)
            outer.cancel_scope.cancel()
    return gate, trace


def run_scenario(scenario: GateScenario, ops: GateOperations) -> tuple[Gate, list[Obs]]:
    """Run ``scenario`` under the virtual clock (the gate's waits timed by its own
    timekeeper, as always)."""
    ops.examples += 1
    return trio.run(_run, scenario, ops, clock=trio.testing.MockClock(autojump_threshold=0))


# -- the reference model -----------------------------------------------------------

ISSUED, WAIT_TOKEN, WAIT_SLOT, ADMITTED, GONE = range(5)
_WAITING = (WAIT_TOKEN, WAIT_SLOT)


@attrs.define
class _Caller:
    index: int
    ticket: int
    stage: int = ISSUED
    token_at: Fraction | None = None
    queued_at: Fraction | None = None
    deadline: Fraction | float = math.inf
    cancel_at: Fraction | float = math.inf
    admitted_at: Fraction | None = None
    releases: int = 0
    outcome: str = ""


class ModelError(AssertionError):
    pass


class GateModel:
    """The gate's rules, replayed over a recorded run with exact arithmetic."""

    def __init__(self, scenario: GateScenario) -> None:
        self.scenario = scenario
        self.size = scenario.size
        self.rate = Fraction(scenario.rate)
        self.burst = Fraction(scenario.burst)
        self.tokens = self.burst
        self.refilled_at = Fraction(0)
        self.now = Fraction(0)
        self.callers: dict[int, _Caller] = {}  # by ticket
        self.by_index: dict[int, _Caller] = {}
        self.next_ticket = 0
        self.in_flight = 0
        # The peak depends on run order within an instant (a call that arrives the
        # instant another ends may be let in just before or just after the release):
        # the model knows it only between these bounds.
        self.peak = 0
        self.peak_bound = 0
        self.refunds = 0
        self.seen_refunds = 0
        self.arrivals = self.admitted = self.timeouts = self.cancelled = 0
        self.waits: list[Fraction] = []
        if scenario.upfront:
            for index in range(len(scenario.calls)):
                self._issue(index)

    # -- the rules --

    def _issue(self, index: int) -> _Caller:
        caller = _Caller(index, self.next_ticket)
        self.next_ticket += 1
        self.callers[caller.ticket] = self.by_index[index] = caller
        return caller

    def _in_line(self, stages: tuple[int, ...]) -> list[_Caller]:
        return [c for _, c in sorted(self.callers.items()) if c.stage in stages]

    def _refill(self, t: Fraction) -> None:
        # A refund may lift the bucket past ``burst`` for the instant it happens in
        # (so that it commutes with a token taken at that instant); time passing caps it.
        if t > self.refilled_at:
            self.tokens = min(self.burst, self.tokens + (t - self.refilled_at) * self.rate)
        self.refilled_at = t

    def _grant_tokens(self, t: Fraction) -> None:
        """Tokens go to arrived callers strictly in ticket order; an issued ticket that
        has not arrived holds up the ones behind it."""
        if not self.rate:
            return
        self._refill(t)
        for caller in self._in_line((ISSUED, WAIT_TOKEN)):
            if caller.stage != WAIT_TOKEN or self.tokens < 1 or self._expired(caller, t):
                break
            self.tokens -= 1
            caller.stage = WAIT_SLOT
            caller.token_at = t

    def _admissible(self, t: Fraction) -> list[_Caller]:
        """Who the gate must admit at ``t``: the head of the line, while slots are free."""
        free = self.size - self.in_flight
        admit = []
        for caller in self._in_line((ISSUED, WAIT_TOKEN, WAIT_SLOT)):
            if caller.stage != WAIT_SLOT or len(admit) >= free or self._expired(caller, t):
                break
            admit.append(caller)
        return admit

    @staticmethod
    def _expired(caller: _Caller, t: Fraction) -> bool:
        """At its deadline a waiter times out and takes nothing, whatever frees up at that
        instant; only a zero timeout (a try, at the instant it arrives) may still take."""
        assert caller.queued_at is not None
        return caller.deadline <= t and caller.queued_at < t

    def _fail(self, t: Fraction, message: str) -> None:
        raise ModelError(f"at t={float(t)}: {message}")

    # -- replaying --

    def replay(self, trace: list[Obs]) -> None:
        times = [o.time for o in trace]
        assert times == sorted(times), "the virtual clock went backwards"
        for time, group in itertools.groupby(trace, key=lambda o: o.time):
            self._instant(Fraction(time), list(group))
        for caller in self.callers.values():
            if caller.stage != GONE:
                self._fail(self.now, f"ticket {caller.ticket} never finished (stage {caller.stage})")

    def _advance(self, t: Fraction) -> None:
        """Let time pass up to (not including) ``t``, where the next record is. Token
        refills in between may hand out tokens; none may make an admission due, for
        an admission shows in the record at the instant it happens."""
        while self.rate:
            line = self._in_line((ISSUED, WAIT_TOKEN))
            if not line or line[0].stage != WAIT_TOKEN:
                break
            self._refill(self.now)
            assert self.tokens < 1
            eta = self.now + (1 - self.tokens) / self.rate
            if eta >= t:
                break
            self.now = eta
            self._grant_tokens(eta)
            if due := self._admissible(eta):
                self._fail(eta, f"ticket {due[0].ticket} has a token and a free slot but was not admitted")
        for caller in self._in_line(_WAITING):
            if min(caller.deadline, caller.cancel_at) < t:
                self._fail(t, f"ticket {caller.ticket} outlived its deadline or cancellation")
        self.now = t

    def _instant(self, t: Fraction, group: list[Obs]) -> None:
        self._advance(t)
        in_flight_before = self.in_flight
        # A refill that lands exactly now is handed out now.
        self._grant_tokens(t)
        admitted_now: dict[int, Obs] = {}
        released_now: list[_Caller] = []
        for obs in group:
            refunded = obs.refunds - self.seen_refunds
            self.seen_refunds = obs.refunds
            if obs.kind not in ("timeout", "cancelled") and refunded:
                self._fail(t, f"{refunded} refund(s) on {obs.kind} of caller {obs.index}")
            if obs.kind == "probe":
                self._probe(t, obs)
            elif obs.kind == "resized":
                assert obs.size is not None
                self.size = obs.size
            elif obs.kind == "withdrawn":
                caller = self.by_index[obs.index]
                if caller.stage != ISSUED:
                    self._fail(t, f"withdrew ticket {caller.ticket} in stage {caller.stage}")
                caller.stage = GONE
                caller.outcome = "withdrawn"
                self._grant_tokens(t)
            elif obs.kind == "arrived":
                self._arrive(t, obs)
            elif obs.kind in ("timeout", "cancelled"):
                self._leave(t, obs, refunded)
            elif obs.kind == "admitted":
                admitted_now[obs.index] = obs
            elif obs.kind == "released":
                caller = self.by_index[obs.index]
                if obs.index in admitted_now:
                    released_now.append(caller)  # admitted this very instant: see below
                else:
                    self._release(t, caller)
            else:  # pragma: no cover
                raise AssertionError(obs.kind)
        # Now the slots: whoever is due is admitted, and a permit given back at this
        # same instant passes on at once.
        expected: list[_Caller] = []
        while due := self._admissible(t):
            for caller in due:
                self._admit(t, caller)
            expected += due
            for caller in [c for c in released_now if c.stage == ADMITTED]:
                released_now.remove(caller)
                self._release(t, caller)
        if released_now:
            self._fail(t, f"released tickets {[c.ticket for c in released_now]} that were never admitted")
        # A waiter cancelled this instant may have been admitted for a moment first.
        cancelled_now = sum(o.kind == "cancelled" for o in group)
        self.peak_bound = max(
            self.peak_bound, in_flight_before, min(self.size, in_flight_before + len(admitted_now) + cancelled_now)
        )
        observed = sorted(self.by_index[i].ticket for i in admitted_now)
        if observed != [c.ticket for c in expected]:
            self._fail(t, f"admitted tickets {observed}, the rules admit {[c.ticket for c in expected]}")
        for index, obs in admitted_now.items():
            caller = self.by_index[index]
            assert obs.ticket == caller.ticket, "the permit names another ticket"
            assert obs.admitted_at == t and obs.queued_at == caller.queued_at, obs
        for caller in self._in_line(_WAITING):
            if min(caller.deadline, caller.cancel_at) <= t:
                self._fail(t, f"ticket {caller.ticket} is still waiting past its deadline or cancellation")

    def _arrive(self, t: Fraction, obs: Obs) -> None:
        spec = self.scenario.calls[obs.index]
        caller = self.by_index[obs.index] if self.scenario.upfront else self._issue(obs.index)
        if caller.stage != ISSUED:
            self._fail(t, f"ticket {caller.ticket} arrived twice")
        self.arrivals += 1
        caller.stage = WAIT_TOKEN if self.rate else WAIT_SLOT
        caller.queued_at = t
        caller.deadline = t + Fraction(spec.timeout) if math.isfinite(spec.timeout) else math.inf
        caller.cancel_at = Fraction(spec.cancel_at) if math.isfinite(spec.cancel_at) else math.inf
        self._grant_tokens(t)

    def _leave(self, t: Fraction, obs: Obs, refunded: int) -> None:
        """A waiter gives up: it must hold nothing afterwards, and its token (if it
        took one) goes back to the bucket."""
        caller = self.by_index[obs.index]
        if caller.stage not in _WAITING:
            self._fail(t, f"ticket {caller.ticket} left the gate in stage {caller.stage}")
        due = caller.deadline if obs.kind == "timeout" else caller.cancel_at
        if due != t:
            self._fail(t, f"ticket {caller.ticket}: {obs.kind} at {float(t)}, due at {float(due)}")
        if caller.stage == WAIT_SLOT and self.rate:
            # Holding a token: refunded. If it got the token this very instant while
            # being cancelled (or trying with a zero timeout), trio's run order decides
            # whether it left just before or just after; the bucket ends up the same
            # either way, only the refund count differs.
            racing = obs.kind == "cancelled" or caller.queued_at == t
            allowed = {0, 1} if caller.token_at == t and racing else {1}
            self._refill(t)
            self.tokens += 1
        else:
            allowed = {0}
        if refunded not in allowed:
            self._fail(t, f"ticket {caller.ticket} left ({obs.kind}) with {refunded} refund(s), expected {allowed}")
        self.refunds += refunded
        caller.stage = GONE
        caller.outcome = obs.kind
        if obs.kind == "timeout":
            self.timeouts += 1
        else:
            self.cancelled += 1
        self._grant_tokens(t)

    def _admit(self, t: Fraction, caller: _Caller) -> None:
        assert caller.queued_at is not None
        caller.stage = ADMITTED
        caller.admitted_at = t
        caller.outcome = "admitted"
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        self.admitted += 1
        self.waits.append(t - caller.queued_at)

    def _release(self, t: Fraction, caller: _Caller) -> None:
        if caller.stage != ADMITTED:
            self._fail(t, f"ticket {caller.ticket} released in stage {caller.stage}")
        assert caller.admitted_at is not None
        spec = self.scenario.calls[caller.index]
        end = min(caller.admitted_at + Fraction(spec.latency), caller.cancel_at)
        assert end == t, f"harness: ticket {caller.ticket} released at {float(t)}, due at {float(end)}"
        caller.stage = GONE
        caller.releases += 1
        self.in_flight -= 1

    def _probe(self, t: Fraction, obs: Obs) -> None:
        waiting = len(self._in_line(_WAITING))
        if (obs.in_flight, obs.waiting, obs.refunds) != (self.in_flight, waiting, self.refunds):
            self._fail(
                t,
                f"gate shows in_flight={obs.in_flight} waiting={obs.waiting} refunds={obs.refunds}, "
                f"model has {self.in_flight}, {waiting}, {self.refunds}",
            )


def check(scenario: GateScenario, gate: Gate, trace: list[Obs]) -> GateModel:
    """Replay ``trace`` through the model, then check the gate's statistics add up."""
    model = GateModel(scenario)
    model.replay(trace)
    admitted = [c for c in model.callers.values() if c.outcome == "admitted"]
    # Every admitted call released exactly once; nobody else released anything.
    assert all(c.releases == 1 for c in admitted)
    assert all(c.releases == 0 for c in model.callers.values() if c.outcome != "admitted")
    # Admission order is ticket order: sorted by admission time, the tickets ascend.
    by_time = sorted(admitted, key=lambda c: (c.admitted_at, c.ticket))
    assert [c.ticket for c in by_time] == sorted(c.ticket for c in admitted)
    stats = gate.statistics()
    kinds = [o.kind for o in trace]
    assert stats.admitted == model.admitted == kinds.count("admitted")
    assert stats.timeouts == model.timeouts == kinds.count("timeout")
    assert stats.cancelled == model.cancelled == kinds.count("cancelled")
    assert stats.admitted + stats.timeouts + stats.cancelled == model.arrivals == kinds.count("arrived")
    assert stats.refunds == model.refunds
    assert (stats.in_flight, stats.waiting) == (0, 0)
    assert model.peak <= stats.peak_in_flight <= model.peak_bound
    assert stats.total_wait == float(sum(model.waits))
    assert stats.max_wait == float(max(model.waits, default=0))
    if stats.tokens_available is not None:
        assert 0 <= stats.tokens_available <= scenario.burst
    return model


# -- the properties ----------------------------------------------------------------


@settings(max_examples=300)
@given(scenario=gate_scenarios(bucket=False))
def test_concurrency_only_gate_follows_its_rules(scenario: GateScenario, gate_operations: GateOperations) -> None:
    """Without a token bucket: in flight <= size, ticket order, exact timeouts, stats add up."""
    check(scenario, *run_scenario(scenario, gate_operations))


@settings(max_examples=300)
@given(scenario=gate_scenarios(bucket=True))
def test_bucketed_gate_follows_its_rules_and_refunds_exactly(scenario: GateScenario, gate_operations: GateOperations) -> None:
    """With a token bucket: tokens then slots in ticket order, refunds exactly when a token-holder leaves."""
    check(scenario, *run_scenario(scenario, gate_operations))


@settings(max_examples=150)
@given(scenario=gate_scenarios(resizes=True))
def test_resized_gate_admits_only_below_its_current_size(scenario: GateScenario, gate_operations: GateOperations) -> None:
    """Resizing while running: growing admits at once, shrinking waits for calls to finish."""
    check(scenario, *run_scenario(scenario, gate_operations))


@settings(max_examples=150)
@given(scenario=gate_scenarios(bucket=False))
def test_a_timekeeper_that_leaves_out_every_wait_over_at_once_follows_the_rules(scenario: GateScenario, gate_operations: GateOperations) -> None:
    """The timekeeper's heap left out of the waits that are over at every wait watched
    (``Gate._compact_watched``; a gate does it once they outnumber the waits watched):
    timeouts still exactly at their deadlines, and every other rule as before."""
    with unittest.mock.patch.object(gate_module, "_WATCH_SLACK", -(2**31)):
        check(scenario, *run_scenario(scenario, gate_operations))


# -- the model catches what it should --------------------------------------------


def test_model_rejects_an_admission_out_of_ticket_order(gate_operations: GateOperations) -> None:
    """The checker is not vacuous: a record with two tickets admitted in swapped order fails."""
    scenario = GateScenario(
        size=1, rate=0.0, burst=1, upfront=True, calls=(CallSpec(0.0, 1.0), CallSpec(0.0, 1.0)), spawn_order=(0, 1)
    )
    gate, trace = run_scenario(scenario, gate_operations)
    check(scenario, gate, trace)
    swapped = [attrs.evolve(o, index=1 - o.index, ticket=1 - o.ticket if o.ticket is not None else None) if o.index >= 0 else o for o in trace]
    with pytest.raises(ModelError, match="admitted tickets"):
        GateModel(scenario).replay(swapped)
