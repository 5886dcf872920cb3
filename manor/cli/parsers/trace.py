"""The parser of ``manor trace``: its description and flags (what it does: ``manor.cli.trace_cmd``)."""

from __future__ import annotations

import argparse

from ..file_names import add_output_flag, add_save_argument

__all__ = ["register"]


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Export the ticks of a save file in the Chrome trace-event JSON format: one track per "
        "caller, spans for waiting at the gate and running, counters for calls in flight and queued at the "
        "gate, and a marker at every tick. Open the file at https://ui.perfetto.dev or chrome://tracing."
    )
    add_save_argument(parser)
    add_output_flag(parser, "the trace file to write", required=True)
    parser.set_defaults(handler="run")
