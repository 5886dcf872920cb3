"""The replay's position bar: which recorded tick is shown, as a slider to scrub with, the
ticks in which a call degraded marked red."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from rich.text import Text
from textual.events import Click
from textual.widget import Widget

from ..messages import Seek

__all__ = ["ReplayBar"]


class ReplayBar(Widget):
    """``replay FILE │ tick 12/40 ━━━━●──── │ matches the recording``. A cell of the
    track holding a tick in which a call degraded is red. A click on the track asks to
    go to the tick under the mouse (a ``Seek`` message)."""

    DEFAULT_CSS = """
    ReplayBar {
        height: 1;
    }
    """

    def __init__(self, name: str, total: int, *, degraded: Sequence[int] = (), id: str | None = None) -> None:
        super().__init__(id=id)
        self.file = name
        self.total = total
        #: The ticks in which a call degraded, in order.
        self.degraded = degraded
        self.tick = 0
        self.verdict = ""
        self.verdict_style = ""
        # Where the track was drawn, for clicks: first cell, cells.
        self._track = (0, 1)

    def show(self, tick: int, verdict: str, verdict_style: str) -> None:
        if (tick, verdict) != (self.tick, self.verdict):
            self.tick, self.verdict, self.verdict_style = tick, verdict, verdict_style
            self.refresh()

    def render(self) -> Text:
        width = self.size.width
        label = Text(no_wrap=True, overflow="crop")
        label.append(" replay ", style="bold reverse")
        label.append(f" {self.file} ", style="bold")
        label.append("│ ", style="dim")
        label.append(f"tick {self.tick}/{self.total} ")
        verdict = Text(f" │ {self.verdict}", style=self.verdict_style) if self.verdict else Text()
        cells = max(5, width - label.cell_len - verdict.cell_len - 1)
        self._track = (label.cell_len, cells)
        knob = round(self.tick / max(1, self.total) * (cells - 1))
        for cell in range(cells):
            if cell == knob:
                label.append("●", style="bold cyan")
                continue
            red = self._degraded_in(*self._ticks_of(cell, cells))
            played = cell < knob
            style = ("bold red" if red else "bold cyan") if played else ("red" if red else "dim")
            label.append("━" if played else "─", style=style)
        label.append_text(verdict)
        return label

    def _ticks_of(self, cell: int, cells: int) -> tuple[float, float]:
        """The ticks a cell of the track stands for: the span around where a click on it
        seeks, ``[low, high)``."""
        step = self.total / max(1, cells - 1)
        return (cell - 0.5) * step, (cell + 0.5) * step

    def _degraded_in(self, low: float, high: float) -> bool:
        i = bisect_left(self.degraded, low)
        return i < len(self.degraded) and self.degraded[i] < high

    def on_click(self, event: Click) -> None:
        start, cells = self._track
        if start <= event.x < start + cells:
            self.post_message(Seek(round((event.x - start) / max(1, cells - 1) * self.total)))
