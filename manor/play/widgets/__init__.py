"""The dashboard's panels, one per module."""

from __future__ import annotations

from .agents import AgentsTable
from .dashboard import Dashboard
from .degradations import DegradationPanel
from .gate_panel import GatePanel
from .latency import LatencyPanel
from .notices import NoticeLines
from .replay_bar import ReplayBar
from .status import StatusLine
from .story import StoryLog
from .tick_chart import TickChart

__all__ = [
    "AgentsTable",
    "Dashboard",
    "DegradationPanel",
    "GatePanel",
    "LatencyPanel",
    "NoticeLines",
    "ReplayBar",
    "StatusLine",
    "StoryLog",
    "TickChart",
]
