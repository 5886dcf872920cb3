"""The tick loop: plan a tick, fire its calls through a policy, apply the outcomes."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Literal, final

import attrs
import msgspec
import trio

from ..admission.adaptive import LEARNED_KEY, Adjustment, apply_to_gate
from ..admission.gate import SharedGate
from ..admission.limiter import SessionLimiter
from ..admission.tickets import Tickets
from ..answers import answer_problem, repair_prompt
from ..calls import Done, Request
from ..clock import current_time, read_clock_directly
from ..config.schema import GateValues
from ..errors import (
    CallError,
    ContentError,
    InvalidOutput,
    RefusedBy,
    SessionLimitError,
    SharedGateError,
    error_line,
)
from ..layers import Stack
from ..records import CallRecord, TickRecord
from ..worlds import World
from ..worlds.world import undeclared_caller
from ..worlds.failures import world_code
from .admitted import CALL_TASK, CallNotes, Heard, fire_at_admission, gate_of
from .gc_pause import full_collections_deferred
from .instruments import Instrument, Instruments
from .ordered_start import start_now
from .ordering import longest_first
from .policies import Policy
from .prediction import Predictor

__all__ = ["GATE_PAUSES_S", "GATE_WAIT_S", "CallNotes", "TickLoop"]

Order = Literal["fifo", "longest-first"]

#: How long a run waits for a lost shared gate, after a tick every call of which found
#: none, before it stops, unless told otherwise: ``gate.unavailable_wait_s``'s default.
GATE_WAIT_S: float = GateValues().unavailable_wait_s
#: While it waits, the first and the longest pause between looks at the gate.
GATE_PAUSES_S = (0.25, 4.0)


def _in_ticket_order(requests: Iterable[tuple[int, Request]]) -> list[tuple[int, Request]]:
    """``(index, request)`` pairs in ticket order, those without a ticket first, in the
    order given. A decorated sort: a key function would be a call from the sort into
    Python for every request. (The ticket and the position decide every comparison.)

    Pairs already in ticket order (every one ticketed, the tickets rising: a tick's own
    calls, ticketed in planning order) are returned as given, after one pass that finds
    so: the usual tick's calls are not decorated, sorted and undecorated."""
    pairs = list(requests)
    last = -1
    for _, request in pairs:
        ticket = request.ticket
        if ticket is None or ticket <= last:
            break
        last = ticket
    else:
        return pairs
    decorated = [(-1 if request.ticket is None else request.ticket, position, index, request) for position, (index, request) in enumerate(pairs)]
    decorated.sort()
    return [(index, request) for _, _, index, request in decorated]


def _plain(caller: str) -> str:
    """A caller kind as a plain string, for its record (a world may plan with ``StrEnum``
    members, as the manor world does)."""
    return caller if type(caller) is str else str(caller)


@final
# No setattr hooks: a hook (the converter of ``instruments``, run again on assignment)
# gives the class a ``__setattr__`` that runs for every attribute set, three a tick;
# ``instruments`` is converted when the loop is built (later, ``add_instrument``).
@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)
class TickLoop:
    """Runs a world tick by tick: plans each tick's calls, fires them through the gate
    by its policy, applies their records to the world and tells its instruments. An
    engine builds one (``manor.run.engine.build_engine``)::

        engine = build_engine(config, scene, backend=MockProvider(lambda request: "Quite."))
        record = trio.run(engine.loop.step, clock=trio.testing.MockClock(autojump_threshold=0))
        record.tick, len(record.calls), record.world_hash  # one tick: 1, 14, "..."

    Args:
        world: the state ticks change.
        gate: the one gate every caller shares.
        limiter: the platform's session limiter (for its statistics).
        gated: the provider stack with the gate layer (pipeline, batch).
        direct: the same stack without the gate (the legacy policy).
        policy: how a tick's calls are fired; may be switched between ticks.
        order: the order tickets are handed out in.
        predictor: predicted latencies, for ``longest-first``.
        tick_deadline: seconds after a tick's start when its outstanding calls are
            cancelled (degraded as ``cancelled``); 0 = none.
        price_per_1k_tokens: what a call's tokens cost, for its record.
        repair_attempts: times an answer not of its request's shape is asked again
            (``manor.answers``) before it degrades as ``invalid_output``.
        tickets: where the gate tickets come from: ``None``, straight from ``gate``;
            the worlds of a fleet share a gate and are dealt theirs by its
            ``TicketOffice``.
        gate_wait_s: how long to wait for a lost gate between ticks (``run``,
            ``wait_for_gate``): ``gate.unavailable_wait_s``.
    """

    world: World
    gate: SharedGate
    limiter: SessionLimiter
    gated: Stack
    direct: Stack
    policy: Policy
    predictor: Predictor
    order: Order = "longest-first"
    tick_deadline: float = 0.0
    price_per_1k_tokens: float = 0.0
    repair_attempts: int = 0
    tickets: Tickets | None = None
    gate_wait_s: float = GATE_WAIT_S
    instruments: Instruments = attrs.field(factory=Instruments, converter=lambda i: i if isinstance(i, Instruments) else Instruments(i))
    #: The world's players' caller kinds (``Caller.player``), which barriers hold.
    players: frozenset[str] = attrs.field(
        init=False, default=attrs.Factory(lambda self: frozenset(k for k, c in self.world.callers.items() if c.player), takes_self=True)
    )
    #: Where a reader that takes the calls in bulk finds them (the dashboard, at its
    #: frames), rather than by a hook per call: when a list, every call appends its
    #: ``Heard`` to it as it starts, which learns its admission and its record as the
    #: call goes on (``CallNotes``); the reader empties it in place. ``None``: nobody
    #: reads them.
    call_notes: CallNotes | None = attrs.field(default=None, init=False)
    _deadline: float = attrs.field(default=math.inf, init=False)
    _started: bool = attrs.field(default=False, init=False)
    _in_tick: bool = attrs.field(default=False, init=False)
    _stopping: bool = attrs.field(default=False, init=False)

    def add_instrument(self, instrument: Instrument) -> None:
        self.instruments.add(instrument)

    # -- live changes -----------------------------------------------------------------
    # Made through these methods, a change reaches the instruments, so a save file
    # records it and a replay makes it again at the same point.

    def resize_gate(self, size: int) -> None:
        """Change the gate's size now: growing admits waiters at once, shrinking takes
        effect as calls finish."""
        self.gate.size = size
        self.instruments.call("setting_changed", "gate.size", size, self._in_tick)

    def adjust_gate(self, adjustment: Adjustment) -> None:
        """Make a learned gate's change now (``manor.admission.adaptive``); the
        instruments hear it as a change of ``LEARNED_KEY``."""
        apply_to_gate(self.gate, adjustment)
        self.gate_adjusted(adjustment)

    def gate_adjusted(self, adjustment: Adjustment) -> None:
        """The gate this loop shares was just changed by the learning of all who share
        it (a fleet's worlds): the instruments hear it as a change of ``LEARNED_KEY``."""
        self.instruments.call("setting_changed", LEARNED_KEY, adjustment, self._in_tick)

    def switch_policy(self, policy: Policy) -> None:
        """Use ``policy`` from the next tick on (a tick keeps the policy it started with)."""
        self.policy = policy
        self.instruments.call("setting_changed", "run.policy", policy.name, self._in_tick)
        size = getattr(policy, "size", None)
        if size is not None:
            self.instruments.call("setting_changed", "run.batch_size", size, self._in_tick)

    # -- a tick -----------------------------------------------------------------------

    def ticket_order(self, requests: Sequence[Request], latencies: Sequence[float] | None = None) -> list[int]:
        """Indices of ``requests`` in the order their tickets are handed out: planning
        order (fifo), or longest predicted call first, planned over the gate's slots
        (``manor.tick.ordering.longest_first``). ``latencies``: the requests' predicted
        latencies, if already asked."""
        if self.order == "longest-first":
            if latencies is None:
                latencies = self.predictor.latencies(requests)
            return longest_first(latencies, self.gate.size)
        return list(range(len(requests)))

    async def with_tickets(self, requests: Sequence[Request]) -> list[Request]:
        """Issue gate tickets to ``requests`` (in ticket order), each costing its
        predicted latency at the gate (what its lane is charged, when the gate is
        shared); returned in their order. Straight from the gate, this does not yield."""
        latencies = self.predictor.latencies(requests)
        # In planning order (fifo) the n-th ticket goes to the n-th request: no order
        # to follow, and the latencies are the costs as they are (this runs every tick).
        order = None if self.order != "longest-first" else self.ticket_order(requests, latencies)
        costs = latencies if order is None else [latencies[index] for index in order]
        tickets = self.gate.issue(len(requests), costs=costs) if self.tickets is None else await self.tickets.issue(len(requests), costs)
        replace = msgspec.structs.replace
        if order is None:
            return [replace(request, ticket=ticket) for request, ticket in zip(requests, tickets, strict=True)]
        stamped = list(requests)
        for ticket, index in zip(tickets, order, strict=True):
            stamped[index] = replace(requests[index], ticket=ticket)
        return stamped

    async def step(self) -> TickRecord:
        """Run one tick to its end and apply it."""
        if not self._started:
            self._started = True
            self.instruments.call("run_started", self)
        read_clock_directly()  # for this tick's calls, in the tasks this one starts
        with world_code(self.world, "plan", self.world.tick + 1):
            requests = self.world.plan()
        problem = undeclared_caller(self.world, requests)
        if problem is not None:
            # Its calls would be counted, styled and given fallbacks by kinds nobody declared.
            raise ContentError(problem)
        tick = requests[0].tick if requests else self.world.tick + 1
        started = trio.current_time()
        self._deadline = started + self.tick_deadline if self.tick_deadline else math.inf
        self._in_tick = True
        try:
            self.instruments.call("tick_started", tick, requests)
            # The tick's calls are many live objects that die with it: no full scan of
            # them by the cyclic collector while they are out (see manor/tick/gc_pause.py).
            with full_collections_deferred():
                records = await self.policy.run(self, requests)
                if self.repair_attempts:
                    await self._repair(requests, records)
        finally:
            self._in_tick = False
        finished = trio.current_time()
        self.predictor.observe(records)
        with world_code(self.world, "apply", tick):
            story = self.world.apply(records)
        record = TickRecord(tick=tick, started_at=started, finished_at=finished, calls=tuple(records), world_hash=self.world.hash)
        self.instruments.call("tick_finished", record, story)
        return record

    async def _repair(self, requests: Sequence[Request], records: list[CallRecord]) -> None:
        """Ask again, with the problem quoted, every call whose answer was not of its
        request's shape, up to ``repair_attempts`` times; each repair's record replaces
        the one it repaired (which a save keeps as superseded).

        The repairs of a round are fired together once the tick's calls have all ended,
        with tickets in planning order, as a group of the tick is: a repair made the
        moment its answer came back would take its ticket in whatever order trio ran the
        calls that ended at that instant, and the run would not be the same every time.
        """
        stack = self.gated if self.policy.uses_gate else self.direct
        for repair in range(1, self.repair_attempts + 1):
            invalid = [i for i, record in enumerate(records) if record.reason == "invalid_output"]
            if not invalid or trio.current_time() >= self._deadline:
                return
            asks = [
                msgspec.structs.replace(
                    requests[i],
                    prompt=repair_prompt(requests[i].prompt, records[i].text, records[i].error),
                    attempt=records[i].attempts,
                )
                for i in invalid
            ]
            if stack is self.gated:
                asks = await self.with_tickets(asks)
            results: list[CallRecord | None] = [None] * len(asks)
            await self.call_all(enumerate(asks), stack, results, repairs=repair)
            for i, record in zip(invalid, results, strict=True):
                assert record is not None
                records[i] = record

    async def run(self, ticks: int, interval: float = 0.0) -> None:
        """Run ``ticks`` ticks, or fewer if the game ends first (``World.over``): free-
        running, or one every ``interval`` seconds. The run ends when its last tick
        does: the interval spaces ticks, it does not trail them.

        A tick every call of which found no gate (a shared gate whose server is lost)
        is followed by a wait for the gate, up to ``gate_wait_s``.

        Raises:
            ValueError: ``interval`` is negative or not finite (it would never end).
            SharedGateError: the gate was lost for longer than ``gate_wait_s``.
        """
        if not 0 <= interval < math.inf:
            raise ValueError(f"tick interval must be a finite number of seconds >= 0, not {interval}")
        try:
            for tick in range(ticks):
                if self.world.over is not None or self._stopping:
                    break
                started = trio.current_time()
                record = await self.step()
                if tick < ticks - 1 and self.world.over is None and not self._stopping:
                    await self.wait_for_lost_gate(record)
                    if interval:
                        await trio.sleep_until(started + interval)
        finally:
            self.instruments.call("run_finished", self)

    def stop_after_tick(self) -> None:
        """End ``run`` once the tick under way is applied (a refusal no retry cures)."""
        self._stopping = True

    @staticmethod
    def gate_lost(record: TickRecord) -> bool:
        """Whether every call of the tick ``record`` found no gate: its server is lost
        (``wait_for_lost_gate`` waits for it)."""
        return bool(record.calls) and all(call.reason == "gate_unavailable" for call in record.calls)

    async def wait_for_lost_gate(self, record: TickRecord) -> None:
        """If every call of the tick ``record`` found no gate (its server is lost): rather
        than burn the next ticks as empty ones, wait until the gate is back, looking at
        it after pauses that double, for ``gate_wait_s`` at most; instruments hear
        ``gate_lost`` as the wait begins. A run whose gate is never lost never waits,
        and a replay's gate is never lost: no record changes. ``run`` calls it between
        ticks, and so does a dashboard's driver.

        Raises:
            SharedGateError: the gate is still lost after ``gate_wait_s``.
        """
        if not self.gate_lost(record):
            return
        message = record.calls[0].error
        self.instruments.call("gate_lost", message, self.gate_wait_s)
        deadline = trio.current_time() + self.gate_wait_s
        pause, longest = GATE_PAUSES_S
        while not self.gate.available:
            now = trio.current_time()
            if now >= deadline:
                raise SharedGateError(f"{message}; no gate for {self.gate_wait_s:g}s: stopped after tick {record.tick}")
            await trio.sleep(min(pause, deadline - now))
            pause = min(longest, pause * 2)

    # -- a call -----------------------------------------------------------------------

    async def call(
        self,
        request: Request,
        stack: Stack,
        *,
        attempts: int = 1,
    ) -> CallRecord:
        """Make one call through ``stack``; never raises for the call's own failure.

        A failure becomes a degraded record with its reason; the tick deadline cancels
        the call as ``cancelled``. The call's ticket is withdrawn if it never reached
        the gate, so it cannot stall the tickets behind it.
        """
        self.instruments.call("call_started", request)
        return await self._make(request, stack, attempts)

    async def _make(
        self,
        request: Request,
        stack: Stack,
        attempts: int,
        finished: Callable[[int, CallRecord], None] | None = None,
        repairs: int = 0,
        index: int = 0,
    ) -> CallRecord:
        """``call`` once the instruments have heard it start; ``finished``, if given,
        gets ``index`` and the record too (``call_all`` spawns this directly: a wrapper
        coroutine per call would be one more frame every resumption of the call passes
        through, and a partial per call costs more than the argument).
        ``repairs``: how many of the ``attempts`` were repairs (``_repair``).

        One of a tick's two ways to make a call, both ending in ``_ended``: this one is
        a task from the call's start, awaiting the whole stack; the other
        (``manor.tick.admitted``) judges the call at once and starts its task only at
        its admission. They stay two because this one is what the other cannot do: a
        tick deadline's cancel scope around the whole call, the wait at the gate
        included; calls started one by one because their arrival order matters; a
        stack without a gate (the legacy policy), or whose gate is awaited (a
        server's), or with a wrapping layer above it. Merged, the usual calls would
        pay for these, and no frame of theirs would go.

        An answer to a request with a shape is validated here: one that does not fit
        degrades as ``invalid_output``, keeping its text and tokens.
        """
        queued_at = current_time()
        done: Done | None = None
        failure: CallError | None = None
        admission = Heard(request, self.instruments)
        if self.call_notes is not None:
            self.call_notes.append(admission)
        listener = admission.heard

        cancelled = False
        try:
            if self._deadline == math.inf:
                # No cancel scope when the tick has no deadline: one per call is measurable.
                try:
                    done = await stack.answer(request, listener)
                except CallError as exc:
                    failure = exc
            else:
                with trio.move_on_at(self._deadline) as scope:
                    try:
                        done = await stack.answer(request, listener)
                    except CallError as exc:
                        failure = exc
                cancelled = scope.cancelled_caught
        finally:
            if request.ticket is not None:
                self.gate.withdraw(request.ticket)
        return self._ended(request, queued_at, admission, done, failure, cancelled, attempts, finished, repairs, index)

    def _ended(
        self,
        request: Request,
        queued_at: float,
        admission: Heard,
        done: Done | None,
        failure: CallError | None,
        cancelled: bool,
        attempts: int,
        finished: Callable[[int, CallRecord], None] | None,
        repairs: int,
        index: int,
    ) -> CallRecord:
        """A call has ended (``done``, or ``failure``; ``cancelled`` at the tick
        deadline): its record, which the instruments hear, and ``finished``, if given,
        gets with ``index``."""
        instruments = self.instruments
        hooked = instruments.by_hook
        # A call through the gate ended when the gate took its slot back: stamped later
        # (on the real clock), it would overlap the call that slot admitted next.
        finished_at = current_time() if admission.released_at is None else admission.released_at
        admitted_at = admission.at
        if done is not None and failure is None and not cancelled and request.shape is not None:
            problem = answer_problem(done.text, request.shape)
            if problem is not None:
                failure = InvalidOutput(problem)
        if done is not None and failure is None and not cancelled:
            # The ok path: nothing of the degraded record's message is built.
            usage = done.usage
            input_tokens = usage.input_tokens
            output_tokens = usage.output_tokens
            caller = request.caller
            record = CallRecord(
                tick=request.tick,
                ticket=request.ticket,
                caller=caller if type(caller) is str else str(caller),  # _plain, without its call
                agent=request.agent,
                queued_at=queued_at,
                admitted_at=admitted_at,
                finished_at=finished_at,
                outcome="ok",
                reason=None,
                text=done.text,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cost=(input_tokens + output_tokens) / 1000 * self.price_per_1k_tokens if done.cost is None else done.cost,
                attempts=attempts,
                repairs=repairs,
            )
        else:
            record = self._degraded(request, queued_at, admitted_at, finished_at, attempts, failure, done if failure else None, repairs)
        admission.record = record  # for a reader of the notes: this call has ended
        if hooked["call_finished"]:
            instruments.call("call_finished", record)
        if finished is not None:
            finished(index, record)
        return record

    def _degraded(
        self,
        request: Request,
        queued_at: float,
        admitted_at: float | None,
        finished_at: float,
        attempts: int,
        failure: CallError | None,
        answer: Done | None = None,
        repairs: int = 0,
    ) -> CallRecord:
        """The record of a call that failed with ``failure``, or (``None``) was
        cancelled at the tick deadline: its reason and its one-line message. An
        ``answer`` that came back but failed (``invalid_output``) keeps its text and
        tokens: they were spent, and a repair quotes the text."""
        refused_by: RefusedBy | None = None
        if failure is None:
            reason, error = "cancelled", f"cancelled at the tick deadline ({self.tick_deadline:g}s)"
        else:
            reason, error = failure.reason, error_line(failure)
            if isinstance(failure, SessionLimitError):
                refused_by = failure.refused_by
        return CallRecord(
            tick=request.tick,
            ticket=request.ticket,
            caller=_plain(request.caller),
            agent=request.agent,
            queued_at=queued_at,
            admitted_at=admitted_at,
            finished_at=finished_at,
            outcome="degraded",
            reason=reason,
            text=answer.text if answer is not None else "",
            input_tokens=answer.usage.input_tokens if answer is not None else 0,
            output_tokens=answer.usage.output_tokens if answer is not None else 0,
            cost=0.0 if answer is None else answer.usage.total_tokens / 1000 * self.price_per_1k_tokens if answer.cost is None else answer.cost,
            attempts=attempts,
            error=error,
            refused_by=refused_by,
            repairs=repairs,
        )

    async def call_all(
        self,
        requests: Iterable[tuple[int, Request]],
        stack: Stack,
        results: list[CallRecord | None],
        *,
        on_finished: Callable[[int], None] | None = None,
        repairs: int = 0,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Fire every ``(index, request)`` at once; each record lands at ``results[index]``,
        and then ``on_finished(index)`` is called, if given. ``repairs``: the repair
        round these calls are (``_repair``), 0 for a tick's own calls.

        The instruments hear the calls start in ticket order (calls without a ticket in
        the order given). The gate admits by ticket, whatever order the calls reach it
        in. When arrival order could change an outcome anyway (``_arrival_order_matters``)
        the calls are started one after another, each running until it first blocks
        before the next starts, so the layers see them in ticket order, not in the order
        trio happens to run new tasks. Otherwise they are spawned together, which costs
        less: spawned together, they all arrive before any of them can finish, so they
        all find the layers in the same state. Cheaper still, and the usual case: when
        the stack splits at an in-process gate (``Stack.split``) and the tick has no
        deadline, each call is judged now and its task started only when the gate lets
        it through (``manor.tick.admitted``). No virtual time passes before it reports
        started, once every call has been started (or is in line at the gate).
        """

        in_order = _in_ticket_order(requests)

        def heard_of(index: int, record: CallRecord) -> None:
            results[index] = record
            on_finished(index)  # type: ignore[misc]

        # Without ``on_finished``, a record lands at its index with no frame of ours.
        finished: Callable[[int, CallRecord], None] = results.__setitem__ if on_finished is None else heard_of

        # Without the gate (the legacy policy's repairs) who the platform refuses is
        # decided by arrival: always one by one then.
        one_by_one = stack is self.direct or self._arrival_order_matters(stack)
        at_admission = None if one_by_one or self._deadline != math.inf else gate_of(stack.split, self.gate)
        if at_admission is not None and in_order and in_order[0][1].ticket is not None:
            layer, gate = at_admission
            await fire_at_admission(
                in_order, stack.split, layer, gate, self.instruments, self.call_notes, self._ended, finished, repairs, task_status  # type: ignore[arg-type]
            )
            return
        make = self._make
        heard = self.instruments.by_hook["call_started"]
        async with trio.open_nursery() as nursery:
            for index, request in in_order:
                if heard:
                    self.instruments.call("call_started", request)
                if one_by_one:
                    await start_now(nursery, functools.partial(make, request, stack, request.attempt + 1, finished, repairs, index))
                else:
                    nursery.start_soon(make, request, stack, request.attempt + 1, finished, repairs, index, name=CALL_TASK)
            task_status.started()

    def _arrival_order_matters(self, stack: Stack) -> bool:
        """Whether calls fired together must arrive in ticket order: a layer says so
        (a breaker choosing its half-open trial), or the gate lets more calls through
        than the platform has sessions, so arrival order decides whom it turns away."""
        overrun = self.limiter.limit and self.gate.size > self.limiter.limit
        return bool(overrun) or stack.arrival_order_matters()

    @property
    def deadline(self) -> float:
        """The current tick's deadline (``inf`` when there is none)."""
        return self._deadline
