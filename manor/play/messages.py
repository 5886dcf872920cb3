"""Messages the dashboard's parts send one another."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import outcome
from textual.message import Message

if TYPE_CHECKING:
    from .guest import GuestRun

__all__ = ["AgentChosen", "EngineStopped", "Seek", "TerminalLost"]


class EngineStopped(Message):
    """A trio run hosting an engine has ended: finished, cancelled, or failed.

    Args:
        result: what the run returned or raised (trio's ``Outcome``).
        guest: the run that ended (a replay's restart starts a new one).
    """

    def __init__(self, result: outcome.Outcome[Any], guest: GuestRun) -> None:
        super().__init__()
        self.result = result
        self.guest = guest


class Seek(Message):
    """Go to the end of recorded tick ``tick`` (0: before the first), paused.

    ``can_replace``: while a drag floods seeks, only the latest matters.
    """

    def __init__(self, tick: int) -> None:
        super().__init__()
        self.tick = tick

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, Seek)


class AgentChosen(Message):
    """Show the history of the calls of ``agent`` as a ``caller`` (a kind of caller)."""

    def __init__(self, caller: str, agent: str) -> None:
        super().__init__()
        self.caller = caller
        self.agent = agent


class TerminalLost(Message):
    """The dashboard's terminal has gone without a SIGHUP: ``why`` (it cannot be written
    to, or its input hung up)."""

    def __init__(self, why: str) -> None:
        super().__init__()
        self.why = why
