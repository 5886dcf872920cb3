"""Degradation counts: caller kind × reason, on the tick shown and since the start."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.text import Text
from textual.widget import Widget
from textual.widgets import Static

from ...errors import REASONS
from ..figures import counts, fit, fit_width

__all__ = ["SHORT_REASONS", "DegradationPanel", "shown_reasons"]

#: Reasons, shortened for a narrow terminal.
SHORT_REASONS = {
    "gate_timeout": "gate t/o",
    "platform_rejected": "rejected",
    "call_timeout": "call t/o",
    "provider_error": "error",
    "circuit_open": "circuit",
    "cancelled": "cancel",
    "invalid_output": "invalid",
    "gate_unavailable": "gate lost",
}

#: Room for "tick/total" in a cell, wide, compact and tight: a count that does not fit
#: is abbreviated (``904/19k``), and a column whose counts do not fit even so grows.
_CELL_WIDTH, _COMPACT_CELL_WIDTH, _TIGHT_CELL_WIDTH = 9, 6, 4
#: A heading's length when the columns are tight (a world of many kinds at 80 columns).
_TIGHT_HEADING = 4

Counts = Mapping[str, Mapping[str, int]]


def shown_reasons(*, shared_gate: bool, shaped: bool) -> tuple[str, ...]:
    """The reasons the panel has a row for: ``gate_unavailable`` only when the gate is
    shared through a server, the one gate that can be lost; ``invalid_output`` only when
    the world asks for structured answers (``shaped``), the only answers that can be
    invalid."""
    hidden = {reason for reason, shown in (("gate_unavailable", shared_gate), ("invalid_output", shaped)) if not shown}
    return tuple(reason for reason in REASONS if reason not in hidden)


class DegradationPanel(Static):
    """Every reason × every caller kind, as ``tick/total``: the tick the panels show
    (the one under way, its counts growing, or the last finished) and since the start;
    zero shows as 0. Its title names the tick.

    Args:
        kinds: the caller kinds it has a column for from the start (the world's).
        reasons: the reasons it has a row for from the start (``shown_reasons``).
    """

    BORDER_TITLE = "degraded"

    _compact: tuple[bool, bool] | None = None
    _shown: tuple[object, ...] | None = None
    _widths: tuple[int, ...] = ()

    def __init__(
        self, *, kinds: Sequence[str] = (), headings: Mapping[str, str] = {}, reasons: Sequence[str] = REASONS, id: str | None = None
    ) -> None:
        super().__init__(id=id)
        self.kinds = tuple(kinds)
        #: Column headings, short enough for an 80-column terminal: the ``Caller.short``
        #: a world declares (another kind: its own name).
        self.headings = dict(headings)
        self.reasons = tuple(reasons)

    def _room(self) -> int:
        """The columns its content may take: the row's width less its neighbours' (a
        neighbour that shrinks, at its least) and its own border and padding; 0 before
        layout. The panel is as wide as its content, so its own size cannot say."""
        parent = self.parent
        if parent is None or not isinstance(parent, Widget) or not parent.size.width:
            return 0
        others = 0
        for sibling in parent.children:
            if sibling is not self and isinstance(sibling, Widget):
                minimum = sibling.styles.min_width
                others += int(minimum.value) if minimum is not None and sibling.styles.width is not None and sibling.styles.width.is_fraction else sibling.outer_size.width
        return max(0, parent.size.width - others - self.styles.gutter.width)

    def on_mount(self) -> None:
        empty = {kind: dict.fromkeys(REASONS, 0) for kind in self.kinds}
        self.show(empty, empty)

    def show(self, tick: Counts, total: Counts, *, label: str = "", compact: bool = False) -> None:
        """Redraw if a count changed.

        Args:
            tick: counts of the tick shown; ``total`` since the start.
            label: which tick ``tick`` counts (``tick 12``, ``tick 13…`` while it runs).
            compact: shorten the reasons and cells (for 80 columns).
        """
        # The panel's kinds and reasons always, in report order; a kind the world did
        # not declare, or a reason the panel does not list, once it has a count.
        kinds = [*self.kinds, *(kind for kind in total if kind not in self.kinds)]
        listed = set(self.reasons)
        reasons = [*self.reasons, *sorted({r for kind in total.values() for r, n in kind.items() if n and r not in listed})]
        grid = [[(tick.get(kind, {}).get(reason, 0), total.get(kind, {}).get(reason, 0)) for kind in kinds] for reason in reasons]
        headings = [self.headings.get(kind, kind) for kind in kinds]
        room = self._room()
        # A world of many caller kinds: short labels, then tight columns with headings
        # cut to four letters (as the agents table's), before columns are cut off.
        tight = False
        if room:
            if not compact:
                compact = _width(reasons, headings, _CELL_WIDTH) > room
            if compact:
                short = [SHORT_REASONS.get(reason, reason) for reason in reasons]
                tight = _width(short, headings, _COMPACT_CELL_WIDTH) > room
        if tight:
            headings = [heading[:_TIGHT_HEADING] for heading in headings]
        shown = (tuple(kinds), tuple(reasons), tuple(map(tuple, grid)), label, compact, tight)
        if shown == self._shown:
            return
        self._shown = shown
        self.border_title = f"degraded: {label} / total" if label else "degraded (tick/total)"
        base = _TIGHT_CELL_WIDTH if tight else _COMPACT_CELL_WIDTH if compact else _CELL_WIDTH
        cells = [[counts(now, ever) for now, ever in row] for row in grid]
        widths = tuple(max(base, len(heading), *(fit_width(row[k]) for row in cells)) for k, heading in enumerate(headings))
        labels = [SHORT_REASONS.get(reason, reason) if compact else reason for reason in reasons]
        first = max(map(len, labels))
        # Plain aligned text, as the gate panel: a rich Table costs ten times as much to
        # draw, and the title names a new tick every tick.
        text = Text(no_wrap=True, overflow="crop")
        text.append(f"{'reason':<{first}}", style="bold")
        for heading, width in zip(headings, widths, strict=True):
            text.append(f" {heading:>{width}}", style="bold")
        for label_, row, forms in zip(labels, grid, cells, strict=True):
            text.append(f"\n{label_:<{first}}", style="dim")
            for (now, ever), form, width in zip(row, forms, widths, strict=True):
                style = "bold red" if now else "red" if ever else "dim"
                text.append(" ")
                text.append(f"{fit(width, form):>{width}}", style=style)
        # A fixed width keeps the panel's size, so a redraw needs no layout pass.
        relayout = (compact, tight) != self._compact or widths != self._widths
        self.update(text, layout=relayout)
        self._compact, self._widths = (compact, tight), widths


def _width(labels: Sequence[str], headings: Sequence[str], cell: int) -> int:
    """The columns the panel's text takes with these labels, headings and cells."""
    return max(map(len, labels)) + sum(1 + max(cell, len(heading)) for heading in headings)
