"""Checking a replay against its recording: the first tick whose world differs, or that
does not hold the calls its world planned, and why."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import final

import attrs

from ..calls import Request
from ..records import CallRecord, StoryEntry, TickRecord
from ..tick.instruments import Instrument

__all__ = ["Mismatch", "RecordingCheck", "unplanned_calls"]


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
            replay whose shared gate's admissions come from the recording, made on the
            virtual clock, must reproduce them to the bit: ``manor.replay.admissions``).
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
