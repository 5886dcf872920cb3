"""``manor experiment bounded-wait``: docs/internals.md's bounded-wait experiment, by the real adapter."""

from __future__ import annotations

import argparse
import functools
import json

import msgspec
from rich.table import Table
from rich.text import Text

from ..experiment.bounded_wait import (
    DURATION_S,
    HANG_CHOICES,
    LATENCIES_S,
    ExperimentResult,
    ExperimentSettings,
    run_in_process,
    run_over_http,
)
from ..run import interrupts
from . import output

__all__ = ["run_bounded_wait"]


def run_bounded_wait(args: argparse.Namespace) -> int:
    settings = ExperimentSettings(
        workers=args.workers, timeout_s=args.timeout, cancel=args.cancel, hangs=HANG_CHOICES[args.hangs]
    )
    exact = run_in_process(settings)
    result = interrupts.run(functools.partial(run_over_http, settings, time_scale=args.time_scale)) if args.http else exact
    if args.json:
        print(json.dumps(msgspec.to_builtins(result)))
        return 0
    console = output.console()
    how = f"over HTTP, time scale {args.time_scale:g}" if args.http else "in process, virtual clock"
    console.print(_table(result, how))
    console.print(
        Text.assemble(
            "answered ", (str(result.answered), "bold"), "   timed out ", (str(result.timed_out), "bold"),
            f"   unfinished at {DURATION_S:g} s ", (str(result.unfinished), "bold"),
        )
    )  # fmt: skip
    if args.http:
        console.print(_agreement(exact, result, args.time_scale))
    return 0


def _table(result: ExperimentResult, how: str) -> Table:
    timeout = f"{result.timeout_s:g} s" if result.timeout_s else "none"
    hangs = ",".join(map(str, result.hangs)) or "none"
    table = Table(
        title=f"bounded wait: {result.workers} workers, timeout {timeout}, cancel {'on' if result.cancel else 'off'}, "
        f"hangs {hangs} ({how})",
        title_justify="left",
    )
    for column in ("req", "latency", "arrived", "worker", "remote start", "finished", "outcome"):
        table.add_column(column, justify="left" if column == "outcome" else "right")
    style = {"answered": "green", "timed_out": "yellow", "unfinished": "red"}
    for request in result.requests:
        latency = "hang" if request.id in result.hangs else f"{LATENCIES_S[request.id - 1]:g}"
        table.add_row(
            str(request.id),
            latency,
            _time(request.arrived_s),
            _time(request.worker_s),
            _time(request.remote_start_s),
            _time(request.finished_s),
            Text(request.outcome, style=style[request.outcome]),
        )
    return table


def _agreement(exact: ExperimentResult, http: ExperimentResult, time_scale: float) -> Text:
    outcomes = [r.id for r, h in zip(exact.requests, http.requests) if r.outcome != h.outcome]
    drift = 0.0
    for r, h in zip(exact.requests, http.requests):
        for a, b in zip(_times(r), _times(h)):
            if (a is None) != (b is None):
                outcomes.append(r.id)
            elif a is not None and b is not None:
                drift = max(drift, abs(a - b))
    if outcomes:
        return Text(f"differs from the exact in-process run at request(s) {sorted(set(outcomes))}", style="red")
    return Text.assemble(
        ("agrees with the exact in-process run", "green"),
        f": same outcomes; times within {drift:.3f} s ({drift * time_scale * 1000:.0f} ms of real time)",
    )


def _times(request: object) -> tuple[float | None, ...]:
    return tuple(getattr(request, f) for f in ("arrived_s", "worker_s", "remote_start_s", "finished_s"))


def _time(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"
