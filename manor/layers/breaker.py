"""The circuit breaker: stop calling a backend that keeps failing."""

from __future__ import annotations

import enum
from typing import final

import attrs
import trio

from ..calls import Done, Request
from ..clock import current_time
from ..errors import CallTimeout, CircuitOpen, ProviderError
from .stack import JUDGE_EACH, Observer

__all__ = ["BreakerLayer", "BreakerState"]


class BreakerState(enum.StrEnum):
    """Where a ``BreakerLayer``'s circuit stands: ``closed`` (calls go through),
    ``open`` (they fail at once with ``CircuitOpen``) or ``half_open`` (one trial call)."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


# The states as plain names: an enum member looked up on its class costs a descriptor
# call, and the breaker looks at its state on every call.
_CLOSED = BreakerState.CLOSED
_OPEN = BreakerState.OPEN
_HALF_OPEN = BreakerState.HALF_OPEN


@final
@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)  # no hook on the hot state
class BreakerLayer(Observer):
    """Opens after ``failures`` consecutive failures; after ``cooldown`` seconds lets one
    trial call through (half-open): its success closes the circuit, its failure opens it
    again. While open, calls fail at once with ``CircuitOpen``.

    Only the backend's failures count (``ProviderError``, ``CallTimeout``). Flow control
    (gate timeouts, platform rejections) and cancellation say nothing about its health.

    Calls that end at the same instant are counted together, in ticket order, before
    the next call is let through: which of them trio happens to resume first must not
    decide whether the circuit opens (see docs/internals.md, "Determinism").

    Outcomes are held until the circuit is next looked at (a call judged, ``state``),
    then counted instant by instant, each instant's in ticket order: the same counts,
    in the same order, as counting each instant's as the next began, since nothing
    reads the circuit in between without counting first (a tick's calls ending one by
    one are counted once, when the next tick judges its calls).
    """

    priority = 30

    failures: int = attrs.field(validator=attrs.validators.ge(1))
    cooldown: float = attrs.field(validator=attrs.validators.ge(0))
    _state: BreakerState = attrs.field(default=BreakerState.CLOSED, init=False)
    _consecutive: int = attrs.field(default=0, init=False)
    _opened_at: float = attrs.field(default=0.0, init=False)
    _trial_running: bool = attrs.field(default=False, init=False)
    _opened_count: int = attrs.field(default=0, init=False)
    # Outcomes not yet counted, as they came: (instant, request, outcome, trial); the
    # last one's instant, and whether two came at one instant (to be put in ticket order)
    # or one came with an instant before the last's (put in time order).
    _pending: list[tuple[float, Request, bool | None, bool]] = attrs.field(factory=list, init=False)
    _pending_at: float = attrs.field(default=0.0, init=False)
    _tied: bool = attrs.field(default=False, init=False)
    # Whether a held outcome is a failure or a trial's: only then can their order change
    # what they count (successes and silences alike count the same in any order).
    _order_counts: bool = attrs.field(default=False, init=False)

    @property
    def state(self) -> BreakerState:
        self._settle()
        return self._state

    @property
    def times_opened(self) -> int:
        self._settle()
        return self._opened_count

    def before(self, request: Request) -> bool:
        """Let the call through (True when it is the half-open trial) or refuse it."""
        if self._pending:
            self._settle()
        if self._state is _CLOSED:
            return False
        return self._admit(request)

    def judgement_now(self) -> object:
        """A closed circuit lets every call made now through, no trial among them
        (``before``'s ``False``), and ``before`` then changes nothing; an open or
        half-open one judges each (the first arrival after the cooldown is the trial)."""
        if self._pending:
            self._settle()
        return False if self._state is _CLOSED else JUDGE_EACH

    def after(self, request: Request, state: object, done: Done | None, error: BaseException | None) -> None:
        """Hold the outcome, at the instant read now, until the circuit is next looked at."""
        self.after_at(request, state, done, error, current_time())

    def after_at(self, request: Request, state: object, done: Done | None, error: BaseException | None, at: float) -> None:
        """Hold the outcome of a call that ended at ``at`` until the circuit is next looked
        at (``_settle``). A call fired at admission is told here the instant its permit
        was given back, which the gate layer read as the call ended: on the virtual clock
        the instant ``after`` would read, on the real one the same up to the microseconds
        between the two readings."""
        # True success, False failure, None says nothing (flow control, cancellation).
        outcome = True if error is None else False if isinstance(error, ProviderError | CallTimeout) else None
        pending = self._pending
        if pending and at <= self._pending_at:  # (earlier: told an instant out of turn; put in order too)
            self._tied = True
        self._pending_at = at
        if outcome is False or state:
            self._order_counts = True
        pending.append((at, request, outcome, state))  # type: ignore[arg-type]

    def arrival_order_matters(self) -> bool:
        """Only a closed circuit treats every arrival alike: an open one lets the first
        arrival after the cooldown through as its trial and turns the others away."""
        return self.state is not _CLOSED

    def _admit(self, request: Request) -> bool:
        """Let a call through or raise ``CircuitOpen``; True when it is the trial call."""
        self._settle()
        if self._state is _OPEN:
            if trio.current_time() < self._opened_at + self.cooldown:
                raise CircuitOpen(f"circuit open after {self._consecutive} failures")
            self._state = _HALF_OPEN
        if self._state is _HALF_OPEN:
            if self._trial_running:
                raise CircuitOpen("circuit half-open, a trial call is running")
            self._trial_running = True
            return True
        return False

    def _settle(self) -> None:
        """Count the held outcomes, instant by instant, each instant's in ticket order.
        (Each is counted in this loop, not by a method of its own: that would be a call
        more for every call.)"""
        pending = self._pending
        if not pending:
            return
        # Held as they came, in time: the usual case on the real clock, one an instant,
        # needs no sort; nor, on a virtual clock's shared instants, a tick's successes.
        if self._tied:
            if self._order_counts:
                pending.sort(key=_held_order)
            self._tied = False
        self._order_counts = False
        for at, _, outcome, trial in pending:
            if trial:
                self._trial_running = False
            if outcome is True:
                # Only the trial closes an open circuit: a call let through before it
                # opened and answering late says nothing about the backend since.
                if trial or self._state is _CLOSED:
                    self._consecutive = 0
                    self._state = _CLOSED
            elif outcome is False:
                self._consecutive += 1
                if trial or self._consecutive >= self.failures:
                    if self._state is not _OPEN:
                        self._opened_count += 1
                    self._state = _OPEN
                    self._opened_at = at
        pending.clear()


def _held_order(held: tuple[float, Request, bool | None, bool]) -> tuple[object, ...]:
    """An outcome's instant, then its call's place in ticket order."""
    request = held[1]
    return (held[0], request.tick, request.ticket is None, request.ticket or 0, request.caller, request.agent, request.attempt)
