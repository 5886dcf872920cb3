"""The parser of ``manor run``: its description and flags (what it does: ``manor.cli.run_cmd``)."""

from __future__ import annotations

import argparse

from ..file_names import save_path
from ..options import add_setting_flags

__all__ = ["register"]


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run a scene headless, tick by tick, and print tick makespans, degradations "
        "(by caller kind and reason) and platform rejections. With the simulated backend the "
        "clock is virtual by default: simulated latencies cost no wall time and figures are exact."
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object with the run's figures, nothing else")
    parser.add_argument("--save", type=save_path, default=None, metavar="PATH", help="record the run, tick by tick, to a save file (see 'manor replay')")
    parser.add_argument("--force", action="store_true", help="let --save overwrite an existing file")
    add_setting_flags(parser)
    parser.set_defaults(handler="run")
