"""Degradation counts: caller kind × reason, this tick and since the start."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from ...calls import CALLER_KINDS
from ...errors import REASONS

__all__ = ["SHORT_REASONS", "DegradationPanel", "shown_reasons"]

#: Column headings, short enough for an 80-column terminal.
_KIND_HEADINGS = {"character": "char", "narrator": "narr", "summariser": "summ", "scene_beat": "beat"}
#: Reasons, shortened for a narrow terminal.
SHORT_REASONS = {
    "gate_timeout": "gate t/o",
    "platform_rejected": "rejected",
    "call_timeout": "call t/o",
    "provider_error": "error",
    "circuit_open": "circuit",
    "cancelled": "cancelled",
    "gate_unavailable": "gate lost",
}

#: Room for "this tick/since start" in a cell, wide and compact (longer counts are cut).
_CELL_WIDTH, _COMPACT_CELL_WIDTH = 8, 6

Counts = Mapping[str, Mapping[str, int]]


def shown_reasons(shared_gate: bool) -> tuple[str, ...]:
    """The reasons the panel has a row for: ``gate_unavailable`` only when the gate is
    shared through a server, the one gate that can be lost."""
    return REASONS if shared_gate else tuple(reason for reason in REASONS if reason != "gate_unavailable")


class DegradationPanel(Static):
    """Every reason × every caller kind, as ``this tick/since start``; zero shows as 0."""

    BORDER_TITLE = "degraded (tick/total)"

    _compact: bool | None = None
    _shown: tuple[object, ...] | None = None

    def __init__(self, *, reasons: Sequence[str] = REASONS, id: str | None = None) -> None:
        super().__init__(id=id)
        self.reasons = tuple(reasons)

    def on_mount(self) -> None:
        empty = {kind: dict.fromkeys(REASONS, 0) for kind in CALLER_KINDS}
        self.show(empty, empty)

    def show(self, tick: Counts, total: Counts, *, compact: bool = False) -> None:
        """Redraw if a count changed; ``compact`` shortens the reasons (for 80 columns)."""
        shown = (tuple(n for kind in CALLER_KINDS for n in (*tick[kind].values(), *total[kind].values())), compact)
        if shown == self._shown:
            return
        self._shown = shown
        table = Table(box=None, pad_edge=False, padding=(0, 0, 0, 1), show_edge=False, expand=False)
        labels = SHORT_REASONS if compact else {reason: reason for reason in self.reasons}
        table.add_column("reason", style="dim", no_wrap=True, width=max(len(labels[reason]) for reason in self.reasons))
        for kind in CALLER_KINDS:
            # A fixed width keeps the panel's size, so a redraw needs no layout pass.
            width = _COMPACT_CELL_WIDTH if compact else _CELL_WIDTH
            table.add_column(_KIND_HEADINGS.get(kind, kind), justify="right", no_wrap=True, width=width)
        for reason in self.reasons:
            cells = []
            for kind in CALLER_KINDS:
                now, ever = tick[kind][reason], total[kind][reason]
                style = "bold red" if now else "red" if ever else "dim"
                cells.append(Text(f"{now}/{ever}", style=style))
            table.add_row(labels[reason], *cells)
        self.update(table, layout=compact != self._compact)
        self._compact = compact
