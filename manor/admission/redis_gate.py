"""The shared gate across processes and machines: its state lives in Redis.

The platform's session limit belongs to the account, not to a process. Every process
whose ``gate.url`` and ``gate.name`` are the same shares one gate, with the semantics of
the in-process ``manor.admission.gate.Gate``:

- at most ``size`` calls in flight from all processes together, at every instant;
- fair between tenants: each process is a tenant (``tenant``, by default this host and
  process id; processes named alike share one), with a ``weight`` and an optional cap
  (``max_sessions``), and the server serves the tenants as the in-process gate serves
  its lanes — start-time fair queuing on each call's predicted seconds, corrected by what
  it held when its lease ends, with a claim on each tenant's share (``claim_s``);
- within a tenant, in global ticket order: a waiter gets its global ticket when it joins
  the line at the server, and a process sends its waiters there in its own ticket order
  (a ticket issued ahead of time holds back the ones behind it, as in the in-process
  gate), so a tick keeps its planned order; the worlds of a fleet in one process take
  turns in lanes (``manor.admission.lanes``), and while it has more than one, a process
  keeps no more waiters at the server and permits together than the gate has slots, so
  that the turns are taken as slots free, not all at once as the waiters arrive, with a
  claim on each lane's share (``manor.admission.claims``); a lane's cap (``set_share``)
  is kept here too: a lane sends no waiter while it holds and has waiting its cap;
- a wait longer than ``gate.timeout_s`` degrades as ``gate_timeout``; the optional token
  bucket is shared, and a token taken by a waiter that then gives up is refunded;
- ``size`` can be changed from any process (or ``manor gate resize``); every process
  sees it within a second;
- a pause (a server's retry-after) made by any process holds every process's calls
  until it ends (``pause``).

Each transition is one call of one Lua script (``redis_gate.lua``), atomic on the
server, timed by the server's clock. A permit is a lease that expires after
``gate.lease_s`` unless its process renews it, which it does while the call runs: a
process killed with ``kill -9`` loses its permits within the lease, and its waiters
leave the line when its heartbeat (renewed alike) expires.

A release reaches the server at once, and the server hands the freed slot to the next
waiter in line: that waiter's process is woken through its list of grants, on which it
blocks (``BLMPOP``); a poll every second covers a grant whose reply was lost. The
server grants a process's waiters in the order it sent them, but the word of a grant
comes on that list or in the reply to the process's own transition, and a later
waiter's word may arrive first: it waits for the word of those before it, so that each
waiter is admitted (and its admission recorded) in ticket order.

When Redis is lost mid-run, the calls in flight go on; every call waiting at the gate,
and every new one, degrades as ``gate_unavailable`` until the client has reconnected
(with backoff), and the run goes on. Redis is used through coredis (anyio-based, so it
runs under trio), in this module only: ``pip install 'manor[redis]'``.
"""

from __future__ import annotations

import importlib.resources
import math
import os
import random
import socket
import time
import uuid
from collections import Counter, deque
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, final
from urllib.parse import urlsplit

import attrs
import trio

from ..errors import (
    GateTimeout,
    GateUnavailable,
    SharedGateError,
    add_secret,
    one_line,
    redacted_url,
)
from .book import AdmittedTicket, Ticket, TicketBook
from .claims import Claimant, lends_to
from .gate import GateStatistics
from .lanes import Lanes

if TYPE_CHECKING:
    import coredis

__all__ = ["GateHolder", "GateStatus", "GateTenant", "RedisGate", "RedisPermit", "claim_shares", "gate_status", "reset_shared_gate", "resize_shared_gate"]

_SCRIPT = importlib.resources.files(__package__).joinpath("redis_gate.lua").read_text(encoding="utf-8")

#: Longest a transition may take before the server is taken for lost.
OPERATION_TIMEOUT_S = 5.0
#: Longest the first connection may take.
CONNECT_TIMEOUT_S = 3.0
#: How long one wait for grants blocks at the server (it loops).
GRANT_BLOCK_S = 1.0
#: The poll (heartbeat, lease renewal, lost grants, a new size): at least this often.
POLL_S = 1.0
#: Reconnection backoff, first and longest pause.
BACKOFF_S = (0.05, 2.0)
#: Admission latencies kept for the benchmark.
_LATENCIES_KEPT = 100_000

# A waiter's stages after ``ISSUED`` (``manor.admission.book``), in their order.
_ARRIVED = 1  # arrived; not yet sent to the server (a ticket before it has not arrived)
_SENT = 2  # in the line at the server
_GRANTED = 3  # holds a lease
_FAILED = 4  # the server was lost while it waited


def _coredis() -> Any:
    """The coredis module, or one line saying how to install it."""
    try:
        import coredis
    except ImportError:
        raise SharedGateError("gate.url is set but the Redis client is missing: pip install 'manor[redis]'") from None
    return coredis


def _key_prefix(name: str) -> str:
    # The braces make every key of one gate hash to the same Redis Cluster slot.
    return f"manor:gate:{{{name}}}:"


class _Lost(Exception):
    """The server cannot be reached, or refused a transition: its state is unknown."""


@attrs.define(eq=False)
class _Waiter(Ticket):
    done: trio.Event = attrs.field(factory=trio.Event)
    failure: GateUnavailable | None = None
    #: At the server: "PID:TICKET".
    id: str = ""
    #: The global ticket and its place among the gate's admissions, as granted.
    global_ticket: int = 0
    order: int = 0
    #: When it was woken, granted: its admission. Its task may resume later, and
    #: waiters woken together resume in any order, after a stall in another task (a
    #: first call's imports), say; the admissions a save records keep their order.
    admitted_at: float = 0.0
    #: The wall-clock time (s) of the release that freed its slot, when one did.
    released_at: float | None = None


@final
class RedisPermit(AdmittedTicket, kw_only=True):
    """The right to one call in flight, a lease at the server renewed while it is held;
    release it exactly once.

    Attributes:
        global_ticket: the ticket the server gave it when it joined the line.
        order: its place among every admission the gate has made (1 for the first);
            an admission undone (its caller gone before it heard) keeps its place, so
            the order only ever grows.
    """

    global_ticket: int
    order: int
    _gate: RedisGate
    _id: str

    def _give_back(self) -> None:
        """The slot is free: the server admits the next waiter in line at once."""
        self._gate._release(self._id)


@attrs.frozen
class GateHolder:
    """One process using a shared gate, as ``manor gate status`` lists it."""

    id: str
    host: str
    pid: str
    world: str
    holding: int
    waiting: int


@attrs.frozen
class GateTenant:
    """A tenant of a shared gate, as ``manor gate status`` lists it: its weight, its cap
    (``None``: none), the calls it holds and has waiting, and its share of the gate's
    session-seconds over the last minute (``None`` when nobody held any)."""

    name: str
    weight: float
    max_sessions: int | None
    holding: int
    waiting: int
    session_s_last_minute: float
    share_last_minute: float | None


@attrs.frozen
class GateStatus:
    """A shared gate as the server has it: its figures, the processes using it and its
    tenants, and its token bucket (``rate`` 0: none), which stays as the process that
    created the gate set it, as its size does, after every process has left."""

    url: str
    name: str
    statistics: GateStatistics
    lease_s: float
    holders: tuple[GateHolder, ...]
    tenants: tuple[GateTenant, ...] = ()
    rate: float = 0.0
    burst: int = 1


@final
@attrs.define(eq=False)
class RedisGate(TicketBook[_Waiter]):
    """The gate shared by every process with the same ``url`` and ``name``: the
    in-process ``Gate``'s semantics, its state in Redis.

    It is used inside ``async with gate.connected():``, which connects, joins the gate
    and runs the tasks that keep it (sending, the grants, the heartbeat)::

        gate = RedisGate("redis://localhost:6379/0", "my-account", size=5)
        async with gate.connected():
            permit = await gate.acquire(timeout=30)  # a slot of all processes' five
            try:
                ...  # the call
            finally:
                permit.release()

    Args:
        url: the Redis server, ``redis://host:port/db`` (also ``rediss://``, ``unix://``).
        name: the gate's name on that server.
        size: calls in flight at once, if this process creates the gate; a gate that
            exists keeps its size (``notices`` say so when it differs).
        rate: token bucket refill, tokens per second (0: none), if this process creates it.
        burst: the bucket's capacity, likewise.
        lease_s: how long a permit lasts unless renewed, if this process is the first
            on a gate no process is using (else the gate's, and ``notices`` say so).
        claim_s: how long a tenant keeps a claim on its share after its last call
            ended (``manor.admission.gate.Gate``), likewise.
        world: what this process runs, for ``manor gate status``.
        tenant: whom this process's calls count for (default: this host and process
            id); processes with the same tenant share its share.
        weight: the tenant's weight against the other tenants', if this process
            brings the tenant in (no other process of it on the gate, nor calls of it);
            else the tenant's, and ``notices`` say so.
        max_sessions: the most calls the tenant may have in flight (``None``: no
            cap), likewise.

    Raises:
        SharedGateError: the Redis client is not installed.
    """

    url: str
    name: str
    _size: int = attrs.field(alias="size", validator=attrs.validators.ge(1))
    _rate: float = attrs.field(alias="rate", default=0.0, validator=attrs.validators.ge(0))
    _burst: int = attrs.field(alias="burst", default=1, validator=attrs.validators.ge(1))
    lease_s: float = attrs.field(default=5.0, validator=attrs.validators.gt(0))
    claim_s: float = attrs.field(default=0.0, validator=attrs.validators.ge(0))
    world: str = ""
    tenant: str = attrs.field(factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    weight: float = attrs.field(default=1.0, validator=attrs.validators.gt(0))
    max_sessions: int | None = attrs.field(default=None, validator=attrs.validators.optional(attrs.validators.ge(1)))
    #: Said once joined, each one line: where the gate, or this process's tenant, was
    #: found with other settings than this process's, which it shares as they are.
    notices: list[str] = attrs.field(factory=list, init=False)

    _coredis: Any = attrs.field(init=False, repr=False)
    _client: coredis.Redis[str] | None = attrs.field(default=None, init=False, repr=False)
    _script: Any = attrs.field(default=None, init=False, repr=False)
    _pid: str = attrs.field(factory=lambda: uuid.uuid4().hex[:12], init=False)
    _prefix: str = attrs.field(init=False, repr=False)
    _random: random.Random = attrs.field(factory=random.Random, init=False, repr=False)

    # Issued tickets in order, in their lanes, until sent (or gone): a process's order
    # at the server.
    _line: Lanes = attrs.field(factory=Lanes, init=False, repr=False)
    _lanes: set[int] = attrs.field(factory=set, init=False, repr=False)
    # The lanes' caps (``set_share``): kept here, before their waiters go to the server.
    _caps: dict[int, int] = attrs.field(factory=dict, init=False, repr=False)
    # The lane of each waiter sent and permit held, and when each lane's last call
    # ended (or its first tickets were issued): the lanes' claims on their shares of
    # what this process sends (``claims``), and when the sender looks again for a claim
    # that lapses.
    _lane_of: dict[str, int] = attrs.field(factory=dict, init=False, repr=False)
    _lane_ended_at: dict[int, float] = attrs.field(factory=dict, init=False, repr=False)
    _send_at: float = attrs.field(default=math.inf, init=False, repr=False)
    _waiting: dict[str, _Waiter] = attrs.field(factory=dict, init=False, repr=False)
    # The waiters sent to the server, in the order sent: the order it grants them.
    _in_line: deque[_Waiter] = attrs.field(factory=deque, init=False, repr=False)
    _held: set[str] = attrs.field(factory=set, init=False, repr=False)
    # What the sender sends next.
    _releases: list[str] = attrs.field(factory=list, init=False, repr=False)
    _released_at: float | None = attrs.field(default=None, init=False, repr=False)
    _timed_out: list[str] = attrs.field(factory=list, init=False, repr=False)
    _cancelled: list[str] = attrs.field(factory=list, init=False, repr=False)
    _resize_to: int | None = attrs.field(default=None, init=False)
    # The pause (``pause``, the book's: this process sends no call to the gate before
    # it ends) not yet sent to the server, which holds every process's calls until then.
    _pause_to: float | None = attrs.field(default=None, init=False)
    _work: trio.Event = attrs.field(factory=trio.Event, init=False, repr=False)

    _available: bool = attrs.field(default=False, init=False)
    _reconnected: trio.Event = attrs.field(factory=trio.Event, init=False, repr=False)
    _lost_reason: str = attrs.field(default="not connected", init=False)
    _losses: int = attrs.field(default=0, init=False)
    # When the poller should look next (trio time), and what wakes it sooner.
    _poll_at: float = attrs.field(default=math.inf, init=False)
    _poll_now: trio.Event = attrs.field(factory=trio.Event, init=False, repr=False)
    _figures: GateStatistics | None = attrs.field(default=None, init=False, repr=False)
    _latencies: deque[float] = attrs.field(factory=lambda: deque(maxlen=_LATENCIES_KEPT), init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        self._coredis = _coredis()
        self._prefix = _key_prefix(self.name)
        if not self.tenant:
            self.tenant = f"{socket.gethostname()}:{os.getpid()}"
        if "|" in self.tenant:
            raise ValueError(f"a tenant's name cannot hold '|': {self.tenant!r}")
        password = urlsplit(self.url).password
        if password:
            add_secret(password)  # never in a call's message

    # -- settings ---------------------------------------------------------------------

    @property
    def where(self) -> str:
        """The gate in messages: ``redis://host:port/db (gate NAME)``, no password."""
        return f"{redacted_url(self.url)} (gate {self.name})"

    def _resized(self) -> None:
        """The size is the shared one (``size``, the book's): every process sees it
        within a second."""
        self._resize_to = self._size
        self._kick()

    def _paused(self) -> None:
        """A pause (``pause``, the book's) holds every process: this one sends no call to
        the gate before it ends, and the server, told at once, grants no slot to any
        process's call before then (its ``hold_until``)."""
        self._pause_to = self._paused_until
        self._kick()

    def _allowance_spent(self, until: float) -> None:
        """The last call of this process's allowance (``allow``, the book's: the count
        is this process's, which heard the headers) was let through: the gate pauses,
        for every process, until the window resets."""
        self.pause(until)

    @property
    def available(self) -> bool:
        """Whether the server is reachable (calls are admitted through it)."""
        return self._available

    @property
    def losses(self) -> int:
        """How many times the server was lost since the gate connected."""
        return self._losses

    def admission_latencies(self) -> list[float]:
        """Seconds from a release (in any process) to the admission it made, in this
        process: each admitted waiter whose slot a release freed."""
        return list(self._latencies)

    # -- tickets ----------------------------------------------------------------------

    def issue(self, count: int = 1, lane: int = 0, costs: Sequence[float] | None = None) -> range:
        """Reserve ``count`` tickets in ``lane``; they join the server's line in this
        order once their callers arrive (sharing this process's turns fairly with the
        tickets of its other lanes, by ``costs``: ``manor.admission.lanes``). Every
        ticket must reach ``acquire`` or be withdrawn."""
        self._line.mark()
        self._lanes.add(lane)
        if lane not in self._lane_ended_at:
            # Its first tickets: the lane joins, and claims its share from now (as the
            # server has each tenant do from its process's join).
            self._lane_ended_at[lane] = trio.current_time()
        return self._issue(count, lane, costs, _Waiter, self._line)

    def set_share(self, lane: int, weight: float = 1.0, max_sessions: int | None = None) -> None:
        """``lane``'s share of this process's turns (``weight``), and the most calls it
        may have in flight (``None``: no cap but the gate's size, or the tenant's): the
        process sends no more of the lane's waiters to the server than its cap less
        what it holds and has waiting there, so the cap is never exceeded.

        Raises:
            ValueError: ``weight`` is not positive and finite, or ``max_sessions`` < 1.
        """
        if max_sessions is not None and max_sessions < 1:
            raise ValueError(f"a lane's max_sessions must be at least 1, not {max_sessions}")
        self._line.weigh(lane, weight)
        self._lanes.add(lane)
        if max_sessions is None:
            self._caps.pop(lane, None)
        else:
            self._caps[lane] = max_sessions
        self._kick()

    def withdraw(self, ticket: int) -> None:
        """Give up an issued ticket whose caller will not come; safe in a ``finally``."""
        if self._withdrawn(ticket) is not None:
            self._kick()

    # -- admission --------------------------------------------------------------------

    async def acquire(self, ticket: int | None = None, *, timeout: float = math.inf) -> RedisPermit:
        """Wait for a permit, in global ticket order.

        Raises:
            GateTimeout: no slot within ``timeout`` seconds (a token taken is refunded).
            GateUnavailable: the server is lost (now, or while this call waited).
            ValueError: the ticket was not issued by this gate, or is already used.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        waiter = self._arrival(ticket)
        ticket = waiter.ticket
        if not self._available:
            del self._waiters[ticket]
            self._kick()
            raise self._unavailable()
        queued_at = trio.current_time()
        while self._paused_until > trio.current_time():  # a pause may be made longer
            if self._paused_until >= queued_at + timeout:
                await trio.sleep_until(queued_at + timeout)
                self.withdraw(ticket)
                raise GateTimeout(f"no gate slot within {timeout:g}s (the server asked for a pause)")
            await trio.sleep_until(self._paused_until)
        waiter.queued_at = queued_at
        waiter.stage = _ARRIVED
        self._kick()
        try:
            with trio.move_on_at(waiter.queued_at + timeout):
                await waiter.done.wait()
        except BaseException:
            self._give_up(waiter, self._cancelled)
            raise
        if waiter.stage == _GRANTED and waiter.done.is_set():
            del self._waiters[ticket]
            if waiter.released_at is not None:
                self._latencies.append(time.time() - waiter.released_at)
            if self._allowed is not None:
                self._spend_allowance(trio.current_time())
            return RedisPermit(ticket, waiter.queued_at, waiter.admitted_at, global_ticket=waiter.global_ticket, order=waiter.order, _gate=self, _id=waiter.id)
        if waiter.failure is not None:
            del self._waiters[ticket]
            raise waiter.failure
        self._give_up(waiter, self._timed_out)
        raise GateTimeout(f"no gate slot within {timeout:g}s")

    def statistics(self) -> GateStatistics:
        """The gate's figures from all processes, as of the last word from the server."""
        if self._figures is None:
            return GateStatistics(self._size, 0, 0, 0, 0, 0, 0, 0, float(self._burst) if self._rate else None, 0.0, 0.0)
        return attrs.evolve(self._figures, size=self._size)

    # -- connecting -------------------------------------------------------------------

    async def check_reachable(self) -> None:
        """Connect once and disconnect: a command checks this, in a trio run of its own
        (``manor.run.opening``), before it creates files or takes the screen.

        Raises:
            SharedGateError: the server cannot be reached.
        """
        async with self._new_client() as client:
            # Caught in here: the client's task group would wrap it in an exception group.
            try:
                with trio.fail_after(CONNECT_TIMEOUT_S):
                    await client.ping()
            except (self._coredis.exceptions.RedisError, OSError, trio.TooSlowError) as exc:
                failure = _describe(exc)
            else:
                return
        raise SharedGateError(f"gate {self.where}: cannot reach Redis: {failure}")

    @asynccontextmanager
    async def connected(self) -> AsyncIterator[RedisGate]:
        """Connect, join the gate, and keep it while inside; on the way out, give back
        every permit and place in line this process still has.

        Raises:
            SharedGateError: the server cannot be reached (one line naming it).
        """
        failure = None
        async with self._new_client() as client:
            self._client = client
            self._script = client.register_script(_SCRIPT)
            try:
                reply = await self._call("join", *self._identity(), "0")
            except _Lost as exc:
                failure = str(exc)  # raised once out of the client, whose task group would wrap it
            else:
                self._joined(reply, again=False)
                try:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._send, name=f"gate {self.name}: send")
                        nursery.start_soon(self._receive_grants, name=f"gate {self.name}: grants")
                        nursery.start_soon(self._keep, name=f"gate {self.name}: heartbeat")
                        try:
                            yield self
                        finally:
                            nursery.cancel_scope.cancel()
                finally:
                    with trio.CancelScope(shield=True), trio.move_on_after(OPERATION_TIMEOUT_S):
                        await self._leave()
            finally:
                self._available = False
                self._client = None
        if failure is not None:
            raise SharedGateError(f"gate {self.where}: cannot reach Redis: {failure}")

    async def _leave(self) -> None:
        """Give back every permit and place in line of this process, on a connection of
        its own: when the run was cancelled (Ctrl-C), so were the client's connections,
        whose tasks run inside it. What cannot be given back expires with its lease."""
        async with self._new_client() as client:
            try:
                await client.register_script(_SCRIPT)(keys=[self._prefix], args=["leave", self._pid])
            except (self._coredis.exceptions.RedisError, OSError):
                pass

    def _new_client(self) -> coredis.Redis[str]:
        return self._coredis.Redis.from_url(
            self.url,
            decode_responses=True,
            retry_policy=self._coredis.retry.NoRetryPolicy(),
            connect_timeout=CONNECT_TIMEOUT_S,
            client_name=f"manor-gate-{self._pid}",
        )

    def _identity(self) -> list[object]:
        return [
            self._pid, socket.gethostname(), os.getpid(), self.world, self._size, self._rate, self._burst, round(self.lease_s * 1000),
            round(self.claim_s * 1000), self.tenant, repr(self.weight), self.max_sessions or 0,
        ]  # fmt: skip

    def _joined(self, reply: list[Any], *, again: bool) -> None:
        """Joined (or, ``again``, after the server was lost): the gate's settings are
        the server's, and so are the tenant's weight and cap; ``notices`` say where they
        differ from this process's own (on its first join)."""
        created, others, claim_ms, weight, cap = reply[2]
        figures = reply[0]
        size, rate, burst, lease_ms = int(figures[0]), float(figures[1]), int(figures[2]), float(figures[3])
        claim_s, lease_s = float(claim_ms) / 1000, lease_ms / 1000
        weight, max_sessions = float(weight), int(cap) or None
        if not (created == "1" or again):
            self.notices.extend(self._differences(int(others) > 0, size, rate, burst, lease_s, claim_s, weight, max_sessions))
        self._rate, self._burst, self.lease_s, self.claim_s = rate, burst, lease_s, claim_s
        self.weight, self.max_sessions = weight, max_sessions
        self._available = True
        self._reconnected.set()
        self._absorb(reply)

    def _differences(
        self, held: bool, size: int, rate: float, burst: int, lease_s: float, claim_s: float, weight: float, max_sessions: int | None
    ) -> list[str]:
        """What the gate as this process found it keeps other than its own settings:
        the gate's (its size, rate and burst as an earlier process left them; its lease
        and claim as the process that came to it first set them, while any process is
        on it: ``held``), and its tenant's weight and cap (as the process that brought
        the tenant in set them, while any process of it is on the gate)."""
        said = []
        theirs, mine = [], []
        if size != self._size:
            theirs.append(f"size {size}")
            mine.append(f"size {self._size}")
        if (rate, burst) != (self._rate, self._burst):
            theirs.append(f"rate {rate:g}/s, burst {burst}" if rate else "no rate")
            mine.append(f"rate {self._rate:g}/s, burst {self._burst}" if self._rate else "no rate")
        for setting, found, own in (("lease_s", lease_s, self.lease_s), ("claim_s", claim_s, self.claim_s)):
            if not math.isclose(found, own, abs_tol=5e-4):  # the server keeps milliseconds
                theirs.append(f"{setting} {found:g}")
                mine.append(f"{setting} {own:g}")
        if theirs:
            said.append(
                f"gate {self.where} {'is in use with' if held else 'is used by no process, yet keeps'} {', '.join(theirs)}"
                f"; this process shares it as it is (its own settings: {', '.join(mine)})"
                + ("" if held or size == self._size else f"; 'manor gate resize {self._size}' sets it to yours")
                + ("" if held or (rate, burst) == (self._rate, self._burst) else "; 'manor gate reset' makes the next process set it anew")
            )
        if (weight, max_sessions) != (self.weight, self.max_sessions):
            said.append(
                f"gate {self.where}: tenant {self.tenant} is in use with {_share(weight, max_sessions)}, as the process that "
                f"brought it in set them; this process counts under them, not its own settings ({_share(self.weight, self.max_sessions)})"
            )
        return said

    # -- the tasks that keep the gate -------------------------------------------------

    def _kick(self) -> None:
        self._work.set()

    async def _send(self) -> None:
        """Send what this process did (releases, waiters that gave up, arrivals in
        ticket order, a new size) to the server, as it happens, batched."""
        while True:
            with trio.move_on_at(self._send_at):
                await self._work.wait()
            self._work = trio.Event()
            self._send_at = math.inf
            if not self._available:
                continue
            try:
                if (size := self._resize_to) is not None:
                    reply = await self._call("resize", size)
                    if self._resize_to == size:  # not asked for another meanwhile
                        self._resize_to = None
                    self._absorb(reply)
                if (until := self._pause_to) is not None:
                    # Sent as a duration: the server holds its gate by its own clock.
                    reply = await self._call("pause", f"{max(0.0, until - trio.current_time()) * 1000:.3f}")
                    if self._pause_to == until:  # not asked for a longer one meanwhile
                        self._pause_to = None
                    self._absorb(reply)
                arrivals = self._take_arrivals()
                if not (self._releases or self._timed_out or self._cancelled or arrivals):
                    continue
                released, self._releases = self._releases, []
                timed_out, self._timed_out = self._timed_out, []
                cancelled, self._cancelled = self._cancelled, []
                cause = "" if self._released_at is None else f"{self._released_at * 1000:.3f}"
                self._released_at = None
                args: list[object] = ["step", self._pid, cause]
                for ids in (released, timed_out, cancelled):
                    args += [len(ids), *ids]
                for waiter in arrivals:
                    args += [waiter.id, repr(waiter.cost)]
                self._absorb(await self._call(*args))
            except _Lost as exc:
                self._lose(str(exc))

    def _take_arrivals(self) -> list[_Waiter]:
        """The waiters that may join the server's line now: the arrived ones, lane by
        lane in turn, before the first issued ticket whose caller has not arrived."""
        arrivals = []
        line, waiters = self._line, self._waiters
        lanes = len(self._lanes) > 1
        # With lanes to take turns, no more waiting at the server and holding together
        # than the gate has slots: the rest take their turns here as slots free (a
        # release and the arrival it lets go share one transition). And a lane over its
        # share of them sends no more while another lane claims its own (``claims``).
        window = self._size if lanes else math.inf
        claims = lanes and self.claim_s > 0
        # A lane at its cap (what it holds and has at the server) sends no more.
        caps = self._caps
        outstanding = Counter(self._lane_of.values()) if caps else Counter[int]()
        passed: set[int] = set()
        while line and len(self._lane_of) < window:
            ticket = line.head(passed)
            if ticket is None:
                break  # every lane with waiters is kept out by a claim or its cap
            waiter = waiters.get(ticket)
            if waiter is None or waiter.stage == _FAILED:
                line.drop()  # withdrawn, gave up, or failed: it holds nobody back
            elif waiter.stage == _ARRIVED:
                lane = waiter.lane
                if lane in caps and outstanding[lane] >= caps[lane]:
                    passed.add(lane)  # until a call of its ends (``_ended``)
                    continue
                if claims and (lapses := self._lends_to(lane)):
                    passed.add(lane)
                    self._send_at = min(self._send_at, lapses)
                    continue
                outstanding[lane] += 1
                line.served()
                waiter.stage = _SENT
                waiter.id = f"{self._pid}:{waiter.ticket}"
                self._waiting[waiter.id] = waiter
                self._lane_of[waiter.id] = waiter.lane
                self._in_line.append(waiter)
                arrivals.append(waiter)
            else:
                break
        return arrivals

    async def _receive_grants(self) -> None:
        """Wake the waiters the server granted slots to in other processes' transitions."""
        key = f"{self._prefix}grants:{self._pid}"
        left = self._coredis.tokens.PureToken.LEFT
        while True:
            await self._reconnected.wait()
            assert self._client is not None
            try:
                with trio.fail_after(GRANT_BLOCK_S + OPERATION_TIMEOUT_S):
                    popped = await self._client.blmpop([key], GRANT_BLOCK_S, left, count=1000)
            except (self._coredis.exceptions.RedisError, OSError, trio.TooSlowError) as exc:
                self._lose(_describe(exc))
                continue
            if popped is not None:
                self._grant(popped[1])

    async def _keep(self) -> None:
        """The heartbeat: renew this process and its leases, pick up grants whose word
        was lost, see a new size; at a token's refill or the end of a hold, dispatch.
        When the server is lost, connect again with backoff."""
        while True:
            if not self._available:
                await self._join_again()
                continue
            with trio.move_on_at(min(self._poll_at, trio.current_time() + min(POLL_S, self.lease_s / 3))):
                await self._poll_now.wait()
            self._poll_now = trio.Event()
            if not self._available:
                continue
            self._poll_at = math.inf
            held = sorted(self._held)
            try:
                reply = await self._call("poll", self._pid, len(held), *held, *self._waiting)
            except _Lost as exc:
                self._lose(str(exc))
                continue
            self._absorb(reply)
            lost, claimed = reply[2]
            self._held.difference_update(lost)
            self._grant(f"{id}|0|0|0|" for id in claimed)

    async def _join_again(self) -> None:
        pause = BACKOFF_S[0]
        while True:
            try:
                reply = await self._call("join", *self._identity(), "1", *sorted(self._held))
            except _Lost as exc:
                self._lost_reason = str(exc)
                await trio.sleep(pause * self._random.uniform(0.5, 1.5))
                pause = min(BACKOFF_S[1], pause * 2)
                continue
            self._joined(reply, again=True)
            self._kick()  # a size asked for while the server was away
            return

    # -- what the tasks do ------------------------------------------------------------

    async def _call(self, *args: object) -> Any:
        """One transition at the server.

        Raises:
            _Lost: the server cannot be reached, or refused it; what it did is unknown.
        """
        try:
            with trio.fail_after(OPERATION_TIMEOUT_S):
                return await self._script(keys=[self._prefix], args=[str(arg) for arg in args])
        except (self._coredis.exceptions.RedisError, OSError, trio.TooSlowError) as exc:
            raise _Lost(_describe(exc)) from exc

    def _absorb(self, reply: list[Any]) -> None:
        """Take in the gate's figures, when to look next, and this process's grants."""
        f = reply[0]
        size = int(f[0])
        if self._resize_to is None:
            self._size = size
        tokens = float(f[6])
        self._figures = GateStatistics(
            size=size,
            in_flight=int(f[4]),
            waiting=int(f[5]),
            peak_in_flight=int(f[14]),
            admitted=int(f[9]),
            timeouts=int(f[10]),
            cancelled=int(f[11]),
            refunds=int(f[12]),
            tokens_available=min(float(self._burst), tokens) if tokens >= 0 else None,
            total_wait=float(f[15]) / 1000,
            max_wait=float(f[16]) / 1000,
        )
        wake, server_now = float(f[7]), float(f[8])
        if wake >= 0:
            at = trio.current_time() + max(0.0, wake - server_now) / 1000
            if at < self._poll_at:
                self._poll_at = at
                self._poll_now.set()
        self._grant(reply[1])

    def _grant(self, entries: Any) -> None:
        """Take the grants of slots to waiters, ``ID|TICKET|ORDER|AT|RELEASED_AT`` each,
        and wake those whose turn it is."""
        for entry in entries:
            id, ticket, order, _, released_at = entry.split("|")
            waiter = self._waiting.pop(id, None)
            if waiter is None:
                continue  # it gave up meanwhile: its leave takes the lease back
            waiter.stage = _GRANTED
            waiter.global_ticket, waiter.order = int(ticket), int(order)
            waiter.released_at = float(released_at) / 1000 if released_at else None
            self._held.add(id)
        self._wake()
        if len(self._lanes) > 1:
            self._kick()  # room at the server for the next turns

    def _wake(self) -> None:
        """Wake the granted waiters at the head of the line, all at this moment: up to
        the first one whose word has not come yet (it has been granted too)."""
        now = trio.current_time()
        line = self._in_line
        while line and line[0].stage != _SENT:
            waiter = line.popleft()
            if waiter.stage == _GRANTED:
                waiter.admitted_at = now
                waiter.done.set()

    def _lends_to(self, lane: int) -> float:
        """``0.0`` when ``lane`` may send a waiter now; otherwise when the claims of
        the other lanes that keep it out lapse (``manor.admission.claims``): the lanes
        share what this process may have at the server, the gate's size (or its cap)."""
        outstanding: dict[int, int] = {}
        for of in self._lane_of.values():
            outstanding[of] = outstanding.get(of, 0) + 1
        tenants = {
            other: Claimant(
                self._line.weight(other), self._caps.get(other), outstanding.get(other, 0), other in self._line, self._lane_ended_at.get(other)
            )
            for other in self._lanes
        }
        size = self._size if self.max_sessions is None else min(self._size, self.max_sessions)
        return lends_to(lane, tenants, size=size, in_flight=len(self._lane_of), now=trio.current_time(), claim_s=self.claim_s)

    def _ended(self, id: str) -> None:
        """The waiter or permit ``id`` has left this process's share (``_lends_to``)."""
        lane = self._lane_of.pop(id, None)
        if lane is not None:
            self._lane_ended_at[lane] = trio.current_time()
            if len(self._lanes) > 1 or lane in self._caps:
                self._kick()

    def _release(self, id: str) -> None:
        self._ended(id)
        if id in self._held:
            self._held.discard(id)
            if self._available:
                self._releases.append(id)
                if self._released_at is None:
                    self._released_at = time.time()
                self._kick()

    def _give_up(self, waiter: _Waiter, reason: list[str]) -> None:
        """A waiter stops waiting (timed out, or cancelled): it holds nothing after.
        At the server it leaves the line, or gives back the slot granted meanwhile."""
        self._waiters.pop(waiter.ticket, None)
        self._ended(waiter.id)
        if waiter.stage == _SENT:
            del self._waiting[waiter.id]
        elif waiter.stage == _GRANTED:
            self._held.discard(waiter.id)
        else:
            # Never reached the server (or it was lost): the tickets behind may go.
            waiter.stage = _FAILED
            self._kick()
            return
        waiter.stage = _FAILED
        self._wake()  # it held back the granted ones behind it
        if self._available:
            reason.append(waiter.id)
            self._kick()

    def _lose(self, reason: str) -> None:
        """The server is lost: fail every waiter, forget what was to be sent, and have
        the heartbeat connect again. Permits held stay held until their calls end."""
        if not self._available:
            return
        self._available = False
        self._losses += 1
        self._lost_reason = reason
        self._reconnected = trio.Event()
        self._poll_now.set()
        self._releases.clear()
        self._timed_out.clear()
        self._cancelled.clear()
        for waiter in self._waiters.values():
            if waiter.stage in (_ARRIVED, _SENT):
                self._lane_of.pop(waiter.id, None)
                waiter.stage = _FAILED
                waiter.failure = self._unavailable()
                waiter.done.set()
        self._waiting.clear()
        self._wake()  # the granted ones their word came for: their calls go on

    def _unavailable(self) -> GateUnavailable:
        return GateUnavailable(f"gate {self.where}: Redis unreachable: {self._lost_reason}")


def _share(weight: float, max_sessions: int | None) -> str:
    return f"weight {weight:g} and " + ("no cap" if max_sessions is None else f"max_sessions {max_sessions}")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, trio.TooSlowError):
        return f"no answer within {OPERATION_TIMEOUT_S:g}s"
    return one_line(exc) or type(exc).__name__


# -- for `manor gate` -------------------------------------------------------------------


async def gate_status(url: str, name: str) -> GateStatus | None:
    """The shared gate ``name`` at ``url`` as the server has it; ``None`` if no process
    has used it (or the server lost it).

    Raises:
        SharedGateError: the server cannot be reached.
    """
    reply = await _one_transition(url, name, "status")
    if not reply:
        return None
    probe = RedisGate(url, name, size=1)
    probe._absorb(reply)
    procs, tenants = reply[2]
    holders = tuple(GateHolder(*row[:4], holding=int(row[4]), waiting=int(row[5])) for row in procs)
    used = sum(float(row[5]) for row in tenants)
    return GateStatus(
        redacted_url(url), name, probe.statistics(), float(reply[0][3]) / 1000, holders,
        tuple(
            GateTenant(
                row[0], float(row[1]), int(row[2]) or None, int(row[3]), int(row[4]), round(float(row[5]), 3),
                round(float(row[5]) / used, 4) if used > 0 else None,
            )
            for row in tenants
        ),
        float(reply[0][1]), int(reply[0][2]),
    )  # fmt: skip


async def resize_shared_gate(url: str, name: str, size: int) -> tuple[GateStatus, GateStatus] | None:
    """Set the size of the shared gate ``name`` at ``url``: every process using it sees
    it within a second. The gate before and after; ``None`` if no process has used it.

    Raises:
        SharedGateError: the server cannot be reached.
    """
    before = await gate_status(url, name)
    if before is None:
        return None
    await _one_transition(url, name, "resize", size)
    after = await gate_status(url, name)
    return None if after is None else (before, after)


async def reset_shared_gate(url: str, name: str) -> GateStatus | None:
    """Delete the shared gate ``name`` at ``url``, every key of it, so that the next
    process to use it makes it again with its own size, rate, burst, lease and claim
    (a gate keeps what the process that made it set, after every process has left).
    The gate as it was; ``None`` if no process has used it.

    Raises:
        SharedGateError: the server cannot be reached, or a process is on the gate or a
            permit is held (a process that died holds its permits until their leases
            expire).
    """
    before = await gate_status(url, name)
    if before is None:
        return None
    reply = await _one_transition(url, name, "reset")
    if reply and reply[0] == "busy":
        processes, permits = int(reply[1]), int(reply[2])
        raise SharedGateError(
            f"gate {redacted_url(url)} (gate {name}) is in use: {_count(processes, 'process', 'processes')} on it, "
            f"{_count(permits, 'permit', 'permits')} held; it can be reset only while no process uses it ('manor gate status' lists them)"
        )
    return before


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


async def claim_shares(url: str, name: str, tenants: Sequence[str]) -> None:
    """The ``tenants`` of the shared gate ``name`` at ``url`` claim their shares from
    now, as at their processes' joins (``manor.admission.claims``): processes that
    joined long before their first calls (the parts of ``manor fleet --processes``,
    which wait for each other), stamped in one transition before any of them starts,
    so that whichever part's first calls reach the server first leaves the others'
    shares to them.

    Raises:
        SharedGateError: the server cannot be reached.
    """
    await _one_transition(url, name, "claim", *tenants)


async def _one_transition(url: str, name: str, *args: object) -> Sequence[Any]:
    coredis = _coredis()
    client = coredis.Redis.from_url(url, decode_responses=True, retry_policy=coredis.retry.NoRetryPolicy(), connect_timeout=CONNECT_TIMEOUT_S)
    failure = None
    async with client:
        # Caught in here: the client's task group would wrap it in an exception group.
        try:
            with trio.fail_after(OPERATION_TIMEOUT_S):
                return await client.register_script(_SCRIPT)(keys=[_key_prefix(name)], args=[str(arg) for arg in args])
        except (coredis.exceptions.RedisError, OSError, trio.TooSlowError) as exc:
            failure = _describe(exc)
    raise SharedGateError(f"gate {redacted_url(url)} (gate {name}): cannot reach Redis: {failure}")
