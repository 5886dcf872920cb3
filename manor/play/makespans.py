"""The whole run at a glance (``m``): every tick's makespan, the cursor at the tick shown.

Live, the ticks finished so far (the dashboard keeps every tick's makespan: 9 bytes a
tick); in a replay, the whole recording, the cursor where the replay is — seek with the
replay's keys and it moves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static

from .figures import seconds
from .widgets.notices import NoticeLines
from .widgets.run_chart import RunChart

__all__ = ["RunChartScreen", "RunTicks"]

_REFRESH_S = 0.1


class RunTicks(NamedTuple):
    """What the chart shows: every tick's makespan so far, whether a call of each
    degraded (1) or not (0), and the tick the dashboard shows (the cursor)."""

    makespans: Sequence[float]
    degraded: Sequence[int]
    cursor: int


class RunChartScreen(Screen[None]):
    """A full-screen chart of every tick's makespan.

    Args:
        ticks: reads the ticks as they stand now (looked at as the dashboard redraws).
    """

    BINDINGS = [Binding("escape,m", "dismiss", "back")]

    def __init__(self, ticks: Callable[[], RunTicks]) -> None:
        super().__init__()
        self._read_ticks = ticks

    def compose(self) -> ComposeResult:
        yield Static(id="run-chart-title")
        yield RunChart(id="run-chart")
        yield NoticeLines()
        yield Footer(compact=True)  # the app's keys and the screen's: 80 columns hold them so

    def on_mount(self) -> None:
        self.refresh_chart()
        self.set_interval(_REFRESH_S, self.refresh_chart, name="refresh run chart")

    _drawn: tuple[int, int] = (-1, -1)

    def refresh_chart(self) -> None:
        makespans, degraded, cursor = self._read_ticks()
        if (len(makespans), cursor) == self._drawn:
            return
        self._drawn = (len(makespans), cursor)
        self.query_one(RunChart).show(makespans, degraded, cursor)
        title = Text(no_wrap=True, overflow="ellipsis")
        title.append(" makespan of every tick ", style="bold reverse")
        title.append(f" {len(makespans)} ticks")
        if makespans:
            title.append(f" · longest {seconds(max(makespans))[0]}", style="cyan")
            bad = degraded.count(1)
            title.append(f" · {bad} with a degraded call (red)", style="red" if bad else "dim")
        if cursor:
            title.append(f" · ▲ tick {cursor}", style="bold yellow")
        self.query_one("#run-chart-title", Static).update(title)
