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
from manor.run.engine import Engine, build_engine, configure
from manor.saves.framing import SIGNATURE, FrameReader, encode_frame
from manor.saves.writer import SaveWriter
from manor.tick.statistics import RunStatistics

__all__ = [
    "EXAMPLES",
    "FORMAT_1",
    "SAVES",
    "Edit",
    "change_edit",
    "frames_of",
    "record",
    "reframe",
    "rewrite_payloads",
    "scene_edit",
    "setting_edit",
]

#: A change to a save's decoded frames, for ``rewrite_payloads``: (index, frame) -> frame.
Edit = Callable[[int, Any], Any]

#: The example saves shipped in saves/.
SAVES = Path(__file__).resolve().parent.parent / "saves"
EXAMPLES = ("wacky_manor_pipeline.msav", "wacky_manor_legacy.msav")
#: The example saves as shipped before the simulator's words changed: format 1, their
#: texts an older simulator's (a replay answers from the record, so they still verify).
FORMAT_1 = Path(__file__).resolve().parent / "format1"


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


def setting_edit(key: str, value: Any) -> Edit:
    """Set the recorded setting ``key`` to ``value`` (in the header, frame 0)."""

    def edit(index: int, frame: Any) -> Any:
        if index == 0:
            frame["settings"] = [[k, value if k == key else v, origin] for k, v, origin in frame["settings"]]
        return frame

    return edit


def change_edit(tick: int, change: list[Any]) -> Edit:
    """Record the live change ``[key, value, at]`` in tick ``tick``'s frame."""

    def edit(index: int, frame: Any) -> Any:
        if index == tick:
            frame["changes"] = [*frame.get("changes", []), change]
        return frame

    return edit


def scene_edit(path: tuple[Any, ...], value: Any) -> Edit:
    """Set the value at ``path`` inside the saved scene (``("spec", "seed")``)."""

    def edit(index: int, frame: Any) -> Any:
        if index == 0:
            target = frame["scene"]
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value
        return frame

    return edit
