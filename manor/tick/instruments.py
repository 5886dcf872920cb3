"""Observers of the tick loop: the dashboard, the save writer, statistics.

Every hook is an optional no-op; the loop calls only the hooks an instrument overrides.
An instrument that raises is removed and logged — it never crashes the run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from ..calls import Request
from ..records import CallRecord, StoryEntry, TickRecord
from ..worlds import World
from .policies import Policy

__all__ = ["HOOKS", "Instrument", "Instruments", "RunningLoop"]

log = logging.getLogger("manor.tick.instruments")


class RunningLoop(Protocol):
    """What an instrument may see of the loop it observes, and change through it (a
    replay makes the recorded live changes again; a benchmark starts a new game).
    ``manor.tick.loop.TickLoop`` is one."""

    world: World
    policy: Policy

    def resize_gate(self, size: int) -> None:
        """Change the gate's size now, as a live change the instruments hear."""

    def switch_policy(self, policy: Policy) -> None:
        """Use ``policy`` from the next tick on, as a live change the instruments hear."""


class Instrument:
    """Override the hooks you need."""

    def run_started(self, loop: RunningLoop) -> None:
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

    def gate_lost(self, message: str, limit_s: float) -> None:
        """Every call of the tick that just ended found no gate (its server is lost,
        ``message`` says how): the loop waits for the gate, up to ``limit_s``, before
        the next tick."""

    def run_finished(self, loop: RunningLoop) -> None:
        """The run ended (also when it was cancelled or failed)."""


HOOKS = tuple(name for name in vars(Instrument) if not name.startswith("_"))


class Instruments:
    """The instruments of one loop, indexed by the hooks each overrides."""

    def __init__(self, instruments: Iterable[Instrument] = ()) -> None:
        #: Each hook's listeners, (instrument, its bound hook): found without a getattr
        #: per call. The lists live as long as this object (added to and removed from
        #: in place), so a hot path may keep one and call a hook only when its list is
        #: not empty: a call per model call costs more than the test when, as in a
        #: headless run, nobody listens.
        self.by_hook: dict[str, list[tuple[Instrument, Callable[..., object]]]] = {hook: [] for hook in HOOKS}
        for instrument in instruments:
            self.add(instrument)

    def add(self, instrument: Instrument) -> None:
        for hook in HOOKS:
            if getattr(type(instrument), hook) is not getattr(Instrument, hook):
                self.by_hook[hook].append((instrument, getattr(instrument, hook)))

    def remove(self, instrument: Instrument) -> None:
        for listeners in self.by_hook.values():
            listeners[:] = [listener for listener in listeners if listener[0] is not instrument]

    def call(self, hook: str, *args: Any) -> None:
        listeners = self.by_hook[hook]
        if not listeners:  # the usual case, per call: keep it cheap
            return
        for instrument, method in tuple(listeners):  # as it was: a failing one is removed
            try:
                method(*args)
            except Exception:
                log.exception("instrument %r raised in %s; removed", instrument, hook)
                self.remove(instrument)
