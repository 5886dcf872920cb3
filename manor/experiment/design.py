"""The bounded-wait experiment's fixed numbers, as docs/internals.md states them: here,
apart from the run, so that ``manor experiment --help`` says them without loading it."""

from __future__ import annotations

__all__ = ["CAPACITY", "DURATION_S", "HANG_CHOICES", "LATENCIES_S"]

#: Latency of each request (s), 1 to 12. Requests 4 and 8 hang when chosen to; when they
#: do not, they take 1.3 s like their neighbours.
LATENCIES_S: tuple[float, ...] = (1.3, 1.3, 1.3, 1.3, 1.3, 1.3, 1.3, 1.3, 1.1, 6.0, 1.3, 0.8)
#: The remote agent's capacity (calls running at once).
CAPACITY = 3
#: How long the experiment runs (s).
DURATION_S = 60.0
#: ``--hangs`` spellings and the requests they make hang.
HANG_CHOICES: dict[str, tuple[int, ...]] = {"4,8": (4, 8), "4": (4,), "none": ()}
