"""The replay suite: how fast a save file replays (``manor.saves``).

It records a run of the scene to a save (1,000 ticks; ``--quick``: 20), reads it back and
replays it, verifying the world hash after every tick; the figures are the saves
module's own (``replay_benchmark``).
"""

from __future__ import annotations

from typing import Any

from ..replay import replay_benchmark
from .suite import BenchContext, Suite

__all__ = ["SUITE", "TICKS", "TICKS_QUICK"]

TICKS = 1_000
TICKS_QUICK = 20


def units(context: BenchContext) -> int:
    return 1


def run(context: BenchContext) -> dict[str, Any]:
    config, _ = context.configure()
    figures = replay_benchmark(TICKS_QUICK if context.quick else TICKS, scene=config.settings.run.scene)
    context.advance(1)
    return figures


SUITE = Suite(
    name="replay",
    title="ticks per second replaying a save, verified tick by tick",
    units=units,
    run=run,
)
