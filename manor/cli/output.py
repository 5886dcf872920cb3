"""How the commands print: Rich consoles without markup, the line a saved run ends with,
a run's exit status by its calls, and the bar of its ticks on a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

from rich.console import Console

from ..records import StoryEntry, TickRecord
from ..tick.instruments import Instrument
from ..tick.statistics import no_call_succeeded
from ..wording import counted
from .exit_statuses import NO_CALL_SUCCEEDED

if TYPE_CHECKING:  # a command that saves nothing loads no save code
    from ..saves import SaveWriter

__all__ = ["TickBar", "console", "exit_status_of_calls", "report_saved", "tick_bar"]


def console(*, stderr: bool = False) -> Console:
    """A Rich console for a command's output, with markup off.

    What a command prints holds text from files, users and servers (a path or a scene
    name with brackets, ``pip install 'manor[bench]'``, a server's message): with markup
    on, Rich would take ``[bench]`` for a style and drop it. Style with
    ``rich.text.Text``, never with markup in a string.
    """
    return Console(stderr=stderr, markup=False)


def exit_status_of_calls(figures: Iterable[dict[str, Any]]) -> int:
    """A run's exit status by its calls: ``NO_CALL_SUCCEEDED``, said in one line on
    stderr, when it made calls and not one succeeded (``figures``: the summaries of a
    run, a replay or a fleet's worlds); else 0."""
    line = no_call_succeeded(figures)
    if line is None:
        return 0
    print(f"manor: {line}", file=sys.stderr)
    return NO_CALL_SUCCEEDED


def report_saved(writer: SaveWriter) -> None:
    """One line on stderr saying where the run was saved (stdout may be pure JSON)."""
    print(f"manor: saved {counted(writer.ticks, 'tick')} to {writer.path}", file=sys.stderr)



@contextmanager
def tick_bar(console: Console, total: int) -> Iterator[Callable[[], None]]:
    """A transient bar of ``total`` ticks on ``console`` while inside; what to call after
    each tick. Rich's progress module is loaded here, not above: a run not on a terminal
    (every one a script or a test starts) shows no bar and loads none."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("ticks"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        yield partial(progress.advance, progress.add_task("ticks", total=total))


class TickBar(Instrument):
    """Moves a ``tick_bar`` on at every tick of the loop it is added to."""

    def __init__(self, advance: Callable[[], None]) -> None:
        self.advance = advance

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        self.advance()
