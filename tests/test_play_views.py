"""``manor play``: every panel true to one tick, readable at 80×24, and the views a user
reaches for when something degrades — an agent's history, the story's filter, the whole
run at a glance. Driven by Textual's Pilot, as ``test_play.py``."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from rich.segment import Segment
from rich.text import Text
from saves_fixture import SAVES
from test_play import drive, play_app, replay_app, settings, settled, text_of, until
from textual.pilot import Pilot
from textual.widgets import DataTable, Footer, Sparkline, Static
from textual.widgets._footer import FooterKey

from manor.config import flags_source, standard_sources
from manor.callers import caller_of
from manor.folds import Fold
from manor.play import build_app
from manor.paced_clock import PacedClock
from manor.play.history import AgentHistoryScreen
from manor.play.makespans import RunChartScreen
from manor.play.widgets import (
    AgentsTable,
    DegradationPanel,
    GatePanel,
    LatencyPanel,
    ReplayBar,
    StoryLog,
)
from manor.play.widgets.run_chart import RunChart
from manor.play.widgets.story import _MEASURE, story_line, story_rows, story_text
from manor.play.widgets.agent_search import AgentSearch
from manor.play.widgets.story_filter import StoryFilterInput
from manor.records import StoryEntry
from manor.run.engine import configure
from manor.saves import read_save
from manor.worlds.manor import CALLERS

LEGACY = {"run.policy": "legacy"}


def lines_of(widget: Static) -> list[str]:
    return text_of(widget).rstrip("\n").split("\n")


def latency_lines(app: object) -> list[str]:
    return lines_of(app.query_one(LatencyPanel).query_one("#latency-figures", Static))  # type: ignore[attr-defined]


class TestOneTick:
    """Every panel says which tick it shows, and they show the same one."""

    @pytest.mark.slow(4)
    def test_mid_tick_every_panel_shows_the_tick_under_way(self) -> None:
        config, scene = settings(LEGACY)
        app = build_app(config, scene, paused=True, clock=PacedClock(4.0))  # a tick takes a couple of seconds

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("n")
            await until(pilot, lambda: app.state.tick == 1, "tick 1")
            await pilot.press("n")
            rejected = lambda: sum(c["platform_rejected"] for c in app.state.degradations_tick.values())  # noqa: E731
            await until(pilot, lambda: app.state.current_tick == 2 and rejected() > 0 and app.state.finished < app.state.planned, "tick 2 under way, a rejection in")
            app.refresh_panels()  # one thread: what is read next is one moment
            state = app.state
            tick_degraded = sum(n for counts in state.degradations_tick.values() for n in counts.values())
            total_rejected = sum(c["platform_rejected"] for c in state.degradations_total.values())
            latency = latency_lines(app)
            assert latency[0].startswith("tick 2…") and f"{state.finished}/{state.planned}" in latency[0]
            assert latency[1] == f"{tick_degraded} degraded"
            degraded = app.query_one(DegradationPanel)
            assert degraded.border_title == "degraded: tick 2… / total"
            beats = next(line for line in lines_of(degraded) if line.startswith("platform_rejected")).split()[-1]
            assert beats == f"{state.degradations_tick['scene_beat']['platform_rejected']}/{state.degradations_total['scene_beat']['platform_rejected']}"
            gate = app.query_one(GatePanel)
            assert gate.border_subtitle == "tick 2…"
            assert next(line for line in lines_of(gate) if line.startswith("rejected")).split()[-1] == str(total_rejected)
            assert app.query_one(AgentsTable).border_title == "agents · tick 2…"
            await until(pilot, lambda: app.state.tick == 2 and app.state.current_tick is None, "tick 2 done")
            await settled(pilot)
            assert latency_lines(app)[0].startswith("tick 2  ")
            assert degraded.border_title == "degraded: tick 2 / total"
            assert gate.border_subtitle == "tick 2" and app.query_one(AgentsTable).border_title == "agents · tick 2"

        drive(app, scenario)


class TestFigures:
    """Numbers are abbreviated before they are cut."""

    def test_a_thousand_agents_counts_fit_at_120_and_80_columns(self) -> None:
        """904 this tick of 18,900: never ``904/189…``."""
        app = play_app()
        tick = {"character": {"gate_timeout": 904}}
        total = {"character": {"gate_timeout": 18900, "platform_rejected": 1234567}}

        async def scenario(pilot: Pilot[None]) -> None:
            # Only these counts are drawn: a frame of the app's own, due after a resize
            # (the panels are drawn again at a new width), would put the engine's 0/0 back.
            app.refresh_panels = lambda: None  # type: ignore[method-assign]
            panel = app.query_one(DegradationPanel)
            for size, cell in (((120, 40), "904/18900"), ((80, 24), "904/19k")):
                await pilot.resize_terminal(*size)
                await pilot.pause()
                panel.show(tick, total, label="tick 26…", compact=app.has_class("narrow"))
                await pilot.pause()
                text = text_of(panel)
                assert "…" not in text
                row = next(line for line in text.splitlines() if line.split()[0] in ("gate_timeout", "gate"))
                assert row.split()[-4] == cell
                assert panel.region.right <= size[0], "the panel stays on screen"

        drive(app, scenario)

    def test_the_degraded_panel_has_a_column_for_each_of_the_worlds_caller_kinds(self) -> None:
        """A world of kinds of its own: its columns, none of the manor's; a kind it did
        not declare gets one once it has a count."""
        from textual.app import App, ComposeResult

        class Panel(App[None]):
            def compose(self) -> ComposeResult:
                yield DegradationPanel(kinds=("wolf", "seer"), id="degradations")

        app = Panel()

        async def scenario(pilot: Pilot[None]) -> None:
            panel = app.query_one(DegradationPanel)
            assert text_of(panel).split("\n")[0].split() == ["reason", "wolf", "seer"]
            counts = {"wolf": {"gate_timeout": 0}, "seer": {"gate_timeout": 0}, "ghost": {"gate_timeout": 2}}
            panel.show(counts, counts, label="tick 1")
            await pilot.pause()
            assert text_of(panel).split("\n")[0].split() == ["reason", "wolf", "seer", "ghost"]

        drive(app, scenario)  # type: ignore[arg-type]

    def test_the_gate_panel_abbreviates_a_long_rejected_row(self) -> None:
        from manor.tick.statistics import PlatformRejections

        app = play_app()

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.resize_terminal(80, 24)
            await pilot.pause()
            gate = app.query_one(GatePanel)
            loop = app.engine.loop
            many = PlatformRejections(by_limiter=18_000, by_server=900)
            gate.show(loop.gate.statistics(), loop.limiter.statistics(), many, gated=True, burst=0, tick="tick 9")
            row = lines_of(gate)[-1]
            assert row.split() == ["rej.", "19k/900srv"]
            assert len(row) <= gate.content_size.width

        drive(app, scenario)


class TestSmallTerminal:
    """At 80×24 every panel's figures are readable."""

    def test_legacy_at_80x24(self) -> None:
        app = play_app(values=LEGACY)

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("n")
            await until(pilot, lambda: app.state.tick == 1, "tick 1")
            await settled(pilot)
            # The chart of one tick says so, not "1 ticks".
            assert "1 ticks" not in app.query_one(LatencyPanel).border_subtitle
            await pilot.press("n")
            await until(pilot, lambda: app.state.tick == 2, "tick 2")
            await settled(pilot)
            for panel in (app.query_one(GatePanel), app.query_one(LatencyPanel).query_one("#latency-figures", Static)):
                lines = lines_of(panel)  # type: ignore[arg-type]
                assert len(lines) <= panel.content_size.height, "no line is pushed out"
                assert all(len(line) <= panel.content_size.width for line in lines), "no line wraps or is cut"
            assert lines_of(app.query_one(GatePanel))[-1].split() == ["rejected", str(app.state.rejections.total)]
            latency = latency_lines(app)
            assert latency[1] == f"{app.state.ticks[-1].degraded} degraded" and latency[2].startswith("p50 ")
            agents = app.query_one(AgentsTable)
            row = next(i for i, r in enumerate(agents._rows) if r.state == "done")
            shown = agents.render_line(row + 1).text
            line = agents._rows[row].line
            assert line[:15] in shown, "the last line has room to be read"
            for panel in app.query("#latency, #gate, #degradations, #agents, #story"):
                assert panel.region.right <= 80

        drive(app, scenario, size=(80, 24))


class TestHistory:
    """Enter (or a click) on an agents-table row: that agent's calls over the run."""

    def test_live_enter_opens_the_history_and_escape_goes_back(self) -> None:
        app = play_app()

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("n", "n")
            await until(pilot, lambda: app.state.tick == 2, "tick 2")
            await settled(pilot)
            agents = app.query_one(AgentsTable)
            assert app.focused is agents
            await pilot.press("down", "enter")
            await until(pilot, lambda: isinstance(app.screen, AgentHistoryScreen), "the history")
            screen = app.screen
            row = agents._rows[1]
            assert (screen.caller, screen.agent) == (row.caller, row.agent)  # type: ignore[attr-defined]
            table = screen.query_one(DataTable)
            assert table.row_count == 2
            assert [table.get_row_at(i)[0] for i in range(2)] == [1, 2]
            last = row.calls[-1]
            detail = screen.query_one("#history-detail", Static).render()
            assert last.text in str(detail) and f"finished {last.finished_at:.3f}s" in str(detail)
            assert list(screen.query_one(Sparkline).data) == [call.latency for call in row.calls]
            # It follows the run: a tick later the new call is there.
            await pilot.press("n")
            await until(pilot, lambda: table.row_count == 3, "tick 3's call")
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is app.default_screen, "back")

        drive(app, scenario)

    def test_the_cursor_keys_keep_the_cursor_in_view(self) -> None:
        """With a thousand rows: End, Home, page and arrow keys move the cursor, the view follows."""
        config, scene = configure(standard_sources(flags=flags_source({"run.agents": 1000}, {}), environ={}))
        app = build_app(config, scene, paused=True, clock=PacedClock(math.inf))

        async def scenario(pilot: Pilot[None]) -> None:
            agents = app.query_one(AgentsTable)
            await settled(pilot)
            assert agents.row_count > 1000
            visible = agents.size.height - 1
            for keys, row in ((("end",), agents.row_count - 1), (("home",), 0), (("pagedown", "down"), visible + 1), (("up",), visible)):
                await pilot.press(*keys)
                assert agents.cursor == row
                assert agents.scroll_y <= agents.cursor < agents.scroll_y + visible

        drive(app, scenario)

    def test_a_click_on_a_row_opens_its_history(self) -> None:
        app = play_app()

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("n")
            await until(pilot, lambda: app.state.tick == 1, "tick 1")
            await settled(pilot)
            await pilot.click(AgentsTable, offset=(3, 3))  # below the border, the header: the third row
            await until(pilot, lambda: isinstance(app.screen, AgentHistoryScreen), "the history")
            assert app.screen.agent == app.query_one(AgentsTable)._rows[2].agent  # type: ignore[attr-defined]

        drive(app, scenario)

    def test_in_a_replay_it_reads_the_save_up_to_the_tick_shown(self) -> None:
        """The beat speaker refused at tick 20 of the legacy recording: its recorded calls
        up to there, the refused one with its reason."""
        app = replay_app()
        save = read_save(SAVES / "wacky_manor_legacy.msav")
        [refused] = [call for call in save.records[-1].calls if not call.ok]
        recorded = [call for record in save.records for call in record.calls if (call.caller, call.agent) == (refused.caller, refused.agent)]

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("end")
            await until(pilot, lambda: app.state.tick == 20, "the end")
            await settled(pilot)
            agents = app.query_one(AgentsTable)
            index = next(i for i, row in enumerate(agents._rows) if (row.caller, row.agent) == (refused.caller, refused.agent))
            agents.move_cursor(index)
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, AgentHistoryScreen), "the history")
            table = app.screen.query_one(DataTable)
            assert table.row_count == len(recorded)
            outcome = table.get_row_at(table.row_count - 1)[-1]
            assert isinstance(outcome, Text) and outcome.plain.startswith("platform_rejected")
            assert "degraded: platform_rejected" in str(app.screen.query_one("#history-detail", Static).render())
            # Back three ticks (a replay from the start, the history on top): fewer calls.
            await pilot.press("left", "left", "left")
            await until(pilot, lambda: app.state.tick == 17 and app._seeking is None, "tick 17")
            await until(pilot, lambda: table.row_count == len([c for c in recorded if c.tick <= 17]), "the calls up to 17")
            assert isinstance(app.screen, AgentHistoryScreen)
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is app.default_screen, "back")
            assert app.query_one(AgentsTable).cursor == index and app.focused is app.query_one(AgentsTable)

        drive(app, scenario)


class TestFooters:
    @pytest.mark.parametrize("replay", [False, True], ids=["live", "replay"])
    @pytest.mark.parametrize("view", ["enter", "m"], ids=["history", "chart"])
    def test_every_key_of_a_view_s_footer_fits_80_columns(self, replay: bool, view: str) -> None:
        """The app's keys and the view's own (esc back) are all in its footer at 80×24."""
        app = replay_app() if replay else play_app()

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("n")
            await until(pilot, lambda: app.state.tick == 1, "tick 1")
            await settled(pilot)
            await pilot.press(view)
            await until(pilot, lambda: isinstance(app.screen, (AgentHistoryScreen, RunChartScreen)), "the view")
            await pilot.pause()
            keys = list(app.screen.query_one(Footer).query(FooterKey))
            shown = {key.key_display for key in keys}
            assert {"esc", "q", "?"} <= shown, shown
            assert all(key.region.width and key.region.right <= 80 for key in keys), [(k.key_display, k.region) for k in keys]

        drive(app, scenario, size=(80, 24))


class TestAgentSearch:
    @pytest.mark.slow(4)
    def test_g_goes_to_an_agent_among_a_thousand(self) -> None:
        """Typing moves the cursor to the first match, ↓ ↑ step through the matches,
        Enter stays, Esc goes back; the table's subtitle counts the matches."""
        config, scene = configure(standard_sources(flags=flags_source({"run.agents": 1000}, {}), environ={}))
        app = build_app(config, scene, paused=True, clock=PacedClock(math.inf))

        async def scenario(pilot: Pilot[None]) -> None:
            agents = app.query_one(AgentsTable)
            await settled(pilot)

            def on() -> str:
                chosen = agents.chosen
                assert chosen is not None
                return chosen.name

            await pilot.press("g")
            prompt = app.query_one(AgentSearch)
            assert prompt.display and app.focused is prompt
            await pilot.press(*"guest 9")
            assert on() == "Guest 9" and agents.border_subtitle == "1 of 111 · ↓ ↑ next"
            assert agents.scroll_y <= agents.cursor < agents.scroll_y + agents.size.height - 1, "in view"
            await pilot.press("down", "down")
            assert on() == "Guest 91"
            await pilot.press("up", "up", "up")
            assert on() == "Guest 999", "round the end"
            await pilot.press("enter")
            assert not prompt.display and app.focused is agents and on() == "Guest 999"
            assert agents.border_subtitle == AgentsTable.BORDER_SUBTITLE
            await pilot.press("g", *"nobody")
            assert agents.border_subtitle == "no agent matches 'nobody'" and on() == "Guest 999"
            await pilot.press("backspace", *["backspace"] * 5, *"ARRATOR")
            assert agents.chosen is not None and agents.chosen.kind == "narrator"
            await pilot.press("escape")
            assert not prompt.display and app.focused is agents and on() == "Guest 999", "esc goes back"

        drive(app, scenario)


class TestStoryFilter:
    def test_slash_filters_by_name_and_escape_clears(self) -> None:
        app = play_app()

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("n", "n")
            await until(pilot, lambda: app.state.tick == 2, "tick 2")
            await settled(pilot)
            story = app.query_one(StoryLog)
            everything = len(story.lines)
            await pilot.press("slash")
            prompt = app.query_one(StoryFilterInput)
            assert prompt.display and app.focused is prompt
            await pilot.press(*"hobbes")
            await pilot.pause()
            assert story.border_title == "story · /hobbes"
            words = " ".join(line.text for line in story.lines)
            said = [e for e in app.state.story if "hobbes" in f"{e.speaker} {e.text}".casefold()]
            assert 0 < len(said) and len(story.lines) < everything
            assert all(e.text.split()[-1] in words for e in said)
            await pilot.press("enter")
            await pilot.pause()
            assert not prompt.display and story.border_title == "story · /hobbes", "enter keeps the filter"
            await pilot.press("slash", "escape")
            await pilot.pause()
            assert not prompt.display and story.border_title == "story" and len(story.lines) == everything

        drive(app, scenario)

    def test_in_a_replay_the_arrows_move_in_the_prompt_not_the_replay(self) -> None:
        app = replay_app()

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("n")
            await until(pilot, lambda: app.state.tick == 1, "tick 1")
            await pilot.press("slash", "a", "b", "left", "x", "home", "q")
            await pilot.pause(0.2)
            assert app.query_one(StoryFilterInput).value == "qaxb"
            assert app.state.tick == 1 and app._seeking is None and app.is_running

        drive(app, scenario)

    def test_d_hides_and_shows_degraded_turns(self) -> None:
        app = replay_app()

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("end")
            await until(pilot, lambda: app.state.tick == 20, "the end")
            await settled(pilot)
            story = app.query_one(StoryLog)
            assert any("⚠" in line.text for line in story.lines)
            await pilot.press("d")
            await pilot.pause()
            assert story.border_title == "story · degraded hidden"
            assert story.lines and not any("⚠" in line.text for line in story.lines)
            # A seek back replays from the start: the filter stays.
            await pilot.press("left")
            await until(pilot, lambda: app.state.tick == 19 and app._seeking is None, "tick 19")
            await settled(pilot)
            story = app.query_one(StoryLog)
            assert story.border_title == "story · degraded hidden" and not any("⚠" in line.text for line in story.lines)
            await pilot.press("d")
            await pilot.pause()
            assert any("⚠" in line.text for line in story.lines)

        drive(app, scenario)

    def test_mass_degradations_are_one_line(self) -> None:
        """The manor through a gate whose wait is a second: most characters idle, in one line."""
        app = play_app(values={"gate.timeout_s": 1})

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("n")
            await until(pilot, lambda: app.state.tick == 1, "tick 1")
            await settled(pilot)
            idle = app.state.degradations_tick["character"]["gate_timeout"]
            assert idle > 5
            text = "\n".join(line.text for line in app.query_one(StoryLog).lines)
            assert f"⚠ {idle} characters: idle (gate_timeout) — Hobbes, " in text
            assert "⚠ idle" not in text, "no idle character has a line of its own"

        drive(app, scenario)


class TestWholeRun:
    def test_the_bar_marks_degraded_ticks(self) -> None:
        def red_cells(app: Callable[[], object]) -> int:
            bar = app.query_one(ReplayBar)  # type: ignore[attr-defined]
            text = bar.render()
            return sum(1 for span in text.spans if "red" in str(span.style))

        for name, marked in (("wacky_manor_legacy.msav", True), ("wacky_manor_pipeline.msav", False)):
            app = replay_app(name)

            async def scenario(pilot: Pilot[None]) -> None:
                await settled(pilot)
                assert (red_cells(app) > 0) == marked  # noqa: B023

            drive(app, scenario)

    def test_m_charts_every_tick_with_the_cursor_at_the_tick_shown(self) -> None:
        app = replay_app()

        async def scenario(pilot: Pilot[None]) -> None:
            await pilot.press("end")
            await until(pilot, lambda: app.state.tick == 20, "the end")
            await pilot.press("left")
            await until(pilot, lambda: app.state.tick == 19 and app._seeking is None, "tick 19")
            await pilot.press("m")
            await until(pilot, lambda: isinstance(app.screen, RunChartScreen), "the chart")
            chart = app.screen.query_one(RunChart)
            await pilot.pause()
            drawn = chart.render().plain  # type: ignore[union-attr]
            assert "▲ tick 19" in drawn or "tick 19 ▲" in drawn
            assert "tick 1 " in drawn and "s ┤" in drawn and "0s └" in drawn
            await pilot.press("right")
            await until(pilot, lambda: app.state.tick == 20, "tick 20")
            await until(pilot, lambda: chart.cursor == 20, "the cursor follows")
            await pilot.press("m")
            await until(pilot, lambda: app.screen is app.default_screen, "back")

        drive(app, scenario)


def test_history_snapshot(snap_compare: Callable[..., bool]) -> None:
    """The history of the beat speaker refused at tick 20 of the legacy recording, at 80x24."""
    app = replay_app()

    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.press("end")
        await until(pilot, lambda: app.state.tick == 20, "the end")
        await settled(pilot)
        agents = app.query_one(AgentsTable)
        agents.move_cursor(next(i for i, row in enumerate(agents._rows) if row.state == "degraded"))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, AgentHistoryScreen), "the history")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_run_chart_snapshot(snap_compare: Callable[..., bool]) -> None:
    """Every tick of the legacy recording at 120x40, the cursor at tick 17."""
    app = replay_app()

    async def run_before(pilot: Pilot[None]) -> None:
        await pilot.press("end")
        await until(pilot, lambda: app.state.tick == 20, "the end")
        await pilot.press("left", "left", "left")
        await until(pilot, lambda: app.state.tick == 17 and app._seeking is None, "tick 17")
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, RunChartScreen), "the chart")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_a_fold_reads_right_whatever_the_world_s_fallback() -> None:
    """A fold puts the count before a colon, as a turn puts its speaker: the manor's
    ``idle`` and Werewolf's ``abstains`` (a verb for one voter) both read right."""
    def fold(caller: str, fallback: str) -> Fold[StoryEntry]:
        turn = StoryEntry(tick=3, caller=caller, agent="a", speaker="Ada", text="", fallback=fallback, reason="gate_timeout")
        return Fold(entry=turn, items=(turn,) * 8, plural=caller_of(CALLERS, caller).plural)

    assert story_text(fold("vote", "abstains"), CALLERS).plain == "⚠ 8 vote calls: abstains (gate_timeout) — Ada, Ada, Ada and 5 more"
    assert story_text(fold("character", "idle"), CALLERS).plain.startswith("⚠ 8 characters: idle (gate_timeout)")


def test_a_story_line_made_from_its_parts_renders_as_the_text_way_does() -> None:
    """``story_rows`` makes a line that fits one row straight from its parts; it must
    draw the same segments as ``story_line`` rendered (and take the ``Text`` way for a
    line that wraps or holds a tab)."""
    def entry(caller: str, text: str = "I say.", **more: str) -> StoryEntry:
        return StoryEntry(tick=12, caller=caller, agent="a", speaker="Hobbes", text=text, **more)

    idle = entry("character", "", fallback="idle", reason="gate_timeout")
    items = [
        entry("character"), entry("narrator"), entry("summariser"), entry("scene_beat"), idle,
        Fold(entry=idle, items=(idle, idle, idle, idle, idle), plural="characters"),
        entry("character", "a tab\there"), entry("character", "a line far too long " * 6),
    ]  # fmt: skip
    for item in items:
        drawn = [[(s.text, s.style) for s in row if s.text] for row in story_rows(item, 60, CALLERS)]
        text_way = [[(s.text, s.style) for s in row if s.text] for row in Segment.split_lines(story_line(item, 60, CALLERS).render(_MEASURE))]
        assert drawn == text_way, item
