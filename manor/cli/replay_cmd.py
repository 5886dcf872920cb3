"""``manor replay``: re-run a save's ticks with the recorded responses — to verify that
the run reproduces, or to see what other settings would have done with the same calls."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from ..errors import REASONS, ConfigError
from ..replay import Replay, replay
from ..saves import read_save
from ..saves.format import FleetSeat
from ..tick.statistics import PlatformRejections
from ..wording import counted
from . import output
from .options import flags_from_args
from .run_cmd import errors_table

__all__ = ["print_comparison", "run"]



def run(args: argparse.Namespace) -> int:
    overrides = flags_from_args(args)
    if args.verify and overrides.values:
        flags = ", ".join(overrides.spelling[key] for key in overrides.values)
        raise ConfigError(f"--verify replays the recorded settings; it cannot be combined with {flags}")
    save = read_save(args.save)
    result = replay(save, overrides if overrides.values else None)
    for warning in result.warnings:
        print(f"manor: warning: {warning}", file=sys.stderr)
    if args.verify:
        return _report_verification(args, result, save.header.fleet)
    summary = {**result.summary(), "recorded": result.recording.summary(), "drawn": result.drawn}
    if args.json:
        print(json.dumps(summary))
    else:
        changed = ", ".join(f"{overrides.spelling[key]} {value}" for key, value in overrides.values.items())
        seat = save.header.fleet
        if seat is not None:
            how = "alone, through a gate of its own" if overrides.values else "with the shared gate's recorded admissions"
            changed = f"{changed or 'the recorded settings'} (world {seat.world} of a fleet of {seat.worlds}, replayed {how})"
        print_comparison(output.console(), save.name, summary, changed or "the recorded settings")
    return output.exit_status_of_calls([summary])


def _report_verification(args: argparse.Namespace, result: Replay, seat: FleetSeat | None) -> int:
    mismatch = result.mismatch
    if args.json:
        report: dict[str, Any] = {
            "ticks": result.ticks,
            "verified": result.verified,
            "first_mismatch": None if mismatch is None else mismatch.tick,
            "world_hash": result.statistics.world_hash,
        }
        if seat is not None:
            report["fleet"] = {"world": seat.world, "worlds": seat.worlds}
        print(json.dumps(report))
    elif mismatch is None and seat is not None:
        matched = "the world hash, and when each call was let through and ended, match" if result.times_checked else "the world hash matches"
        print(f"{args.save}: world {seat.world} of a fleet of {seat.worlds}: {counted(result.ticks, 'tick')} replayed with the shared gate's "
              f"recorded admissions; {matched} the recording after every tick ({result.statistics.world_hash})")  # fmt: skip
    elif mismatch is None:
        print(f"{args.save}: {counted(result.ticks, 'tick')} replayed; the world hash matches the recording after every tick "
              f"({result.statistics.world_hash})")  # fmt: skip
    else:
        hashes = "" if mismatch.recorded == mismatch.replayed else f" (world hash recorded {mismatch.recorded}, replayed {mismatch.replayed})"
        print(f"{args.save}: tick {mismatch.tick} differs from the recording: {mismatch.detail}{hashes}")
    return 0 if mismatch is None else 1


def print_comparison(console: Console, name: str, summary: dict[str, Any], changed: str) -> None:
    """The recorded and the replayed figures, side by side."""
    recorded = summary["recorded"]
    table = Table(title=f"{name} — {counted(summary['ticks'], 'tick')} replayed with {changed}", title_justify="left")
    table.add_column("figure", no_wrap=True)
    table.add_column("recorded", justify="right")
    table.add_column("replayed", justify="right")

    def gate(figures: dict[str, Any]) -> str:
        size = "no gate" if figures["policy"] == "legacy" else str(figures["gate_size"])
        return f"{size} / {figures['platform_limit']}"

    def seconds(figures: dict[str, Any], key: str) -> str:
        return f"{figures['tick_seconds'][key]:.3f}"

    rows = [
        ("policy", lambda f: f["policy"]),
        ("ticket order", lambda f: f["order"]),
        ("gate size / platform limit", gate),
        ("calls", lambda f: str(f["calls"])),
        ("degraded", lambda f: str(f["degraded"])),
        ("platform rejections", lambda f: PlatformRejections.describe(f["platform_rejections"])),
        ("peak platform sessions", lambda f: str(f["peak_platform_sessions"])),
        ("tick makespan mean (s)", lambda f: seconds(f, "mean")),
        ("tick makespan p95 (s)", lambda f: seconds(f, "p95")),
        ("tick makespan max (s)", lambda f: seconds(f, "max")),
        ("world hash", lambda f: f["world_hash"][:12] + "…"),
    ]
    if recorded["world"]["over"] or summary["world"]["over"]:
        rows.append(("game over", lambda f: f["world"]["summary"] or "not over"))
    for label, figure in rows:
        table.add_row(label, figure(recorded), figure(summary))
    for kind in summary["degradations"]:  # the world's caller kinds, in its order
        for reason in REASONS:
            was, now = recorded["degradations"][kind][reason], summary["degradations"][kind][reason]
            if was or now:
                table.add_row(f"degraded: {kind}, {reason}", str(was), str(now))
    console.print(table)
    console.print(f"responses drawn from the simulated backend (the recording has none for them): {summary['drawn']}")
    errors = errors_table(summary["errors"])
    if errors is not None:
        errors.title = "what failed in the replay (most common messages per reason and caller kind)"
        console.print(errors)
