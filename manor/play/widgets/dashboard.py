"""The dashboard's panels, laid out: status line, controls, the top and bottom rows."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from .agents import AgentsTable
from .degradations import DegradationPanel
from .gate_panel import GatePanel
from .latency import LatencyPanel
from .status import StatusLine
from .story import StoryLog

__all__ = ["Dashboard"]


class Dashboard(Vertical):
    """Every panel of one engine's run. A replay going back to its start recomposes it
    (its panels keep what they drew): this container, whichever screen is on top.

    Args:
        controls: the widgets under the status line (a replay's position bar).
        reasons: the degradation reasons the degraded panel has a row for.
    """

    def __init__(self, controls: Callable[[], ComposeResult], *, reasons: Sequence[str], id: str | None = None) -> None:
        super().__init__(id=id)
        self._controls = controls
        self._reasons = tuple(reasons)

    def compose(self) -> ComposeResult:
        yield StatusLine(id="status")
        yield from self._controls()
        with Horizontal(id="top"):
            yield LatencyPanel(id="latency")
            yield GatePanel(id="gate")
            yield DegradationPanel(reasons=self._reasons, id="degradations")
        with Horizontal(id="bottom"):
            yield AgentsTable(id="agents")
            yield StoryLog(id="story")
        yield Static(id="too-small")
