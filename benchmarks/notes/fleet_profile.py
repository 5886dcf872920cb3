"""CPU a call of a fleet of WORLDS worlds (gate scaled), or of ``manor run`` (``run``), over
TICKS ticks, as the fleet suite's CPU figure measures one row: for a sampling profile
(benchmarks/notes/fleet_cpu.md, "Where a fleet's CPU goes beyond a run's").

    PYTHONPATH=TREE py-spy record --native -r 500 -f raw -o out.txt -- \
        /root/.pyenv/versions/3.11.7/bin/python benchmarks/notes/fleet_profile.py 16 10   # 256 10, run 1000
"""
import sys

from manor.bench.fleet import _cpu_per_call
from manor.bench.suite import BenchContext

worlds, ticks = sys.argv[1], int(sys.argv[2])
print(_cpu_per_call(BenchContext(), None if worlds == "run" else int(worlds), ticks) * 1e6)
