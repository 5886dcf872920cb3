"""``manor config``: every effective setting and the source it came from."""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.table import Table

from ..engine import configure
from .options import add_setting_flags, sources_from_args

__all__ = ["register"]


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "config",
        help="show every setting and where it came from",
        description="Show every effective setting with its source. Sources, lowest to highest: built-in "
        "defaults (100), scene file (150), gate layer defaults (200), manor.toml (250), MANOR_* "
        "environment (300), command-line flags (400).",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object: key -> {value, source}")
    add_setting_flags(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    config, _scene = configure(sources_from_args(args))
    if args.json:
        print(json.dumps({key: {"value": value, "source": source} for key, value, source in config.rows()}, indent=2))
        return 0
    table = Table(title="Manor settings", title_justify="left")
    table.add_column("key")
    table.add_column("value", justify="right")
    table.add_column("source")
    for key, value, source in config.rows():
        table.add_row(key, "unset" if value is None else str(value), source)
    Console().print(table)
    return 0
