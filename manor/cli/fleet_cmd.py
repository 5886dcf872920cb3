"""``manor fleet``: many worlds side by side, every call through one gate: in one process,
or spread over several that share the gate through Redis (``--processes``; each runs
``manor fleet-part``, ``fleet_part_cmd``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..config import Config, Source
from ..content import Scene
from ..errors import REASONS, ConfigError, SaveError
from ..fleet.in_process import (
    Fleet,
    build_fleet,
    configure_worlds,
    fleet_tenants,
    parts,
)
from ..fleet.processes import Part, ProcessFleet
from ..run import interrupts
from ..run.final_refusal import StopAtFinalRefusal, final_refusal, platform_closed
from ..run.forecast import gate_overload
from ..run.gate_lost import GateLostNotice
from ..run.opening import open_run
from ..tick.statistics import PlatformRejections
from ..wording import counted
from . import output
from .options import sources_from_args
from .run_cmd import errors_table

if TYPE_CHECKING:  # a fleet without saves loads no save code
    from ..saves import SaveWriter

__all__ = ["print_summary", "run", "save_failure", "saves_state", "stopped_after"]


@contextmanager
def _progress(args: argparse.Namespace, total: int) -> Iterator[Callable[[], None] | None]:
    """A bar of the fleet's ``total`` ticks on stderr while inside, unless the output
    is JSON or stderr no terminal; what to call after each tick (``None``: no bar)."""
    if args.json or not Console(stderr=True).is_terminal:
        yield None
        return
    with output.tick_bar(Console(stderr=True), total) as advance:
        yield advance


def run(args: argparse.Namespace) -> int:
    if args.scenes and args.setting_run_scene is not None:
        raise ConfigError("command line: --scene and --scenes both name the worlds' scenes; give one of them")
    sources = sources_from_args(args)
    configured = configure_worlds(sources, args.worlds, args.scenes)
    if args.processes > 1:
        return _run_in_processes(args, sources, configured)
    tenants = fleet_tenants(configured, args.scenes)
    live = open_run(configured, lambda gate: build_fleet(configured, gate=gate, tenants=tenants), world=_fleet_world(configured))
    fleet = live.runs
    paths = _save_paths(args.save_dir, [scene.path for _, scene in configured], force=args.force) if args.save_dir else []
    if (overload := gate_overload(*(world.engine for world in fleet.worlds))) is not None:
        print(f"manor: warning: {overload}", file=sys.stderr)
    notice = GateLostNotice()
    for world in fleet.worlds:
        world.engine.loop.add_instrument(notice)
    settings = configured[0][0].settings
    ticks, interval = settings.run.ticks, settings.run.tick_interval_s

    def after() -> str:
        return stopped_after(fleet.ticks, saves_state(args.save_dir, live.saves))

    async def main(fleet: Fleet) -> None:
        for world in fleet.worlds:  # each stops after its own tick that met a final refusal
            loop = world.engine.loop
            loop.add_instrument(StopAtFinalRefusal(loop.gated.backend, loop.stop_after_tick))
        await fleet.run(ticks, interval)

    try:
        with interrupts.stopped_as_interrupted(after, lambda: close_saves(live.saves, fleet)), _progress(args, ticks * len(fleet.worlds)) as advance:
            if advance is not None:
                bar = output.TickBar(advance)
                for world in fleet.worlds:
                    world.engine.loop.add_instrument(bar)
            live.run(main, after=after, saves=lambda fleet: create_saves(paths, fleet, len(fleet.worlds), force=args.force))
    except interrupts.Interrupted as stopped:
        # The ticks that finished keep their figures, as the fleet's end would print them.
        if max(fleet.ticks):
            _report(args, fleet.summary(), stopped)
        raise
    refusal = next((found for world in fleet.worlds if (found := final_refusal(world.engine.loop.gated.backend)) is not None), None)
    if refusal is not None:
        # The account is the worlds': one refusal no retry cures stops them all, their
        # ticks recorded whole and their saves kept (each loop's run_finished).
        _report(args, fleet.summary())
        raise platform_closed(refusal, after())
    for writer in live.saves:
        writer.check()
    summary = fleet.summary()
    _report(args, summary)
    if live.saves:
        print(f"manor: saved {counted(min(fleet.ticks), 'tick')} of {counted(len(live.saves), 'world')} to {args.save_dir}", file=sys.stderr)
    return output.exit_status_of_calls(summary["worlds"])


def _run_in_processes(args: argparse.Namespace, sources: Sequence[Source], configured: Sequence[tuple[Config, Scene]]) -> int:
    """``manor fleet --processes P``: the worlds spread over P processes that share the
    gate through Redis, with the report of a fleet in one process."""
    settings = configured[0][0].settings
    if not settings.gate.url:
        raise ConfigError(
            f"--processes {args.processes}: the processes of a fleet share one gate through Redis; "
            "give its server with --gate-url, MANOR_GATE_URL or [gate] url in manor.toml"
        )
    # The gate's server is reached once here (``open_run``), so that a server that is
    # down ends in one line before any process starts or any save is made; the worlds
    # are built for the settings' checks and the gate's forecast. The processes run them.
    tenants = fleet_tenants(configured, args.scenes)
    fleet = open_run(configured, lambda gate: build_fleet(configured, gate=gate, tenants=tenants), world=_fleet_world(configured)).runs
    paths = _save_paths(args.save_dir, [scene.path for _, scene in configured], force=args.force) if args.save_dir else []
    if (overload := gate_overload(*(world.engine for world in fleet.worlds))) is not None:
        print(f"manor: warning: {overload}", file=sys.stderr)
    divided = parts(len(configured), args.processes)
    if len(divided) < args.processes:
        print(f"manor: warning: --processes {args.processes} for {len(configured)} worlds: {len(divided)} processes, one world each", file=sys.stderr)
    jobs = [
        Part(
            sources=list(sources), worlds=len(configured), scenes=list(args.scenes), indices=indices,
            saves=[str(paths[index]) for index in indices] if paths else [], force=args.force,
        )
        for indices in divided
    ]  # fmt: skip
    ticks = settings.run.ticks

    def after() -> str:
        saved = (processes.saves_problem or f"{counted(len(paths), 'save')} in {args.save_dir}") if paths else ""
        return stopped_after(processes.ticks_done, saved)

    processes = ProcessFleet(jobs, ticks, warn=lambda line: print(line, file=sys.stderr))
    try:
        with interrupts.stopped_as_interrupted(after), _progress(args, ticks * len(configured)) as advance:
            if advance is not None:
                processes.ticked = advance
            interrupts.run(processes.run, after=after)
    except interrupts.Interrupted as stopped:
        # Each process, stopped, sends its worlds' figures as far as they got.
        if max(processes.ticks_done) and processes.worlds_reported:
            _report(args, processes.summary(), stopped, processes=len(divided))
        raise
    summary = processes.summary()
    _report(args, summary, processes=len(divided))
    if paths:
        print(f"manor: saved {counted(min(processes.ticks_done), 'tick')} of {counted(len(paths), 'world')} to {args.save_dir}", file=sys.stderr)
    return output.exit_status_of_calls(summary["worlds"])


def _fleet_world(configured: Sequence[tuple[Config, Scene]]) -> str:
    """What a fleet runs, as ``manor gate status`` lists it."""
    return f"fleet of {len(configured)} worlds of {', '.join(sorted({scene.spec.name for _, scene in configured}))}"


def _report(args: argparse.Namespace, summary: dict[str, Any], stopped: interrupts.Interrupted | None = None, processes: int = 1) -> None:
    """The fleet's figures on stdout, as JSON or tables; a fleet ``stopped`` by a signal
    says so (``"interrupted": "SIGINT"``) and reports the ticks that finished."""
    if stopped is not None:
        summary = summary | {"interrupted": stopped.signal_name}
    if args.json:
        print(json.dumps(summary))
    else:
        print_summary(output.console(), summary, processes=processes)


def _save_paths(directory: Path, scenes: Sequence[str], *, force: bool) -> list[Path]:
    """One save file per world in ``directory`` (made if missing), named by the world's
    number and scene: ``world-03-wacky_manor.msav``.

    Raises:
        SaveError: the directory cannot be made, or (without ``force``) a save file is
            already there.
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise SaveError(f"{directory}: not a directory") from None
    except OSError as exc:
        raise SaveError(f"{directory}: cannot make the save directory: {exc.strerror or exc}") from None
    width = len(str(len(scenes) - 1))
    paths = [directory / f"world-{index:0{width}d}-{Path(scene).stem}.msav" for index, scene in enumerate(scenes)]
    existing = [path for path in paths if path.exists()]
    if existing and not force:
        more = f" (and {len(existing) - 1} more)" if len(existing) > 1 else ""
        raise SaveError(f"{existing[0]}: already exists{more}; pass --force to overwrite")
    return paths


def stopped_after(ticks: Sequence[int], saved: str) -> str:
    """What a stopped fleet had done, ``ticks`` world by world: ``after 12 ticks of 16
    worlds; 16 saves in runs/`` (``saved``: what became of the saves, "" for none)."""
    done = f"after {counted(_tick_range(ticks), 'tick')} of {counted(len(ticks), 'world')}"
    return f"{done}; {saved}" if saved else done


def _tick_range(ticks: Sequence[int]) -> str:
    """How far worlds got: ``12``, or ``12-13`` when they stopped at different ticks."""
    low, high = min(ticks), max(ticks)
    return str(low) if low == high else f"{low}-{high}"


def saves_state(directory: Path | None, writers: Sequence[SaveWriter]) -> str:
    """What became of the saves: ``16 saves in runs/``, the first that failed, or ""."""
    if not writers:
        return ""
    return save_failure(writers) or f"{counted(len(writers), 'save')} in {directory}"


def create_saves(paths: Sequence[str | Path], fleet: Fleet, worlds: int, *, force: bool) -> list[SaveWriter]:
    """A save for each of ``fleet``'s worlds, at ``paths`` in order, each knowing its
    seat among the whole fleet's ``worlds`` (a process of a fleet runs only some).

    Raises:
        SaveError: a save exists (without ``force``) or cannot be made.
    """
    if not paths:
        return []
    from ..saves import SaveWriter  # here: a fleet without saves loads no save code
    from ..saves.format import FleetSeat

    return [
        SaveWriter.create(path, world.engine, force=force, fleet=FleetSeat(world=world.index, worlds=worlds))
        for path, world in zip(paths, fleet.worlds, strict=False)
    ]


def close_saves(writers: Sequence[SaveWriter], fleet: Fleet) -> None:
    """End each world's save as its loop would have as it ended (for a signal outside
    the trio run; closing twice writes nothing more)."""
    for writer, world in zip(writers, fleet.worlds, strict=False):
        writer.run_finished(world.engine.loop)


def save_failure(writers: Sequence[SaveWriter]) -> str | None:
    """Why the first save that failed did."""
    for writer in writers:
        try:
            writer.check()
        except SaveError as exc:
            return str(exc)
    return None


def print_summary(console: Console, summary: dict[str, Any], processes: int = 1) -> None:
    """The fleet's figures as rich tables: the worlds, the totals and fairness, what
    degraded (its worlds run in ``processes`` processes)."""
    total, fairness = summary["total"], summary["fairness"]
    worlds = summary["worlds"]
    scenes = {world["scene"] for world in worlds}
    title = f"fleet — {counted(total['worlds'], 'world')}" + (f" of {worlds[0]['scene']}" if len(scenes) == 1 else "")
    # Worlds stopped by a signal may have got to different ticks.
    title += (f" in {processes} processes" if processes > 1 else "") + f", {counted(_tick_range([world['ticks'] for world in worlds]), 'tick')}"
    table = Table(
        title=f"{title}, one gate of {total['gate_size']} / platform {total['platform_limit']}, policy {worlds[0]['policy']}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1, 0, 0),
    )
    shares = any(world.get("share_per_weight") is not None for world in worlds)
    columns = [
        "world", *(["scene"] if len(scenes) > 1 else []), "seed", "calls", "degraded", "mean s", "calls/s",
        "weight", *(["share", "/due"] if shares else []), "wait s", "peak", "hash",
    ]  # fmt: skip
    for column in columns:
        if column == "scene":
            table.add_column(column, max_width=14, no_wrap=True, overflow="ellipsis")
        else:
            table.add_column(column, justify="left" if column == "hash" else "right", no_wrap=True)
    for world in worlds:
        rate = "—" if world["calls_per_s"] is None else f"{world['calls_per_s']:.3f}"
        degraded = Text(str(world["degraded"]), style="bold red" if world["degraded"] else "")
        weight = f"{world['weight']:g}" + (f" ≤{world['max_sessions']}" if world["max_sessions"] is not None else "")
        share = [_figure(world.get("backlogged_share")), _figure(world.get("share_per_weight"))] if shares else []
        wait = world["gate_wait_s"]
        table.add_row(
            str(world["index"]), *([world["scene"]] if len(scenes) > 1 else []), str(world["seed"]),
            str(world["calls"]), degraded, f"{world['tick_seconds']['mean']:.3f}", rate, weight, *share,
            f"{wait['mean']:.2f} / {wait['p95']:.2f}", str(world["peak_platform_sessions"]), world["world_hash"][:8],
        )  # fmt: skip
    table.caption = (
        "mean s: its mean tick makespan; calls/s: its calls answered per second; weight: its share at the gate against "
        "the others (≤K: its cap on calls in flight); share: its part of the sessions held while it and another world "
        "waited, /due: that over what its weight is due (1 = fair); wait s: its calls' wait at the gate, mean / p95; "
        "peak: the most platform sessions it held at once; hash: its world hash after its last tick "
        "(--json: every figure of 'manor run --json', its tenant and shares)"
    )
    table.caption_justify = "left"
    console.print(table)
    seconds = total["tick_seconds"]
    table = Table(title="the fleet", title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows = [
        ("calls / ok / degraded", f"{total['calls']} / {total['ok']} / {total['degraded']}"),
        ("platform rejections", PlatformRejections.describe(total["platform_rejections"])),
        ("peak platform sessions", f"{total['peak_platform_sessions']} of {total['platform_limit'] or 'unlimited'}"),
        ("tick makespan mean / p50 / p95 / max (s)", f"{seconds['mean']:.3f} / {seconds['p50']:.3f} / {seconds['p95']:.3f} / {seconds['max']:.3f}"),
        ("fairness: Jain's index of session-time share / weight (1 = each its due)", _figure(fairness["jain_share_per_weight"])),
        ("fairness: mean tick, shortest / longest world", _figure(fairness["makespan_min_max"])),
    ]
    for row in rows:
        table.add_row(*row)
    console.print(table)
    kinds = list(total["degradations"])  # the worlds' caller kinds
    degradations = Table(title="degradations, all worlds (reason × caller kind)", title_justify="left")
    degradations.add_column("reason")
    for kind in kinds:
        degradations.add_column(kind, justify="right")
    for reason in REASONS:
        counts = [total["degradations"][kind][reason] for kind in kinds]
        degradations.add_row(reason, *(Text(str(n), style="bold red" if n else "") for n in counts))
    console.print(degradations)
    errors = errors_table(_merged_errors(worlds, kinds))
    if errors is not None:
        errors.title = "what failed, all worlds (most common messages per reason and caller kind)"
        console.print(errors)


def _figure(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _merged_errors(worlds: Sequence[dict[str, Any]], kinds: Sequence[str], per_group: int = 5) -> list[dict[str, Any]]:
    """The worlds' most common error messages, counted together: ``errors`` rows, by
    reason and then caller kind (``kinds``, in order)."""
    counts: Counter[tuple[str, str, str]] = Counter()
    for world in worlds:
        for row in world["errors"]:
            counts[row["reason"], row["caller"], row["message"]] += row["count"]
    rows = []
    for reason in REASONS:
        for caller in kinds:
            group = [(message, count) for (r, c, message), count in counts.most_common() if (r, c) == (reason, caller)]
            rows += [{"reason": reason, "caller": caller, "message": message, "count": count} for message, count in group[:per_group]]
    return rows
