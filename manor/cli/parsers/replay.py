"""The parser of ``manor replay``: its description and flags (what it does: ``manor.cli.replay_cmd``)."""

from __future__ import annotations

import argparse

from ..file_names import add_save_argument
from ..options import add_setting_flags

__all__ = ["WHAT_IF_KEYS", "register"]

#: The settings a what-if replay may change.
WHAT_IF_KEYS = ("run.policy", "run.batch_size", "gate.size", "platform.limit", "run.order")


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Replay the ticks of a save file under the virtual clock, each call answered with its "
        "recorded response after its recorded latency. With --verify the world hash after every tick must "
        "equal the recorded one. With what-if settings the same recorded calls are replayed under them and "
        "the recorded and replayed figures are printed side by side; calls that never reached the backend "
        "in the recording are drawn from the scene's simulated backend (and counted)."
    )
    add_save_argument(parser)
    parser.add_argument("--verify", action="store_true", help="check the world hash after every tick; exit 1 at a difference")
    parser.add_argument("--json", action="store_true", help="print one JSON object, nothing else")
    add_setting_flags(
        parser, WHAT_IF_KEYS, config_file=False, title="what if (replay under other settings)",
        defaults={
            **{key: "as recorded" for key in WHAT_IF_KEYS},
            "gate.size": "as recorded; derived again from --platform-limit if the recording derived it",
        },
    )  # fmt: skip
    parser.set_defaults(handler="run")
