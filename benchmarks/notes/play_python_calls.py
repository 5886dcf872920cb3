"""Python calls a call of the play suite's run, by function (benchmarks/notes/dashboard.md):
the Wacky Manor, zero-latency backend, pipeline, fifo, the dashboard's instrument attached;
ticks 21-120 counted (``sys.setprofile``'s "call" events) one of three ways (MODE):

- ``instrument``: ``TickLoop.run`` under ``trio.run`` on trio's system clock, as the play
  suite's headless contenders run;
- ``instrument-paced``: the same on the dashboard's clock, ``PacedClock(inf)``;
- ``guest``: that, driven by the ``TickDriver`` in trio's guest mode on a bare asyncio
  loop (``GuestRun``), as ``manor play`` hosts it, without Textual.

    PYTHONPATH=TREE python benchmarks/notes/play_python_calls.py guest 30

Prints the total a call, then the TOP functions.
"""
import asyncio, collections, math, sys
from manor.bench import play
from manor.config import flags_source
from manor.config.layering import built_in_source, layer_defaults_source
from manor.play.guest import GuestRun
from manor.paced_clock import PacedClock
from manor.play.state import DashboardState
from manor.run.engine import configure
from manor.tick.driver import TickDriver
from manor.tick.instruments import Instrument
from manor.run import interrupts

config, scene = configure([built_in_source(), layer_defaults_source(), flags_source({"run.policy": "pipeline", "run.order": "fifo"}, {})])
counts = collections.Counter()
def count(frame, event, arg):
    if event == "call":
        c = frame.f_code
        counts[(c.co_filename.split("site-packages/")[-1].split("/work/main/")[-1], c.co_firstlineno, c.co_name)] += 1

class Window(Instrument):
    def __init__(self, start, stop): self.start, self.stop, self.n, self.calls = start, stop, 0, 0
    def tick_finished(self, record, story):
        self.n += 1
        if self.n == self.start: sys.setprofile(count)
        elif self.start < self.n <= self.stop: self.calls += len(record.calls)
        if self.n == self.stop: sys.setprofile(None)

mode = sys.argv[1]
w = Window(20, 120)
engine = play._engine(config, scene, [DashboardState(scene), w])
if mode == "instrument":
    interrupts.run(engine.loop.run, 121)
elif mode == "instrument-paced":
    import trio
    trio.run(engine.loop.run, 121, clock=PacedClock(math.inf))
else:
    async def main():
        run = GuestRun()
        run.start(TickDriver(engine.loop).run, clock=PacedClock(math.inf))
        while w.n < 121:
            await asyncio.sleep(0.01)
        run.cancel(); await run.wait()
    asyncio.run(main())
print(f"{mode}: {w.calls} calls, {sum(counts.values())/w.calls:.2f} Python calls a call")
for (p, l, n), k in counts.most_common(int(sys.argv[2]) if len(sys.argv) > 2 else 30):
    print(f"{k/w.calls:7.3f} {p}:{l} {n}")
