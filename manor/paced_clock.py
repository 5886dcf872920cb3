"""Simulated time a person can watch: exact like the virtual clock, paced by the wall clock.

``trio.testing.MockClock(rate=r)`` runs virtual time at ``r`` times the wall clock, so
every moment the host (the dashboard drawing a frame) keeps trio from running is added
to the simulated times, times ``r``: at ``r = 64`` a 20 ms frame makes a call 1.3 s
late. ``PacedClock`` keeps simulated time exact instead. Like
``MockClock(autojump_threshold=0)``, time moves only when every task is blocked, and
only to the next deadline, so every timer fires at exactly its deadline and a run gives
the same ticks, makespans and world hash as ``manor run`` under the virtual clock. Unlike
it, each move waits until the wall clock, scaled by the speed, has caught up.

Time stands still while nothing is scheduled (the dashboard paused between ticks), so
pausing and resuming changes no figure either.

The hot paths read it where it stands (``manor.clock.current_time``: ``_now`` while no
``_pending`` step is due), not through ``current_time``: a change to either field's
meaning is a change there too (``tests/test_clock.py`` holds the two to the bit).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import final

import trio

__all__ = ["PacedClock"]


@final
class PacedClock(trio.abc.Clock):
    """Exact simulated time, ``speed`` simulated seconds per wall second.

    Args:
        speed: simulated seconds per wall second; ``math.inf`` never waits (the
            virtual clock).
        slack: wall seconds a late run may catch up by running faster; beyond that the
            lateness is dropped (a stall is not followed by a long burst).
        wall: the wall clock (tests pass their own).
    """

    def __init__(self, speed: float = 1.0, *, slack: float = 0.25, wall: Callable[[], float] = time.perf_counter) -> None:
        if not speed > 0:
            raise ValueError(f"speed must be positive, not {speed}")
        self._speed = float(speed)
        self._slack = slack
        self._wall = wall
        self._now = 0.0
        # Simulated time ``_anchor`` corresponds to wall time ``_anchor_wall``.
        self._anchor = 0.0
        self._anchor_wall = wall()
        # The deadline the run is waiting for, and the wall time it is due at.
        self._pending: tuple[float, float] | None = None
        # Nothing was scheduled when the run last went idle: time stood still.
        self._idle = True

    def __repr__(self) -> str:
        return f"<PacedClock speed={self._speed:g} time={self._now:.6f}>"

    @property
    def speed(self) -> float:
        return self._speed

    @speed.setter
    def speed(self, speed: float) -> None:
        """Change the speed from now on. Call it inside the trio run (a host uses the
        trio token), so that a wait planned at the old speed is planned again."""
        if not speed > 0:
            raise ValueError(f"speed must be positive, not {speed}")
        # Whatever part of the wait is already done at the old speed stays done.
        self._anchor, self._anchor_wall = self.peek(), self._wall()
        self._speed = float(speed)
        self._pending = None

    # -- trio.abc.Clock ---------------------------------------------------------------

    def start_clock(self) -> None:
        self._anchor, self._anchor_wall = self._now, self._wall()

    def current_time(self) -> float:
        if self._pending is not None:
            deadline, due = self._pending
            if self._wall() >= due:
                self._arrive(deadline, due)
        return self._now

    def deadline_to_sleep_time(self, deadline: float) -> float:
        # Trio asks only when no task can run: the one moment time may move.
        if math.isinf(deadline):
            self._idle = True
            self._pending = None
            return math.inf
        wall = self._wall()
        if self._idle:
            # Time stood still while nothing was scheduled; pace from here.
            self._idle = False
            self._anchor, self._anchor_wall = self._now, wall
        due = self._anchor_wall + (deadline - self._anchor) / self._speed
        if due <= wall:
            self._arrive(deadline, due)
            return 0.0
        self._pending = (deadline, due)
        return due - wall

    # -- for display ------------------------------------------------------------------

    def peek(self) -> float:
        """Where simulated time is heading, as of now, for a clock on screen (it moves
        smoothly between deadlines; ``current_time`` steps from one to the next)."""
        if self._pending is None:
            return self._now
        deadline, _ = self._pending
        paced = self._anchor + (self._wall() - self._anchor_wall) * self._speed
        return max(self._now, min(deadline, paced))

    def _arrive(self, deadline: float, due: float) -> None:
        self._now = max(self._now, deadline)
        self._pending = None
        # Keep the schedule (a late arrival is made up by the next waits), but only
        # by ``slack``: beyond it, start the schedule again from here.
        self._anchor = self._now
        self._anchor_wall = max(due, self._wall() - self._slack)
