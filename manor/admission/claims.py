"""Claims on a share of the slots: how far an idle share may be lent.

Lending an idle slot is right (a gate is work-conserving), but a call once admitted runs
to its end: a slot lent for 18 s to a tenant already over its share is still held when
the tenant it was lent from comes back (between two of its ticks, say). So every tenant
that has calls waiting, holds a slot, or saw a call end within ``claim_s`` *claims* its
share of the slots: size × its weight over the claiming tenants' weights, or its cap if
that is less. A tenant that joins the gate claims from then, as if a call of its had
just ended (its ``ended_at``): a tenant that reaches the gate a moment before it does
not take the slots its first calls need. A tenant takes a slot while it holds less than its share; beyond it, only
a slot no claim needs: the free slots must exceed what the other claiming tenants are
short of their shares. Within the shares, and for the slots nobody claims, the fair
queue decides (``manor.admission.lanes``).

The in-process gate asks this of its lanes, a process on the Redis gate of its worlds
before it sends their waiters to the server; the server asks the same of its tenants
(``redis_gate.lua``, ``lends_to``).

``lends_to`` looks at every tenant, which a gate of hundreds of tenants cannot afford at
every admission; ``ClaimBook`` keeps the same answer up to date as tenants change, in
time that does not grow with their number.

    >>> tenants = {0: Claimant(holding=2, waiting=True), 1: Claimant(ended_at=9.5)}  # 1 is between ticks
    >>> lends_to(0, tenants, size=4, in_flight=2, now=10.0, claim_s=2.0)  # 0 holds its 2; the 2 free are 1's
    11.5
    >>> lends_to(0, tenants, size=4, in_flight=2, now=12.0, claim_s=2.0)  # 1's claim has lapsed
    0.0
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping
from typing import final

import attrs

__all__ = ["ClaimBook", "Claimant", "lends_to"]

# Shares are fractions of slots: a hair below a whole slot is a whole slot.
_EPSILON = 1e-9


def _lapse(ended_at: float, claim_s: float) -> float:
    """When a claim by a call's end at ``ended_at`` lapses: the first instant ``now`` at
    which ``now - ended_at < claim_s`` (the test of a claim still held) is false.

    ``ended_at + claim_s`` rounded can fall a hair short of it (17.5798734924293 −
    15.579873492429302 is 1.9999999999999982): a waiter woken then would find the claim
    still held, sleep until the same instant and wake at once — a livelock at one
    virtual instant. The instants after it are tried until the test agrees.
    """
    lapses = ended_at + claim_s
    while lapses - ended_at < claim_s:
        lapses = math.nextafter(lapses, math.inf)
    return lapses


@attrs.frozen
class Claimant:
    """A tenant as a claim sees it: its weight, optional cap and calls in flight,
    whether it has calls waiting, and when its last call ended or it joined the gate,
    whichever is later (``None``: neither yet)."""

    weight: float = 1.0
    cap: int | None = None
    holding: int = 0
    waiting: bool = False
    ended_at: float | None = None


def lends_to(tenant: int, tenants: Mapping[int, Claimant], *, size: int, in_flight: int, now: float, claim_s: float) -> float:
    """``0.0`` when ``tenant`` may take one of the ``size - in_flight`` free slots now;
    otherwise when the claims that keep it out lapse by themselves (``math.inf``: only
    when a call ends or another comes)."""
    claims: list[tuple[Claimant, float]] = []
    total = 0.0
    for number, claimant in tenants.items():
        if number == tenant or claimant.holding or claimant.waiting:
            lapses = math.inf
        elif claimant.ended_at is not None and now - claimant.ended_at < claim_s:
            lapses = _lapse(claimant.ended_at, claim_s)
        else:
            continue
        total += claimant.weight
        if number != tenant:
            claims.append((claimant, lapses))
    if not claims:
        return 0.0
    share = size / total
    if tenants[tenant].holding < share * tenants[tenant].weight - _EPSILON:
        return 0.0
    short = 0.0
    lapses_at = math.inf
    for claimant, lapses in claims:
        due = share * claimant.weight
        if claimant.cap is not None and claimant.cap < due:
            due = claimant.cap
        missing = due - claimant.holding
        if missing > 0:
            short += missing
            lapses_at = min(lapses_at, lapses)
    if size - in_flight - short >= 1.0 - _EPSILON:
        return 0.0
    return lapses_at


@final
class _Counts:
    """How many tenants hold each number of slots, and those slots: a Fenwick tree over
    the holdings, for the count and the sum of those holding fewer than ``n``."""

    __slots__ = ("_count", "_sum")

    def __init__(self) -> None:
        self._count = [0] * 9
        self._sum = [0] * 9

    def add(self, holding: int, step: int) -> None:
        if holding + 1 >= len(self._count):
            self._grow(holding + 2)
        index, count, total, value = holding + 1, self._count, self._sum, holding * step
        length = len(count)  # some ten adds a call: the loop does not ask each time
        while index < length:
            count[index] += step
            total[index] += value
            index += index & -index

    def below(self, n: int) -> tuple[int, int]:
        """The tenants holding fewer than ``n`` slots, and the slots they hold."""
        index = min(n, len(self._count) - 1)
        count = total = 0
        while index > 0:
            count += self._count[index]
            total += self._sum[index]
            index -= index & -index
        return count, total

    def _grow(self, size: int) -> None:
        counts = [self.below(holding + 1)[0] - self.below(holding)[0] for holding in range(len(self._count) - 1)]
        sums = [count * holding for holding, count in enumerate(counts)]
        length = len(self._count)
        while length < size:
            length *= 2
        self._count, self._sum = [0] * length, [0] * length
        for holding, (count, total) in enumerate(zip(counts, sums, strict=True)):
            if count:
                index = holding + 1
                while index < length:
                    self._count[index] += count
                    self._sum[index] += total
                    index += index & -index


@final
class _Class:
    """The claiming tenants of one weight and cap: how many, how many only by a recent
    end (they hold nothing), and their holdings."""

    __slots__ = ("arrived", "cap", "counts", "members", "recent", "weight")

    def __init__(self, weight: float, cap: int | None) -> None:
        self.weight = weight
        self.cap = cap
        self.members = 0
        self.recent = 0
        self.counts = _Counts()
        # The holdings of those with a caller waiting at the gate (not only tickets issued).
        self.arrived = _Counts()


@final
class ClaimBook:
    """``lends_to`` for tenants whose state is kept here as it changes (``put``), in time
    that grows with the number of distinct (weight, cap) pairs, not of tenants.

    The answer is ``lends_to``'s over the tenants as last ``put``; its sums are taken in
    another order, which can move their last bits, well inside the tolerance both keep
    (a share is a ratio of small numbers, never within 1e-9 of a whole slot unless on it).

    Args:
        claim_s: how long a tenant's claim outlives its last call's end.
    """

    __slots__ = ("_classes", "_claim_s", "_lapses", "_order", "_tenants", "_weighed")

    def __init__(self, claim_s: float) -> None:
        self._claim_s = claim_s
        self._classes: dict[tuple[float, int | None], _Class] = {}
        # The classes by weight and cap: sums taken in this order are the same whatever
        # order trio ran the tasks that changed the tenants in.
        self._order: list[_Class] = []
        # tenant -> (its class, holding, claiming only by a recent end's ``ended_at``
        # (None: active), whether a caller of its waits), or absent when it claims nothing.
        self._tenants: dict[int, tuple[_Class, int, float | None, bool]] = {}
        # (ended_at, tenant) of the tenants claiming by a recent end; stale entries
        # (the tenant changed since) are skipped.
        self._lapses: list[tuple[float, int]] = []
        # ``_weigh``'s answer since the tenants last changed (``None``: to be summed).
        self._weighed: tuple[float, int] | None = None

    def put(self, tenant: int, claimant: Claimant, now: float, *, arrived: bool) -> None:
        """``tenant`` is now ``claimant`` (as ``lends_to`` would see it at ``now``);
        ``arrived``: a caller of its waits at the gate (``below_share``)."""
        self.put_fields(tenant, claimant.weight, claimant.cap, claimant.holding, claimant.waiting, claimant.ended_at, now, arrived=arrived)

    def put_fields(
        self, tenant: int, weight: float, cap: int | None, holding: int, waiting: bool, ended_at: float | None, now: float, *, arrived: bool
    ) -> None:
        """``put`` of a ``Claimant(weight, cap, holding, waiting, ended_at)``, without
        making one: the in-process gate puts some two and a half tenants a call, and the
        frozen instance was a tenth of the book's cost (benchmarks/notes/fleet_cpu.md).

        A tenant put exactly as it is kept (about one put in six in a fleet) changes
        nothing: not its counts, nor the weighing kept, nor its lapse (its entry in
        ``_lapses`` is live while it is kept so)."""
        if holding or waiting:
            ended_at = None
        elif ended_at is None or not now - ended_at < self._claim_s:
            self._remove(tenant)
            return
        key = (weight, cap)
        group = self._classes.get(key)
        kept = self._tenants.get(tenant)
        if kept is not None and kept[0] is group and kept[1] == holding and kept[2] == ended_at and kept[3] == arrived:
            return
        self._remove(tenant)
        if ended_at is not None:
            heapq.heappush(self._lapses, (ended_at, tenant))
        if group is None:
            group = self._classes[key] = _Class(weight, cap)
            self._order = [self._classes[key] for key in sorted(self._classes, key=lambda key: (key[0], key[1] is None, key[1] or 0))]
        group.members += 1
        group.recent += ended_at is not None
        group.counts.add(holding, 1)
        if arrived:
            group.arrived.add(holding, 1)
        self._tenants[tenant] = (group, holding, ended_at, arrived)
        self._weighed = None

    def lends_to(self, tenant: int, *, weight: float, size: int, in_flight: int, now: float) -> float:
        """As ``lends_to(tenant, ...)`` of the tenants ``put``, ``tenant`` weighing
        ``weight``: a tenant asking for a slot, so one with calls waiting."""
        self._expire(now)
        own = self._tenants.get(tenant)
        total, members = self._weigh()
        if own is None:
            total += weight
        elif members == 1:
            return 0.0
        if not members:
            return 0.0
        share = size / total
        holding = 0 if own is None else own[1]
        if holding < share * weight - _EPSILON:
            return 0.0
        short = 0.0
        recent = 0
        for group in self._order:
            if not group.members:
                continue
            due = share * group.weight
            if group.cap is not None and group.cap < due:
                due = group.cap
            count, held = group.counts.below(math.ceil(due))
            if count:
                short += due * count - held
                recent += group.recent
                if own is not None and own[0] is group and holding < due:
                    short -= due - holding
        if size - in_flight - short >= 1.0 - _EPSILON:
            return 0.0
        # The first claim by a recent end to lapse (such a tenant holds nothing: it is
        # short), or none: the others claim until a call ends or comes.
        return _lapse(self._lapses[0][0], self._claim_s) if recent else math.inf

    def over_share(self, holding: int, *, weight: float, size: int) -> bool:
        """Whether a tenant of the book holding ``holding`` slots at ``weight`` holds its
        share of ``size`` slots or more: a tenant ``lends_to`` lets in only by the claims
        (a gate that held one such tenant back holds back the others alike)."""
        total, _ = self._weigh()
        return not holding < size / total * weight - _EPSILON

    def share_limit(self, *, size: int) -> Callable[[float], float]:
        """The holding below which a tenant of the book at a weight holds less than its
        share of ``size`` slots (``over_share``'s test, by weight)."""
        total, _ = self._weigh()
        return lambda weight: size / total * weight - _EPSILON

    def _weigh(self) -> tuple[float, int]:
        """The claiming tenants' weights, summed in the classes' order, and their number
        (kept until a tenant changes: some seven asks a call, a few changes)."""
        if self._weighed is not None:
            return self._weighed
        total = 0.0
        members = 0
        for group in self._order:
            if group.members:
                total += group.members * group.weight
                members += group.members
        self._weighed = (total, members)
        return self._weighed

    def below_share(self, *, size: int) -> int:
        """How many tenants with a caller waiting hold less than their share of ``size``
        slots: those ``lends_to`` lets in whatever the claims (a gate that held one
        tenant back looks further only while there are some)."""
        total, members = self._weigh()
        if not members:
            return 0
        share = size / total
        count = 0
        for group in self._order:
            if group.members:
                count += group.arrived.below(math.ceil(share * group.weight - _EPSILON))[0]
        return count

    def _remove(self, tenant: int) -> None:
        entry = self._tenants.pop(tenant, None)
        if entry is not None:
            group, holding, ended_at, arrived = entry
            self._weighed = None
            group.members -= 1
            group.recent -= ended_at is not None
            group.counts.add(holding, -1)
            if arrived:
                group.arrived.add(holding, -1)

    def _expire(self, now: float) -> None:
        """Drop the claims by a recent end that have lapsed at ``now``, and stale entries."""
        lapses, tenants = self._lapses, self._tenants
        while lapses:
            ended_at, tenant = lapses[0]
            entry = tenants.get(tenant)
            if entry is not None and entry[2] == ended_at:
                if now - ended_at < self._claim_s:
                    return
                self._remove(tenant)
            heapq.heappop(lapses)
