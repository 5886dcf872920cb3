"""Instructions a call for callgrind (benchmarks/notes/admission.md): one suite's manor
contender, or its bare-trio reference, for N ticks; a call's instructions are the
difference of two N over the difference of their calls.

    PYTHONHASHSEED=0 PYTHONPATH=TREE valgrind --tool=callgrind \
        python benchmarks/notes/admission_instructions.py overhead manor 120   # and 20
"""
import sys
import trio, trio.testing
from manor.config import flags_source
from manor.config.layering import built_in_source, layer_defaults_source
from manor.run.engine import build_engine, configure, scene_seed, scene_sim
from manor.bench.instant import InstantProvider
from manor.bench.games import NextGame
from manor.bench.overhead import trio_tick
from manor.bench.fastforward import trio_ticks
from manor.tick.statistics import RunStatistics

suite, who, ticks = sys.argv[1], sys.argv[2], int(sys.argv[3])
if suite == "overhead":
    config, scene = configure([built_in_source(), layer_defaults_source(), flags_source({"run.policy": "pipeline", "run.order": "fifo"}, {})])
    provider = InstantProvider()
    loop = build_engine(config, scene, backend=provider, instruments=[NextGame(scene, scene_seed(config, scene))]).loop
    async def main():
        calls = 0
        if who == "manor":
            for _ in range(ticks):
                calls += len((await loop.step()).calls)
        else:
            requests = loop.world.plan()
            for _ in range(ticks):
                await trio_tick(provider, requests, loop.gate.size)
                calls += len(requests)
        return calls
    print(trio.run(main))
else:
    config, scene = configure([built_in_source(), layer_defaults_source(), flags_source({}, {})])
    loop = build_engine(config, scene, backend=scene_sim(config, scene), instruments=[RunStatistics(), NextGame(scene, scene_seed(config, scene))]).loop
    async def main():
        calls = 0
        if who == "manor":
            for _ in range(ticks):
                calls += len((await loop.step()).calls)
        else:
            records = [await loop.step() for _ in range(20)]
            lat = [[c.finished_at - c.admitted_at for c in r.calls if c.admitted_at is not None] for r in records]
            lat = [lat[i % 20] for i in range(ticks)]
            await trio_ticks(lat, loop.gate.size)
            calls = sum(map(len, lat))
        return calls
    print(trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0)))
