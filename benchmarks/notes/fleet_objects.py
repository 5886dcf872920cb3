"""Objects the collector tracks mid-tick in a fleet of WORLDS worlds (the gate scaled, as
the fleet suite's CPU figure runs it), by type, sampled at virtual second T of a 3-tick
run, after a full collection; and the tasks alive then (benchmarks/notes/fleet_cpu.md).
What was built before the run is frozen (``open_run``) and not counted.

    PYTHONPATH=TREE python benchmarks/notes/fleet_objects.py 256 3.0
"""
import collections, gc, sys
import trio
from manor.bench import fleet as bf
from manor.bench.suite import BenchContext
from manor.fleet.in_process import build_fleet, configure_worlds
from manor.run.engine import scene_sim
from manor.run.opening import open_run

worlds, at = int(sys.argv[1]), float(sys.argv[2])
context = BenchContext()
sources = bf._cpu_settings(context, worlds)
configured = configure_worlds(sources, worlds)
live = bf._virtual(open_run(configured, lambda gate: build_fleet(configured, gate=gate, backends=lambda index: scene_sim(*configured[index]))))
sample = {}

async def main(fleet):
    async def sampler():
        await trio.sleep(at)
        gc.collect()
        sample["types"] = collections.Counter(type(o).__qualname__ for o in gc.get_objects())
        sample["tasks"] = sum(1 for _ in _walk(trio.lowlevel.current_root_task()))
    async with trio.open_nursery() as n:
        n.start_soon(sampler)
        await fleet.run(3)

def _walk(task):
    yield task
    for nursery in task.child_nurseries:
        for child in nursery.child_tasks:
            yield from _walk(child)

live.run(main, after=lambda: "")
types = sample["types"]
print("tasks", sample["tasks"], "objects", sum(types.values()))
for name, n in types.most_common(25):
    print(f"{n:8d} {name}")
