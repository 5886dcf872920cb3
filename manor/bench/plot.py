"""``manor bench --plot``: the scheduling comparison, the gate sweep and the scale curve
as pictures.

What to draw is decided once (``charts``); two small renderers draw it. SVG is drawn
here, by hand: it needs nothing installed, its output is plain text a test can read,
and a chart of a few bars and lines does not need a plotting library. PNG needs
matplotlib (``pip install 'manor[plot]'``), which is large (numpy, pillow, fonts) and
so stays an optional extra.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any, Literal

import attrs

from .suite import BenchError

__all__ = ["Chart", "charts", "check_plot_path", "render_svg", "write_plot"]

SUFFIXES = (".svg", ".png")
_MISSING_MATPLOTLIB = "--plot {path}: drawing a PNG needs matplotlib: pip install 'manor[plot]' (or ask for a .svg, which needs nothing)"
_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3")


@attrs.frozen
class Chart:
    """One panel: bars grouped by category, or lines over categories.

    ``series`` pairs a legend name with one value per category (``None``: no value).
    """

    title: str
    kind: Literal["bars", "lines"]
    categories: tuple[str, ...]
    series: tuple[tuple[str, tuple[float | None, ...]], ...]
    x_label: str
    y_label: str


def charts(result: Mapping[str, Any]) -> list[Chart]:
    """The charts the suites in ``result`` give (scheduling and scale)."""
    drawn = []
    scheduling = result.get("scheduling")
    if scheduling:
        names = ("batch", "fifo", "pipeline", "longest_first_actual")
        drawn.append(
            Chart(
                title=f"Tick makespan, {scheduling['setup']['scene']} ({scheduling['setup']['draws']} draws)",
                kind="bars",
                categories=names,
                series=tuple(
                    (label, tuple(scheduling[name][key] for name in names))
                    for label, key in (("mean", "makespan_mean_s"), ("p95", "makespan_p95_s"), ("lower bound", "lower_bound_mean_s"))
                ),
                x_label="policy",
                y_label="seconds (virtual)",
            )
        )
        sweep = scheduling["gate_sweep"]
        drawn.append(
            Chart(
                title="Mean makespan by gate size",
                kind="lines",
                categories=tuple(str(point["gate_size"]) for point in sweep),
                series=(
                    ("fifo", tuple(point["fifo"]["makespan_mean_s"] for point in sweep)),
                    ("longest_first", tuple(point["longest_first"]["makespan_mean_s"] for point in sweep)),
                    ("lower bound", tuple(point["fifo"]["lower_bound_mean_s"] for point in sweep)),
                ),
                x_label="gate size",
                y_label="seconds (virtual)",
            )
        )
    points = result.get("scale")
    if points:
        drawn.append(
            Chart(
                title="Cost per call as the cast grows",
                kind="lines",
                categories=tuple(f"{point['agents']:,}" for point in points),
                series=(
                    ("manor", tuple(point["per_call_us"] for point in points)),
                    ("trio, all at once", tuple(point.get("trio_all_at_once_per_call_us") for point in points)),
                    ("trio, acquire first", tuple(point.get("trio_acquire_first_per_call_us") for point in points)),
                ),
                x_label="agents",
                y_label="µs of CPU per call",
            )
        )
    return drawn


def check_plot_path(path: Path, suites: Sequence[str]) -> None:
    """Refuse a plot that cannot be drawn, before any suite runs.

    Raises:
        BenchError: an unknown file type, a folder that does not exist, no suite that
            draws, or PNG without matplotlib.
    """
    if str(path) == "-":
        raise BenchError("--plot -: the tables (or --json) go to stdout; name a .svg or .png file for the figures")
    if path.suffix.lower() not in SUFFIXES:
        raise BenchError(f"--plot {path}: the file must end in .png or .svg")
    if not path.parent.is_dir():
        raise BenchError(f"--plot {path}: no such folder: {path.parent}")
    if not {"scheduling", "scale"} & set(suites):
        raise BenchError("--plot draws the scheduling and scale suites; run at least one of them")
    if path.suffix.lower() == ".png":
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise BenchError(_MISSING_MATPLOTLIB.format(path=path)) from None


def write_plot(path: Path, result: Mapping[str, Any]) -> None:
    """Draw ``result``'s charts to ``path`` (.svg or .png).

    Raises:
        BenchError: the file cannot be written, or PNG without matplotlib.
    """
    drawn = charts(result)
    try:
        if path.suffix.lower() == ".png":
            _write_png(path, drawn)
        else:
            path.write_text(render_svg(drawn), encoding="utf-8")
    except OSError as exc:
        raise BenchError(f"--plot {path}: cannot write: {exc.strerror or exc}") from None


# -- SVG ---------------------------------------------------------------------------------

_WIDTH, _HEIGHT = 460, 320
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 16, 56, 48


def render_svg(drawn: Sequence[Chart]) -> str:
    """The charts side by side, as one SVG document."""
    width = _WIDTH * max(1, len(drawn))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{_HEIGHT}" viewBox="0 0 {width} {_HEIGHT}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{_HEIGHT}" fill="white"/>',
    ]
    for i, chart in enumerate(drawn):
        parts.append(f'<g transform="translate({i * _WIDTH},0)">')
        parts += _svg_panel(chart)
        parts.append("</g>")
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _nice_top(value: float) -> float:
    """A round number at or above ``value`` for the top of an axis."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(value))
    return next(step * magnitude for step in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10) if step * magnitude >= value)


def _svg_panel(chart: Chart) -> list[str]:
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM
    values = [v for _, series in chart.series for v in series if v is not None]
    top = _nice_top(max(values, default=1.0))

    def y(value: float) -> float:
        return _TOP + plot_h - value / top * plot_h

    out = [f'<text x="{_WIDTH / 2}" y="18" text-anchor="middle" font-size="13" font-weight="bold">{escape(chart.title)}</text>']
    for k in range(6):  # gridlines and y labels
        value = top * k / 5
        out.append(f'<line x1="{_LEFT}" x2="{_LEFT + plot_w}" y1="{y(value):.1f}" y2="{y(value):.1f}" stroke="#e0e0e0"/>')
        out.append(f'<text x="{_LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{value:g}</text>')
    out.append(f'<line x1="{_LEFT}" x2="{_LEFT}" y1="{_TOP}" y2="{_TOP + plot_h}" stroke="black"/>')
    out.append(f'<line x1="{_LEFT}" x2="{_LEFT + plot_w}" y1="{_TOP + plot_h}" y2="{_TOP + plot_h}" stroke="black"/>')
    slot = plot_w / max(1, len(chart.categories))
    for j, category in enumerate(chart.categories):
        out.append(f'<text x="{_LEFT + slot * (j + 0.5):.1f}" y="{_TOP + plot_h + 16}" text-anchor="middle">{escape(category)}</text>')
    out.append(f'<text x="{_LEFT + plot_w / 2}" y="{_HEIGHT - 8}" text-anchor="middle">{escape(chart.x_label)}</text>')
    out.append(
        f'<text x="14" y="{_TOP + plot_h / 2}" text-anchor="middle" transform="rotate(-90 14 {_TOP + plot_h / 2})">{escape(chart.y_label)}</text>'
    )
    bar = slot * 0.8 / max(1, len(chart.series))
    legend_x = _LEFT + 8.0
    for s, (name, series) in enumerate(chart.series):
        colour = _COLOURS[s % len(_COLOURS)]
        points = []
        for j, value in enumerate(series):
            if value is None:
                continue
            if chart.kind == "bars":
                x = _LEFT + slot * j + slot * 0.1 + bar * s
                out.append(f'<rect x="{x:.1f}" y="{y(value):.1f}" width="{bar:.1f}" height="{y(0) - y(value):.1f}" fill="{colour}"><title>{escape(name)}: {value:g}</title></rect>')
            else:
                points.append((_LEFT + slot * (j + 0.5), y(value), value))
        if points:
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py, _ in points)
            out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
            out += [f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{colour}"><title>{escape(name)}: {v:g}</title></circle>' for px, py, v in points]
        out.append(f'<rect x="{legend_x:.1f}" y="25" width="10" height="10" fill="{colour}"/>')
        out.append(f'<text x="{legend_x + 14:.1f}" y="34">{escape(name)}</text>')
        legend_x += 14 + 6.5 * len(name) + 16  # about 6.5 px a character at 11 px
    return out


# -- PNG ---------------------------------------------------------------------------------


def _write_png(path: Path, drawn: Sequence[Chart]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        raise BenchError(_MISSING_MATPLOTLIB.format(path=path)) from None
    figure, axes = plt.subplots(1, max(1, len(drawn)), figsize=(4.6 * max(1, len(drawn)), 3.4), squeeze=False)
    for ax, chart in zip(axes[0], drawn, strict=False):
        positions = range(len(chart.categories))
        width = 0.8 / max(1, len(chart.series))
        for s, (name, series) in enumerate(chart.series):
            shown = [(j, v) for j, v in zip(positions, series, strict=True) if v is not None]
            if chart.kind == "bars":
                ax.bar([j - 0.4 + width * (s + 0.5) for j, _ in shown], [v for _, v in shown], width, label=name)
            else:
                ax.plot([j for j, _ in shown], [v for _, v in shown], marker="o", label=name)
        ax.set_xticks(list(positions), chart.categories)
        ax.set_ylim(bottom=0)
        ax.set_title(chart.title, fontsize=10)
        ax.set_xlabel(chart.x_label)
        ax.set_ylabel(chart.y_label)
        ax.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
