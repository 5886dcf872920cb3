"""The agents table: every caller, its state on the tick shown, its last latency and line
(or, degraded, the reason and what failed); ``Enter`` or a click opens a caller's history.

A line-API widget: it draws only the rows on screen, straight from the engine's rows,
so a world of a thousand agents costs a frame no more than a world of ten.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.events import Click
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..figures import fit, seconds
from ..messages import AgentChosen
from ..state import CallerRow
from .degradations import SHORT_REASONS

__all__ = ["AgentsTable"]

#: (name, state, seconds) column widths, wide and compact: compact when the wide ones
#: would leave the last line fewer than ``_LINE_ROOM`` cells (80 columns).
_WIDE, _COMPACT = (16, 9, 5), (12, 2, 5)
_LINE_ROOM = 16
_DIM = Style(dim=True)
_BOLD = Style(bold=True)
_CURSOR = Style(reverse=True)
_STATE_STYLES = {
    "queued": Style(color="yellow"),
    "running": Style(color="cyan", bold=True),
    "done": Style(color="green"),
    "degraded": Style(color="red", bold=True),
    "—": _DIM,
}
#: A state in one cell, for the compact columns.
STATE_MARKS = {"queued": "…", "running": "▶", "done": "✓", "degraded": "✗", "—": "—"}
#: A world's mark (``world_marks``) where the state column is a mark wide; another mark
#: shows its first letter.
WORLD_MARKS = {"dead": "†"}
_REASON = Style(color="red")
_MARKED = Style(color="magenta", dim=True)


def readable(line: str) -> str:
    """A last line as the table shows it: a structured answer's JSON object as its
    fields (``target: Maud``), anything else as it is."""
    if not line.startswith("{"):
        return line
    try:
        value = json.loads(line)
    except ValueError:
        return line
    if not isinstance(value, dict):
        return line
    return ", ".join(f"{key}: {item}" for key, item in value.items())


class AgentsTable(ScrollView, can_focus=True):
    """One row per caller under a fixed header. The arrow, page, ``Home`` and ``End``
    keys move the cursor (the view follows it), the wheel scrolls; ``Enter`` or a click
    on a row asks for that caller's history (an ``AgentChosen`` message)."""

    BORDER_TITLE = "agents"
    BORDER_SUBTITLE = "enter: history · g: find"
    BINDINGS = [
        Binding("up", "move(-1)", "up", show=False),
        Binding("down", "move(1)", "down", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("home", "move(-1_000_000_000)", "first row", show=False),
        Binding("end", "move(1_000_000_000)", "last row", show=False),
        Binding("enter", "choose", "history", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._rows: list[CallerRow] = []
        self._index: dict[str, int] = {}
        #: The row the cursor is on.
        self.cursor = 0
        #: A search (``AgentSearch``) moves the cursor: it shows without the focus.
        self.searching = False

    def show(self, rows: Mapping[str, CallerRow], changed: Collection[str], *, tick: str = "") -> None:
        """Take rows not shown yet (in ``rows`` order); redraw if a ``changed`` row is on
        screen. ``tick`` names the tick whose states the rows show."""
        title = f"agents · {tick}" if tick else "agents"
        if title != self.border_title:
            self.border_title = title
        grew = len(rows) != len(self._rows)
        if grew:
            self._rows = list(rows.values())
            self._index = {row.key: i for i, row in enumerate(self._rows)}
            self.virtual_size = Size(self.size.width, len(self._rows) + 1)
            self.move_cursor(self.cursor)  # a cursor set before the rows came
        if grew:
            self.refresh()
            return
        # Only the rows on screen that changed are drawn again (a paced run ends a few
        # calls a frame); the whole table once most of them did (flat out, all).
        top = int(self.scroll_y)
        visible = max(0, self.size.height - 1)
        index = self._index
        lines = [i for key in changed if top <= (i := index.get(key, -1)) < top + visible]
        if len(lines) * 2 > visible:
            self.refresh()
        else:
            for i in lines:
                self.refresh_line(i + 1)  # the header is line 0

    @property
    def row_count(self) -> int:
        return len(self._rows)

    def matching(self, text: str) -> list[int]:
        """The rows whose name or agent id holds ``text`` (any case), in order."""
        needle = text.casefold()
        return [i for i, row in enumerate(self._rows) if needle in row.name.casefold() or needle in row.agent.casefold()]

    @property
    def chosen(self) -> CallerRow | None:
        """The row under the cursor."""
        return self._rows[self.cursor] if 0 <= self.cursor < len(self._rows) else None

    # -- drawing ------------------------------------------------------------------------

    def _columns(self) -> tuple[int, int, int]:
        name, state, secs = _WIDE
        # kind, name and a space, state, seconds and two spaces, then the last line
        return _WIDE if self.size.width - (5 + name + 1 + state + secs + 2) >= _LINE_ROOM else _COMPACT

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        name_width, state_width, secs_width = self._columns()
        if y == 0:
            state = "state" if state_width > 2 else ""
            header = f"{'kind':<5}{'name':<{name_width + 1}}{state:<{state_width}}{'secs':>{secs_width}}  last line"
            return Strip([Segment(header[:width], _BOLD)]).extend_cell_length(width).crop(0, width)
        index = int(self.scroll_y) + y - 1
        if index >= len(self._rows):
            return Strip.blank(width)
        row = self._rows[index]
        latency = "" if row.latency is None else fit(secs_width, [f.removesuffix("s") for f in seconds(row.latency)])
        if row.state == "degraded":
            # The short reason, then what failed: as much of it as the width allows.
            reason = SHORT_REASONS.get(row.reason or "", row.reason)
            line = Segment(f"{reason}: {row.error}" if row.error else f"{reason}", _REASON)
        else:
            line = Segment(readable(row.line), None if row.state == "done" else _DIM)
        if row.state == "—" and row.mark:
            # No call this tick, and its world says why ("dead").
            state, state_style = row.mark[:state_width] if state_width > 2 else WORLD_MARKS.get(row.mark, row.mark[:1]), _MARKED
        else:
            state = row.state if state_width > 2 else STATE_MARKS.get(row.state, row.state)
            state_style = _STATE_STYLES.get(row.state)
        segments = [
            Segment(f"{row.short:<5}", _DIM),
            Segment(f"{row.name[:name_width]:<{name_width + 1}}", _DIM if row.mark else None),
            Segment(f"{state:<{state_width}}", state_style),
            Segment(f"{latency:>{secs_width}}  "),
            line,
        ]
        strip = Strip(segments).crop(0, width).extend_cell_length(width)
        if index == self.cursor and (self.has_focus or self.searching):
            strip = strip.apply_style(_CURSOR)
        return strip

    def on_resize(self) -> None:
        self.virtual_size = Size(self.size.width, len(self._rows) + 1)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    # -- the cursor ---------------------------------------------------------------------

    def action_move(self, rows: int) -> None:
        self.move_cursor(self.cursor + rows)

    def action_page(self, pages: int) -> None:
        self.move_cursor(self.cursor + pages * max(1, self.size.height - 1))

    def move_cursor(self, index: int) -> None:
        """Put the cursor on row ``index`` (kept within the table), in view."""
        self.cursor = max(0, min(len(self._rows) - 1, index)) if self._rows else max(0, index)
        visible = max(1, self.size.height - 1)
        top = int(self.scroll_y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + visible:
            self.scroll_to(y=self.cursor - visible + 1, animate=False)
        self.refresh()

    def action_choose(self) -> None:
        if (row := self.chosen) is not None:
            self.post_message(AgentChosen(row.caller, row.agent))

    def on_click(self, event: Click) -> None:
        index = int(self.scroll_y) + event.y - 1
        if event.y >= 1 and index < len(self._rows):
            self.move_cursor(index)
            self.action_choose()
