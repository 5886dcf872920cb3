"""What the dashboard's instrument costs the engine, and the least a state that reads
ticks in bulk could cost (benchmarks/notes/dashboard.md): the play suite's run (the Wacky
Manor, zero-latency backend, pipeline, fifo) some of these ways (NAMES, comma-separated),
interleaved in each of ROUNDS rounds, CPU microseconds a call, best and median:

- ``headless``: ``TickLoop.run`` under ``trio.run`` (trio's system clock);
- ``instrument``: with the dashboard's ``DashboardState`` attached;
- ``nohistory``: the same with no agents' histories kept (``calls_kept=0``);
- ``paced``, ``paced-instrument``: headless and instrument on ``PacedClock(inf)``,
  the clock the dashboard runs the engine on;
- ``floor``: an instrument that only keeps each tick's record (as many ticks as hold
  the state's ``CALLS_KEPT`` calls, at the scene's calls a tick) and counts the ok
  calls in C: the least a state that reads ticks in bulk could cost.

    PYTHONPATH=TREE python benchmarks/notes/play_instrument_floor.py 1400 5 headless,instrument,floor
"""
import collections, math, statistics, sys
import trio
from manor.bench import play
from manor.config import flags_source
from manor.config.layering import built_in_source, layer_defaults_source
from manor.paced_clock import PacedClock
from manor.play.state import DashboardState
from manor.run.engine import configure
from manor.run import interrupts

config, scene = configure([built_in_source(), layer_defaults_source(), flags_source({"run.policy": "pipeline", "run.order": "fifo"}, {})])

from collections import deque
from manor.tick.instruments import Instrument
class Floor(Instrument):
    """The least a bulk-at-frame state could do a tick: keep the record, count degraded in C."""
    def __init__(self):
        self.ticks = deque(maxlen=3600); self.calls = 0; self.ok = 0
        from operator import attrgetter; self._outcome = attrgetter("outcome")
    def tick_finished(self, record, story):
        self.ticks.append(record)
        self.calls += len(record.calls)
        self.ok += list(map(self._outcome, record.calls)).count("ok")
def one(name, ticks):
    sw = play._Stopwatch(ticks)
    inst = {"headless": [], "paced": [], "instrument": [DashboardState(scene)], "nohistory": [DashboardState(scene, calls_kept=0)], "paced-instrument": [DashboardState(scene)], "floor": [Floor()]}[name]
    engine = play._engine(config, scene, [*inst, sw])
    if name.startswith("paced"):
        trio.run(engine.loop.run, ticks, clock=PacedClock(math.inf))
    else:
        interrupts.run(engine.loop.run, ticks)
    return sw.cpu_seconds / sw.calls * 1e6

ticks, rounds = int(sys.argv[1]), int(sys.argv[2])
names = sys.argv[3].split(",")
got = collections.defaultdict(list)
for _ in range(rounds):
    for n in names:
        got[n].append(one(n, ticks))
for n in names:
    print(f"{n:18s} best {min(got[n]):6.2f}  median {statistics.median(got[n]):6.2f}  ratio(best) {min(got['headless'])/min(got[n]):.3f}  ratio(median) {statistics.median(got['headless'])/statistics.median(got[n]):.3f}")
