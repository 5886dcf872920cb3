"""Checking a replay against its recording: the first tick whose world differs, and why."""

from __future__ import annotations

from collections.abc import Sequence
from typing import final

import attrs

from ..records import StoryEntry, TickRecord
from ..tick.instruments import Instrument

__all__ = ["Mismatch", "RecordingCheck"]


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
    """Compares each replayed tick with the recorded one; keeps the first mismatch.

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

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        expected = self.recorded[record.tick - 1]
        if self.mismatch is not None:
            return
        if record.world_hash != expected.world_hash:
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
