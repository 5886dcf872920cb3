"""The play suite: what the live dashboard costs the engine it watches.

The same run three ways, zero-latency backend (``InstantProvider``: what is timed is
the engine, never a model), the scene's calls tick after tick:

- **headless**: ``TickLoop.run`` under plain ``trio.run``, as ``manor run`` runs it;
- **instrument**: the same with the dashboard's instrument (``DashboardState``)
  attached: its hooks run on every call;
- **dashboard**: ``manor play`` itself, headless: the ``PlayApp`` in Textual's
  ``App.run_test()``, trio hosted in guest mode on Textual's asyncio loop, the
  instrument attached and the panels redrawn from it ten times a second. Simulated
  time at full speed (``PacedClock(inf)``), as the play tests run it.

Each round runs the three over the same number of ticks, interleaved, each on an
engine of its own built outside the timing (an app runs once), so a burst of load from
elsewhere on the machine hits all three alike; a contender's figure is its best round,
timed by the process's CPU time from its first tick to its last (the app's start and
teardown are not the run's). With a zero-latency backend the engine never waits, so
the dashboard's cost — its hooks, the redraws, hosting trio in Textual — is CPU time
taken from the engine: ``ratio`` (dashboard / headless calls per second) says how much.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from ..config import Config
from ..content import Scene
from ..driver import TickDriver
from ..engine import Engine, build_engine
from ..instruments import Instrument
from ..tickloop import TickLoop
from .instant import InstantProvider
from .suite import BenchContext, Suite

__all__ = ["CONTENDERS", "SUITE"]

CONTENDERS = ("headless", "instrument", "dashboard")
CALLS = 20_000
CALLS_QUICK = 1_500
ROUNDS = 5
ROUNDS_QUICK = 2
#: The terminal the headless dashboard draws to: the size the README recommends.
SIZE = (120, 40)


def _rounds(context: BenchContext) -> int:
    return ROUNDS_QUICK if context.quick else ROUNDS


def units(context: BenchContext) -> int:
    return len(CONTENDERS) * _rounds(context)


class _Stopwatch(Instrument):
    """The process's CPU seconds from the start of a run's first tick to its end."""

    def __init__(self) -> None:
        self.started = math.nan
        self.seconds = math.nan

    def run_started(self, loop: TickLoop) -> None:
        self.started = time.process_time()

    def run_finished(self, loop: TickLoop) -> None:
        self.seconds = time.process_time() - self.started


def _engine(config: Config, scene: Scene, instruments: list[Instrument]) -> Engine:
    return build_engine(config, scene, backend=InstantProvider(), instruments=instruments)


def _headless(config: Config, scene: Scene, ticks: int, *, instrument: bool) -> float:
    """CPU seconds of ``ticks`` ticks under ``trio.run``, with or without the dashboard's
    instrument."""
    from ..play.state import DashboardState  # Textual is imported only by this suite

    stopwatch = _Stopwatch()
    engine = _engine(config, scene, [DashboardState(scene), stopwatch] if instrument else [stopwatch])
    trio.run(engine.loop.run, ticks)
    return stopwatch.seconds


def _dashboard(config: Config, scene: Scene, ticks: int) -> float:
    """CPU seconds of ``ticks`` ticks in the live dashboard, headless."""
    from ..play import app as play_app
    from ..play.app import PlayApp
    from ..play.clock import PacedClock
    from ..play.state import DashboardState

    class BenchPlayApp(PlayApp):
        # Textual looks for a relative CSS_PATH beside the module of the class.
        CSS_PATH = Path(play_app.__file__).with_name(str(PlayApp.CSS_PATH))

    state, stopwatch = DashboardState(scene), _Stopwatch()
    engine = _engine(config, scene, [state, stopwatch])
    # Paused until the app has drawn its first frame: starting up is not the run's cost.
    driver = TickDriver(engine.loop, paused=True)
    app = BenchPlayApp(engine, state=state, driver=driver, clock=PacedClock(math.inf), ticks=ticks)

    async def main() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            app.in_engine(driver.resume)
            result = await app.guest.wait()
            result.unwrap()  # an engine that failed fails the suite, not a figure

    asyncio.run(main())
    return stopwatch.seconds


def run(context: BenchContext) -> dict[str, Any]:
    config, scene = context.configure({"run.policy": "pipeline", "run.order": "fifo"})
    calls_per_tick = len(_engine(config, scene, []).loop.world.plan())
    ticks = math.ceil((CALLS_QUICK if context.quick else CALLS) / calls_per_tick)
    calls = ticks * calls_per_tick
    contenders: dict[str, Callable[[], float]] = {
        "headless": lambda: _headless(config, scene, ticks, instrument=False),
        "instrument": lambda: _headless(config, scene, ticks, instrument=True),
        "dashboard": lambda: _dashboard(config, scene, ticks),
    }
    best = dict.fromkeys(contenders, math.inf)
    for _ in range(_rounds(context)):
        for name, contender in contenders.items():
            best[name] = min(best[name], contender())
            context.advance(1)
    rates = {name: calls / seconds for name, seconds in best.items()}
    return {
        "scene": scene.spec.name,
        "calls": calls,
        "ticks": ticks,
        "calls_per_tick": calls_per_tick,
        "rounds": _rounds(context),
        **{f"{name}_calls_per_s": round(rate, 1) for name, rate in rates.items()},
        **{f"{name}_us_per_call": round(best[name] / calls * 1e6, 2) for name in contenders},
        "ratio": round(rates["dashboard"] / rates["headless"], 4),
        "ratio_instrument": round(rates["instrument"] / rates["headless"], 4),
    }


SUITE = Suite(
    name="play",
    title="calls per second with the live dashboard watching, against the same run headless",
    units=units,
    run=run,
)
