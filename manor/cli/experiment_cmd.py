"""``manor experiment bounded-wait``: docs/internals.md's bounded-wait experiment, by the real adapter."""

from __future__ import annotations

import argparse
import functools
import json

import msgspec
from rich.table import Table
from rich.text import Text

from ..experiment.bounded_wait import (
    CAPACITY,
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
from .numbers import non_negative_float, positive_float, positive_int

__all__ = ["register"]


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = "Run an experiment."
    experiments = parser.add_subparsers(title="experiments", metavar="EXPERIMENT", parser_class=type(parser))
    bounded = experiments.add_parser(
        "bounded-wait",
        help="hung calls to a remote agent: workers, per-call timeout, cancel-on-timeout",
        description=f"Twelve requests, request i arriving at (i-1) s, go through the agno adapter (N workers, FIFO) "
        f"to a remote agent that runs {CAPACITY} calls at once and queues the rest. Requests 4 and 8 hang (see --hangs). The "
        f"timeout counts from getting a worker; on timeout the worker is freed, a remotely queued call is dropped, "
        f"a started one runs on unless --cancel. Runs {DURATION_S:g} s of virtual time, exactly.",
        epilog="examples:\n  manor experiment bounded-wait\n  manor experiment bounded-wait --timeout 3 --cancel\n"
        "  manor experiment bounded-wait --http --time-scale 0.1",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bounded.add_argument("--workers", type=positive_int, default=2, help="adapter workers (default: %(default)s)")
    bounded.add_argument(
        "--timeout", type=non_negative_float, default=0.0, metavar="S", help="per-call timeout in seconds; 0 = none (default)"
    )
    bounded.add_argument("--cancel", action="store_true", help="cancel the remote run when a call times out")
    # A metavar that lists the spellings: argparse's own "{4,8,4,none}" reads as four choices.
    bounded.add_argument(
        "--hangs", choices=tuple(HANG_CHOICES), default="4,8", metavar="|".join(HANG_CHOICES),
        help="the requests that hang: 4 and 8, only 4, or none (default: %(default)s)",
    )  # fmt: skip
    bounded.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    bounded.add_argument(
        "--http",
        action="store_true",
        help="run against a real serve-agent on loopback, in real time, and compare with the exact run",
    )
    bounded.add_argument(
        "--time-scale",
        type=positive_float,
        default=0.1,
        metavar="X",
        help="with --http: real seconds per experiment second (default: %(default)s, i.e. 6 s for the 60 s run)",
    )
    bounded.set_defaults(handler=run_bounded_wait)
    parser.set_defaults(handler=lambda args: parser.print_help() or 2)


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
