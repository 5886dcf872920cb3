"""What each tenant of a shared gate got: its share of the session-time, against its due.

A fleet's worlds are the tenants of its gate, each with a weight and an optional cap
(``Tenant``). Shares are counted in what a call holds — session-seconds — and only
while tenants compete: a tenant is *backlogged* while it has a call waiting at the gate,
and the gate is *contended* while two or more are. At each contended instant a
backlogged tenant holding h of the H sessions the backlogged tenants hold gets h / H,
and is due its weight's part of H, never more than its cap, the rest shared among the
others by weight (water-filling: due d = min(w·λ, cap) with Σ d = H). Without caps
that is w / W, its weight over theirs; a tenant waiting at its cap has its due when
its cap is below its weight's part. Over the run:

- ``backlogged_share``: its mean h / H over the contended time it was backlogged;
- ``share_per_weight``: what it got over what it was due (1.0: exactly its share);
- ``session_s_backlogged``: the session-seconds it held while contended and backlogged.

Jain's index over ``share_per_weight`` says how evenly the gate kept to the weights
(1.0: every tenant got its due; 1/n: one tenant got everything).

Each quantity is an integral over time, kept as running sums a tenant settles when its
own state changes, so a sweep of the calls costs a constant per call end for tenants
without a cap, and a sort of the capped tenants waiting for each instant one changes.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from typing import Any, final

import attrs

from ..tick.statistics import percentile

__all__ = ["CallSpan", "Tenant", "admission_figures", "jain_index", "shifted", "tenant_shares"]

#: A call at the gate: when it queued, was admitted (``None``: never) and ended.
CallSpan = tuple[float, float | None, float]


def shifted(span: CallSpan, offset: float) -> CallSpan:
    """``span`` on another clock, ``offset`` ahead of its own: a process's spans on the
    machine's monotonic clock, which every process shares (trio's clock is that clock
    plus an offset of its own, a different one in every process)."""
    queued, admitted, ended = span
    return (queued + offset, None if admitted is None else admitted + offset, ended + offset)


@final
@attrs.frozen
class Tenant:
    """Whoever shares the gate: a name, a weight (share against the others, default 1)
    and an optional cap on its calls in flight."""

    name: str
    weight: float = 1.0
    max_sessions: int | None = None


@attrs.define
class _Account:
    weight: float
    cap: float
    waiting: int = 0
    holding: int = 0
    backlogged: bool = False
    # Due its cap (the water level would give it more), not its weight's part.
    at_cap: bool = False
    # Running sums as of the tenant's last settling: ∫1/H, ∫λ/H and contended time.
    marks: tuple[float, float, float] = (0.0, 0.0, 0.0)
    got: float = 0.0
    due: float = 0.0
    contended_s: float = 0.0
    session_s: float = 0.0


@attrs.define
class _Sums:
    """The running integrals over contended time: of 1 / H, of λ / H (λ: the water
    level, due a unit of weight) and of time itself."""

    per_held: float = 0.0
    per_level: float = 0.0
    contended: float = 0.0

    def settle(self, account: _Account) -> None:
        """Add to ``account`` what it got and was due since its marks, and mark it now."""
        held, level, contended = account.marks
        account.got += account.holding * (self.per_held - held)
        if account.at_cap:
            account.due += account.cap * (self.per_held - held)
        else:
            account.due += account.weight * (self.per_level - level)
        account.contended_s += self.contended - contended
        account.session_s += account.holding * (self.contended - contended)
        self.mark(account)

    def mark(self, account: _Account) -> None:
        """Mark ``account`` now: what it gets and is due is counted from here on."""
        account.marks = (self.per_held, self.per_level, self.contended)


def tenant_shares(tenants: Sequence[Tenant], calls: Sequence[Sequence[CallSpan]]) -> list[dict[str, Any]]:
    """Each tenant's figures (module docstring), from its calls' spans at the gate."""
    accounts = [_Account(tenant.weight, math.inf if tenant.max_sessions is None else tenant.max_sessions) for tenant in tenants]
    events: list[tuple[float, int, int, int]] = []  # (time, tenant, waiting change, holding change)
    for index, spans in enumerate(calls):
        for queued, admitted, finished in spans:
            waited_until = finished if admitted is None else admitted
            if waited_until > queued:
                events += [(queued, index, 1, 0), (waited_until, index, -1, 0)]
            if admitted is not None and finished > admitted:
                events += [(admitted, index, 0, 1), (finished, index, 0, -1)]
    heapq.heapify(events)
    sums = _Sums()
    backlogged = 0
    held = weights = 0.0  # H and W: sessions held and weights of the backlogged tenants
    level = 0.0  # λ, due a unit of weight of a tenant below its cap
    capped: set[int] = set()  # backlogged tenants with a cap
    last = 0.0
    while events:
        now = events[0][0]
        if backlogged >= 2 and held > 0:
            span = now - last
            sums.per_held += span / held
            sums.per_level += span * level / held
            sums.contended += span
        last = now
        while events and events[0][0] == now:
            _, index, waiting, holding = heapq.heappop(events)
            account = accounts[index]
            if account.backlogged:
                sums.settle(account)
                held -= account.holding
                weights -= account.weight
                backlogged -= 1
                capped.discard(index)
            account.waiting += waiting
            account.holding += holding
            account.backlogged = account.waiting > 0
            if account.backlogged:
                sums.mark(account)
                held += account.holding
                weights += account.weight
                backlogged += 1
                if account.cap < math.inf:
                    capped.add(index)
            else:
                account.at_cap = False
        level = _water_level(accounts, capped, held, weights, sums)
    return [
        {
            "backlogged_share": round(account.got / account.contended_s, 6) if account.contended_s > 0 else None,
            "share_per_weight": round(account.got / account.due, 6) if account.due > 0 else None,
            "session_s_backlogged": round(account.session_s, 6),
        }
        for account in accounts
    ]


def _water_level(accounts: Sequence[_Account], capped: set[int], held: float, weights: float, sums: _Sums) -> float:
    """λ such that Σ min(w·λ, cap) over the backlogged tenants is H; marks which capped
    tenants are due their cap, settling those whose mark changes."""
    if not capped:
        return held / weights if weights > 0 else 0.0
    rest, weight = held, weights
    for index in sorted(capped, key=lambda index: accounts[index].cap / accounts[index].weight):
        account = accounts[index]
        at_cap = weight > 0 and account.weight * rest >= account.cap * weight
        if at_cap:
            rest -= account.cap
            weight -= account.weight
        if at_cap != account.at_cap:
            sums.settle(account)
            account.at_cap = at_cap
    return rest / weight if weight > 0 else 0.0


def admission_figures(calls: Sequence[CallSpan]) -> dict[str, Any]:
    """A tenant's admissions and its calls' waits at the gate (admitted calls)."""
    waits = [admitted - queued for queued, admitted, _ in calls if admitted is not None]
    return {
        "admissions": len(waits),
        "gate_wait_s": {
            "mean": round(sum(waits) / len(waits), 6) if waits else 0.0,
            "p95": round(percentile(waits, 95), 6),
        },
    }


def jain_index(values: Sequence[float]) -> float | None:
    """Jain's fairness index, (Σx)² / (n·Σx²): 1.0 when every value is the same, 1/n
    when one holds everything; ``None`` for no values or all zero."""
    squares = sum(value * value for value in values)
    if not values or squares == 0:
        return None
    return round(sum(values) ** 2 / (len(values) * squares), 6)
