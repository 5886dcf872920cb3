"""Replaying a save: the recorded ticks again, with the recorded responses, under the
virtual clock — with the recorded settings (to verify) or others (what if?)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, final

import attrs
import msgspec
import trio
import trio.testing

from ..admission.adaptive import LEARNED_KEY, Adjustment
from ..calls import Request
from ..config import Source
from ..records import StoryEntry, TickRecord
from ..run import interrupts
from ..run.engine import Engine, build_engine, scene_seed, scene_sim
from ..saves.format import SettingChange, TickFrame
from ..saves.reader import Save
from ..tick.instruments import Instrument
from ..tick.loop import TickLoop
from ..tick.policies import make_policy
from ..tick.statistics import RunStatistics
from ..wording import counted
from ..worlds import create_world
from .admissions import RecordedAdmissions
from .recorded import (
    check_world,
    recorded_config,
    recorded_on_real_clock,
    recorded_source,
    unplanned_calls,
)
from .responses import ReplayBackend, recorded_responses

__all__ = ["LiveChanges", "Mismatch", "RecordingCheck", "Replay", "recorded_adjustments", "recorded_admissions", "replay"]


@attrs.frozen
class Mismatch:
    """The first tick whose world hash differs from the recorded one (0: the world
    before the first tick), and what differed."""

    tick: int
    recorded: str
    replayed: str
    detail: str


@final
class RecordingCheck(Instrument):
    """Compares each replayed tick with the recorded one; keeps the first mismatch: a
    tick that does not hold the calls its world planned, or whose world hash differs.

    Args:
        recorded: the recorded ticks.
        times: also compare when each call was let through and when it ended (a
            fleet world's replay, whose admissions come from the recording, must
            reproduce them to the bit: ``manor.replay.admissions``).
    """

    def __init__(self, recorded: Sequence[TickRecord], *, times: bool = False) -> None:
        self.recorded = recorded
        self.times = times
        self.mismatch: Mismatch | None = None
        self._unplanned: str | None = None

    def tick_started(self, tick: int, requests: Sequence[Request]) -> None:
        # The calls are compared before the tick runs: a call missing from the
        # recording is drawn again from the simulation, and may rebuild the same world.
        self._unplanned = unplanned_calls(requests, self.recorded[tick - 1].calls)

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        expected = self.recorded[record.tick - 1]
        if self.mismatch is not None:
            return
        if self._unplanned is not None:
            self.mismatch = Mismatch(record.tick, expected.world_hash, record.world_hash, f"the save does not hold the calls the world planned: {self._unplanned}")
        elif record.world_hash != expected.world_hash:
            self.mismatch = Mismatch(record.tick, expected.world_hash, record.world_hash, _first_difference(expected, record))
        elif self.times and (detail := _first_time_difference(expected, record)):
            self.mismatch = Mismatch(record.tick, expected.world_hash, record.world_hash, detail)


def _first_difference(recorded: TickRecord, replayed: TickRecord) -> str:
    if len(recorded.calls) != len(replayed.calls):
        return f"{len(recorded.calls)} calls recorded, {len(replayed.calls)} replayed"
    for was, now in zip(recorded.calls, replayed.calls, strict=True):
        if (was.caller, was.agent) != (now.caller, now.agent):
            return f"call order differs: {was.caller} {was.agent} recorded, {now.caller} {now.agent} replayed"
        if (was.outcome, was.reason) != (now.outcome, now.reason):
            return f"{was.caller} {was.agent}: {was.reason or 'ok'} recorded, {now.reason or 'ok'} replayed"
        if was.text != now.text:
            return f"{was.caller} {was.agent}: its text differs"
    return "every call ended as recorded, yet the world differs (the save was altered, or the world's rules changed)"


def _first_time_difference(recorded: TickRecord, replayed: TickRecord) -> str | None:
    for was, now in zip(recorded.calls, replayed.calls, strict=True):
        if was.admitted_at != now.admitted_at:
            return (
                f"{was.caller} {was.agent}: let through at {_time(was.admitted_at)} in the recording, {_time(now.admitted_at)} in the replay: "
                "the recorded admissions are not ones this world's gate could make (more of its calls in flight than the gate's size, "
                "or out of its ticket order)"
            )
        if was.finished_at != now.finished_at:
            return f"{was.caller} {was.agent}: ended at {was.finished_at!r} in the recording, {now.finished_at!r} in the replay"
    return None


def _time(at: float | None) -> str:
    return "never" if at is None else repr(at)


@final
@attrs.frozen
class Replay:
    """What a replay did.

    Attributes:
        engine: the engine that replayed (its settings, gate, limiter).
        statistics: the replayed run's figures.
        drawn: calls answered by the simulated backend: the recording had no response
            for them (they never reached the backend in it).
        mismatch: the first tick whose world hash differs from the recording, if any.
        warnings: what the reader and the settings let pass, one line each.
        times_checked: each call's admission and end were compared with the recording
            too (a fleet world's save, recorded on the virtual clock).
    """

    engine: Engine
    statistics: RunStatistics
    drawn: int
    mismatch: Mismatch | None
    warnings: tuple[str, ...]
    times_checked: bool = False

    @property
    def ticks(self) -> int:
        return self.statistics.ticks

    @property
    def verified(self) -> bool:
        return self.mismatch is None

    def summary(self) -> dict[str, Any]:
        """The replayed run's figures, with the keys of ``manor run --json``."""
        return self.statistics.summary(self.engine)


def recorded_admissions(save: Save) -> RecordedAdmissions | None:
    """For a save whose gate was shared — one world of a fleet, or a run on a gate in
    Redis (``gate.url``) — the shared gate's recorded admissions, to replay it with (add
    it to the loop as a layer and as an instrument); ``None`` for a single run's save on
    a gate of its own, which its own gate replays."""
    shared = save.header.fleet is not None or recorded_config(save).settings.gate.url
    return RecordedAdmissions(save.ticks) if shared else None


@final
class LiveChanges(Instrument):
    """Makes the recorded live changes again: those made between ticks when the tick
    starts, those made while a tick ran at their recorded time (``run``). Keys a
    what-if overrides are left as the what-if sets them."""

    def __init__(self, frames: Sequence[TickFrame], seed: int, batch_size: int, skip: Iterable[str]) -> None:
        skip = set(skip)
        if "run.batch_size" in skip:
            skip.add("run.policy")
        self._seed = seed
        self._batch_size = batch_size
        self._between: dict[int, list[SettingChange]] = {}
        self._during: list[SettingChange] = []
        for frame in frames:
            for change in frame.changes:
                if change.key in skip or change.key == LEARNED_KEY:  # those: recorded_adjustments
                    continue
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
            self._apply([change])

    def _apply(self, changes: Iterable[SettingChange]) -> None:
        loop = self._loop
        assert loop is not None
        values = {change.key: change.value for change in changes}
        if "gate.size" in values:
            loop.resize_gate(int(values["gate.size"]))
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


def replay(save: Save, overrides: Source | None = None, *, instruments: Iterable[Instrument] = ()) -> Replay:
    """Replay every whole tick of ``save`` under the virtual clock.

    Args:
        overrides: settings to replay with instead of the recorded ones (a what-if);
            ``None`` replays with the recorded settings, which must reproduce the
            recorded world hash after every tick. One world of a fleet replays with
            the recorded settings under the shared gate's recorded admissions (and
            must reproduce them too), under a what-if alone, through a gate of its own.
        instruments: more observers of the replayed ticks (a dashboard, a recorder).

    Raises:
        SaveError: the save holds no whole tick, or a recorded setting is refused.
        ConfigError: an override has a bad value.
        Interrupted: SIGINT or SIGTERM stopped the replay.
    """
    save.require_ticks()
    check_world(save)
    _, dropped = recorded_source(save)
    config = recorded_config(save, overrides)
    scene = save.scene
    # Calls the recording has no response for are drawn as the recorded run would have
    # drawn them: from its own seed and simulation settings, whatever the what-if.
    backend = ReplayBackend(recorded_responses(save.ticks), fallback=scene_sim(recorded_config(save), scene))
    statistics = RunStatistics()
    admissions = recorded_admissions(save) if overrides is None else None
    # Times read off the real clock do not replay to the bit: a timeout fires a moment
    # late there, a call is let through a moment after the release that freed its slot.
    check = RecordingCheck(save.records, times=admissions is not None and not recorded_on_real_clock(save))
    settings = config.settings
    changes = LiveChanges(
        save.ticks,
        seed=scene_seed(config, scene),
        batch_size=settings.run.batch_size,
        skip=overrides.values if overrides is not None else (),
    )
    shared = [] if admissions is None else [admissions]
    # A learned gate's changes are made again at the ends of the calls that made them;
    # a what-if of the gate's size learns anew, or keeps the size it is given.
    adjustments = recorded_adjustments(save.ticks) if overrides is None or "gate.size" not in overrides.values else None
    engine = build_engine(
        config, scene, backend=backend, instruments=[statistics, check, changes, *shared, *instruments], layers=shared, adjustments=adjustments
    )
    mismatch = None
    start = create_world(scene, save.header.seed).hash
    if start != save.header.world.hash:
        mismatch = Mismatch(0, save.header.world.hash, start, "the world before the first tick differs")
    clock = trio.testing.MockClock(autojump_threshold=0)
    if admissions is not None and save.records[0].started_at > 0:
        # The recorded admissions are times on the recording's clock: start where it
        # started (a real clock's times are far from 0), not one long first tick away.
        clock.jump(save.records[0].started_at)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(changes.run)
            await engine.loop.run(len(save.ticks), settings.run.tick_interval_s)
            nursery.cancel_scope.cancel()

    # Ctrl-C or SIGTERM stops it cleanly and says how far it got.
    interrupts.run(main, clock=clock, after=lambda: f"after {statistics.ticks} of {counted(len(save.ticks), 'tick')} replayed")
    return Replay(engine, statistics, backend.drawn, mismatch or check.mismatch, (*save.warnings, *dropped), check.times)
