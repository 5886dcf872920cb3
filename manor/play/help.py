"""The help screen (``?``): every key of the dashboard, and what the panels mean."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

__all__ = ["HELP", "HelpScreen"]

HELP = """\
[b]manor play[/b] — the world ticking live

[b]Keys[/b]
  [b]space[/b]    pause / resume (a pause lets the tick under way finish)
  [b]n[/b]        step: run exactly one tick, then stay paused
  [b]+[/b] [b]-[/b]      gate size up / down, live
  [b]p[/b]        next policy, from the next tick: pipeline → batch → legacy
  [b]>[/b] [b]<[/b]      simulated time faster / slower (also [b].[/b] [b],[/b])
  [b]s[/b]        save now (the run is saved as it goes, and on quit)
  [b]f[/b]        follow the story again (scrolling it up stops following)
  [b]?[/b]        this help         [b]q[/b]  quit

[b]Replay[/b] (manor play --replay SAVE)
  [b]← →[/b]      one tick back / on      [b][ ][/b]  ten ticks
  [b]Home End[/b] first / last tick       a click on the bar: that tick
  [b]e[/b]        seek to the next tick where a call degraded
  [b]r[/b]        restart from tick 0

[b]Panels[/b]
  [b]tick latency[/b]  each tick's makespan (simulated seconds); the p50 and
      max of its calls, admission to answer; a red bar: something degraded.
  [b]gate[/b]  calls in flight / gate size, waiting, token bucket, platform
      sessions in use / limit and their peak, the gate's peak, rejections.
  [b]degraded[/b]  reason × caller kind: this tick / since the start.
  [b]agents[/b]  every caller: queued, running, done or degraded this tick
      (— dimmed: no call this tick); its last latency and line.
  [b]story[/b]  what was said; a degraded turn is marked ⚠ with what
      replaced it (idle, narration skipped, stale summary, speechless).
      Scroll up to read back: it stops following and counts new lines.

Simulated time is exact: the figures are those of manor run.
Press [b]escape[/b] or [b]?[/b] to close."""


class HelpScreen(ModalScreen[None]):
    """Keys and panels, over the dashboard."""

    BINDINGS = [
        Binding("escape,question_mark,q", "dismiss", "close"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(HELP, id="help-text")
