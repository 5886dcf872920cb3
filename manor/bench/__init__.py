"""Headless tick benchmarks (``manor bench``).

    catalogue   every suite's name and module, and those run by default (read without
                importing a suite: what ``manor bench --help`` offers)
    suite       what a suite is; the context it runs in (settings, --quick, progress)
    scheduling  makespans of batch, pipeline, longest-first against the lower bound
    overhead    calls per second through the stack, against bare trio and aiometer
    scale       cost per call and memory at 100 to 100,000 agents
    replay      ticks per second replaying a save (the saves module's benchmark)
    play        calls per second with the live dashboard watching, against headless
    fleet       many worlds on one gate: each world's ticks against its share, fairness
    instant     the zero-latency backend overhead and scale run against
    runner      runs the suites asked for into one result
    report      the targets, and the result as tables
    plot        the result as an SVG (or, with matplotlib, PNG) picture

The names below are imported when first asked for, so that importing ``catalogue``
loads no suite.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .runner import SUITES, run_bench
    from .suite import BenchContext, BenchError, Suite

__all__ = ["SUITES", "BenchContext", "BenchError", "Suite", "run_bench"]

#: Where each exported name is defined.
_HOMES = {"SUITES": "runner", "run_bench": "runner", "BenchContext": "suite", "BenchError": "suite", "Suite": "suite"}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
