"""The parser of ``manor play``: its description and flags (what it does: ``manor.cli.play_cmd``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..file_names import save_path
from ..options import add_setting_flags

__all__ = ["register"]


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run a scene live in a terminal dashboard: tick latency, the gate, degradations, "
        "every agent and the story. Keys pause, step, resize the gate, switch the policy and change "
        "the speed of simulated time (press ? in the dashboard). Simulated time is exact (the same "
        "figures as 'manor run') and starts at a speed where a tick takes about a second; the run goes "
        "on until you quit unless --ticks is given, and is saved to saves/ as it goes."
    )
    parser.add_argument("--paused", action="store_true", help="start paused (n steps one tick, space runs)")
    parser.add_argument(
        "--replay",
        type=Path,
        default=None,
        metavar="SAVE",
        help="show a save file replaying instead: play, pause, step, next event, restart, speed, seek",
    )
    saving = parser.add_mutually_exclusive_group()
    saving.add_argument("--save", type=save_path, default=None, metavar="PATH", help="save the run here (default: saves/SCENE-TIME.msav)")
    saving.add_argument("--no-save", action="store_true", help="do not save the run")
    parser.add_argument("--force", action="store_true", help="let --save overwrite an existing file")
    add_setting_flags(parser, defaults={"run.ticks": "until you quit"})
    parser.set_defaults(handler="play")
