"""How a count reads in what Manor prints: ``1 tick``, ``2 ticks``, ``0 ticks``."""

from __future__ import annotations

__all__ = ["counted"]


def counted(count: int | str, noun: str) -> str:
    """``count`` and ``noun``, plural unless the count is 1: ``counted(1, "tick")`` is
    ``1 tick``, ``counted(16, "world")`` is ``16 worlds``. A count may be text: ``"1"``
    reads as one, a range (``"12-13"``) as many."""
    return f"{count} {noun}" if count in (1, "1") else f"{count} {noun}s"
