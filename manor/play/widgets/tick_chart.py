"""A bar chart of tick makespans: one column per tick, the newest on the right."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import RenderableType
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

__all__ = ["TickChart", "draw_bars"]

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
        pad = Text(" " * (width - len(bars)))
        return Text("\n").join(pad + row for row in draw_bars(bars, height, top))


def draw_bars(
    bars: Sequence[tuple[float, bool]], height: int, top: float, *, width: int = 1, cursor: int | None = None
) -> list[Text]:
    """``bars`` (value, degraded) as columns ``height`` rows tall and ``width`` cells wide,
    scaled so that ``top`` fills a column, in eighths of a cell: one ``Text`` per row, top
    row first. A degraded bar is red; the ``cursor`` bar is drawn reversed."""
    top = top or 1.0
    levels = [round(value / top * height * 8) for value, _ in bars]
    rows = []
    for row in range(height):
        floor = (height - 1 - row) * 8
        text = Text(no_wrap=True, overflow="crop")
        for column, (level, (_, degraded)) in enumerate(zip(levels, bars, strict=True)):
            eighths = max(0, min(8, level - floor))
            style = "red" if degraded else ""
            if column == cursor:
                style = f"{style} reverse".strip() if eighths else "on grey30"
            text.append(_EIGHTHS[eighths] * width, style=style)
        rows.append(text)
    return rows
