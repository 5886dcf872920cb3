"""A save's values, checked as strictly as the files and flags they came from.

Checksums prove a save was not damaged, not that its values make sense: a crafted (or
hand-edited and re-framed) save is input like any other. Its recorded settings go
through the settings schema, its scene through the content schema (msgspec applies it
when the header is decoded) and its world's keys (``manor.worlds.scene_problem``), each live change through the schema
of its key; every time is finite. A value a run could not have had is one
``SaveError`` line naming the file, the tick and the key — never a traceback or a hang
in the replay it would feed.
"""

from __future__ import annotations

import math

import msgspec

from ..admission.adaptive import LEARNED_KEY, Adjustment
from ..config.layering import Source, check_value
from ..config.schema import KEYS
from ..errors import ConfigError, SaveError
from ..worlds import scene_problem
from .format import LIVE_KEYS, Header, TickFrame

__all__ = ["check_changes", "check_header"]


def check_header(header: Header, name: str) -> None:
    """The recorded settings, the saved scene and the run's seat in a fleet.

    Settings this Manor no longer knows are left alone: the replay drops them with a
    warning (``recorded_source``).

    Raises:
        SaveError: a recorded setting or the scene has a value a run cannot have.
    """
    problem = scene_problem(header.scene)
    if problem:
        raise SaveError(f"{name}: corrupt: the saved scene: {problem}")
    seat = header.fleet
    if seat is not None and seat.world >= seat.worlds:
        raise SaveError(f"{name}: corrupt: it says it is world {seat.world} of a fleet of {seat.worlds} (worlds count from 0)")
    source = Source(name, 0, {}, spelling={key: f"recorded setting {key}" for key in KEYS})
    for row in header.settings:
        if row.key in KEYS:
            _check(source, row.key, row.value)


def check_changes(frame: TickFrame, name: str) -> None:
    """The settings changed live during tick ``frame.record.tick``.

    Raises:
        SaveError: a key that cannot change live, a value its key refuses, or a time
            that is not finite.
    """
    tick = frame.record.tick
    source = Source(f"{name}: tick {tick}", 0, {}, spelling={key: f"live change {key}" for key in LIVE_KEYS})
    for change in frame.changes:
        if change.key == LEARNED_KEY:
            _check_adjustment(source, change.value, change.at)
            continue
        if change.key not in LIVE_KEYS:
            raise SaveError(f"{source.name}: live change of {change.key!r}, which is no setting that changes live")
        if change.at is not None and not math.isfinite(change.at):
            raise SaveError(f"{source.describe(change.key)}: its time {change.at} is not finite")
        if change.value is None:  # the schema's "unset" is no value a running loop takes
            raise SaveError(f"{source.describe(change.key)}: bad value None")
        _check(source, change.key, change.value)


def _check(source: Source, key: str, value: object) -> None:
    try:
        check_value(source, key, value)
    except ConfigError as exc:
        raise SaveError(str(exc)) from None


def _check_adjustment(source: Source, value: object, at: float | None) -> None:
    """A learned gate's adjustment: an ``Adjustment``, made while a tick ran, to a size
    of at least 1 and a pause at a finite instant."""
    where = f"{source.name}: the learned gate's change"
    try:
        adjustment = msgspec.convert(value, Adjustment)
    except msgspec.ValidationError as exc:
        raise SaveError(f"{where}: {exc}") from None
    if at is None or not math.isfinite(at):
        raise SaveError(f"{where}: its time {at} is not that of a call's end")
    if adjustment.size is not None and adjustment.size < 1:
        raise SaveError(f"{where}: size {adjustment.size} is below 1")
    if adjustment.paused_until is not None and not math.isfinite(adjustment.paused_until):
        raise SaveError(f"{where}: a pause until {adjustment.paused_until}, which never comes")
    if (adjustment.allowed is None) != (adjustment.allowed_until is None):
        raise SaveError(f"{where}: an allowance needs both its count and its end")
    if adjustment.allowed is not None and adjustment.allowed < 0:
        raise SaveError(f"{where}: {adjustment.allowed} calls allowed, below 0")
    if adjustment.allowed_until is not None and not math.isfinite(adjustment.allowed_until):
        raise SaveError(f"{where}: an allowance until {adjustment.allowed_until}, which never comes")
