"""What the dashboard shows, kept up to date by the tick loop's instrument hooks.

The engine writes, the dashboard reads on a timer (about ten times a second), so a
flood of call events costs a few dictionary updates each and never a redraw: updates
are coalesced by construction. Both run on one thread (trio in guest mode on Textual's
loop), so there are no locks.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, final

import attrs

from ..calls import CallerKind, Request
from ..content import Scene
from ..errors import REASONS
from ..folds import Fold, fold_story
from ..instruments import Instrument
from ..records import CallRecord, StoryEntry, TickRecord
from ..statistics import PlatformRejections, empty_degradations, percentile
from ..worlds.base import world_marks

if TYPE_CHECKING:
    from ..tickloop import TickLoop
    from ..worlds import World

__all__ = ["CALLS_KEPT", "CallerRow", "CallerState", "DashboardState", "ShownTick", "StoryItem", "TickFigures"]

CallerState = Literal["—", "queued", "running", "done", "degraded"]

#: A line of the dashboard's story: an entry, or many alike degraded turns folded.
StoryItem = StoryEntry | Fold[StoryEntry]

#: Calls kept for the agents' histories, live, over all callers together: each caller
#: keeps its last ``CALLS_KEPT / callers`` (between 1 and ``_CALLS_PER_CALLER``), so a
#: thousand agents cost the same memory as ten (a replay reads them from the save).
CALLS_KEPT = 50_000
_CALLS_PER_CALLER = 500

#: How a caller kind is labelled in the agents table (another kind by its own name).
_KIND_LABELS = {
    CallerKind.CHARACTER: "character",
    CallerKind.NARRATOR: "narrator",
    CallerKind.SUMMARISER: "summariser",
    CallerKind.SCENE_BEAT: "beat",
}


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
    #: Its last calls, oldest first (as many as the dashboard keeps per caller).
    calls: deque[CallRecord] = attrs.field(factory=deque)
    #: ``caller:agent``, what the agents table knows it by (made once: hooks use it per call).
    key: str = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.key = f"{self.caller}:{self.agent}"

    @property
    def kind(self) -> str:
        return _KIND_LABELS.get(self.caller, self.caller)


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
        #: Bumped on every change; a panel redraws only when it moved.
        self.version = 0
        #: The tick under way, or ``None`` between ticks.
        self.current_tick: int | None = None
        #: The last finished tick (0 before the first).
        self.tick = 0
        self.ticks: deque[TickFigures] = deque(maxlen=history)
        #: Every finished tick's makespan, and whether a call of it degraded (index:
        #: tick - 1): the whole run at a glance, at 9 bytes a tick.
        self.makespans = array("d")
        self.degraded_ticks = bytearray()
        # Admission-to-answer latencies of the tick under way's calls, for its p50.
        self._latencies: list[float] = []
        #: caller kind -> reason -> count, zeros included, on the tick shown and since
        #: the start: the manor world's kinds until a run starts, then its world's (a
        #: kind no world declared is added as it is counted).
        self.degradations_tick = empty_degradations()
        self.degradations_total = empty_degradations()
        self.calls_total = 0
        self.degraded_total = 0
        #: Platform rejections since the start (the tick under way's as its calls end), as
        #: ``manor run`` counts them.
        self.rejections = PlatformRejections()
        #: Calls of the tick under way: planned, and by state (a retry counts again).
        self.planned = 0
        self.queued = 0
        self.running = 0
        self.finished = 0
        self.rows: dict[str, CallerRow] = {}
        # The same rows by (caller, agent): the hooks, which run on every call, find a
        # row without formatting its key (a caller kind is a str: it hashes as one).
        self._by_call: dict[tuple[str, str], CallerRow] = {}
        #: Keys of rows changed since the agents table last took them.
        self.dirty: set[str] = set()
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
        callers = len(scene.characters) + 2 + (len(scene.spec.beats.speakers) if scene.spec.beats.per_tick else 0)
        #: Calls each caller's history keeps (``CALLS_KEPT`` shared among the callers).
        self.calls_per_caller = min(_CALLS_PER_CALLER, max(1, calls_kept // callers)) if calls_kept else 0
        if scene.spec.world in ("", "manor"):
            for agent_id in scene.characters:
                self._row(CallerKind.CHARACTER, agent_id)
            self._row(CallerKind.NARRATOR, scene.narrator[0])
            self._row(CallerKind.SUMMARISER, scene.summariser[0])
            if scene.spec.beats.per_tick:
                for speaker in scene.spec.beats.speakers:
                    self._row(CallerKind.SCENE_BEAT, speaker)
        # Another world's callers are known once it can plan: ``run_started``.

    # -- instrument hooks -----------------------------------------------------------------

    def run_started(self, loop: TickLoop) -> None:
        self._loop = loop
        if not self.calls_total:
            self.degradations_tick = empty_degradations(loop.world.callers)
            self.degradations_total = empty_degradations(loop.world.callers)
        if not self.rows:
            # The first tick's callers, in planning order (``plan`` changes nothing);
            # callers of later ticks join as they are first planned.
            for request in loop.world.plan():
                self._row(request.caller, request.agent)
        self._take_marks(loop.world)

    def tick_started(self, tick: int, requests: Sequence[Request]) -> None:
        self.current_tick = tick
        if self._loop is not None:
            self.tick_policy = self._loop.policy.name
        self.degradations_tick = empty_degradations(self.degradations_total)  # every kind so far
        self._latencies = []
        self.planned, self.queued, self.running, self.finished = len(requests), 0, 0, 0
        rows, dirty = self._by_call, self.dirty
        previous, self._in_tick = self._in_tick, []
        for request in requests:
            row = rows.get((request.caller, request.agent)) or self._row(request.caller, request.agent)
            row.state = "queued"
            dirty.add(row.key)
            self._in_tick.append(row)
        # A row shows its caller's call of this tick: one with none this tick shows so
        # ("—", dimmed, its last line kept), not a state left from an earlier tick.
        for row in previous:
            if row.state != "queued":
                row.state, row.reason, row.error = "—", None, ""
                dirty.add(row.key)
        self.version += 1

    def call_started(self, request: Request) -> None:
        self.queued += 1
        row = self._by_call.get((request.caller, request.agent)) or self._row(request.caller, request.agent)
        row.state = "queued"
        self.dirty.add(row.key)
        self.version += 1

    def call_admitted(self, request: Request, admitted_at: float) -> None:
        self.queued -= 1
        self.running += 1
        row = self._by_call.get((request.caller, request.agent)) or self._row(request.caller, request.agent)
        row.state = "running"
        self.dirty.add(row.key)
        self.version += 1

    def call_finished(self, record: CallRecord) -> None:
        if record.admitted_at is None:
            self.queued -= 1
        else:
            self.running -= 1
        self.finished += 1
        self.calls_total += 1
        row = self._by_call.get((record.caller, record.agent)) or self._row(record.caller, record.agent)
        self.dirty.add(row.key)
        row.calls.append(record)
        if record.admitted_at is not None:
            self._latencies.append(record.latency)
        if record.outcome == "ok":
            row.state = "done"
            row.latency = record.latency
            row.line = record.text
            row.reason = None
            row.error = ""
        else:
            row.state = "degraded"
            if record.admitted_at is not None:
                row.latency = record.latency
            row.reason = record.reason
            row.error = record.error
            reason = record.reason or "provider_error"
            _count(self.degradations_tick, record.caller, reason)
            _count(self.degradations_total, record.caller, reason)
            self.degraded_total += 1
        if record.outcome != "ok" or record.attempts > 1:
            # Counted as the call ends, not as its tick does: the gate panel's
            # rejections grow with the degraded panel's platform_rejected.
            self.rejections.count((record,))
        self.version += 1

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        latencies = [call.latency for call in record.calls if call.admitted_at is not None]
        degraded = sum(1 for call in record.calls if not call.ok)
        self.ticks.append(
            TickFigures(
                tick=record.tick,
                makespan=record.makespan,
                p50=percentile(latencies, 50),
                max=max(latencies, default=0.0),
                calls=len(record.calls),
                degraded=degraded,
            )
        )
        self.makespans.append(record.makespan)
        self.degraded_ticks.append(degraded > 0)
        self.tick = record.tick
        self.current_tick = None
        if self._loop is not None:
            self._take_marks(self._loop.world)
        items = fold_story(story, lambda entry: entry)
        self.story.extend(items)
        self.story_count += len(items)
        self.version += 1

    # -- the tick shown -------------------------------------------------------------------

    @property
    def shown(self) -> ShownTick | None:
        """The tick the panels show: the one under way, or the last finished (``None``
        before the first tick starts)."""
        if self.current_tick is not None:
            latencies = self._latencies
            return ShownTick(
                tick=self.current_tick, under_way=True, makespan=None,
                p50=percentile(latencies, 50), max=max(latencies, default=0.0),
                done=self.finished, planned=self.planned,
                degraded=sum(n for counts in self.degradations_tick.values() for n in counts.values()),
            )  # fmt: skip
        if not self.ticks:
            return None
        last = self.ticks[-1]
        return ShownTick(
            tick=last.tick, under_way=False, makespan=last.makespan, p50=last.p50, max=last.max,
            done=last.calls, planned=last.calls, degraded=last.degraded,
        )  # fmt: skip

    # -- rows -----------------------------------------------------------------------------

    def take_dirty(self) -> set[str]:
        """The keys of rows changed since the last call (for the one table that shows them)."""
        dirty, self.dirty = self.dirty, set()
        return dirty

    def _take_marks(self, world: World) -> None:
        """The world's marks on its agents (``world_marks``) onto their rows."""
        marks = world_marks(world)
        if not marks and not self._marked:
            return
        # An agent marked before it had a call (a player killed on the first night,
        # before speaking) has a row all the same, of no caller kind, so that it shows.
        seen = {row.agent for row in self.rows.values()}
        for agent in marks:
            if agent not in seen:
                self._row("", agent)
        for row in self.rows.values():
            mark = marks.get(row.agent, "")
            if mark != row.mark:
                row.mark = mark
                self.dirty.add(row.key)
        self._marked = bool(marks)

    def _row(self, caller: str, agent: str) -> CallerRow:
        row = self._by_call.get((caller, agent))
        if row is None:
            row = CallerRow(str(caller), agent, self._names.get(agent, agent), calls=deque(maxlen=self.calls_per_caller))
            self.rows[row.key] = self._by_call[caller, agent] = row
            self.dirty.add(row.key)
        return row


def _count(counts: dict[str, dict[str, int]], caller: str, reason: str) -> None:
    """One more degraded call of ``caller`` for ``reason``; a caller kind or reason the
    table does not know yet (a world's own kind) gets its row and column."""
    by_reason = counts.get(caller)
    if by_reason is None:
        by_reason = counts[caller] = dict.fromkeys(REASONS, 0)
    by_reason[reason] = by_reason.get(reason, 0) + 1
