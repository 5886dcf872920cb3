"""The parser of ``manor bench``: its description and flags (what it does: ``manor.cli.bench_cmd``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ...bench.catalogue import DEFAULT_SUITES, SUITE_MODULES
from ..numbers import positive_int
from ..options import add_setting_flags

__all__ = ["DRAWS", "DRAWS_QUICK", "register"]

#: Seeded draws per scheduling configuration: the full run, and --quick.
DRAWS = 200
DRAWS_QUICK = 5
#: The settings a benchmark takes from the command line; the suites set the others
#: (policy, order, clock) run by run.
_SETTINGS = ("run.scene", "run.seed", "run.batch_size", "gate.size", "platform.limit", "gate.url")


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Benchmark the engine on a scene (default: the Wacky Manor). scheduling: "
        "tick makespans of batch, pipeline and longest-first against the lower bound of any "
        "schedule (virtual clock, exact). overhead: calls per second through the whole stack "
        "against bare trio and aiometer. fastforward: ticks per second of a virtual-clock run "
        "against bare trio tasks sleeping the same latencies. scale: cost per call and memory at 100 to 100,000 "
        "agents. replay: ticks per second replaying a save. play: what the live dashboard costs the run "
        "it watches. fleet (only when asked for): 1, 4 and 16 worlds on one gate, each world's ticks against its "
        "share of the gate, and how evenly the gate serves them. redis-gate (only when asked for): the gate shared "
        "through Redis by 1, 2 and 4 processes (--gate-url, or a redis-server started for it). Prints tables (or --json) and "
        "whether each target is met."
    )
    parser.add_argument(
        "--suite", action="append", choices=tuple(SUITE_MODULES), metavar="NAME", dest="suites",
        help=f"run only this suite (repeatable): {', '.join(SUITE_MODULES)}; default: {', '.join(DEFAULT_SUITES)}",
    )
    parser.add_argument("--quick", action="store_true", help="a small version of every suite: about a minute (39 s measured on two busy cores), not seconds")
    parser.add_argument("--draws", type=positive_int, default=None, metavar="R", help=f"seeded draws (ticks) per scheduling configuration (default {DRAWS}, --quick {DRAWS_QUICK})")
    parser.add_argument("--json", action="store_true", help="print one JSON object with every figure, nothing else")
    parser.add_argument("--plot", type=Path, default=None, metavar="FILE", help="also draw the scheduling and scale figures to FILE.svg or FILE.png (PNG needs manor[plot])")
    add_setting_flags(parser, _SETTINGS)
    parser.set_defaults(handler="run")
