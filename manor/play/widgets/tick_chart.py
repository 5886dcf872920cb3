"""A bar chart of tick makespans: one column per tick, the newest on the right."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import RenderableType
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

__all__ = ["TickChart"]

_EIGHTHS = " ▁▂▃▄▅▆▇█"


class TickChart(Widget):
    """Columns scaled to the tallest tick shown; a tick with degraded calls is red.

    ``bars`` holds ``(makespan, degraded)`` per tick, oldest first.
    """

    DEFAULT_CSS = """
    TickChart {
        height: 1fr;
        color: $success;
    }
    """

    bars: reactive[tuple[tuple[float, bool], ...]] = reactive((), layout=False)

    def show(self, bars: Sequence[tuple[float, bool]]) -> None:
        # Only what fits is kept: a long run does not grow the work per frame.
        self.bars = tuple(bars[-max(1, self.size.width or 1) :])

    def render(self) -> RenderableType:
        width, height = self.size.width, self.size.height
        bars = self.bars[-width:] if width else ()
        if not bars or height <= 0:
            return Text("")
        top = max(span for span, _ in bars) or 1.0
        levels = [round(span / top * height * 8) for span, _ in bars]
        text = Text(no_wrap=True, overflow="crop")
        pad = " " * (width - len(bars))
        for row in range(height):
            floor = (height - 1 - row) * 8
            text.append(pad)
            for level, (_, degraded) in zip(levels, bars, strict=True):
                eighths = max(0, min(8, level - floor))
                text.append(_EIGHTHS[eighths], style="red" if degraded else "")
            if row < height - 1:
                text.append("\n")
        return text
