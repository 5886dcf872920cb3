"""The parser of ``manor story``: its description and flags (what it does: ``manor.cli.story_cmd``)."""

from __future__ import annotations

import argparse

from ...output_file import STORY_FORMATS
from ..file_names import add_output_flag, add_save_argument

__all__ = ["register"]


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Tell the story of a saved run again — narration, dialogue and beats, each degraded "
        "turn with its fallback, reason and what failed — rebuilt from the recorded calls (no call is "
        "made). To stdout, or to a file with -o."
    )
    add_save_argument(parser)
    parser.add_argument(
        "--format", choices=STORY_FORMATS, default=None,
        help="md (a heading per tick; five or more alike degraded turns of a tick in one line), txt (a line per "
        "entry) or jsonl (one JSON object per entry: tick, caller, "
        "agent, speaker, text, fallback, reason, error) (default: from -o's suffix, else md)",
    )  # fmt: skip
    add_output_flag(parser, "write here instead of stdout")
    parser.set_defaults(handler="run")
