"""What a part of Manor costs a call in CPU time, by taking it away (benchmarks/notes/overhead_cpu.md).

The overhead suite's Manor contender (zero-latency backend, real clock, the Wacky Manor),
beside copies with one part taken away, and bare trio; ROUNDS rounds of 200 ticks each,
interleaved in one process, so load from elsewhere hits them alike. Prints each one's
median and best µs a call and its difference from Manor's median.

    PYTHONPATH=TREE python benchmarks/notes/overhead_ablation.py 20

- no_breaker, no_timeout: the stack without that layer;
- cheap_world: a world whose plan is the same list every tick and whose apply only
  counts the tick (no prompts, story, moves or hash);
- no_observe: the latency predictor learns nothing (``observe`` does nothing).
"""
import statistics
import sys
import time

import trio

from manor.bench.games import NextGame
from manor.bench.instant import InstantProvider
from manor.bench.overhead import trio_tick
from manor.config import flags_source
from manor.config.layering import built_in_source, layer_defaults_source
from manor.layers import BreakerLayer, Stack, TimeoutLayer
from manor.run.engine import build_engine, configure, scene_seed

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 10
TICKS = 200
config, scene = configure([built_in_source(), layer_defaults_source(), flags_source({"run.policy": "pipeline", "run.order": "fifo"}, {})])
backend = InstantProvider()


def built():
    return build_engine(config, scene, backend=backend, instruments=[NextGame(scene, scene_seed(config, scene))]).loop


def without(kind):
    loop = built()
    loop.gated = Stack(loop.gated.backend, [layer for layer in loop.gated.layers if not isinstance(layer, kind)])
    return loop


class CheapWorld:
    def __init__(self, world):
        self.requests, self.tick, self.callers, self.hash, self.over = world.plan(), 0, world.callers, world.hash, None

    def plan(self):
        return self.requests

    def apply(self, records):
        self.tick += 1
        return []


class Unlearning:
    def __init__(self, predictor):
        self.latencies = predictor.latencies

    def observe(self, records):
        pass


cheap_world, no_observe = built(), built()
cheap_world.world = CheapWorld(cheap_world.world)
no_observe.predictor = Unlearning(no_observe.predictor)
loops = {"manor": built(), "no_breaker": without(BreakerLayer), "no_timeout": without(TimeoutLayer), "cheap_world": cheap_world, "no_observe": no_observe}
reference = built()
requests = reference.world.plan()


async def manor_ticks(loop):
    return sum([len((await loop.step()).calls) for _ in range(TICKS)])


async def trio_ticks(_):
    for _ in range(TICKS):
        await trio_tick(backend, requests, reference.gate.size)
    return TICKS * len(requests)


async def main():
    contenders = {**{name: (manor_ticks, loop) for name, loop in loops.items()}, "trio": (trio_ticks, None)}
    times = {name: [] for name in contenders}
    for run, loop in contenders.values():
        await run(loop)  # warm up
    for _ in range(ROUNDS):
        for name, (run, loop) in contenders.items():
            started = time.process_time()
            calls = await run(loop)
            times[name].append((time.process_time() - started) / calls * 1e6)
    manor = statistics.median(times["manor"])
    for name, each in times.items():
        median = statistics.median(each)
        print(f"{name:12} median {median:6.2f} best {min(each):6.2f} µs a call   vs manor {median - manor:+6.2f}")


trio.run(main)
