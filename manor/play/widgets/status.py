"""The top line: scene, tick, policy, gate size / platform limit, clock, running or paused;
under it, once a game has ended, how it ended."""

from __future__ import annotations

from rich.console import Group
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
    """One line saying where the run is and how it is set up (and how a game ended)."""

    _last: tuple[Text | None, str] = (None, "")

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
            ending: how the game ended (``GameOver.summary``), once it has: a line of
                its own under the status.
        """
        label, style = _STATES.get(state, (state, "bold"))
        text = Text(no_wrap=True, overflow="ellipsis")
        # Most telling first: on a narrow terminal the end is cut, not the state.
        text.append(f" {label} ", style=style)
        ticking = f"tick {tick}" + (f" → {current}" if current is not None else "")
        for part in (ticking, policy, f"gate {gate}", clock):
            text.append("│ ", style="dim")
            text.append(part + " ")
        text.append("│ ", style="dim")
        text.append(scene, style="bold")
        if (text, ending) == self._last:
            return
        # The game's end on a line of its own, wrapped if it must: it cuts nothing of
        # the line above (at 120 columns it left "The" of the scene's name).
        lines = Group(text, Text(f" {ending}", style="bold magenta")) if ending else text
        self.update(lines, layout=ending != self._last[1])  # a line more: a layout pass
        self._last = (text, ending)
