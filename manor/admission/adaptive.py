"""A gate whose size is learned from what the platform answers (``gate.size = "auto"``).

When nobody says how many sessions the platform allows, the gate finds out, as TCP's
congestion window and Netflix's concurrency-limits do (AIMD):

- **Shrink on a refusal.** A call the *server* refused (``SessionLimitError`` refused by
  the server: a 429, a 529, a CLI's rate-limit message) halves the size, and never
  leaves it above what the platform just bore: ``min(size // 2, in flight - 1)``, at
  least ``gate.min``. Only a call let through since the last shrink shrinks it again:
  the calls sent before it could not know.
- **Grow on success at full use.** When as many calls as the gate's size have been
  answered while the gate was full (one window), the size grows by one, up to
  ``gate.max``, once no call waits at the gate (at the latest, at the end of the tick):
  growing admits at once, and calls let through together reach the platform in trio's
  order, not in ticket order. A gate that is not full learns nothing: its size was not
  what limited it.
- **Probe above a refusal sparingly.** The fewest calls in flight the platform refused
  is remembered (the ceiling). Below it the gate grows window by window; to the ceiling
  only once ``PROBE_CALLS`` calls have been answered at full use since the last refusal,
  so that a platform whose limit holds refuses at most about one call in
  ``PROBE_CALLS``. A window answered at the ceiling means the limit rose: it is forgotten.
- **Pause on retry-after.** A refusal that says when to come back (``retry_after``), or
  rate headers saying no request (or no token) remains until a reset, pause admissions
  gate-wide until then (``SharedGate.pause``): no call is sent into a refusal.
- **Spend what the rate headers say remains.** Headers saying ``n`` requests remain
  until a reset let at most ``n`` more calls through before it (``SharedGate.allow``);
  the last of them pauses the gate until the reset. The next headers heard replace the
  count.

The size starts at ``gate.max``: the first tick finds the limit at once, with one or two
refusals, where starting low would spend ticks growing to it.

Every change is an ``Adjustment`` made at the end of the call whose answer caused it,
before that call's slot is given back (``GateLayer``), and reported to the tick loop
(``apply``), which records it as a live change (``LEARNED_KEY``). A replay applies the
recorded adjustments at the end of the same calls (``RecordedAdjustments``), so it
admits exactly as the run did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol, final

import attrs
import msgspec

from ..calls import Done, RateLimits
from ..clock import current_time
from ..errors import CallError, SessionLimitError
from .gate import SharedGate

__all__ = [
    "BACKOFF",
    "LEARNED_KEY",
    "PROBE_CALLS",
    "Adjustment",
    "GateAdjuster",
    "LearnedSize",
    "RecordedAdjustments",
    "apply_to_gate",
]

#: What a refusal multiplies the size by (then rounded down).
BACKOFF = 0.5
#: Calls answered at full use since the last refusal before the gate grows to the size
#: the platform last refused: about the share of refusals a steady limit costs (1 %).
PROBE_CALLS = 100
#: The key a save records the learned gate's changes under (``TickFrame.changes``).
LEARNED_KEY = "gate.learned"


class Adjustment(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """One change the learning made to the gate, at the end of one call.

    Attributes:
        ticket: the gate ticket of the call whose answer made it.
        why: one line, for the dashboard and the report.
        size: the gate's new size, if it changed.
        paused_until: no call is admitted before this instant, if it paused the gate.
        allowed, allowed_until: at most ``allowed`` more calls are admitted before the
            instant ``allowed_until``, if rate headers said so many remain until then.
    """

    ticket: int
    why: str
    size: int | None = None
    paused_until: float | None = None
    allowed: int | None = None
    allowed_until: float | None = None


class GateAdjuster(Protocol):
    """What the gate layer tells about the calls it lets through (``GateLayer``)."""

    def admitted(self) -> int:
        """A call was let through; returns what to hand back to ``ended``."""
        ...

    def ended(self, ticket: int, admitted: int, outcome: Done | CallError | None) -> None:
        """The call ``ticket`` ended (``None``: cancelled), before its slot is given
        back; ``admitted`` is what ``admitted`` returned for it."""
        ...


def apply_to_gate(gate: SharedGate, adjustment: Adjustment) -> None:
    """Make ``adjustment``'s changes to ``gate``."""
    if adjustment.size is not None:
        gate.size = adjustment.size
    if adjustment.paused_until is not None:
        gate.pause(adjustment.paused_until)
    if adjustment.allowed is not None and adjustment.allowed_until is not None:
        gate.allow(adjustment.allowed, adjustment.allowed_until)


@final
@attrs.define(eq=False)
class LearnedSize:
    """The controller of a learned gate (see the module's docstring). The size itself is
    the gate's: a change made by hand (the dashboard's ``+``/``-``) is where learning goes
    on from.

    Args:
        gate: the gate it sizes; its size is the start (``gate.max``).
        smallest, largest: the bounds of the size (``gate.min``, ``gate.max``).
        apply: makes an adjustment and reports it (``TickLoop.adjust_gate``); by default
            it is made to the gate unreported (``apply_to_gate``).

    Raises:
        ValueError: ``smallest`` is below 1 or above ``largest``.
    """

    gate: SharedGate
    smallest: int = attrs.field(validator=attrs.validators.ge(1))
    largest: int
    apply: Callable[[Adjustment], None] | None = None
    #: The fewest calls in flight the platform refused; ``None`` once it bore that many.
    ceiling: int | None = attrs.field(default=None, init=False)
    #: The last adjustment made, for the dashboard.
    last: Adjustment | None = attrs.field(default=None, init=False)
    _epoch: int = attrs.field(default=0, init=False)
    _in_flight: int = attrs.field(default=0, init=False)
    _window: int = attrs.field(default=0, init=False)
    _quiet: int = attrs.field(default=0, init=False)
    # A growth decided, made once nobody waits (``ended``): the size and why.
    _growth: tuple[int, str] | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        if self.smallest > self.largest:
            raise ValueError(f"gate.min {self.smallest} is above gate.max {self.largest}")

    def admitted(self) -> int:
        self._in_flight += 1
        return self._epoch

    def ended(self, ticket: int, admitted: int, outcome: Done | CallError | None) -> None:
        flight = self._in_flight
        self._in_flight -= 1
        if isinstance(outcome, Done):
            self._answered(ticket, flight, outcome.rates)
        elif isinstance(outcome, SessionLimitError) and outcome.refused_by == "server" and not outcome.final:
            self._refused(ticket, flight, admitted, outcome)
        if self._growth is not None and not self.gate.statistics().waiting:
            # Grown only when nobody waits: growing admits at once, and two calls let
            # through at one instant reach the platform in trio's order, not in ticket
            # order; which of them a full platform refuses must not depend on that.
            # (The next tick's calls arrive one by one, in ticket order.)
            size, why = self._growth
            self._growth = None
            if size > self.gate.size:
                self._make(Adjustment(ticket=ticket, why=why, size=min(size, self.largest)))

    def _answered(self, ticket: int, flight: int, rates: RateLimits | None) -> None:
        size = self.gate.size
        if (said := _rates_adjustment(ticket, rates)) is not None:
            self._make(said)
        if flight < size:  # not at full use: the size did not limit this call
            return
        self._quiet += 1
        if self._growth is not None:  # one step at a time: the next window is at the new size
            return
        self._window += 1
        if self._window < size:
            return
        self._window = 0
        if self.ceiling is not None and size >= self.ceiling:
            self.ceiling = None  # a window answered at the size it refused: the limit rose
        if size >= self.largest:
            return
        if self.ceiling is None or size + 1 < self.ceiling:
            self._growth = (size + 1, f"{size} calls answered at full use")
        elif self._quiet >= PROBE_CALLS:
            self._growth = (size + 1, f"{self._quiet} calls answered at full use since the last refusal: trying {size + 1} again")

    def _refused(self, ticket: int, flight: int, admitted: int, refusal: SessionLimitError) -> None:
        size = self.gate.size
        shrunk: int | None = None
        why = f"refused by the server with {flight} in flight"
        if admitted == self._epoch:  # sent since the last shrink: news
            self.ceiling = flight
            self._quiet = 0
            self._window = 0
            self._growth = None
            smaller = max(self.smallest, min(int(size * BACKOFF), flight - 1))
            if smaller < size:
                shrunk = smaller
                self._epoch += 1
        paused_until = None
        if refusal.retry_after is not None:
            paused_until = current_time() + refusal.retry_after
            why = f"{why}; retry-after {refusal.retry_after:g}s"
        elif (said := _rates_pause(refusal.rates)) is not None:
            paused_until = said[0]
            why = f"{why}; {said[1]}"
        if shrunk is not None or paused_until is not None:
            self._make(Adjustment(ticket=ticket, why=why, size=shrunk, paused_until=paused_until))

    def _make(self, adjustment: Adjustment) -> None:
        self.last = adjustment
        if self.apply is None:
            apply_to_gate(self.gate, adjustment)
        else:
            self.apply(adjustment)


def _rates_pause(rates: RateLimits | None) -> tuple[float, str] | None:
    """Until when, and why, rate headers saying no request (or no token) remains pause
    the gate: until the later of the resets, when both ran out."""
    if rates is None:
        return None
    pauses = []
    if rates.requests_remaining == 0 and rates.requests_reset_s:
        pauses.append((rates.requests_reset_s, f"no request remains for {rates.requests_reset_s:g}s (rate headers)"))
    if rates.tokens_remaining == 0 and rates.tokens_reset_s:
        pauses.append((rates.tokens_reset_s, f"no token remains for {rates.tokens_reset_s:g}s (rate headers)"))
    if not pauses:
        return None
    seconds, why = max(pauses)
    return current_time() + seconds, why


def _rates_adjustment(ticket: int, rates: RateLimits | None) -> Adjustment | None:
    """What an answer's rate headers make of the gate: a pause when nothing remains
    (``_rates_pause``), else a bound on the calls let through until the requests'
    reset when they say how many remain. A count of tokens left bounds nothing: a
    call's tokens are known only once it is answered."""
    if (pause := _rates_pause(rates)) is not None:
        return Adjustment(ticket=ticket, why=pause[1], paused_until=pause[0])
    if rates is None or not rates.requests_remaining or not rates.requests_reset_s:
        return None
    reset = rates.requests_reset_s
    why = f"{rates.requests_remaining} requests remain for {reset:g}s (rate headers)"
    return Adjustment(ticket=ticket, why=why, allowed=rates.requests_remaining, allowed_until=current_time() + reset)


@final
@attrs.define(eq=False)
class RecordedAdjustments:
    """A replay's learned gate: the recorded adjustments, each made at the end of the
    call that made it in the recording, so that the replay admits as the run did.

    Args:
        adjustments: by the ticket of the call whose end made them, in their order.
        apply: as ``LearnedSize``'s.
    """

    adjustments: Mapping[int, Iterable[Adjustment]]
    gate: SharedGate
    apply: Callable[[Adjustment], None] | None = None
    last: Adjustment | None = attrs.field(default=None, init=False)

    def admitted(self) -> int:
        return 0

    def ended(self, ticket: int, admitted: int, outcome: Done | CallError | None) -> None:
        for adjustment in self.adjustments.get(ticket, ()):
            self.last = adjustment
            if self.apply is None:
                apply_to_gate(self.gate, adjustment)
            else:
                self.apply(adjustment)
