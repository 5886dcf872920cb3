"""The recorded run: its settings, as sources a replay resolves again, and its figures."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from ..calls import Request
from ..config import KEYS, Config, Source, resolve
from ..config.layering import built_in_source
from ..config.schema import DERIVED_KEYS, FORMER_DEFAULTS, RETIRED_KEYS
from ..errors import ConfigError, ContentError, SaveError, one_line
from ..providers import SimProvider
from ..records import CallRecord
from ..run.engine import build_engine
from ..saves.reader import Save
from ..tick.statistics import RunStatistics
from ..worlds import world_class
from .responses import reached_backend

__all__ = [
    "RECORDED", "check_world", "peak_platform_sessions", "recorded_config", "recorded_on_real_clock", "recorded_source", "recorded_summary",
    "unplanned_calls",
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


def unplanned_calls(planned: Sequence[Request], recorded: Sequence[CallRecord]) -> str | None:
    """How a tick's recorded calls differ from the calls its world planned — each
    planned call recorded once, no other — or ``None`` when they are the same (by caller
    kind and agent, counted). Whatever rebuilds a recorded tick checks this first: a save
    with a call record taken out would otherwise replay, the missing call drawn again.
    """
    wanted = Counter((request.caller, request.agent) for request in planned)
    held = Counter((call.caller, call.agent) for call in recorded)
    if wanted == held:
        return None

    def named(calls: Counter[tuple[str, str]]) -> str:
        return ", ".join(f"{caller} {agent}" + (f" ×{count}" if count > 1 else "") for (caller, agent), count in calls.items())

    problems = []
    if missing := wanted - held:
        problems.append(f"no call of {named(missing)}")
    if extra := held - wanted:
        problems.append(f"a call the world did not plan: {named(extra)}")
    return f"{len(recorded)} calls recorded, {len(planned)} planned: {'; '.join(problems)}"


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


def recorded_config(save: Save, overrides: Source | None = None) -> Config:
    """The settings to replay ``save`` with: the recorded ones, under ``overrides``.

    Raises:
        SaveError: a recorded setting has a value this Manor refuses.
        ConfigError: an override has a bad value.
    """
    source, _ = recorded_source(save)
    try:
        recorded = resolve([built_in_source(), source])
    except ConfigError as exc:
        raise SaveError(f"{save.name}: corrupt: a recorded setting is refused: {one_line(exc)}") from None
    if overrides is None:
        return recorded
    return resolve([built_in_source(), source, overrides])


def recorded_on_real_clock(save: Save) -> bool:
    """Whether the recorded run ran on the real clock: set so, or derived (a real
    backend, a gate on Redis). A replay derives the clock again from its own settings,
    so ``recorded_config`` does not say."""
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
    """The recorded run's figures, with the keys of ``manor run --json``."""
    check_world(save)
    stats = RunStatistics()
    for frame in save.ticks:
        stats.tick_finished(frame.record, ())
    # RunStatistics names the run's settings from an engine; one built (never run) with
    # the recorded settings names them as the recording had them. Its backend is never
    # called: a placeholder, so backends the recording named need not be defined here.
    engine = build_engine(recorded_config(save), save.scene, backend=SimProvider())
    for frame in save.ticks:  # the world as the recording left it: whether, and how, the game ended
        engine.loop.world.apply(frame.record.calls)
    summary = stats.summary(engine)
    calls = [call for frame in save.ticks for call in (*frame.record.calls, *frame.superseded)]
    summary["peak_platform_sessions"] = peak_platform_sessions(calls)
    return summary
