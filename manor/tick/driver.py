"""Driving a tick loop the way a person at a dashboard does: run, pause, step one tick.

The driver is host-independent: it runs under plain ``trio.run`` (tests, headless) as
well as inside Textual through trio's guest mode. Its controls (``pause``, ``resume``,
``step``) must be called from inside the trio run — a host calls them through
``TrioToken.run_sync_soon``.
"""

from __future__ import annotations

import math
from typing import Literal, final

import attrs
import trio

from .loop import TickLoop

__all__ = ["DriverState", "DriverStatistics", "TickDriver"]

#: ``running``: ticks follow one another; ``pausing``: paused, the tick under way still
#: finishes; ``paused``: between ticks, waiting; ``stepping``: paused, running the
#: ticks asked for by ``step``; ``finished``: the tick budget is spent, or the game is
#: over (``World.over``).
DriverState = Literal["running", "pausing", "paused", "stepping", "finished"]


@attrs.frozen
class DriverStatistics:
    """A snapshot of a driver."""

    state: DriverState
    #: Ticks this driver has run to their end.
    ticks: int
    #: Single steps asked for and not yet run.
    steps_pending: int


@final
@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)  # no hook on the state a tick sets; ``interval`` is checked when made
class TickDriver:
    """Runs ``loop`` tick after tick while not paused; a step runs exactly one tick.

    A pause takes effect between ticks: the tick under way finishes first (a tick is
    the unit the world changes by). Stepping while running pauses after the current
    tick.

    A tick every call of which found no gate (a shared gate's server lost) is followed,
    while running, by a wait for the gate, as in a headless run
    (``TickLoop.wait_for_lost_gate``): the next tick starts once the gate is back, and
    a gate lost for longer than the loop's ``gate_wait_s`` ends the run with
    ``SharedGateError``. A pause ends the wait (nothing runs while paused); the next
    tick then runs when asked for, and waits again if it finds no gate.

    Args:
        loop: the tick loop to drive.
        paused: start paused (nothing runs until ``resume`` or ``step``).
        interval: seconds between tick starts (0 = each tick starts when the last ends);
            finite. The last tick of a budget is not followed by a wait.
    """

    loop: TickLoop
    paused: bool = False
    interval: float = attrs.field(default=0.0, validator=[attrs.validators.ge(0), attrs.validators.lt(math.inf)])
    _steps: int = attrs.field(default=0, init=False)
    _ticks: int = attrs.field(default=0, init=False)
    _in_tick: bool = attrs.field(default=False, init=False)
    # The tick under way was asked for by ``step`` (so a pause is not pending).
    _tick_is_step: bool = attrs.field(default=False, init=False)
    _finished: bool = attrs.field(default=False, init=False)
    # While the driver waits for a lost gate: what a pause cancels.
    _gate_wait: trio.CancelScope | None = attrs.field(default=None, init=False)
    # Set whenever a control changes; replaced by a fresh event before each wait.
    _changed: trio.Event = attrs.field(factory=trio.Event, init=False)

    # -- controls (call from inside the trio run) ---------------------------------------

    def pause(self) -> None:
        """Stop after the tick under way; forget any steps not yet run."""
        self.paused = True
        self._steps = 0
        if self._gate_wait is not None:
            self._gate_wait.cancel()
        self._changed.set()

    def resume(self) -> None:
        self.paused = False
        self._changed.set()

    def toggle(self) -> None:
        """Pause if running, resume if paused."""
        if self.paused:
            self.resume()
        else:
            self.pause()

    def step(self) -> None:
        """Run one more tick, then stay paused. While running: pause after this tick."""
        if not self.paused:
            self.pause()
            return
        self._steps += 1
        self._changed.set()

    # -- running ------------------------------------------------------------------------

    async def run(self, ticks: int | None = None) -> None:
        """Drive the loop until cancelled, until ``ticks`` ticks have run, or until the
        game is over (as ``TickLoop.run`` stops).

        Instruments get ``run_finished`` however it ends. An error of the tick loop
        itself (not a degraded call, which is counted) propagates.

        Raises:
            SharedGateError: a shared gate was lost for longer than the loop waits.
        """
        try:
            while self._goes_on(ticks):
                while self.paused and not self._steps:
                    await self._wait_for_change()
                self._tick_is_step = self.paused
                if self.paused:
                    self._steps -= 1
                started = trio.current_time()
                self._in_tick = True
                try:
                    record = await self.loop.step()
                finally:
                    self._in_tick = False
                self._ticks += 1
                # A cancel scope only for a wait: one a tick costs a call's work.
                if self.loop.gate_lost(record) and not self.paused and self._goes_on(ticks):
                    with trio.CancelScope() as self._gate_wait:
                        await self.loop.wait_for_lost_gate(record)
                    self._gate_wait = None
                if self.interval and not self.paused and self._goes_on(ticks):
                    # A pause during the wait starts it at once; resuming restarts it.
                    with trio.move_on_at(started + self.interval):
                        while not self.paused:
                            await self._wait_for_change()
            self._finished = True
        finally:
            self.loop.instruments.call("run_finished", self.loop)

    def _goes_on(self, ticks: int | None) -> bool:
        """Whether another tick is due: the budget is not spent, the game not over."""
        return (ticks is None or self._ticks < ticks) and self.loop.world.over is None

    async def _wait_for_change(self) -> None:
        self._changed = trio.Event()
        await self._changed.wait()

    def statistics(self) -> DriverStatistics:
        state: DriverState
        if self._finished:
            state = "finished"
        elif not self.paused:
            state = "running"
        elif self._in_tick:
            state = "stepping" if self._tick_is_step else "pausing"
        else:
            state = "stepping" if self._steps else "paused"
        return DriverStatistics(state=state, ticks=self._ticks, steps_pending=self._steps)
