"""The agents table: every caller, its state this tick, its last latency and line (or,
degraded, the reason and what failed).

A line-API widget: it draws only the rows on screen, straight from the engine's rows,
so a world of a thousand agents costs a frame no more than a world of ten.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..state import CallerRow
from .degradations import SHORT_REASONS

__all__ = ["AgentsTable"]

_KINDS = {"character": "char", "narrator": "narr", "summariser": "summ", "beat": "beat"}
_NAME_WIDTH = 16
#: kind, name, state, seconds: the fixed columns before the last line.
_FIXED = f"{'kind':<5}{'name':<{_NAME_WIDTH + 1}}{'state':<9}{'secs':>5}  "
_HEADER = _FIXED + "last line"
_DIM = Style(dim=True)
_BOLD = Style(bold=True)
_STATE_STYLES = {
    "queued": Style(color="yellow"),
    "running": Style(color="cyan", bold=True),
    "done": Style(color="green"),
    "degraded": Style(color="red", bold=True),
    "—": _DIM,
}
_REASON = Style(color="red")


class AgentsTable(ScrollView, can_focus=True):
    """One row per caller under a fixed header; scroll with the wheel or, focused, the
    arrow and page keys."""

    BORDER_TITLE = "agents"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._rows: list[CallerRow] = []
        self._index: dict[str, int] = {}

    def show(self, rows: Mapping[str, CallerRow], changed: Collection[str]) -> None:
        """Take rows not shown yet (in ``rows`` order); redraw if a ``changed`` row is on
        screen."""
        grew = len(rows) != len(self._rows)
        if grew:
            self._rows = list(rows.values())
            self._index = {row.key: i for i, row in enumerate(self._rows)}
            self.virtual_size = Size(self.size.width, len(self._rows) + 1)
        top = int(self.scroll_y)
        bottom = top + max(0, self.size.height - 1)
        if grew or any(top <= self._index.get(key, -1) < bottom for key in changed):
            self.refresh()

    @property
    def row_count(self) -> int:
        return len(self._rows)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y == 0:
            return Strip([Segment(_HEADER[:width], _BOLD)]).extend_cell_length(width).crop(0, width)
        index = int(self.scroll_y) + y - 1
        if index >= len(self._rows):
            return Strip.blank(width)
        row = self._rows[index]
        latency = "" if row.latency is None else f"{row.latency:5.2f}"
        if row.state == "degraded":
            # The short reason, then what failed: as much of it as the width allows.
            reason = SHORT_REASONS.get(row.reason or "", row.reason)
            line = Segment(f"{reason}: {row.error}" if row.error else f"{reason}", _REASON)
        else:
            line = Segment(row.line, None if row.state == "done" else _DIM)
        segments = [
            Segment(f"{_KINDS.get(row.kind, row.kind):<5}", _DIM),
            Segment(f"{row.name[:_NAME_WIDTH]:<{_NAME_WIDTH + 1}}"),
            Segment(f"{row.state:<9}", _STATE_STYLES.get(row.state)),
            Segment(f"{latency:>5}  "),
            line,
        ]
        return Strip(segments).crop(0, width).extend_cell_length(width)

    def on_resize(self) -> None:
        self.virtual_size = Size(self.size.width, len(self._rows) + 1)
