"""What the dashboard shows, kept up to date by the tick loop's instrument hooks.

The engine writes, the dashboard reads on a timer (about ten times a second), so a
flood of call events costs a few dictionary updates each and never a redraw: updates
are coalesced by construction. Both run on one thread (trio in guest mode on Textual's
loop), so there are no locks.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, final

import attrs

from ..calls import CallerKind, Request
from ..content import Scene
from ..instruments import Instrument
from ..records import CallRecord, StoryEntry, TickRecord
from ..statistics import PlatformRejections, empty_degradations, percentile

if TYPE_CHECKING:
    from ..tickloop import TickLoop

__all__ = ["CallerRow", "CallerState", "DashboardState", "TickFigures"]

CallerState = Literal["—", "queued", "running", "done", "degraded"]

#: How a caller kind is labelled in the agents table.
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


@final
class DashboardState(Instrument):
    """Counts, rows and story lines for the dashboard, fed by the tick loop.

    Args:
        scene: names the callers; their rows exist, in planning order, from the start.
        history: finished ticks kept for the latency chart.
        story_kept: story lines kept for the story panel.
    """

    def __init__(self, scene: Scene, *, history: int = 120, story_kept: int = 500) -> None:
        #: Bumped on every change; a panel redraws only when it moved.
        self.version = 0
        #: The tick under way, or ``None`` between ticks.
        self.current_tick: int | None = None
        #: The last finished tick (0 before the first).
        self.tick = 0
        self.ticks: deque[TickFigures] = deque(maxlen=history)
        self.degradations_tick = empty_degradations()
        self.degradations_total = empty_degradations()
        self.calls_total = 0
        self.degraded_total = 0
        #: Platform rejections of the finished ticks, as ``manor run`` counts them.
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
        self.story: deque[StoryEntry] = deque(maxlen=story_kept)
        #: Story lines ever added (``story`` keeps only the newest).
        self.story_count = 0
        self._names = {agent_id: agent.name for agent_id, agent in scene.agents.items()}
        for agent_id in scene.characters:
            self._row(CallerKind.CHARACTER, agent_id)
        self._row(CallerKind.NARRATOR, scene.narrator[0])
        self._row(CallerKind.SUMMARISER, scene.summariser[0])
        if scene.spec.beats.per_tick:
            for speaker in scene.spec.beats.speakers:
                self._row(CallerKind.SCENE_BEAT, speaker)

    # -- instrument hooks -----------------------------------------------------------------

    def run_started(self, loop: TickLoop) -> None:
        self._loop = loop

    def tick_started(self, tick: int, requests: Sequence[Request]) -> None:
        self.current_tick = tick
        if self._loop is not None:
            self.tick_policy = self._loop.policy.name
        self.degradations_tick = empty_degradations()
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
            self.degradations_tick[record.caller][reason] += 1
            self.degradations_total[record.caller][reason] += 1
            self.degraded_total += 1
        self.version += 1

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        latencies = [call.latency for call in record.calls if call.admitted_at is not None]
        self.ticks.append(
            TickFigures(
                tick=record.tick,
                makespan=record.makespan,
                p50=percentile(latencies, 50),
                max=max(latencies, default=0.0),
                calls=len(record.calls),
                degraded=sum(1 for call in record.calls if not call.ok),
            )
        )
        self.rejections.count(record.calls)
        self.tick = record.tick
        self.current_tick = None
        self.story.extend(story)
        self.story_count += len(story)
        self.version += 1

    # -- rows -----------------------------------------------------------------------------

    def take_dirty(self) -> set[str]:
        """The keys of rows changed since the last call (for the one table that shows them)."""
        dirty, self.dirty = self.dirty, set()
        return dirty

    def _row(self, caller: str, agent: str) -> CallerRow:
        row = self._by_call.get((caller, agent))
        if row is None:
            row = CallerRow(str(caller), agent, self._names.get(agent, agent))
            self.rows[row.key] = self._by_call[caller, agent] = row
            self.dirty.add(row.key)
        return row
