"""The dashboard's panels, laid out: status line, controls, the top and bottom rows."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

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
        kinds, reasons: the caller kinds (the world's) and the degradation reasons the
            degraded panel has a column and a row for.
    """

    def __init__(self, controls: Callable[[], ComposeResult], *, kinds: Sequence[str], headings: Mapping[str, str] = {}, reasons: Sequence[str], id: str | None = None) -> None:
        super().__init__(id=id)
        self._controls = controls
        self._kinds, self._reasons = tuple(kinds), tuple(reasons)
        #: The world's declared short names of its kinds (``Caller.short``).
        self._headings = dict(headings)

    def compose(self) -> ComposeResult:
        yield StatusLine(id="status")
        yield from self._controls()
        with Horizontal(id="top"):
            yield LatencyPanel(id="latency")
            yield GatePanel(id="gate")
            yield DegradationPanel(kinds=self._kinds, headings=self._headings, reasons=self._reasons, id="degradations")
        with Horizontal(id="bottom"):
            yield AgentsTable(id="agents")
            yield StoryLog(id="story")
        yield Static(id="too-small")
