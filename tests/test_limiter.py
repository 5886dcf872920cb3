"""The platform tier: a fail-fast session limit, and the gate that keeps us below it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from manor import (
    Gate,
    GateLayer,
    PlatformLayer,
    ProviderError,
    Request,
    SessionLimiter,
    SessionLimitError,
    SessionLimiterStatistics,
    SimProfile,
    SimProvider,
    Stack,
)
from manor.worlds.manor import CallerKind

if TYPE_CHECKING:
    from conftest import GateOperations

# -- the limiter on its own ----------------------------------------------------------


def test_the_limiter_rejects_at_once_when_full() -> None:
    """Up to the limit sessions open; the next attempt raises SessionLimitError, never waits."""
    limiter = SessionLimiter(2)
    first, second = limiter.try_acquire(), limiter.try_acquire()
    with pytest.raises(SessionLimitError, match="2 of 2"):
        limiter.try_acquire()
    assert limiter.statistics() == SessionLimiterStatistics(limit=2, in_use=2, peak=2, admitted=2, rejected=1)
    first.release()
    third = limiter.try_acquire()
    second.release()
    third.release()
    assert limiter.statistics() == SessionLimiterStatistics(limit=2, in_use=0, peak=2, admitted=3, rejected=1)


def test_a_session_released_twice_is_an_error() -> None:
    """Release is exactly once: the second raises and frees nothing."""
    limiter = SessionLimiter(1)
    session = limiter.try_acquire()
    session.release()
    with pytest.raises(RuntimeError, match="released twice"):
        session.release()
    assert limiter.statistics().in_use == 0


def test_a_limit_of_zero_means_unlimited() -> None:
    """``0`` is no limit at all: a hundred sessions open, none rejected."""
    limiter = SessionLimiter(0)
    sessions = [limiter.try_acquire() for _ in range(100)]
    assert limiter.statistics() == SessionLimiterStatistics(limit=0, in_use=100, peak=100, admitted=100, rejected=0)
    for session in sessions:
        session.release()


def test_a_negative_limit_is_rejected() -> None:
    """A limit below zero is a programming error."""
    with pytest.raises(ValueError):
        SessionLimiter(-1)


def test_session_limit_error_is_flow_control_with_a_reason() -> None:
    """The platform's "I'm full" degrades a call as platform_rejected and may carry Retry-After."""
    error = SessionLimitError("full", retry_after=1.5)
    assert (error.reason, error.retry_after, str(error)) == ("platform_rejected", 1.5, "full")
    assert SessionLimitError().retry_after is None


# -- with and without the gate in front ------------------------------------------------


def _requests(count: int) -> list[Request]:
    return [Request(caller=CallerKind.CHARACTER, agent=f"guest{i}", tick=1, prompt="Well?") for i in range(count)]


async def _fire(stack: Stack, requests: list[Request], arrivals: list[float] | None = None) -> list[str]:
    """Every request at once (or at its arrival); how each call ended, in request order."""
    outcomes = [""] * len(requests)

    async def one(index: int) -> None:
        await trio.sleep_until(arrivals[index] if arrivals else 0.0)
        try:
            await stack.call(requests[index])
            outcomes[index] = "done"
        except SessionLimitError:
            outcomes[index] = "rejected"
        except ProviderError:
            outcomes[index] = "failed"

    async with trio.open_nursery() as nursery:
        for index in range(len(requests)):
            nursery.start_soon(one, index)
    return outcomes


@pytest.mark.trio
async def test_through_a_gate_of_limit_minus_one_the_platform_rejects_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Thirty calls at once through gate(5) ∘ platform(6): all answered, none rejected, at most 5 sessions."""
    limiter = SessionLimiter(6)
    backend = SimProvider(default=SimProfile(latency_s=1.0, jitter=0.6), seed=7)
    stack = Stack(backend, [GateLayer(Gate(size=5)), PlatformLayer(limiter)])
    assert await _fire(stack, _requests(30)) == ["done"] * 30
    assert limiter.statistics() == SessionLimiterStatistics(limit=6, in_use=0, peak=5, admitted=30, rejected=0)


@pytest.mark.trio
async def test_without_the_gate_the_platform_rejects_what_does_not_fit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The same thirty calls straight at platform(6): six answered, twenty-four rejected at once."""
    limiter = SessionLimiter(6)
    backend = SimProvider(default=SimProfile(latency_s=1.0, jitter=0.6), seed=7)
    stack = Stack(backend, [PlatformLayer(limiter)])
    outcomes = await _fire(stack, _requests(30))
    assert sorted(outcomes) == ["done"] * 6 + ["rejected"] * 24
    assert limiter.statistics() == SessionLimiterStatistics(limit=6, in_use=0, peak=6, admitted=6, rejected=24)
    assert trio.current_time() > 0


@settings(max_examples=60)
@given(
    limit=st.integers(2, 8),
    latencies=st.lists(st.floats(0.05, 3.0), min_size=1, max_size=30),
    arrivals=st.lists(st.integers(0, 8).map(lambda k: k * 0.25), min_size=30, max_size=30),
    error_rate=st.sampled_from([0.0, 0.3]),
)
def test_any_load_through_a_gate_of_limit_minus_one_is_never_rejected(
    gate_operations: GateOperations, limit: int, latencies: list[float], arrivals: list[float], error_rate: float
) -> None:
    """Whatever the arrivals, latencies and failures, gate(limit-1) keeps the platform from ever saying no."""
    requests = _requests(len(latencies))
    backend = SimProvider(
        {r.agent: SimProfile(latency_s=latency) for r, latency in zip(requests, latencies, strict=True)},
        error_rate=error_rate,
    )
    limiter = SessionLimiter(limit)
    gate = Gate(size=limit - 1)
    stack = Stack(backend, [GateLayer(gate), PlatformLayer(limiter)])

    outcomes = trio.run(_fire, stack, requests, arrivals, clock=trio.testing.MockClock(autojump_threshold=0))
    assert "rejected" not in outcomes
    gate_stats = gate.statistics()
    gate_operations.examples += 1
    gate_operations.acquires += gate_stats.admitted + gate_stats.timeouts + gate_stats.cancelled
    gate_operations.releases += gate_stats.admitted
    assert set(outcomes) <= {"done", "failed"}
    stats = limiter.statistics()
    assert (stats.rejected, stats.in_use) == (0, 0)
    assert stats.peak <= limit - 1


def test_the_limiter_rejects_instantly_even_under_a_virtual_clock() -> None:
    """Fail-fast means no time passes: a rejection happens at the instant of the attempt."""

    async def attempt() -> float:
        limiter = SessionLimiter(1)
        limiter.try_acquire()
        await trio.sleep(2.0)
        with pytest.raises(SessionLimitError):
            limiter.try_acquire()
        return trio.current_time()

    assert trio.run(attempt, clock=trio.testing.MockClock(autojump_threshold=0)) == 2.0
