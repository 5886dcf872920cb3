"""Stopping a run at a refusal no retry can cure.

A spend cap reached, a usage cap, a key the server refuses (``CallError.final``): every
further call would be refused the same way, so the run stops after the tick it came
in — that tick recorded whole, its refused calls degraded with the server's message —
instead of degrading every call of every tick to come. The command then ends in one
line (``PlatformClosed``) and keeps its save.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import final

import trio

from ..errors import CallError
from ..instruments import Instrument
from ..records import StoryEntry, TickRecord
from .base import Provider

__all__ = ["StopAtFinalRefusal", "final_refusal"]


def final_refusal(backend: Provider) -> CallError | None:
    """The final refusal ``backend`` met, if any (a ``RoutingProvider``'s; other
    backends — the simulator, a replay's — meet none)."""
    return getattr(backend, "final_refusal", None)


@final
class StopAtFinalRefusal(Instrument):
    """Cancel ``scope`` (around the tick loop's run) once a tick finishes after
    ``backend`` met a final refusal."""

    def __init__(self, backend: Provider, scope: trio.CancelScope) -> None:
        self.backend = backend
        self.scope = scope

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        if final_refusal(self.backend) is not None:
            self.scope.cancel()
