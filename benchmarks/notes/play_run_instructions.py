"""Instructions a call of the play suite's run, for callgrind (benchmarks/notes/dashboard.md):
the Wacky Manor, zero-latency backend, pipeline, fifo, simulated time flat out
(``PacedClock(inf)``), TICKS ticks, one of three ways (MODE):

- ``headless``: ``TickLoop.run`` under ``trio.run``;
- ``instrument``: the same with the dashboard's ``DashboardState`` attached;
- ``guest``: that, driven by the ``TickDriver`` in trio's guest mode on a bare asyncio
  loop (``GuestRun``), as ``manor play`` hosts it, without Textual.

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
from manor.play.paced_clock import PacedClock
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
engine = play._engine(config, scene, ([DashboardState(scene)] if mode != "headless" else []) + [stopwatch, stop])
if mode != "guest":
    trio.run(engine.loop.run, ticks, clock=PacedClock(math.inf))
else:

    async def main() -> None:
        run = stop.run = GuestRun()
        run.start(TickDriver(engine.loop).run, clock=PacedClock(math.inf))
        await run.wait()

    asyncio.run(main())
print(stopwatch.calls, "calls")
