"""The live dashboard's cost piece by piece (benchmarks/notes/dashboard.md): the play
suite's run (zero-latency backend, the Wacky Manor, pipeline, fifo) five ways,
interleaved in each round, CPU microseconds a call, best of ROUNDS:

- headless: ``TickLoop.run`` under ``trio.run``, as ``manor run``;
- instrument: the same with the dashboard's ``DashboardState`` attached;
- guest: that, in trio's guest mode on a bare asyncio loop (``GuestRun``), simulated
  time flat out (``PacedClock(inf)``): hosting trio, no Textual;
- guest+driver: and driven by the ``TickDriver`` that ``manor play`` drives it with;
- dashboard: the play suite's own dashboard contender (``manor play`` in Textual's
  headless app at 120x40, frames drawn as the frame budget allows).

    PYTHONPATH=TREE python benchmarks/notes/play_breakdown.py 1400 4

TICKS ticks for each (the dashboard, as the suite, four times as many).
"""
import asyncio
import collections
import math
import sys

from manor.bench import play
from manor.config import flags_source
from manor.config.layering import built_in_source, layer_defaults_source
from manor.play.guest import GuestRun
from manor.paced_clock import PacedClock
from manor.play.state import DashboardState
from manor.run.engine import configure
from manor.tick.driver import TickDriver

config, scene = configure([built_in_source(), layer_defaults_source(), flags_source({"run.policy": "pipeline", "run.order": "fifo"}, {})])


def guest(ticks: int, driver: bool) -> play._Stopwatch:
    stopwatch = play._Stopwatch(ticks, from_first_tick=False)
    engine = play._engine(config, scene, [DashboardState(scene), stopwatch])

    async def main() -> None:
        run = GuestRun()
        if driver:
            run.start(TickDriver(engine.loop).run, clock=PacedClock(math.inf))
        else:
            run.start(lambda: engine.loop.run(10**9), clock=PacedClock(math.inf))
        await asyncio.sleep(0.2)  # warm, as the suite times its dashboard
        stopwatch.start()
        while not stopwatch.done:
            await asyncio.sleep(0.02)
        run.cancel()
        await run.wait()

    asyncio.run(main())
    return stopwatch


ticks, rounds = int(sys.argv[1]), int(sys.argv[2])
names = ["headless", "instrument", "guest", "guest+driver", "dashboard"]
seconds = collections.defaultdict(list)
for _ in range(rounds):
    for name in names:
        if name == "dashboard":
            stopwatch = play._dashboard(config, scene, ticks * play.DASHBOARD_WINDOW)[0]
        elif name.startswith("guest"):
            stopwatch = guest(ticks, name == "guest+driver")
        else:
            stopwatch = play._headless(config, scene, ticks, instrument=name == "instrument")
        seconds[name].append(stopwatch.cpu_seconds / stopwatch.calls * 1e6)
best = {name: min(values) for name, values in seconds.items()}
print(" ".join(f"{name} {best[name]:.2f}" for name in names), "us a call")
print("ratio to headless:", " ".join(f"{name} {best['headless'] / best[name]:.3f}" for name in names[1:]))
