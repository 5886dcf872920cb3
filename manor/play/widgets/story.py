"""The story: narration, dialogue and scene beats, with every degraded turn marked."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console
from rich.text import Text
from textual.widgets import RichLog

from ...calls import CallerKind
from ...records import StoryEntry

__all__ = ["StoryLog", "story_line", "story_text"]

#: At most this many new lines are written per refresh; a flood (a tick of a 1,000-agent
#: world) is summarised by a count, so drawing stays cheap.
_LINES_PER_REFRESH = 40
#: Cells before the words of a line: the tick number and a space.
_INDENT = 4
# Wrapping needs a console only to measure text; nothing is printed with it.
_MEASURE = Console(width=200, file=io.StringIO())


def story_line(entry: StoryEntry, width: int) -> Text:
    """One story entry as the panel shows it, ``width`` cells wide: its tick, then its
    words, wrapped under themselves. A degraded turn says what replaced it, and why."""
    words = story_text(entry).wrap(_MEASURE, max(8, width - _INDENT))
    line = Text(no_wrap=True)
    for i, piece in enumerate(words):
        line.append(f"{entry.tick:>{_INDENT - 1}} " if i == 0 else " " * _INDENT, style="dim")
        line.append_text(piece)
        if i < len(words) - 1:
            line.append("\n")
    return line


def story_text(entry: StoryEntry) -> Text:
    """The words of one story entry, styled by who said them."""
    text = Text()
    if entry.fallback:
        text.append(f"{entry.speaker}: ", style="bold")
        text.append(f"⚠ {entry.fallback}", style="bold red")
        if entry.reason:
            text.append(f" ({entry.reason})", style="red")
        return text
    if entry.caller == CallerKind.NARRATOR:
        text.append(entry.text, style="italic")
    elif entry.caller == CallerKind.SUMMARISER:
        text.append("summary: ", style="dim bold")
        text.append(entry.text, style="dim")
    elif entry.caller == CallerKind.SCENE_BEAT:
        text.append("beat · ", style="magenta")
        text.append(f"{entry.speaker}: ", style="bold magenta")
        text.append(entry.text)
    else:
        text.append(f"{entry.speaker}: ", style="bold")
        text.append(entry.text)
    return text


class StoryLog(RichLog):
    """The story as it arrives, tick by tick."""

    BORDER_TITLE = "story"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, max_lines=400, min_width=20, wrap=True, markup=False, auto_scroll=True)
        self._shown = 0

    def show(self, story: Sequence[StoryEntry], count: int) -> None:
        """Write the entries added since the last call.

        Args:
            story: the newest entries kept; ``count``: entries ever added.
        """
        new = count - self._shown
        if new <= 0:
            return
        self._shown = count
        fresh = list(story)[-min(new, len(story)):]
        lines: list[Text] = []
        if len(fresh) > _LINES_PER_REFRESH:
            lines.append(Text(f"    … {new - _LINES_PER_REFRESH} lines not shown (too many at once)", style="dim"))
            fresh = fresh[-_LINES_PER_REFRESH:]
        elif new > len(fresh):
            lines.append(Text(f"    … {new - len(fresh)} lines not shown", style="dim"))
        width = self.scrollable_content_region.width or 60
        lines.extend(story_line(entry, width) for entry in fresh)
        # One write: the log scrolls (and re-measures) once, not once a line.
        self.write(Text("\n").join(lines))
