"""``manor.timer.sleep_until``: woken at its instant without a ``Cancelled``, and
otherwise exactly ``trio.sleep_until`` — the same instant, the same cancellations, the
same outcome when an enclosing scope's deadline is the same instant."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable

import attrs
import outcome
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from manor.timer import sleep_until

from strategies import GRID, grid

Sleep = Callable[[float], Awaitable[None]]


def _run(main: Callable[[], Awaitable[object]]) -> object:
    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


@attrs.frozen
class Sleeper:
    """One task's sleep: until ``until``, inside a scope with ``deadline``, and that
    scope cancelled by another task at ``cancel_at`` (off the grid, so never at the
    same instant as a deadline: there trio's run order decides)."""

    until: float
    deadline: float
    cancel_at: float


def _sleepers() -> st.SearchStrategy[list[Sleeper]]:
    sleeper = st.builds(
        Sleeper,
        until=grid(0, 8),
        deadline=st.one_of(st.just(math.inf), grid(0, 8)),
        cancel_at=st.one_of(st.just(math.inf), grid(0, 8).map(lambda t: t + GRID / 2)),
    )
    return st.lists(sleeper, min_size=1, max_size=8)


def _outcomes(sleep: Sleep, sleepers: list[Sleeper]) -> list[tuple[str, float]]:
    """How and when each sleeper's sleep ended, all sleeping in one run."""
    outcomes: list[tuple[str, float]] = [("", -1.0)] * len(sleepers)

    async def one(index: int, sleeper: Sleeper, task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        with trio.CancelScope(deadline=sleeper.deadline) as scope:
            task_status.started(scope)
            await sleep(sleeper.until)
            outcomes[index] = ("woke", trio.current_time())
            return
        assert scope.cancelled_caught
        outcomes[index] = ("cancelled", trio.current_time())

    async def cancel(scope: trio.CancelScope, at: float) -> None:
        await trio.sleep_until(at)
        scope.cancel()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for index, sleeper in enumerate(sleepers):
                scope = await nursery.start(one, index, sleeper)
                if sleeper.cancel_at != math.inf:
                    nursery.start_soon(cancel, scope, sleeper.cancel_at)

    _run(main)
    return outcomes


@given(_sleepers())
def test_ends_as_trio_sleep_until(sleepers: list[Sleeper]) -> None:
    """Many sleepers, their instants and their scopes' deadlines often the same: each
    ends as with ``trio.sleep_until``, woken or cancelled, at the same instant; a
    sleep never ends before its instant unless its scope was cancelled."""
    ours = _outcomes(sleep_until, sleepers)
    assert ours == _outcomes(trio.sleep_until, sleepers)
    for sleeper, (how, when) in zip(sleepers, ours, strict=True):
        if how == "woke":
            assert when == sleeper.until
        else:
            assert when == min(sleeper.deadline, sleeper.cancel_at) <= sleeper.until


def test_many_woken_at_one_instant() -> None:
    """Sleepers of the same instant all wake at it, and time moves once."""
    woken: list[float] = []

    async def one() -> None:
        await sleep_until(2.5)
        woken.append(trio.current_time())

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(50):
                nursery.start_soon(one)

    _run(main)
    assert woken == [2.5] * 50


def test_tie_with_enclosing_deadline_is_cancelled() -> None:
    """An enclosing scope's deadline at the sleep's own instant wins, whichever of the
    two scopes trio cancels first (many sleepers: both orders occur)."""
    cancelled: list[bool] = []

    async def one(instant: float) -> None:
        with trio.move_on_at(instant) as scope:
            await sleep_until(instant)
        cancelled.append(scope.cancelled_caught)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for i in range(40):
                nursery.start_soon(one, 1.0 + i % 4)

    _run(main)
    assert cancelled == [True] * 40


def test_cancelled_sleep_is_released_at_once() -> None:
    """A sleep cancelled from outside ends at that instant, with ``Cancelled``, and
    leaves nothing behind: the run ends there, not at the sleep's instant."""

    async def main() -> float:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sleep_until, 100.0)
            await trio.sleep(3)
            nursery.cancel_scope.cancel()
        return trio.current_time()

    assert _run(main) == 3.0


@pytest.mark.parametrize("instant", [-1.0, 0.0, 1.0])
def test_instant_passed_ends_at_once(instant: float) -> None:
    """An instant already come ends the sleep at once, woken, not cancelled."""

    async def main() -> float:
        await trio.sleep(1)
        with trio.CancelScope() as scope:
            await sleep_until(instant)
        assert not scope.cancel_called
        return trio.current_time()

    assert _run(main) == 1.0


def test_cancelled_before_sleeping() -> None:
    """In a scope already cancelled, it raises ``Cancelled`` at once."""

    async def main() -> bool:
        with trio.CancelScope() as scope:
            scope.cancel()
            await sleep_until(5.0)
        return scope.cancelled_caught and trio.current_time() == 0.0

    assert _run(main)


def test_many_sleeps_withdrawn_leave_the_deadlines_whole() -> None:
    """Sleeps cancelled from outside leave their entries in trio's deadline heap, which
    trio prunes once they outnumber the live ones (and checks its count of live ones
    there): after two thousand withdrawn, a sleep still wakes at its instant."""

    async def main() -> float:
        async with trio.open_nursery() as nursery:
            for _ in range(2000):
                nursery.start_soon(sleep_until, 100.0)
            await trio.sleep(1)
            nursery.cancel_scope.cancel()
        for instant in (2.0, 3.0):
            await sleep_until(instant)
        return trio.current_time()

    assert _run(main) == 3.0


def test_in_a_guest_run_the_sleep_is_a_scope() -> None:
    """Hosted in another loop (the dashboard's), trio's deadlines are the host's to wake
    for: the sleep is a cancel scope's, and ends as it does elsewhere."""

    async def main() -> tuple[bool, float]:
        start = trio.current_time()
        with trio.CancelScope() as scope:
            await sleep_until(start + 0.05)
        return scope.cancelled_caught, trio.current_time() - start

    async def host() -> tuple[bool, float]:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[outcome.Outcome[tuple[bool, float]]] = loop.create_future()
        trio.lowlevel.start_guest_run(main, run_sync_soon_threadsafe=loop.call_soon_threadsafe, done_callback=done.set_result)
        return (await done).unwrap()

    cancelled, slept = asyncio.run(host())
    assert not cancelled and slept >= 0.05
