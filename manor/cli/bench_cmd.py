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

from ..bench.catalogue import DEFAULT_SUITES
from ..bench.plot import check_plot_path, write_plot
from ..bench.report import print_report
from ..bench.runner import interruption, run_bench
from ..bench.suite import BenchContext, Suite
from ..config import Source, resolve
from ..content import content_dir
from ..output import check_not_read
from . import output
from .options import files_read, sources_from_args
from .parsers.bench import DRAWS, DRAWS_QUICK

__all__ = ["run"]



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
