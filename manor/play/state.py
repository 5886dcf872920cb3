"""What the dashboard shows, kept up to date by the tick loop.

The engine writes, the dashboard reads on a timer (about ten times a second, fewer when
the engine runs flat out), so per call the loop only notes what happened — one list
append, no hook called (``TickLoop.call_notes``). At a tick's end the state keeps the
tick's records (one tuple, made in C) and counts them in C passes (how many did not end
ok at the first try: only those are looked at one by one, for the degradation counts
and rejections, exact over the run). The rows are worked out when read (a frame), from
the ticks finished since the last read, newest first, each row stopping at its newest
call: flat out, hundreds of ticks end between two frames and only the newest show. The
agents' histories are found in the ticks kept, on demand (``CallerRow.calls``). What a
read finds of the tick under way (calls queued, running, ended) is taken from the notes
as it goes. What only a frame shows of a finished tick — its figures for the latency
panel, the world's marks on the rows — is worked out when read, for the ticks the panel
keeps: per frame, not per tick.
Of a call's three events only the last changes its row, so most are never looked at
one by one. Updates are coalesced by construction, and a flood of calls never costs a
redraw. Both run on one thread (trio in guest mode on Textual's loop), so there are no
locks.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from itertools import compress
from operator import attrgetter
from typing import TYPE_CHECKING, Literal, final

import attrs

from ..callers import Caller, caller_of
from ..calls import Request
from ..content import Scene
from ..errors import REASONS
from ..folds import Fold, fold_story
from ..records import CallRecord, StoryEntry, TickRecord
from ..tick.instruments import Instrument
from ..tick.statistics import PlatformRejections, empty_degradations, percentile
from ..worlds.world import world_marks

if TYPE_CHECKING:
    from ..tick.admitted import Heard
    from ..tick.loop import CallNotes, TickLoop
    from ..worlds import World

__all__ = ["CALLS_KEPT", "CallerRow", "CallerState", "DashboardState", "ShownTick", "StoryItem", "TickFigures"]

CallerState = Literal["—", "queued", "running", "done", "degraded"]

#: A line of the dashboard's story: an entry, or many alike degraded turns folded.
StoryItem = StoryEntry | Fold[StoryEntry]

#: Calls kept for the agents' histories, live, over all callers together: each caller
#: keeps its last ``CALLS_KEPT / callers`` (between 1 and ``_CALLS_PER_CALLER``), so a
#: thousand agents cost the same memory as ten (a replay reads them from the save).
#: They are kept as whole ticks: as many of the newest as hold ``CALLS_KEPT`` calls,
#: and no fewer than a caller's share (a caller planned every tick keeps its share; one
#: planned rarely, what those ticks hold of it).
CALLS_KEPT = 50_000
_CALLS_PER_CALLER = 500

#: Finished ticks held for the rows between two reads at most: past it the rows take
#: them in at a tick's end (a state nobody reads holds no more).
_UNREAD_KEPT = 1024

@final
@attrs.define(eq=False)
class CallerRow:
    """One caller of the agents table: a character, the narrator, a scene-beat speaker."""

    caller: str
    agent: str
    name: str
    state: CallerState = "—"
    #: Seconds from admission to the end of its last finished call.
    latency: float | None = None
    line: str = ""
    reason: str | None = None
    #: What failed, when its last call degraded.
    error: str = ""
    #: What its world says of the agent (``world_marks``: "dead"), shown while it has no
    #: call; "" = nothing.
    mark: str = ""
    #: Finds its last calls, oldest first (``calls``).
    history: Callable[[], Sequence[CallRecord]] = attrs.field(default=tuple, repr=False)
    #: Its caller kind as the agents table labels it, in full and in four characters
    #: (``Caller.label``, ``Caller.short``); "" = the kind's own name.
    kind: str = ""
    short: str = ""
    #: ``caller:agent``, what the agents table knows it by (made once: hooks use it per call).
    key: str = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.key = f"{self.caller}:{self.agent}"
        self.kind = self.kind or self.caller
        self.short = self.short or self.kind[:4]

    @property
    def calls(self) -> Sequence[CallRecord]:
        """Its last calls, oldest first (as many as the dashboard keeps per caller),
        found when asked for (``DashboardState`` keeps ticks, not calls)."""
        return self.history()


@attrs.frozen
class TickFigures:
    """One finished tick, as the latency panel shows it."""

    tick: int
    makespan: float
    p50: float
    max: float
    calls: int
    degraded: int


@attrs.frozen
class ShownTick:
    """The tick the panels show: the one under way (its figures so far), or else the
    last finished one."""

    tick: int
    under_way: bool
    #: Finished ticks only: from the tick's start to its last call's end.
    makespan: float | None
    p50: float
    max: float
    #: Calls ended (all of them, once finished) and planned.
    done: int
    planned: int
    degraded: int


@final
class DashboardState(Instrument):
    """Counts, rows and story lines for the dashboard, fed by the tick loop.

    Args:
        scene: names the callers; their rows exist, in planning order, from the start.
        history: finished ticks kept for the latency panel.
        story_kept: story lines kept for the story panel.
        calls_kept: calls kept for the agents' histories, over all callers (0: none, as
            in a replay, which has them in its save).
    """

    def __init__(self, scene: Scene, *, history: int = 120, story_kept: int = 500, calls_kept: int = CALLS_KEPT) -> None:
        # The calls the loop started since the last catch-up, in order
        # (``TickLoop.call_notes``): each call's ``Heard``, which knows whether it was
        # admitted (``at``) and, once ended, its record. The loop holds this very list:
        # it is emptied in place.
        self._notes: CallNotes = []
        # Calls taken in by a catch-up while they were still out (queued or running),
        # looked at again by the next: in the order they started.
        self._out: CallNotes = []
        # Their rows, found once: a read while calls are out looks at every one of them.
        self._rows_out: dict[Heard, CallerRow] = {}
        # The records of the tick under way's calls a read took in (``_out``'s
        # predecessors), in the order it took them: the tick's first calls at its end.
        self._taken: list[CallRecord] = []
        # Finished ticks whose calls the rows have not taken in yet, oldest first: each
        # tick's records, as the tick records them (``TickRecord.calls``, in planning
        # order) or, where a read took some in while it ran or some were repaired, in
        # the order the state took them (those a read took first, then as they started).
        self._unread: list[Sequence[CallRecord]] = []
        # The newest finished ticks' records, for the agents' histories (``_calls_of``):
        # as many as hold ``calls_kept`` calls ``_held`` calls in all.
        self._kept: deque[Sequence[CallRecord]] = deque()
        self._held = 0
        # The tick under way's requests, while its rows have not been shown yet as
        # queued (``_show_tick_rows``): a tick no panel reads while it runs never is.
        self._requests: Sequence[Request] | None = None
        # Bumped on every change (``version``).
        self._version = 0
        #: The tick under way, or ``None`` between ticks.
        self.current_tick: int | None = None
        #: The last finished tick (0 before the first).
        self.tick = 0
        self._history = history
        self._ticks: deque[TickFigures] = deque(maxlen=history)
        # Finished ticks not yet worked into figures (``ticks``): their records.
        # Worked out when read (a frame), for the
        # newest ``history`` only: per frame, not per tick. Only those are kept, so
        # that the ticks between two frames (thousands, flat out) do not keep every
        # call's record alive until the next.
        self._ticks_pending: deque[TickRecord] = deque(maxlen=history)
        # A tick ended since the world's marks were last taken onto the rows.
        self._marks_due = False
        #: Every finished tick's makespan, and whether a call of it degraded (index:
        #: tick - 1): the whole run at a glance, at 9 bytes a tick.
        self.makespans = array("d")
        self.degraded_ticks = bytearray()
        # Admission-to-answer latencies of the tick under way's calls, for its p50, as
        # far as a read under way took them in.
        self._latencies: list[float] = []
        # ``degradations_tick`` and ``degradations_total``: the manor world's kinds
        # until a run starts, then its world's.
        self._degradations_tick = empty_degradations()
        self._degradations_total = empty_degradations()
        self._calls_total = 0
        self._degraded_total = 0
        # Calls of the tick under way degraded (a retry counts again).
        self._degraded_in_tick = 0
        self._rejections = PlatformRejections()
        #: Calls of the tick under way planned.
        self.planned = 0
        # ``queued``, ``running``, ``finished``.
        self._queued = 0
        self._running = 0
        self._finished = 0
        self._rows: dict[str, CallerRow] = {}
        # The same rows by (caller, agent): found without formatting a key (a caller
        # kind is a str: it hashes as one); a caller not met yet is met as it is looked
        # up (``_meet_caller``).
        self._by_call = _RowsByCall(self._meet_caller)
        # Keys of rows changed since the agents table last took them (``take_dirty``).
        self._dirty: set[str] = set()
        # The rows with a call in the tick under way (or the last one).
        self._in_tick: list[CallerRow] = []
        #: The policy the tick under way runs under (a switch applies from the next).
        self.tick_policy: str | None = None
        self._loop: TickLoop | None = None
        self.story: deque[StoryItem] = deque(maxlen=story_kept)
        #: Story lines ever added (``story`` keeps only the newest).
        self.story_count = 0
        # Whether a row has a mark (``_take_marks``): with none, nothing is walked.
        self._marked = False
        self._names = {agent_id: agent.name for agent_id, agent in scene.agents.items()}
        self._calls_kept = calls_kept
        #: Calls each caller's history keeps (``CALLS_KEPT`` shared among the callers):
        #: one caller an agent until the world's first tick says how many there are.
        self.calls_per_caller = self._share(len(scene.agents))
        #: The world's caller kinds (``World.callers``): their labels, plurals and
        #: styles. Known, as the rows are, once the run starts.
        self.callers: Mapping[str, Caller] = {}

    # -- what the panels read (the notes taken into account first) ------------------------

    @property
    def version(self) -> int:
        """Bumped on every change; a panel redraws only when it moved."""
        self._catch_up()
        return self._version

    @property
    def rows(self) -> dict[str, CallerRow]:
        """The callers by ``caller:agent``, in the order they were first planned."""
        self._catch_up()
        self._take_marks_due()
        return self._rows

    @property
    def ticks(self) -> deque[TickFigures]:
        """The finished ticks the latency panel shows, oldest first (the newest
        ``history``)."""
        pending = self._ticks_pending
        if pending:
            for record in pending:
                calls = record.calls
                latencies = [call.finished_at - call.admitted_at for call in calls if call.admitted_at is not None]
                self._ticks.append(
                    TickFigures(
                        tick=record.tick, makespan=record.makespan, p50=percentile(latencies, 50),
                        max=max(latencies, default=0.0), calls=len(calls),
                        degraded=len(calls) - list(map(_outcome, calls)).count("ok"),
                    )  # fmt: skip
                )
            pending.clear()
        return self._ticks

    @property
    def degradations_tick(self) -> dict[str, dict[str, int]]:
        """caller kind -> reason -> count, zeros included, on the tick shown (a kind no
        world declared is added as it is counted)."""
        self._catch_up()
        return self._degradations_tick

    @property
    def degradations_total(self) -> dict[str, dict[str, int]]:
        """As ``degradations_tick``, since the start."""
        self._catch_up()
        return self._degradations_total

    @property
    def calls_total(self) -> int:
        self._catch_up()
        return self._calls_total

    @property
    def degraded_total(self) -> int:
        self._catch_up()
        return self._degraded_total

    @property
    def rejections(self) -> PlatformRejections:
        """Platform rejections since the start (the tick under way's as its calls end),
        as ``manor run`` counts them."""
        self._catch_up()
        return self._rejections

    @property
    def queued(self) -> int:
        """Calls of the tick under way waiting for the gate (a retry counts again)."""
        self._catch_up()
        return self._queued

    @property
    def running(self) -> int:
        """Calls of the tick under way admitted and not ended."""
        self._catch_up()
        return self._running

    @property
    def finished(self) -> int:
        """Calls of the tick under way ended (a retry counts again)."""
        self._catch_up()
        return self._finished

    # -- instrument hooks -----------------------------------------------------------------

    def run_started(self, loop: TickLoop) -> None:
        """Meet the loop: its world, and the calls' events it notes for this state from
        now on (``TickLoop.call_notes``), taken in bulk when the panels read them."""
        self._catch_up()
        if loop.call_notes is not None and loop.call_notes is not self._notes:
            raise ValueError("the loop's calls are already noted for another reader")
        loop.call_notes = self._notes
        self._loop = loop
        self.meet(loop.world)
        self._take_marks(loop.world)

    def meet(self, world: World) -> None:
        """Take in the world's caller kinds (``World.callers``: columns, labels, plurals,
        styles) and its first tick's callers as rows, in planning order (``plan``
        changes nothing); callers of later ticks join as they are first planned. The
        run's start does it; the dashboard does it as soon as its engine is built, so
        that a run paused before its first tick shows its callers."""
        if self.callers:
            return
        if not self._calls_total:
            self._degradations_tick = empty_degradations(world.callers)
            self._degradations_total = empty_degradations(world.callers)
        self.callers = world.callers
        for row in self._rows.values():  # met before the world: labelled by it now
            self._label(row)
        if not self._rows:
            first = world.plan()
            self.calls_per_caller = self._share(len({(request.caller, request.agent) for request in first}))
            for request in first:
                self._row(request.caller, request.agent)

    def tick_started(self, tick: int, requests: Sequence[Request]) -> None:
        """A tick starts: its rows are shown as queued when a read first finds it under
        way (``_show_tick_rows``); a tick that ends unread shows its calls' ends only
        (the ticks before it are taken in when the rows are read: not here)."""
        self.current_tick = tick
        if self._loop is not None:
            self.tick_policy = self._loop.policy.name
        if self._degraded_in_tick:  # else the last tick's counts are every kind so far at 0
            self._degradations_tick = empty_degradations(self._degradations_total)
        self._degraded_in_tick = 0
        self._latencies = []
        self.planned, self._queued, self._running, self._finished = len(requests), 0, 0, 0
        self._requests = requests
        self._version += 1

    def _show_tick_rows(self) -> None:
        """The tick under way's rows shown as queued (in planning order, rows met for the
        first time made), and the rows of the tick before with no call in this one as
        having none ("—", dimmed, their last line kept), not a state left from then."""
        requests, self._requests = self._requests, None
        if requests is None:
            return
        rows, mark = self._by_call, self._dirty.add
        previous, self._in_tick = self._in_tick, []
        in_tick = self._in_tick.append
        for request in requests:
            row = rows[request.caller, request.agent]
            row.state = "queued"
            mark(row.key)
            in_tick(row)
        for row in previous:
            if row.state != "queued":
                row.state, row.reason, row.error = "—", None, ""
                mark(row.key)

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        """The tick's calls kept (for the rows, taken in when read, and the histories)
        and counted: in C, but for the calls that did not end ok at the first try."""
        notes, out, taken, calls = self._notes, self._out, self._taken, record.calls
        if taken or out or len(notes) != len(calls):
            # A read took some of its calls in, or some were repaired (their records are
            # not the tick's): its calls as the state took them, those taken first. (Every
            # call has ended with its tick: its ``Heard`` has its record.)
            ended: Sequence[CallRecord] = tuple(map(_record, out + notes if out else notes))
            out.clear()
            self._rows_out.clear()
            self._taken = []
            kept: Sequence[CallRecord] = (*taken, *ended) if taken else ended
            # Its callers' rows made in planning order (after those of the ticks before
            # it): ``kept`` is in the order the calls started.
            if self._unread:
                self._take_ticks()
            for call in calls:
                self._row(call.caller, call.agent)
        else:  # the calls as the tick records them
            ended = kept = calls
        notes.clear()
        count = len(ended)
        ok = list(map(_outcome, ended)).count("ok")
        if ok != count or sum(map(_attempts, ended)) != count:
            for call in ended:
                if call.outcome != "ok" or call.attempts != 1:
                    self._count_call(call)
        self._finished += count
        self._calls_total += count
        self._queued = self._running = 0
        self._requests = None
        self._unread.append(kept)
        # Kept for the histories: the oldest ticks let go while the others hold
        # ``calls_kept`` calls and each caller's share of ticks.
        held, self._held = self._kept, self._held + len(kept)
        held.append(kept)
        while len(held) > self.calls_per_caller and self._held - len(held[0]) >= self._calls_kept:
            self._held -= len(held.popleft())
        self._ticks_pending.append(record)
        self.makespans.append(record.finished_at - record.started_at)
        self.degraded_ticks.append(ok != count if kept is calls else list(map(_outcome, calls)).count("ok") != len(calls))
        self.tick = record.tick
        self.current_tick = None
        self._marks_due = self._loop is not None
        # Only degraded turns fold: a story with none is taken as it is (the entries
        # looked at by ``map``, not a generator: no Python frame an entry).
        items = fold_story(story, _itself, self.callers) if any(map(_fallback, story)) else story
        self.story.extend(items)
        self.story_count += len(items)
        self._version += 1
        if len(self._unread) > _UNREAD_KEPT:
            self._take_ticks()

    def _calls_of(self, caller: str, agent: str) -> list[CallRecord]:
        """``caller:agent``'s last calls (``calls_per_caller`` at most), oldest first:
        found in the tick under way's calls taken in so far and the ticks kept, newest
        first, each tick's looked at in C."""
        wanted = self.calls_per_caller
        key = (caller, agent)
        found: list[list[CallRecord]] = []
        count = 0
        for calls in (self._taken, *reversed(self._kept)):
            if count >= wanted:
                break
            mine = list(compress(calls, map(key.__eq__, map(_key, calls))))
            if mine:
                found.append(mine)
                count += len(mine)
        history = [call for mine in reversed(found) for call in mine]
        return history[len(history) - wanted :] if count > wanted else history

    def _take_ticks(self) -> None:
        """The ticks finished since the last read onto the rows, as if each had been
        taken as it ended: the newest tick's rows show its calls (each row its last),
        the others none ("—", their last line kept); a row's line is its newest ok
        call's, its latency its newest admitted call's. The ticks are looked at newest
        first, and a tick whose every row has found both (the usual tick behind the
        newest) is passed over in C; a row met for the first time is made, with the
        rest of its tick's callers, in the order the state took the tick's calls
        (its planning order, but in a tick with repairs), oldest tick first."""
        ticks, self._unread = self._unread, []
        rows = self._by_call
        # (caller, agent) -> [its newest ok call's line, its newest latency] (None: not
        # found yet); ``resolved``: both found.
        found: dict[tuple[str, str], list] = {}
        resolved: set[tuple[str, str]] = set()
        done = resolved.__contains__
        new: list[int] = []  # ticks with a caller met for the first time
        for index in range(len(ticks) - 1, -1, -1):
            calls = ticks[index]
            if all(map(done, map(_key, calls))):
                continue
            met = False
            for call in reversed(calls):
                key = (call.caller, call.agent)
                if key in resolved:
                    continue
                if not met and key not in rows:
                    met = True
                    new.append(index)
                values = found.get(key)
                if values is None:
                    values = found[key] = [None, None]
                if values[0] is None and call.outcome == "ok":
                    values[0] = call.text
                if values[1] is None and call.admitted_at is not None:
                    values[1] = call.finished_at - call.admitted_at
                if values[0] is not None and values[1] is not None and key in rows:
                    resolved.add(key)  # (a row not made yet: its oldest tick is still sought)
        for index in reversed(new):  # oldest first, each in its planning order
            for call in ticks[index]:
                self._row(call.caller, call.agent)
        dirty = self._dirty.add
        for key, (line, latency) in found.items():
            row = rows[key]
            if line is not None:
                row.line = line
            if latency is not None:
                row.latency = latency
            dirty(row.key)
        # The newest tick's rows: each its last call's state.
        newest: dict[CallerRow, CallRecord] = {rows[call.caller, call.agent]: call for call in ticks[-1]}
        for row, call in newest.items():
            if call.outcome == "ok":
                row.state, row.reason, row.error = "done", None, ""
            else:
                row.state, row.reason, row.error = "degraded", call.reason, call.error
        for row in self._in_tick:
            if row not in newest:
                row.state, row.reason, row.error = "—", None, ""
                dirty(row.key)
        self._in_tick = list(newest)

    # -- the notes ------------------------------------------------------------------------

    def _catch_up(self) -> None:
        """Take the ticks finished since the last read onto the rows (``_take_ticks``),
        then the tick under way's calls started since the last catch-up, and those
        still out at it, into the counts and the rows, as if each had been taken as it
        happened.

        A call's row takes only its last call ended in the catch-up (its state, line,
        latency), unless a call ended in a way the row says more of (degraded, retried,
        never admitted): those are taken one by one, in order."""
        if self._unread:
            self._take_ticks()
        notes, out = self._notes, self._out
        if self._requests is not None:  # read while the tick is under way
            self._show_tick_rows()
        if not notes and not out:
            return
        if out:
            heards = out + notes
            out.clear()
        else:
            heards = notes.copy()
        notes.clear()
        rows, dirty = self._by_call, self._dirty
        # Each row's last call ended ok, admitted, at the first try (``last``); the rows
        # of the others, taken one by one.
        last: dict[CallerRow, CallRecord] = {}
        still_out, taken = out.append, self._taken.append
        for heard in heards:
            record = heard.record
            if record is None:
                still_out(heard)
                continue
            taken(record)
            row = rows[record.caller, record.agent]
            if record.outcome == "ok" and record.attempts == 1 and record.admitted_at is not None:
                last[row] = record
            else:
                self._take_call(row, record, last)
        records = len(heards) - len(out)
        if records:
            self._version += 1
            self._finished += records
            self._calls_total += records
            _done(last.items(), dirty.add)
            self._latencies.extend(
                heard.record.finished_at - heard.record.admitted_at  # type: ignore[union-attr,operator]
                for heard in heards
                if heard.record is not None and heard.record.admitted_at is not None
            )
        self._take_calls_out()

    def _take_call(self, row: CallerRow, record: CallRecord, last: dict[CallerRow, CallRecord]) -> None:
        """A call that ended degraded, retried or never admitted, onto its row and the
        counts (after the row's call before it in the same catch-up, if any)."""
        earlier = last.pop(row, None)
        if earlier is not None:  # its line and latency stay, under this call's state
            _done(((row, earlier),), self._dirty.add)
        self._dirty.add(row.key)
        self._count_call(record)
        if record.outcome == "ok":
            _done(((row, record),), self._dirty.add)
            return
        if record.admitted_at is not None:
            row.latency = record.finished_at - record.admitted_at
        row.state, row.reason, row.error = "degraded", record.reason, record.error

    def _count_call(self, record: CallRecord) -> None:
        """A call that ended degraded or retried into the counts: degradations, the
        tick's too, and rejections (counted as the call ends, not as its tick does: the
        gate panel's rejections grow with the degraded panel's platform_rejected)."""
        if record.outcome != "ok":
            reason = record.reason or "provider_error"
            _count(self._degradations_tick, record.caller, reason)
            _count(self._degradations_total, record.caller, reason)
            self._degraded_total += 1
            self._degraded_in_tick += 1
        self._rejections.count((record,))

    def _take_calls_out(self) -> None:
        """Rows with a call out show it queued or running (a retry's row included),
        and the counts follow: looked at on every read while calls are out, since a
        call is admitted, or ends, with nothing noted."""
        queued = running = 0
        rows_out = self._rows_out
        if not self._out:
            rows_out.clear()
        else:
            rows, dirty = self._by_call, self._dirty
            changed = False
            for heard in self._out:
                state: CallerState
                if heard.at is None:
                    queued, state = queued + 1, "queued"
                else:
                    running, state = running + 1, "running"
                row = rows_out.get(heard)
                if row is None:
                    request = heard.request
                    row = rows_out[heard] = rows[request.caller, request.agent]
                if row.state != state:
                    row.state, changed = state, True
                    dirty.add(row.key)
            if changed:
                self._version += 1
        if (queued, running) != (self._queued, self._running):
            self._queued, self._running = queued, running
            self._version += 1

    # -- the tick shown -------------------------------------------------------------------

    @property
    def shown(self) -> ShownTick | None:
        """The tick the panels show: the one under way, or the last finished (``None``
        before the first tick starts)."""
        self._catch_up()
        if self.current_tick is not None:
            latencies = self._latencies
            return ShownTick(
                tick=self.current_tick, under_way=True, makespan=None,
                p50=percentile(latencies, 50), max=max(latencies, default=0.0),
                done=self._finished, planned=self.planned,
                degraded=sum(n for counts in self._degradations_tick.values() for n in counts.values()),
            )  # fmt: skip
        ticks = self.ticks
        if not ticks:
            return None
        last = ticks[-1]
        return ShownTick(
            tick=last.tick, under_way=False, makespan=last.makespan, p50=last.p50, max=last.max,
            done=last.calls, planned=last.calls, degraded=last.degraded,
        )  # fmt: skip

    # -- rows -----------------------------------------------------------------------------

    def take_dirty(self) -> set[str]:
        """The keys of rows changed since the last call (for the one table that shows them)."""
        self._catch_up()
        self._take_marks_due()
        dirty, self._dirty = self._dirty, set()
        return dirty

    def _take_marks_due(self) -> None:
        """The world's marks onto the rows if a tick ended since they were last taken:
        when the rows are read, not at every tick's end."""
        if self._marks_due and self._loop is not None:
            self._marks_due = False
            self._take_marks(self._loop.world)

    def _take_marks(self, world: World) -> None:
        """The world's marks on its agents (``world_marks``) onto their rows."""
        marks = world_marks(world)
        if not marks and not self._marked:
            return
        # An agent marked before it had a call (a player killed on the first night,
        # before speaking) has a row all the same, of no caller kind, so that it shows.
        seen = {row.agent for row in self._rows.values()}
        for agent in marks:
            if agent not in seen:
                self._row("", agent)
        for row in self._rows.values():
            mark = marks.get(row.agent, "")
            if mark != row.mark:
                row.mark = mark
                self._dirty.add(row.key)
        self._marked = bool(marks)

    def _meet_caller(self, caller: str, agent: str) -> CallerRow:
        """The row of a call's ``caller:agent`` met for the first time (``_by_call``
        looks it up): while its tick's rows are not shown yet, they are all made first,
        in planning order."""
        for request in self._requests or ():
            self._row(request.caller, request.agent)
        return self._row(caller, agent)

    def _row(self, caller: str, agent: str) -> CallerRow:
        row = self._by_call.get((caller, agent))
        if row is None:
            row = CallerRow(str(caller), agent, self._names.get(agent, agent), history=partial(self._calls_of, caller, agent))
            self._label(row)
            self._rows[row.key] = self._by_call[caller, agent] = row
            self._dirty.add(row.key)
        return row

    def take_rows(self, other: DashboardState) -> None:
        """A row for every caller ``other`` has, in its order, after this one's own: a
        replay started again keeps the table its reader was in (callers a world plans
        only from a later tick on included)."""
        for row in other.rows.values():
            self._row(row.caller, row.agent)

    def _label(self, row: CallerRow) -> None:
        """``row``'s kind as its world labels it (``Caller.label``, ``Caller.short``)."""
        caller = caller_of(self.callers, row.caller)
        row.kind, row.short = caller.label, caller.short

    def _share(self, callers: int) -> int:
        """Calls each of ``callers`` callers keeps of ``calls_kept``."""
        return min(_CALLS_PER_CALLER, max(1, self._calls_kept // max(1, callers))) if self._calls_kept else 0


@final
class _RowsByCall(dict[tuple[str, str], CallerRow]):
    """The rows by (caller, agent); looked up, a pair not met yet is met (``meet``
    makes its row and returns it): the lookup of every call stays a dict's own, the
    first meeting is the only Python call."""

    def __init__(self, meet: Callable[[str, str], CallerRow]) -> None:
        super().__init__()
        self._meet = meet

    def __missing__(self, key: tuple[str, str]) -> CallerRow:
        return self._meet(*key)


def _done(ended: Iterable[tuple[CallerRow, CallRecord]], changed: Callable[[str], object]) -> None:
    """Each row's last call ended ok with its record: done, its line, and its latency
    if it was admitted (a call never admitted keeps the row's latency before it); each
    row's key to ``changed``. Rows and records in bulk: a catch-up's rows in one call."""
    for row, record in ended:
        row.state, row.line, row.reason, row.error = "done", record.text, None, ""
        if record.admitted_at is not None:
            row.latency = record.finished_at - record.admitted_at
        changed(row.key)


#: A story entry's fallback ("" when it is not a degraded turn).
_fallback = attrgetter("fallback")

#: A call's record, from its ``Heard``; a record's outcome, tries, and row.
_record = attrgetter("record")
_outcome = attrgetter("outcome")
_attempts = attrgetter("attempts")
_key = attrgetter("caller", "agent")


def _itself(entry: StoryEntry) -> StoryEntry:
    return entry


def _count(counts: dict[str, dict[str, int]], caller: str, reason: str) -> None:
    """One more degraded call of ``caller`` for ``reason``; a caller kind or reason the
    table does not know yet (a world's own kind) gets its row and column."""
    by_reason = counts.get(caller)
    if by_reason is None:
        by_reason = counts[caller] = dict.fromkeys(REASONS, 0)
    by_reason[reason] = by_reason.get(reason, 0) + 1
