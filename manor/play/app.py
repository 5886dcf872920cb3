"""``manor play``: the world ticking live in a Textual dashboard.

Trio runs inside Textual's asyncio loop in guest mode (see docs/internals.md, "Trio inside
Textual"). The engine's calls never touch a widget: its instrument (``DashboardState``)
records what happened, and a timer redraws the panels from it ten times a second, so a
world of a thousand agents costs the UI the same as a world of ten — fewer while the
engine never waits, so that the frames take at most ``FRAME_BUDGET`` of its time
(``FrameBudget``), one a second at least. Keys reach the engine through the trio token
(``GuestRun.run_sync_soon``), and what they changed is drawn at once.
"""

from __future__ import annotations

import gc
import signal
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Literal

import attrs
import outcome
import trio
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.events import Resize
from textual.notifications import Notification, SeverityLevel
from textual.widgets import Footer, Input, Static

from ..config import Config
from ..config.schema import POLICIES
from ..content import Scene
from ..errors import ManorError, leaves
from ..records import CallRecord
from ..run import interrupts
from ..run.engine import Engine, build_engine, scene_seed
from ..run.final_refusal import StopAtFinalRefusal, final_refusal, platform_closed
from ..run.forecast import gate_overload
from ..run.gate_lost import GateLostNotice
from ..run.opening import gate_connected, open_run
from ..saves import SaveWriter
from ..tick.driver import TickDriver
from ..tick.gc_pause import set_young_threshold
from ..tick.policies import make_policy
from ..wording import counted
from .budget import FrameBudget
from ..paced_clock import PacedClock
from .figures import tick_label
from .guest import GuestRun
from .help import HelpScreen
from .history import AgentHistoryScreen
from .makespans import RunChartScreen, RunTicks
from .messages import AgentChosen, EngineStopped, TerminalLost
from .speed import SECONDS_PER_TICK, describe, faster, nearest, starting_speed
from .state import DashboardState
from .stop_signals import StopSignals
from .terminal import TerminalDriver
from .widgets import AgentsTable, Dashboard, DegradationPanel, GatePanel, LatencyPanel, NoticeLines, StatusLine, StoryLog
from .widgets.degradations import shown_reasons
from .widgets.story import StoryFilter
from .widgets.agent_search import AgentSearch
from .widgets.story_filter import StoryFilterInput

__all__ = ["PlayApp", "build_app", "engine_failure"]

#: Redraws per second: what the panels are coalesced to, however fast the engine goes.
REFRESH_HZ = 10
#: The most of a busy engine's time the dashboard takes: frames are spaced to keep it,
#: but never more than ``FRAME_SPACING_MAX_S`` apart. A frame costs the engine more
#: than the time it held it up — its small host callbacks, the collector's passes over
#: what it made, the engine's data out of the caches: 1.5 times that or more — so 2%
#: held is 3-4% of its speed, and flat out at 120×40 the spacing's floor sets the pace:
#: a frame a second. (4% drew two frames a second, for 3% of the engine's speed:
#: benchmarks/notes/dashboard.md.) A key still redraws at once, and an engine that
#: waits (``manor play``'s own pace) draws ten frames a second at no cost to it.
FRAME_BUDGET = 0.02
#: The collector's young threshold while the dashboard runs: ten times CPython's, so
#: that what a frame makes and the next one frees is not walked by a young pass and
#: promoted to be walked again (manor/tick/gc_pause.py).
YOUNG_THRESHOLD = 7000
#: A second at most between two frames, however much they cost: the frame timer ticks
#: every ``1 / REFRESH_HZ``, so the first tick past this spacing comes within the second.
FRAME_SPACING_MAX_S = 0.9
#: Below this many columns the panels take their compact forms (80x24 stays usable).
NARROW = 110
#: The smallest terminal every panel's figures are laid out for (columns, rows).
SMALLEST = (80, 24)
#: Largest gate size the keys go to: far past any platform limit, still a number.
MAX_GATE = 999
#: Notices in force at once at most: a new one retires the oldest.
NOTICES_KEPT = 3


class PlayApp(App[None]):
    """The live dashboard of one engine.

    Args:
        engine: the engine to run; its loop must have ``state`` among its instruments.
        state: what the panels show, fed by the engine.
        driver: runs the engine's loop; start it paused to begin on a still frame.
        clock: the trio clock of the run: simulated time at a speed, or ``None`` for
            real time.
        ticks: stop after this many ticks; ``None`` runs until quit.
        calibrate: once the first tick is done, set the speed at which a tick takes
            about a second (unless a key changed the speed first).
        writer: the save writer recording the run (among the loop's instruments), if
            the run is being saved.
    """

    CSS_PATH = "play.tcss"
    TITLE = "manor play"
    # The footer must fit 80 columns: each pair of keys shows once ("+/- gate").
    BINDINGS = [
        # One key, two labels: the footer says what space will do now.
        Binding("space", "pause", "pause"),
        Binding("space", "resume", "run"),
        Binding("n", "step", "step"),
        Binding("plus,equals_sign", "gate(1)", "gate", key_display="+/-"),
        Binding("minus,underscore", "gate(-1)", "gate smaller", show=False),
        Binding("p", "next_policy", "policy"),
        Binding("greater_than_sign,full_stop", "speed(1)", "speed", key_display="</>"),
        Binding("less_than_sign,comma", "speed(-1)", "slower", show=False),
        Binding("s", "save", "save"),
        Binding("f", "follow_story", "follow the story", show=False),
        Binding("slash", "filter_story", "filter the story", show=False),
        Binding("g", "find_agent", "go to an agent", show=False),
        Binding("d", "toggle_degraded", "show or hide degraded turns in the story", show=False),
        Binding("m", "run_chart", "every tick's makespan", show=False),
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("q", "quit", "quit"),
        # Ctrl-C quits as q does, everywhere (htop, k9s): not Textual's "press ctrl+q"
        # notice, nor a copy in the story's filter prompt.
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
    ]
    # Nothing in the dashboard needs the command palette; its footer entry costs room.
    ENABLE_COMMAND_PALETTE = False
    # The agents table has the keys first: its cursor, Enter for a history.
    AUTO_FOCUS = "#agents"
    #: Keys that act on the dashboard's panels: not over another screen.
    DASHBOARD_ONLY = frozenset({"follow_story", "filter_story", "find_agent", "toggle_degraded", "run_chart"})

    def __init__(
        self,
        engine: Engine,
        *,
        state: DashboardState,
        driver: TickDriver,
        clock: PacedClock | None,
        ticks: int | None = None,
        calibrate: bool = False,
        writer: SaveWriter | None = None,
    ) -> None:
        super().__init__(driver_class=TerminalDriver)
        self.engine = engine
        self.state = state
        self.driver = driver
        self.clock = clock
        self.ticks = ticks
        self._calibrate = calibrate and clock is not None
        self.writer = writer
        # Values keys asked for that the trio run has not applied yet: a second press
        # in quick succession builds on the first, not on the old value.
        self._pending: dict[str, object] = {}
        self.guest = self._new_guest()
        self._budget = FrameBudget(FRAME_BUDGET, longest=FRAME_SPACING_MAX_S)
        self._drawn: tuple[int, int] | None = None
        # While a replay's restart recomposes the screen, its panels are not there.
        self._recomposing = False
        self._drawn_ticks = -1
        # The pause state the footer's space label was drawn for.
        self._footer_paused: bool | None = None
        self._started_at = time.monotonic()
        #: The signal (SIGINT, SIGTERM, SIGHUP) that made the app quit, if one did; SIGHUP
        #: too when its terminal went without one (``TerminalLost``).
        self.stopped_by: int | None = None
        # The signals' handlers while the app runs (``quit_on_signals``).
        self._stop_signals: StopSignals | None = None
        # The collector's young threshold before the app set its own (``YOUNG_THRESHOLD``).
        self._young_threshold: int | None = None
        #: What the story shows (kept here: a replay's restart makes a new story panel).
        self.story_filter = StoryFilter()
        #: The notices in force, oldest first (``notify``).
        self.notices: list[Notification] = []

    def _new_guest(self) -> GuestRun:
        guest = GuestRun(on_done=lambda result: self.post_message(EngineStopped(result, guest)))
        return guest

    # -- layout -----------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        shared_gate = bool(self.engine.config.settings.gate.url)
        world = self.engine.loop.world
        # A world that asks for structured answers asks from its first tick on (``plan``
        # changes nothing): the Wacky Manor never does, Werewolf always.
        shaped = any(request.shape is not None for request in world.plan())
        kinds, self._reasons = tuple(world.callers), shown_reasons(shared_gate=shared_gate, shaped=shaped)
        reasons = self._reasons
        headings = {kind: caller.short for kind, caller in world.callers.items() if caller.short}
        yield Dashboard(self.compose_controls, kinds=kinds, headings=headings, reasons=reasons, id="dashboard")
        yield NoticeLines(id="notices")
        yield StoryFilterInput(id="story-filter", disabled=True)
        yield AgentSearch(id="agent-search")
        yield Footer()

    def compose_controls(self) -> ComposeResult:
        """Widgets under the status line (a replay's position bar); none live."""
        yield from ()

    def on_mount(self) -> None:
        # A shared gate's panel has a row more (gate_unavailable).
        self.set_class(bool(self.engine.config.settings.gate.url), "shared-gate")
        # The top panels are as tall as the degradation panel's rows: its border, its
        # heading and a row a reason (fixed, so a redraw needs no layout pass).
        self.query_one("#top").styles.height = len(self._reasons) + 3
        self.quit_on_signals()
        if self.writer is not None:
            self.notify(f"recording to {self.writer.path} (--no-save: no recording)", title="saving", markup=False)
        if (overload := gate_overload(self.engine)) is not None:
            self.notify(overload, title="the gate is too small for a tick", severity="warning", timeout=20, markup=False)
        self._young_threshold = set_young_threshold(YOUNG_THRESHOLD)
        self.start_engine()
        self.set_interval(1 / REFRESH_HZ, self._next_frame, name="refresh panels")
        self.refresh_panels()
        if gc.get_freeze_count():
            self.call_after_refresh(_freeze_the_screen)

    def on_resize(self, event: Resize) -> None:
        narrow = event.size.width < NARROW
        if narrow != self.has_class("narrow"):
            self.set_class(narrow, "narrow")
        # Below the smallest size every panel is laid out for, say so instead of
        # drawing cut panels (the run goes on; the keys still work).
        width, height = event.size
        small = width < SMALLEST[0] or height < SMALLEST[1]
        self.set_class(small, "too-small")
        if small:
            self.query_one("#too-small", Static).update(
                f"terminal too small: {SMALLEST[0]}×{SMALLEST[1]} needed, this one is {width}×{height}\n"
                "the run goes on; make the window larger, or press q to quit"
            )

    # -- the engine -------------------------------------------------------------------

    def start_engine(self) -> None:
        """Start the engine in a guest trio run on Textual's loop (once).

        A plain method, called by ``on_mount``: Textual calls ``on_mount`` of every class
        in an inheritance chain, so a subclass overriding it must not start a second run.
        """
        if not self.guest.started:
            self._started_at = time.monotonic()
            self.guest.start(self.engine_main, clock=self.clock)

    async def engine_main(self) -> None:
        """What the guest trio run runs: the tick driver, with the gate connected."""
        async with gate_connected(self.engine.loop.gate, self._gate_notice):
            backend = self.engine.loop.gated.backend
            with trio.CancelScope() as stop:  # cancelled after a tick that met a final refusal
                self.engine.loop.add_instrument(StopAtFinalRefusal(backend, stop.cancel))
                self.engine.loop.add_instrument(GateLostNotice(self._gate_lost))
                await self.driver.run(self.ticks)
        if (refusal := final_refusal(backend)) is not None:
            # The tick is recorded and the save closed (the driver's run_finished).
            raise platform_closed(refusal, interrupts.ran(self.driver.statistics().ticks, self.writer))

    def _gate_notice(self, notice: str) -> None:
        self.notify(notice, title="shared gate", severity="warning", timeout=20, markup=False)

    def _gate_lost(self, line: str, limit_s: float) -> None:
        """The driver waits for the lost shared gate (as ``manor run`` does): said while
        it may wait. Past the wait the engine stops in one line, its save kept."""
        self.notify(line, title="shared gate lost", severity="warning", timeout=limit_s, markup=False)

    async def stop_engine(self) -> None:
        """Cancel the engine and wait until its trio run has ended."""
        if self.guest.started and not self.guest.finished:
            self.guest.cancel()
            await self.guest.wait()

    def in_engine(self, fn: Callable[[], object]) -> bool:
        """Run ``fn`` inside the trio run (trio objects are only touched from there),
        then redraw at once rather than at the next refresh: a key shows its effect.
        False (and a notice) if the run has ended."""

        def change() -> None:
            fn()
            self.refresh_panels()  # one thread: trio code may draw

        if not self.guest.run_sync_soon(change):
            self.notify("the engine has stopped", severity="warning")
            return False
        return True

    def set_live(self, control: str, value: object, apply: Callable[[], object]) -> None:
        """Apply a new ``value`` of ``control`` inside the trio run; until it is applied,
        ``live(control, ...)`` answers with it."""
        self._pending[control] = value

        def change() -> None:
            apply()
            if self._pending.get(control) == value:
                del self._pending[control]

        if not self.in_engine(change):
            del self._pending[control]

    def live(self, control: str, applied: object) -> Any:
        """The value of ``control``: the one last asked for, or ``applied``."""
        return self._pending.get(control, applied)

    def on_engine_stopped(self, message: EngineStopped) -> None:
        if message.guest is not self.guest:
            return  # a run a replay's restart replaced
        if isinstance(message.result, outcome.Error):
            self.exit(return_code=1, message=engine_failure(message.result.error))
            return
        self.refresh_panels()

    async def on_unmount(self) -> None:
        # Every way out (q, ctrl+q, an error, a signal) passes here: the trio run must
        # end before Textual closes its loop.
        await self.stop_engine()
        if self._stop_signals is not None:
            self._stop_signals.give_back()
        if self._young_threshold is not None:  # the collector's own again
            set_young_threshold(self._young_threshold)
            self._young_threshold = None

    # -- notices ------------------------------------------------------------------------

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Show a notice for ``timeout`` seconds on lines of its own above the footer
        (``NoticeLines``), not as a toast over the panels. The same notice again starts
        its time again."""
        notice = Notification(message, title, severity, self.NOTIFICATION_TIMEOUT if timeout is None else timeout, markup=markup)
        others = [n for n in self.notices if (n.title, n.message) != (title, message)]
        self.notices = [*others[-(NOTICES_KEPT - 1) :], notice]
        self.set_timer(notice.timeout, self.show_notices, name="notice expires")
        self.show_notices()

    def show_notices(self) -> None:
        """Draw the notices in force on every screen's notice lines."""
        self.notices = [notice for notice in self.notices if not notice.has_expired]
        for screen in self.screen_stack:
            for lines in screen.query(NoticeLines):
                lines.show(self.notices)

    # -- signals ------------------------------------------------------------------------

    def quit_on_signals(self) -> None:
        """Quit as ``q`` does on SIGTERM, SIGHUP, or SIGINT (which comes only from
        ``kill``: in the dashboard Ctrl-C is a key), and remember which in
        ``stopped_by``. The engine is cancelled on the way out, so the save is closed
        with every finished tick. Signals ignored when the app started stay ignored.
        Taken with Python's handlers, so that a loop stuck in a frame does not lose them
        (``StopSignals``); in a terminal's process (not a test's), one that has not ended
        a few seconds after the signal is ended without the loop."""
        self._stop_signals = StopSignals(self._quit_on_signal, self.stopped_after, watch=not self.is_headless, put_back=self._put_terminal_back)
        self._stop_signals.take()

    def _put_terminal_back(self) -> None:
        """The terminal as it was, for a process ended without the loop (none in a test's)."""
        driver = self._driver
        if isinstance(driver, TerminalDriver):
            driver.put_back_at_once()

    def _quit_on_signal(self, signum: int) -> None:
        if self.stopped_by is None:
            self.stopped_by = signum
            self.exit(return_code=interrupts.exit_status(signum))

    def on_terminal_lost(self, message: TerminalLost) -> None:
        """The terminal went without a SIGHUP: quit as on one."""
        self._quit_on_signal(signal.SIGHUP)

    def stopped_after(self) -> str:
        """What the run had done when a signal stopped it, for its line (``interrupts.Interrupted``)."""
        return interrupts.ran(self.driver.statistics().ticks, self.writer)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """Textual's ``run``; once it has returned, no signal's watch is left to end the
        process (``StopSignals``)."""
        try:
            return super().run(*args, **kwargs)
        finally:
            if self._stop_signals is not None:
                self._stop_signals.disarm()  # ended: nothing left to end the process for

    def action_follow_story(self) -> None:
        self.query_one(StoryLog).action_follow()

    # -- finding an agent ---------------------------------------------------------------

    def action_find_agent(self) -> None:
        """Open the agents table's search prompt."""
        self.query_one(AgentSearch).open(self.query_one(AgentsTable))

    # -- the story's filter -------------------------------------------------------------

    def action_filter_story(self) -> None:
        """Open the filter prompt, holding the filter in force."""
        prompt = self.query_one(StoryFilterInput)
        prompt.value = self.story_filter.text
        prompt.display, prompt.disabled = True, False
        prompt.focus()

    def action_toggle_degraded(self) -> None:
        hide = not self.story_filter.hide_degraded
        self.set_story_filter(attrs.evolve(self.story_filter, hide_degraded=hide))
        self.notify("degraded turns hidden from the story (d shows them)" if hide else "degraded turns shown in the story")

    def action_clear_story_filter(self) -> None:
        self.set_story_filter(attrs.evolve(self.story_filter, text=""))
        self._close_filter_prompt()

    def set_story_filter(self, story_filter: StoryFilter) -> None:
        self.story_filter = story_filter
        self.query_one(StoryLog).set_filter(story_filter)

    def on_input_changed(self, event: Input.Changed) -> None:
        if isinstance(event.input, StoryFilterInput):
            self.set_story_filter(attrs.evolve(self.story_filter, text=event.value.strip()))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if isinstance(event.input, StoryFilterInput):
            self._close_filter_prompt()

    def _close_filter_prompt(self) -> None:
        prompt = self.query_one(StoryFilterInput)
        if prompt.display:
            prompt.display, prompt.disabled = False, True
            self.query_one(StoryLog).focus()

    # -- other views ----------------------------------------------------------------------

    def on_agent_chosen(self, message: AgentChosen) -> None:
        caller, agent = message.caller, message.agent
        row = self.state.rows.get(f"{caller}:{agent}")
        name = row.name if row is not None else agent
        calls = partial(self.agent_calls, caller, agent)
        self.push_screen(AgentHistoryScreen(caller, agent, name, calls=calls, kept=self.agent_calls_kept()))
        self.call_after_refresh(self.show_notices)  # on the new screen's lines too

    def action_run_chart(self) -> None:
        self.push_screen(RunChartScreen(self.run_ticks))
        self.call_after_refresh(self.show_notices)

    def agent_calls(self, caller: str, agent: str) -> Sequence[CallRecord]:
        """The calls of ``agent`` as a ``caller`` the dashboard kept, oldest first."""
        row = self.state.rows.get(f"{caller}:{agent}")
        return row.calls if row is not None else ()

    def agent_calls_kept(self) -> int | None:
        """How many calls ``agent_calls`` keeps per caller (``None``: all of them)."""
        return self.state.calls_per_caller

    def run_ticks(self) -> RunTicks:
        """Every tick's makespan so far, whether a call of it degraded, the tick shown."""
        return RunTicks(self.state.makespans, self.state.degraded_ticks, self.state.tick)

    # -- drawing ----------------------------------------------------------------------

    def _next_frame(self) -> None:
        if self._budget.due(self.guest):
            self.refresh_panels()

    def refresh_panels(self) -> None:
        """Redraw the panels from the engine's state; cheap when nothing changed."""
        if not self.is_running or self._recomposing:  # the widgets may be gone
            return
        self._draw_status()
        loop, state = self.engine.loop, self.state
        # Every panel shows the same tick: the one under way, or else the last finished.
        under_way = state.current_tick is not None
        tick = tick_label(state.current_tick if under_way else state.tick, under_way) if under_way or state.tick else ""
        self.query_one(GatePanel).show(
            loop.gate.statistics(),
            loop.limiter.statistics(),
            state.rejections,
            gated=loop.policy.name != "legacy",
            burst=loop.gate.burst,
            tick=tick,
            learned=False if self.engine.learning is None else self.engine.learning.last,
        )
        # Drawn again when the state changed, or the panels' row was laid out at a new
        # width (the degraded panel's columns depend on the room its neighbours leave).
        drawn = (state.version, self.query_one("#top").size.width)
        if drawn == self._drawn:
            return
        self._drawn = drawn
        self.query_one(LatencyPanel).show(state.shown, state.ticks)
        if len(state.ticks) and state.tick != self._drawn_ticks:
            self._drawn_ticks = state.tick
            if self._calibrate:
                self._calibrate_speed(state.ticks[0].makespan)
        self.query_one(DegradationPanel).show(
            state.degradations_tick, state.degradations_total, label=tick, compact=self.has_class("narrow")
        )
        self.query_one(AgentsTable).show(state.rows, state.take_dirty(), tick=tick)
        self.query_one(StoryLog).show(state.story, state.story_count, state.callers)

    def _draw_status(self) -> None:
        loop = self.engine.loop
        limit = loop.limiter.limit or "∞"
        gate = f"{loop.gate.size}/{limit}" if loop.policy.name != "legacy" else f"none/{limit}"
        if self.clock is None:
            clock = f"t {time.monotonic() - self._started_at:.1f}s real time"
        else:
            clock = f"t {self.clock.peek():.1f}s {describe(self.clock.speed)}"
        state = self.driver.statistics().state
        if self.guest.finished and state != "finished":
            state = "stopped"
        if self.driver.paused != self._footer_paused:
            self._footer_paused = self.driver.paused
            self.refresh_bindings()  # space's label follows the state
        self.query_one(StatusLine).show(
            scene=self.engine.scene.spec.name,
            tick=self.state.tick,
            current=self.state.current_tick,
            policy=self._policy_shown(),
            gate=gate,
            clock=clock,
            state=state,
            ending=over.summary if (over := loop.world.over) is not None else "",
        )

    def _policy_shown(self) -> str:
        """The policy; during a tick after a switch, the tick's and the next one's
        (``pipeline → batch next tick``): a tick keeps the policy it started with."""
        chosen, running = self.engine.loop.policy.name, self.state.tick_policy
        if self.state.current_tick is not None and running is not None and running != chosen:
            return f"{running} → {chosen} next tick"
        return chosen

    def _calibrate_speed(self, makespan: float) -> None:
        """The starting speed was estimated; the first tick measured: correct it once."""
        self._calibrate = False
        assert self.clock is not None
        speed = nearest(makespan / SECONDS_PER_TICK)
        if speed != self.clock.speed:
            self.in_engine(partial(setattr, self.clock, "speed", speed))

    # -- actions ----------------------------------------------------------------------

    async def action_pause(self) -> None:
        await self.run_action("toggle_pause")

    async def action_resume(self) -> None:
        await self.run_action("toggle_pause")

    def action_toggle_pause(self) -> None:
        self.in_engine(self.driver.toggle)

    def action_step(self) -> None:
        self.in_engine(self.driver.step)

    def action_gate(self, delta: int) -> None:
        gate = self.engine.loop.gate
        current = self.live("gate", gate.size)
        size = max(1, min(MAX_GATE, current + delta))
        if size != current:
            # The setter admits waiters at once when the gate grows: trio work.
            self.set_live("gate", size, partial(self.engine.loop.resize_gate, size))
            limit = self.engine.loop.limiter.limit
            if limit and size > max(current, limit - 1):  # each step up past it
                self.notify(
                    f"gate {size} is above the platform limit {limit} less one: the platform refuses calls past {limit} in flight "
                    "(platform_rejected), and the gate leaves nothing for other callers of the account",
                    title="gate above the platform", severity="warning", timeout=20, markup=False,
                )
        if self.engine.loop.policy.name == "legacy":
            self.notify("the legacy policy does not use the gate", severity="warning")

    def action_next_policy(self) -> None:
        loop = self.engine.loop
        current = self.live("policy", loop.policy.name)
        name = POLICIES[(POLICIES.index(current) + 1) % len(POLICIES)]
        settings = self.engine.config.settings
        seed = scene_seed(self.engine.config, self.engine.scene)
        policy = make_policy(name, settings.run.batch_size, seed)
        # The tick under way keeps the policy it started with.
        self.set_live("policy", name, partial(loop.switch_policy, policy))
        self.notify(f"policy {name} from the next tick")

    def action_speed(self, steps: int) -> None:
        if self.clock is None:
            self.notify("real clock (--clock real): the speed is fixed", severity="warning")
            return
        self._calibrate = False
        speed = faster(self.live("speed", self.clock.speed), steps)
        # In the trio run: a wait planned at the old speed is planned again.
        self.set_live("speed", speed, partial(setattr, self.clock, "speed", speed))

    def action_save(self) -> None:
        writer = self.writer
        if writer is None:
            self.notify("not recording this run (started with --no-save)", severity="warning")
            return
        try:
            writer.check()
        except ManorError as exc:
            self.notify(str(exc), title="save failed", severity="error", markup=False)
            return
        # The writer writes and flushes each tick as it ends: the file is up to date.
        self.notify(f"{writer.path}: {counted(writer.ticks, 'tick')} saved (each tick is written as it ends)", title="saved", markup=False)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Over the help screen only help and quit act: a key must not change the run
        # unseen, nor draw its notice over the help.
        if isinstance(self.screen, HelpScreen):
            return action in ("help", "quit")
        if action in self.DASHBOARD_ONLY and self.screen is not self.default_screen:
            return False
        if action in ("pause", "resume"):
            return (action == "resume") == self.driver.paused
        return True

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        await self.stop_engine()
        self.exit()


def _freeze_the_screen() -> None:
    """What the dashboard built to draw its first frame (its widgets, their styles and
    caches) lives as long as it, as what ``manor play`` loaded before it started does,
    which it froze out of the collector's full passes (``cli.play_cmd``): freeze it too.

    Left to the collector, a full pass walks the whole screen every few frames while the
    engine runs flat out — 15 to 70 ms each time, a frame's cost again. Only where the
    process froze what it had (``manor play``, the benchmarks), not in a test.
    """
    gc.collect()
    gc.freeze()


def engine_failure(error: BaseException) -> str:
    """One line saying why the engine stopped: the first error inside any group."""
    errors = leaves(error)
    first = errors[0]
    what = str(first) if isinstance(first, ManorError) else f"{type(first).__name__}: {first}"
    more = f" (and {len(errors) - 1} more errors)" if len(errors) > 1 else ""
    return f"manor: error: the engine stopped: {what}{more}"


def build_app(
    config: Config,
    scene: Scene,
    *,
    paused: bool = False,
    clock: PacedClock | Literal["auto"] = "auto",
    save: Path | None = None,
    force: bool = False,
) -> PlayApp:
    """The dashboard for the run ``config`` describes.

    Args:
        paused: start on a still frame; nothing runs until a key says so.
        clock: the simulated clock: ``"auto"``, one at the speed where a tick takes
            about a second; or the one to use (tests pass ``PacedClock(math.inf)``:
            exact, and never waits). Real time with ``run.clock = "real"`` either way.
        save: record the run to this save file, tick by tick (``None``: do not).
        force: let ``save`` overwrite an existing file.

    Raises:
        SaveError: the save file exists (without ``force``) or cannot be created.
    """
    state = DashboardState(scene)
    calibrate = clock == "auto"
    live = open_run(
        [(config, scene)], lambda gate: build_engine(config, scene, instruments=[state], gate=gate),
        virtual=lambda engine: PacedClock(starting_speed(engine)) if clock == "auto" else clock,
    )  # fmt: skip
    engine = live.runs
    state.meet(engine.loop.world)
    assert isinstance(live.clock, PacedClock | None)  # what ``virtual`` made, or real time
    run = config.settings.run
    # ``manor play`` runs until quit unless --ticks (or manor.toml, MANOR_RUN_TICKS) says.
    ticks = None if config.origins.get("run.ticks") == "built-in defaults" else run.ticks
    driver = TickDriver(engine.loop, paused=paused, interval=run.tick_interval_s)
    # The writer adds itself to the engine's loop.
    writer = SaveWriter.create(save, engine, force=force) if save is not None else None
    return PlayApp(engine, state=state, driver=driver, clock=live.clock, ticks=ticks, calibrate=calibrate, writer=writer)
