"""Replaying a save: the recorded ticks again, with the recorded responses, under the
virtual clock — with the recorded settings (to verify) or others (what if?)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, final

import attrs
import trio

from ..clock import MockClock
from ..config import Source
from ..run import interrupts
from ..run.engine import Engine
from ..saves.reader import Save
from ..tick.instruments import Instrument
from ..tick.statistics import RunStatistics
from ..wording import counted
from ..worlds import create_world
from .checking import Mismatch
from .recorded import RecordedRun

__all__ = ["Replay", "replay"]


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
        recording: the recorded run it replayed (its recorded figures: ``summary()``).
        times_checked: each call's admission and end were compared with the recording
            too (a save whose gate was shared, recorded on the virtual clock).
    """

    engine: Engine
    statistics: RunStatistics
    drawn: int
    mismatch: Mismatch | None
    recording: RecordedRun
    times_checked: bool = False

    @property
    def ticks(self) -> int:
        return self.statistics.ticks

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the reader and the settings let pass, one line each."""
        return self.recording.warnings

    @property
    def verified(self) -> bool:
        return self.mismatch is None

    def summary(self) -> dict[str, Any]:
        """The replayed run's figures, with the keys of ``manor run --json``."""
        return self.statistics.summary(self.engine)


def replay(save: Save, overrides: Source | None = None, *, instruments: Iterable[Instrument] = ()) -> Replay:
    """Replay every whole tick of ``save`` under the virtual clock.

    Args:
        overrides: settings to replay with instead of the recorded ones (a what-if);
            ``None`` replays with the recorded settings, which must reproduce the
            recorded world hash after every tick. A save whose gate was shared (one
            world of a fleet, a run on a gate in Redis) replays with the recorded
            settings under the shared gate's recorded admissions (and must reproduce
            them too), under a what-if alone, through a gate of its own.
        instruments: more observers of the replayed ticks (a dashboard, a recorder).

    Raises:
        SaveError: the save holds no whole tick, or a recorded setting is refused.
        ConfigError: an override has a bad value.
        Interrupted: SIGINT or SIGTERM stopped the replay.
    """
    save.require_ticks()
    recording = RecordedRun.from_save(save, overrides)
    statistics = RunStatistics()
    replaying = recording.engine([statistics, *instruments])
    loop = replaying.engine.loop
    mismatch = None
    start = create_world(save.scene, save.header.seed).hash
    if start != save.header.world.hash:
        mismatch = Mismatch(0, save.header.world.hash, start, "the world before the first tick differs")

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(replaying.changes.run)
            await loop.run(len(save.ticks), recording.config.settings.run.tick_interval_s)
            nursery.cancel_scope.cancel()

    def after() -> str:
        return f"after {statistics.ticks} of {counted(len(save.ticks), 'tick')} replayed"

    clock = MockClock(autojump_threshold=0)
    clock.jump(replaying.starts_at)
    # Ctrl-C or SIGTERM stops it cleanly and says how far it got.
    interrupts.run(main, clock=clock, after=after)
    check = replaying.check
    return Replay(replaying.engine, statistics, replaying.backend.drawn, mismatch or check.mismatch, recording, check.times)
