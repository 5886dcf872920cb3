"""The story's filter prompt (``/``): one line above the footer, as in ``less``."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input

__all__ = ["StoryFilterInput"]


class StoryFilterInput(Input):
    """Type to filter the story as you type; ``Enter`` keeps the filter, ``Esc`` clears it."""

    BINDINGS = [Binding("escape", "app.clear_story_filter", "clear the filter", show=False)]

    def __init__(self, *, id: str | None = None, disabled: bool = False) -> None:
        super().__init__(placeholder="filter the story: a name or words (enter keeps it, esc clears it)", id=id, disabled=disabled)
