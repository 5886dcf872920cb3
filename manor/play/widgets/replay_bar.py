"""The replay's position bar: which recorded tick is shown, as a slider to scrub with."""

from __future__ import annotations

from rich.text import Text
from textual.events import Click
from textual.widget import Widget

from ..messages import Seek

__all__ = ["ReplayBar"]


class ReplayBar(Widget):
    """``replay FILE │ tick 12/40 ━━━━●──── │ matches the recording``. A click on the
    track asks to go to the tick under the mouse (a ``Seek`` message)."""

    DEFAULT_CSS = """
    ReplayBar {
        height: 1;
    }
    """

    def __init__(self, name: str, total: int, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.file = name
        self.total = total
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
        label.append("━" * knob, style="bold cyan")
        label.append("●", style="bold cyan")
        label.append("─" * (cells - knob - 1), style="dim")
        label.append_text(verdict)
        return label

    def on_click(self, event: Click) -> None:
        start, cells = self._track
        if start <= event.x < start + cells:
            self.post_message(Seek(round((event.x - start) / max(1, cells - 1) * self.total)))
