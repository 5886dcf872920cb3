"""A call's deadline handed down: where the backend keeps it itself (the simulator) and
nothing between waits, the timeout layer opens no cancel scope, and every call ends as
it did with one — the same answer or error, at the same instant to the bit."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scenes_fixture import make_engine, run_engine
from strategies import overlapping_calls

from manor.admission.limiter import SessionLimiter
from manor.calls import Done, Event, Request
from manor.errors import CallError, CallTimeout, error_line
from manor.admission.gate import Gate
from manor.layers import GateLayer, Layer, PlatformLayer, Stack, TimeoutLayer
from manor.layers.stack import HandedDown, Inner, Listener
from manor.providers import Provider, SimProfile, SimProvider
from manor.providers.provider import DeadlineReached, by_deadline, call_deadline
from manor.worlds import load_scene
from manor.worlds.manor import CallerKind


class _Unkept(Provider):
    """``inner`` behind a backend that does not keep deadlines: the timeout layer above
    it opens a cancel scope, as it always did before deadlines were handed down."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner

    def invoke(self, request: Request) -> AsyncGenerator[Event, None]:
        return self.inner.invoke(request)

    def answer(self, request: Request) -> Awaitable[Done]:
        return self.inner.answer(request)


class _Sleepy(Layer):
    """Waits of its own accord below the timeout (priority 70) before passing a call on."""

    priority = 70

    async def call(self, request: Request, listener: Listener, inner: Inner) -> Done:
        await trio.sleep(5.0)
        return await inner(request, listener)


class _Stamp(Layer):
    """A user's own layer between the gate (50) and the timeout (60), that never waits."""

    priority = 55
    passes_deadline = True

    async def call(self, request: Request, listener: Listener, inner: Inner) -> Done:
        done = await inner(request, listener)
        return Done(text=f"[stamped] {done.text}", usage=done.usage)


def _hearing(event: Event) -> None:
    """A listener that watches the stream."""


def _stack(backend: Provider, seconds: float, *more: Layer) -> Stack:
    return Stack(backend, [TimeoutLayer(seconds), PlatformLayer(SessionLimiter(0)), *more])


def _ends(
    backend: Provider, calls: list[tuple[float, float]], seconds: float, listener: Callable[[Event], None] | None, outer: float
) -> list[tuple[str, float]]:
    """How and when each call (start, agent a<i>) through a timeout of ``seconds`` ended,
    all in one virtual-time run; each is also cancelled ``outer`` s after it starts, as a
    tick deadline would (at the same instant as its timeout, when they are equal)."""
    stack = _stack(backend, seconds)

    async def main() -> list[tuple[str, float]]:
        ended: list[tuple[str, float]] = [("", 0.0)] * len(calls)

        async def one(i: int, start: float) -> None:
            await trio.sleep_until(start)
            request = Request(caller=CallerKind.CHARACTER, agent=f"a{i}", tick=1, prompt="two words")
            outcome = "cancelled"
            with trio.move_on_at(start + outer):
                try:
                    done = await (stack.call(request) if listener is None else stack.call(request, listener))
                    outcome = f"{done.text} {done.usage}"
                except CallError as exc:
                    outcome = f"{type(exc).__name__}: {error_line(exc)}"
            ended[i] = (outcome, trio.current_time())

        async with trio.open_nursery() as nursery:
            for i, (start, _) in enumerate(calls):
                nursery.start_soon(one, i, start)
        return ended

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def _sim(calls: list[tuple[float, float]], **faults: Any) -> SimProvider:
    return SimProvider({f"a{i}": SimProfile(latency_s=latency, lines=("one two three four",)) for i, (_, latency) in enumerate(calls)}, **faults)


class TestTheSameEndsAsWithACancelScope:
    @given(
        calls=overlapping_calls(max_calls=5),
        seconds=st.integers(1, 400).map(lambda n: n / 100),
        outer=st.sampled_from([1e9, 0.5, 1.0, 2.0]),
        faults=st.sampled_from([{}, {"error_rate": 0.5}, {"hang_rate": 0.5}, {"error_rate": 0.3, "hang_rate": 0.3}]),
        hearing=st.booleans(),
    )
    # A tie: the answer (10 + 0.25 + 4 x 0.1875) ends at 11.0, when the timeout does.
    @example(calls=[(10.0, 1.0)], seconds=1.0, outer=1e9, faults={}, hearing=False)
    # The timeout and the outer deadline at one instant: the outer one shows.
    @example(calls=[(10.0, 3.0)], seconds=1.0, outer=1.0, faults={}, hearing=False)
    # The answer's end and the outer deadline at one instant (11.0): the outer one shows,
    # though the answer's timer wakes its call without a Cancelled (manor.timer).
    @example(calls=[(10.0, 1.0)], seconds=4.0, outer=1.0, faults={}, hearing=False)
    @settings(max_examples=400, deadline=None)
    def test_to_the_bit(
        self, calls: list[tuple[float, float]], seconds: float, outer: float, faults: dict[str, Any], hearing: bool
    ) -> None:
        """Answers, errors, hangs, early in a run (where the simulator streams) and late,
        heard or not, cut by an outer deadline: each call ends the same with the deadline
        handed down as under the timeout's own scope."""
        listener = _hearing if hearing else None
        sim = _sim(calls, **faults)
        kept = _ends(sim, calls, seconds, listener, outer)
        assert kept == _ends(_Unkept(_sim(calls, **faults)), calls, seconds, listener, outer)

    @pytest.mark.parametrize("outer", [1e9, 2.0])
    @pytest.mark.parametrize("seconds", [0.5, 1.3, 2.0, 4.0])
    def test_waiting_for_a_backend_session(self, seconds: float, outer: float) -> None:
        """The simulator's own session cap (``max_sessions``): a call that waits for a
        session is cut at its deadline whether it waits or runs then. (Calls one after
        another: which of two calls arriving at one instant waits is trio's choice.)"""
        calls = [(10.0, 1.5), (10.25, 1.0), (10.5, 0.75), (11.0, 2.0)]
        kept = _ends(_sim(calls, max_sessions=1), calls, seconds, None, outer)
        assert kept == _ends(_Unkept(_sim(calls, max_sessions=1)), calls, seconds, None, outer)

    @pytest.mark.parametrize("policy", ["pipeline", "batch", "legacy"])
    def test_a_run_records_the_same(self, policy: str) -> None:
        """The default scene with short call timeouts, faults and a tick deadline: every
        record and world hash as with the timeout's own cancel scope."""
        scene = load_scene("wacky_manor")
        values = {"run_policy": policy, "call_timeout_s": 1.6, "sim_error_rate": 0.1, "sim_hang_rate": 0.05, "run_tick_deadline_s": 9.0}
        sim = make_engine(scene, **values).loop.gated.backend
        assert isinstance(sim, SimProvider) and sim.keeps_deadline
        kept = run_engine(make_engine(scene, **values), 12)
        scoped = run_engine(make_engine(scene, backend=_Unkept(sim), **values), 12)
        assert kept == scoped
        reasons = {call.reason for tick in kept for call in tick.calls}
        assert {"call_timeout", "provider_error"} <= reasons


class TestWhenItIsHandedDown:
    def test_a_layer_below_that_waits_keeps_the_scope(self) -> None:
        """A wait of a layer's own below the timeout is bounded too: the deadline is not
        handed down past it."""
        [(outcome, ended)] = _ends_through(_stack(_sim([(0.0, 1.0)]), 2.0, _Sleepy()))
        assert (outcome, ended) == ("CallTimeout: no answer within 2s", 12.0)

    def test_the_simulator_keeps_it_alone(self) -> None:
        """Through the platform layer to the simulator: no deadline left on the task
        after the call, and the timeout's error as ever."""
        [(outcome, ended)] = _ends_through(_stack(_sim([(0.0, 3.0)]), 2.0))
        assert (outcome, ended) == ("CallTimeout: no answer within 2s", 12.0)

    @pytest.mark.parametrize("latency", [1.0, 3.0])
    @pytest.mark.parametrize("stamped", [False, True])
    def test_set_in_the_gate_layers_frame(self, latency: float, stamped: bool) -> None:
        """Right below the gate, the timeout's deadline is set in the gate layer's frame
        (``HandedDown``, no frame of its own); a user's layer in between has it set in a
        frame of the timeout's, as ever. The same ends either way, and no deadline left."""
        more: list[Layer] = [GateLayer(Gate(size=1), timeout=5.0), *([_Stamp()] if stamped else [])]
        stack = _stack(_sim([(0.0, latency)]), 2.0, *more)
        below = stack.split.below if stack.split is not None else None
        assert (type(below) is HandedDown) is not stamped
        [(outcome, ended)] = _ends_through(stack)
        if latency > 2.0:
            assert (outcome, ended) == ("CallTimeout: no answer within 2s", 12.0)
        else:
            assert outcome.endswith("one two three four") and outcome.startswith("[stamped]") is stamped
            assert ended < 12.0

    @pytest.mark.trio
    async def test_by_deadline(self, autojump_clock: trio.testing.MockClock) -> None:
        async def slow() -> Done:
            await trio.sleep(3.0)
            return Done(text="late")

        with pytest.raises(DeadlineReached):
            await by_deadline(1.0, slow())
        assert trio.current_time() == 1.0
        assert (await by_deadline(10.0, slow())).text == "late"
        assert call_deadline.get() == float("inf")


def _ends_through(stack: Stack) -> list[tuple[str, float]]:
    """One call a0 through ``stack`` at virtual time 10: how and when it ended, and that
    no deadline is left set on the task after it."""

    async def main() -> list[tuple[str, float]]:
        await trio.sleep_until(10.0)
        try:
            done = await stack.call(Request(caller=CallerKind.CHARACTER, agent="a0", tick=1))
            outcome = done.text
        except CallTimeout as exc:
            outcome = f"CallTimeout: {exc}"
        assert call_deadline.get() == float("inf")
        return [(outcome, trio.current_time())]

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
