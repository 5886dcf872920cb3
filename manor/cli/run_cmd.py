"""``manor run``: run a scene headless and report what every tick cost."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import trio
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..errors import REASONS, SharedGateError, WorldError, error_line
from ..output_file import check_not_read
from ..run import interrupts
from ..run.engine import Engine, build_engine, configure
from ..run.final_refusal import StopAtFinalRefusal, final_refusal, platform_closed
from ..run.forecast import gate_overload
from ..run.gate_lost import GateLostNotice
from ..run.opening import open_run
from ..tick.statistics import PlatformRejections, RunStatistics
from ..wording import counted
from . import output
from .options import files_read, sources_from_args
from .output import report_saved

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..saves import SaveWriter

__all__ = ["errors_table", "print_summary", "run"]


def run(args: argparse.Namespace) -> int:
    config, scene = configure(sources_from_args(args))
    if args.save:  # --force may replace a save, never the scene or config read
        check_not_read(args.save, files_read(args, scene.path))
    stats = RunStatistics()
    live = open_run([(config, scene)], lambda gate: build_engine(config, scene, instruments=[stats, GateLostNotice()], gate=gate))
    engine = live.runs
    if (overload := gate_overload(engine)) is not None:
        print(f"manor: warning: {overload}", file=sys.stderr)
    ticks = config.settings.run.ticks
    interval = config.settings.run.tick_interval_s
    console = Console(stderr=True)
    save = _save_writer(args) if args.save else None

    def after() -> str:
        return interrupts.ran(stats.ticks, next(iter(live.saves), None))

    def close() -> None:
        for writer in live.saves:
            writer.run_finished(engine.loop)

    async def main(engine: Engine) -> None:
        with trio.CancelScope() as stop:  # cancelled after a tick that met a final refusal
            engine.loop.add_instrument(StopAtFinalRefusal(engine.loop.gated.backend, stop.cancel))
            await engine.loop.run(ticks, interval)

    def report(summary: dict[str, Any]) -> None:
        if args.json:
            print(json.dumps(summary))
        else:
            print_summary(output.console(), summary)

    try:
        with interrupts.stopped_as_interrupted(after, close):
            if args.json or not console.is_terminal:
                live.run(main, after=after, saves=save)
            else:
                with output.tick_bar(console, ticks) as advance:
                    engine.loop.add_instrument(output.TickBar(advance))
                    live.run(main, after=after, saves=save)
    except WorldError as failed:
        # The world's bug, not Manor's: the ticks before it are kept, and said so.
        close()
        raise WorldError(f"{failed} — the run stopped {after()}") from failed.__cause__
    except interrupts.Interrupted as stopped:
        # The ticks that finished keep their figures, as a run's end would print them.
        if stats.ticks:
            report(stats.summary(engine) | {"interrupted": stopped.signal_name})
        raise
    except SharedGateError:
        # The shared gate was lost for longer than the run waits: the ticks that
        # finished keep their figures and their save; the error is the last line.
        if stats.ticks:
            report(stats.summary(engine))
        for writer in live.saves:
            report_saved(writer)
        raise
    if (refusal := final_refusal(engine.loop.gated.backend)) is not None:
        # The ticks that finished keep their figures and their save, as after Ctrl-C.
        close()
        report(stats.summary(engine) | {"stopped": error_line(refusal)})
        raise platform_closed(refusal, after())
    for writer in live.saves:
        writer.check()
    summary = stats.summary(engine)
    report(summary)
    for writer in live.saves:
        report_saved(writer)
    return output.exit_status_of_calls([summary])


def _save_writer(args: argparse.Namespace) -> Callable[[Engine], list[SaveWriter]]:
    """The run's save writer, made once its engine is: the save code is loaded here, not
    above, so that a run without a save (every `manor run` a script or a test starts)
    loads none of it."""
    from ..saves import SaveWriter

    return lambda engine: [SaveWriter.create(args.save, engine, force=args.force)]


def print_summary(console: Console, summary: dict[str, Any]) -> None:
    """The run's figures as rich tables."""
    table = Table(title=f"{summary['scene']} — {counted(summary['ticks'], 'tick')}, policy {summary['policy']}", title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    seconds = summary["tick_seconds"]
    gate = "no gate" if summary["policy"] == "legacy" else str(summary["gate_size"])
    rows = [
        ("gate size / platform limit", f"{gate} / {summary['platform_limit']}"),
        ("ticket order", summary["order"]),
        ("seed", str(summary["seed"])),
        ("calls", str(summary["calls"])),
        ("ok", str(summary["ok"])),
        ("degraded", str(summary["degraded"])),
        ("platform rejections", PlatformRejections.describe(summary["platform_rejections"])),
        ("peak platform sessions", str(summary["peak_platform_sessions"])),
        ("tick makespan mean / p50 / p95 / max (s)", f"{seconds['mean']:.3f} / {seconds['p50']:.3f} / {seconds['p95']:.3f} / {seconds['max']:.3f}"),
        ("tokens in / out", f"{summary['tokens']['input']} / {summary['tokens']['output']}"),
        ("cost", f"{summary['cost']:g}"),
        ("world hash", summary["world_hash"]),
    ]
    repairs = summary.get("repairs")  # a summary from before structured answers has none
    if repairs and repairs["asked"]:
        rows.insert(6, ("answers re-asked / repaired", f"{repairs['asked']} / {repairs['repaired']}"))
    sizes = summary.get("gate_sizes")  # a learned gate's (gate.size = "auto")
    if sizes:
        rows.insert(1, ("learned gate: start / min / max / final (changes)", f"{sizes['start']} / {sizes['min']} / {sizes['max']} / {sizes['final']} ({sizes['changes']})"))
    for row in rows:
        table.add_row(*row)
    console.print(table)
    world = summary.get("world")  # a summary from before worlds could end has none
    if world and world["over"]:
        console.print(f"game over after {counted(summary['ticks'], 'tick')}: {world['summary']}")
    degradations = Table(title="degradations (reason × caller kind)", title_justify="left")
    degradations.add_column("reason", no_wrap=True)  # a world with many caller kinds narrows them, not it
    kinds = list(summary["degradations"])  # the world's caller kinds, in its order
    for kind in kinds:
        degradations.add_column(kind, justify="right")
    for reason in REASONS:
        counts = [summary["degradations"][kind][reason] for kind in kinds]
        degradations.add_row(reason, *(Text(str(n), style="bold red" if n else "") for n in counts))
    console.print(degradations)
    errors = errors_table(summary["errors"])
    if errors is not None:
        console.print(errors)


def errors_table(rows: Sequence[dict[str, Any]]) -> Table | None:
    """What the degraded calls' errors said, most common first per reason and caller
    kind (``RunStatistics``' ``errors``); ``None`` when nothing degraded. Print it with
    markup off (``output.console``): a server's message may hold brackets."""
    if not rows:
        return None
    table = Table(title="what failed (most common messages per reason and caller kind)", title_justify="left")
    table.add_column("count", justify="right")
    table.add_column("reason", no_wrap=True)
    table.add_column("caller", no_wrap=True)
    table.add_column("message", overflow="fold")
    for row in rows:
        table.add_row(str(row["count"]), row["reason"], row["caller"], row["message"])
    return table
