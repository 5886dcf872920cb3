"""The parser of ``manor gate``: its description and flags (what it does: ``manor.cli.gate_cmd``)."""

from __future__ import annotations

import argparse

from ..numbers import positive_int
from ..options import add_setting_flags

__all__ = ["register"]

_KEYS = ("gate.url", "gate.name")
#: What ``resize`` checks a new size against: the platform's limit (the scene's, unless set).
_LIMIT_KEYS = (*_KEYS, "platform.limit", "run.scene")


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "A gate shared through Redis (gate.url, gate.name: --gate-url, MANOR_GATE_URL or "
        "[gate] url in manor.toml): 'status' shows its size, the calls in flight and waiting, its "
        "figures since it was created, and every process using it; 'resize N' sets its size for "
        "every process, which each sees within a second; 'reset' deletes it while no process uses "
        "it, so that the next process makes it with its own size, rate and burst (a gate keeps what "
        "the process that made it set)."
    )
    actions = parser.add_subparsers(title="actions", metavar="ACTION", dest="action", required=True)
    status = actions.add_parser("status", help="the gate's figures and the processes using it")
    status.add_argument("--json", action="store_true", help="print one JSON object, nothing else")
    add_setting_flags(status, _KEYS, title="the gate")
    status.set_defaults(handler="show_status")
    resize = actions.add_parser("resize", help="set the gate's size for every process using it")
    resize.add_argument("size", type=positive_int, metavar="N", help="calls in flight at once, from all processes")
    resize.add_argument("--force", action="store_true", help="set a size above the platform limit - 1 anyway")
    add_setting_flags(resize, _LIMIT_KEYS, title="the gate, and the platform it must stay below")
    resize.set_defaults(handler="resize_gate")
    reset = actions.add_parser("reset", help="delete the gate while no process uses it: the next makes it anew")
    add_setting_flags(reset, _KEYS, title="the gate")
    reset.set_defaults(handler="reset_gate")
