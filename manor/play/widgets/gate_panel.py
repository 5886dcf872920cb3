"""The gate panel: what the shared gate and the platform behind it are doing."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ...gate import GateStatistics
from ...limiter import SessionLimiterStatistics
from ...statistics import PlatformRejections

__all__ = ["GatePanel"]


class GatePanel(Static):
    """Calls in flight / gate size, waiting, the token bucket's level, platform sessions
    in use / limit and their peak, the gate's peak, platform rejections (calls degraded
    ``platform_rejected`` in the finished ticks; those the server refused, if any, in
    brackets). Under the legacy policy nothing goes through the gate: it says so."""

    BORDER_TITLE = "gate"

    _shown: tuple[object, ...] | None = None

    def show(
        self, gate: GateStatistics, platform: SessionLimiterStatistics, rejections: PlatformRejections, *, gated: bool, burst: int
    ) -> None:
        shown = (gate, platform, rejections.by_limiter, rejections.by_server, gated, burst)
        if shown == self._shown:
            return
        self._shown = shown
        limit = str(platform.limit) if platform.limit else "∞"
        in_flight = (f"{gate.in_flight}/{gate.size}", "bold") if gated else ("unused", "yellow")
        tokens = "off" if gate.tokens_available is None else f"{gate.tokens_available:.1f}/{burst}"
        # Gate timeouts are in the degradation table (gate_timeout), not repeated here.
        rows = [
            ("in flight", in_flight),
            ("waiting", (str(gate.waiting), "")),
            ("tokens", (tokens, "")),
            ("sessions", (f"{platform.in_use}/{limit}", "")),
            ("peak", (str(platform.peak), "")),
            ("gate peak", (str(gate.peak_in_flight), "")),
            ("rejected", (_rejected(rejections), "bold red" if rejections.total else "")),
        ]
        # Plain aligned text: a rich Table costs ten times as much to draw, every frame.
        width = self.content_size.width or 24
        text = Text(no_wrap=True, overflow="crop")
        for i, (label, (value, style)) in enumerate(rows):
            text.append(label, style="dim")
            text.append(" " * max(1, width - len(label) - len(value)))
            text.append(value, style=style)
            if i < len(rows) - 1:
                text.append("\n")
        self.update(text, layout=False)  # one fixed size: no layout pass

    def on_resize(self) -> None:
        self._shown = None  # realign at the next refresh


def _rejected(rejections: PlatformRejections) -> str:
    """``12``, or ``12 (3 srv)`` when the server refused some of them."""
    total = str(rejections.total)
    return f"{total} ({rejections.by_server} srv)" if rejections.by_server else total
