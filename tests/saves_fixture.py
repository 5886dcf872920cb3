"""Recording runs to save files, and taking save files apart, for the save and replay
tests. Settings are hermetic: built-in and gate-layer defaults plus what a test asks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import trio
import trio.testing

from manor.config import flags_source
from manor.config.layering import built_in_source, layer_defaults_source
from manor.engine import Engine, build_engine, configure
from manor.saves.framing import SIGNATURE, FrameReader, encode_frame
from manor.saves.writer import SaveWriter
from manor.statistics import RunStatistics

__all__ = ["EXAMPLES", "SAVES", "frames_of", "record", "reframe", "rewrite_payloads"]

#: The example saves shipped in saves/.
SAVES = Path(__file__).resolve().parent.parent / "saves"
EXAMPLES = ("wacky_manor_pipeline.msav", "wacky_manor_legacy.msav")


def record(path: Path, **settings: Any) -> tuple[dict[str, Any], Engine]:
    """Run a scene (wacky_manor unless ``run.scene`` is given) under the virtual clock,
    saving it to ``path``; return the run's ``--json`` summary and its engine.

    ``settings`` are config keys with ``__`` for the dot (``run__policy="legacy"``).
    """
    values = {key.replace("__", "."): value for key, value in settings.items()}
    values.setdefault("run.ticks", 20)
    config, scene = configure([built_in_source(), layer_defaults_source(), flags_source(values, {})])
    stats = RunStatistics()
    engine = build_engine(config, scene, instruments=[stats])
    writer = SaveWriter.create(path, engine)
    trio.run(engine.loop.run, config.settings.run.ticks, config.settings.run.tick_interval_s,
             clock=trio.testing.MockClock(autojump_threshold=0))  # fmt: skip
    writer.check()
    return stats.summary(engine), engine


def frames_of(data: bytes) -> list[bytes]:
    """The payloads of every whole frame of a save file's bytes."""
    return list(FrameReader(data))


def reframe(payloads: list[bytes]) -> bytes:
    """A save file's bytes made of ``payloads``, each framed with good checksums."""
    return SIGNATURE + b"".join(encode_frame(payload) for payload in payloads)


def rewrite_payloads(data: bytes, change: Callable[[int, Any], Any]) -> bytes:
    """Decode every frame to plain data, pass it through ``change(index, data)``, and
    frame it again with good checksums (index 0 is the header)."""
    payloads = [msgspec.msgpack.encode(change(i, msgspec.msgpack.decode(p))) for i, p in enumerate(frames_of(data))]
    return reframe(payloads)
