"""Longest-first ticket order: the order in which a tick's calls should reach the gate.

The gate admits strictly in ticket order and gives each freed slot to the next ticket,
so a ticket order *is* a list schedule. Handing out tickets longest predicted call first
(LPT) keeps a long call from starting last and running on alone. Plain LPT can still
leave the slots unevenly loaded when a tick has few calls for its slots: three
characters, a narrator, a summariser and a beat on a gate of two put 4.2 s and 1.9 s
on one slot and 2.6 + 1.4 + 1.3 + 1.3 s on the other (6.6 s) if planned, but LPT gives
6.9 s. So the rule plans the slots: it assigns the calls longest first to the least
loaded slot, then trades one or two calls of the most loaded slot for none, one or two
of another's while that shortens it; each slot runs its calls longest first, and the tickets follow the planned
start times, which makes the gate run exactly that plan when the predictions are right.
Should planning order itself plan a shorter tick, the tickets follow planning order: the
rule never plans worse than fifo.

Balancing is quadratic in the calls of a tick, so beyond ``BALANCE_LIMIT`` calls the
rule is plain LPT (and the fifo check): with many calls per slot LPT is already within
a few percent of the bound (``manor bench --suite scheduling``, cast sweep).
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Sequence

__all__ = ["BALANCE_LIMIT", "longest_first", "planned_makespan"]

#: Ticks with more calls than this get plain LPT (see the module docstring).
BALANCE_LIMIT = 24

# A move must shorten the busiest slot by more than this (seconds), so float noise in
# equal sums never counts as a gain and the loop always ends.
_GAIN = 1e-9


def longest_first(latencies: Sequence[float], slots: int) -> list[int]:
    """Indices of ``latencies`` in the order their tickets should be handed out.

    Deterministic: equal latencies keep their given order, and the plan depends on
    nothing but ``latencies`` and ``slots``.

    Args:
        latencies: each call's predicted latency, in planning order.
        slots: how many calls the gate runs at once (its size).
    """
    order = sorted(range(len(latencies)), key=latencies.__getitem__, reverse=True)  # stable: ties in planning order
    if len(order) <= slots or slots < 2:
        return order  # every call starts at once, or one after another: order is no matter
    balancing = len(order) <= BALANCE_LIMIT
    if balancing:
        # The assignment's loads are the list schedule's: its makespan is the busiest.
        plan, loads = _assign(latencies, order, slots)
        planned = max(loads)
    else:
        planned = planned_makespan(latencies, order, slots)
    if planned <= max(latencies[order[0]], sum(latencies) / slots) + _GAIN:
        return order  # at the bound: no plan is shorter
    if balancing:
        _balance(latencies, plan, loads)
        order = _by_planned_start(latencies, plan)
        planned = planned_makespan(latencies, order, slots)
    # Never plan a tick longer than planning order would run it (fifo).
    fifo = range(len(latencies))
    if planned_makespan(latencies, fifo, slots) < planned - _GAIN:
        return list(fifo)
    return order


def planned_makespan(latencies: Sequence[float], order: Sequence[int], slots: int) -> float:
    """When a list schedule of ``order`` on ``slots`` slots ends if every call takes
    its latency: what the gate does with those tickets."""
    free = [0.0] * max(1, slots)
    for index in order:
        heapq.heapreplace(free, free[0] + latencies[index])  # the first free slot takes it
    return max(free)


def _assign(latencies: Sequence[float], order: Sequence[int], slots: int) -> tuple[list[list[int]], list[float]]:
    """LPT: each call, longest first, to the least loaded slot (the lowest on a tie);
    the slots' calls and their loads."""
    plan: list[list[int]] = [[] for _ in range(slots)]
    loads = [0.0] * slots
    for index in order:
        # A scan, not a heap: a balanced tick has few slots (fewer than BALANCE_LIMIT calls).
        slot = loads.index(min(loads))
        plan[slot].append(index)
        loads[slot] += latencies[index]
    return plan, loads


def _balance(latencies: Sequence[float], plan: list[list[int]], loads: list[float]) -> None:
    """Trade calls between the busiest slot and another — one or two of its calls for
    none, one or two of the other's — while that shortens the busiest slot; each step
    makes the trade that shortens it most. (One-for-one trades alone leave the example
    in the module docstring at 6.8 s: it takes two 1.3 s calls for the 1.9 s one.)
    ``loads`` are the slots' (and are kept up to date)."""
    # Each slot's groups' sums (``_group_sums``), made again only for the two slots a
    # trade changed.
    group_sums: list[list[float] | None] = [None] * len(plan)
    for _ in range(len(latencies)):  # each step lowers the busiest load; this bounds the rest
        busiest = max(range(len(plan)), key=loads.__getitem__)
        top = loads[busiest]
        best: tuple[int, int, int] | None = None  # the other slot, and the groups traded
        # A trade must bring the busiest slot below ``bar``: more than _GAIN under its
        # load, then more than _GAIN under the best trade found so far. The new load
        # is max(top - delta, load + delta); it is below ``bar`` exactly when both are.
        # (The same trades win as when each was compared with both bounds, in the same
        # order: this runs every tick, and the comparisons are most of its time.)
        bar = top - _GAIN
        given = group_sums[busiest] or _group_sums(plan[busiest], latencies)
        group_sums[busiest] = given
        # What the busiest slot can give (a group, not nothing) by sum: for a group
        # taken back, only those whose sums lie in a narrow window can pass the
        # comparisons, and a bisection finds them. The window is widened by ``slack``,
        # far more than the sums' rounding, so that it holds every group that passes;
        # those it holds are compared exactly, in the order of the groups.
        by_sum = sorted(range(1, len(given)), key=given.__getitem__)
        sums = [given[k] for k in by_sum]
        slack = 64 * math.ulp(top)
        for other, calls in enumerate(plan):
            if other == busiest:
                continue
            load = loads[other]
            if top + load >= 2 * bar + 4 * math.ulp(top):
                # The two new loads add up to top + load, so no trade with this slot
                # brings both below bar (four ulps cover the sums' rounding).
                continue
            offered = group_sums[other]
            if offered is None:
                offered = group_sums[other] = _group_sums(calls, latencies)
            # gave_sum - taken_sum must exceed top - bar and stay under bar - load.
            above, below = top - bar - slack, bar - load + slack
            for taken, taken_sum in enumerate(offered):
                first = bisect.bisect_right(sums, taken_sum + above)
                if first == len(sums) or sums[first] >= taken_sum + below:
                    continue  # the usual case: no group fits
                for gave in sorted(by_sum[first : bisect.bisect_left(sums, taken_sum + below, first)]):
                    delta = given[gave] - taken_sum
                    if delta <= 0:
                        continue
                    lowered = top - delta
                    raised = load + delta
                    if lowered < bar and raised < bar:
                        bar = (lowered if lowered >= raised else raised) - _GAIN
                        above, below = top - bar - slack, bar - load + slack
                        best = (other, gave, taken)
        if best is None:
            return
        other, gave, taken = best
        gave_calls = _group(plan[busiest], gave)
        taken_calls = _group(plan[other], taken)
        group_sums[busiest] = group_sums[other] = None
        for index in gave_calls:
            plan[busiest].remove(index)
            plan[other].append(index)
        for index in taken_calls:
            plan[other].remove(index)
            plan[busiest].append(index)
        delta = sum(latencies[i] for i in gave_calls) - sum(latencies[i] for i in taken_calls)
        loads[busiest] -= delta
        loads[other] += delta


def _group_sums(calls: Sequence[int], latencies: Sequence[float]) -> list[float]:
    """The total latency of every group of none, one or two of ``calls``, in the order
    ``_group`` numbers them: none; then each call, followed by it with each call after it."""
    sums = [0.0]
    for n, first in enumerate(calls):
        own = latencies[first]
        sums.append(own)
        for second in calls[n + 1 :]:  # a slot has a few calls: no comprehension's frame
            sums.append(own + latencies[second])
    return sums


def _group(calls: Sequence[int], number: int) -> tuple[int, ...]:
    """The calls of the group ``_group_sums`` lists at ``number``."""
    if number == 0:
        return ()
    number -= 1
    for n, first in enumerate(calls):
        if number == 0:
            return (first,)
        after = len(calls) - n - 1
        if number <= after:
            return (first, calls[n + number])
        number -= after + 1
    raise IndexError("no such group")


def _by_planned_start(latencies: Sequence[float], plan: list[list[int]]) -> list[int]:
    """Tickets in the order of the plan's start times; each slot runs its calls longest
    first (the short ones last, where a late finish costs least)."""
    starts: list[tuple[float, int, int]] = []
    for slot, calls in enumerate(plan):
        at = 0.0
        for index in sorted(sorted(calls), key=latencies.__getitem__, reverse=True):  # ties by index
            starts.append((at, slot, index))
            at += latencies[index]
    return [index for _, _, index in sorted(starts)]
