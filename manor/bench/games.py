"""Games played back to back: how a benchmark runs a world whose game ends.

A suite measures ticks — hundreds or thousands of them — and a game of Werewolf is over
in a score. So a suite's engine carries ``NextGame``: when a tick ends the game, the
loop goes on with a fresh world of the same scene, dealt from the next seed, and the
suite gets every tick it asked for. A world that never ends (the Wacky Manor) is never
replaced. Only a benchmark does this: a save holds one game, which is what a replay
rebuilds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import final

from ..content import Scene
from ..records import StoryEntry, TickRecord
from ..tick.instruments import Instrument
from ..tick.loop import TickLoop
from ..worlds import create_world

__all__ = ["NextGame"]


@final
class NextGame(Instrument):
    """Replaces a loop's world, once its game is over, with a new game of ``scene``.

    Args:
        scene: the scene the games are of.
        seed: the run's seed; the n-th game after the first is dealt from ``seed + n``.
    """

    def __init__(self, scene: Scene, seed: int) -> None:
        self.scene = scene
        self.seed = seed
        #: Games ended so far.
        self.games = 0
        self._loop: TickLoop | None = None

    def run_started(self, loop: TickLoop) -> None:
        self._loop = loop

    def tick_finished(self, record: TickRecord, story: Sequence[StoryEntry]) -> None:
        loop = self._loop
        if loop is not None and loop.world.over is not None:
            self.games += 1
            loop.world = create_world(self.scene, self.seed + self.games)
