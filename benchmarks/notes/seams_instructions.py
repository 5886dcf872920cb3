"""Instructions a call for callgrind (benchmarks/notes/seams.md): one suite's manor contender for N ticks; a call's instructions are the difference of two N over the difference of their calls."""
import sys
import trio, trio.testing
from manor.config import flags_source
from manor.config.layering import built_in_source, layer_defaults_source
from manor.run.engine import build_engine, configure, scene_seed
from manor.bench.instant import InstantProvider
from manor.bench.games import NextGame

suite, ticks = sys.argv[1], int(sys.argv[2])
if suite == "overhead":
    config, scene = configure([built_in_source(), layer_defaults_source(), flags_source({"run.policy": "pipeline", "run.order": "fifo"}, {})])
    loop = build_engine(config, scene, backend=InstantProvider(), instruments=[NextGame(scene, scene_seed(config, scene))]).loop
    async def main():
        calls = 0
        for _ in range(ticks):
            record = await loop.step()
            calls += len(record.calls)
        return calls
    print(trio.run(main))
else:
    config, scene = configure([built_in_source(), layer_defaults_source(), flags_source({}, {})])
    from manor.run.engine import scene_sim
    from manor.tick.statistics import RunStatistics
    loop = build_engine(config, scene, backend=scene_sim(config, scene), instruments=[RunStatistics(), NextGame(scene, scene_seed(config, scene))]).loop
    async def main():
        calls = 0
        for _ in range(ticks):
            record = await loop.step()
            calls += len(record.calls)
        return calls
    print(trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0)))
