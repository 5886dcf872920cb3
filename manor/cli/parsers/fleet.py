"""The parser of ``manor fleet``: its description and flags (what it does: ``manor.cli.fleet_cmd``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ...limits import DEFAULT_WORLDS, MAX_WORLDS
from ..numbers import positive_int
from ..options import add_setting_flags

__all__ = ["register"]


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run N worlds of a scene (seeds seed, seed+1, ...) or of several scenes side by side "
        "in one process, as worlds on one provider account would run: every call of every world through "
        "one gate of the platform limit - 1, the worlds' lanes taking turns at it. Prints each world's "
        "figures (those of 'manor run'), the totals, and how fairly the gate served the worlds. With the "
        "simulated backend the clock is virtual: exact and repeatable, like 'manor run'. With --gate-url the "
        "gate is shared through Redis with other processes too (on the real clock), and --processes spreads "
        "the worlds over several processes that share it."
    )
    parser.add_argument("--worlds", type=_worlds, default=None, metavar="N", help=f"worlds to run, 1 to {MAX_WORLDS:,} (default: one per --scenes entry, else {DEFAULT_WORLDS})")
    parser.add_argument(
        "--scenes", type=_scenes, default=(), metavar="A,B,...",
        help="the worlds' scenes, by name or path, in turn (default: --scene for every world); "
        "a scene named again runs with its seed + 1, + 2, ...; SCENE:W gives its worlds weight W at the gate "
        "(default 1: backlogged worlds get session-time in proportion to their weights), SCENE:W:K caps "
        "each of them at K calls in flight",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print one JSON object with the fleet's figures, nothing else")
    parser.add_argument("--save-dir", type=Path, default=None, metavar="DIR", help="record each world to its own save file in DIR (see 'manor replay')")
    parser.add_argument("--force", action="store_true", help="let --save-dir overwrite existing save files")
    parser.add_argument(
        "--processes", type=positive_int, default=1, metavar="P",
        help="run the worlds in P processes, world i in process i mod P (at most one per world), each a whole "
        "engine, all sharing the gate through Redis: needs --gate-url (default: 1, every world in this process)",
    )  # fmt: skip
    add_setting_flags(parser)
    parser.set_defaults(handler="run")


def _worlds(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= MAX_WORLDS:
        raise argparse.ArgumentTypeError(f"{value} is not between 1 and {MAX_WORLDS:,}")
    return value


def _scenes(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(","))
    if not all(names):
        raise argparse.ArgumentTypeError(f"{text!r} has an empty scene name")
    return names
