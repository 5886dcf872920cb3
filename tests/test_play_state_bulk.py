"""The dashboard's state takes a finished tick's calls in bulk, when the rows are read
(``DashboardState._take_ticks``), and finds the agents' histories in the ticks it keeps:
what the panels read must be what a state that took every call in as its tick ended
showed. ``_Reference`` is that state (manor/play/state.py before the change, trimmed
to the rows, counts and histories), fed the same random ticks and read at the same
random points."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from manor.calls import Request
from manor.errors import REASONS
from manor.play import state as state_module
from manor.play.state import DashboardState
from manor.records import CallRecord, TickRecord
from manor.tick.admitted import Heard
from manor.tick.instruments import Instruments
from manor.tick.statistics import PlatformRejections, empty_degradations, percentile
from manor.worlds import load_scene

SCENE = load_scene("wacky_manor")
AGENTS = sorted(SCENE.agents)
#: Callers planned every tick (their histories compared in full), and callers planned
#: in some ticks only.
EVERY_TICK = [("character", AGENTS[0]), ("narrator", "narrator")]
SOMETIMES = [("character", AGENTS[1]), ("character", AGENTS[2]), ("scene_beat", AGENTS[0]), ("summariser", "summariser")]
#: Calls each caller's history keeps in these tests (a small budget, so that it wraps).
SHARE = 3


@attrs.define(eq=False)
class _Row:
    caller: str
    agent: str
    state: str = "—"
    latency: float | None = None
    line: str = ""
    reason: str | None = None
    error: str = ""
    calls: deque[CallRecord] = attrs.field(factory=deque)
    key: str = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.key = f"{self.caller}:{self.agent}"


class _RowsByCall(dict[tuple[str, str], _Row]):
    def __init__(self, meet: Callable[[str, str], _Row]) -> None:
        super().__init__()
        self._meet = meet

    def __missing__(self, key: tuple[str, str]) -> _Row:
        return self._meet(*key)


class _Reference:
    """The state as it was: every call of a tick walked at the tick's end (or at a read
    while it ran), onto its row, its history and the counts."""

    def __init__(self, calls_per_caller: int) -> None:
        self._notes: list[Heard] = []
        self._out: list[Heard] = []
        self._rows_out: dict[Heard, _Row] = {}
        self._requests: Sequence[Request] | None = None
        self.current_tick: int | None = None
        self._latencies: list[float] = []
        self._degradations_tick = empty_degradations()
        self._degradations_total = empty_degradations()
        self._calls_total = self._degraded_total = self._degraded_in_tick = 0
        self._rejections = PlatformRejections()
        self.planned = self._queued = self._running = self._finished = 0
        self._rows: dict[str, _Row] = {}
        self._by_call = _RowsByCall(self._meet_caller)
        self._dirty: set[str] = set()
        self._in_tick: list[_Row] = []
        self.calls_per_caller = calls_per_caller

    def read(self) -> dict[str, Any]:
        self._catch_up()
        return {
            "rows": [(row.key, row.state, row.line, row.latency, row.reason, row.error) for row in self._rows.values()],
            "counts": (self._calls_total, self._degraded_total, self._degradations_total, self._degradations_tick,
                       attrs.asdict(self._rejections), self._queued, self._running, self._finished),
            "p50": percentile(self._latencies, 50) if self.current_tick is not None else None,
        }  # fmt: skip

    def tick_started(self, tick: int, requests: Sequence[Request]) -> None:
        self._catch_up()
        self.current_tick = tick
        if self._degraded_in_tick:
            self._degradations_tick = empty_degradations(self._degradations_total)
        self._degraded_in_tick = 0
        self._latencies = []
        self.planned, self._queued, self._running, self._finished = len(requests), 0, 0, 0
        self._requests = requests

    def _show_tick_rows(self) -> None:
        requests, self._requests = self._requests, None
        if requests is None:
            return
        previous, self._in_tick = self._in_tick, []
        for request in requests:
            row = self._by_call[request.caller, request.agent]
            row.state = "queued"
            self._dirty.add(row.key)
            self._in_tick.append(row)
        for row in previous:
            if row.state != "queued":
                row.state, row.reason, row.error = "—", None, ""
                self._dirty.add(row.key)

    def tick_finished(self, record: TickRecord) -> None:
        self._catch_up(ended=True)
        self.current_tick = None

    def _catch_up(self, *, ended: bool = False) -> None:
        notes, out = self._notes, self._out
        if self._requests is not None and not ended:
            self._show_tick_rows()
        if not notes and not out:
            if ended:
                self._end_tick_rows(())
            return
        heards = out + notes
        out.clear()
        notes.clear()
        last: dict[_Row, CallRecord] = {}
        taken: list[_Row] = []
        for heard in heards:
            record = heard.record
            if record is None:
                out.append(heard)
                continue
            row = self._by_call[record.caller, record.agent]
            row.calls.append(record)
            if record.outcome == "ok" and record.attempts == 1 and record.admitted_at is not None:
                last[row] = record
            else:
                self._take_call(row, record, last)
                taken.append(row)
        records = len(heards) - len(out)
        if records:
            self._finished += records
            self._calls_total += records
            _done(last.items(), self._dirty.add)
            if self.current_tick is not None and not ended:
                self._latencies.extend(
                    heard.record.finished_at - heard.record.admitted_at
                    for heard in heards
                    if heard.record is not None and heard.record.admitted_at is not None
                )
        if ended:
            self._end_tick_rows((*last, *taken))
        self._take_calls_out()

    def _take_call(self, row: _Row, record: CallRecord, last: dict[_Row, CallRecord]) -> None:
        earlier = last.pop(row, None)
        if earlier is not None:
            _done(((row, earlier),), self._dirty.add)
        self._dirty.add(row.key)
        if record.outcome == "ok":
            _done(((row, record),), self._dirty.add)
            if record.attempts > 1:
                self._rejections.count((record,))
            return
        if record.admitted_at is not None:
            row.latency = record.finished_at - record.admitted_at
        row.state, row.reason, row.error = "degraded", record.reason, record.error
        reason = record.reason or "provider_error"
        for counts in (self._degradations_tick, self._degradations_total):
            by_reason = counts.setdefault(record.caller, dict.fromkeys(REASONS, 0))
            by_reason[reason] = by_reason.get(reason, 0) + 1
        self._degraded_total += 1
        self._degraded_in_tick += 1
        self._rejections.count((record,))

    def _end_tick_rows(self, rows: Iterable[_Row]) -> None:
        if self._requests is None:
            return
        self._requests = None
        current = set(rows)
        previous, self._in_tick = self._in_tick, list(current)
        for row in previous:
            if row not in current:
                row.state, row.reason, row.error = "—", None, ""
                self._dirty.add(row.key)

    def _take_calls_out(self) -> None:
        queued = running = 0
        if not self._out:
            self._rows_out.clear()
        for heard in self._out:
            if heard.at is None:
                queued, state = queued + 1, "queued"
            else:
                running, state = running + 1, "running"
            row = self._rows_out.get(heard)
            if row is None:
                row = self._rows_out[heard] = self._by_call[heard.request.caller, heard.request.agent]
            if row.state != state:
                row.state = state
                self._dirty.add(row.key)
        self._queued, self._running = queued, running

    def _meet_caller(self, caller: str, agent: str) -> _Row:
        for request in self._requests or ():
            self._row(request.caller, request.agent)
        return self._row(caller, agent)

    def _row(self, caller: str, agent: str) -> _Row:
        row = self._by_call.get((caller, agent))
        if row is None:
            row = _Row(caller, agent, calls=deque(maxlen=self.calls_per_caller))
            self._rows[row.key] = self._by_call[caller, agent] = row
            self._dirty.add(row.key)
        return row


def _done(ended: Iterable[tuple[_Row, CallRecord]], changed: Callable[[str], object]) -> None:
    for row, record in ended:
        row.state, row.line, row.reason, row.error = "done", record.text, None, ""
        if record.admitted_at is not None:
            row.latency = record.finished_at - record.admitted_at
        changed(row.key)


def _read(state: DashboardState) -> dict[str, Any]:
    shown = state.shown
    return {
        "rows": [(row.key, row.state, row.line, row.latency, row.reason, row.error) for row in state.rows.values()],
        "counts": (state.calls_total, state.degraded_total, state.degradations_total, state.degradations_tick,
                   attrs.asdict(state.rejections), state.queued, state.running, state.finished),
        "p50": shown.p50 if shown is not None and shown.under_way else None,
    }  # fmt: skip


# -- random ticks -------------------------------------------------------------------------

#: A call as drawn: (ok, reason, attempts, admitted, text, refused by the server).
_call = st.tuples(
    st.booleans(), st.sampled_from(["timeout", "platform_rejected", "provider_error", "invalid_output"]),
    st.sampled_from([1, 1, 1, 2, 3]), st.sampled_from([True, True, True, False]), st.sampled_from(["", "a", "b", "c"]),
    st.booleans(),
)  # fmt: skip


@st.composite
def _ticks(draw: st.DrawFn) -> list[dict[str, Any]]:
    ticks = []
    for _ in range(draw(st.integers(1, 9))):
        sometimes = draw(st.lists(st.sampled_from(SOMETIMES), unique=True, max_size=len(SOMETIMES)))
        planned = draw(st.permutations(EVERY_TICK + sometimes))
        calls = [draw(_call) for _ in planned]
        repaired = draw(st.lists(st.integers(0, len(planned) - 1), unique=True, max_size=2))
        # The order the calls start in (a repair after its tick's calls), and the events
        # of the tick, with reads between them: (what, which call).
        starts = draw(st.permutations(range(len(planned))))
        events: list[tuple[str, int]] = []
        for index in range(len(planned) + len(repaired)):
            events += [("admit", index), ("end", index)]
        events = draw(st.permutations(events))  # (an admission after its call's end: none)
        reads = draw(st.sets(st.integers(0, len(events)), max_size=4))
        ticks.append({"planned": planned, "calls": calls, "repaired": repaired, "starts": starts, "events": events, "reads": reads,
                      "read_after": draw(st.booleans())})  # fmt: skip
    return ticks


def _record(tick: int, key: tuple[str, str], drawn: tuple[Any, ...], at: float, *, repairs: int = 0) -> CallRecord:
    ok, reason, attempts, admitted, text, by_server = drawn
    return CallRecord(
        tick=tick, ticket=None, caller=key[0], agent=key[1], queued_at=at, admitted_at=at + 0.5 if admitted else None,
        finished_at=at + 1 + len(text), outcome="ok" if ok else "degraded", reason=None if ok else reason,
        text=text, attempts=attempts + repairs, repairs=repairs, error="" if ok else f"{reason}!",
        refused_by=("server" if by_server else "limiter") if not ok and reason == "platform_rejected" else None,
    )  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(_ticks(), st.sampled_from([state_module._UNREAD_KEPT, 2]))
def test_a_bulk_state_shows_what_a_state_that_took_every_call_in_showed(ticks: list[dict[str, Any]], unread: int) -> None:
    """Random ticks (ok, degraded, retried, never admitted and repaired calls; callers
    planned in some ticks only), read at random points, while a tick runs and between
    ticks: the rows, counts and the tick under way's p50 are the reference's, and so are
    the histories of the callers planned every tick (those planned in some only keep
    the newest of theirs). With ``unread`` 2 the state takes its ticks in by itself
    every two ticks nobody read, as it does every 1,024 (``_UNREAD_KEPT``)."""
    kept, state_module._UNREAD_KEPT = state_module._UNREAD_KEPT, unread
    try:
        _feed_and_compare(ticks)
    finally:
        state_module._UNREAD_KEPT = kept


def _feed_and_compare(ticks: list[dict[str, Any]]) -> None:
    state = DashboardState(SCENE, calls_kept=SHARE * len(SCENE.agents))
    assert state.calls_per_caller == SHARE
    reference = _Reference(SHARE)
    instruments = Instruments()
    for number, tick in enumerate(ticks, start=1):
        planned = tick["planned"]
        requests = [Request(tick=number, caller=caller, agent=agent, prompt="") for caller, agent in planned]
        for each in (state, reference):
            each.tick_started(number, requests)
        # A repaired call: its first try ended invalid, asked again once the tick's
        # calls have started.
        heards = [Heard(requests[index], instruments) for index in tick["starts"]]
        by_index = {index: heard for index, heard in zip(tick["starts"], heards, strict=True)}
        final: dict[int, CallRecord] = {}
        for position, index in enumerate(tick["starts"]):
            final[index] = _record(number, planned[index], tick["calls"][index], float(position))
        for repair, index in enumerate(tick["repaired"]):
            by_index[len(planned) + repair] = Heard(requests[index], instruments)
        records: dict[int, CallRecord] = {}
        for index in range(len(planned) + len(tick["repaired"])):
            if index < len(planned):
                records[index] = final[index] if index not in tick["repaired"] else msgspec.structs.replace(
                    final[index], outcome="degraded", reason="invalid_output", error="not of its shape")
            else:
                original = tick["repaired"][index - len(planned)]
                records[index] = final[original] = _record(number, planned[original], tick["calls"][original], 20.0, repairs=1)
        noted = list(heards)
        for heard in noted:
            state._notes.append(heard)
            reference._notes.append(heard)
        for position, (what, index) in enumerate(tick["events"]):
            if position in tick["reads"]:
                assert _read(state) == reference.read()
            heard = by_index[index]
            if index >= len(planned) and heard not in noted:  # a repair starts
                noted.append(heard)
                state._notes.append(heard)
                reference._notes.append(heard)
            if what == "admit" and heard.record is None:
                heard.at = 0.5
            elif what == "end":
                heard.record = records[index]
        if len(tick["events"]) in tick["reads"]:
            assert _read(state) == reference.read()
        record = TickRecord(tick=number, started_at=0.0, finished_at=30.0, calls=tuple(final[i] for i in range(len(planned))), world_hash="")
        state.tick_finished(record, ())
        reference.tick_finished(record)
        if tick["read_after"]:
            assert _read(state) == reference.read()
    assert _read(state) == reference.read()
    for row in state.rows.values():
        old = list(reference._by_call[row.caller, row.agent].calls)
        if (row.caller, row.agent) in EVERY_TICK:
            assert list(row.calls) == old
        else:
            assert list(row.calls) == old[len(old) - len(row.calls) :]
