"""Per-tick latency: the tick shown in numbers, over a chart of the last ticks' makespans."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from ..figures import count, counts, fit, seconds, tick_label
from ..state import ShownTick, TickFigures
from .tick_chart import TickChart

__all__ = ["LatencyPanel"]

#: The panel's title, roomiest first (a narrow panel beside a wide degraded panel).
_TITLES = ("tick latency", "latency")
#: Cells of a border line that its title or subtitle cannot take: corners and padding.
_BORDER = 6
#: How the p50 and max line reads, roomiest first.
_SPREADS = ("calls p50 {} · max {}", "p50 {} · max {}", "p50 {} max {}")


class LatencyPanel(Vertical):
    """Three lines on the tick the panels show — which tick and its makespan (or, under
    way, how many of its calls have ended), how many degraded, the p50 and max of its
    calls' latencies (admission to answer, simulated seconds) — over a chart of the
    makespans of the last finished ticks."""

    BORDER_TITLE = _TITLES[0]

    # What the last ``show`` drew: a new size draws it again, laid out for the width.
    _shown: ShownTick | None = None
    _ticks: Sequence[TickFigures] = ()
    # What the panel last drew from: the tick shown, the newest tick charted and how
    # many, its width. The same again redraws nothing (a call started or admitted
    # changes the dashboard's state, not these figures).
    _drawn: tuple[object, ...] | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text("no tick started yet", style="dim"), id="latency-figures")
        yield TickChart(id="latency-chart")

    def show(self, shown: ShownTick | None, ticks: Sequence[TickFigures]) -> None:
        """Redraw: ``shown`` in numbers, ``ticks`` (finished, oldest first) as bars."""
        if shown is None:
            return
        self._shown, self._ticks = shown, ticks
        width = self.content_size.width or 30
        drawn = (shown, ticks[-1] if ticks else None, len(ticks), width, self.outer_size.width)
        if drawn == self._drawn:
            return
        self._drawn = drawn
        text = Text(no_wrap=True, overflow="crop")
        label = tick_label(shown.tick, shown.under_way)
        if shown.makespan is not None:
            value = seconds(shown.makespan)
        else:
            value = [f"{c}{words}" for c in counts(shown.done, shown.planned) for words in (" calls ended", " calls", "")]
        room = width - len(label)
        text.append(label, style="bold")
        text.append("  " if room - 2 >= len(fit(room - 2, value)) else " ")
        text.append(fit(room - 2, value), style="bold cyan")
        degraded = [f"{n} degraded" for n in count(shown.degraded)] + [f"{n} degr." for n in count(shown.degraded)]
        text.append("\n" + fit(width, degraded), style="bold red" if shown.degraded else "dim")
        spreads = [
            form.format(p50, top)
            for p50, top in zip(_padded(seconds(shown.p50), seconds(shown.max)), _padded(seconds(shown.max), seconds(shown.p50)), strict=True)
            for form in _SPREADS
        ]
        text.append("\n" + fit(width, spreads))
        self.query_one("#latency-figures", Static).update(text, layout=False)
        chart = self.query_one(TickChart)
        chart.show([(t.makespan, t.degraded > 0) for t in ticks])
        if chart.bars:
            bars = len(chart.bars)
            tops = seconds(max(s for s, _ in chart.bars))
            top = fit(8, tops)
            which = f"last {bars} ticks" if bars > 1 else f"tick {ticks[-1].tick}"
            subtitles = [f"{which} · top {top}", *(f"top {t}" for t in tops), *tops]
            self.border_subtitle = fit(max(0, self.outer_size.width - _BORDER), subtitles)
        self.border_title = fit(max(0, self.outer_size.width - _BORDER), _TITLES)


    def on_resize(self) -> None:
        # Its width follows its neighbours' (the gate panel narrows at 80 columns) after
        # the app has redrawn for the terminal's new size; paused, nothing else would.
        if self._shown is not None:
            self._drawn = None
            self.show(self._shown, self._ticks)


def _padded(forms: list[str], other: list[str]) -> list[str]:
    """``forms`` as long as ``other``, its shortest form repeated: two figures shortened
    step by step together."""
    return forms + forms[-1:] * (len(other) - len(forms))
