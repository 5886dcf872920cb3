"""The gate panel: what the shared gate and the platform behind it are doing."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ...admission.adaptive import Adjustment
from ...admission.gate import GateStatistics
from ...admission.limiter import SessionLimiterStatistics
from ...tick.statistics import PlatformRejections
from ..figures import count, fit

__all__ = ["GatePanel"]


class GatePanel(Static):
    """Calls in flight / gate size, waiting, the token bucket's level, platform sessions
    in use / limit and their peak, the gate's peak, platform rejections (calls degraded
    ``platform_rejected`` since the start, the tick under way's as they end; those the
    server refused, if any, in brackets). Under the legacy policy nothing goes through
    the gate: it says so. Its subtitle names the tick its figures belong to.

    A row too long for the panel takes its short label, then its value abbreviated
    (``rej. 18.9k (3 srv)``): its figure is never cut.

    A learned gate (``gate.size = "auto"``) shows its last change in short instead of
    the gate's peak (``↓6 refused``, ``↑7 full use``, ``paused``); the panel's tooltip
    says it whole.
    """

    BORDER_TITLE = "gate"

    _shown: tuple[object, ...] | None = None

    def show(
        self,
        gate: GateStatistics,
        platform: SessionLimiterStatistics,
        rejections: PlatformRejections,
        *,
        gated: bool,
        burst: int,
        tick: str,
        learned: Adjustment | None | bool = False,
    ) -> None:
        """Redraw if a figure changed; ``tick`` says which tick they belong to;
        ``learned``: a learned gate's last change (``None``: none yet), or ``False``
        for a gate of a set size."""
        shown = (gate, platform, rejections.by_limiter, rejections.by_server, gated, burst, tick, learned)
        if shown == self._shown:
            return
        self._shown = shown
        self.border_subtitle = tick
        limit = count(platform.limit) if platform.limit else ["∞"]
        # (label, short label, forms of the value, style)
        rows = [
            ("in flight", "in fl.", _pair(count(gate.in_flight), count(gate.size)), "bold")
            if gated
            else ("gate", "gate", ["unused"], "yellow"),
            ("waiting", "wait", count(gate.waiting), ""),
            ("tokens", "tok.", ["off"] if gate.tokens_available is None else [f"{gate.tokens_available:.1f}/{burst}", f"{gate.tokens_available:.0f}/{burst}"], ""),
            ("sessions", "sess.", _pair(count(platform.in_use), limit), ""),
            ("peak", "peak", count(platform.peak), ""),
            ("gate peak", "g. peak", count(gate.peak_in_flight), ""),
            ("rejected", "rej.", _rejected(rejections), "bold red" if rejections.total else ""),
        ]  # fmt: skip
        if learned is not False:  # in the gate peak's row: the panel has room for seven
            rows[5] = ("learned", "lrn.", [_change(learned)], "bold")
            self.tooltip = f"the gate's size is learned; last: {learned.why}" if learned is not None else "the gate's size is learned; no change yet"
        # Plain aligned text: a rich Table costs ten times as much to draw, every frame.
        width = self.content_size.width or 24
        text = Text(no_wrap=True, overflow="crop")
        for i, (label, short, forms, style) in enumerate(rows):
            value = forms[0]
            if len(label) + 1 + len(value) > width:
                label = short
                value = fit(width - len(label) - 1, forms)
            text.append(label, style="dim")
            text.append(" " * max(1, width - len(label) - len(value)))
            text.append(value, style=style)
            if i < len(rows) - 1:
                text.append("\n")
        self.update(text, layout=False)  # one fixed size: no layout pass

    def on_resize(self) -> None:
        self._shown = None  # realign at the next refresh


def _pair(firsts: list[str], seconds: list[str], form: str = "{}/{}") -> list[str]:
    """Two figures in one ``form``, each in all its forms, the most precise first."""
    return [form.format(a, b) for a in firsts for b in seconds]


def _rejected(rejections: PlatformRejections) -> list[str]:
    """``12``, or ``12 (3 srv)`` when the server refused some of them (``12/3srv`` where
    that does not fit)."""
    if not rejections.by_server:
        return count(rejections.total)
    totals, servers = count(rejections.total), count(rejections.by_server)
    return _pair(totals, servers, "{} ({} srv)") + _pair(totals, servers, "{}/{}srv")


def _change(adjustment: Adjustment | None) -> str:
    """A learned gate's last change, in short."""
    if adjustment is None:
        return "no change"
    if adjustment.size is None:
        return "paused" if adjustment.allowed is None else f"≤{adjustment.allowed} left"
    return f"↓{adjustment.size} refused" if adjustment.why.startswith("refused") else f"↑{adjustment.size} full use"
