"""The recorded run: its settings, as sources a replay resolves again, its figures, and
the engine that runs it again (``RecordedRun``, built once for every replay)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, final

import attrs

from ..admission.adaptive import Adjustment
from ..config import KEYS, Config, Source, resolve
from ..config.layering import built_in_source
from ..config.schema import DERIVED_KEYS, FORMER_DEFAULTS, RETIRED_KEYS
from ..errors import ConfigError, ContentError, SaveError, one_line
from ..records import CallRecord
from ..run.engine import Engine, build_engine, scene_seed, scene_sim
from ..saves.reader import Save
from ..tick.instruments import Instrument
from ..tick.statistics import RunStatistics
from ..worlds import create_world, world_class
from .admissions import RecordedAdmissions
from .changes import LiveChanges, recorded_adjustments
from .checking import RecordingCheck
from .responses import ReplayBackend, reached_backend, recorded_responses

__all__ = [
    "RECORDED", "RecordedRun", "ReplayEngine", "check_world", "peak_platform_sessions", "recorded_on_real_clock", "recorded_source",
    "recorded_summary",
]  # fmt: skip

#: The ordinal of the recorded settings: above the built-in defaults (a setting newer
#: than the save keeps its default), below command-line flags (a what-if).
RECORDED = 250


def recorded_source(save: Save) -> tuple[Source, list[str]]:
    """The recorded run's settings as one source, and a warning per setting it had that
    this Manor no longer knows (dropped: it can no longer change anything).

    Settings the recorded run derived (the gate size from the platform limit) are left
    out, so that a what-if derives them again from its own values; a key this Manor
    does not derive keeps its recorded value whatever its origin. A key the save has no
    row for, whose default has changed since, gets the default the run had
    (``FORMER_DEFAULTS``): a save from before longest-first was the default replays in
    the order it was recorded in.
    """
    values: dict[str, Any] = dict(FORMER_DEFAULTS)
    dropped: list[str] = []
    for row in save.header.settings:
        if row.origin.startswith("derived") and row.key in DERIVED_KEYS:
            continue
        if row.key in KEYS:
            values[row.key] = row.value
        elif row.key not in RETIRED_KEYS:  # a retired key only ever held its default
            dropped.append(f"{save.name}: setting '{row.key}' is no longer a Manor setting; ignored")
    return Source(f"save {save.name}", RECORDED, values), dropped


def check_world(save: Save) -> None:
    """The world the save's scene names is here, and is the one the run played: the same
    name and version. Whatever replays a save's ticks through its world checks first.

    Raises:
        SaveError: the world cannot be imported, or is another world or version.
    """
    header = save.header
    recorded = f"world '{header.world_name}' version {header.world_version}"
    try:
        cls = world_class(header.scene.spec.world)
    except ContentError as exc:
        raise SaveError(f"{save.name}: recorded with {recorded}, which cannot be loaded here: {exc}") from None
    if (cls.name, cls.version) != (header.world_name, header.world_version):
        raise SaveError(f"{save.name}: recorded with {recorded}; this Manor has world '{cls.name}' version {cls.version} there")


def recorded_on_real_clock(save: Save) -> bool:
    """Whether the recorded run ran on the real clock: set so, or derived (a real
    backend, a gate on Redis). A replay derives the clock again from its own settings,
    so its resolved settings do not say."""
    return any(row.key == "run.clock" and row.value == "real" for row in save.header.settings)


def peak_platform_sessions(calls: Iterable[CallRecord]) -> int:
    """The most platform sessions a run held at once, from its call records (every try).

    A call that reached the backend held a session from ``admitted_at`` to
    ``finished_at`` — a server's refusal too, as it was a session while it lasted; a
    session that ends at the instant another opens was released first (the gate admits
    the next call on a release).
    """
    changes: list[tuple[float, int]] = []
    for call in calls:
        if reached_backend(call):
            assert call.admitted_at is not None
            changes += [(call.admitted_at, 1), (call.finished_at, -1)]
    peak = open_now = 0
    for _, change in sorted(changes):  # at one instant, -1 sorts before +1
        open_now += change
        peak = max(peak, open_now)
    return peak


def recorded_summary(save: Save) -> dict[str, Any]:
    """The recorded run's figures, with the keys of ``manor run --json``
    (``RecordedRun.summary``).

    Raises:
        SaveError: the save's world is not here, or a recorded setting is refused.
    """
    return RecordedRun.from_save(save).summary()


@final
@attrs.frozen
class ReplayEngine:
    """An engine that replays a save, and the instruments of the replay it carries.

    Attributes:
        backend: answers each call with its recorded response (``drawn``: those it had
            none for).
        check: compares each tick with the recording.
        changes: makes the recorded live changes again: run its ``run`` beside the loop.
        starts_at: the instant the replay's clock starts at: where the recording's did
            when the shared gate's recorded admissions are replayed (times on the
            recording's clock), 0 otherwise.
    """

    engine: Engine
    backend: ReplayBackend
    check: RecordingCheck
    changes: LiveChanges
    starts_at: float = 0.0


@final
@attrs.frozen
class RecordedRun:
    """A save's run, ready to run again: the settings it was recorded with, those it
    replays with (under a what-if's overrides), and its recorded figures.

    Example::

        recording = RecordedRun.from_save(read_save("saves/wacky_manor_pipeline.msav"))
        recording.summary()["world_hash"]          # as recorded, no engine built
        replaying = recording.engine([RunStatistics()])

    Attributes:
        recorded: the settings the run was recorded with.
        config: the settings it replays with: ``recorded``, under the overrides.
        overridden: the keys the overrides set (a what-if); empty for a replay of the
            recording as it was.
        warnings: what the reader and the settings let pass, one line each.
    """

    save: Save
    recorded: Config
    config: Config
    overridden: frozenset[str]
    warnings: tuple[str, ...]

    @classmethod
    def from_save(cls, save: Save, overrides: Source | None = None) -> RecordedRun:
        """The recorded run of ``save``, to replay with ``overrides`` (a what-if; ``None``:
        the recorded settings).

        Raises:
            SaveError: the save's world is not here, or a recorded setting is refused.
            ConfigError: an override has a bad value.
        """
        check_world(save)
        source, dropped = recorded_source(save)
        try:
            recorded = resolve([built_in_source(), source])
        except ConfigError as exc:
            raise SaveError(f"{save.name}: corrupt: a recorded setting is refused: {one_line(exc)}") from None
        config = recorded if overrides is None else resolve([built_in_source(), source, overrides])
        overridden = frozenset(overrides.values if overrides is not None else ())
        return cls(save, recorded, config, overridden, (*save.warnings, *dropped))

    def engine(self, instruments: Iterable[Instrument] = ()) -> ReplayEngine:
        """An engine that replays the recorded ticks (its ``loop.run(len(save.ticks))``),
        observed by ``instruments`` and then by the replay's own.

        A save whose gate was shared — one world of a fleet, or a run on a gate in Redis
        (``gate.url``) — replays as recorded under the shared gate's recorded admissions
        (and, recorded on the virtual clock, must reproduce them to the bit too); under a
        what-if, alone, through a gate of its own. A single run on a gate of its own is
        replayed by that gate.

        Raises:
            ContentError: the scene's world refuses the recorded scene.
        """
        save, config, scene = self.save, self.config, self.save.scene
        # Calls the recording has no response for are drawn as the recorded run would
        # have drawn them: from its own seed and simulation settings, whatever the what-if.
        backend = ReplayBackend(recorded_responses(save.ticks), fallback=scene_sim(self.recorded, scene))
        shared = save.header.fleet is not None or bool(self.recorded.settings.gate.url)
        admissions = [RecordedAdmissions(save.ticks)] if shared and not self.overridden else []
        # Times read off the real clock do not replay to the bit: a timeout fires a moment
        # late there, a call is let through a moment after the release that freed its slot.
        check = RecordingCheck(save.records, times=bool(admissions) and not recorded_on_real_clock(save))
        # A learned gate's changes are made again at the ends of the calls that made them;
        # a what-if of the gate's size learns anew, or keeps the size it is given. Under
        # a shared gate's recorded admissions, its changes of size at their recorded
        # times (``LiveChanges``): they were made at the ends of other worlds' calls too,
        # and a tick's ticket order is planned on the gate's size.
        learned_sizes = bool(admissions) and "gate.size" not in self.overridden
        changes = LiveChanges(
            save.ticks, seed=scene_seed(config, scene), batch_size=config.settings.run.batch_size, skip=self.overridden, learned_sizes=learned_sizes
        )
        adjustments: dict[int, list[Adjustment]] | None
        if "gate.size" in self.overridden:
            adjustments = None
        elif learned_sizes:
            adjustments = {}
        else:
            adjustments = recorded_adjustments(save.ticks)
        engine = build_engine(
            config, scene, backend=backend, instruments=[*instruments, check, changes, *admissions], layers=admissions, adjustments=adjustments,
        )  # fmt: skip
        # The recorded admissions are times on the recording's clock: its replay starts
        # where it started (a real clock's times are far from 0), not one long first
        # tick away.
        starts_at = max(save.records[0].started_at, 0.0) if admissions and save.records else 0.0
        return ReplayEngine(engine, backend, check, changes, starts_at)

    def summary(self) -> dict[str, Any]:
        """The recorded run's figures, with the keys of ``manor run --json``, from its
        records and its recorded settings: nothing runs, no engine is built."""
        save, settings = self.save, self.recorded.settings
        stats = RunStatistics()
        for frame in save.ticks:
            stats.tick_finished(frame.record, ())
        world = create_world(save.scene, scene_seed(self.recorded, save.scene))
        for frame in save.ticks:  # the world as the recording left it: whether, and how, the game ended
            world.apply(frame.record.calls)
        calls = [call for frame in save.ticks for call in (*frame.record.calls, *frame.superseded)]
        return stats.figures(
            scene=save.scene.spec.name, policy=settings.run.policy, order=settings.run.order, seed=settings.run.seed,
            platform_limit=settings.platform.limit, gate_size=settings.gate.first_size, learns=settings.gate.learns,
            peak_platform_sessions=peak_platform_sessions(calls), world=world,
        )  # fmt: skip
