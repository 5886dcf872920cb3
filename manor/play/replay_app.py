"""``manor play --replay SAVE``: a recorded run, shown by the dashboard as it replays.

The recorded ticks run again through the engine with the replay backend (each call gets
its recorded response after its recorded latency) under a fresh paced clock, so what
the panels show is what happened, and the world hash is checked against the recording
after every tick. Play, pause, step, "next event" (the next tick where a call
degraded), restart, speed, and a position bar: going back means replaying from the
start at full speed up to the tick asked for (a world cannot run backwards).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from pathlib import Path
from statistics import fmean

import trio
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Input

from ..records import CallRecord
from ..replay.recorded import RecordedRun, ReplayEngine
from ..saves import Save
from ..tick.driver import TickDriver
from .app import PlayApp
from ..paced_clock import PacedClock
from .makespans import RunTicks
from .messages import Seek
from .speed import SECONDS_PER_TICK, faster, nearest
from .state import DashboardState
from .widgets import AgentsTable, Dashboard, StoryLog
from .widgets.replay_bar import ReplayBar

__all__ = ["ReplayApp", "replay_engine"]


def replay_engine(recording: RecordedRun) -> tuple[ReplayEngine, DashboardState]:
    """An engine that replays ``recording`` with the recorded settings, and the
    dashboard's state it feeds (run ``changes.run`` beside the loop)."""
    state = DashboardState(recording.save.scene, calls_kept=0)  # the histories are in the save
    replaying = recording.engine([state])
    state.meet(replaying.engine.loop.world)
    return replaying, state


class ReplayApp(PlayApp):
    """The dashboard on a save file.

    Args:
        save: the recording (with at least one whole tick).
        speed: simulated seconds per wall second; by default a recorded tick takes
            about a second.
    """

    # Priority: the agents table, focused, would take the arrows to scroll.
    BINDINGS = [
        Binding("left", "seek(-1)", "seek", key_display="←/→", priority=True),
        Binding("right", "seek(1)", "later tick", show=False, priority=True),
        Binding("left_square_bracket", "seek(-10)", "10 ticks back", show=False, priority=True),
        Binding("right_square_bracket", "seek(10)", "10 ticks on", show=False, priority=True),
        Binding("home", "seek(-1_000_000)", "first tick", show=False, priority=True),
        Binding("end", "seek(1_000_000)", "last tick", show=False, priority=True),
        Binding("e", "next_event", "event"),
        Binding("r", "restart", "restart"),
        # What a replay does not do — change the recorded run (``manor replay`` asks
        # "what if"), or record itself — its keys say, rather than doing nothing.
        Binding("plus,equals_sign,minus,underscore", "live_only('gate')", "gate", show=False),
        Binding("p", "live_only('policy')", "policy", show=False),
        Binding("s", "live_only('save')", "save", show=False),
    ]

    def __init__(self, save: Save, *, speed: float | None = None) -> None:
        save.require_ticks()
        self.save = save
        self.recording = RecordedRun.from_save(save)
        replaying, state = replay_engine(self.recording)
        engine, self.check, self.changes = replaying.engine, replaying.check, replaying.changes
        if speed is None:
            speed = nearest(fmean(t.makespan for t in save.records) / SECONDS_PER_TICK)
        config = engine.config.settings.run
        driver = TickDriver(engine.loop, interval=config.tick_interval_s)
        super().__init__(engine, state=state, driver=driver, clock=PacedClock(speed), ticks=len(save.ticks))
        self.total = len(save.ticks)
        #: The speed the user chose: a seek runs at full speed and comes back to it;
        #: seeking, restarting, reaching the end never change it.
        self.speed = speed
        # A seek in progress: the tick it goes to.
        self._seeking: int | None = None
        records = save.records
        #: Ticks in which some call degraded (for ``e``, and marked on the bar).
        self._degraded_ticks = [record.tick for record in records if any(not call.ok for call in record.calls)]
        self._makespans = [record.makespan for record in records]
        self._degraded = bytearray(any(not call.ok for call in record.calls) for record in records)
        # (caller, agent) -> its recorded calls, made the first time its history is asked for.
        self._calls: dict[tuple[str, str], tuple[list[int], list[CallRecord]]] = {}

    async def engine_main(self) -> None:
        """The tick driver, and beside it the recorded changes made during ticks."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.changes.run)
            await self.driver.run(self.ticks)
            nursery.cancel_scope.cancel()

    def stopped_after(self) -> str:
        return f"at tick {self.state.tick} of {self.total}"

    def compose_controls(self) -> ComposeResult:
        yield ReplayBar(Path(self.save.name).name, self.total, degraded=self._degraded_ticks, id="replay-bar")

    # -- the recording ----------------------------------------------------------------

    def agent_calls(self, caller: str, agent: str) -> Sequence[CallRecord]:
        """The recorded calls of ``agent`` as a ``caller`` up to the tick shown."""
        key = (caller, agent)
        if key not in self._calls:
            calls = [call for record in self.save.records for call in record.calls if (call.caller, call.agent) == key]
            self._calls[key] = ([call.tick for call in calls], calls)
        ticks, calls = self._calls[key]
        return calls[: bisect_right(ticks, self.state.tick)]

    def agent_calls_kept(self) -> int | None:
        return None  # the save has them all

    def run_ticks(self) -> RunTicks:
        """The whole recording's makespans, whether a call of each tick degraded, the tick shown."""
        return RunTicks(self._makespans, self._degraded, self.state.tick)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "seek" and isinstance(self.focused, Input):
            return False  # the arrows, Home and End move in the story's filter prompt
        return super().check_action(action, parameters)

    # -- drawing ----------------------------------------------------------------------

    def refresh_panels(self) -> None:
        super().refresh_panels()
        if not self.is_running or self._recomposing:
            return
        tick = self.state.tick
        assert self.clock is not None
        clock, speed = self.clock, self.speed
        if self._seeking is not None and tick >= self._seeking:
            self._seeking = None
            if not self.guest.finished:
                self.in_engine(lambda: setattr(clock, "speed", speed))
        if self.guest.finished and clock.speed != speed:
            clock.speed = speed  # no trio run is left to plan a wait: set it here
        mismatch = self.check.mismatch
        if mismatch is not None:
            verdict, style = f"differs from the recording at tick {mismatch.tick}", "bold red"
        elif tick:
            verdict, style = "matches the recording", "green"
        else:
            verdict, style = "", ""
        self.query_one(ReplayBar).show(tick, verdict, style)

    # -- actions ----------------------------------------------------------------------

    async def action_toggle_pause(self) -> None:
        if self.guest.finished:  # at the end: play again from the start
            await self.seek(0)
        self.in_engine(self.driver.toggle)

    def action_speed(self, steps: int) -> None:
        self.speed = faster(self.speed, steps)
        if self._seeking is None and not self.guest.finished:
            super().action_speed(steps)
        # Seeking, it goes on at this speed once there; at the end, the next replay does.
        self.refresh_panels()

    def action_live_only(self, control: str) -> None:
        """Say why a key of the live dashboard does nothing here."""
        loop, name = self.engine.loop, Path(self.save.name).name
        said = {
            "gate": f"a replay keeps the recorded gate ({loop.gate.size}); manor replay {name} --gate-size N asks what if",
            "policy": f"a replay keeps the recorded policy ({loop.policy.name}); manor replay {name} --policy NAME asks what if",
            "save": f"a replay records nothing: the recording is {self.save.name}",
        }
        self.notify(said[control], severity="warning", markup=False)

    async def action_seek(self, delta: int) -> None:
        base = self._seeking if self._seeking is not None else self.state.tick
        await self.seek(base + delta)

    async def action_restart(self) -> None:
        await self.seek(0)

    async def action_next_event(self) -> None:
        """Seek to the next tick in which some call degraded (the recording says which),
        or say at once that none lies ahead."""
        base = self._seeking if self._seeking is not None else self.state.tick
        ahead = next((tick for tick in self._degraded_ticks if tick > base), None)
        if ahead is None:
            self.notify(f"no call degrades after tick {base} of {self.total}", severity="warning")
            return
        await self.seek(ahead)

    async def on_seek(self, message: Seek) -> None:
        await self.seek(message.tick)

    async def seek(self, tick: int) -> None:
        """Show the world at the end of recorded tick ``tick``, paused.

        Forward from a paused tick, the ticks between run at full speed; anything else
        replays from the start. Seeks asked for before the last one got there add their
        steps to it: keys pressed faster than the ticks run go where they say.
        """
        tick = max(0, min(self.total, tick))
        # Where the driver stops once the steps asked for are done: the seek under way's
        # tick (its steps may not even have reached the trio run), or the tick shown.
        bound = self._seeking if self._seeking is not None else self.state.tick
        state = self.driver.statistics().state
        between = state == "paused" or (state == "stepping" and self._seeking is not None)
        if between and not self.guest.finished and tick >= bound:
            steps = tick - bound
        else:
            await self._restart()
            steps = tick
        if not steps:
            return
        assert self.clock is not None
        clock, driver = self.clock, self.driver
        self._seeking = tick

        def go() -> None:
            clock.speed = math.inf
            for _ in range(steps):
                driver.step()

        self.in_engine(go)

    async def _restart(self) -> None:
        """A fresh engine at tick 0, paused, with fresh panels and a fresh clock."""
        await self.stop_engine()
        self._seeking = None
        self._pending.clear()  # for the engine just replaced
        seen = self.state
        replaying, self.state = replay_engine(self.recording)
        self.engine, self.check, self.changes = replaying.engine, replaying.check, replaying.changes
        self.state.take_rows(seen)
        self.driver = TickDriver(self.engine.loop, paused=True, interval=self.driver.interval)
        # Recorded times start at 0: so must the replay's, to the bit.
        self.clock = PacedClock(self.speed)
        self.guest = self._new_guest()
        self._drawn = self._drawn_ticks = -1
        # recompose() removes every panel before it mounts the new ones: the refresh
        # timer must not draw in between. The dashboard, not the app: the app would
        # recompose whichever screen is on top (a history, the run chart).
        # The new panels take the old ones' focus, cursor and filter.
        focused = self.default_screen.focused
        focused_id = focused.id if focused is not None else None
        cursor = self.query_one(AgentsTable).cursor
        self._recomposing = True
        try:
            await self.query_one(Dashboard).recompose()
        finally:
            self._recomposing = False
        self.query_one(AgentsTable).move_cursor(cursor)
        self.query_one(StoryLog).set_filter(self.story_filter)
        if focused_id is not None and (widget := self.default_screen.query(f"#{focused_id}")):
            self.default_screen.set_focus(widget.first())
        self.start_engine()
        self.refresh_panels()
