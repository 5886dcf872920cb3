"""``manor trace``: export a save as a Chrome trace, for Perfetto or chrome://tracing."""

from __future__ import annotations

import argparse
import sys

from ..output import STDOUT, check_not_read, output_name
from ..saves import read_save, write_trace
from ..wording import counted

__all__ = ["run"]


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
