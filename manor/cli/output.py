"""How the commands print: Rich consoles without markup, and the line a saved run ends with."""

from __future__ import annotations

import sys

from rich.console import Console

from ..saves import SaveWriter

__all__ = ["console", "report_saved"]


def console(*, stderr: bool = False) -> Console:
    """A Rich console for a command's output, with markup off.

    What a command prints holds text from files, users and servers (a path or a scene
    name with brackets, ``pip install 'manor[bench]'``, a server's message): with markup
    on, Rich would take ``[bench]`` for a style and drop it. Style with
    ``rich.text.Text``, never with markup in a string.
    """
    return Console(stderr=stderr, markup=False)


def report_saved(writer: SaveWriter) -> None:
    """One line on stderr saying where the run was saved (stdout may be pure JSON)."""
    print(f"manor: saved {writer.ticks} ticks to {writer.path}", file=sys.stderr)
