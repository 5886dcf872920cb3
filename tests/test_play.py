"""``manor play``: the dashboard driven by Textual's Pilot, trio hosted in guest mode.

The clock is ``PacedClock(math.inf)``: simulated time is exact and never waits for the
wall clock, so ticks take milliseconds and every figure is the virtual run's. The tests
run under asyncio (``asyncio.run``), as Textual does; pytest-trio is not involved.
"""

from __future__ import annotations

import asyncio
import gc
import io
import math
import os
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import outcome
import pytest
from lost_gate import LOST, LosableGate, LoseGate
from rich.console import Console
from saves_fixture import SAVES
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Footer, Static

from manor.calls import Request
from manor.cli import main
from manor.config import Config, resolve
from manor.config.layering import built_in_source, flags_source, layer_defaults_source
from manor.content import Scene
from manor.play import PlayApp, ReplayApp, build_app
from manor.play.app import YOUNG_THRESHOLD, engine_failure
from manor.paced_clock import PacedClock
from manor.play.help import CLOSE, HelpScreen
from manor.play.state import DashboardState
from manor.play.widgets import AgentsTable, DegradationPanel, GatePanel, LatencyPanel, NoticeLines, ReplayBar, StatusLine, StoryLog
from manor.providers import MockProvider
from manor.run.engine import build_engine
from manor.saves import read_save
from manor.tick.driver import TickDriver
from manor.worlds import load_scene


def settings(values: Mapping[str, object] | None = None) -> tuple[Config, Scene]:
    """The Wacky Manor with its own seed and platform limit (6), ``values`` as flags."""
    scene = load_scene("wacky_manor")
    flags = {"platform.limit": 6, "run.seed": scene.spec.seed, **(values or {})}
    return resolve([built_in_source(), layer_defaults_source(), flags_source(flags, {})]), scene


def play_app(*, paused: bool = True, save: Path | None = None, values: Mapping[str, object] | None = None) -> PlayApp:
    config, scene = settings(values)
    return build_app(config, scene, paused=paused, clock=PacedClock(math.inf), save=save)


def drive(app: PlayApp, scenario: Callable[[Pilot[None]], Awaitable[None]], size: tuple[int, int] = (120, 40)) -> None:
    """Run ``scenario`` against ``app`` under asyncio, as Textual runs."""

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await scenario(pilot)

    asyncio.run(main())


async def until(pilot: Pilot[None], condition: Callable[[], bool], what: str) -> None:
    """Let the app run until ``condition`` holds. The bound only keeps a broken build
    from hanging the suite; nothing here measures time."""
    for _ in range(4000):
        if condition():
            return
        await pilot.pause(0.005)
    raise AssertionError(f"never happened: {what}")


async def settled(pilot: Pilot[None]) -> None:
    """Let queued engine calls land and the panels redraw."""
    await pilot.pause(0.05)
    pilot.app.refresh_panels()  # type: ignore[attr-defined]
    await pilot.pause()


def text_of(widget: Widget) -> str:
    """What a Static-based panel shows, as plain text."""
    console = Console(width=200, file=io.StringIO(), color_system=None)
    console.print(widget.content)  # type: ignore[attr-defined]
    return console.file.getvalue()  # type: ignore[attr-defined]


class TestRunning:
    """Ticks advance, pause stops them, step runs exactly one."""

    def test_ticks_advance_and_the_dashboard_shows_them(self) -> None:
        app = play_app(paused=False)

        async def scenario(pilot: Pilot[None]) -> None:
            await until(pilot, lambda: app.state.tick >= 3, "three ticks")
            await settled(pilot)
            status = text_of(app.query_one(StatusLine))
            shown = re.search(r"tick (\d+)", status)
            assert shown is not None and int(shown.group(1)) >= 3, status
            assert "running" in status
            assert app.query_one(StoryLog).lines, "the story shows lines"

        drive(app, scenario)

    @pytest.mark.slow(2.5)
    def test_pause_stops_the_ticks(self) -> None:
        app = play_app(paused=False)

        async def scenario(pilot: Pilot[None]) -> None:
            await until(pilot, lambda: app.state.tick >= 2, "two ticks")
            await pilot.press("space")
            await until(pilot, lambda: app.driver.statistics().state == "paused", "paused")
            ticks = app.state.tick
            await pilot.pause(0.3)  # long enough for hundreds of ticks at this speed
            assert app.state.tick == ticks
            await settled(pilot)
            assert "paused" in text_of(app.query_one(StatusLine))
            await pilot.press("space")
            await until(pilot, lambda: app.state.tick > ticks, "running again")

        drive(app, scenario)

    @pytest.mark.slow(3.5)
    def test_the_footer_says_what_space_does_now(self) -> None:
        app = play_app()

        def space() -> list[str]:
            return [b.binding.description for key, b in app.active_bindings.items() if key == "space" and b.enabled]

        async def scenario(pilot: Pilot[None]) -> None:
            await settled(pilot)
            assert space() == ["run"]
            await pilot.press("space")
            await until(pilot, lambda: app.driver.statistics().state == "running", "running")
            await settled(pilot)
            assert space() == ["pause"]

        drive(app, scenario)

    def test_young_collections_are_spaced_while_it_runs_and_given_back_after(self) -> None:
        """What a frame makes lives until the next: the dashboard's young threshold is
        its own (``YOUNG_THRESHOLD``) while it runs, through the engine's ticks (which
        set the collector's thresholds aside and back), and the process's once it quits."""
        threshold = gc.get_threshold()
        app = play_app(paused=False)
        seen: list[int] = []

        async def scenario(pilot: Pilot[None]) -> None:
            await until(pilot, lambda: app.state.tick >= 3, "three ticks")
            seen.append(gc.get_threshold()[0])

        drive(app, scenario)
        assert seen == [YOUNG_THRESHOLD]
        assert gc.get_threshold() == threshold

    def test_step_runs_exactly_one_tick(self) -> None:
        app = play_app()

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.pause(0.1)
            assert app.state.tick == 0
            await pilot.press("n")
            await until(pilot, lambda: app.state.tick == 1, "tick 1")
            await pilot.pause(0.2)
            assert app.state.tick == 1
            await pilot.press("n", "n")
            await until(pilot, lambda: app.state.tick == 3, "tick 3")
            await pilot.pause(0.2)
            assert app.state.tick == 3
            assert app.driver.statistics().state == "paused"

        drive(app, scenario)


class TestSmallTerminal:
    def test_below_80x24_one_notice_instead_of_cut_panels(self) -> None:
        app = play_app()

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("n")
            await until(pilot, lambda: app.state.tick == 1, "tick 1")
            notice = app.query_one("#too-small", Static)
            assert not notice.display
            await pilot.resize_terminal(60, 18)
            await pilot.pause()
            assert notice.display and not app.query_one("#top").display and not app.query_one("#bottom").display
            assert "terminal too small: 80×24 needed, this one is 60×18" in str(notice.render())
            assert app.query_one(Footer).display
            await pilot.resize_terminal(80, 24)
            await pilot.pause()
            assert not notice.display and app.query_one("#top").display and app.query_one("#bottom").display

        drive(app, scenario, size=(120, 40))


class TestFocus:
    def test_the_focused_panel_is_marked_by_its_border_and_title(self) -> None:
        """The panel the keys go to has a lit border and its title on a tab; Tab moves
        the mark with the focus."""
        app = play_app()

        def marks(panel: Widget) -> tuple[object, object]:
            return panel.styles.border_top[1], panel.styles.border_title_background

        async def scenario(pilot: Pilot[None]) -> None:
            agents, story = app.query_one(AgentsTable), app.query_one(StoryLog)
            await settled(pilot)
            assert app.focused is agents
            focused, unfocused = marks(agents), marks(story)
            assert focused[0] != unfocused[0] and focused[1] != unfocused[1]
            await pilot.press("tab")
            await settled(pilot)
            assert app.focused is story
            assert (marks(story), marks(agents)) == (focused, unfocused)

        drive(app, scenario)


class TestResize:
    @pytest.mark.parametrize("sizes", [((120, 40), (80, 24)), ((80, 24), (120, 40))], ids=["to 80", "to 120"])
    def test_paused_the_latency_panel_takes_the_new_width_at_once(self, sizes: tuple[tuple[int, int], ...]) -> None:
        """Paused (no tick to redraw it), a resize lays the panel's figures out for the
        new width: what it shows is what a fresh draw at that width shows."""
        app = play_app()
        start, end = sizes

        def figures() -> str:
            return str(app.query_one("#latency-figures", Static).render())

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("n")
            await until(pilot, lambda: app.state.tick == 1, "tick 1")
            await settled(pilot)
            await pilot.resize_terminal(*end)
            for _ in range(5):
                await pilot.pause(0.05)
            shown = figures()
            app.query_one(LatencyPanel).show(app.state.shown, app.state.ticks)
            assert shown == figures()

        drive(app, scenario, size=start)


class TestNotices:
    def test_a_notice_takes_rows_of_its_own_and_hides_no_panel(self) -> None:
        """At 80×24 the "gate too small" warning is on lines above the footer, the
        panels above them; no toast over them; it goes when its time is up."""
        app = play_app(values={"run.agents": 200, "gate.timeout_s": 5})

        async def scenario(pilot: Pilot[None]) -> None:
            await until(pilot, lambda: len(app.notices) > 0, "the warning")
            await settled(pilot)
            lines = app.query_one(NoticeLines)
            assert lines.display and "the gate is too small for a tick" in str(lines.render())
            assert not list(app.screen.query("Toast"))
            for panel in app.query("#agents, #story"):
                assert panel.region.bottom <= lines.region.y, panel
            assert lines.region.bottom <= app.query_one(Footer).region.y
            bottom = app.query_one("#story").region.bottom
            app.notices[0].timeout = 0  # its time is up
            app.show_notices()
            await settled(pilot)
            assert not lines.display and app.query_one("#story").region.bottom > bottom, "the panels take the rows back"

        drive(app, scenario, size=(80, 24))


class TestStory:
    """The story follows the newest line until the reader scrolls up; it re-wraps on resize."""

    def test_scrolling_up_stops_following_and_f_follows_again(self) -> None:
        app = play_app()

        async def scenario(pilot: Pilot[None]) -> None:
            story = app.query_one(StoryLog)
            for tick in (1, 2, 3):
                await pilot.press("n")
                await until(pilot, lambda: app.state.tick == tick, f"tick {tick}")
                await settled(pilot)
            assert story.following and story.scroll_y == story.max_scroll_y > 0
            story.scroll_to(y=0, animate=False)
            await pilot.pause()
            assert not story.following
            await pilot.press("n")
            await until(pilot, lambda: app.state.tick == 4, "tick 4")
            await settled(pilot)
            assert story.scroll_y == 0, "reading back is not interrupted"
            assert story.unseen == 14 and story.border_subtitle == "not following · 14 new · f follows"
            await pilot.press("f")
            await pilot.pause()
            assert story.following and story.unseen == 0 and story.border_subtitle == ""
            assert story.scroll_y == story.max_scroll_y

        drive(app, scenario)

    def test_a_resize_re_wraps_the_story(self) -> None:
        app = play_app()

        async def scenario(pilot: Pilot[None]) -> None:
            story = app.query_one(StoryLog)
            await pilot.press("n")
            await until(pilot, lambda: app.state.tick == 1, "tick 1")
            await settled(pilot)
            wide = story.scrollable_content_region.width
            assert max(line.cell_length for line in story.lines) <= wide
            await pilot.resize_terminal(80, 24)
            await pilot.pause()
            await pilot.pause()
            narrow = story.scrollable_content_region.width
            assert narrow < wide
            assert max(line.cell_length for line in story.lines) <= narrow, "no line is clipped mid-word"
            words = " ".join(line.text for line in story.lines)
            assert app.state.story[0].text.split()[-1] in words

        drive(app, scenario)


class TestControls:
    """Keys change the engine live."""

    def test_gate_keys_resize_the_gate(self) -> None:
        app = play_app()
        gate = app.engine.loop.gate

        async def scenario(pilot: Pilot[None]) -> None:
            assert gate.size == 5
            await pilot.press("+", "+")
            await until(pilot, lambda: gate.size == 7, "gate 7")
            await pilot.press("-", "-", "-")
            await until(pilot, lambda: gate.size == 4, "gate 4")
            await settled(pilot)
            assert "gate 4/6" in text_of(app.query_one(StatusLine))
            await pilot.press(*["-"] * 6)
            await settled(pilot)
            assert gate.size == 1

        drive(app, scenario)

    def test_the_gate_keys_warn_past_the_platform_limit_less_one(self) -> None:
        """+ to the platform limit (6) and past it says each time that the platform will
        refuse calls; within the limit less one nothing is said."""
        app = play_app()
        gate = app.engine.loop.gate

        def warnings() -> list[str]:
            return [n.message for n in app.notices if n.title == "gate above the platform"]

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("-", "+")
            await until(pilot, lambda: gate.size == 5, "gate 5")
            assert warnings() == []
            await pilot.press("+", "+")
            await until(pilot, lambda: gate.size == 7, "gate 7")
            assert [message.split(":")[0] for message in warnings()] == [
                "gate 6 is above the platform limit 6 less one",
                "gate 7 is above the platform limit 6 less one",
            ]

        drive(app, scenario)

    def test_quick_presses_build_on_each_other(self) -> None:
        """Two presses before the trio run applied the first: both count."""
        app = play_app()
        gate, loop = app.engine.loop.gate, app.engine.loop

        async def scenario(pilot: Pilot[None]) -> None:
            app.action_gate(1)
            app.action_gate(1)
            app.action_next_policy()
            app.action_next_policy()
            await until(pilot, lambda: gate.size == 7 and loop.policy.name == "legacy", "gate 7, legacy")
            await pilot.pause(0.1)
            assert (gate.size, loop.policy.name) == (7, "legacy")

        drive(app, scenario)

    def test_switching_to_legacy_makes_degradations_appear(self) -> None:
        """Pipeline: nothing degrades. Legacy on the same world: the platform rejects."""
        app = play_app()

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("n")
            await until(pilot, lambda: app.state.tick == 1, "tick 1")
            assert app.state.degraded_total == 0
            await pilot.press("p", "p")
            await until(pilot, lambda: app.engine.loop.policy.name == "legacy", "legacy")
            await pilot.press("n")
            await until(pilot, lambda: app.state.tick == 2, "tick 2")
            await settled(pilot)
            # The legacy way: a scene beat goes straight at the full platform, is
            # rejected, and its speaker is speechless.
            rejected = app.state.degradations_tick["scene_beat"]["platform_rejected"]
            assert rejected > 0
            table = text_of(app.query_one(DegradationPanel))
            row = next(line for line in table.splitlines() if line.startswith("platform_rejected"))
            assert row.split()[1:] == ["0/0", "0/0", "0/0", f"{rejected}/{rejected}"]
            assert any(entry.fallback == "speechless" for entry in app.state.story if entry.tick == 2)
            # The gate panel counts them as run does; the agents table says what failed.
            gate = next(line for line in text_of(app.query_one(GatePanel)).splitlines() if line.startswith("rejected"))
            assert gate.split()[1:] == [str(rejected)]
            agents = app.query_one(AgentsTable)
            lines = [agents.render_line(y).text for y in range(1, agents.size.height)]
            refused = [line for line in lines if "degraded" in line]
            assert refused and all("rejected: platform" in line for line in refused)  # as much as fits
            errors = {row.error for row in app.state.rows.values() if row.state == "degraded"}
            assert errors == {"platform full: 6 of 6 sessions in use"}

        drive(app, scenario)

    def test_a_policy_switched_during_a_tick_shows_as_next(self) -> None:
        """The tick under way keeps its policy: the status line says which comes next."""
        config, scene = settings()
        app = build_app(config, scene, paused=True, clock=PacedClock(1.0))  # a tick takes seconds

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("n")
            await until(pilot, lambda: app.state.current_tick == 1, "tick 1 under way")
            await pilot.press("p")
            await until(pilot, lambda: app.engine.loop.policy.name == "batch", "switched")
            await settled(pilot)
            assert "pipeline → batch next tick" in text_of(app.query_one(StatusLine))

        drive(app, scenario)

    def test_speed_keys_move_along_the_ladder(self) -> None:
        app = play_app()

        async def scenario(pilot: Pilot[None]) -> None:
            assert app.clock is not None and app.clock.speed == math.inf
            await pilot.press(">")
            await settled(pilot)
            assert app.clock.speed == math.inf  # already the fastest
            await pilot.press("<", "<")
            await until(pilot, lambda: app.clock is not None and app.clock.speed == 512, "x512")

        drive(app, scenario)

    def test_help_opens_and_closes(self) -> None:
        app = play_app()

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("?")
            await until(pilot, lambda: isinstance(app.screen, HelpScreen), "help shown")
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, HelpScreen), "help closed")

        drive(app, scenario)

    @pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
    def test_the_help_wraps_under_its_columns_and_says_how_to_close(self, size: tuple[int, int]) -> None:
        """Every line of the help's key and panel tables keeps its text in its column (no
        word wrapped to the left edge, a gap between the columns); how to close it is on
        its border, in view however it scrolls."""
        app = play_app()

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("?")
            await until(pilot, lambda: isinstance(app.screen, HelpScreen), "help shown")
            await pilot.pause()
            box = app.screen.query_one("#help-box")
            assert box.border_subtitle == CLOSE and "esc" in CLOSE
            assert box.region.right <= size[0] and box.region.bottom <= size[1]
            text = app.screen.query_one("#help-text", Static)
            lines = [text.render_line(y).text.rstrip() for y in range(text.size.height)]
            for heading, first in (("Keys", "pause / resume"), ("Panels", "the tick's makespan")):
                start = lines.index(heading) + 1
                start += next(i for i, line in enumerate(lines[start:]) if first in line)
                end = lines.index("", start)
                column = lines[start].index(first)
                for line in lines[start:end]:
                    assert line[column - 2 : column] == "  " and len(line) > column, (heading, line)

        drive(app, scenario, size=size)

    def test_keys_under_the_help_change_nothing(self, tmp_path: Path) -> None:
        """s, +, n, p over the help: no save notice under it, no gate, tick or policy change."""
        app = play_app(save=tmp_path / "h.msav")

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.pause(0.1)
            # By identity, not by count: a notice shown at the start may expire meanwhile
            # on a slow machine (it did, under load).
            shown = list(app.notices)
            await pilot.press("?")
            await until(pilot, lambda: isinstance(app.screen, HelpScreen), "help shown")
            await pilot.press("s", "plus", "n", "p")
            await pilot.pause(0.2)
            assert [n for n in app.notices if all(n is not old for old in shown)] == []
            assert (app.engine.loop.gate.size, app.state.tick, app.engine.loop.policy.name) == (5, 0, "pipeline")
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, HelpScreen), "help closed")
            await pilot.press("plus")
            await until(pilot, lambda: app.engine.loop.gate.size == 6, "the gate grows once the help is closed")

        drive(app, scenario)

    def test_the_start_says_where_the_run_is_recorded(self, tmp_path: Path) -> None:
        path = tmp_path / "r.msav"
        app = play_app(save=path)

        async def scenario(pilot: Pilot[None]) -> None:
            await until(pilot, lambda: len(app.notices) > 0, "a notice")

        drive(app, scenario)
        assert any(n.message.startswith(f"recording to {path}") for n in app.notices)


class TestEnding:
    """Quitting ends the trio run; an engine error ends the app with a message."""

    def test_quit_ends_the_guest_run(self) -> None:
        app = play_app(paused=False)

        async def scenario(pilot: Pilot[None]) -> None:
            await until(pilot, lambda: app.state.tick >= 1, "a tick")
            await pilot.press("q")

        drive(app, scenario)
        assert app.guest.finished
        assert isinstance(app.guest.result, outcome.Value)
        assert app.return_code == 0

    def test_quit_saves_the_run(self, tmp_path: Path) -> None:
        """The save holds every finished tick and an end frame; it replays exactly."""
        path = tmp_path / "run.msav"
        app = play_app(save=path)

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("n", "n")
            await until(pilot, lambda: app.state.tick == 2, "tick 2")
            await pilot.press("s")
            await pilot.press("q")

        drive(app, scenario)
        save = read_save(path)
        assert [frame.record.tick for frame in save.ticks] == [1, 2]
        assert save.finished
        assert save.ticks[-1].record.world_hash == app.engine.loop.world.hash

    @pytest.mark.parametrize("focus", ["agents", "story-filter"])
    def test_ctrl_c_quits_and_saves_as_q_does(self, tmp_path: Path, focus: str) -> None:
        """Ctrl-C is quit, wherever the focus is (the filter prompt too): no "press
        ctrl+q" notice, exit 0, the save closed with every finished tick."""
        path = tmp_path / "run.msav"
        app = play_app(save=path)

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("n")
            await until(pilot, lambda: app.state.tick == 1, "tick 1")
            if focus == "story-filter":
                await pilot.press("slash", "h")
            await pilot.press("ctrl+c")
            await until(pilot, lambda: not app.is_running, "quit")

        drive(app, scenario)
        assert app.return_code == 0 and app.guest.finished
        assert not any("ctrl+q" in notice.message for notice in app.notices)
        save = read_save(path)
        assert [frame.record.tick for frame in save.ticks] == [1] and save.finished

    def test_an_engine_error_exits_with_a_message(self) -> None:
        config, scene = settings()
        state = DashboardState(scene)
        engine = build_engine(config, scene, backend=MockProvider(_broken), instruments=[state])
        app = PlayApp(engine, state=state, driver=TickDriver(engine.loop), clock=PacedClock(math.inf))

        async def scenario(pilot: Pilot[None]) -> None:
            await until(pilot, lambda: app.guest.finished, "the engine stopped")
            await until(pilot, lambda: not app.is_running, "the app exited")

        drive(app, scenario)
        assert app.return_code == 1
        assert isinstance(app.guest.result, outcome.Error)
        # Every call of the tick was under way when the backend broke: the first error
        # is named, the others counted.
        assert engine_failure(app.guest.result.error) == "manor: error: the engine stopped: RuntimeError: the backend broke (and 5 more errors)"


class TestALostGate:
    """``manor play`` on a shared gate that goes away waits for it as ``manor run`` does,
    and says so in a notice; past the wait the engine stops in one line."""

    def app(self, for_s: float) -> tuple[PlayApp, LoseGate]:
        config, scene = settings({"gate.unavailable_wait_s": 10.0})
        gate = LosableGate(size=5)
        lose = LoseGate(gate, at=1, for_s=for_s)
        state = DashboardState(scene)
        engine = build_engine(config, scene, gate=gate, instruments=[state, lose])  # type: ignore[arg-type]
        return PlayApp(engine, state=state, driver=TickDriver(engine.loop), clock=PacedClock(math.inf), ticks=3), lose

    def test_the_next_tick_waits_for_the_gate_with_a_notice(self) -> None:
        app, lose = self.app(for_s=3.0)

        async def scenario(pilot: Pilot[None]) -> None:
            await until(pilot, lambda: app.driver.statistics().state == "finished", "the run's end")
            await settled(pilot)

        drive(app, scenario)
        (notice,) = [notice for notice in app.notices if notice.title == "shared gate lost"]
        assert notice.message == f"{LOST}; waiting up to 10s for the gate before the next tick"
        assert lose.started[2] - lose.started[1] == pytest.approx(3.75, abs=1e-12)

    def test_a_gate_lost_past_the_wait_stops_the_engine_in_one_line(self) -> None:
        app, _ = self.app(for_s=math.inf)

        async def scenario(pilot: Pilot[None]) -> None:
            await until(pilot, lambda: not app.is_running, "the app exited")

        drive(app, scenario)
        assert app.return_code == 1 and isinstance(app.guest.result, outcome.Error)
        assert engine_failure(app.guest.result.error) == f"manor: error: the engine stopped: {LOST}; no gate for 10s: stopped after tick 2"


class TestAnotherWorld:
    """Werewolf on the dashboard: its callers, its dead, its end, its degraded panel."""

    def test_a_game_to_its_end(self) -> None:
        scene = load_scene("werewolf_village")
        config = resolve([built_in_source(), layer_defaults_source(), flags_source({"run.seed": scene.spec.seed}, {})])
        app = build_app(config, scene, paused=False, clock=PacedClock(math.inf), save=None)

        async def scenario(pilot: Pilot[None]) -> None:
            await until(pilot, lambda: app.engine.loop.world.over is not None, "the game's end")
            await until(pilot, lambda: app.driver.statistics().state == "finished", "finished")
            await settled(pilot)
            # The ending has a line of its own: the status line above keeps everything.
            ending = app.engine.loop.world.over.summary
            status = app.query_one(StatusLine)
            lines = [status.render_line(y).text.rstrip() for y in range(status.size.height)]
            assert lines[0].endswith(f"│ {scene.spec.name}") and lines[1:] == [f" {ending}"], lines
            table = app.query_one(AgentsTable)
            lines = [table.render_line(y).text for y in range(table.size.height)]
            assert not any(line.startswith("char ") for line in lines)  # no manor callers
            assert any(" dead " in line for line in lines) and any("target: " in line for line in lines)
            panel = text_of(app.query_one(DegradationPanel))
            # seven caller kinds fit at 120 columns in short labels; the invalid row is there
            assert "summ" in panel and "invalid" in panel and "gate lost" not in panel
            # At 80 columns the headings are cut to four letters: all seven kinds still show.
            await pilot.resize_terminal(80, 24)
            await settled(pilot)
            degraded = app.query_one(DegradationPanel)
            headings = text_of(degraded).split("\n")[0].split()
            assert headings == ["reason", "wolf", "seer", "doct", "spee", "vote", "narr", "summ"]
            status = app.query_one(StatusLine)
            lines = [status.render_line(y).text.rstrip() for y in range(status.size.height)]
            assert all(f"│ {part} " in lines[0] for part in ("pipeline", "gate 5/6")) and " t " in lines[0], lines
            assert " ".join(" ".join(lines[1:]).split()) == ending, "the ending wraps, whole"
            assert degraded.region.right <= 80, "the panel stays on screen"
            # The agents table's state column is a mark wide there: the dead are †.
            table = app.query_one(AgentsTable)
            lines = [table.render_line(y).text for y in range(table.size.height)]
            name_width, state_width, _ = table._columns()
            assert state_width <= 2
            states = [line[6 + name_width] for line in lines[1:] if line.strip()]
            assert "†" in states and "d" not in states

        drive(app, scenario)


def _broken(request: Request) -> str:
    """A backend with a bug: it raises something that is not a CallError."""
    raise RuntimeError("the backend broke")


class TestCommand:
    """``manor play`` checks its settings before taking the screen."""

    def test_a_bad_scene_is_one_line_and_exit_1(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["play", "--scene", "no_such_scene", "--no-save"]) == 1
        err = capsys.readouterr().err
        assert err.startswith("manor: error: unknown scene 'no_such_scene'")
        assert len(err.strip().splitlines()) == 1

    @pytest.mark.parametrize("argv", [["--ticks", "2"], ["--replay", str(SAVES / "wacky_manor_legacy.msav")]], ids=["live", "replay"])
    def test_without_a_terminal_it_refuses_and_leaves_no_save(self, tmp_path: Path, argv: list[str]) -> None:
        """Output to a file, no keyboard: one line, exit 2, no escape codes, no stray save."""
        env = {name: value for name, value in os.environ.items() if not name.startswith("MANOR_")}
        with open(tmp_path / "out", "w") as out:
            done = subprocess.run([sys.executable, "-m", "manor", "play", *argv], stdin=subprocess.DEVNULL, stdout=out,
                                  stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env, timeout=60)  # fmt: skip
        assert (done.returncode, done.stderr) == (2, "manor: error: manor play needs a terminal; use manor run for headless runs\n")
        assert (tmp_path / "out").read_text() == ""
        assert not list(tmp_path.glob("saves/*"))

    def test_an_existing_save_file_is_refused(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        taken = tmp_path / "taken.msav"
        taken.write_bytes(b"")
        assert main(["play", "--save", str(taken)]) == 1
        assert "already exists" in capsys.readouterr().err


def test_layout_snapshot(snap_compare: Callable[..., bool]) -> None:
    """The dashboard at 120x40, paused after three ticks of the Wacky Manor (fifo
    tickets, as when the snapshot was taken: the layout is the point, not the order)."""
    app = play_app(values={"run.order": "fifo"})

    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.press("n", "n", "n")
        await until(pilot, lambda: app.state.tick == 3, "tick 3")
        await settled(pilot)

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_narrow_layout_snapshot(snap_compare: Callable[..., bool]) -> None:
    """The same at 80x24: every panel still there, the footer's keys all shown."""
    app = play_app(values={"run.order": "fifo"})

    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.press("n", "n", "n")
        await until(pilot, lambda: app.state.tick == 3, "tick 3")
        await settled(pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)




def replay_app(name: str = "wacky_manor_legacy.msav", speed: float = math.inf) -> ReplayApp:
    """A recorded run in the dashboard, paused at tick 0, replaying flat out (or at ``speed``)."""
    app = ReplayApp(read_save(SAVES / name), speed=speed)
    app.driver.paused = True
    return app


class TestReplay:
    """``manor play --replay``: the recording replays, checked tick by tick."""

    def test_steps_replay_the_recording_exactly(self) -> None:
        app = replay_app()

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("n", "n")
            await until(pilot, lambda: app.state.tick == 2, "tick 2")
            await settled(pilot)
            assert app.check.mismatch is None
            recorded = app.save.records[1]
            assert app.state.ticks[-1].makespan == recorded.makespan
            assert app.engine.loop.world.hash == recorded.world_hash
            bar = app.query_one(ReplayBar)
            assert (bar.tick, bar.verdict) == (2, "matches the recording")

        drive(app, scenario)

    def test_seeking_forward_and_back(self) -> None:
        """End runs every tick; back one replays from the start to the tick before."""
        app = replay_app()
        total = len(app.save.ticks)

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("end")
            await until(pilot, lambda: app.state.tick == total, "the last tick")
            await pilot.press("left")
            await until(pilot, lambda: app.state.tick == total - 1 and app.driver.statistics().state == "paused", "one back")
            await pilot.pause(0.2)
            assert app.state.tick == total - 1
            assert app.engine.loop.world.hash == app.save.records[total - 2].world_hash
            assert app.clock is not None and app.clock.speed == math.inf
            await pilot.press("r")
            await until(pilot, lambda: app.state.tick == 0 and app.guest.started, "restarted")

        drive(app, scenario)

    def test_quick_seeks_add_their_steps(self) -> None:
        """Keys pressed faster than the ticks run add their steps: five → from 0 are tick
        5 (not 1 + 2 + 3 + 4 + 5), ] and → from 5 are 16, three ← from there 13."""
        app = replay_app()

        async def at(pilot: Pilot[None], tick: int) -> None:
            await until(pilot, lambda: app._seeking is None and app.driver.statistics().state == "paused", f"tick {tick}")
            await pilot.pause(0.1)
            assert app.state.tick == tick

        async def quickly(*steps: int) -> None:
            """Seeks one after the other, as keys read in one go: the trio run gets no
            turn between them."""
            for step in steps:
                await app.action_seek(step)

        async def scenario(pilot: Pilot[None]) -> None:
            await quickly(1, 1, 1, 1, 1)
            await at(pilot, 5)
            await quickly(10, 1)
            await at(pilot, 16)
            await quickly(-1, -1, -1)
            await at(pilot, 13)
            await pilot.press(*["right"] * 4)  # as the Pilot presses: a turn between
            await at(pilot, 17)

        drive(app, scenario)

    def test_next_event_stops_after_the_next_degraded_tick(self) -> None:
        """In the legacy recording a scene beat is rejected every tick: e runs one."""
        app = replay_app()

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("e")
            await until(pilot, lambda: app.driver.statistics().state == "paused" and app.state.tick > 0, "an event")
            assert app.state.tick == 1
            assert app.state.degraded_total > 0

        drive(app, scenario)

    def test_the_agents_table_shows_the_calls_of_the_tick_shown(self) -> None:
        """At the end of the legacy recording, the rows not idle are exactly tick 20's
        callers, degraded exactly where its calls were: none left from earlier ticks."""
        app = replay_app()
        save = read_save(SAVES / "wacky_manor_legacy.msav")

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("end")
            await until(pilot, lambda: app.state.tick == 20, "the end")
            await settled(pilot)
            calls = save.ticks[-1].record.calls
            shown = {(row.caller, row.agent): row.state for row in app.state.rows.values() if row.state != "—"}
            assert set(shown) == {(call.caller, call.agent) for call in calls}
            degraded = {key for key, state in shown.items() if state == "degraded"}
            assert degraded == {(call.caller, call.agent) for call in calls if not call.ok}
            assert any(row.state == "—" and row.line for row in app.state.rows.values()), "an idle row keeps its last line"

        drive(app, scenario)

    def test_next_event_with_none_ahead_says_so_at_once(self) -> None:
        """The pipeline recording degrades nowhere: e says so, and nothing runs."""
        app = replay_app("wacky_manor_pipeline.msav")

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("e")
            # The notice looked for among those in force, as soon as it is there: under
            # load another may be in force beside it, or it may expire by a later look.
            said = "no call degrades after tick 0 of 20"
            await until(pilot, lambda: [n.message for n in app.notices if n.message == said] == [said], "the notice")
            await pilot.pause(0.1)
            assert app.state.tick == 0 and app.driver.statistics().state == "paused"

        drive(app, scenario)

    def test_seeking_never_changes_the_chosen_speed(self) -> None:
        """End seeks at full speed; the speed chosen before is the one shown after,
        restarting keeps it, and < / > at the end set the next replay's speed."""
        app = replay_app(speed=8.0)

        async def scenario(pilot: Pilot[None]) -> None:
            chosen = app.speed
            await pilot.press("end")
            await until(pilot, lambda: app.state.tick == 20, "the end")
            await settled(pilot)
            assert app.clock is not None and app.clock.speed == chosen == app.speed
            await pilot.press("greater_than_sign")
            await settled(pilot)
            assert app.speed > chosen and app.clock.speed == app.speed
            faster = app.speed
            await pilot.press("home")
            await until(pilot, lambda: app.state.tick == 0 and app._seeking is None, "the start")
            assert app.clock is not None and app.clock.speed == faster

        drive(app, scenario)

    def test_a_replay_changes_nothing_of_the_recorded_run_and_says_why(self) -> None:
        """The gate, policy and save keys do nothing in a replay, and say so: what the
        replay keeps, and how to ask "what if"."""
        app = replay_app("wacky_manor_pipeline.msav")

        async def scenario(pilot: Pilot[None]) -> None:
            size = app.engine.loop.gate.size
            for key, said in (("+", f"keeps the recorded gate ({size}); manor replay wacky_manor_pipeline.msav --gate-size N"),
                              ("p", "keeps the recorded policy (pipeline); manor replay wacky_manor_pipeline.msav --policy NAME"),
                              ("s", "a replay records nothing")):  # fmt: skip
                await pilot.press(key)
                await until(pilot, lambda: any(said in n.message for n in app.notices), f"{key} says why")  # noqa: B023
            await settled(pilot)
            assert app.engine.loop.gate.size == size
            assert app.engine.loop.policy.name == "pipeline"
            assert len(app.notices) == 3 and app.query_one(NoticeLines).display

        drive(app, scenario)

    def test_replay_takes_no_setting_flags(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["play", "--replay", str(SAVES / "wacky_manor_legacy.msav"), "--policy", "pipeline"]) == 1
        err = capsys.readouterr().err
        assert "--replay shows the recording with its own settings" in err
        assert "--policy" in err

    def test_a_missing_save_is_one_line(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["play", "--replay", str(tmp_path / "nope.msav")]) == 1
        assert capsys.readouterr().err.strip() == f"manor: error: {tmp_path / 'nope.msav'}: no such save file"


def test_the_docs_key_table_is_the_help_screen_s() -> None:
    """What ``?`` shows and the key table of docs/dashboard.md are the same rows."""
    from manor.play.help import key_rows

    page = (Path(__file__).parent.parent / "docs" / "dashboard.md").read_text(encoding="utf-8").splitlines()
    start = page.index("| key | live | replay |") + 2
    end = page.index("", start)
    assert page[start:end] == key_rows()
