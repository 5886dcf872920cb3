"""How counts read in what Manor prints."""

from __future__ import annotations

import pytest

from manor.wording import counted


@pytest.mark.parametrize(
    ("count", "noun", "text"),
    [(1, "tick", "1 tick"), ("1", "tick", "1 tick"), (0, "tick", "0 ticks"), (2, "world", "2 worlds"), (12, "story line", "12 story lines"), ("12-13", "tick", "12-13 ticks")],
)
def test_a_count_is_plural_unless_it_is_one(count: int | str, noun: str, text: str) -> None:
    assert counted(count, noun) == text
