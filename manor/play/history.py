"""One agent's history (``Enter`` on the agents table): its calls over the run, tick by tick.

Per call: the tick, the caller kind, when it was queued, admitted and finished (simulated
seconds since the run began), how long it waited and ran, how it ended — the reason and
the error message of a degraded call — and, for the call under the cursor, everything
the record holds, its full text included; above them a sparkline of the latencies.

The screen is given a function that reads the calls (``AgentCalls``): live, the ones the
dashboard keeps for each caller (its last few hundred, fewer in a large world); in a
replay, the save's, up to the tick shown. The screen follows the run as it goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Sparkline, Static

from ..records import CallRecord
from ..tick.statistics import percentile
from .figures import seconds
from .widgets.notices import NoticeLines

__all__ = ["AgentCalls", "AgentHistoryScreen", "call_details"]

#: Reads one caller's calls as they stand now, oldest first.
AgentCalls = Callable[[], Sequence[CallRecord]]

#: How often the screen looks for new calls (as the dashboard redraws).
_REFRESH_S = 0.1


class AgentHistoryScreen(Screen[None]):
    """The calls of ``agent`` as a ``caller`` (``name`` is how the story calls it).

    Args:
        calls: reads its calls as they stand now (looked at as the dashboard redraws).
        kept: how many calls ``calls`` keeps at most (``None``: all of them).
    """

    BINDINGS = [Binding("escape", "dismiss", "back")]

    def __init__(self, caller: str, agent: str, name: str, *, calls: AgentCalls, kept: int | None) -> None:
        super().__init__()
        self.caller = caller
        self.agent = agent
        self.who = name
        self._read_calls = calls
        self._kept = kept
        self._calls: list[CallRecord] = []
        # What the table was drawn from: the number of calls and the last one.
        self._drawn: tuple[int, CallRecord | None] = (0, None)

    def compose(self) -> ComposeResult:
        yield Static(id="history-title")
        yield Sparkline([], id="history-sparkline")
        yield DataTable(id="history-calls", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="history-detail-box"):
            yield Static(id="history-detail")
        yield NoticeLines()
        yield Footer(compact=True)  # the app's keys and the screen's: 80 columns hold them so

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("tick", "kind", "queued", "admitted", "finished", "waited", "secs", "outcome")
        table.focus()
        self.refresh_calls()
        self.set_interval(_REFRESH_S, self.refresh_calls, name="refresh history")

    def refresh_calls(self) -> None:
        """Redraw if the caller has made calls since the last look."""
        calls = self._read_calls()
        drawn = (len(calls), calls[-1] if calls else None)
        if drawn == self._drawn and self._calls:
            return
        table = self.query_one(DataTable)
        following = not self._calls or table.cursor_row >= len(self._calls) - 1
        self._drawn = drawn
        self._calls = list(calls)
        table.clear()
        for call in self._calls:
            table.add_row(*_row(call))
        self.query_one("#history-sparkline", Sparkline).data = [call.latency for call in self._calls] or [0.0]
        self.query_one("#history-title", Static).update(self._title())
        if self._calls:
            # The newest call while the cursor was on the newest; else where it was.
            row = len(self._calls) - 1 if following else min(table.cursor_row, len(self._calls) - 1)
            table.move_cursor(row=row, animate=False)
            self._detail(row)
        else:
            self.query_one("#history-detail", Static).update(Text("no call of this caller yet", style="dim"))

    def _title(self) -> Text:
        calls = self._calls
        text = Text()
        text.append(f" {self.who} ", style="bold reverse")
        text.append(f" {self.caller} {self.agent} · ", style="bold")
        degraded = sum(1 for call in calls if not call.ok)
        kept = self._kept
        text.append(f"{len(calls)} calls" + (f" (the last {kept} kept)" if kept is not None and len(calls) >= kept else ""))
        if degraded:
            text.append(f" · {degraded} degraded", style="bold red")
        latencies = [call.latency for call in calls if call.admitted_at is not None]
        if latencies:
            p50, top = percentile(latencies, 50), max(latencies)
            text.append(f" · latency p50 {seconds(p50)[0]} · max {seconds(top)[0]}", style="cyan")
        return text

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._detail(event.cursor_row)

    def _detail(self, row: int) -> None:
        if 0 <= row < len(self._calls):
            self.query_one("#history-detail", Static).update(call_details(self._calls[row]))


def _row(call: CallRecord) -> tuple[object, ...]:
    admitted = "—" if call.admitted_at is None else f"{call.admitted_at:.2f}"
    waited = (call.admitted_at if call.admitted_at is not None else call.finished_at) - call.queued_at
    secs = "—" if call.admitted_at is None else seconds(call.latency)[0]
    if call.ok:
        outcome = Text("ok", style="green")
    else:
        outcome = Text(f"{call.reason}: {call.error}" if call.error else f"{call.reason}", style="bold red")
    return (call.tick, call.caller, f"{call.queued_at:.2f}", admitted, f"{call.finished_at:.2f}", seconds(waited)[0], secs, outcome)


def call_details(call: CallRecord) -> Text:
    """Everything one call's record says, the full text last."""
    text = Text()
    text.append(f"tick {call.tick}", style="bold")
    text.append(f" · {call.caller} · ticket {call.ticket if call.ticket is not None else '—'}")
    if call.attempts > 1:
        text.append(f" · {call.attempts} tries")
    text.append(f" · tokens {call.input_tokens} in, {call.output_tokens} out")
    if call.cost:
        text.append(f" · cost {call.cost:.6f}")
    text.append("\n")
    text.append(f"queued {call.queued_at:.3f}s → ")
    if call.admitted_at is None:
        text.append("never admitted", style="red")
    else:
        text.append(f"admitted {call.admitted_at:.3f}s (waited {seconds(call.admitted_at - call.queued_at)[0]})")
    text.append(f" → finished {call.finished_at:.3f}s")
    if call.admitted_at is not None:
        text.append(f" ({seconds(call.latency)[0]} running)")
    text.append("\n")
    if call.ok:
        text.append("ok", style="bold green")
    else:
        text.append(f"degraded: {call.reason}", style="bold red")
        if call.refused_by:
            text.append(f" (refused by the {call.refused_by})", style="red")
        if call.error:
            text.append(f"\n{call.error}", style="red")
    if call.text:
        text.append("\n\n")
        text.append(call.text)
    return text
