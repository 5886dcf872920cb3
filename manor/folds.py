"""Mass degradations folded into one story line: ``⚠ 912 characters: idle (gate_timeout)``.

When a gate far too small for a tick times out nine hundred characters, the story would
say ``Guest 5: ⚠ idle (gate_timeout)`` nine hundred times and bury the lines that were
said. Degraded turns of one tick that are alike — same caller kind, fallback and reason,
and whatever else the reader's ``key`` adds — are folded into one line once there are
``FOLD_AT`` of them; the line keeps every folded turn, so nothing is lost, only drawn
shorter. The dashboard's story folds, and so does ``manor story --format md`` (text and
JSON Lines keep a line per entry, for tools).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Generic, TypeVar

import attrs

from .callers import Caller, caller_of
from .records import StoryEntry

__all__ = ["FOLD_AT", "Fold", "fold_story"]

#: Alike degraded turns in one tick from which on they are folded into one line.
FOLD_AT = 5

T = TypeVar("T")


@attrs.frozen
class Fold(Generic[T]):
    """Alike degraded turns of one tick, as one story line.

    Attributes:
        entry: the first folded turn's story entry (its tick, caller kind, fallback and
            reason are every folded turn's).
        items: every folded turn, in story order.
        plural: how the caller kind names many of its callers (``Caller.plural``).
    """

    entry: StoryEntry
    items: tuple[T, ...]
    plural: str

    @property
    def who(self) -> str:
        """``912 characters``."""
        return f"{len(self.items)} {self.plural}"

    @property
    def says(self) -> str:
        """``912 characters: idle``: who, then the fallback as one degraded turn's line
        gives it (``Hobbes: ⚠ idle``). A world's fallback is a phrase for one caller
        (``abstains``); after a count it would not agree (``8 vote calls abstains``)."""
        return f"{self.who}: {self.entry.fallback}"


def fold_story(
    items: Iterable[T],
    entry: Callable[[T], StoryEntry],
    callers: Mapping[str, Caller],
    key: Callable[[T], Hashable] = lambda item: (),
) -> list[T | Fold[T]]:
    """``items`` (story entries, or lines holding one) in order, with every group of at
    least ``FOLD_AT`` alike degraded turns replaced by one ``Fold`` where its first turn
    was.

    Args:
        entry: the story entry of an item.
        callers: the world's caller kinds (``World.callers``), whose plurals name a fold.
        key: what else must be equal for two degraded turns to fold (the export folds
            only turns that failed with the same message).
    """
    items = list(items)
    groups: dict[Hashable, list[T]] = {}
    for item in items:
        e = entry(item)
        if e.fallback:
            groups.setdefault((e.tick, e.caller, e.fallback, e.reason, key(item)), []).append(item)
    folds = {id(group[0]): group for group in groups.values() if len(group) >= FOLD_AT}
    if not folds:
        return items
    folded = {id(item) for group in folds.values() for item in group}
    out: list[T | Fold[T]] = []
    for item in items:
        if (group := folds.get(id(item))) is not None:
            first = entry(item)
            out.append(Fold(first, tuple(group), caller_of(callers, first.caller).plural))
        elif id(item) not in folded:
            out.append(item)
    return out
