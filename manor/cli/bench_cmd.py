"""``manor bench``: headless tick benchmarks — scheduling, overhead, fastforward, scale, replay, play, fleet."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

from ..bench.plot import check_plot_path, write_plot
from ..bench.report import print_report
from ..bench.runner import DEFAULT_SUITES, SUITES, interruption, run_bench
from ..bench.suite import BenchContext, Suite
from ..config import Source, resolve
from ..content import content_dir
from ..output_file import check_not_read
from . import output
from .numbers import positive_int
from .options import add_setting_flags, files_read, sources_from_args

__all__ = ["register"]

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
        "--suite", action="append", choices=tuple(SUITES), metavar="NAME", dest="suites",
        help=f"run only this suite (repeatable): {', '.join(SUITES)}; default: {', '.join(DEFAULT_SUITES)}",
    )
    parser.add_argument("--quick", action="store_true", help="a small version of every suite: about a minute (39 s measured on two busy cores), not seconds")
    parser.add_argument("--draws", type=positive_int, default=None, metavar="R", help=f"seeded draws (ticks) per scheduling configuration (default {DRAWS}, --quick {DRAWS_QUICK})")
    parser.add_argument("--json", action="store_true", help="print one JSON object with every figure, nothing else")
    parser.add_argument("--plot", type=Path, default=None, metavar="FILE", help="also draw the scheduling and scale figures to FILE.svg or FILE.png (PNG needs manor[plot])")
    add_setting_flags(parser, _SETTINGS)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    names = args.suites or list(DEFAULT_SUITES)
    sources = sources_from_args(args)
    if args.plot is not None:
        check_plot_path(args.plot, names)
        check_not_read(args.plot, files_read(args, _scene_file(sources)))
    context = BenchContext(
        sources=sources,
        quick=args.quick,
        draws=args.draws or (DRAWS_QUICK if args.quick else DRAWS),
    )
    console = output.console(stderr=True)
    if args.json or not console.is_terminal:
        result = run_bench(names, context)
    else:
        columns = (TextColumn("{task.description:<11}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=console, transient=True) as progress:
            result = run_bench(names, context, _progress_bar(progress))
    stopped = interruption(result)
    if args.plot is not None and stopped is None:
        write_plot(args.plot, result)
    if args.json:
        print(json.dumps(result))
    else:
        print_report(output.console(), result)
        if args.plot is not None and stopped is None:
            output.console().print(f"plot written to {args.plot}")
    if stopped is not None:
        raise stopped
    return 0


def _scene_file(sources: list[Source]) -> str | Path:
    """The scene file a benchmark reads: its path, or a bundled scene's file."""
    scene = resolve(sources).settings.run.scene
    return scene if scene.endswith(".toml") or "/" in scene else content_dir("scenes") / f"{scene}.toml"


def _progress_bar(progress: Progress) -> Callable[[Suite, int], Callable[[int], None]]:
    """One bar per suite, added as the suite starts."""

    def start(suite: Suite, units: int) -> Callable[[int], None]:
        task = progress.add_task(suite.name, total=units)
        return lambda done: progress.advance(task, done)

    return start
