"""The story: narration, dialogue and scene beats, with every degraded turn marked."""

from __future__ import annotations

import io
from collections import deque
from collections.abc import Sequence

from rich.console import Console
from rich.text import Text
from textual.binding import Binding
from textual.widgets import RichLog

from ...calls import CallerKind
from ...records import StoryEntry

__all__ = ["StoryLog", "story_line", "story_text"]

#: At most this many new lines are written per refresh; a flood (a tick of a 1,000-agent
#: world) is summarised by a count, so drawing stays cheap.
_LINES_PER_REFRESH = 40
#: Story items kept for re-wrapping at a new width (the log keeps its last 400 lines).
_KEPT = 400
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
    """The story as it arrives, tick by tick.

    It follows the newest line, as ``tail -f`` does, until you scroll up to read back:
    then it stays where you are and its subtitle counts the lines that arrived since;
    scrolling back to the bottom, ``End`` (while it has the focus) or ``f`` follows again.
    A new width re-wraps the lines it keeps.
    """

    BORDER_TITLE = "story"
    BINDINGS = [Binding("end", "follow", "follow the story", show=False)]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, max_lines=400, min_width=20, wrap=True, markup=False, auto_scroll=False)
        self._shown = 0
        #: What the log holds, for re-wrapping: entries, and the "not shown" notes.
        self._kept: deque[StoryEntry | Text] = deque(maxlen=_KEPT)
        self._wrapped_at = 0
        #: Whether the newest line is kept in view.
        self.following = True
        #: Lines that arrived while not following.
        self.unseen = 0

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
        items: list[StoryEntry | Text] = []
        if len(fresh) > _LINES_PER_REFRESH:
            items.append(Text(f"    … {new - _LINES_PER_REFRESH} lines not shown (too many at once)", style="dim"))
            fresh = fresh[-_LINES_PER_REFRESH:]
        elif new > len(fresh):
            items.append(Text(f"    … {new - len(fresh)} lines not shown", style="dim"))
        items.extend(fresh)
        self._kept.extend(items)
        self._write(items)
        if not self.following:
            self.unseen += len(fresh)
            self._say_unseen()

    def action_follow(self) -> None:
        """Follow the newest line again."""
        self.following = True
        self.unseen = 0
        self.border_subtitle = ""
        self.scroll_end(animate=False)

    def _write(self, items: Sequence[StoryEntry | Text]) -> None:
        width = self.scrollable_content_region.width or 60
        self._wrapped_at = width
        lines = [item if isinstance(item, Text) else story_line(item, width) for item in items]
        # One write: the log scrolls (and re-measures) once, not once a line.
        self.write(Text("\n").join(lines), scroll_end=self.following)

    def _say_unseen(self) -> None:
        self.border_subtitle = f"not following · {self.unseen} new · f follows"

    def on_resize(self) -> None:
        width = self.scrollable_content_region.width
        if width and self._wrapped_at and width != self._wrapped_at:
            self.clear()
            self._write(list(self._kept))

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        at_end = new_value >= self.max_scroll_y
        if at_end and not self.following:
            self.action_follow()
        elif not at_end and self.following and new_value < old_value:
            # Scrolled up by the reader (the log itself only ever scrolls down).
            self.following = False
            self._say_unseen()
