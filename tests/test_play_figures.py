"""Figures as the dashboard prints them (abbreviated, never cut) and the story's folds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from manor.folds import FOLD_AT, Fold, fold_story
from manor.play.figures import count, counts, fit, seconds, tick_label
from manor.play.widgets.run_chart import columns_of
from manor.records import StoryEntry
from manor.worlds.manor import CALLERS


class TestFigures:
    def test_a_count_is_exact_then_shorter(self) -> None:
        assert count(904) == ["904"]
        assert count(18900) == ["18900", "19k"]
        assert count(1234567) == ["1234567", "1.23M", "1.2M", "1M"]
        assert count(999999) == ["999999", "1.00M", "1.0M", "1M"]  # rounding moves the unit

    def test_the_total_is_shortened_before_the_tick(self) -> None:
        """``gate_timeout 904/189…`` (the count cut) becomes 904/19k: the same number, rounded."""
        assert counts(904, 18900) == ["904/18900", "904/19k"]
        assert fit(8, counts(904, 18900)) == "904/19k"
        assert fit(9, counts(904, 18900)) == "904/18900"
        assert fit(6, counts(18900, 18900)) == "19k/19k"

    def test_seconds_drop_decimals_then_change_unit(self) -> None:
        assert seconds(4.6) == ["4.60s", "4.6s", "5s"]
        assert seconds(604800) == ["604800.00s", "604800.0s", "604800s", "10080m", "168h"]

    def test_fit_falls_back_to_the_shortest(self) -> None:
        assert fit(2, ["12345", "12k"]) == "12k"

    def test_the_tick_label_says_whether_it_is_under_way(self) -> None:
        assert (tick_label(12, False), tick_label(13, True)) == ("tick 12", "tick 13…")

    @given(st.integers(min_value=0, max_value=2**63 - 1))
    def test_every_form_of_a_count_is_shorter_than_the_one_before(self, n: int) -> None:
        forms = count(n)
        assert forms[0] == str(n)
        assert all(len(b) < len(a) for a, b in zip(forms, forms[1:], strict=False))
        assert len(forms[-1]) <= 4


class TestColumns:
    @given(st.integers(min_value=1, max_value=5000), st.integers(min_value=1, max_value=300))
    def test_every_tick_is_in_exactly_one_column(self, ticks: int, width: int) -> None:
        spans = columns_of(ticks, width)
        assert len(spans) == min(ticks, width)
        covered = [tick for first, last in spans for tick in range(first, last + 1)]
        assert covered == list(range(1, ticks + 1))


def entry(tick: int, agent: str, fallback: str = "", reason: str | None = None, caller: str = "character") -> StoryEntry:
    return StoryEntry(tick=tick, caller=caller, agent=agent, speaker=agent.title(), text="" if fallback else "Hello.",
                      fallback=fallback, reason=reason)  # fmt: skip


class TestFolds:
    def test_alike_degraded_turns_of_a_tick_fold_where_the_first_was(self) -> None:
        said = entry(1, "said")
        idle = [entry(1, f"g{i}", "idle", "gate_timeout") for i in range(FOLD_AT)]
        refused = [entry(1, f"r{i}", "idle", "platform_rejected") for i in range(FOLD_AT - 1)]
        folded = fold_story([idle[0], said, *idle[1:], *refused], lambda e: e, CALLERS)
        assert folded[0] == Fold(idle[0], tuple(idle), "characters") and folded[1:] == [said, *refused]
        assert folded[0].who == f"{FOLD_AT} characters"

    def test_other_ticks_and_kinds_do_not_fold_together(self) -> None:
        items = [entry(t, f"g{i}", "idle", "gate_timeout") for t in (1, 2) for i in range(FOLD_AT - 1)]
        assert fold_story(items, lambda e: e, CALLERS) == items
        beats = [entry(1, f"b{i}", "speechless", "gate_timeout", caller="werewolf") for i in range(FOLD_AT)]
        [fold] = fold_story(beats, lambda e: e, CALLERS)
        assert isinstance(fold, Fold) and fold.who == f"{FOLD_AT} werewolf calls"

    @given(st.lists(st.tuples(st.integers(1, 3), st.sampled_from(["", "idle"]), st.sampled_from(["gate_timeout", "call_timeout"])), max_size=60))
    def test_folding_loses_nothing_and_keeps_the_order(self, specs: list[tuple[int, str, str]]) -> None:
        items = [entry(tick, f"a{i}", fallback, reason if fallback else None) for i, (tick, fallback, reason) in enumerate(specs)]
        folded = fold_story(items, lambda e: e, CALLERS)
        flat = [e for item in folded for e in (item.items if isinstance(item, Fold) else (item,))]
        assert sorted(flat, key=items.index) == items and len(flat) == len(items)
        unfolded = [item for item in folded if not isinstance(item, Fold)]
        assert unfolded == [item for item in items if item in unfolded]
