"""What a run says when it starts waiting for its lost shared gate: one line, once.

A tick every call of which found no gate (its Redis lost) is followed by a wait for the
gate (``TickLoop.wait_for_lost_gate``). The user hears of it once, when the wait begins,
and again only after a tick has found the gate: on stderr for a headless run, as a
notice on the dashboard.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from ..records import StoryEntry, TickRecord
from ..tick.instruments import Instrument

__all__ = ["GateLostNotice"]


def _warn(line: str) -> None:
    print(f"manor: warning: {line}", file=sys.stderr, flush=True)


class GateLostNotice(Instrument):
    """One line when a run starts waiting for its lost shared gate (a tick every call of
    which found none), once until a tick finds the gate again. One for all the worlds
    of a fleet: they lose the same gate.

    Args:
        say: where the line goes (with how long the wait may last, in seconds); by
            default stderr, as ``manor: warning: ...``.
    """

    def __init__(self, say: Callable[[str, float], object] | None = None) -> None:
        self._say = say or (lambda line, _: _warn(line))
        self._said = False

    def gate_lost(self, message: str, limit_s: float) -> None:
        if not self._said:
            self._said = True
            self._say(f"{message}; waiting up to {limit_s:g}s for the gate before the next tick", limit_s)

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        if any(call.reason != "gate_unavailable" for call in record.calls):
            self._said = False
