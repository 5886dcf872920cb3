"""How the commands print: Rich consoles without markup, the line a saved run ends with,
and a run's exit status by its calls."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from rich.console import Console

from ..tick.statistics import no_call_succeeded
from ..wording import counted
from .exit_statuses import NO_CALL_SUCCEEDED

if TYPE_CHECKING:  # a command that saves nothing loads no save code
    from ..saves import SaveWriter

__all__ = ["console", "exit_status_of_calls", "report_saved"]


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

