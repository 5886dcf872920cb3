"""The parser of ``manor trace``: its description and flags (what it does: ``manor.cli.trace_cmd``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..file_names import output_path

__all__ = ["register"]


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Export the ticks of a save file in the Chrome trace-event JSON format: one track per "
        "caller, spans for waiting at the gate and running, counters for calls in flight and queued at the "
        "gate, and a marker at every tick. Open the file at https://ui.perfetto.dev or chrome://tracing."
    )
    parser.add_argument("save", type=Path, metavar="SAVE", help="the save file (from 'manor run --save')")
    parser.add_argument(
        "-o", "--output", type=output_path, required=True, metavar="FILE",
        help="the trace file to write (replaced if it exists; a symbolic link is written through; - for stdout)",
    )  # fmt: skip
    parser.set_defaults(handler="run")
