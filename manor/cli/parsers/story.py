"""The parser of ``manor story``: its description and flags (what it does: ``manor.cli.story_cmd``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ...output import STORY_FORMATS
from ..file_names import output_path

__all__ = ["register"]


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Tell the story of a saved run again — narration, dialogue and beats, each degraded "
        "turn with its fallback, reason and what failed — rebuilt from the recorded calls (no call is "
        "made). To stdout, or to a file with -o."
    )
    parser.add_argument("save", type=Path, metavar="SAVE", help="the save file (from 'manor run --save' or 'manor play')")
    parser.add_argument(
        "--format", choices=STORY_FORMATS, default=None,
        help="md (a heading per tick; five or more alike degraded turns of a tick in one line), txt (a line per "
        "entry) or jsonl (one JSON object per entry: tick, caller, "
        "agent, speaker, text, fallback, reason, error) (default: from -o's suffix, else md)",
    )  # fmt: skip
    parser.add_argument("-o", "--output", type=output_path, default=None, metavar="FILE", help="write here instead of stdout (replaced if it exists; - for stdout)")
    parser.set_defaults(handler="run")
