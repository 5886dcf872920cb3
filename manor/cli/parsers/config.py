"""The parser of ``manor config``: its description and flags (what it does: ``manor.cli.config_cmd``)."""

from __future__ import annotations

import argparse

from ..options import add_setting_flags

__all__ = ["register"]


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Show every effective setting with its source. Sources, lowest to highest: built-in "
        "defaults (100), scene file (150), gate layer defaults (200), manor.toml (250), MANOR_* "
        "environment (300), command-line flags (400). Then the [backends.NAME] tables and every agent's "
        "backend, with what decided it."
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object: key -> {value, source}")
    add_setting_flags(parser)
    parser.set_defaults(handler="run")
