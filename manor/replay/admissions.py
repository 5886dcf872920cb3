"""Replaying a run whose gate was shared: each call admitted when the shared gate
admitted it.

A fleet's worlds share one gate (``manor fleet``), and processes share one through Redis
(``gate.url``). When one world's save is replayed on its own, the other worlds' calls
are not there: replayed through a gate of its own, the world would be let through
sooner, and a call that timed out waiting behind the other worlds would now be answered
— another story, and a replay that cannot verify. So would a call that found no gate
because its Redis was down (``gate_unavailable``).

So such a replay takes the shared gate's decisions from the recording:
``RecordedAdmissions`` sits just above the world's own gate and holds each call until
the moment the recording says the shared gate let it through, then passes it on; a
call that gave up at the shared gate, or found no gate, does so again when it did, with
what it said. The world's own gate still stands below, sized as recorded, and admits
every call at once — if the recording is one a gate could have made for this world (no
more of its calls in flight than the gate's size, in its own ticket order). A call it
holds back is admitted later than recorded, which ``RecordingCheck`` reports.

What a verifying replay of a fleet world therefore checks: the world's own rules — its
plans, the layers above and below the gate, the recorded answers — give the recorded
world hash after every tick, and the recorded admissions are ones its gate could make,
call by call, to the recorded time (on the virtual clock: times read off the real clock
are not exact to replay). What it cannot check is the shared gate's choice
among the worlds (that needs all of them): ``manor fleet`` run again does, since the
same worlds and seeds give the same records.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import final

import trio

from ..calls import Done, Request
from ..errors import CallError, GateTimeout, GateUnavailable
from ..layers.stack import Inner, Layer, Listener
from ..records import CallRecord
from ..saves.format import TickFrame
from ..tick.instruments import Instrument

__all__ = ["RecordedAdmissions"]

#: A call of a tick, as the recording and the replay both name it: (tick, caller kind, agent).
_Key = tuple[int, str, str]

#: How a call never let through by the shared gate ended there, by its recorded reason.
_REFUSALS: dict[str, type[CallError]] = {"gate_timeout": GateTimeout, "gate_unavailable": GateUnavailable}


@final
class RecordedAdmissions(Layer, Instrument):
    """Holds each call until its recorded admission by the shared gate; a call that gave
    up at the shared gate (``gate_timeout``) or found none (``gate_unavailable``) does so
    again at its recorded time.

    It is also an instrument of the replaying loop: calls start in ticket order
    (``call_started``), so two calls of one agent in one tick (two scene beats) are
    matched to their recordings in their order, whichever trio runs first.

    Args:
        ticks: the recorded ticks.
    """

    #: Just above the gate (50), below the breaker (30): what the world decides before
    #: the gate, it decides again.
    priority = 45

    def __init__(self, ticks: Iterable[TickFrame]) -> None:
        self._recorded: dict[_Key, list[CallRecord]] = {}
        # The recorded call each replayed call (by its ticket) was matched to.
        self._by_ticket: dict[int, CallRecord] = {}
        for frame in ticks:
            for call in sorted(frame.record.calls, key=lambda call: -1 if call.ticket is None else call.ticket):
                self._recorded.setdefault((call.tick, call.caller, call.agent), []).append(call)

    def call_started(self, request: Request) -> None:
        found = self._recorded.get((request.tick, request.caller, request.agent))
        if found and request.ticket is not None:
            self._by_ticket[request.ticket] = found.pop(0)

    async def call(self, request: Request, listener: Listener, inner: Inner) -> Done:
        recorded = None if request.ticket is None else self._by_ticket.pop(request.ticket, None)
        if recorded is None:
            # Not in the recording: the world has gone another way, which the world
            # hash shows. Its own gate decides.
            return await inner(request, listener)
        if recorded.admitted_at is not None:
            await trio.sleep_until(recorded.admitted_at)
        else:
            # It waited at the shared gate until it gave up there, or found no gate, or
            # its tick's deadline cancelled it (the replay's deadline does so again).
            await trio.sleep_until(recorded.finished_at)
            refusal = _REFUSALS.get(recorded.reason or "")
            if refusal is not None:
                raise refusal(recorded.error or f"{recorded.reason} at the shared gate")
        return await inner(request, listener)
