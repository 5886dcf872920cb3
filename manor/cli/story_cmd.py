"""``manor story``: a save's story, to read or share outside the terminal."""

from __future__ import annotations

import argparse
import sys

from ..output import STDOUT, check_not_read, output_name
from ..replay import story_lines, story_text, write_story
from ..replay.retelling import FORMATS
from ..saves import read_save
from ..wording import counted

__all__ = ["run"]


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
