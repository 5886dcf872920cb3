"""The play suite: what the live dashboard costs the engine it watches.

The same run three ways, zero-latency backend (``InstantProvider``: what is timed is
the engine, never a model), the scene's calls tick after tick:

- **headless**: ``TickLoop.run`` under plain ``trio.run``, as ``manor run`` runs it;
- **instrument**: the same with the dashboard's instrument (``DashboardState``)
  attached: the loop notes every call for it (``TickLoop.call_notes``), and it keeps
  and counts each tick's records at the tick's end (the rows are worked out when read:
  nobody reads them here);
- **dashboard**: ``manor play`` itself, headless: the ``PlayApp`` in Textual's
  ``App.run_test()`` (the heap frozen first, as ``manor play`` does), trio hosted in
  guest mode on Textual's asyncio loop, the instrument attached and the panels redrawn
  from it — ten times a second at most, spaced while the engine never waits so that
  they take at most ``FRAME_BUDGET`` of its time, once a second at least
  (``manor.play.budget``). Simulated time at full speed (``PacedClock(inf)``), as the
  play tests run it.

Each round runs the three, interleaved, each on an engine of its own built outside the
timing (an app runs once), so a burst of load from elsewhere on the machine hits all
three alike; the dashboard over ``DASHBOARD_WINDOW`` times the others' ticks, so that
its timing holds several frames however far apart the budget spaces them (a window
shorter than a frame's spacing could miss every frame). A contender's figure is its
best round, timed by the process's CPU time over those ticks — in the dashboard, once it is warm
(its story panel full; the app's start and teardown are not the run's either). With a zero-latency backend the engine never waits, so
the dashboard's cost — its notes, the redraws, hosting trio in Textual — is CPU time
taken from the engine: ``ratio`` (dashboard / headless calls per second) says how much.
Each counts the calls of the ticks it timed: a game's ticks differ (a night of Werewolf
asks four players, a day all of them), and a game that ends is followed by the next
(``NextGame``).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config import Config
from ..content import Scene
from ..records import StoryEntry, TickRecord
from ..run import interrupts
from ..run.engine import Engine, build_engine, scene_seed
from ..tick.driver import TickDriver
from ..tick.gc_pause import what_is_built_frozen
from ..tick.instruments import Instrument
from ..tick.loop import TickLoop
from .games import NextGame
from .instant import InstantProvider
from .suite import BenchContext, Suite

__all__ = ["CONTENDERS", "SUITE"]

CONTENDERS = ("headless", "instrument", "dashboard")
CALLS = 20_000
CALLS_QUICK = 1_500
ROUNDS = 5
ROUNDS_QUICK = 2
#: The dashboard's timed ticks, in multiples of the headless runs'.
DASHBOARD_WINDOW = 4
#: The terminal the headless dashboard draws to: the size docs/dashboard.md recommends.
SIZE = (120, 40)
#: Longest the dashboard is given to warm up (its story panel full) before it is timed:
#: the panel takes 40 new lines a frame at most (``StoryLog``), ten frames for its 400,
#: and a busy engine's frames come one a second at least (``FRAME_SPACING_MAX_S``).
_WARM_UP_S = 15.0


def _rounds(context: BenchContext) -> int:
    return ROUNDS_QUICK if context.quick else ROUNDS


def units(context: BenchContext) -> int:
    return len(CONTENDERS) * _rounds(context)


class _Stopwatch(Instrument):
    """The process's CPU and wall seconds over ``ticks`` ticks, and their calls, from
    ``start()`` — or, if ``from_first_tick``, from the start of the run's first tick.

    It runs no hook per call, so it costs the run it times nothing measurable.
    """

    def __init__(self, ticks: int, *, from_first_tick: bool = True) -> None:
        self.ticks = ticks
        self.cpu_seconds = math.nan
        self.wall_seconds = math.nan
        self.calls = 0
        self._from_first_tick = from_first_tick
        self._started: tuple[float, float] | None = None
        self._timed = 0

    @property
    def done(self) -> bool:
        return self._timed >= self.ticks

    def start(self) -> None:
        self._started = (time.process_time(), time.perf_counter())
        self._timed = 0
        self.calls = 0

    def run_started(self, loop: TickLoop) -> None:
        if self._from_first_tick:
            self.start()

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        if self._started is None or self.done:
            return
        self._timed += 1
        self.calls += len(record.calls)
        if self.done:
            cpu, wall = self._started
            self.cpu_seconds, self.wall_seconds = time.process_time() - cpu, time.perf_counter() - wall


def _engine(config: Config, scene: Scene, instruments: list[Instrument]) -> Engine:
    next_game = NextGame(scene, scene_seed(config, scene))
    return build_engine(config, scene, backend=InstantProvider(), instruments=[*instruments, next_game])


def _headless(config: Config, scene: Scene, ticks: int, *, instrument: bool) -> _Stopwatch:
    """``ticks`` ticks under ``trio.run``, with or without the dashboard's instrument."""
    from ..play.state import DashboardState  # Textual is imported only by this suite

    stopwatch = _Stopwatch(ticks)
    engine = _engine(config, scene, [DashboardState(scene), stopwatch] if instrument else [stopwatch])
    interrupts.run(engine.loop.run, ticks)
    return stopwatch


def _dashboard(config: Config, scene: Scene, ticks: int) -> tuple[_Stopwatch, int]:
    """``ticks`` ticks in the live dashboard, headless, once it is warm: the timing and
    the frames drawn meanwhile.

    Warm means its story panel holds all the lines it keeps: until then each frame's
    new lines grow the panel, and a panel that grows makes Textual lay the screen out
    again — the first second of ``manor play``, not what it costs while it runs.
    """
    from ..play import app as play_app
    from ..play.app import PlayApp
    from ..paced_clock import PacedClock
    from ..play.state import DashboardState
    from ..play.widgets import StoryLog

    class BenchPlayApp(PlayApp):
        # Textual looks for a relative CSS_PATH beside the module of the class.
        CSS_PATH = Path(play_app.__file__).with_name(str(PlayApp.CSS_PATH))
        frames = 0

        def refresh_panels(self) -> None:
            self.frames += 1
            super().refresh_panels()

    state, stopwatch = DashboardState(scene), _Stopwatch(ticks, from_first_tick=False)
    engine = _engine(config, scene, [state, stopwatch])
    # Paused until the app has drawn its first frame: starting up is not the run's cost.
    driver = TickDriver(engine.loop, paused=True)
    app = BenchPlayApp(engine, state=state, driver=driver, clock=PacedClock(math.inf))

    async def main() -> int:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            app.in_engine(driver.resume)
            story = app.query_one(StoryLog)
            deadline = time.monotonic() + _WARM_UP_S
            while len(story.lines) < (story.max_lines or 0) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            stopwatch.start()
            frames = app.frames
            while not stopwatch.done and not app.guest.finished:
                await asyncio.sleep(0.02)
            frames = app.frames - frames
            await app.stop_engine()
            result = app.guest.result
            if result is not None:
                result.unwrap()  # an engine that failed fails the suite, not a figure
            return frames

    # As ``manor play`` starts the app (``cli.play_cmd``): what is loaded so far is frozen
    # out of the collector's full passes; thawed after, for the suite's next runs.
    with what_is_built_frozen():
        frames = asyncio.run(main())
    return stopwatch, frames


def run(context: BenchContext) -> dict[str, Any]:
    config, scene = context.configure({"run.policy": "pipeline", "run.order": "fifo"})
    ticks = math.ceil((CALLS_QUICK if context.quick else CALLS) / len(_engine(config, scene, []).loop.world.plan()))
    calls = 0  # of the headless run's timed ticks (all alike, unless a game's phases differ)
    # Each contender's best CPU seconds per call.
    best = dict.fromkeys(CONTENDERS, math.inf)
    # The dashboard's frames, wall seconds and calls in its best round.
    frames, wall, drawn_calls = 0, math.nan, 0
    for _ in range(_rounds(context)):
        for name in CONTENDERS:
            if name == "dashboard":
                stopwatch, drawn = _dashboard(config, scene, ticks * DASHBOARD_WINDOW)
                if stopwatch.cpu_seconds / stopwatch.calls < best[name]:
                    frames, wall, drawn_calls = drawn, stopwatch.wall_seconds, stopwatch.calls
            else:
                stopwatch = _headless(config, scene, ticks, instrument=name == "instrument")
                if name == "headless":
                    calls = stopwatch.calls
            best[name] = min(best[name], stopwatch.cpu_seconds / stopwatch.calls)
            context.advance(1)
    rates = {name: 1 / seconds for name, seconds in best.items()}
    # What a frame costs beyond the instrument's work: the redraw and hosting trio in
    # Textual.
    per_frame = (best["dashboard"] - best["instrument"]) * drawn_calls / frames * 1e3 if frames else math.nan
    return {
        "scene": scene.spec.name,
        "calls": calls,
        "ticks": ticks,
        "calls_per_tick": round(calls / ticks),
        "rounds": _rounds(context),
        **{f"{name}_calls_per_s": round(rate, 1) for name, rate in rates.items()},
        **{f"{name}_us_per_call": round(best[name] * 1e6, 2) for name in CONTENDERS},
        "dashboard_frames": frames,
        "dashboard_wall_s": round(wall, 4),
        "dashboard_frames_per_s": round(frames / wall, 2) if frames else 0.0,
        "dashboard_ms_per_frame": round(per_frame, 3),
        "ratio": round(rates["dashboard"] / rates["headless"], 4),
        "ratio_instrument": round(rates["instrument"] / rates["headless"], 4),
    }


SUITE = Suite(
    name="play",
    title="calls per second with the live dashboard watching, against the same run headless",
    units=units,
    run=run,
)
