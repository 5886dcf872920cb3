"""The notices in force, on lines of their own above the footer.

Textual shows a notice as a toast over the screen's bottom right: over the story and the
agents table, for as long as it lasts (the "gate too small" warning hid half the table
at 80×24 for 20 s). Here a notice takes rows of its own while it lasts, and the panels
above give them up: nothing is drawn over a figure.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.notifications import Notification
from textual.widgets import Static

__all__ = ["NoticeLines"]

#: How each severity is marked, and its style.
_SEVERITIES = {"information": ("●", "bold cyan"), "warning": ("⚠", "bold yellow"), "error": ("✗", "bold red")}


class NoticeLines(Static):
    """One line a notice (wrapped if it must), newest last; no room at all when none."""

    DEFAULT_CSS = """
    NoticeLines {
        display: none;
        height: auto;
        max-height: 8;
        padding: 0 1;
        background: $panel;
    }
    """

    def show(self, notices: Sequence[Notification]) -> None:
        self.display = bool(notices)
        text = Text()
        for i, notice in enumerate(notices):
            mark, style = _SEVERITIES.get(notice.severity, _SEVERITIES["information"])
            if i:
                text.append("\n")
            text.append(f"{mark} ", style=style)
            if notice.title:
                text.append(f"{notice.title}: ", style=style)
            text.append_text(Text.from_markup(notice.message) if notice.markup else Text(notice.message))
        self.update(text)
