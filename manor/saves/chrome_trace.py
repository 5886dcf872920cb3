"""A save as a Chrome trace (the trace-event JSON that Perfetto and chrome://tracing open).

Layout: one process per caller kind of the save's world (the manor's: character,
narrator, summariser, scene beat), one thread — a track — per agent in it; on each track a span for the time a call waited at
the gate and one for the time it ran. A "gate" process holds the counters (calls in
flight at the gate, calls queued at it) and a "ticks" track with one span per tick;
every tick start is also a global instant marker. Times are microseconds from the start
of the first tick.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import SaveError
from ..output_file import write_output
from ..records import CallRecord
from .reader import Save

__all__ = ["chrome_trace", "write_trace"]

_TICKS_TID = 1
_MICROSECONDS = 1_000_000


def chrome_trace(save: Save) -> dict[str, Any]:
    """The trace of every whole tick of ``save``, as a JSON-ready dict."""
    origin = save.ticks[0].record.started_at if save.ticks else 0.0

    def ts(t: float) -> float:
        return round((t - origin) * _MICROSECONDS, 3)

    tids = {agent_id: i for i, agent_id in enumerate(save.scene.agents, start=1)}
    kinds = save.header.world_callers
    gate_pid = len(kinds) + 1
    events: list[dict[str, Any]] = [*_names(save, kinds, tids)]
    calls: list[CallRecord] = []
    for frame in save.ticks:
        tick = frame.record
        events.append({"name": f"tick {tick.tick}", "ph": "i", "s": "g", "ts": ts(tick.started_at), "pid": gate_pid, "tid": _TICKS_TID})
        events.append({
            "name": f"tick {tick.tick}", "cat": "tick", "ph": "X", "ts": ts(tick.started_at), "dur": ts(tick.finished_at) - ts(tick.started_at),
            "pid": gate_pid, "tid": _TICKS_TID, "args": {"calls": len(tick.calls), "world_hash": tick.world_hash},
        })  # fmt: skip
        for call in (*frame.superseded, *tick.calls):
            calls.append(call)
            events.extend(_spans(call, kinds.index(call.caller) + 1, tids[call.agent], ts))
    events.extend(_counters(calls, gate_pid, ts))
    policy = next((row.value for row in save.header.settings if row.key == "run.policy"), "")
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "save": save.name,
            "scene": save.scene.spec.name,
            "policy": policy,
            "seed": save.header.seed,
            "ticks": len(save.ticks),
            "engine_version": save.header.engine_version,
        },
    }


def write_trace(save: Save, path: str | Path) -> int:
    """Write the trace of ``save`` to ``path`` (replacing it); return how many events.

    See ``manor.output_file``: a failed export leaves no partial file behind, a symbolic link
    is written through, a device (``/dev/null``) is written to.

    Raises:
        SaveError: the file cannot be written.
    """
    trace = chrome_trace(save)
    try:
        write_output(path, json.dumps(trace))
    except BrokenPipeError:
        raise  # a reader that stopped early (``| head``): no error, see manor.cli.main
    except OSError as exc:
        raise SaveError(f"{path}: cannot write the trace: {exc.strerror or exc}") from None
    return len(trace["traceEvents"])


def _names(save: Save, kinds: Sequence[str], tids: dict[str, int]) -> Iterable[dict[str, Any]]:
    """Metadata events: a name and a sort order for every process and track."""

    def meta(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "ph": "M", "pid": pid, "tid": tid, "args": args}

    gate_pid = len(kinds) + 1
    for pid, kind in enumerate(kinds, start=1):
        yield meta("process_name", pid, 0, {"name": kind.replace("_", " ")})
        yield meta("process_sort_index", pid, 0, {"sort_index": pid})
    yield meta("process_name", gate_pid, 0, {"name": "gate"})
    yield meta("process_sort_index", gate_pid, 0, {"sort_index": 0})
    yield meta("thread_name", gate_pid, _TICKS_TID, {"name": "ticks"})
    used = {(call.caller, call.agent) for frame in save.ticks for call in (*frame.superseded, *frame.record.calls)}
    agents = save.scene.agents
    for caller, agent in sorted(used, key=lambda used: (kinds.index(used[0]), tids[used[1]])):
        pid, tid = kinds.index(caller) + 1, tids[agent]
        yield meta("thread_name", pid, tid, {"name": f"{agents[agent].name} ({agent})"})
        yield meta("thread_sort_index", pid, tid, {"sort_index": tid})


def _spans(call: CallRecord, pid: int, tid: int, ts: Callable[[float], float]) -> Iterable[dict[str, Any]]:
    """A call's spans: waiting at the gate, then running (if it was let through)."""
    args: dict[str, Any] = {
        "tick": call.tick, "ticket": call.ticket, "attempt": call.attempts - 1, "outcome": call.outcome, "reason": call.reason,
        "input_tokens": call.input_tokens, "output_tokens": call.output_tokens, "text": call.text,
    }  # fmt: skip
    if not call.ok:
        args["error"] = call.error
        if call.refused_by is not None:
            args["refused_by"] = call.refused_by
    end = call.finished_at if call.admitted_at is None else call.admitted_at
    waited = "waiting" if call.admitted_at is not None else f"waiting → {call.reason}"
    yield {"name": waited, "cat": "gate", "ph": "X", "ts": ts(call.queued_at), "dur": max(0.0, ts(end) - ts(call.queued_at)), "pid": pid, "tid": tid, "args": args}
    if call.admitted_at is not None:
        ran = "running" if call.ok else f"running → {call.reason}"
        yield {"name": ran, "cat": "call", "ph": "X", "ts": ts(call.admitted_at), "dur": max(0.0, ts(call.finished_at) - ts(call.admitted_at)), "pid": pid, "tid": tid, "args": args}


def _counters(calls: Iterable[CallRecord], gate_pid: int, ts: Callable[[float], float]) -> Iterable[dict[str, Any]]:
    """Calls in flight at the gate and queued at it, at every instant either changes.

    Without a gate (the legacy policy) a call is "in flight" while it holds a platform
    session, and nothing queues.
    """
    changes: list[tuple[float, int, int]] = []  # (time, change in flight, change queued)
    for call in calls:
        admitted = call.finished_at if call.admitted_at is None else call.admitted_at
        changes += [(call.queued_at, 0, 1), (admitted, 0, -1)]
        if call.admitted_at is not None:
            changes += [(call.admitted_at, 1, 0), (call.finished_at, -1, 0)]
    changes.sort()
    in_flight = queued = 0
    for index, (time, flight, queue) in enumerate(changes):
        in_flight += flight
        queued += queue
        # One sample per instant, after every change at that instant.
        if index + 1 == len(changes) or changes[index + 1][0] != time:
            yield {"name": "gate", "ph": "C", "ts": ts(time), "pid": gate_pid, "tid": 0, "args": {"in flight": in_flight, "queued": queued}}
