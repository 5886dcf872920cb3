"""Observers of the tick loop: the dashboard, the save writer, statistics.

Every hook is an optional no-op; the loop calls only the hooks an instrument overrides.
An instrument that raises is removed and logged — it never crashes the run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .calls import Request
from .records import CallRecord, StoryEntry, TickRecord

if TYPE_CHECKING:
    from .tickloop import TickLoop

__all__ = ["HOOKS", "Instrument", "Instruments"]

log = logging.getLogger("manor.instruments")


class Instrument:
    """Override the hooks you need."""

    def run_started(self, loop: TickLoop) -> None:
        """Before the first tick of a run."""

    def tick_started(self, tick: int, requests: Sequence[Request]) -> None:
        """A tick is planned; ``requests`` in planning order."""

    def call_started(self, request: Request) -> None:
        """A call is on its way to the gate (queued)."""

    def call_admitted(self, request: Request, admitted_at: float) -> None:
        """The gate let a call through (running)."""

    def call_finished(self, record: CallRecord) -> None:
        """A call ended, ok or degraded."""

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        """A tick's outcomes are applied to the world."""

    def setting_changed(self, key: str, value: object, during_tick: bool) -> None:
        """A setting was changed while the loop runs (``TickLoop.resize_gate``,
        ``switch_policy``), now; ``during_tick`` says whether a tick was running."""

    def run_finished(self, loop: TickLoop) -> None:
        """The run ended (also when it was cancelled or failed)."""


HOOKS = tuple(name for name in vars(Instrument) if not name.startswith("_"))


class Instruments:
    """The instruments of one loop, indexed by the hooks each overrides."""

    def __init__(self, instruments: Iterable[Instrument] = ()) -> None:
        # hook -> (instrument, its bound hook) for each instrument that overrides it: a
        # tuple, replaced (not changed) by ``add`` and ``remove``, so that a call walks
        # it as it was without copying it, and finds each hook without a getattr.
        self._by_hook: dict[str, tuple[tuple[Instrument, Callable[..., object]], ...]] = dict.fromkeys(HOOKS, ())
        for instrument in instruments:
            self.add(instrument)

    def add(self, instrument: Instrument) -> None:
        for hook in HOOKS:
            if getattr(type(instrument), hook) is not getattr(Instrument, hook):
                self._by_hook[hook] += ((instrument, getattr(instrument, hook)),)

    def remove(self, instrument: Instrument) -> None:
        for hook, listeners in self._by_hook.items():
            self._by_hook[hook] = tuple(listener for listener in listeners if listener[0] is not instrument)

    def call(self, hook: str, *args: Any) -> None:
        for instrument, method in self._by_hook[hook]:  # usually none, per call
            try:
                method(*args)
            except Exception:
                log.exception("instrument %r raised in %s; removed", instrument, hook)
                self.remove(instrument)
