"""``manor story``: a save's story, to read or share outside the terminal."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..output_file import STDOUT, check_not_read, output_name
from ..replay import story_lines, story_text, write_story
from ..replay.retelling import FORMATS
from ..saves import read_save
from ..wording import counted
from .output import output_path

__all__ = ["register"]


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Tell the story of a saved run again — narration, dialogue and beats, each degraded "
        "turn with its fallback, reason and what failed — rebuilt from the recorded calls (no call is "
        "made). To stdout, or to a file with -o."
    )
    parser.add_argument("save", type=Path, metavar="SAVE", help="the save file (from 'manor run --save' or 'manor play')")
    parser.add_argument(
        "--format", choices=FORMATS, default=None,
        help="md (a heading per tick; five or more alike degraded turns of a tick in one line), txt (a line per "
        "entry) or jsonl (one JSON object per entry: tick, caller, "
        "agent, speaker, text, fallback, reason, error) (default: from -o's suffix, else md)",
    )  # fmt: skip
    parser.add_argument("-o", "--output", type=output_path, default=None, metavar="FILE", help="write here instead of stdout (replaced if it exists; - for stdout)")
    parser.set_defaults(handler=run)



def run(args: argparse.Namespace) -> int:
    check_not_read(STDOUT if args.output is None else args.output, {"the save being told": args.save})
    save = read_save(args.save)
    for warning in save.warnings:
        print(f"manor: warning: {warning}", file=sys.stderr)
    suffix = args.output.suffix.lstrip(".") if args.output is not None else ""
    format = args.format or (suffix if suffix in FORMATS else "md")
    if args.output is None:
        sys.stdout.write(story_text(save, list(story_lines(save)), format))
        return 0
    lines = write_story(save, format, str(args.output))
    print(f"manor: wrote {counted(lines, 'story line')} of {counted(len(save.ticks), 'tick')} to {output_name(args.output)}", file=sys.stderr)
    return 0
