"""Instructions a call, for callgrind (benchmarks/notes/admission.md, seams.md,
ticket_book.md): one suite's Manor contender (WHO ``manor``), or its bare-trio reference
(``trio``), for TICKS ticks of the Wacky Manor; a call's instructions are the difference
of two TICKS over the difference of their calls.

    PYTHONHASHSEED=0 PYTHONPATH=TREE valgrind --tool=callgrind \
        python benchmarks/notes/call_instructions.py overhead manor 120   # and 20

overhead: the zero-latency backend, real clock; fastforward: the scene's simulator,
virtual clock. It prints the calls made.
"""
import sys
import trio, trio.testing
from manor.config import flags_source
from manor.config.layering import built_in_source, layer_defaults_source
from manor.run.engine import build_engine, configure, scene_seed, scene_sim
from manor.bench.instant import InstantProvider
from manor.bench.games import NextGame
from manor.tick.statistics import RunStatistics

suite, who, ticks = sys.argv[1], sys.argv[2], int(sys.argv[3])
if suite == "overhead":
    config, scene = configure([built_in_source(), layer_defaults_source(), flags_source({"run.policy": "pipeline", "run.order": "fifo"}, {})])
    backend, instruments, clock = InstantProvider(), [], None
else:
    config, scene = configure([built_in_source(), layer_defaults_source(), flags_source({}, {})])
    backend, instruments, clock = scene_sim(config, scene), [RunStatistics()], trio.testing.MockClock(autojump_threshold=0)
loop = build_engine(config, scene, backend=backend, instruments=[*instruments, NextGame(scene, scene_seed(config, scene))]).loop


async def manor_ticks():
    calls = 0
    for _ in range(ticks):
        calls += len((await loop.step()).calls)
    return calls


async def overhead_reference():
    from manor.bench.overhead import trio_tick

    requests = loop.world.plan()
    for _ in range(ticks):
        await trio_tick(backend, requests, loop.gate.size)
    return ticks * len(requests)


async def fastforward_reference():
    from manor.bench.fastforward import trio_ticks

    records = [await loop.step() for _ in range(20)]
    latencies = [[c.finished_at - c.admitted_at for c in r.calls if c.admitted_at is not None] for r in records]
    latencies = [latencies[i % 20] for i in range(ticks)]
    await trio_ticks(latencies, loop.gate.size)
    return sum(map(len, latencies))


main = manor_ticks if who == "manor" else overhead_reference if suite == "overhead" else fastforward_reference
print(trio.run(main, clock=clock))
