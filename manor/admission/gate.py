"""The application tier: one gate shared by every caller, that queues instead of failing.

Two controls, in this order: a token bucket (calls per second, optional) and a
concurrency limit (calls in flight). Both serve waiters strictly in *ticket* order.
Tickets are issued by the gate (``issue``); a caller that passes none gets the next one
when it arrives, i.e. arrival order. A ticket issued ahead of time is a promise: the
tickets behind it wait until it arrives, or is withdrawn. That is what makes admission
independent of the order in which trio happens to run tasks (see docs/internals.md,
"Determinism"): the tick loop issues a tick's tickets up front, in planning order.

A ticket is issued in a *lane* (by default lane 0), with its *cost*: the seconds its
call is expected to hold a slot. The tenants of a gate (the worlds of a fleet) queue a
lane each, and the lanes share the slots by start-time fair queuing on those costs
(``manor.admission.lanes``): ticket order within a lane; across lanes, slot-time in
proportion to each lane's weight (``set_share``), corrected by what each call really
held when it ends; a lane may have a cap on its calls in flight. With ``claim_s``, a
lane that is waiting, holding a slot or had a call end within ``claim_s`` keeps a claim
on its share of the slots, and the other lanes borrow beyond their own shares only the
slots nobody claims (``manor.admission.claims``). With one lane it is plain ticket order.

``SharedGate`` is what the tick loop and the gate layer need of a gate. ``Gate`` is the
in-process one, exact and deterministic; ``manor.admission.redis_gate.RedisGate`` keeps the same
semantics across processes and machines, its state in Redis.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import AsyncContextManager, Protocol, final

import attrs
import trio

from ..clock import current_time, jumps_to_deadlines
from ..errors import GateTimeout
from .book import ISSUED, AdmittedTicket, Ticket, TicketBook
from .claims import ClaimBook
from .lanes import Lanes

__all__ = ["Arrival", "Gate", "GateStatistics", "Permit", "SharedGate", "SharedPermit"]

# A waiter's stages after ``ISSUED`` (``manor.admission.book``), in their order.
_WAIT_TOKEN = 1  # waiting for a token from the bucket
_WAIT_SLOT = 2  # has its token (or there is no bucket); waiting for a slot
_ADMITTED = 3

# Refill arithmetic in floating point can land a hair below a whole token.
_EPSILON = 1e-9

# Watched waits that are over, beyond as many as are watched, before the timekeeper's
# heap leaves them out (``Gate._compact_watched``).
_WATCH_SLACK = 64


@attrs.frozen
class GateStatistics:
    """A snapshot of a gate; ``tokens_available`` is ``None`` without a token bucket."""

    size: int
    in_flight: int
    waiting: int
    peak_in_flight: int
    admitted: int
    timeouts: int
    cancelled: int
    refunds: int
    tokens_available: float | None
    total_wait: float
    max_wait: float


class SharedPermit(Protocol):
    """The right to one call in flight, from any ``SharedGate``."""

    @property
    def ticket(self) -> int: ...
    @property
    def queued_at(self) -> float: ...
    @property
    def admitted_at(self) -> float: ...
    @property
    def released_at(self) -> float | None: ...
    def release(self, at: float | None = None) -> None: ...


class SharedGate(Protocol):
    """What the tick loop and the gate layer need of the one gate every caller shares:
    tickets issued up front (in lanes that take turns, for a fleet's worlds) and
    admitted in their order, a permit per call in flight, a size that can change while
    running, a pause of admissions (a server's retry-after), a bound on admissions until
    an instant (what a server's rate headers say remains), and a snapshot of its figures.

    ``connected()`` is entered around a run: the in-process gate needs nothing, a gate
    whose state lives on a server connects to it there (and says in one line when it
    cannot).
    """

    @property
    def rate(self) -> float: ...
    @property
    def burst(self) -> int: ...
    @property
    def size(self) -> int: ...
    @size.setter
    def size(self, size: int) -> None: ...
    def issue(self, count: int = 1, lane: int = 0, costs: Sequence[float] | None = None) -> range: ...
    def set_share(self, lane: int, weight: float = 1.0, max_sessions: int | None = None) -> None: ...
    def withdraw(self, ticket: int) -> None: ...
    @property
    def paused_until(self) -> float | None: ...
    def pause(self, until: float) -> None: ...
    def allow(self, count: int, until: float) -> None: ...
    async def acquire(self, ticket: int | None = None, *, timeout: float = math.inf) -> SharedPermit: ...
    def statistics(self) -> GateStatistics: ...
    def connected(self) -> AsyncContextManager[object]: ...
    @property
    def available(self) -> bool:
        """Whether calls can be admitted: false while a gate's server is lost."""
        ...


class Arrival(Protocol):
    """A caller's place in the in-process gate's line after ``Gate.arrive``: nothing to
    look at, only to hand back to ``Gate.admitted`` or ``Gate.leave``."""


@attrs.define(eq=False)
class _Waiter(Ticket):
    deadline: float = math.inf
    # The seconds it may wait in all (its ``GateTimeout`` says them).
    timeout: float = math.inf
    # The task, while it is parked waiting to be woken; or, for a caller that arrived
    # without one (``Gate.arrive``), what wakes the caller.
    task: trio.lowlevel.Task | Callable[[Permit | None], None] | None = None
    # Parked without a task (``Gate.arrive``), and whether the timekeeper watches it.
    parked: bool = False
    watched: bool = False
    # When the token head sleeps for a refill, the time it sleeps until.
    sleeping_until: float = math.inf
    # When it was admitted, if the dispatch that admitted it read the clock (it does
    # when a deadline needs it): the parked waiter, woken, need not read it again.
    admitted_at: float | None = None
    # Cancelled while parked, and not yet run: its turn waits until it has (it leaves,
    # or goes on waiting when only its own timer fired), as a ticket whose caller has
    # not arrived. Admitted in between, it could take a slot and give it back at once,
    # its lane charged for it or not depending on trio's order of the tasks cancelled
    # at one instant (a tick's deadline cancels many).
    aborted: bool = False

    def abort(self, raise_cancel: object) -> trio.lowlevel.Abort:
        """A parked waiter is cancelled (its timeout, its caller's scope)."""
        self.task = None
        self.aborted = True
        return trio.lowlevel.Abort.SUCCEEDED


@final
class Permit(AdmittedTicket, kw_only=True):
    """The right to one call in flight, as ``Gate.acquire`` gives it; release it exactly
    once, when the call ends::

        permit = await gate.acquire(ticket, timeout=30)
        try:
            ...  # the call
        finally:
            permit.release()  # the next ticket in line is admitted at once
    """

    _gate: Gate
    _lane: int = 0
    _cost: float = 1.0

    def release(self, at: float | None = None) -> None:
        """Give the slot back at ``at`` (when the call ended, if its caller has just read
        the clock; read now if not given); the next ticket in line is admitted at once.

        The book's ``release`` (``AdmittedTicket``) with the give-back in its own frame,
        not a ``_give_back`` it calls: every call releases its permit, and that would be
        a Python call more for each. The book's stays for the Redis gate's permit.

        Raises:
            RuntimeError: the permit was already released.
        """
        if self.released_at is not None:
            raise RuntimeError(f"permit for ticket {self.ticket} released twice")
        now = self.released_at = current_time() if at is None else at
        # The slot is free since ``now``: the next ticket in line is admitted at once,
        # at that instant (the clock is not read again: on the virtual clock no time has
        # passed since).
        gate = self._gate
        gate._in_flight -= 1
        if gate._fair:
            gate._ended(self._lane, now - self.admitted_at - self._cost)
            gate._released_at[self._lane] = now
            gate._unhold(self._lane)
        elif gate._caps and self._lane in gate._caps:
            gate._unhold(self._lane)
        if gate._waiting or gate._rate:  # nobody waiting for the slot: nothing to hand out
            gate._dispatch(now)


@final
# No setattr hooks: the counters change on every admission, and a hook per
# assignment is measurable in the overhead benchmark. Values are validated at
# construction; ``size`` validates in its setter; rate and burst are read-only.
@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)
class Gate(TicketBook[_Waiter]):
    """The gate every caller of a run shares: a concurrency limit with an optional
    token bucket in front, admitting strictly in ticket order.

    A tick's tickets are issued up front, in planning order; each call acquires its own
    ticket and releases the permit when it ends, and whatever order the callers arrive
    in, they are admitted in ticket order:

    >>> import trio, trio.testing
    >>> from manor import Gate
    >>> async def tick() -> list[tuple[int, float]]:
    ...     gate, admitted = Gate(size=2), []
    ...     async def call(ticket: int) -> None:
    ...         permit = await gate.acquire(ticket, timeout=30)
    ...         admitted.append((permit.ticket, permit.admitted_at))
    ...         try:
    ...             await trio.sleep(1.0)  # the model call
    ...         finally:
    ...             permit.release()
    ...     tickets = gate.issue(4)
    ...     async with trio.open_nursery() as nursery:
    ...         for ticket in reversed(tickets):  # the last first
    ...             nursery.start_soon(call, ticket)
    ...     return sorted(admitted)
    >>> trio.run(tick, clock=trio.testing.MockClock(autojump_threshold=0))
    [(0, 0.0), (1, 0.0), (2, 1.0), (3, 1.0)]

    Args:
        size: calls in flight at once (>= 1). Can be changed while running.
        rate: tokens per second, finite; ``0`` means no token bucket.
        burst: the bucket's capacity (and its initial level).
        claim_s: how long a tenant that shares the gate with others keeps a claim on
            its share of the slots after its last call ended (0: no claims, every
            idle slot is lent at once). See ``manor.admission.claims``.
    """

    _size: int = attrs.field(alias="size", validator=attrs.validators.ge(1))
    _rate: float = attrs.field(alias="rate", default=0.0, validator=[attrs.validators.ge(0), attrs.validators.lt(math.inf)])
    _burst: int = attrs.field(alias="burst", default=1, validator=attrs.validators.ge(1))
    _claim_s: float = attrs.field(alias="claim_s", default=0.0, validator=[attrs.validators.ge(0), attrs.validators.lt(math.inf)])

    # Tickets in the order they are served, for the token stage and the slot stage;
    # entries that have left are dropped lazily when they reach the front. With a token
    # bucket, a ticket joins the slot line when it gets its token, so that both stages
    # serve the lanes in the same turns.
    _token_line: Lanes = attrs.field(factory=Lanes, init=False, repr=False)
    _slot_line: Lanes = attrs.field(factory=Lanes, init=False, repr=False)
    # Shares: whether more than one lane uses the gate (then what each call held is
    # measured as it ends), the lanes seen, each lane's cap and calls in flight (lanes
    # with a cap only), the capped lanes at their cap, and each lane's corrections not
    # yet charged (``_ended``).
    _fair: bool = attrs.field(default=False, init=False)
    _lanes: set[int] = attrs.field(factory=set, init=False, repr=False)
    _caps: dict[int, int] = attrs.field(factory=dict, init=False, repr=False)
    _holding: dict[int, int] = attrs.field(factory=dict, init=False, repr=False)
    _capped: set[int] = attrs.field(factory=set, init=False, repr=False)
    _corrections: dict[int, list[float]] = attrs.field(factory=dict, init=False, repr=False)
    # Claims (``_lends_to``), with more than one lane and ``claim_s``: when each lane's
    # last call ended (or it joined: its first tickets), and the waiter held back by a claim that lapses with time alone,
    # with the instant it lapses (that waiter sleeps until then, to look again).
    _released_at: dict[int, float] = attrs.field(factory=dict, init=False, repr=False)
    # The claims as of the last look (``ClaimBook``), and the lanes changed since:
    # each look puts only those in the book, so that it costs the same however many
    # lanes share the gate.
    _claims: ClaimBook | None = attrs.field(default=None, init=False, repr=False)
    _changed: set[int] = attrs.field(factory=set, init=False, repr=False)
    # While there is a book: each lane's callers waiting at the gate.
    _arrived: dict[int, int] = attrs.field(factory=dict, init=False, repr=False)
    _claim_wake: tuple[_Waiter, float] | None = attrs.field(default=None, init=False, repr=False)
    # Heads whose dead tickets ``_front`` dropped: a dropped lane may leave the claims.
    _drops: int = attrs.field(default=0, init=False, repr=False)
    _in_flight: int = attrs.field(default=0, init=False)
    _waiting: int = attrs.field(default=0, init=False)
    _peak: int = attrs.field(default=0, init=False)
    _admitted: int = attrs.field(default=0, init=False)
    _timeouts: int = attrs.field(default=0, init=False)
    _cancelled: int = attrs.field(default=0, init=False)
    _refunds: int = attrs.field(default=0, init=False)
    _total_wait: float = attrs.field(default=0.0, init=False)
    _max_wait: float = attrs.field(default=0.0, init=False)
    _tokens: float = attrs.field(default=0.0, init=False)
    _refilled_at: float | None = attrs.field(default=None, init=False)
    # Timekeeping (``_keep_time``): the waits it watches, how many are parked, whether
    # it runs, and its one timer.
    _watched: list[tuple[float, int, _Waiter]] = attrs.field(factory=list, init=False, repr=False)
    _watching: int = attrs.field(default=0, init=False)
    _keeping: bool = attrs.field(default=False, init=False)
    _timer: trio.CancelScope | None = attrs.field(default=None, init=False, repr=False)
    # The timer's deadline, as set here: read at every wait watched, where the scope's
    # own ``deadline`` is a Python property.
    _timer_at: float = attrs.field(default=math.inf, init=False, repr=False)
    # Whether the timer is put back to no deadline when the last watched wait ends
    # (``_unwatch``): only on a clock that jumps to deadlines (``jumps_to_deadlines``).
    _timer_rests: bool = attrs.field(default=True, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        self._tokens = float(self._burst)

    # -- size (``rate``, ``burst`` and ``size`` are the book's) ---------------------------

    def _resized(self) -> None:
        """Growing admits waiters at once; shrinking takes effect as calls finish."""
        self._dispatch()

    # -- pauses (``pause`` and ``paused_until`` are the book's) -------------------------

    def _paused(self) -> None:
        """What follows a pause (``pause``, the book's): the dispatch has the head of the
        line sleep until it ends, and then admit in ticket order."""
        self._dispatch()

    def _allowance_spent(self, until: float) -> None:
        """The last call of an allowance (``allow``, the book's) was admitted: nothing
        more before ``until``. Set here, not by ``pause``: this runs inside the dispatch,
        which must not start again."""
        if until > self._paused_until:
            self._paused_until = until

    # -- tickets ----------------------------------------------------------------------

    def issue(self, count: int = 1, lane: int = 0, costs: Sequence[float] | None = None) -> range:
        """Reserve ``count`` tickets in ``lane``, admitted in this order once their
        callers arrive (sharing the slots fairly with the tickets of other lanes).

        Every ticket issued must reach ``acquire`` or be ``withdraw``-n: tickets behind
        it wait for it.

        Args:
            costs: each ticket's expected seconds in its slot (its predicted latency),
                which its lane is charged when it is admitted; by default 1 each.
        """
        if lane not in self._lanes:
            self._see(lane)
        if self._claim_s and lane not in self._released_at:
            # Its first tickets: the lane joins, and claims its share from now, as if a
            # call of its had just ended (``manor.admission.claims``). A fleet's worlds
            # all join at the run's first instant, with their first tickets.
            self._released_at[lane] = current_time()
        # What the lane's ended calls held beyond (or short of) their costs is charged
        # here, not as each ends: tickets are issued when every task of the instant has
        # run (``TicketOffice``), so the charge cannot depend on trio's order of the
        # calls that end at one instant.
        self._slot_line.mark()
        self._token_line.mark()
        if (overruns := self._corrections.pop(lane, None)) is not None:
            # Summed exactly: a float sum in trio's order of the calls would differ in
            # its last bits from run to run, and so could a tie between two lanes.
            self._slot_line.correct(lane, math.fsum(overruns))
        if self._rate:
            # Tokens are shared by calls, not by seconds: a token is one call.
            tickets = self._issue(count, lane, costs, _Waiter, self._token_line, per_call=True)
        else:
            tickets = self._issue(count, lane, costs, _Waiter, self._slot_line)
        if self._claims is not None:
            self._changed.add(lane)
        return tickets

    def set_share(self, lane: int, weight: float = 1.0, max_sessions: int | None = None) -> None:
        """``lane``'s share of the slots against the other lanes (``weight``), and the
        most calls it may have in flight (``None``: no cap but the gate's size).

        Raises:
            ValueError: ``weight`` is not positive and finite, or ``max_sessions`` < 1.
        """
        if max_sessions is not None and max_sessions < 1:
            raise ValueError(f"a lane's max_sessions must be at least 1, not {max_sessions}")
        self._slot_line.weigh(lane, weight)
        self._token_line.weigh(lane, weight)
        if lane not in self._lanes:
            self._see(lane)
        if self._claims is not None:
            self._changed.add(lane)
        if max_sessions is None:
            self._caps.pop(lane, None)
            self._capped.discard(lane)
        else:
            self._caps[lane] = max_sessions
            holding = self._holding.setdefault(lane, 0)
            if holding >= max_sessions:
                self._capped.add(lane)
            else:
                self._capped.discard(lane)
        self._dispatch()

    def withdraw(self, ticket: int) -> None:
        """Give up an issued ticket whose caller will not come (it degraded before the
        gate, or was cancelled). A ticket that already arrived, or is unknown, is left
        alone, so calling this in a ``finally`` is always safe."""
        if (waiter := self._withdrawn(ticket)) is not None:
            self._forget(waiter)
            self._dispatch()

    # -- admission --------------------------------------------------------------------

    async def acquire(self, ticket: int | None = None, *, timeout: float = math.inf) -> Permit:
        """Wait for a token (if there is a bucket), then a slot, in ticket order.

        Args:
            ticket: an issued ticket; ``None`` issues the next one (arrival order).
            timeout: seconds to wait in all before giving up.

        Raises:
            GateTimeout: the wait took longer than ``timeout``. A token already taken
                is refunded.
            ValueError: the ticket was not issued by this gate, or is already used.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        arrival = self.arrive(ticket, timeout=timeout)
        if type(arrival) is Permit:
            # Admitted as it arrived; still yield once, as an await should.
            await trio.lowlevel.cancel_shielded_checkpoint()
            return arrival
        return await self._wait(arrival, parked=False)  # type: ignore[arg-type]

    def arrive(
        self, ticket: int | None, *, timeout: float, wake: Callable[[Permit | None], None] | None = None, now: float | None = None
    ) -> Permit | Arrival:
        """A caller arrives for ``ticket`` without a task of its own to park: what
        ``acquire`` does up to its first wait, synchronously, so that a caller with many
        calls (a tick) starts a call's task only once the call is let through.

        Returns the permit if the ticket is admitted at once. Otherwise the caller's
        ``Arrival``: ``wake`` is called once (perhaps before this returns), with the
        permit when the call is admitted, or with ``None`` when it times out or must wait
        in a task of its own (for a token, the end of a pause, a claim): the caller then
        awaits ``admitted(arrival)`` in a task. Until then it may ``leave``. ``now`` is
        the current time if the caller has just read it (a tick making its calls at one
        instant reads it once for all).

        Without ``wake`` (``acquire``, whose caller waits in its own task; ``ticket``
        ``None`` issues the next one) the ``Arrival`` is the caller's waiter in line,
        not parked: one function for both, a Python call fewer for every call a tick makes.

        Raises:
            ValueError: the ticket was not issued by this gate, or is already used.
        """
        # An issued ticket's waiter looked up here, the book's ``_arrival`` (which
        # issues a ticket for ``None`` and refuses an unknown or used one) called only
        # when it is not that: a call fewer for every arrival.
        waiter = self._waiters.get(ticket)  # type: ignore[arg-type]
        if waiter is None or waiter.stage != ISSUED:
            waiter = self._arrival(ticket)
        ticket = waiter.ticket
        if now is None:
            now = current_time()
        waiter.queued_at = now
        waiter.timeout = timeout
        waiter.deadline = now + timeout
        if (
            not self._rate
            and self._in_flight < self._size
            and now >= self._paused_until
            and self._front(self._slot_line, _WAIT_SLOT, self._capped) is waiter
            and not (self._fair and self._claim_s and self._lends_to(waiter.lane, now))
        ):
            # Its turn, and a slot is free: admitted as it arrives, without the general
            # dispatch (tickets behind it that arrived first are dispatched after it).
            self._slot_line.served()
            del self._waiters[ticket]
            waiter.stage = _ADMITTED
            if self._caps or self._fair:
                self._hold(waiter.lane)
            self._in_flight += 1
            if self._in_flight > self._peak:
                self._peak = self._in_flight
            if self._allowed is not None:
                self._spend_allowance(now)
            self._admitted += 1  # after no wait: the wait figures stay as they are
            if self._waiting:
                self._dispatch(now)
            return Permit(ticket, now, now, _gate=self, _lane=waiter.lane, _cost=waiter.cost)
        waiter.stage = _WAIT_TOKEN if self._rate else _WAIT_SLOT
        self._waiting += 1
        if self._claims is not None:
            self._count_arrival(waiter.lane, 1)
        if self._rate or self._fair or self._in_flight < self._size:
            # (Every slot taken, without a bucket or shares, a dispatch would admit
            # nothing and change nothing.)
            self._dispatch(now)
        if waiter.stage == _ADMITTED:
            return self._permit(waiter)
        if wake is None:
            return waiter
        if (
            (self._rate and self._is_token_head(waiter))
            or (self._paused_until != -math.inf and self._is_paused_head(waiter))
            or (self._claim_wake is not None and self._claim_wake[0] is waiter)
        ):
            wake(None)  # a timed wait: its task's to make
            return waiter
        waiter.task = wake
        waiter.parked = True
        if waiter.deadline != math.inf:
            self._watch(waiter)  # the gate's timekeeper wakes it at its deadline
            waiter.watched = True
        return waiter

    async def admitted(self, arrival: Arrival) -> Permit:
        """The permit of a caller that ``arrive``-d and was woken without one, once it is
        admitted (waiting as ``acquire`` does).

        Raises:
            GateTimeout: as ``acquire``.
        """
        waiter: _Waiter = arrival  # type: ignore[assignment]
        if waiter.watched:
            waiter.watched = False
            self._unwatch()
        parked, waiter.parked = waiter.parked, False
        return await self._wait(waiter, parked=parked)

    def leave(self, arrival: Arrival) -> bool:
        """A caller that ``arrive``-d gives up before it was woken (it is cancelled): it
        holds nothing afterwards. Once woken, its task sees to itself: this does nothing
        and says ``False``."""
        waiter: _Waiter = arrival  # type: ignore[assignment]
        if not waiter.parked or waiter.task is None:
            return False
        waiter.task = None
        waiter.parked = False
        if waiter.watched:
            waiter.watched = False
            self._unwatch()
        self._cancelled += 1
        self._leave(waiter)
        return True

    async def _wait(self, waiter: _Waiter, *, parked: bool) -> Permit:
        """Wait in line until ``waiter`` is admitted, parked until ``_wake``; ``parked``:
        it has been parked already (``arrive``) and was woken."""
        deadline = waiter.deadline
        try:
            while True:
                if parked:
                    waiter.aborted = False  # woken by its own timer: still waiting
                    if waiter.stage == _ADMITTED:
                        break
                    if deadline != math.inf and trio.current_time() >= deadline:
                        self._leave(waiter)
                        self._timeouts += 1
                        raise GateTimeout(f"no gate slot within {waiter.timeout:g}s")
                    self._dispatch()
                if waiter.stage == _ADMITTED:
                    break
                parked = True
                if self._rate and self._is_token_head(waiter):
                    waiter.sleeping_until = self._token_eta()
                    wake_at = min(deadline, waiter.sleeping_until)
                elif self._paused_until != -math.inf and self._is_paused_head(waiter):
                    # The pause's end is its wake-up: then it dispatches for everyone.
                    waiter.sleeping_until = self._paused_until
                    wake_at = min(deadline, waiter.sleeping_until)
                elif self._claim_wake is not None and self._claim_wake[0] is waiter:
                    waiter.sleeping_until = self._claim_wake[1]
                    wake_at = min(deadline, waiter.sleeping_until)
                else:
                    waiter.sleeping_until = math.inf
                    wake_at = deadline
                # Park until ``_wake`` (or a cancellation: a timeout, the caller's).
                waiter.task = trio.lowlevel.current_task()
                if self._claims is not None:
                    self._slot_line.suspect(waiter.lane)  # a cancellation can abort it now
                if wake_at == math.inf:  # no cancel scope when none is needed: it is costly
                    await trio.lowlevel.wait_task_rescheduled(waiter.abort)
                elif wake_at == deadline:
                    self._watch(waiter)  # the gate's timekeeper wakes it at its deadline
                    try:
                        await trio.lowlevel.wait_task_rescheduled(waiter.abort)
                    finally:
                        self._unwatch()
                else:
                    with trio.move_on_at(wake_at):
                        await trio.lowlevel.wait_task_rescheduled(waiter.abort)
        except BaseException as exc:
            if not isinstance(exc, GateTimeout):
                self._cancelled += 1
                if waiter.stage == _ADMITTED:
                    self._unadmit(waiter)
                else:
                    self._leave(waiter)
            raise
        return self._permit(waiter)

    def _permit(self, waiter: _Waiter) -> Permit:
        """The permit of ``waiter``, admitted after it waited (perhaps no time)."""
        # When the dispatch decided it (under the virtual clock, the instant it wakes at:
        # the clock moves only when no task can run).
        admitted_at = current_time() if waiter.admitted_at is None else waiter.admitted_at
        wait = admitted_at - waiter.queued_at
        self._admitted += 1
        self._total_wait += wait
        if wait > self._max_wait:  # (not ``max``: a builtin's call for every call that waited)
            self._max_wait = wait
        return Permit(waiter.ticket, waiter.queued_at, admitted_at, _gate=self, _lane=waiter.lane, _cost=waiter.cost)

    @asynccontextmanager
    async def connected(self) -> AsyncIterator[Gate]:
        """Nothing to connect to: the in-process gate is ready as built."""
        yield self

    @property
    def available(self) -> bool:
        """Always: the in-process gate has no server to lose."""
        return True

    def statistics(self) -> GateStatistics:
        """A snapshot; the bucket level is as of the last admission event."""
        return GateStatistics(
            size=self._size,
            in_flight=self._in_flight,
            waiting=self._waiting,
            peak_in_flight=self._peak,
            admitted=self._admitted,
            timeouts=self._timeouts,
            cancelled=self._cancelled,
            refunds=self._refunds,
            tokens_available=min(float(self._burst), self._tokens) if self._rate else None,
            total_wait=self._total_wait,
            max_wait=self._max_wait,
        )

    # -- internals --------------------------------------------------------------------

    # A wait bounded only by its timeout parks without a cancel scope of its own, which
    # in trio costs about half a bare call with a zero-latency backend (``manor bench
    # --suite overhead``): one timekeeper, a system task the gate starts when the first
    # such wait parks, wakes each at its deadline. It stays for the rest of the trio run,
    # asleep with no deadline while nothing waits (starting one a tick cost 1% of a
    # call's instructions), and ends with the run.

    def _watch(self, waiter: _Waiter) -> None:
        """Have the timekeeper wake ``waiter`` at its deadline (starting it if need be)."""
        watched = self._watched
        heapq.heappush(watched, (waiter.deadline, waiter.ticket, waiter))
        self._watching += 1
        if len(watched) > 2 * self._watching + _WATCH_SLACK:
            self._compact_watched()
        if not self._keeping:
            self._keeping = True
            trio.lowlevel.spawn_system_task(self._keep_time, name="manor: the gate's timekeeper")
        elif self._timer is not None and waiter.deadline < self._timer_at:
            self._timer.deadline = self._timer_at = waiter.deadline

    def _compact_watched(self) -> None:
        """Leave out the watched waits that are over. They leave only as they come to the
        top (``_next_deadline``), and a wait's deadline is a tick's: in a fleet some wait
        is always watched (``_rest`` never clears), and the heap kept ten entries over for
        each wait, each a waiter admitted long ago: 12,900 at 256 worlds, memory the
        collector walks and new objects are placed among. An entry whose waiter is not
        parked now is one ``_next_deadline`` would pop and ``_expire_watched`` would wake
        for nothing: a waiter parks again on the timekeeper only with a new entry
        (``_watch``), so dropping it changes no wake-up. Done when they are as many as
        the waits again, its cost is a push's."""
        self._watched = watched = [entry for entry in self._watched if entry[2].task is not None]
        heapq.heapify(watched)

    def _unwatch(self) -> None:
        """A watched wait is over (admitted, timed out, cancelled); with the last, the
        timekeeper sleeps with no deadline (the virtual clock never jumps for it). On
        the system clock its deadline is left standing: at worst it wakes once for
        nothing and sleeps again until the next watched deadline, where moving it (trio
        changes a scope's deadline through a context manager) would cost two moves every
        tick whose calls wait at the gate."""
        self._watching -= 1
        if not self._watching:
            self._rest()

    def _rest(self) -> None:
        """The last watched wait is over (``_unwatch``)."""
        self._watched.clear()
        if self._timer is not None and self._timer_rests:
            self._timer.deadline = self._timer_at = math.inf

    async def _keep_time(self) -> None:
        """Wake the watched waits at their deadlines with one timer, until the run ends."""
        self._timer_rests = jumps_to_deadlines(trio.lowlevel.current_clock())
        try:
            while True:
                self._timer_at = self._next_deadline()
                with trio.CancelScope(deadline=self._timer_at) as self._timer:
                    await trio.sleep_forever()
                self._timer = None
                self._expire_watched()
        finally:
            self._timer = None
            self._keeping = False

    def _next_deadline(self) -> float:
        """The earliest deadline of a watched waiter still parked."""
        while self._watched and self._watched[0][2].task is None:
            heapq.heappop(self._watched)  # admitted, gone, or running: not waiting on us
        return self._watched[0][0] if self._watched else math.inf

    def _expire_watched(self) -> None:
        """Wake the watched waiters whose deadline has come; they time themselves out."""
        now = trio.current_time()
        while self._watched and self._watched[0][0] <= now:
            _wake(heapq.heappop(self._watched)[2])

    def _leave(self, waiter: _Waiter) -> None:
        """A waiter gives up before admission: it holds nothing afterwards."""
        del self._waiters[waiter.ticket]
        self._forget(waiter)
        self._waiting -= 1
        if self._claims is not None:
            self._count_arrival(waiter.lane, -1)
        if self._rate and waiter.stage == _WAIT_SLOT:
            self._refund()
        self._dispatch()

    def _unadmit(self, waiter: _Waiter) -> None:
        """Undo an admission whose caller was cancelled before it could use it."""
        self._in_flight -= 1
        if self._fair:
            self._ended(waiter.lane, -waiter.cost)  # it held nothing
            self._unhold(waiter.lane)
        elif waiter.lane in self._caps:
            self._unhold(waiter.lane)
        if self._rate:
            self._refund()
        self._dispatch()

    def _refund(self) -> None:
        # Refill up to now first, then give the token back without capping it at
        # ``burst``: a refund and a token taken at the same instant must commute, or
        # trio's run order would decide who gets a token (a refund capped on a full
        # bucket just before a take is lost; just after, it is not). The surplus lasts
        # only this instant: the next refill caps the bucket again.
        self._refill(trio.current_time())
        self._tokens += 1.0
        self._refunds += 1

    def _refill(self, now: float) -> None:
        if self._refilled_at is not None and now > self._refilled_at:
            self._tokens = min(float(self._burst), self._tokens + (now - self._refilled_at) * self._rate)
        self._refilled_at = now

    def _token_eta(self) -> float:
        """When the bucket will next hold a whole token: strictly after the last refill.

        At a rate so high that the wait is below the clock's float resolution (1e12/s
        a million seconds into a run), ``refilled_at + wait`` rounds back to
        ``refilled_at``: the head would wake at once, refill nothing, and sleep again
        without time ever moving — a livelock. The next representable instant always
        refills at least ``rate`` times its step, so waiting for it makes progress.
        """
        assert self._refilled_at is not None
        eta = self._refilled_at + max(0.0, 1.0 - self._tokens) / self._rate
        return max(eta, math.nextafter(self._refilled_at, math.inf))

    def _forget(self, waiter: _Waiter) -> None:
        """``waiter`` leaves the line it is in, unserved."""
        line = self._slot_line if not self._rate or waiter.stage == _WAIT_SLOT else self._token_line
        line.forget(waiter.lane)
        if self._claims is not None:
            self._changed.add(waiter.lane)

    def _ended(self, lane: int, overrun: float) -> None:
        """A call of ``lane`` ended having held its slot ``overrun`` seconds beyond its
        cost: charged to the lane at its next tickets (``issue``)."""
        overruns = self._corrections.get(lane)
        if overruns is None:
            self._corrections[lane] = [overrun]
        else:
            overruns.append(overrun)

    def _see(self, lane: int) -> None:
        """A lane new to the gate. With a second, the gate starts sharing: from then on
        every lane's calls in flight are counted (until then, the one lane's are all of
        them)."""
        if len(self._lanes) == 1 and not self._fair:
            (first,) = self._lanes
            if first not in self._caps:  # a capped lane's are counted already
                self._holding[first] = self._in_flight
        self._lanes.add(lane)
        self._fair = len(self._lanes) > 1

    def _hold(self, lane: int) -> None:
        """A call of ``lane`` was admitted (every lane's are counted once the gate is
        shared, before that the lanes with a cap)."""
        holding = self._holding[lane] = self._holding.get(lane, 0) + 1
        cap = self._caps.get(lane)
        if cap is not None and holding >= cap:
            self._capped.add(lane)
        if self._claims is not None:
            self._changed.add(lane)  # and it was served: its tickets waiting may be gone
            self._slot_line.hold(lane, holding)

    def _unhold(self, lane: int) -> None:
        holding = self._holding[lane] = self._holding[lane] - 1
        cap = self._caps.get(lane)
        if cap is not None and holding < cap:
            self._capped.discard(lane)
        if self._claims is not None:
            self._changed.add(lane)  # and its last call's end, when it was released
            self._slot_line.hold(lane, holding)

    def _count_arrival(self, lane: int, step: int) -> None:
        """A caller of ``lane`` came to wait at the gate (``step`` 1) or stopped waiting (-1)."""
        self._arrived[lane] = self._arrived.get(lane, 0) + step
        self._changed.add(lane)

    def _lends_to(self, lane: int, now: float | None) -> float:
        """``0.0`` when ``lane`` may take a free slot now; otherwise when the claims of
        the other lanes that keep it out lapse (``manor.admission.claims``)."""
        if now is None:
            now = current_time()
        claims = self._book(now)
        weight = self._slot_line.weight(lane)
        return claims.lends_to(lane, weight=weight, size=self._size, in_flight=self._in_flight, now=now)

    def _book(self, now: float) -> ClaimBook:
        """The claims as of ``now``: the lanes changed since the last look put in the book."""
        if self._claims is None:
            self._claims = ClaimBook(self._claim_s)
            self._slot_line.index(self._holding)
            self._changed.update(self._lanes)
            for waiter in self._waiters.values():
                if waiter.stage in (_WAIT_TOKEN, _WAIT_SLOT):
                    self._arrived[waiter.lane] = self._arrived.get(waiter.lane, 0) + 1
        if self._changed:
            holding, weight, caps = self._holding, self._slot_line.weight, self._caps
            put = self._claims.put_fields
            for other in self._changed:
                put(
                    other, weight(other), caps.get(other), holding.get(other, 0),
                    other in self._slot_line or other in self._token_line, self._released_at.get(other),
                    now, arrived=self._arrived.get(other, 0) > 0,
                )  # fmt: skip
            self._changed.clear()
        return self._claims

    def _front(
        self, line: Lanes, stage: int, capped: set[int] | tuple[()] = (), ready: tuple[Callable[[float], float], float] | None = None
    ) -> _Waiter | None:
        """The waiter whose turn it is in ``line``, dropping those that have passed
        ``stage`` (or left), passing over the lanes in ``capped``; with ``ready`` (a
        share's limit by weight, and now), first passing over the lanes after those set
        aside that are over their shares with their heads ready (``Lanes.next_ready``)."""
        # The line's emptiness asked of ``head`` (``None`` for an empty line, as for one
        # whose lanes are all capped), not of ``Lanes.__bool__``: a call fewer a look.
        while True:
            if ready is None:
                ticket = line.head(capped)
            elif not line:
                return None
            else:
                ticket = line.next_ready(*ready, capped)
                ready = None
            if ticket is None:
                return None  # no waiter, or every lane with waiters is at its cap
            waiter = self._waiters.get(ticket)
            if waiter is not None and waiter.stage <= stage:
                return waiter
            dropped = line.drop()
            self._drops += 1
            if self._claims is not None:
                self._changed.add(dropped)

    def _is_paused_head(self, waiter: _Waiter) -> bool:
        """Whether ``waiter`` is first in line for a slot while a pause lasts."""
        return (
            waiter.stage == _WAIT_SLOT
            and current_time() < self._paused_until
            and self._front(self._slot_line, _WAIT_SLOT, self._capped) is waiter
        )

    def _is_token_head(self, waiter: _Waiter) -> bool:
        return waiter.stage == _WAIT_TOKEN and self._front(self._token_line, _WAIT_TOKEN) is waiter

    def _dispatch(self, now: float | None = None) -> None:
        """Hand out tokens, then slots, strictly in turn, as far as they go.

        ``now`` is the current time if the caller has just read it (the clock is read
        only when a deadline needs it otherwise)."""
        if self._rate:
            if now is None:
                now = current_time()
            self._refill(now)
            while (head := self._front(self._token_line, _WAIT_TOKEN)) is not None:
                if head.stage != _WAIT_TOKEN or head.aborted or _expired(head, now):
                    break  # issued but not arrived (or leaving): the tickets behind it wait
                if self._tokens < 1.0 - _EPSILON:
                    # Wake the head if the bucket fills sooner than it planned to sleep
                    # (it just became head, or a token was refunded).
                    if self._token_eta() < head.sleeping_until - _EPSILON:
                        _wake(head)
                    break
                self._tokens = max(0.0, self._tokens - 1.0)
                head.stage = _WAIT_SLOT
                self._token_line.served()
                self._slot_line.append(head.ticket, head.lane, head.cost)
                if self._claims is not None:
                    self._changed.add(head.lane)
        claims = self._fair and self._claim_s > 0
        passed = self._capped
        held_back: tuple[_Waiter, float] | None = None
        # Once a head is held back, the heads behind it over their shares are held back
        # alike, by the same claims, while the claiming lanes stay as they were: what
        # this dispatch admits after (lanes below their shares) leaves no more slots
        # unclaimed, but a lane whose dead tickets are dropped may leave the claims.
        alike = -1  # ``_drops`` when the head was held back
        below = asked = -1  # the book's ``below_share`` since the last admission, at ``_drops`` ``asked``
        while self._in_flight < self._size:
            if alike == self._drops and below > 0 and asked == self._drops and self._slot_line.indexed:
                # Held back alike, the lanes next in turn over their shares with their
                # heads ready are set aside at one stroke: the first that may not be is next.
                head = self._front(self._slot_line, _WAIT_SLOT, passed, (self._claims.share_limit(size=self._size), now))  # type: ignore[union-attr,arg-type]
            else:
                head = self._front(self._slot_line, _WAIT_SLOT, passed)
            if head is None or head.stage != _WAIT_SLOT or head.aborted:
                break
            if self._paused_until != -math.inf:
                if now is None:
                    now = current_time()
                if now < self._paused_until:
                    # Wake the head to sleep until the pause ends, if it sleeps longer.
                    if head.sleeping_until > self._paused_until:
                        _wake(head)
                    break
            if head.deadline != math.inf or claims:
                if now is None:
                    now = current_time()
                if head.deadline <= now and head.queued_at < now:  # ``_expired``, spelled out: a call fewer an admission
                    break
            if claims:
                if alike == self._drops and self._claims.over_share(  # type: ignore[union-attr]
                    self._holding.get(head.lane, 0), weight=self._slot_line.weight(head.lane), size=self._size
                ):
                    lapses = held_back[1]  # type: ignore[index]  # held back alike, by claims that lapse no sooner
                else:
                    lapses = self._lends_to(head.lane, now)
                if lapses:
                    # Its lane is over its share and the free slots are claimed: the other
                    # lanes may take them. It looks again when the claims lapse.
                    if held_back is None or lapses < held_back[1]:
                        held_back = (head, lapses)
                    alike = self._drops
                    if type(head.task) is not trio.lowlevel.Task:  # nothing can abort it unseen
                        self._slot_line.clear(head.lane, head.deadline)
                    self._slot_line.set_aside()  # passed over for the rest of this dispatch
                    # Only a lane below its share may still be let in, and when no lane
                    # waiting is, the dispatch is done.
                    if below < 0 or asked != self._drops:
                        below, asked = self._book(now).below_share(size=self._size), self._drops
                    if not below:
                        break
                    continue
            below = -1
            self._slot_line.served()
            del self._waiters[head.ticket]
            head.stage = _ADMITTED
            head.admitted_at = now
            if self._caps or self._fair:
                self._hold(head.lane)
            self._waiting -= 1
            if self._claims is not None:
                self._count_arrival(head.lane, -1)
            self._in_flight += 1
            if self._in_flight > self._peak:
                self._peak = self._in_flight
            if self._allowed is not None:
                if now is None:
                    now = current_time()
                head.admitted_at = now
                self._spend_allowance(now)
            task = head.task
            if task is None or type(task) is trio.lowlevel.Task:
                _wake(head)
            else:  # parked without a task (``arrive``): woken with its permit
                head.task = None
                head.parked = False
                if head.watched:
                    head.watched = False
                    # ``_unwatch``'s count kept here, and it called only for the last
                    # watched wait: a call fewer for each call admitted after a wait.
                    self._watching -= 1
                    if not self._watching:
                        self._rest()
                task(self._permit(head))  # type: ignore[operator]
        if claims:
            self._slot_line.restore()
            self._hold_back(held_back)

    def _hold_back(self, held_back: tuple[_Waiter, float] | None) -> None:
        """``held_back``'s waiter sleeps until the claims that keep it out lapse (when
        they lapse with time alone), then looks again."""
        if held_back is not None and held_back[1] == math.inf:
            held_back = None
        self._claim_wake = held_back
        if held_back is not None:
            waiter, lapses = held_back
            if lapses < waiter.sleeping_until:
                _wake(waiter)  # parked until later: it sleeps again, until then


def _wake(waiter: _Waiter) -> None:
    """Wake the waiter if it is parked; a waiter still running will look for itself. A
    caller parked without a task (``Gate.arrive``) is told to go on in one."""
    task, waiter.task = waiter.task, None
    if task is not None:
        if type(task) is trio.lowlevel.Task:
            trio.lowlevel.reschedule(task)
        else:
            task(None)  # type: ignore[operator]


def _expired(waiter: _Waiter, now: float) -> bool:
    """Its timeout ends at this instant: it times out now, and takes nothing on the way.

    Otherwise a slot (or token) freed by another task at that same instant would go to
    it or not depending on which of the two tasks trio happened to run first. Only at
    the instant it arrives (``timeout=0``, a try) may it still take what is free.
    """
    return waiter.deadline <= now and waiter.queued_at < now
