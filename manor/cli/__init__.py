"""The ``manor`` command: one entry point, one module per subcommand."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from ..errors import ManorError, one_line
from ..saves.writer import engine_version
from . import bench_cmd, config_cmd, experiment_cmd, play_cmd, replay_cmd, run_cmd, serve_agent_cmd, trace_cmd

__all__ = ["main"]

#: Subcommand modules, in the order ``manor --help`` lists them. Each has ``register``.
COMMANDS = (run_cmd, play_cmd, replay_cmd, trace_cmd, bench_cmd, config_cmd, serve_agent_cmd, experiment_cmd)


class _Parser(argparse.ArgumentParser):
    """argparse, with a user's mistake reported in one line instead of a usage dump."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="manor",
        description="Tick-loop orchestration for LLM-agent worlds: every call of a tick through one fair gate.",
    )
    parser.add_argument("--version", action="version", version=f"manor {engine_version()}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=_Parser)
    for command in COMMANDS:
        command.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "handler"):
        parser.print_help()
        return 2
    try:
        return args.handler(args) or 0
    except ManorError as exc:
        print(f"manor: error: {one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("manor: interrupted", file=sys.stderr)
        return 130
