"""The whole run's makespans: every tick, a y axis in seconds, a cursor at the tick shown."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import RenderableType
from rich.text import Text
from textual.widget import Widget

from ..figures import fit, seconds
from .tick_chart import draw_bars

__all__ = ["RunChart", "columns_of"]

#: Cells a tick may take when the run has fewer ticks than the chart has columns.
_WIDEST_BAR = 4
#: Rows under the bars: the x axis, and its labels.
_AXIS_ROWS = 2


class RunChart(Widget):
    """Every tick of the run as a bar: one column per tick, or, when the run has more
    ticks than the chart has columns, one per span of ticks (its longest makespan; red
    if a call of any of its ticks degraded). The column holding the ``cursor`` tick is
    drawn reversed and marked ``▲`` under the axis."""

    DEFAULT_CSS = """
    RunChart {
        height: 1fr;
        color: $success;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._makespans: Sequence[float] = ()
        self._degraded: Sequence[int] = ()
        self.cursor = 0
        self._drawn: tuple[int, int] = (-1, -1)

    def show(self, makespans: Sequence[float], degraded: Sequence[int], cursor: int) -> None:
        """Redraw for a run of ``makespans`` (tick ``i + 1``'s at ``i``), ``degraded``
        (whether a call of the tick degraded), the cursor on tick ``cursor`` (0: none)."""
        self._makespans, self._degraded, self.cursor = makespans, degraded, cursor
        if (len(makespans), cursor) != self._drawn:
            self._drawn = (len(makespans), cursor)
            self.refresh()

    def render(self) -> RenderableType:
        makespans, ticks = self._makespans, len(self._makespans)
        if not ticks:
            return Text("no tick finished yet", style="dim")
        top = max(makespans)
        labels = [fit(7, seconds(top)), fit(7, seconds(top / 2)), "0s"]
        gutter = max(map(len, labels)) + 2
        width = max(1, self.size.width - gutter)
        height = max(1, self.size.height - _AXIS_ROWS)
        spans = columns_of(ticks, width)
        bar = max(1, min(_WIDEST_BAR, width // len(spans)))
        bars, cursor = [], None
        for i, (first, last) in enumerate(spans):
            value = max(makespans[first - 1 : last])
            degraded = any(self._degraded[first - 1 : last])
            if first <= self.cursor <= last:
                cursor = i
            bars.append((value, degraded))
        out = []
        for row, text in enumerate(draw_bars(bars, height, top, width=bar, cursor=cursor)):
            label = labels[0] if row == 0 else labels[1] if row == height // 2 and height > 2 else ""
            out.append(Text(f"{label:>{gutter - 2}} ┤", style="dim", no_wrap=True) + text)
        # The x axis, and under it the first and last tick and, under its column, the
        # cursor's tick (a label it would overlap is left out).
        plot = len(bars) * bar
        axis = Text(f"{labels[2]:>{gutter - 2}} └" + "─" * plot, style="dim", no_wrap=True)
        return Text("\n").join([*out, axis, self._tick_labels(spans, bar, cursor, gutter)])

    def _tick_labels(self, spans: list[tuple[int, int]], bar: int, cursor: int | None, gutter: int) -> Text:
        plot = len(spans) * bar
        placed: list[tuple[int, str, str]] = []  # (start, text, style)
        if cursor is not None:
            # The ▲ under the cursor's column: its label after it, or before it at the end.
            position = cursor * bar + bar // 2
            mark = f"▲ tick {self.cursor}"
            start = position
            if position + len(mark) > plot:
                mark = f"tick {self.cursor} ▲"
                start = max(0, position - len(mark) + 1)
            placed.append((start, mark, "bold yellow"))
        first, last = f"tick {spans[0][0]}", f"tick {spans[-1][1]}"
        for start, label in ((0, first), (plot - len(last), last)):
            end = start + len(label)
            if start >= 0 and end <= plot and all(end + 1 <= s or start >= s + len(t) + 1 for s, t, _ in placed):
                placed.append((start, label, "dim"))
        line = Text(" " * gutter, no_wrap=True)
        at = 0
        for start, label, style in sorted(placed):
            line.append(" " * (start - at))
            line.append(label, style=style)
            at = start + len(label)
        return line


def columns_of(ticks: int, width: int) -> list[tuple[int, int]]:
    """Ticks ``1..ticks`` over at most ``width`` columns: each column's first and last
    tick, in order, every tick in exactly one column."""
    columns = min(ticks, max(1, width))
    return [(c * ticks // columns + 1, (c + 1) * ticks // columns) for c in range(columns)]
