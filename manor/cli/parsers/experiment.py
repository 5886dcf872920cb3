"""The parser of ``manor experiment``: its description and flags (what it does: ``manor.cli.experiment_cmd``)."""

from __future__ import annotations

import argparse

from ...experiment.design import CAPACITY, DURATION_S, HANG_CHOICES
from ..numbers import non_negative_float, positive_float, positive_int

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
    bounded.set_defaults(handler="run_bounded_wait")
    parser.set_defaults(handler=lambda args: parser.print_help() or 2)
