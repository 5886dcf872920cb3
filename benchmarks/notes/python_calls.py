"""Python calls a call, by function (benchmarks/notes/overhead_calls.md): one suite's Manor
contender (WHO ``manor``) or, for the overhead suite, its bare-trio reference (``trio``),
100 ticks of the Wacky Manor after 20 unmeasured; every Python frame entered
(``sys.setprofile``'s "call" events: a function called, or a coroutine or generator
resumed) counted by function, over the calls made.

    PYTHONPATH=TREE python benchmarks/notes/python_calls.py overhead manor 40

overhead: the zero-latency backend, real clock; fastforward: the scene's simulator,
virtual clock. Prints the total a call, then the TOP functions.
"""
import collections
import sys

import trio

from manor.bench.games import NextGame
from manor.bench.instant import InstantProvider
from manor.clock import MockClock
from manor.config import flags_source
from manor.config.layering import built_in_source, layer_defaults_source
from manor.run.engine import build_engine, configure, scene_seed, scene_sim
from manor.tick.statistics import RunStatistics

suite, who, top = sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 40
if suite == "overhead":
    config, scene = configure([built_in_source(), layer_defaults_source(), flags_source({"run.policy": "pipeline", "run.order": "fifo"}, {})])
    backend, instruments, clock = InstantProvider(), [], None
else:
    config, scene = configure([built_in_source(), layer_defaults_source(), flags_source({}, {})])
    backend, instruments, clock = scene_sim(config, scene), [RunStatistics()], MockClock(autojump_threshold=0)
loop = build_engine(config, scene, backend=backend, instruments=[*instruments, NextGame(scene, scene_seed(config, scene))]).loop
counts: collections.Counter[tuple[str, int, str]] = collections.Counter()


def count(frame, event, arg):
    if event == "call":
        code = frame.f_code
        counts[(code.co_filename.split("site-packages/")[-1], code.co_firstlineno, code.co_name)] += 1


async def main() -> int:
    for _ in range(20):
        await loop.step()
    calls = 0
    sys.setprofile(count)
    if who == "manor":
        for _ in range(100):
            calls += len((await loop.step()).calls)
    else:
        from manor.bench.overhead import trio_tick

        requests = loop.world.plan()
        for _ in range(100):
            await trio_tick(backend, requests, loop.gate.size)
        calls = 100 * len(requests)
    sys.setprofile(None)
    return calls


calls = trio.run(main, clock=clock)
print(f"{calls} calls, {sum(counts.values()) / calls:.1f} Python calls a call")
for (path, line, name), n in counts.most_common(top):
    print(f"{n / calls:7.3f}  {path}:{line} {name}")
