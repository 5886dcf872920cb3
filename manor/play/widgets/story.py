"""The story: narration, dialogue and scene beats, with every degraded turn marked, mass
degradations folded into one line; filtered by a word, degraded turns hidden on demand."""

from __future__ import annotations

import functools
import io
from collections import deque
from collections.abc import Mapping, Sequence

import attrs
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.text import Text
from textual.binding import Binding
from textual.widgets import RichLog

from ...callers import Caller, caller_of
from ...folds import Fold
from ...records import StoryEntry
from ..state import StoryItem

__all__ = ["StoryFilter", "StoryLog", "story_line", "story_parts", "story_rows", "story_text"]

#: At most this many new lines are written per refresh; a flood (a tick of a 1,000-agent
#: world) is summarised by a count, so drawing stays cheap.
_LINES_PER_REFRESH = 40
#: Story items kept for re-wrapping at a new width (the log keeps its last 400 lines).
_KEPT = 400
#: Cells before the words of a line: the tick number and a space.
_INDENT = 4
# Wrapping needs a console only to measure text; nothing is printed with it.
_MEASURE = Console(width=200, file=io.StringIO())
#: A style by name, parsed once (as ``Text`` rendering parses its span styles).
_style = functools.cache(_MEASURE.get_style)
_NEWLINE = Segment.line()


#: Names a folded line lists before it counts the rest.
_NAMES_SHOWN = 3


@attrs.frozen
class StoryFilter:
    """What the story shows: lines mentioning ``text`` (a speaker, an agent id, words
    said, a fallback or reason; any case), and degraded turns unless ``hide_degraded``."""

    text: str = ""
    hide_degraded: bool = False

    def visible(self, item: StoryItem) -> list[StoryItem]:
        """What of ``item`` is shown: it, nothing, or — a fold searched for one of its
        callers — the folded turns that match."""
        degraded = isinstance(item, Fold) or bool(item.fallback)
        if self.hide_degraded and degraded:
            return []
        if not self.text:
            return [item]
        if isinstance(item, Fold):
            if self._matches(item.entry, fold=True):
                return [item]
            return [entry for entry in item.items if self._matches(entry)]
        return [item] if self._matches(item) else []

    def describe(self) -> str:
        """``/hobbes · degraded hidden``, or "" when everything is shown."""
        parts = [f"/{self.text}"] if self.text else []
        return " · ".join([*parts, "degraded hidden"] if self.hide_degraded else parts)

    def _matches(self, entry: StoryEntry, *, fold: bool = False) -> bool:
        needle = self.text.casefold()
        # A fold is found by what all its turns share, not by the first one's name.
        fields = (entry.fallback, entry.reason or "") if fold else (entry.speaker, entry.agent, entry.text, entry.fallback, entry.reason or "")
        return any(needle in field.casefold() for field in fields)


def story_line(item: StoryItem, width: int, callers: Mapping[str, Caller]) -> Text:
    """One story line as the panel shows it, ``width`` cells wide: its tick, then its
    words, wrapped under themselves, styled as its world's ``callers`` say. A degraded
    turn says what replaced it, and why."""
    words = story_text(item, callers).wrap(_MEASURE, max(8, width - _INDENT))
    line = Text(no_wrap=True)
    for i, piece in enumerate(words):
        line.append(_tick_label(item) if i == 0 else " " * _INDENT, style="dim")
        line.append_text(piece)
        if i < len(words) - 1:
            line.append("\n")
    return line


def _tick_label(item: StoryItem) -> str:
    """A story line's first cells: its tick, right-aligned in the indent."""
    entry = item.entry if isinstance(item, Fold) else item
    return f"{entry.tick:>{_INDENT - 1}} "


def story_rows(item: StoryItem, width: int, callers: Mapping[str, Caller]) -> list[list[Segment]]:
    """``story_line`` rendered: the segments of each of its rows.

    A line that fits on one row (almost every line, at the panel's usual width) is
    made straight from its parts, without building, wrapping and rendering a ``Text``:
    a flood writes ``_LINES_PER_REFRESH`` lines a frame, and the ``Text`` way of
    making them was the frame's largest part. The segments are the ones rendering the
    ``Text`` gives, so what is drawn is the same.
    """
    parts = story_parts(item, callers)
    room = max(8, width - _INDENT)
    # Tabs and control characters (a model's answer may hold them) and wide lines take
    # the ``Text`` way, which expands, strips and wraps them.
    if all(text.isprintable() for text, _ in parts) and sum(cell_len(text) for text, _ in parts) <= room:
        return [[Segment(_tick_label(item), _style("dim")), *(Segment(text, _style(style)) for text, style in parts if text)]]
    return [list(row) for row in Segment.split_lines(story_line(item, width, callers).render(_MEASURE))]


def story_text(item: StoryItem, callers: Mapping[str, Caller]) -> Text:
    """The words of one story line, styled by who said them; a fold counts its turns and
    names the first few."""
    return Text.assemble(*story_parts(item, callers))


def story_parts(item: StoryItem, callers: Mapping[str, Caller]) -> list[tuple[str, str]]:
    """The words of one story line as (text, style) parts (``story_text``), as its
    caller kind's ``Caller.style`` tells it."""
    if isinstance(item, Fold):
        entry = item.entry
        parts = [(f"⚠ {item.says}", "bold red")]
        if entry.reason:
            parts.append((f" ({entry.reason})", "red"))
        names = ", ".join(e.speaker for e in item.items[:_NAMES_SHOWN])
        more = len(item.items) - _NAMES_SHOWN
        parts.append((f" — {names}" + (f" and {more} more" if more > 0 else ""), "dim"))
        return parts
    entry = item
    if entry.fallback:
        parts = [(f"{entry.speaker}: ", "bold"), (f"⚠ {entry.fallback}", "bold red")]
        if entry.reason:
            parts.append((f" ({entry.reason})", "red"))
        return parts
    caller = caller_of(callers, entry.caller)
    if caller.style == "narration":
        return [(entry.text, "italic")]
    if caller.style == "summary":
        return [("summary: ", "dim bold"), (entry.text, "dim")]
    if caller.style == "aside":
        return [(f"{caller.label} · ", "magenta"), (f"{entry.speaker}: ", "bold magenta"), (entry.text, "")]
    return [(f"{entry.speaker}: ", "bold"), (entry.text, "")]


def _note_rows(note: Text, width: int) -> list[list[Segment]]:
    """A note of the panel's own ("… 12 lines not shown"), wrapped and rendered."""
    return [list(row) for line in note.wrap(_MEASURE, width) for row in Segment.split_lines(line.render(_MEASURE))]


@attrs.frozen
class _Rows:
    """Rows of segments, wrapped and styled already: rendered as they are."""

    rows: list[list[Segment]]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for i, row in enumerate(self.rows):
            if i:
                yield _NEWLINE
            yield from row


def _newest(items: Sequence[StoryItem], most: int) -> list[StoryItem]:
    """The newest ``most`` of ``items``, in order — every fold among them: a fold says
    what happened to hundreds of callers, the line least to be left out."""
    folds = sum(1 for item in items if isinstance(item, Fold))
    room = max(0, most - folds)
    others = [i for i, item in enumerate(items) if not isinstance(item, Fold)]
    dropped = set(others[: len(others) - room])
    return [item for i, item in enumerate(items) if i not in dropped]


class StoryLog(RichLog):
    """The story as it arrives, tick by tick.

    It follows the newest line, as ``tail -f`` does, until you scroll up to read back:
    then it stays where you are and its subtitle counts the lines that arrived since;
    scrolling back to the bottom, ``End`` (while it has the focus) or ``f`` follows again.
    A new width re-wraps the lines it keeps; a new filter shows the kept story's lines
    that pass it, newest last, and follows.
    """

    BORDER_TITLE = "story"
    BINDINGS = [Binding("end", "follow", "follow the story", show=False)]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, max_lines=400, min_width=20, wrap=True, markup=False, auto_scroll=False)
        self._shown = 0
        #: The story as the state keeps it (its newest lines), for a new filter.
        self._story: Sequence[StoryItem] = ()
        #: What the log holds, for re-wrapping: lines, and the "not shown" notes.
        self._kept: deque[StoryItem | Text] = deque(maxlen=_KEPT)
        self._wrapped_at = 0
        #: Whether the newest line is kept in view.
        self.following = True
        #: Lines that arrived while not following.
        self.unseen = 0
        self.filter = StoryFilter()
        #: The world's caller kinds, which say how each kind's lines are styled.
        self._callers: Mapping[str, Caller] = {}

    def show(self, story: Sequence[StoryItem], count: int, callers: Mapping[str, Caller]) -> None:
        """Write the lines added since the last call that pass the filter.

        Args:
            story: the newest lines kept; ``count``: lines ever added.
            callers: the world's caller kinds (``World.callers``).
        """
        self._story = story
        self._callers = callers
        new = count - self._shown
        if new <= 0:
            return
        self._shown = count
        arrived = list(story)[-min(new, len(story)) :]
        # Lines that came and went from the state's story between two refreshes.
        missed = new - len(arrived)
        fresh = self._visible(arrived)
        items: list[StoryItem | Text] = []
        if len(fresh) > _LINES_PER_REFRESH:
            kept = _newest(fresh, _LINES_PER_REFRESH)
            items.append(Text(f"    … {len(fresh) - len(kept) + missed} lines not shown (too many at once)", style="dim"))
            fresh = kept
        elif missed:
            items.append(Text(f"    … {missed} lines not shown", style="dim"))
        if not items and not fresh:
            return
        items.extend(fresh)
        self._kept.extend(items)
        self._write(items)
        if not self.following:
            self.unseen += len(fresh)
            self._say_unseen()

    def set_filter(self, story_filter: StoryFilter) -> None:
        """Show only what ``story_filter`` lets through, from the lines kept."""
        if story_filter == self.filter:
            return
        self.filter = story_filter
        described = story_filter.describe()
        self.border_title = f"story · {described}" if described else "story"
        self.clear()
        self._kept.clear()
        items = self._visible(self._story)[-_KEPT:]
        if not items:
            items = [Text("    no line of the kept story passes the filter", style="dim")]
        self._kept.extend(items)
        self._write(items)
        self.action_follow()

    def _visible(self, items: Sequence[StoryItem]) -> list[StoryItem]:
        if not self.filter.describe():
            return list(items)
        return [shown for item in items for shown in self.filter.visible(item)]

    def action_follow(self) -> None:
        """Follow the newest line again."""
        self.following = True
        self.unseen = 0
        self.border_subtitle = ""
        self.scroll_end(animate=False)

    def _write(self, items: Sequence[StoryItem | Text]) -> None:
        width = self.scrollable_content_region.width or 60
        self._wrapped_at = width
        rows = [row for item in items for row in (_note_rows(item, width) if isinstance(item, Text) else story_rows(item, width, self._callers))]
        # One write: the log scrolls (and re-measures) once, not once a line. Its width
        # given: the lines are wrapped and rendered to it already, nothing is left to
        # measure or wrap.
        self.write(_Rows(rows), width=width, scroll_end=False)
        if self.following:
            # At once, not after the next screen refresh as RichLog scrolls: the frame
            # that brings the lines shows them, composed once rather than twice.
            self.scroll_end(animate=False, immediate=True, x_axis=False)

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
