"""Instructions a call of the play suite's run, for callgrind (benchmarks/notes/dashboard.md):
the Wacky Manor, zero-latency backend, pipeline, fifo, simulated time flat out
(``PacedClock(inf)``), TICKS ticks, one of three ways (MODE):

- ``headless``: ``TickLoop.run`` under ``trio.run``;
- ``instrument``: the same with the dashboard's ``DashboardState`` attached;
- ``guest``: that, driven by the ``TickDriver`` in trio's guest mode on a bare asyncio
  loop (``GuestRun``), as ``manor play`` hosts it, without Textual;
- ``idle-app``: that, in a Textual ``App`` with nothing on its screen (``run_test`` at
  120x40): Textual's loop, no widgets;
- ``no-frames``: that, in the ``PlayApp`` itself with its frame timer a no-op (its
  widgets drawn once, never again);
- ``dashboard``: the ``PlayApp`` as the play suite runs it, frames as the budget allows
  (under callgrind a frame's wall time is ~50 times as long: fewer frames than natively).

A call's instructions are the difference of two TICKS over the calls between (trio's
batch order is random: ±0.7k a call from one pair to the next):

    PYTHONHASHSEED=0 PYTHONPATH=TREE valgrind --tool=callgrind \\
        /root/.pyenv/versions/3.11.7/bin/python play_run_instructions.py guest 300   # and 100
"""
import asyncio
import math
import sys

import trio

from manor.bench import play
from manor.config import flags_source
from manor.config.layering import built_in_source, layer_defaults_source
from manor.play import guest as guest_module
from manor.play.guest import GuestRun
from manor.paced_clock import PacedClock
from manor.play.state import DashboardState
from manor.run.engine import configure
from manor.tick.driver import TickDriver
from manor.tick.instruments import Instrument

# Under callgrind a step takes ~50 times as long: as many steps a slice as natively.
guest_module.SLICE_S = 0.05
config, scene = configure([built_in_source(), layer_defaults_source(), flags_source({"run.policy": "pipeline", "run.order": "fifo"}, {})])
mode, ticks = sys.argv[1], int(sys.argv[2])
stopwatch = play._Stopwatch(ticks)


class Stop(Instrument):
    """Ends the guest run at the tick its stopwatch is done (the driver runs on)."""

    run: GuestRun | None = None

    def tick_finished(self, record, story) -> None:
        if stopwatch.done and self.run is not None:
            self.run.cancel()


stop = Stop()
state = DashboardState(scene)
engine = play._engine(config, scene, ([state] if mode != "headless" else []) + [stopwatch, stop])
if mode in ("headless", "instrument"):
    trio.run(engine.loop.run, ticks, clock=PacedClock(math.inf))
elif mode in ("idle-app", "no-frames", "dashboard"):
    from pathlib import Path

    from textual.app import App

    from manor.play import app as play_app
    from manor.tick.gc_pause import what_is_built_frozen

    driver = TickDriver(engine.loop)

    class Dashboard(play_app.PlayApp):
        CSS_PATH = Path(play_app.__file__).with_name("play.tcss")
        frames = 0

        def _next_frame(self) -> None:
            if mode == "dashboard":
                super()._next_frame()

        def refresh_panels(self) -> None:
            self.frames += 1
            super().refresh_panels()

    async def in_app() -> None:
        if mode == "idle-app":
            app = App()
            async with app.run_test(size=play.SIZE):
                run = stop.run = GuestRun()
                run.start(driver.run, clock=PacedClock(math.inf))
                await run.wait()
            return
        app = Dashboard(engine, state=state, driver=driver, clock=PacedClock(math.inf))
        stop.run = app.guest
        async with app.run_test(size=play.SIZE):
            await app.guest.wait()
            print(app.frames, "frames")

    with what_is_built_frozen():
        asyncio.run(in_app())
else:

    async def main() -> None:
        run = stop.run = GuestRun()
        run.start(TickDriver(engine.loop).run, clock=PacedClock(math.inf))
        await run.wait()

    asyncio.run(main())
print(stopwatch.calls, "calls")
