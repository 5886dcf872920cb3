"""Is the engine slower inside the dashboard because of Textual's loop or its widgets
(benchmarks/notes/dashboard.md)? The play suite's run (zero-latency backend, the Wacky
Manor, pipeline, fifo, the dashboard's instrument attached, ``TickDriver``, trio in
``GuestRun`` at ``PacedClock(inf)``) hosted four ways, interleaved in each round, CPU
microseconds a call over TICKS ticks after WARM seconds of warm-up, best of ROUNDS:

- bare: on a bare asyncio loop (``asyncio.run``);
- idle-app: inside a Textual ``App`` with nothing on its screen (``run_test`` at 120x40);
- no-frames: inside ``PlayApp`` itself, its frame timer a no-op (the panels drawn once);
- dashboard: the play suite's dashboard contender (frames as the budget allows; timed
  once its story panel is full, as the suite does).

    PYTHONPATH=TREE python benchmarks/notes/play_idle_app.py 1400 4 2.0
"""
import asyncio
import collections
import math
import sys
from pathlib import Path

from textual.app import App

from manor.bench import play
from manor.config import flags_source
from manor.config.layering import built_in_source, layer_defaults_source
from manor.play.app import PlayApp
from manor.play.guest import GuestRun
from manor.paced_clock import PacedClock
from manor.play.state import DashboardState
from manor.run.engine import configure
from manor.tick.driver import TickDriver
from manor.tick.gc_pause import what_is_built_frozen

config, scene = configure([built_in_source(), layer_defaults_source(), flags_source({"run.policy": "pipeline", "run.order": "fifo"}, {})])


async def timed(stopwatch: play._Stopwatch, run: GuestRun, warm: float) -> None:
    await asyncio.sleep(warm)
    stopwatch.start()
    while not stopwatch.done:
        await asyncio.sleep(0.02)
    run.cancel()
    await run.wait()


def hosted(how: str, ticks: int, warm: float) -> play._Stopwatch:
    stopwatch = play._Stopwatch(ticks, from_first_tick=False)
    state = DashboardState(scene)
    engine = play._engine(config, scene, [state, stopwatch])
    driver = TickDriver(engine.loop)
    if how == "bare":
        async def main() -> None:
            run = GuestRun()
            run.start(driver.run, clock=PacedClock(math.inf))
            await timed(stopwatch, run, warm)
        asyncio.run(main())
        return stopwatch
    if how == "idle-app":
        app = App()
        async def main() -> None:
            async with app.run_test(size=play.SIZE) as pilot:
                await pilot.pause()
                run = GuestRun()
                run.start(driver.run, clock=PacedClock(math.inf))
                await timed(stopwatch, run, warm)
    else:  # no-frames
        class NoFrames(PlayApp):
            CSS_PATH = Path(sys.modules[PlayApp.__module__].__file__).with_name("play.tcss")
            def _next_frame(self) -> None:
                pass
        app = NoFrames(engine, state=state, driver=driver, clock=PacedClock(math.inf))
        async def main() -> None:
            async with app.run_test(size=play.SIZE) as pilot:
                await pilot.pause()
                await timed(stopwatch, app.guest, warm)
    with what_is_built_frozen():
        asyncio.run(main())
    return stopwatch


ticks, rounds, warm = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
names = sys.argv[4].split(",") if len(sys.argv) > 4 else ["bare", "idle-app", "no-frames", "dashboard"]
seconds = collections.defaultdict(list)
for _ in range(rounds):
    for name in names:
        if name == "dashboard":
            stopwatch = play._dashboard(config, scene, ticks * play.DASHBOARD_WINDOW)[0]
        else:
            stopwatch = hosted(name, ticks, warm)
        seconds[name].append(stopwatch.cpu_seconds / stopwatch.calls * 1e6)
    print(" ".join(f"{name} {seconds[name][-1]:.2f}" for name in names), flush=True)
best = {name: min(values) for name, values in seconds.items()}
print("best:", " ".join(f"{name} {best[name]:.2f}" for name in names), "us a call")
