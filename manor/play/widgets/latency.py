"""Per-tick latency: tick makespans over the last ticks, and the latest in numbers."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from ..state import TickFigures
from .tick_chart import TickChart

__all__ = ["LatencyPanel"]


class LatencyPanel(Vertical):
    """The last tick's makespan and the p50 and max of its calls' latencies (admission
    to answer, simulated seconds), over a chart of the makespans of the last ticks."""

    BORDER_TITLE = "tick latency"

    def compose(self) -> ComposeResult:
        yield Static(Text("no tick finished yet", style="dim"), id="latency-figures")
        yield TickChart(id="latency-chart")

    def show(self, ticks: Sequence[TickFigures]) -> None:
        """Redraw from the finished ticks, oldest first."""
        if not ticks:
            return
        last = ticks[-1]
        chart = self.query_one(TickChart)
        chart.show([(t.makespan, t.degraded > 0) for t in ticks])
        shown = chart.bars
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f"tick {last.tick}  ", style="bold")
        text.append(f"{last.makespan:.2f}s", style="bold cyan")
        if last.degraded:
            text.append(f"  {last.degraded} degraded", style="bold red")
        roomy = self.content_size.width >= 28
        calls = f"calls p50 {last.p50:.2f}s · max {last.max:.2f}s" if roomy else f"p50 {last.p50:.1f} max {last.max:.1f}"
        text.append("\n" + calls)
        self.query_one("#latency-figures", Static).update(text, layout=False)
        top = f"top {max(s for s, _ in shown):.1f}s"
        self.border_subtitle = f"{len(shown)} ticks, {top}" if roomy else top
