"""Allocations a call, from two callgrind runs of call_instructions.py (benchmarks/notes/
overhead_structure.md): how many times the interpreter's allocators were called, the
difference of the TICKS 120 and TICKS 20 runs over the difference of their calls.

    PYTHONHASHSEED=0 PYTHONPATH=TREE valgrind --tool=callgrind --callgrind-out-file=a.out \\
        /root/.pyenv/versions/3.11.7/bin/python benchmarks/notes/call_instructions.py overhead manor 120
    ... --callgrind-out-file=b.out ... overhead manor 20
    python benchmarks/notes/call_allocations.py a.out b.out 1400    # 1,680 - 280 calls

``_PyObject_Malloc``: every block pymalloc hands out (objects, tracked ones included,
and buffers), not what comes from a type's free list (most tuples and floats);
``tuple_alloc`` and ``PyFloat_FromDouble`` count every tuple and float made, from a free
list or not; ``_PyObject_GC_New``/``_NewVar``: objects the cyclic collector tracks
(instances, coroutines, tuples not from the free list); ``PyMethod_New``: bound
methods of Python functions; ``PyCMethod_New``: of built-in ones.
"""
import re
import sys
from collections import Counter

ALLOCATORS = ("_PyObject_Malloc", "tuple_alloc", "PyFloat_FromDouble", "_PyObject_GC_New", "_PyObject_GC_NewVar", "PyMethod_New", "PyCMethod_New", "PyList_New")


def calls_to(path: str) -> Counter[str]:
    """Calls made to each function, by name (callgrind names a function once, then by number)."""
    names: dict[str, str] = {}
    calls: Counter[str] = Counter()
    callee = None
    with open(path) as lines:
        for line in lines:
            named = re.match(r"(c?fn)=\((\d+)\)(?: (.*))?", line)
            if named:
                kind, number, name = named.groups()
                if name:
                    names[number] = name.strip()
                if kind == "cfn":
                    callee = names.get(number)
                continue
            if line.startswith("calls=") and callee is not None:
                calls[callee] += int(line.split()[0][len("calls=") :])
                callee = None
    return calls


more, fewer, calls = calls_to(sys.argv[1]), calls_to(sys.argv[2]), float(sys.argv[3])
for name in ALLOCATORS:
    print(f"{(more[name] - fewer[name]) / calls:7.2f}  {name}")
