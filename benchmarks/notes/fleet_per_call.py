"""CPU seconds a call of a fleet of WORLDS worlds (gate scaled) over TICKS ticks, as the
fleet suite's CPU figure measures one row (benchmarks/notes/fleet_cpu.md); under
cachegrind, a call's counts are the difference of two TICKS over their calls.

    PYTHONHASHSEED=0 PYTHONPATH=TREE valgrind --tool=cachegrind --cache-sim=yes \
        --D1=49152,12,64 --LL=2097152,16,64 \
        /root/.pyenv/versions/3.11.7/bin/python benchmarks/notes/fleet_per_call.py 256 3   # and 1
"""
import sys

from manor.bench.fleet import _cpu_per_call
from manor.bench.suite import BenchContext

worlds, ticks = int(sys.argv[1]), int(sys.argv[2])
print(_cpu_per_call(BenchContext(), worlds, ticks) * 1e6)
