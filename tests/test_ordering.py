"""The longest-first ticket order (manor.tick.ordering) and the latency predictor it is fed
(manor.tick.prediction): planned makespans worked out by hand, and properties over many."""

from __future__ import annotations

import hashlib
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from manor.calls import Request
from manor.records import CallRecord
from manor.tick import ordering
from manor.tick.ordering import BALANCE_LIMIT, longest_first, planned_makespan
from manor.tick.prediction import LatencyPredictor
from manor.worlds.manor import CallerKind

#: tea_party's profile latencies in planning order: hobbes, heiress, vicar, narrator,
#: summariser, heiress's beat; its platform of 3 makes a gate of 2.
TEA_PARTY = (1.4, 1.3, 1.9, 4.2, 2.6, 1.3)


def plain_lpt(latencies: list[float] | tuple[float, ...]) -> list[int]:
    return sorted(range(len(latencies)), key=lambda i: -latencies[i])


class TestLongestFirst:
    def test_the_tea_party_is_planned_not_just_sorted(self) -> None:
        """Plain LPT ends at 6.9 s, as fifo does; two 1.3 s calls traded for the 1.9 s
        one put 4.2 + 1.9 on one slot and 2.6 + 1.4 + 1.3 + 1.3 on the other: 6.6 s."""
        assert planned_makespan(TEA_PARTY, plain_lpt(TEA_PARTY), 2) == pytest.approx(6.9)
        assert planned_makespan(TEA_PARTY, range(6), 2) == pytest.approx(6.9)
        order = longest_first(TEA_PARTY, 2)
        assert order == [4, 3, 0, 1, 2, 5]
        assert planned_makespan(TEA_PARTY, order, 2) == pytest.approx(6.6)

    def test_planning_order_when_it_plans_shorter(self) -> None:
        """Here fifo fills three slots to 12 s exactly; the balanced plan reaches 13 s."""
        latencies = [5.0, 4.0, 1.0, 5.0, 3.0, 7.0, 6.0, 5.0]
        assert planned_makespan(latencies, range(8), 3) == 12.0
        assert longest_first(latencies, 3) == list(range(8))

    def test_beyond_the_balance_limit_plain_lpt(self) -> None:
        latencies = [1.0 + (i % 7) / 3 for i in range(BALANCE_LIMIT + 1)]
        assert longest_first(latencies, 5) == plain_lpt(latencies)

    @pytest.mark.parametrize("slots", [1, 6, 10])
    def test_one_slot_or_a_slot_each_is_plain_lpt(self, slots: int) -> None:
        assert longest_first(TEA_PARTY, slots) == plain_lpt(TEA_PARTY)

    @given(
        st.lists(st.floats(min_value=0.05, max_value=20.0, allow_nan=False), max_size=BALANCE_LIMIT + 4),
        st.integers(min_value=1, max_value=9),
    )
    def test_never_plans_longer_than_lpt_or_fifo(self, latencies: list[float], slots: int) -> None:
        """A permutation, the same every time, planning no longer than plain LPT or
        planning order, and no shorter than the bound."""
        order = longest_first(latencies, slots)
        assert sorted(order) == list(range(len(latencies)))
        assert longest_first(latencies, slots) == order
        planned = planned_makespan(latencies, order, slots)
        assert planned <= planned_makespan(latencies, plain_lpt(latencies), slots) + 1e-9
        assert planned <= planned_makespan(latencies, range(len(latencies)), slots) + 1e-9
        assert planned >= max([*latencies, sum(latencies) / slots]) - 1e-9

    @pytest.mark.parametrize("calls", [[], [7], [4, 2], [3, 0, 5], [9, 1, 6, 2, 8]])
    def test_each_group_where_its_sum_is(self, calls: list[int]) -> None:
        """The balancing keeps only the groups' sums and names a traded group by its
        place among them: none, then each call followed by it with each call after it."""
        latencies = [0.5 + index / 7 for index in range(10)]
        groups = [()] + [group for n, first in enumerate(calls) for group in [(first,)] + [(first, second) for second in calls[n + 1 :]]]
        sums = ordering._group_sums(calls, latencies)
        assert len(sums) == len(groups) == 1 + len(calls) * (len(calls) + 1) // 2
        for number, group in enumerate(groups):
            assert ordering._group(calls, number) == group
            assert sums[number] == sum(latencies[index] for index in group)

    def test_the_plans_are_those_it_always_made(self) -> None:
        """3,000 seeded ticks planned exactly as before the balancing was made faster:
        the order decides the tickets, so a change here changes records and saves."""
        rng = random.Random(15)
        digest = hashlib.blake2b(digest_size=8)
        for _ in range(3000):
            slots = rng.randint(2, 6)
            latencies = [round(rng.lognormvariate(0.3, 0.6), rng.choice([1, 2, 9])) for _ in range(rng.randint(slots + 1, 24))]
            digest.update(repr(longest_first(latencies, slots)).encode())
        assert digest.hexdigest() == "00164978ad12ba77"


def finished(latency: float, *, agent: str = "a", outcome: str = "ok") -> CallRecord:
    return CallRecord(tick=1, ticket=0, caller="character", agent=agent, queued_at=0.0, admitted_at=1.0,
                      finished_at=1.0 + latency, outcome=outcome, reason=None if outcome == "ok" else "provider_error")  # fmt: skip


def _predicted(predictor: LatencyPredictor, agent: str, caller: str) -> float:
    """What ``predictor`` expects of ``agent``'s next call as ``caller``."""
    return predictor.latencies([Request(caller=caller, agent=agent)])[0]


class TestLatencyPredictor:
    def test_the_typical_latency_counts_as_prior_calls(self) -> None:
        """Typical 2 s as four calls; one call of 7 s moves the mean to 3 s, not to 7."""
        predictor = LatencyPredictor({"a": 2.0}, prior=4)
        assert _predicted(predictor, "a", "character") == 2.0
        predictor.observe([finished(7.0)])
        assert _predicted(predictor, "a", "character") == pytest.approx(3.0)
        assert _predicted(predictor, "a", "narrator") == 2.0  # per caller kind
        request = Request(caller=CallerKind.CHARACTER, agent="a")  # a world's StrEnum kind
        assert predictor.latencies([request]) == [pytest.approx(3.0)]

    def test_a_plain_mean_then_a_long_memory(self) -> None:
        """Scattered calls average out; after a lasting change the mean follows it."""
        predictor = LatencyPredictor({"a": 2.0}, prior=1, memory=8)
        for latency in (1.0, 3.0, 1.0, 3.0):
            predictor.observe([finished(latency)])
        assert _predicted(predictor, "a", "character") == pytest.approx(2.0)
        for _ in range(60):
            predictor.observe([finished(5.0)])
        assert _predicted(predictor, "a", "character") == pytest.approx(5.0, abs=0.01)

    def test_a_ticks_records_teach_it_as_they_would_one_by_one(self) -> None:
        """The tick loop hands it a tick's records at once, in planning order: the same
        means as each record told in turn, an agent's calls in the order given."""
        records = [finished(latency, agent=agent) for latency, agent in [(3.0, "a"), (9.0, "b"), (1.0, "a"), (5.0, "a"), (2.0, "b")]]
        at_once, one_by_one = LatencyPredictor({"a": 2.0, "b": 4.0}, prior=2, memory=3), LatencyPredictor({"a": 2.0, "b": 4.0}, prior=2, memory=3)
        at_once.observe(records)
        for record in records:
            one_by_one.observe([record])
        assert [_predicted(at_once, agent, "character") for agent in "ab"] == [_predicted(one_by_one, agent, "character") for agent in "ab"]
        assert _predicted(at_once, "a", "character") != 2.0

    def test_only_calls_that_answered_teach_it(self) -> None:
        predictor = LatencyPredictor({"a": 2.0})
        predictor.observe([finished(30.0, outcome="degraded")])
        assert _predicted(predictor, "a", "character") == 2.0
        assert _predicted(predictor, "nobody", "character") == 1.0
