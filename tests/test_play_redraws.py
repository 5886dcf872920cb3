"""What a frame redraws: a panel whose figures did not change draws nothing, a table
redraws only its rows that changed, and the guest run lets the host in between steps."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Static

from manor.play import guest as guest_module
from manor.play.guest import GuestRun
from manor.play.state import CallerRow, ShownTick, TickFigures
from manor.play.widgets import AgentsTable, LatencyPanel


class _Panels(App[None]):
    """The latency panel and the agents table alone, at the dashboard's widths."""

    CSS = "#latency { height: 9; } #agents { height: 14; }"

    def compose(self) -> ComposeResult:
        yield LatencyPanel(id="latency")
        yield AgentsTable(id="agents")


def _drive(scenario: Callable[[Pilot[None]], Awaitable[None]]) -> None:
    async def main() -> None:
        app = _Panels()
        async with app.run_test(size=(120, 40)) as pilot:
            await scenario(pilot)

    asyncio.run(main())


def _spy(widget: Widget, method: str) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """The calls of ``widget.method`` from now on (still made)."""
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    original = getattr(widget, method)

    def spied(*args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        return original(*args, **kwargs)

    setattr(widget, method, spied)
    return calls


def _shown(done: int, p50: float = 0.8) -> ShownTick:
    return ShownTick(tick=3, under_way=True, makespan=None, p50=p50, max=2.0, done=done, planned=14, degraded=0)


_TICKS = [TickFigures(tick=t, makespan=4.0 + t, p50=0.8, max=2.0, calls=14, degraded=0) for t in (1, 2)]


class TestLatencyPanel:
    def test_the_same_figures_draw_nothing_and_new_ones_are_shown(self) -> None:
        async def scenario(pilot: Pilot[None]) -> None:
            panel = pilot.app.query_one(LatencyPanel)
            figures = panel.query_one("#latency-figures", Static)
            panel.show(_shown(done=5), _TICKS)
            await pilot.pause()
            updates = _spy(figures, "update")
            # A call started or admitted: the dashboard's state moved, these figures not.
            panel.show(_shown(done=5), list(_TICKS))
            assert updates == []
            panel.show(_shown(done=6), _TICKS)
            assert len(updates) == 1
            assert "6/14" in str(figures.render())
            # A tick finished: charted, though the tick shown did not change.
            panel.show(_shown(done=6), [*_TICKS, TickFigures(tick=3, makespan=9.0, p50=0.8, max=2.0, calls=14, degraded=0)])
            assert len(updates) == 2
            assert "last 3 ticks" in panel.border_subtitle

        _drive(scenario)


def _rows(n: int) -> dict[str, CallerRow]:
    rows = [CallerRow("character", f"a{i}", f"Agent {i}", state="running") for i in range(n)]
    return {row.key: row for row in rows}


class TestAgentsTable:
    def test_only_the_rows_that_changed_are_drawn_again(self) -> None:
        async def scenario(pilot: Pilot[None]) -> None:
            table = pilot.app.query_one(AgentsTable)
            rows = _rows(20)
            table.show(rows, set(rows))
            await pilot.pause()
            refreshes = _spy(table, "refresh")
            row = rows["character:a4"]
            row.state, row.line, row.latency = "done", "Tea, at last.", 1.5
            table.show(rows, {row.key})
            # One line: row 4 under the header.
            [(regions, _)] = refreshes
            assert [(region.y, region.height) for region in regions] == [(5, 1)]
            await pilot.pause()
            line = "".join(segment.text for segment in table.render_line(5))
            assert "done" in line and "Tea, at last." in line
            # A row scrolled out of view draws nothing.
            refreshes.clear()
            table.show(rows, {"character:a19"})
            assert refreshes == []

        _drive(scenario)

    def test_most_rows_changed_redraw_the_table_once(self) -> None:
        async def scenario(pilot: Pilot[None]) -> None:
            table = pilot.app.query_one(AgentsTable)
            rows = _rows(20)
            table.show(rows, set(rows))
            await pilot.pause()
            refreshes = _spy(table, "refresh")
            for row in rows.values():
                row.state = "done"
            table.show(rows, set(rows))
            assert refreshes == [((), {})]
            await pilot.pause()
            assert all("done" in "".join(s.text for s in table.render_line(y)) for y in range(1, table.size.height))

        _drive(scenario)


def _calls_in_a_busy_run(method: str, steps: int) -> int:
    """How often a ``GuestRun``'s ``method`` (a host callback taking one function) is
    called while the run it hosts takes ``steps`` checkpoints one after another."""

    async def main() -> int:
        calls = 0
        guest = GuestRun()
        original = getattr(guest, method)

        def counted(fn: Callable[[], object]) -> None:
            nonlocal calls
            calls += 1
            original(fn)

        setattr(guest, method, counted)

        async def busy() -> None:
            for _ in range(steps):
                await trio.lowlevel.checkpoint()

        guest.start(busy)
        await guest.wait()
        return calls

    return asyncio.run(main())


class TestGuestSlice:
    def test_the_host_ready_stops_a_slice_of_steps(self) -> None:
        """A step of a busy run readies the next; the steps go on in one host callback,
        but a callback the host has ready (a key, which Textual's input thread queues)
        runs before the step after next: a key never waits out a slice."""

        async def main() -> tuple[int, int]:
            loop = asyncio.get_running_loop()
            steps = 0
            seen: list[int] = []

            async def busy() -> None:
                nonlocal steps
                for i in range(2000):
                    steps += 1
                    if i == 500:
                        queued = steps
                        loop.call_soon_threadsafe(lambda: seen.append(steps - queued))
                    await trio.lowlevel.checkpoint()

            guest = GuestRun()
            guest.start(busy)
            (await guest.wait()).unwrap()
            return steps, seen[0]

        steps, behind = asyncio.run(main())
        assert steps == 2000
        assert behind <= 1, f"the host's callback waited {behind} steps"

    @pytest.mark.parametrize("drained", [True, False])
    def test_a_busy_run_takes_many_steps_a_host_callback(self, drained: bool, monkeypatch: pytest.MonkeyPatch) -> None:
        """With nothing else ready on the host, steps follow each other in one callback
        (its loop's turn costs more than a step): drained inside trio's guest tick, or,
        with a trio whose guest state is not the one ``_drain`` knows, a guest tick
        after another."""
        if not drained:
            monkeypatch.setattr(guest_module, "_drain", lambda guest_tick, go_on: None)

        assert _calls_in_a_busy_run("_step", 2000) < 2000 / 10

    def test_steps_that_follow_at_once_are_taken_inside_trios_guest_tick(self) -> None:
        """Trio's guest tick hands the host one step at a time; the steps ready at once
        are drained inside it, as ``trio.run`` takes them: trio asks the host for its
        next tick once a slice, not once a step."""

        assert _calls_in_a_busy_run("_step_at_once", 2000) < 2000 / 10

    def test_a_drained_run_waits_fails_and_is_cancelled_as_trios_own(self) -> None:
        """Drained steps change nothing a run sees: it sleeps on the clock and wakes,
        an error in it is its outcome, and a cancelled run ends with its ``finally``."""

        async def main() -> tuple[list[str], BaseException | None, bool]:
            seen: list[str] = []

            async def sleeps_then_fails() -> None:
                for i in range(3):
                    for _ in range(200):
                        await trio.lowlevel.checkpoint()
                    await trio.sleep(0.005)
                    seen.append(f"woke {i}")
                raise ValueError("the run's own")

            failing = GuestRun()
            failing.start(sleeps_then_fails)
            error = getattr(await failing.wait(), "error", None)

            ended = False

            async def forever() -> None:
                nonlocal ended
                try:
                    while True:
                        await trio.lowlevel.checkpoint()
                finally:
                    ended = True

            cancelled = GuestRun()
            cancelled.start(forever)
            await asyncio.sleep(0.01)
            cancelled.cancel()
            (await cancelled.wait()).unwrap()
            return seen, error, ended

        seen, error, ended = asyncio.run(main())
        assert seen == ["woke 0", "woke 1", "woke 2"]
        assert isinstance(error, ValueError) and str(error) == "the run's own"
        assert ended
