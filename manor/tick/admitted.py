"""A tick's calls, each call's task born at its admission.

Spawned at once, every call of a tick would be a task parked at the gate until its
turn: a thousand calls, a thousand parked tasks, each passing through the scheduler
again when it is let through (bare trio's parent spawns a task only once a slot is
free). Here the tick judges every call when it is made — the judging layers above the
gate (the breaker: is the circuit open? the budget: is it spent?) in their ``before``
hooks, in ticket order, as ``Stack.split`` cuts them — and has each call it lets through
arrive at the gate without a task (``Gate.arrive``). A call's task is started when the
gate lets it through (or when it must wait in a task of its own, or time out), and
runs the rest: the gate's permit, the layers below, the backend, then the judging
layers' ``after`` hooks. What each layer sees, and when, is what it sees through the
whole stack: the judgement is made when the call is made, the outcome when it ends.

A call fired so (``FiredAtAdmission``) is followed as any call is, a ``Heard``, but
hears no events: its admission and its release are its permit's, read as its task
starts and ends (the platform's ``Opened``, said below, tells it nothing new). The
tick loop builds the record (``end``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import final

import msgspec
import trio

from ..admission.gate import Arrival, Gate, Permit
from ..calls import Admitted, Done, Event, Opened, Released, Request
from ..records import CallRecord
from ..clock import current_time
from ..errors import CallError
from ..layers import GateLayer, Split
from ..layers.stack import ignore
from .instruments import Instruments

__all__ = ["CALL_TASK", "CallNotes", "End", "FiredAtAdmission", "Heard", "fire_at_admission", "gate_of"]

#: The calls made, in the order they started, for a reader that takes them in bulk
#: (``TickLoop.call_notes``): each call's ``Heard``, which learns its admission (``at``)
#: and, once it has ended, its record (``record``) as the call goes on. One append a
#: call, nothing more: the reader works out queued, running and ended when it reads.
CallNotes = list["Heard"]

#: The name trio gives a call's task, said once: trio would work it out for every call.
CALL_TASK = "manor: a call"


class Heard(msgspec.Struct, eq=False):
    """A call as the tick loop follows it. As its listener (``heard``): when it got
    through, as it hears it — the gate's admission, or with no gate the platform's
    session (``at``; ``None`` until then) — and when the gate took its slot back
    (``released_at``), which is the call's end. It hears the layers' events only
    (``Stack.answer``): the backend answers by its fast path. The tick loop gives it the
    call's record when the call has ended (``record``; ``None`` until then), so that a
    reader of the notes (``CallNotes``) tells a call queued, running or ended by its
    ``Heard`` alone. An object a call, not a closure: a closure would need a cell and a
    dict of its own for every call.

    A msgspec ``Struct`` (compared and hashed by identity, ``eq=False``), not a class
    with ``__slots__`` and an ``__init__``: built in C, without a Python frame, for
    every call the tick makes (its fields are set afterwards as a slotted class's are;
    it is never encoded)."""

    request: Request
    instruments: Instruments
    at: float | None = None
    released_at: float | None = None
    record: CallRecord | None = None

    def heard(self, event: Event) -> None:
        if type(event) is Released:
            self.released_at = event.released_at  # type: ignore[union-attr]
        elif self.at is None:
            kind = type(event)
            if kind is Admitted:
                self.admitted(event.admitted_at)  # type: ignore[union-attr]
            elif kind is Opened:
                self.admitted(current_time())  # said as the session opens
            # Other events are the backend's: not the call's admission.

    def admitted(self, at: float) -> None:
        """The call got through at ``at``: noted, and the instruments told. (A call
        fired at admission does the same in its task, ``_admitted``, without this call:
        a frame fewer for every call; the two must say the same.)"""
        self.at = at
        if self.instruments.by_hook["call_admitted"]:
            self.instruments.call("call_admitted", self.request, at)


@final
class FiredAtAdmission(Heard, kw_only=True):
    """A call fired at admission (``fire_at_admission``), followed as any call is
    (its admission and release set from its permit, not heard), which holds what its
    task needs when it is born: when it was made (``queued_at``), its
    place in the tick (``index``), what its judging layers noted of it (``states``),
    what it shares with the tick's other calls (``firing``) and, while it waits in line
    without a task, its place at the gate (``arrival``)."""

    queued_at: float
    index: int
    firing: _Firing
    states: Sequence[object]
    arrival: Arrival = None  # type: ignore[assignment]  # (set before it is read: while it waits in line)

    def wake(self, permit: Permit | None) -> None:
        """The gate lets it through (``permit``), or says it must wait in a task of its
        own (``None``)."""
        self.firing.nursery.start_soon(_admitted, self, permit, name=CALL_TASK)


#: How a call that has ended reaches the tick loop (``TickLoop._ended``): its request,
#: when it was queued, its ``Heard``, its answer, its failure, whether the tick's
#: deadline cancelled it, its attempts, who is told its record (with its index), its
#: repairs, its index; the record is returned.
End = Callable[
    [Request, float, Heard, Done | None, CallError | None, bool, int, Callable[[int, CallRecord], None] | None, int, int], CallRecord
]


@final
class _Firing:
    """What every call of one ``fire_at_admission`` shares: the stack's parts, the
    gate, where ended calls go (``end``, with ``finished`` and ``repairs``), the calls'
    nursery, and the task that waits for the last call to end (``parent``, while it is
    parked)."""

    __slots__ = ("end", "finished", "gate", "layer", "nursery", "outstanding", "parent", "repairs", "split")

    def __init__(
        self,
        split: Split,
        layer: GateLayer,
        gate: Gate,
        end: End,
        finished: Callable[[int, CallRecord], None] | None,
        repairs: int,
        calls: int,
        nursery: trio.Nursery,
    ) -> None:
        self.split = split
        self.layer = layer
        self.gate = gate
        self.end = end
        self.finished = finished
        self.repairs = repairs
        self.outstanding = calls
        self.nursery = nursery
        self.parent: trio.lowlevel.Task | None = None

    def ended(self, call: FiredAtAdmission, done: Done | None, failure: CallError | None) -> None:
        """A call has ended: to ``end``; with the last, the parent is woken. (For a
        call refused before the gate; a call's task, ``_admitted``, does the same
        without this call: a frame fewer for every call; the two must say the same.)"""
        request = call.request
        # ``end``'s arguments spelled out here: a closure of the tick loop's in between
        # would be a call more for every call.
        self.end(request, call.queued_at, call, done, failure, False, request.attempt + 1, self.finished, self.repairs, call.index)
        self.outstanding -= 1
        if not self.outstanding and self.parent is not None:
            parent, self.parent = self.parent, None
            trio.lowlevel.reschedule(parent)


def gate_of(split: Split | None, gate: object) -> tuple[GateLayer, Gate] | None:
    """The gate layer and in-process gate a tick's calls through ``split`` can be fired
    at admission with: ``None`` if none (no split stack, or a gate whose admissions are
    awaited, a server's: its calls wait in tasks of their own, through the stack)."""
    if split is None or not isinstance(gate, Gate):
        return None
    layer = split.admitting
    if not isinstance(layer, GateLayer) or layer.gate is not gate:
        return None
    return layer, gate


async def fire_at_admission(
    requests: Sequence[tuple[int, Request]],
    split: Split,
    layer: GateLayer,
    gate: Gate,
    instruments: Instruments,
    notes: CallNotes | None,
    end: End,
    finished: Callable[[int, CallRecord], None] | None,
    repairs: int,
    task_status: trio.TaskStatus[None],
) -> None:
    """Make ``requests`` (``(index, request)``, ticketed, in ticket order): each judged
    now, its task started at its admission, each noted in ``notes`` if given (the calls
    in ticket order); each ended call goes to ``end``, which tells ``finished`` (a call
    of repair round ``repairs``: 0 for a tick's own calls). Reports
    started once every call is judged and in line at the gate, and returns once every call
    has ended.

    Cancelled, the calls still in line without a task leave the gate at the instant of
    the cancellation, as tasks parked there would: before a call let through and
    cancelled gives its slot back, which would admit them only to be cancelled.
    """
    if instruments.by_hook["call_started"]:
        for _, request in requests:
            instruments.call("call_started", request)
    parked: list[FiredAtAdmission] = []
    async with trio.open_nursery() as nursery:
        firing = _Firing(split, layer, gate, end, finished, repairs, len(requests), nursery)
        left: list[FiredAtAdmission] = []

        def abort(raise_cancel: object) -> trio.lowlevel.Abort:
            firing.parent = None
            left.extend(call for call in parked if gate.leave(call.arrival))
            return trio.lowlevel.Abort.SUCCEEDED

        timeout = layer.timeout
        arrive = gate.arrive
        # The instant the calls are made: each is queued, and arrives at the gate, then
        # (the clock is read once, not twice a call: on the virtual clock no time passes
        # between them, on the real one only this loop's).
        now = current_time()
        note = None if notes is None else notes.append
        # Judged at once where every judging layer lets every call made now through
        # alike (a closed breaker): the states each call's ``judge`` would give, shared.
        judged = split.judgement_now()
        try:
            for index, request in requests:
                states: Sequence[object] = [] if judged is None else judged
                call = FiredAtAdmission(request, instruments, queued_at=now, index=index, firing=firing, states=states)
                if note is not None:
                    note(call)
                if judged is None:
                    try:
                        split.judge(request, states)  # type: ignore[arg-type]
                    except CallError as exc:  # refused above the gate: its ticket stalls nobody
                        gate.withdraw(request.ticket)  # type: ignore[arg-type]
                        firing.ended(call, None, exc)
                        continue
                arrival = arrive(request.ticket, timeout=timeout, wake=call.wake, now=now)  # type: ignore[arg-type]
                if type(arrival) is Permit:
                    nursery.start_soon(_admitted, call, arrival, name=CALL_TASK)
                else:
                    call.arrival = arrival
                    parked.append(call)
            task_status.started()
            if firing.outstanding:
                firing.parent = trio.lowlevel.current_task()
                await trio.lowlevel.wait_task_rescheduled(abort)
        except BaseException as exc:
            # Cancelled (the run is), or failed: no call stays in line without a task,
            # and those that left are heard by their judging layers as a task cancelled
            # there would be.
            left.extend(call for call in parked if gate.leave(call.arrival))
            for call in left:
                split.ended(call.request, call.states, None, exc)
            raise


async def _admitted(call: FiredAtAdmission, permit: Permit | None) -> None:
    """A call's task, from its admission (``permit``; ``None``: it waits for it here) to
    its record."""
    firing = call.firing
    request = call.request
    done: Done | None = None
    failure: CallError | None = None
    try:
        if permit is None:
            permit = await firing.gate.admitted(call.arrival)
        # Its admission and its release read from its permit, not heard as events: the
        # gate layer's ``call`` would say them to a listener, three calls a call more.
        # (``Heard.admitted``, spelled out: a call fewer for every call.)
        call.at = at = permit.admitted_at
        if call.instruments.by_hook["call_admitted"]:
            call.instruments.call("call_admitted", request, at)
        done = await firing.layer.through(permit, request, ignore, firing.split.below, True)  # (its task's only call)
    except CallError as exc:
        failure = exc
    except BaseException as exc:
        firing.split.ended(request, call.states, None, exc)
        raise
    split = firing.split
    only_after = split.only_after
    if permit is not None:  # (``None``: it timed out at the gate, never let through)
        call.released_at = ended_at = permit.released_at
    else:
        ended_at = current_time()
    if only_after is not None:  # (``Split.ended``, spelled out for the usual stack: a call fewer)
        only_after(request, call.states[0], done, failure, ended_at)  # type: ignore[arg-type]
    else:
        split.ended(request, call.states, done, failure)
    # (``_Firing.ended``, spelled out: a call fewer for every call.)
    firing.end(request, call.queued_at, call, done, failure, False, request.attempt + 1, firing.finished, firing.repairs, call.index)
    firing.outstanding -= 1
    if not firing.outstanding and firing.parent is not None:
        parent, firing.parent = firing.parent, None
        trio.lowlevel.reschedule(parent)
