"""The replay benchmark: how fast a save replays, and how big it is per tick.

Not a test: wall-clock figures for ``manor bench`` (suite "replay") to print.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from ..clock import MockClock
from ..config import flags_source
from ..config.layering import built_in_source, layer_defaults_source
from ..run import interrupts
from ..run.engine import build_engine, configure
from ..saves.reader import read_save
from ..saves.writer import SaveWriter
from .run import replay

__all__ = ["replay_benchmark"]


def replay_benchmark(ticks: int = 1000, *, scene: str = "wacky_manor", policy: str = "pipeline") -> dict[str, Any]:
    """Record a ``ticks``-tick run of ``scene`` (fewer, if its game ends first) to a
    save, read it, replay it verifying every tick, and time each step (wall clock; the
    runs themselves use the virtual clock). Hermetic: built-in settings only, no
    manor.toml, no environment.

    Returns:
        the figures, JSON-ready: ``replay_ticks_per_second`` (replaying, save already
        read), ``read_ticks_per_second``, ``record_ticks_per_second`` (the original run,
        writing the save), ``save_bytes``, ``bytes_per_tick``, ``verified`` and the
        run's size (``ticks``, ``calls``).

    Raises:
        ConfigError: ``ticks`` or ``policy`` is refused.
        ContentError: ``scene`` cannot be loaded.
    """
    flags = flags_source({"run.scene": scene, "run.ticks": ticks, "run.policy": policy}, {})
    config, loaded = configure([built_in_source(), layer_defaults_source(), flags])
    with tempfile.TemporaryDirectory(prefix="manor-bench-") as folder:
        path = Path(folder) / "bench.msav"
        engine = build_engine(config, loaded)
        writer = SaveWriter.create(path, engine)
        started = time.perf_counter()
        interrupts.run(engine.loop.run, ticks, 0.0, clock=MockClock(autojump_threshold=0))
        recorded = time.perf_counter() - started
        writer.check()
        started = time.perf_counter()
        save = read_save(path)
        read = time.perf_counter() - started
    started = time.perf_counter()
    result = replay(save)
    replayed = time.perf_counter() - started
    ticks = len(save.ticks)  # fewer than asked for when the game ended: a save holds one game
    return {
        "scene": loaded.spec.name,
        "policy": policy,
        "ticks": ticks,
        "calls": result.statistics.calls,
        "save_bytes": save.size,
        "bytes_per_tick": round(save.size / ticks, 1) if ticks else 0.0,
        "record_ticks_per_second": round(ticks / recorded, 1),
        "read_ticks_per_second": round(ticks / read, 1),
        "replay_ticks_per_second": round(ticks / replayed, 1),
        "verified": result.verified,
    }
