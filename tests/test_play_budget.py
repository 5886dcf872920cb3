"""The dashboard's frame budget, and the guest run's account of its time that feeds it."""

from __future__ import annotations

import asyncio
import time
from typing import cast

import attrs
import pytest
import trio

from manor.play.budget import FrameBudget
from manor.play.guest import HELD_FLOOR_S, GuestRun


@attrs.define
class FakeRun:
    """What the budget reads of a guest run, set by hand."""

    step_seconds: float = 0.0
    held_seconds: float = 0.0
    waiting: bool = False


@attrs.define
class FakeClock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now


def budget(share: float = 0.05, clock: FakeClock | None = None) -> FrameBudget:
    return FrameBudget(share, longest=1.0, clock=clock or FakeClock())


def due(budget: FrameBudget, run: FakeRun) -> bool:
    return budget.due(cast(GuestRun, run))


class TestFrameBudget:
    def test_a_run_not_seen_before_is_drawn_at_once(self) -> None:
        frames, run = budget(), FakeRun(step_seconds=3.0, held_seconds=2.0)
        assert due(frames, run)
        assert due(frames, FakeRun(step_seconds=3.0, held_seconds=2.0))  # another run: a replay's restart

    def test_a_busy_engine_gets_its_share_back_before_the_next_frame(self) -> None:
        """A frame that held the engine 20 ms at a 5% share: the next one after 380 ms of
        steps (20 / (380 + 20) = 5%), not before."""
        frames, run = budget(), FakeRun()
        assert due(frames, run)
        run.held_seconds += 0.020
        run.step_seconds += 0.300
        assert not due(frames, run)
        run.step_seconds += 0.079
        assert not due(frames, run)
        run.step_seconds += 0.002
        assert due(frames, run)
        assert due(frames, run)  # nothing held since: due again

    def test_an_engine_that_waits_loses_nothing_to_a_frame(self) -> None:
        frames, run = budget(), FakeRun()
        assert due(frames, run)
        run.held_seconds += 0.5
        assert not due(frames, run)
        run.waiting = True  # paused, or waiting for simulated time to come
        assert due(frames, run)

    def test_frames_are_never_further_apart_than_the_longest_spacing(self) -> None:
        """A frame too dear for the share (a big world's) still comes once a second."""
        clock = FakeClock()
        frames, run = budget(clock=clock), FakeRun()
        assert due(frames, run)
        run.held_seconds += 0.2
        run.step_seconds += 0.9
        clock.now = 0.99
        assert not due(frames, run)
        clock.now = 1.0
        assert due(frames, run)

    @pytest.mark.parametrize("share", [0.0, -0.1, 1.5])
    def test_the_share_is_a_fraction(self, share: float) -> None:
        with pytest.raises(ValueError, match="share"):
            FrameBudget(share, longest=1.0)


class TestGuestRunAccount:
    """The run's steps, and the host's hold on it, measured on a real asyncio loop."""

    def test_a_busy_run_counts_its_steps_and_the_host_holding_it(self) -> None:
        async def busy() -> None:
            # 0.15 s of the processor, however much longer a loaded machine makes it in
            # wall time: most of it is spent in the run's steps, so they count more than
            # 0.05 s however often the machine took the processor away between them.
            end = time.process_time() + 0.15
            while time.process_time() < end:
                await trio.lowlevel.checkpoint()

        slept = 0.0

        def host_works() -> None:
            nonlocal slept
            started = time.perf_counter()
            time.sleep(0.03)
            slept = time.perf_counter() - started

        async def main() -> GuestRun:
            guest = GuestRun()
            loop = asyncio.get_running_loop()
            guest.start(busy)
            # The host works 30 ms at a time, the run ready meanwhile.
            loop.call_later(0.03, host_works)
            await guest.wait()
            return guest

        wall, cpu = time.perf_counter(), time.process_time()
        guest = asyncio.run(main())
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        assert guest.step_seconds > 0.05
        # The host's 30 ms, not its loop's own round between two steps. A loaded machine
        # oversleeps the 30 ms and takes the processor away between steps too (a gap the
        # run waits in, ready): the bound grows by what the machine took, no more.
        taken = max(0.0, wall - cpu - slept) + (slept - 0.03)
        assert 0.03 <= guest.held_seconds < 0.1 + taken
        assert guest.waiting  # ended

    def test_a_run_waiting_for_its_clock_is_not_held(self) -> None:
        async def sleeper() -> None:
            await trio.sleep(0.1)

        async def main() -> tuple[bool, GuestRun]:
            guest = GuestRun()
            guest.start(sleeper)
            await asyncio.sleep(0.03)
            waiting = guest.waiting
            time.sleep(0.03)  # the host busy while the run has nothing to do
            await guest.wait()
            return waiting, guest

        waiting, guest = asyncio.run(main())
        assert waiting
        assert guest.held_seconds < HELD_FLOOR_S * 5
