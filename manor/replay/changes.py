"""The recorded live changes (gate size, policy), made again as a save replays; and a
learned gate's, made again at the ends of the calls that made them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import final

import msgspec
import trio

from ..admission.adaptive import LEARNED_KEY, Adjustment
from ..calls import Request
from ..clock import wait_all_tasks_blocked
from ..saves.format import SettingChange, TickFrame
from ..tick.instruments import Instrument
from ..tick.loop import TickLoop
from ..tick.policies import make_policy

__all__ = ["LiveChanges", "recorded_adjustments"]


@final
class LiveChanges(Instrument):
    """Makes the recorded live changes again: those made between ticks when the tick
    starts, those made while a tick ran at their recorded time (``run``). Keys a
    what-if overrides are left as the what-if sets them.

    A learned gate's changes are made by ``recorded_adjustments``, at the ends of the
    calls that made them; with ``learned_sizes``, its changes of size are made here, at
    their times, instead: a gate shared with other worlds or processes was changed at
    the ends of their calls too, whose tickets the replay does not have.
    """

    def __init__(self, frames: Sequence[TickFrame], seed: int, batch_size: int, skip: Iterable[str], learned_sizes: bool = False) -> None:
        skip = set(skip)
        if "run.batch_size" in skip:
            skip.add("run.policy")
        self._seed = seed
        self._batch_size = batch_size
        self._between: dict[int, list[SettingChange]] = {}
        self._during: list[SettingChange] = []
        for frame in frames:
            for change in frame.changes:
                if change.key in skip:
                    continue
                if change.key == LEARNED_KEY:
                    adjustment = msgspec.convert(change.value, Adjustment)
                    if not learned_sizes or adjustment.size is None:
                        continue  # those: recorded_adjustments
                    # Its size only: the recorded admissions hold the calls its pauses held.
                    change = msgspec.structs.replace(change, value=Adjustment(ticket=adjustment.ticket, why=adjustment.why, size=adjustment.size))
                if change.at is None:
                    self._between.setdefault(frame.record.tick, []).append(change)
                else:
                    self._during.append(change)
        self._loop: TickLoop | None = None

    def run_started(self, loop: TickLoop) -> None:
        self._loop = loop

    def tick_started(self, tick: int, requests: Sequence[Request]) -> None:
        self._apply(self._between.get(tick, ()))

    async def run(self) -> None:
        """Apply the changes made during ticks, each at its recorded time."""
        for change in self._during:
            await trio.sleep_until(change.at)  # type: ignore[arg-type]
            if self._shrinks(change):
                # A shared gate shrunk at the end of a call refused at the instant it was
                # let through: the calls let through at that instant came first.
                await wait_all_tasks_blocked()
            self._apply([change])

    def _shrinks(self, change: SettingChange) -> bool:
        loop = self._loop
        return (
            change.key == LEARNED_KEY and loop is not None and isinstance(change.value, Adjustment)
            and change.value.size is not None and change.value.size < loop.gate.size
        )  # fmt: skip

    def _apply(self, changes: Iterable[SettingChange]) -> None:
        loop = self._loop
        assert loop is not None
        values = {change.key: change.value for change in changes}
        if "gate.size" in values:
            loop.resize_gate(int(values["gate.size"]))
        if isinstance(learned := values.get(LEARNED_KEY), Adjustment):
            loop.adjust_gate(learned)
        if "run.policy" in values or "run.batch_size" in values:
            name = str(values.get("run.policy", loop.policy.name))
            size = values.get("run.batch_size", getattr(loop.policy, "size", self._batch_size))
            loop.switch_policy(make_policy(name, int(size), self._seed))


def recorded_adjustments(frames: Iterable[TickFrame]) -> dict[int, list[Adjustment]]:
    """A learned gate's recorded changes, by the ticket of the call whose end made them
    (``manor.admission.adaptive``)."""
    found: dict[int, list[Adjustment]] = {}
    for frame in frames:
        for change in frame.changes:
            if change.key == LEARNED_KEY:
                adjustment = msgspec.convert(change.value, Adjustment)
                found.setdefault(adjustment.ticket, []).append(adjustment)
    return found
