"""The whole run at a glance (``m``): every tick's makespan, the cursor at the tick shown.

Live, the ticks finished so far (the dashboard keeps every tick's makespan: 9 bytes a
tick); in a replay, the whole recording, the cursor where the replay is — seek with the
replay's keys and it moves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static

from .figures import seconds
from .widgets.run_chart import RunChart

if TYPE_CHECKING:
    from .app import PlayApp

__all__ = ["RunChartScreen"]

_REFRESH_S = 0.1


class RunChartScreen(Screen[None]):
    """A full-screen chart of every tick's makespan."""

    BINDINGS = [Binding("escape,m", "dismiss", "back")]

    @property
    def play(self) -> PlayApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Static(id="run-chart-title")
        yield RunChart(id="run-chart")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_chart()
        self.set_interval(_REFRESH_S, self.refresh_chart, name="refresh run chart")

    _drawn: tuple[int, int] = (-1, -1)

    def refresh_chart(self) -> None:
        makespans, degraded = self.play.run_ticks()
        cursor = self.play.state.tick
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
