"""Layers around a provider: deferred admission, per-call timeout, circuit breaker,
metrics and cost, composed by a Stack in priority order.

Backends here are plain async generator functions (``Scripted``), the way httpx tests
use ``MockTransport(handler)``.
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing

import pytest
import trio
import trio.testing
from hypothesis import example, given, settings
from hypothesis import strategies as st

from manor import (
    REASONS,
    Admitted,
    BreakerLayer,
    BreakerState,
    BudgetExceeded,
    CallError,
    CallTimeout,
    CircuitOpen,
    CostLayer,
    Done,
    Event,
    Gate,
    GateLayer,
    GateTimeout,
    GateUnavailable,
    InvalidOutput,
    MetricsLayer,
    Opened,
    PlatformLayer,
    Provider,
    ProviderError,
    Request,
    SessionLimiter,
    SessionLimitError,
    SimProfile,
    SimProvider,
    Stack,
    Started,
    TimeoutLayer,
    Usage,
)
from manor.layers import AgentCost, LatencyStatistics
from manor.worlds.manor import CallerKind

Handler = Callable[[Request], AsyncGenerator[Event, None]]


class Scripted(Provider):
    """A backend made of one async generator function; it notes every call that starts."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.started: list[tuple[str, float]] = []

    async def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
        self.started.append((request.agent, trio.current_time()))
        async with aclosing(self.handler(request)) as events:
            async for event in events:
                yield event


def answering(latency: float = 1.0, usage: Usage = Usage()) -> Handler:
    async def handler(request: Request) -> AsyncGenerator[Event, None]:
        await trio.sleep(latency)
        yield Started()
        yield Done(text=f"{request.agent} speaks", usage=usage)

    return handler


def failing(latency: float = 0.5) -> Handler:
    async def handler(request: Request) -> AsyncGenerator[Event, None]:
        await trio.sleep(latency)
        raise ProviderError(f"{request.agent}: the model is down")
        yield Started()  # pragma: no cover  (makes this an async generator)

    return handler


def request(agent: str = "butler", caller: CallerKind = CallerKind.CHARACTER, ticket: int | None = None) -> Request:
    return Request(caller=caller, agent=agent, tick=1, ticket=ticket, prompt="What now?")


# -- the stack -----------------------------------------------------------------------


def test_a_stack_orders_its_layers_outermost_first_by_priority() -> None:
    """Whatever order they are given in: metrics, cost, breaker, gate, timeout, platform."""
    gate = GateLayer(Gate(size=1))
    layers = [
        PlatformLayer(SessionLimiter(2)),
        gate,
        MetricsLayer(),
        TimeoutLayer(5.0),
        BreakerLayer(failures=3, cooldown=1.0),
        CostLayer(),
    ]
    stack = Stack(Scripted(answering()), layers)
    assert [type(layer).__name__ for layer in stack.layers] == [
        "MetricsLayer",
        "CostLayer",
        "BreakerLayer",
        "GateLayer",
        "TimeoutLayer",
        "PlatformLayer",
    ]
    assert repr(stack) == (
        "Stack(MetricsLayer ∘ CostLayer ∘ BreakerLayer ∘ GateLayer ∘ TimeoutLayer ∘ PlatformLayer ∘ Scripted)"
    )
    assert stack.layer(GateLayer) is gate
    assert Stack(Scripted(answering())).layer(GateLayer) is None


class _Noting(Scripted):
    """A backend whose class can answer by arrival order: it says so while ``crowded``,
    and counts how often it is asked."""

    def __init__(self) -> None:
        super().__init__(answering())
        self.crowded = False
        self.asked = 0

    def arrival_order_matters(self) -> bool:
        self.asked += 1
        return self.crowded


def test_a_stack_asks_its_backend_about_arrival_order_only_if_its_class_can_care(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Provider.arrival_order_matters``: a backend that overrides it is asked every
    time (a simulated capacity moves over a run); one that leaves it alone is never
    asked, and the stack's answer is its layers'."""
    noting = _Noting()
    stack = Stack(noting, [GateLayer(Gate(size=1))])
    assert not stack.arrival_order_matters() and noting.asked == 1
    noting.crowded = True
    assert stack.arrival_order_matters() and noting.asked == 2

    def never(self: Provider) -> bool:
        raise AssertionError("a backend that keeps the default was asked")

    monkeypatch.setattr(Provider, "arrival_order_matters", never)
    assert not Stack(Scripted(answering()), [BreakerLayer(failures=3, cooldown=1.0)]).arrival_order_matters()


@pytest.mark.trio
async def test_a_call_streams_admitted_opened_then_the_backend_s_events(autojump_clock: trio.testing.MockClock) -> None:
    """Through gate and platform, the listener hears Admitted and Opened, then the
    backend's events as they stream, then Released as the gate frees the slot, and the
    call returns the answer."""
    gate = Gate(size=1)
    stack = Stack(SimProvider(default=SimProfile(latency_s=2.0), seed=3), [GateLayer(gate), PlatformLayer(SessionLimiter(2))])
    (ticket,) = gate.issue()
    record = []

    def listener(event: Event) -> None:
        record.append((type(event).__name__, trio.current_time()))
        if isinstance(event, Admitted):
            assert (event.ticket, event.queued_at, event.admitted_at) == (ticket, 0.0, 0.0)

    done = await stack.call(request(ticket=ticket), listener)
    assert done.text
    assert record == [
        ("Admitted", 0.0),
        ("Opened", 0.0),
        ("Started", 0.5),
        ("TextDelta", 0.875),
        ("TextDelta", 1.25),
        ("TextDelta", 1.625),
        ("TextDelta", 2.0),
        ("Done", 2.0),
        ("Released", 2.0),
    ]


# -- deferred admission --------------------------------------------------------------


@pytest.mark.trio
async def test_a_call_never_awaited_holds_no_permit(autojump_clock: trio.testing.MockClock) -> None:
    """Making the call is free until it is awaited: it takes no permit and no session,
    and others pass by it."""
    gate, limiter = Gate(size=1), SessionLimiter(2)
    backend = Scripted(answering(1.0))
    stack = Stack(backend, [GateLayer(gate), PlatformLayer(limiter)])
    cold = stack.call(request("idle"))
    assert (gate.statistics().in_flight, gate.statistics().waiting, limiter.statistics().in_use) == (0, 0, 0)
    done = await stack.call(request("busy"))
    assert done.text == "busy speaks"
    assert trio.current_time() == 1.0  # no wait: the cold call held nothing
    assert backend.started == [("busy", 0.0)]
    cold.close()
    assert gate.statistics().admitted == 1


@pytest.mark.trio
async def test_a_call_given_up_by_its_caller_releases_at_once(autojump_clock: trio.testing.MockClock) -> None:
    """A caller that stops listening (its listener raises) gives the permit and the
    session back that instant: the next caller is admitted then."""
    gate, limiter = Gate(size=1), SessionLimiter(2)
    stack = Stack(Scripted(answering(5.0)), [GateLayer(gate), PlatformLayer(limiter)])
    record: list[tuple[str, float]] = []

    class Enough(Exception):
        pass

    def give_up_when_started(event: Event) -> None:
        record.append((type(event).__name__, trio.current_time()))
        if isinstance(event, Started):
            raise Enough

    async def next_caller() -> None:
        await trio.sleep(0.1)
        await stack.call(request("next"))
        record.append(("next done", trio.current_time()))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(next_caller)
        with pytest.raises(Enough):
            await stack.call(request("first"), give_up_when_started)
        record.append(("given up", trio.current_time()))
        assert gate.statistics().in_flight == 1  # the next caller has it now
    assert record == [("Admitted", 0.0), ("Opened", 0.0), ("Started", 5.0), ("Released", 5.0), ("given up", 5.0), ("next done", 10.0)]
    assert limiter.statistics().in_use == 0


@pytest.mark.trio
async def test_a_call_cancelled_mid_call_releases_its_permit_and_session(autojump_clock: trio.testing.MockClock) -> None:
    """Cancelled with a session open: the session and the permit go back at once."""
    gate, limiter = Gate(size=1), SessionLimiter(1)
    stack = Stack(Scripted(answering(5.0)), [GateLayer(gate), PlatformLayer(limiter)])
    with trio.CancelScope() as scope:

        def cancel_when_opened(event: Event) -> None:
            if isinstance(event, Opened):
                assert (gate.statistics().in_flight, limiter.statistics().in_use) == (1, 1)
                scope.cancel()

        await stack.call(request(), cancel_when_opened)
    assert scope.cancelled_caught
    assert (gate.statistics().in_flight, limiter.statistics().in_use, trio.current_time()) == (0, 0, 0.0)


@pytest.mark.trio
async def test_cancellation_mid_stream_releases_everything(autojump_clock: trio.testing.MockClock) -> None:
    """A caller cancelled while the backend answers leaves no permit and no session behind."""
    gate, limiter = Gate(size=1), SessionLimiter(1)
    stack = Stack(SimProvider(default=SimProfile(latency_s=2.0)), [GateLayer(gate), PlatformLayer(limiter)])
    with trio.move_on_after(0.5) as scope:
        await stack.call(request())
    assert scope.cancelled_caught
    assert trio.current_time() == 0.5
    stats = gate.statistics()
    assert (stats.in_flight, stats.admitted, stats.cancelled, limiter.statistics().in_use) == (0, 1, 0, 0)


@pytest.mark.trio
async def test_a_gate_timeout_never_reaches_the_platform(autojump_clock: trio.testing.MockClock) -> None:
    """A call that waits too long at the gate fails with GateTimeout without opening a session."""
    gate, limiter = Gate(size=1), SessionLimiter(2)
    backend = Scripted(answering(5.0))
    stack = Stack(backend, [GateLayer(gate, timeout=1.0), PlatformLayer(limiter)])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(stack.call, request("holder"))
        await trio.sleep(0.5)
        with pytest.raises(GateTimeout):
            await stack.call(request("late"))
        assert trio.current_time() == 1.5
    assert backend.started == [("holder", 0.0)]
    assert limiter.statistics().admitted == 1


@pytest.mark.trio
async def test_the_platform_layer_fails_fast_when_full(autojump_clock: trio.testing.MockClock) -> None:
    """Straight at a full platform, a call fails at once with SessionLimitError."""
    limiter = SessionLimiter(1)
    stack = Stack(Scripted(answering(5.0)), [PlatformLayer(limiter)])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(stack.call, request("holder"))
        await trio.sleep(1.0)
        with pytest.raises(SessionLimitError):
            await stack.call(request("turned away"))
        assert trio.current_time() == 1.0


# -- per-call timeout ------------------------------------------------------------------


@pytest.mark.trio
async def test_the_timeout_layer_raises_call_timeout_and_releases_permit_and_session(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A 5 s call under a 2 s timeout fails at exactly 2 s; its permit and session are free again."""
    gate, limiter = Gate(size=1), SessionLimiter(1)
    stack = Stack(Scripted(answering(5.0)), [TimeoutLayer(2.0), GateLayer(gate), PlatformLayer(limiter)])
    with pytest.raises(CallTimeout, match="2s"):
        await stack.call(request())
    assert trio.current_time() == 2.0
    assert (gate.statistics().in_flight, limiter.statistics().in_use) == (0, 0)
    assert CallTimeout.reason == "call_timeout"


@pytest.mark.trio
async def test_the_timeout_layer_frees_a_hung_call(autojump_clock: trio.testing.MockClock) -> None:
    """A call that would never answer is given up at its timeout, not held forever."""
    limiter = SessionLimiter(1)
    stack = Stack(SimProvider(hang_rate=1.0), [TimeoutLayer(3.0), PlatformLayer(limiter)])
    with pytest.raises(CallTimeout):
        await stack.call(request())
    assert (trio.current_time(), limiter.statistics().in_use) == (3.0, 0)


@pytest.mark.trio
async def test_a_call_within_its_timeout_is_untouched(autojump_clock: trio.testing.MockClock) -> None:
    """The timeout applies to waits on the backend only: a 1 s call under 2 s answers at 1 s."""
    stack = Stack(Scripted(answering(1.0)), [TimeoutLayer(2.0)])
    done = await stack.call(request())
    assert (done.text, trio.current_time()) == ("butler speaks", 1.0)


# -- circuit breaker -------------------------------------------------------------------


async def _outcome(stack: Stack, agent: str) -> str:
    try:
        await stack.call(request(agent))
    except CallError as exc:
        return exc.reason
    return "ok"


@pytest.mark.trio
async def test_the_breaker_opens_after_n_consecutive_failures(autojump_clock: trio.testing.MockClock) -> None:
    """Three failures in a row open it; the fourth call is refused at once, without reaching the backend."""
    breaker = BreakerLayer(failures=3, cooldown=10.0)
    backend = Scripted(failing(0.5))
    stack = Stack(backend, [breaker])
    record = [(await _outcome(stack, f"c{i}"), breaker.state, trio.current_time()) for i in range(4)]
    assert record == [
        ("provider_error", BreakerState.CLOSED, 0.5),
        ("provider_error", BreakerState.CLOSED, 1.0),
        ("provider_error", BreakerState.OPEN, 1.5),
        ("circuit_open", BreakerState.OPEN, 1.5),
    ]
    assert [agent for agent, _ in backend.started] == ["c0", "c1", "c2"]
    assert breaker.times_opened == 1


@pytest.mark.trio
async def test_a_success_resets_the_count_of_consecutive_failures(autojump_clock: trio.testing.MockClock) -> None:
    """fail, fail, ok, fail, fail: never three in a row, so the circuit stays closed."""
    breaker = BreakerLayer(failures=3, cooldown=10.0)
    script = iter([failing(), failing(), answering(0.5), failing(), failing()])

    async def handler(req: Request) -> AsyncGenerator[Event, None]:
        async with aclosing(next(script)(req)) as events:
            async for event in events:
                yield event

    stack = Stack(Scripted(handler), [breaker])
    outcomes = [await _outcome(stack, f"c{i}") for i in range(5)]
    assert outcomes == ["provider_error", "provider_error", "ok", "provider_error", "provider_error"]
    assert breaker.state is BreakerState.CLOSED


@pytest.mark.trio
async def test_a_call_let_through_ends_the_batch_of_outcomes_held_at_its_instant(autojump_clock: trio.testing.MockClock) -> None:
    """Two failures counted; then, at one instant: ticket 5 answers, a call is let
    through, ticket 3 fails. The success was counted before the call was let through,
    so the failure after it is the first of a new run, and the circuit stays closed
    (held together, the failure of the earlier ticket would sort first and open it)."""
    breaker = BreakerLayer(failures=3, cooldown=10.0)
    failed = ProviderError("no")
    for i in range(2):
        breaker.after(request(f"f{i}", ticket=i), breaker.before(request(f"f{i}", ticket=i)), None, failed)
        await trio.sleep(1)
    assert breaker.state is BreakerState.CLOSED
    late, early = request("late", ticket=5), request("early", ticket=3)
    late_state, early_state = breaker.before(late), breaker.before(early)
    await trio.sleep(1)
    breaker.after(late, late_state, Done(text="ok"), None)
    assert breaker.before(request("next", ticket=6)) is False
    breaker.after(early, early_state, None, failed)
    assert breaker.state is BreakerState.CLOSED


async def _open(breaker: BreakerLayer) -> None:
    stack = Stack(Scripted(failing(0.5)), [breaker])
    for i in range(breaker.failures):
        await _outcome(stack, f"f{i}")
    assert breaker.state is BreakerState.OPEN


@pytest.mark.trio
async def test_after_the_cooldown_one_trial_call_goes_through_and_its_success_closes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Half-open after the cooldown: one trial at a time; others refused until it succeeds."""
    breaker = BreakerLayer(failures=2, cooldown=10.0)
    await _open(breaker)  # opened at t=1.0
    stack = Stack(Scripted(answering(1.0)), [breaker])
    assert await _outcome(stack, "too soon") == "circuit_open"
    await trio.sleep_until(11.0)
    record = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: _record(record, stack, "trial"))
        await trio.sleep(0.5)
        assert breaker.state is BreakerState.HALF_OPEN
        record.append(("during trial", await _outcome(stack, "other"), trio.current_time()))
    record.append(("after", await _outcome(stack, "after"), trio.current_time()))
    assert record == [("during trial", "circuit_open", 11.5), ("trial", "ok", 12.0), ("after", "ok", 13.0)]
    assert breaker.state is BreakerState.CLOSED
    assert breaker.times_opened == 1


async def _record(record: list[tuple[str, str, float]], stack: Stack, agent: str) -> None:
    record.append((agent, await _outcome(stack, agent), trio.current_time()))


@pytest.mark.trio
async def test_a_failed_trial_opens_the_circuit_again(autojump_clock: trio.testing.MockClock) -> None:
    """The trial fails: open again, with a fresh cooldown counted from the trial's failure."""
    breaker = BreakerLayer(failures=2, cooldown=10.0)
    await _open(breaker)  # opened at t=1.0
    stack = Stack(Scripted(failing(0.5)), [breaker])
    await trio.sleep_until(11.0)
    record = [(await _outcome(stack, "trial"), breaker.state, trio.current_time())]
    await trio.sleep_until(21.0)
    record.append((await _outcome(stack, "still cooling"), breaker.state, trio.current_time()))
    await trio.sleep_until(21.5)
    record.append((await _outcome(stack, "second trial"), breaker.state, trio.current_time()))
    assert record == [
        ("provider_error", BreakerState.OPEN, 11.5),
        ("circuit_open", BreakerState.OPEN, 21.0),
        ("provider_error", BreakerState.OPEN, 22.0),
    ]
    assert breaker.times_opened == 3


@pytest.mark.trio
async def test_a_late_success_from_before_the_circuit_opened_does_not_close_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Only the trial closes an open circuit: a slow call let through earlier answering now proves nothing."""
    breaker = BreakerLayer(failures=2, cooldown=10.0)
    slow = Stack(Scripted(answering(5.0)), [breaker])
    fast = Stack(Scripted(failing(0.5)), [breaker])
    record = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: _record(record, slow, "slow"))
        await trio.sleep(0.1)
        for agent in ["f1", "f2"]:
            await _record(record, fast, agent)
    record.append(("while cooling", await _outcome(fast, "later"), trio.current_time()))
    assert record == [
        ("f1", "provider_error", 0.6),
        ("f2", "provider_error", 1.1),
        ("slow", "ok", 5.0),
        ("while cooling", "circuit_open", 5.0),
    ]
    assert breaker.state is BreakerState.OPEN


@pytest.mark.trio
async def test_call_timeouts_count_as_failures_but_flow_control_does_not(autojump_clock: trio.testing.MockClock) -> None:
    """CallTimeout says the backend is unwell; GateTimeout and platform rejections say nothing of it."""
    breaker = BreakerLayer(failures=2, cooldown=10.0)
    gate, limiter = Gate(size=1), SessionLimiter(1)
    slow = Stack(Scripted(answering(5.0)), [breaker, GateLayer(gate, timeout=0.5), PlatformLayer(limiter)])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(slow.call, request("holder"))
        await trio.sleep(0.1)
        assert [await _outcome(slow, f"g{i}") for i in range(3)] == ["gate_timeout"] * 3
        direct = Stack(Scripted(answering(5.0)), [breaker, PlatformLayer(limiter)])
        assert [await _outcome(direct, f"p{i}") for i in range(3)] == ["platform_rejected"] * 3
        assert breaker.state is BreakerState.CLOSED
    timed = Stack(Scripted(answering(5.0)), [breaker, TimeoutLayer(1.0)])
    assert [await _outcome(timed, f"t{i}") for i in range(2)] == ["call_timeout"] * 2
    assert breaker.state is BreakerState.OPEN


#: A breaker's day: each step makes a call (``"make"``, judged now), ends one of the
#: calls still running (``"ok"``, ``"fail"``: the backend's failure, ``"flow"``: one that
#: says nothing; which: the number, modulo the calls running, the oldest 0) or lets time
#: pass (``"wait"``, whole seconds: 0 keeps the instant).
_BREAKER_STEPS = st.lists(
    st.one_of(
        st.just(("make", 0)),
        st.tuples(st.sampled_from(["ok", "fail", "flow"]), st.integers(min_value=0, max_value=4)),
        st.tuples(st.just("wait"), st.sampled_from([0, 0, 1, 6])),
    ),
    max_size=60,
)


def _breaker_day(steps: list[tuple[str, int]], settle_every_instant: bool) -> list[object]:
    """What a breaker (failures 2, cooldown 5) says through ``steps``: each call's
    judgement and, at the end, its state and times opened. ``settle_every_instant``:
    its held outcomes counted as each new instant's first outcome comes, as the breaker
    once counted them, rather than when the circuit is next looked at."""

    async def day() -> list[object]:
        breaker = BreakerLayer(failures=2, cooldown=5.0)
        said: list[object] = []
        running: list[tuple[Request, object]] = []
        last_end: float | None = None
        for ticket, (step, number) in enumerate(steps):
            if step == "wait":
                await trio.sleep(number)
            elif step == "make":
                call = Request(caller=CallerKind.CHARACTER, agent="a", tick=1, ticket=ticket, prompt="?")
                try:
                    state = breaker.before(call)
                except CircuitOpen:
                    said.append("refused")
                else:
                    said.append(state)
                    running.append((call, state))
            elif running:
                call, state = running.pop(number % len(running))
                if settle_every_instant and last_end is not None and trio.current_time() != last_end:
                    breaker.state  # counts what it holds  # noqa: B018
                last_end = trio.current_time()
                error = None if step == "ok" else ProviderError("no") if step == "fail" else GateTimeout("full")
                breaker.after(call, state, Done(text="ok") if error is None else None, error)
        return [*said, breaker.state, breaker.times_opened]

    return trio.run(day, clock=trio.testing.MockClock(autojump_threshold=0))


@settings(max_examples=300, deadline=None)
@given(_BREAKER_STEPS)
# Ticket 2 fails; a second on, ticket 0 answers and ticket 1 fails: counted by instant,
# never two failures in a row (counted by ticket alone, the circuit would open).
@example([("make", 0), ("make", 0), ("make", 0), ("fail", 2), ("wait", 1), ("ok", 0), ("fail", 0), ("make", 0)])
def test_the_breaker_counts_held_outcomes_as_if_at_each_instant(steps: list[tuple[str, int]]) -> None:
    """Outcomes held until the circuit is next looked at (a tick's, counted once when
    the next tick judges its calls) are counted as they were when each instant's were
    counted as the next instant began: every judgement, the state and the times opened
    are the same."""
    assert _breaker_day(steps, settle_every_instant=False) == _breaker_day(steps, settle_every_instant=True)


def test_outcomes_held_at_one_instant_count_in_ticket_order() -> None:
    """Three calls end at one virtual instant in the order 0, 2, 1: failed, answered,
    failed. In ticket order two failures come in a row and open the circuit (failures
    2); as they came they would not."""
    breaker = BreakerLayer(failures=2, cooldown=5.0)
    calls = [Request(caller=CallerKind.CHARACTER, agent="a", tick=1, ticket=ticket, prompt="?") for ticket in range(3)]
    states = [breaker.before(call) for call in calls]
    for ticket, error in [(0, ProviderError("no")), (2, None), (1, ProviderError("no"))]:
        breaker.after_at(calls[ticket], states[ticket], Done(text="ok") if error is None else None, error, 7.0)
    assert (breaker.state, breaker.times_opened) == (BreakerState.OPEN, 1)


@settings(max_examples=200, deadline=None)
@given(st.permutations(range(6)), st.lists(st.booleans(), min_size=6, max_size=6))
def test_successes_and_silences_at_one_instant_count_alike_in_any_order(order: list[int], answered: list[bool]) -> None:
    """With no failure and no trial among them, a tick's outcomes at one instant leave
    the circuit as they would in ticket order, whatever order they came in (so the
    breaker does not sort them): after two failures counted before, as after none."""
    for failures_before in (0, 1):
        said = []
        for held in (sorted(order), order):
            breaker = BreakerLayer(failures=2, cooldown=5.0)
            early = Request(caller=CallerKind.CHARACTER, agent="a", tick=0, ticket=0, prompt="?")
            for _ in range(failures_before):
                breaker.after_at(early, breaker.before(early), None, ProviderError("no"), 1.0)
            calls = [Request(caller=CallerKind.CHARACTER, agent="a", tick=1, ticket=ticket, prompt="?") for ticket in range(6)]
            states = [breaker.before(call) for call in calls]
            for ticket in held:
                error = None if answered[ticket] else GateTimeout("full")
                breaker.after_at(calls[ticket], states[ticket], Done(text="ok") if error is None else None, error, 2.0)
            said.append((breaker.state, breaker.times_opened, breaker._consecutive))
        assert said[0] == said[1]


# -- cost and metrics ------------------------------------------------------------------


@pytest.mark.trio
async def test_the_cost_layer_counts_tokens_and_money_per_agent(autojump_clock: trio.testing.MockClock) -> None:
    """Tokens from each Done, priced per thousand, added up by agent; failed calls cost nothing."""
    cost = CostLayer(price_per_1k_tokens=2.0)
    stack = Stack(Scripted(answering(1.0, Usage(input_tokens=100, output_tokens=150))), [cost])
    for agent in ["butler", "ghost", "butler"]:
        await stack.call(request(agent))
    failing_stack = Stack(Scripted(failing()), [cost])
    with pytest.raises(ProviderError):
        await failing_stack.call(request("ghost"))
    assert cost.statistics() == {
        "butler": AgentCost(calls=2, input_tokens=200, output_tokens=300, cost=1.0),
        "ghost": AgentCost(calls=2, input_tokens=100, output_tokens=150, cost=0.5),
    }
    assert cost.spent == 1.5


@pytest.mark.trio
async def test_the_cost_layer_refuses_calls_once_the_budget_is_spent(autojump_clock: trio.testing.MockClock) -> None:
    """Budget 1.0 at 0.5 a call: two calls go through, the third fails before reaching the backend."""
    cost = CostLayer(price_per_1k_tokens=1.0, budget=1.0)
    backend = Scripted(answering(1.0, Usage(input_tokens=200, output_tokens=300)))
    stack = Stack(backend, [cost])
    await stack.call(request("a"))
    await stack.call(request("b"))
    with pytest.raises(BudgetExceeded, match="budget 1 spent") as caught:
        await stack.call(request("c"))
    assert isinstance(caught.value, ProviderError) and caught.value.reason == "provider_error"
    assert [agent for agent, _ in backend.started] == ["a", "b"]
    assert cost.spent == 1.0


@pytest.mark.trio
async def test_the_metrics_layer_times_calls_by_caller_kind(autojump_clock: trio.testing.MockClock) -> None:
    """Latency from when the call is made to its end, with ok and failed counts, per caller kind."""
    metrics = MetricsLayer()
    ok = Stack(Scripted(answering(1.0)), [metrics])
    slow = Stack(Scripted(answering(3.0)), [metrics])
    bad = Stack(Scripted(failing(0.5)), [metrics])
    await ok.call(request("a"))
    await slow.call(request("b"))
    with pytest.raises(ProviderError):
        await bad.call(request("narrator", CallerKind.NARRATOR))
    assert metrics.statistics() == {
        "character": LatencyStatistics(calls=2, ok=2, failed=0, mean=2.0, max=3.0),
        "narrator": LatencyStatistics(calls=1, ok=0, failed=1, mean=0.5, max=0.5),
    }


# -- the error tree ----------------------------------------------------------------------


def test_every_call_error_names_a_known_degradation_reason() -> None:
    """Each CallError subclass maps to one of the reasons the dashboard counts."""
    classes = [GateTimeout, GateUnavailable, SessionLimitError, CallTimeout, CircuitOpen, InvalidOutput, ProviderError, BudgetExceeded]
    assert all(issubclass(cls, CallError) for cls in classes)
    assert {cls.reason for cls in classes} == set(REASONS) - {"cancelled"}
    assert math.isinf(GateLayer(Gate(size=1)).timeout)
