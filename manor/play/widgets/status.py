"""The top line: scene, tick, policy, gate size / platform limit, clock, running or paused."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

__all__ = ["StatusLine"]

#: How each driver state reads, and its style.
_STATES = {
    "running": ("▶ running", "bold green"),
    "pausing": ("⏸ pausing (tick finishing)", "bold yellow"),
    "paused": ("⏸ paused", "bold yellow"),
    "stepping": ("⏯ stepping", "bold cyan"),
    "finished": ("■ finished", "bold magenta"),
    "stopped": ("■ stopped", "bold red"),
}


class StatusLine(Static):
    """One line saying where the run is and how it is set up."""

    _last: Text | None = None

    def show(
        self,
        *,
        scene: str,
        tick: int,
        current: int | None,
        policy: str,
        gate: str,
        clock: str,
        state: str,
        ending: str = "",
    ) -> None:
        """Redraw with these values.

        Args:
            tick: the last finished tick; ``current`` the one under way, if any.
            gate: "5/6" (gate size / platform limit), or "none/6" under legacy.
            clock: "t 83.2 s ×8" and the like.
            state: a driver state, or "stopped" once the engine has ended.
            ending: how the game ended (``GameOver.summary``), once it has.
        """
        label, style = _STATES.get(state, (state, "bold"))
        text = Text(no_wrap=True, overflow="ellipsis")
        # Most telling first: on a narrow terminal the end is cut, not the state.
        text.append(f" {label} ", style=style)
        if ending:  # the game's end tells more than its clock
            text.append("│ ", style="dim")
            text.append(ending + " ", style="bold magenta")
        ticking = f"tick {tick}" + (f" → {current}" if current is not None else "")
        for part in (ticking, policy, f"gate {gate}", clock):
            text.append("│ ", style="dim")
            text.append(part + " ")
        text.append("│ ", style="dim")
        text.append(scene, style="bold")
        if text != self._last:
            self._last = text
            self.update(text, layout=False)  # one fixed size: no layout pass
