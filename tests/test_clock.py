"""The run's clock as the hot paths read it (``manor.clock``): trio's two clocks read by
their own formulas, the same float to the bit as each clock's own reading."""

from __future__ import annotations

import gc
import math

import pytest
import trio
import trio.testing

from manor import clock as manor_clock
from manor.clock import MockClock, current_time, read_clock_directly
from manor.paced_clock import PacedClock


class _Frozen(trio.abc.Clock):
    """A clock of a kind of its own: it is asked."""

    def start_clock(self) -> None:
        pass

    def current_time(self) -> float:
        return 42.5

    def deadline_to_sleep_time(self, deadline: float) -> float:
        return 0.0


def _readings(clock: trio.abc.Clock | None, between: object = None) -> list[tuple[float, float]]:
    """``current_time`` and trio's own reading, read by formula in a task of the run;
    ``between`` (``clock`` -> None) changes the clock between two readings."""

    async def main() -> list[tuple[float, float]]:
        read_clock_directly()
        readings = []
        for step in range(3):
            # trio's reading first: on the real clock, ours is read later, never sooner
            theirs = trio.current_time()
            readings.append((theirs, current_time()))
            if step == 1 and between is not None:
                between(trio.lowlevel.current_clock())  # type: ignore[operator]
            await trio.lowlevel.checkpoint()
        return readings

    return trio.run(main, clock=clock)


class TestCurrentTime:
    def test_outside_a_tick_it_is_trios_reading(self) -> None:
        """Without ``read_clock_directly`` (the default), it asks trio."""

        async def main() -> None:
            await trio.sleep(2.5)
            assert current_time() == trio.current_time() == 2.5

        trio.run(main, clock=MockClock(autojump_threshold=0))

    def test_the_mock_clock_by_its_formula_to_the_bit(self) -> None:
        """A virtual clock that jumps, then runs at a rate: every reading equals the clock's own."""

        def jump_and_run(clock: MockClock) -> None:
            clock.jump(1.0 / 3.0)
            clock.rate = 7.25

        clock = MockClock(autojump_threshold=0)
        readings = _readings(clock, jump_and_run)
        assert manor_clock._reading(clock)[0] == manor_clock._MOCK
        # At rate 0 the two readings are the same instant; at 7.25 ours is read later.
        assert readings[0][0] == readings[0][1] and readings[1][0] == readings[1][1]
        assert readings[2][0] <= readings[2][1]

    def test_the_mock_clock_with_a_fixed_real_clock_to_the_bit(self) -> None:
        """With its real clock replaced by a fixed one (as trio's own tests do), at a rate
        and after a jump, both readings are the same float."""
        clock = MockClock(rate=3.0)
        clock._real_clock = lambda: 1234.56789  # type: ignore[method-assign]
        clock.jump(0.1)

        async def main() -> tuple[float, float]:
            read_clock_directly()
            return current_time(), clock.current_time()

        ours, theirs = trio.run(main, clock=clock)
        assert ours == theirs != 0.0

    def test_the_system_clock_by_its_formula(self) -> None:
        """The real clock: its offset plus ``perf_counter``, between two of trio's readings."""

        async def main() -> tuple[float, float, float]:
            read_clock_directly()
            assert manor_clock._read.get()[0] == manor_clock._SYSTEM
            before = trio.current_time()
            ours = current_time()
            return before, ours, trio.current_time()

        before, ours, after = trio.run(main)
        assert before <= ours <= after

    def test_the_paced_clock_where_it_stands_and_asked_while_a_step_is_due(self) -> None:
        """The dashboard's clock: read where it stands while no step is due, asked
        while one is (the read that finds it due moves it there); each reading equals
        its own, through waits, a change of speed and a step due but not reached."""
        wall = [100.0]
        clock = PacedClock(2.0, wall=lambda: wall[0])

        async def main() -> list[tuple[int, float, float]]:
            read_clock_directly()
            assert manor_clock._read.get() == (manor_clock._PACED, clock)
            readings = []

            def read() -> None:
                ours = current_time()  # first: a read that finds a step due moves the clock
                readings.append((clock._pending is not None, ours, clock.current_time()))

            async def sleeper() -> None:
                await trio.sleep(1.5)  # due 0.75 wall seconds after it waits
                read()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(sleeper)
                await trio.testing.wait_all_tasks_blocked()
                read()
                wall[0] += 0.5
                read()  # due, not reached: asked, still at 0
                clock.speed = 4.0
                wall[0] += 1.0
                read()
            read()
            return readings

        readings = trio.run(main, clock=clock)
        assert all(ours == theirs for _, ours, theirs in readings)
        # Asked while the sleeper's step was pending (twice), read where it stands after.
        assert [due for due, _, _ in readings] == [True, True, False, False, False]
        assert [ours for _, ours, _ in readings] == [0.0, 0.0, 0.0, 1.5, 1.5]

    def test_a_paced_clock_reads_as_its_own_current_time(self) -> None:
        """Idle, the paced clock stands still: every read is its own reading."""
        assert _readings(PacedClock(math.inf)) == [(0.0, 0.0)] * 3

    def test_any_other_clock_is_asked(self) -> None:
        assert _readings(_Frozen()) == [(42.5, 42.5)] * 3

    def test_a_clock_whose_reading_was_replaced_is_asked(self) -> None:
        clock = MockClock()
        clock.current_time = lambda: 9.0  # type: ignore[method-assign]
        assert manor_clock._reading(clock)[0] == manor_clock._ASK

    def test_a_clock_class_whose_reading_was_replaced_is_asked(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(MockClock, "current_time", lambda self: 5.0)
        assert _readings(MockClock()) == [(5.0, 5.0)] * 3

    def test_reading_how_to_read_keeps_the_clocks_attributes_inline(self) -> None:
        """Choosing the formula does not read the clock's ``__dict__``: CPython would
        keep its attributes in a dict from then on, and trio's run loop, which reads
        them all the time, would pay for it (7,000 instructions a call in fast-forward)."""
        clock = MockClock(autojump_threshold=0)

        def materialised() -> bool:
            return any(isinstance(referent, dict) and "_virtual_base" in referent for referent in gc.get_referents(clock))

        async def main() -> None:
            read_clock_directly()
            current_time()

        trio.run(main, clock=clock)
        assert not materialised()
        clock.__dict__  # noqa: B018 - the check itself can tell
        assert materialised()
