"""A figure measured in a new interpreter, as a command's run is: the process it starts in.

What a run costs a call depends on the process around it, not only on the run: in a
process that has run bigger runs before, the heap they grew and left scattered holds the
next run's objects far apart, and a fleet of 256 worlds measured after fleets of 16 and
64 cost some 10–15 % more a call than in a process of its own. ``manor run`` and ``manor
fleet`` each start in a new interpreter; so do the suites' measurements of a run's cost
(``manor.bench.scale``, the fleet's CPU a call): ``in_fresh_process`` runs one of them
there and hands back what it returned.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import attrs

from ..config import Source
from ..errors import ManorError
from .suite import BenchContext, BenchError

__all__ = ["in_fresh_process", "worker_main"]


def in_fresh_process(measure: Callable[..., Any], context: BenchContext, what: str, **arguments: Any) -> Any:
    """``measure(context, **arguments)`` in a new interpreter: what it returned, through
    JSON. ``measure`` is a module's function; the context's settings travel as they were
    read here, so the worker sees the same ones (its progress bar is the caller's to move).

    Raises:
        BenchError: the measuring process failed; ``what`` and its last line of stderr say
            which and why.
    """
    job = {
        "measure": f"{measure.__module__}:{measure.__qualname__}",
        "sources": [attrs.asdict(source) for source in context.sources],
        "quick": context.quick,
        "arguments": arguments,
    }
    code = "from manor.bench.fresh_process import worker_main; worker_main()"
    done = subprocess.run([sys.executable, "-c", code, json.dumps(job)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        raise BenchError(f"{what}: {lines[-1]}")
    return json.loads(done.stdout)


def worker_main() -> None:
    """Entry point of the measuring process: a JSON job on argv, a JSON result on stdout."""
    job = json.loads(sys.argv[1])
    module, name = job["measure"].split(":")
    measure = getattr(importlib.import_module(module), name)
    context = BenchContext(sources=[Source(**source) for source in job["sources"]], quick=job["quick"])
    try:
        print(json.dumps(measure(context, **job["arguments"])))
    except ManorError as exc:
        sys.exit(str(exc))  # one line on stderr, which the parent quotes
