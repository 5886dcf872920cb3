"""``manor trace``: export a save as a Chrome trace, for Perfetto or chrome://tracing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..output_file import STDOUT, check_not_read, output_name
from ..saves import read_save, write_trace
from ..wording import counted
from .output import output_path

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
    parser.set_defaults(handler=run)



def run(args: argparse.Namespace) -> int:
    check_not_read(args.output, {"the save being exported": args.save})
    save = read_save(args.save)
    save.require_ticks()
    for warning in save.warnings:
        print(f"manor: warning: {warning}", file=sys.stderr)
    events = write_trace(save, args.output)
    # With the trace on stdout (-o -), what is said of it goes to stderr.
    said = sys.stderr if str(args.output) == STDOUT else sys.stdout
    print(f"{output_name(args.output)}: {counted(events, 'trace event')} for {counted(len(save.ticks), 'tick')}; open it at https://ui.perfetto.dev", file=said)
    return 0
