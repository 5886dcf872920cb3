"""The help screen (``?``): every key of the dashboard, and what the panels mean.

The keys are one table, ``KEYS``, which the key table of docs/dashboard.md copies row
for row (a test holds them together): what a key does live and in a replay.
"""

from __future__ import annotations

import re

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

__all__ = ["CLOSE", "KEYS", "PANELS", "HelpScreen", "key_rows"]

#: (keys, live, replay), Markdown as in docs/dashboard.md: `x` is a key.
KEYS: tuple[tuple[str, str, str], ...] = (
    ("`space`", "pause / resume; a pause lets the tick under way finish", "play / pause (at the end: from the start)"),
    ("`n`", "step: run exactly one tick, then stay paused", "the next recorded tick"),
    ("`+` / `-`", "gate size up / down, live (a gate shared through Redis: for every process)", "—"),
    ("`p`", "next policy, from the next tick: pipeline → batch → legacy", "—"),
    ("`>` / `<` (`.` / `,`)", "simulated time faster / slower: ×¼ … ×1024, then max", "same"),
    ("`s`", "save now: says where, and how many ticks the file holds", "—"),
    ("`←` / `→`, `[` / `]`, `Home` / `End`", "—", "seek one tick, ten ticks, to the start / end; a click on the bar seeks too"),
    ("`e`", "—", "seek to the next tick in which a call degraded (or say at once that none lies ahead)"),
    ("`r`", "—", "restart from tick 0"),
    ("`↑` / `↓`, `PgUp` / `PgDn`", "move the agents table's cursor (`Home` / `End`: to the first / last row)", "same (`Home` / `End` seek)"),
    ("`g`", "go to an agent: type part of its name or id and the cursor goes there; `↓` / `↑` the next / previous match, `Enter` stays, `Esc` goes back", "same"),
    ("`Enter`, a click on a row", "that agent's history: its calls over the run, one per tick; `Esc` back", "same, read from the save, up to the tick shown"),
    ("`m`", "every tick's makespan, the cursor at the tick shown; `Esc` or `m` back", "the whole recording"),
    ("`/`", "filter the story by a name or words as you type; `Enter` keeps the filter, `Esc` clears it", "same"),
    ("`d`", "hide / show the degraded turns in the story", "same"),
    ("`f`", "follow the story again (scrolling the story up stops following)", "same"),
    ("`Tab`", "focus the agents table or the story", "same"),
    ("`?`", "help", "help"),
    ("`q`, `Ctrl-C`", "quit (the engine is cancelled, the save closed with every finished tick)", "quit"),
)

#: (panel, what it shows), Markdown as ``KEYS``: `x` in bold. Wrapped to the screen's
#: width, each under its panel's name.
PANELS: tuple[tuple[str, str], ...] = (
    ("`tick latency`", (
        "the tick's makespan (simulated seconds; under way: its calls ended so far), how many calls "
        "degraded, the p50 and max of its calls' latencies (admission to answer); under them the last "
        "ticks' makespans (a red bar: some call of that tick degraded)"
    )),
    ("`gate`", (
        "calls in flight / gate size, waiting, token bucket, platform sessions in use / limit and their "
        "peak, the gate's peak, platform rejections since the start (3 srv: refused by the server)"
    )),
    ("`degraded`", (
        "reason × caller kind: the tick shown / since the start (gate_unavailable, \"gate lost\": only "
        "with a gate shared through Redis)"
    )),
    ("`agents`", (
        "every caller's state on the tick shown (at 80 columns: … queued, ▶ running, ✓ done, ✗ degraded; "
        "— dimmed: no call this tick, its last line kept; † dead, as its world says); its last latency "
        "and line, or what failed"
    )),
    ("`story`", (
        "what was said; a degraded turn is marked ⚠ with what replaced it (idle, narration skipped, stale "
        "summary, speechless); five or more alike in a tick are folded into one line (⚠ 912 characters: idle …)"
    )),
)

#: What the help says around its tables.
_PANELS_HEADING = (
    "Every panel shows one tick: the one under way, `tick 13…` (its counts still growing), or else the "
    "last finished, `tick 12`; each says which. The panel the keys go to has a lit border (`Tab` moves it)."
)
_FOOTNOTE = "A figure too wide for its cell is abbreviated (18.9k), never cut. Simulated time is exact: the figures are those of manor run."
#: How to leave the help, on its border: always in view, however it scrolls.
CLOSE = "esc, ? or q: close · ↑ ↓: scroll"


def key_rows() -> list[str]:
    """``KEYS`` as the Markdown table rows of docs/dashboard.md."""
    return [f"| {keys} | {live} | {replay} |" for keys, live, replay in KEYS]


def _styled(markdown: str) -> Text:
    """A cell of ``KEYS``: its `keys` in bold."""
    text = Text()
    for i, part in enumerate(re.split(r"`([^`]*)`", markdown)):
        text.append(part, style="bold" if i % 2 else "")
    return text


def _keys_table() -> Table:
    """``KEYS`` in two columns, the key and what it does: live, then in a replay where
    that differs. (Three columns at 80 wrapped every cell into a narrow strip.)"""
    table = _two_columns(first=20)
    for keys, live, replay in KEYS:
        said = Text()
        if live != "—":
            said.append_text(_styled(live))
        if replay == "—":
            said.append(" (live only)", style="dim")
        elif replay != "same" and replay != live:
            if said:
                said.append("\n")
            said.append("replay: ", style="dim italic")
            said.append_text(_styled(replay))
        table.add_row(_styled(keys), said)
    return table


def _panels_table() -> Table:
    table = _two_columns(first=14)
    for name, text in PANELS:
        table.add_row(_styled(name), _styled(text))
    return table


def _two_columns(first: int) -> Table:
    """A name column at most ``first`` cells wide, and its text beside it taking the rest
    of the width, each wrapped under itself, with room between them."""
    table = Table(box=None, padding=(0, 2, 0, 0), expand=True, show_edge=False, show_header=False)
    table.add_column(max_width=first)
    table.add_column(ratio=1)
    return table


def _heading(text: str) -> Text:
    return Text(text, style="bold underline")


class HelpScreen(ModalScreen[None]):
    """Keys and panels, over the dashboard."""

    BINDINGS = [
        Binding("escape,question_mark,q", "dismiss", "close"),
    ]
    AUTO_FOCUS = "*"  # the scroll box: the arrows scroll a long help

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box") as box:
            box.border_title = "manor play — keys and panels"
            box.border_subtitle = CLOSE
            yield Static(
                Group(
                    _heading("Keys"),
                    _keys_table(),
                    Text(""),
                    _heading("Panels"),
                    _styled(_PANELS_HEADING),
                    _panels_table(),
                    Text(""),
                    Text(_FOOTNOTE, style="dim"),
                ),
                id="help-text",
            )
