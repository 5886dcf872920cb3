"""Claims on a share of the slots: how far an idle share may be lent.

Lending an idle slot is right (a gate is work-conserving), but a call once admitted runs
to its end: a slot lent for 18 s to a tenant already over its share is still held when
the tenant it was lent from comes back (between two of its ticks, say). So every tenant
that has calls waiting, holds a slot, or saw a call end within ``claim_s`` *claims* its
share of the slots: size × its weight over the claiming tenants' weights, or its cap if
that is less. A tenant takes a slot while it holds less than its share; beyond it, only
a slot no claim needs: the free slots must exceed what the other claiming tenants are
short of their shares. Within the shares, and for the slots nobody claims, the fair
queue decides (``manor.admission.lanes``).

The in-process gate asks this of its lanes, a process on the Redis gate of its worlds
before it sends their waiters to the server; the server asks the same of its tenants
(``redis_gate.lua``, ``lends_to``).

    >>> tenants = {0: Claimant(holding=2, waiting=True), 1: Claimant(ended_at=9.5)}  # 1 is between ticks
    >>> lends_to(0, tenants, size=4, in_flight=2, now=10.0, claim_s=2.0)  # 0 holds its 2; the 2 free are 1's
    11.5
    >>> lends_to(0, tenants, size=4, in_flight=2, now=12.0, claim_s=2.0)  # 1's claim has lapsed
    0.0
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import attrs

__all__ = ["Claimant", "lends_to"]

# Shares are fractions of slots: a hair below a whole slot is a whole slot.
_EPSILON = 1e-9


@attrs.frozen
class Claimant:
    """A tenant as a claim sees it: its weight, optional cap and calls in flight,
    whether it has calls waiting, and when its last call ended (``None``: never)."""

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
            lapses = claimant.ended_at + claim_s
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
