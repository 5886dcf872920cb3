"""The ticket book both gates keep: tickets issued in order, each arriving once or
withdrawn, and the permit an admitted ticket becomes, released exactly once.

A gate (``manor.admission.gate.Gate`` in process, ``manor.admission.redis_gate.RedisGate``
across processes) issues numbered tickets ahead of the calls that use them, in lanes,
each with its cost (the seconds its call is expected to hold a slot). Until its caller
arrives at ``acquire`` a ticket holds back the ones behind it; a ticket whose caller
will not come is withdrawn. How a gate then admits its tickets is its own business; the
book is what the two have in common: the numbering, the size, rate and burst they are
served under, a server's pause (``pause``) and the allowance its rate headers grant
(``allow``), and the rules
that a ticket is used once and a permit released once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

import attrs
import msgspec

from ..clock import current_time

if TYPE_CHECKING:
    from .lanes import Lanes

__all__ = ["ISSUED", "AdmittedTicket", "Ticket", "TicketBook"]

#: Every ticket's first stage: issued, its caller has not arrived at ``acquire`` yet.
#: The stages after it are each gate's own.
ISSUED = 0


@attrs.define(eq=False)
class Ticket:
    """One issued ticket as a gate keeps it, until it is admitted or gone: its number,
    lane and cost, its stage (``ISSUED`` first) and when its caller arrived. A gate's own
    record of a waiter extends it.

        waiter = Ticket(7, lane=0, cost=1.2)   # ticket 7, expected to hold 1.2 s
    """

    ticket: int
    lane: int = 0
    #: The seconds it is expected to hold its slot, as its lane (tenant) is charged.
    cost: float = 1.0
    stage: int = ISSUED
    queued_at: float = 0.0


W = TypeVar("W", bound=Ticket)


# No setattr hooks (``Gate`` admits through these fields on every call).
@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)
class TicketBook(Generic[W]):
    """The ledger of a gate's tickets, which each gate builds on: the next number, the
    tickets issued and not yet admitted (or gone), and the gate's size, rate and burst.

    A gate subclasses it, declares ``_size``, ``_rate`` and ``_burst`` as its own
    fields (with its own validation), says what follows a change of size
    (``_resized``) and a pause (``_paused``), and how the last call of an allowance
    pauses it (``_allowance_spent``). For example, the in-process gate::

        class Gate(TicketBook[_Waiter]):
            def issue(self, count=1, lane=0, costs=None):
                return self._issue(count, lane, costs, _Waiter, self._slot_line)

            def _resized(self):
                self._dispatch()

            def _paused(self):
                self._dispatch()
    """

    # Issued tickets by number, until admitted, withdrawn or given up.
    _waiters: dict[int, W] = attrs.field(factory=dict, init=False, repr=False)
    _next_ticket: int = attrs.field(default=0, init=False)
    # At most this many more admissions before ``_allowed_until`` (``allow``: what a
    # server's rate headers say remains of its window); ``None``: no such bound.
    _allowed: int | None = attrs.field(default=None, init=False)
    _allowed_until: float = attrs.field(default=-math.inf, init=False)
    # Nothing is admitted before this instant (``pause``: a server's retry-after).
    _paused_until: float = attrs.field(default=-math.inf, init=False)

    if TYPE_CHECKING:
        # The gate's own fields.
        _size: int
        _rate: float
        _burst: int

        def issue(self, count: int = 1, lane: int = 0, costs: Sequence[float] | None = None) -> range: ...
        def _resized(self) -> None: ...
        def _paused(self) -> None: ...
        def _allowance_spent(self, until: float) -> None: ...

    @property
    def rate(self) -> float:
        """Token bucket refill, tokens per second (0: no bucket)."""
        return self._rate

    @property
    def burst(self) -> int:
        """Token bucket capacity."""
        return self._burst

    @property
    def size(self) -> int:
        """Calls in flight at once."""
        return self._size

    @size.setter
    def size(self, size: int) -> None:
        """Growing admits waiters at once; shrinking takes effect as calls finish.

        Raises:
            ValueError: ``size`` is below 1.
        """
        if size < 1:
            raise ValueError(f"gate size must be at least 1, not {size}")
        self._size = size
        self._resized()

    @property
    def paused_until(self) -> float | None:
        """The instant admissions resume after a ``pause``; ``None`` if never paused."""
        return None if self._paused_until == -math.inf else self._paused_until

    def pause(self, until: float) -> None:
        """Admit nothing before ``until`` (a server's ``retry-after``): calls in flight
        go on, waiters wait, and at ``until`` they are admitted in ticket order; the gate
        says what follows (``_paused``). A pause that ends sooner than one already set
        changes nothing."""
        if until > self._paused_until:
            self._paused_until = until
            self._paused()

    def allow(self, count: int, until: float) -> None:
        """Admit at most ``count`` more calls before ``until`` (what a server's rate
        headers say remains of its window, and when it resets); the last of them pauses
        the gate until then. A later allowance replaces this one; ``count`` 0 is a
        pause (``pause``)."""
        if count <= 0:
            self._allowed = None
            self.pause(until)
        else:
            self._allowed, self._allowed_until = count, until

    def _spend_allowance(self, now: float) -> None:
        """An admission at ``now`` spends one call of the allowance (``allow``); the
        last one pauses the gate until the window resets (``_allowance_spent``). The
        gate calls it only while there is an allowance (``_allowed`` is not ``None``)."""
        assert self._allowed is not None
        if now >= self._allowed_until:  # the window reset: no bound until the next headers
            self._allowed = None
            return
        self._allowed -= 1
        if not self._allowed:
            self._allowed = None
            self._allowance_spent(self._allowed_until)

    def _issue(
        self, count: int, lane: int, costs: Sequence[float] | None, make: Callable[[int, int, float], W], line: Lanes, *, per_call: bool = False
    ) -> range:
        """Number ``count`` tickets of ``lane``, make each one's record (``make(ticket,
        lane, cost)``) and put it at the end of ``line``, charged its cost there (or 1,
        ``per_call``: a line of tokens, which are shared by calls, not seconds).

        Raises:
            ValueError: ``costs`` is given and has not ``count`` of them (then no
                ticket is numbered).
        """
        if costs is not None and len(costs) != count:
            raise ValueError(f"{len(costs)} costs for {count} tickets")
        first = self._next_ticket
        self._next_ticket += count
        tickets = range(first, first + count)
        waiters = self._waiters
        if costs is None:
            for ticket in tickets:
                waiters[ticket] = make(ticket, lane, 1.0)
            line.extend([(ticket, 1.0) for ticket in tickets], lane)
        else:
            for ticket, cost in zip(tickets, costs):
                waiters[ticket] = make(ticket, lane, cost)
            line.extend([(ticket, 1.0) for ticket in tickets] if per_call else list(zip(tickets, costs)), lane)
        return tickets

    def _withdrawn(self, ticket: int) -> W | None:
        """Take ``ticket`` out of the book if its caller has not arrived: its record, or
        ``None`` (arrived already, or unknown: then it is left alone)."""
        waiter = self._waiters.get(ticket)
        if waiter is not None and waiter.stage == ISSUED:
            del self._waiters[ticket]
            return waiter
        return None

    def _arrival(self, ticket: int | None) -> W:
        """The record of ``ticket``, whose caller arrives at ``acquire`` (``None``: the
        next ticket, issued now, in arrival order).

        Raises:
            ValueError: the ticket was not issued by this gate, or is already used.
        """
        if ticket is None:
            ticket = self.issue()[0]
        waiter = self._waiters.get(ticket)
        if waiter is None or waiter.stage != ISSUED:
            raise ValueError(f"ticket {ticket} was not issued by this gate, or is already used")
        return waiter


class AdmittedTicket(msgspec.Struct, eq=False):
    """The right to one call in flight, which an admitted ticket becomes; released
    exactly once. Each gate's permit extends it (its own fields keyword-only, after
    ``released_at``) and says how its slot is given back (``_give_back``; the
    in-process gate's permit has ``release`` do it in one frame)::

        permit = await gate.acquire(ticket)
        try:
            ...  # the call
        finally:
            permit.release()

    A msgspec ``Struct`` (compared and hashed by identity, ``eq=False``), not an attrs
    class: a gate builds one for every call it admits, and a Struct is built in C, where
    attrs' ``__init__`` is a Python frame (200 against 77 ns, timed alone). Never encoded.
    """

    ticket: int
    queued_at: float
    admitted_at: float
    #: When the slot was given back (``release``); ``None`` while it is held.
    released_at: float | None = None

    def __repr__(self) -> str:
        # Its own fields only, as the attrs class said it: not the gate it holds.
        return f"{type(self).__name__}(ticket={self.ticket!r}, queued_at={self.queued_at!r}, admitted_at={self.admitted_at!r})"

    if TYPE_CHECKING:

        def _give_back(self) -> None: ...

    @property
    def released(self) -> bool:
        return self.released_at is not None

    def release(self, at: float | None = None) -> None:
        """Give the slot back at ``at`` (when the call ended, if its caller has just read
        the clock; read now if not given); the next ticket in line is admitted at once.

        Raises:
            RuntimeError: the permit was already released.
        """
        if self.released_at is not None:
            raise RuntimeError(f"permit for ticket {self.ticket} released twice")
        self.released_at = current_time() if at is None else at
        self._give_back()
