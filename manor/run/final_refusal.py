"""A refusal no retry can cure (a spend cap, a key the server refuses) stops a run after
the tick it came in, whichever command runs it (``run``, ``play``, ``fleet``): every
later call would be refused the same way. The tick is recorded whole, the save kept."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import CallError, PlatformClosed, error_line
from ..providers.routing import RoutingProvider
from ..records import StoryEntry, TickRecord
from ..tick.instruments import Instrument

__all__ = ["StopAtFinalRefusal", "final_refusal", "platform_closed"]


def final_refusal(backend: object) -> CallError | None:
    """The refusal no retry cures that ``backend`` met, if it met one."""
    return backend.final_refusal if isinstance(backend, RoutingProvider) else None


def platform_closed(refusal: CallError, ran: str) -> PlatformClosed:
    """The one line a run stopped by ``refusal`` ends with; ``ran`` says what it did
    (``interrupts.ran``: its ticks, its save)."""
    return PlatformClosed(f"{error_line(refusal)}; no retry will help, so the run stopped {ran}")


class StopAtFinalRefusal(Instrument):
    """Calls ``stop`` when a tick finishes after ``backend`` met a refusal no retry can
    cure, so the run stops with that tick recorded whole: a cancel scope's ``cancel``
    around the run, or a fleet world's ``TickLoop.stop_after_tick`` (each world stops
    after its own tick, its save whole)."""

    def __init__(self, backend: object, stop: Callable[[], object]) -> None:
        self.backend = backend
        self.stop = stop

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        if final_refusal(self.backend) is not None:
            self.stop()
