"""The agents table's search (``g``): type part of a name, the cursor goes to it.

With a thousand agents the arrows are no way to find one. The prompt sits above the
footer, as the story's filter does (``/``); as you type, the table's cursor goes to the
first caller at or after where it was whose name or agent id holds the text (any case),
``↓`` / ``↑`` go to the next / previous one, ``Enter`` stays there, ``Esc`` goes back.
"""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input

from .agents import AgentsTable

__all__ = ["AgentSearch"]


class AgentSearch(Input):
    """The search prompt of one agents table (``open`` it on the table)."""

    BINDINGS = [
        Binding("down", "go(1)", "next match", show=False),
        Binding("up", "go(-1)", "previous match", show=False),
        Binding("escape", "cancel", "back to where the cursor was", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(placeholder="go to an agent: part of a name or id (↓ ↑ next, enter stays, esc goes back)", id=id, disabled=True)
        self._table: AgentsTable | None = None
        # The row the cursor was on when the search began: typing searches from there.
        self._origin = 0

    def open(self, table: AgentsTable) -> None:
        """Search ``table``, starting at its cursor, with the last text searched for."""
        self._table, self._origin = table, table.cursor
        table.searching = True
        self.display, self.disabled = True, False
        self.focus()
        self._go(0)

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._go(0)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._close()

    def action_go(self, step: int) -> None:
        self._go(step)

    def action_cancel(self) -> None:
        if self._table is not None and self._table.is_attached:
            self._table.move_cursor(self._origin)
        self._close()

    def _go(self, step: int) -> None:
        """The first match from where the search began (``step`` 0), or the next or
        previous one from the cursor, round the table's end."""
        table, text = self._table, self.value.strip()
        if table is None or not table.is_attached:  # a replay's restart made a new table
            return
        matches = table.matching(text) if text else []
        if not matches:
            # Where the search began, not where a shorter text had gone.
            table.move_cursor(self._origin)
            table.border_subtitle = f"no agent matches {text!r}" if text else "type part of a name"
            return
        if step == 0:
            index = next((i for i in matches if i >= self._origin), matches[0])
        elif step > 0:
            index = next((i for i in matches if i > table.cursor), matches[0])
        else:
            index = next((i for i in reversed(matches) if i < table.cursor), matches[-1])
        table.move_cursor(index)
        table.border_subtitle = f"{matches.index(index) + 1} of {len(matches)} · ↓ ↑ next"

    def _close(self) -> None:
        self.display, self.disabled = False, True
        table = self._table
        if table is not None and table.is_attached:
            table.searching = False
            table.border_subtitle = AgentsTable.BORDER_SUBTITLE
            table.focus()
