"""The parser of ``manor fleet-part``: its description and flags (what it does: ``manor.cli.fleet_part_cmd``)."""

from __future__ import annotations

import argparse

__all__ = ["register"]


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "One process of 'manor fleet --processes': reads its part of the fleet as one JSON line on stdin, "
        "runs those worlds, and writes their progress and figures to stdout as JSON lines. 'manor fleet' runs it."
    )
    parser.set_defaults(handler="run")
