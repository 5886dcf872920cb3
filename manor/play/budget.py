"""How often the dashboard draws: ten frames a second at most, and, while the engine
wants the CPU, no more often than a small share of the engine's time allows.

A frame — the panels redrawn, Textual composing the screen — costs about 15-20 ms of CPU
at 120×40 when everything on it moves (the Wacky Manor flat out), more for a big world.
An engine that waits
(simulated time paced to the wall clock, a slow model) loses nothing to that: the frame
is drawn while it has nothing to do. An engine that never waits (simulated time flat
out) loses every moment the dashboard takes, ten frames a second a fifth of its speed.
So a frame is due only once the time the dashboard held the engine up since the last
one — the engine ready, the host drawing (``GuestRun.held_seconds``) — is at most
``share`` of the time the engine wanted, its steps and that. Flat out, frames are
spaced to keep the dashboard's share under the bound — but never further apart than
``longest``, so that what is on screen is never older than that (a frame of a big world
costs more, and would otherwise come seconds apart). A key still redraws at once
(``PlayApp.in_engine``), and each frame shows one tick, as always.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import final

from .guest import GuestRun

__all__ = ["FrameBudget"]


@final
class FrameBudget:
    """Whether the next frame is due, from what the engine's trio run did since the last.

    Args:
        share: the most of the engine's wanted time the dashboard may take.
        longest: the most wall seconds between two frames, whatever they cost.
        clock: the wall clock.
    """

    def __init__(self, share: float, *, longest: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not 0 < share <= 1:
            raise ValueError(f"share must be in (0, 1], not {share}")
        self.share = share
        self.longest = longest
        self._clock = clock
        self._guest: GuestRun | None = None
        # At the last frame: the wall clock, the run's step and held seconds.
        self._marks = (0.0, 0.0, 0.0)

    def due(self, guest: GuestRun) -> bool:
        """Whether to draw now (always for a run not seen before, or one that waits for
        a timer or I/O: it loses nothing to a frame now); if so, the next frame is
        measured from now."""
        now, stepping, held = self._clock(), guest.step_seconds, guest.held_seconds
        if guest is self._guest and not guest.waiting:
            drawn, stepped, was_held = self._marks
            dashboard = held - was_held
            if dashboard > self.share * (stepping - stepped + dashboard) and now - drawn < self.longest:
                return False
        self._guest, self._marks = guest, (now, stepping, held)
        return True
