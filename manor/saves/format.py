"""What a save file holds: a header, then one frame per tick, then an end frame.

Everything here is a msgspec Struct, encoded as MessagePack. The header is a tagged
union on ``format``: each format version has its own header class, and an older one is
upgraded, step by step, to the current one when it is read (``upgrade``). Today there is
one version. To change the format, keep ``HeaderV1`` as it is, add ``HeaderV2`` with
``tag=2`` to ``HEADERS``, and register the step ``HeaderV1 -> HeaderV2`` in
``_UPGRADES``; new fields get defaults and an existing field never changes type, so an
old file still decodes into its own version's class.

Calls and ticks are stored as the engine's own ``CallRecord`` and ``TickRecord``
(response text, tokens and times included): the same rule holds for them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Union

import msgspec

from ..content import Scene
from ..records import CallRecord, TickRecord

__all__ = [
    "FORMAT_VERSION",
    "HEADERS",
    "EndFrame",
    "Frame",
    "Header",
    "HeaderV1",
    "LIVE_KEYS",
    "SettingChange",
    "SettingRow",
    "TickFrame",
    "VERSIONS",
    "WorldAtStart",
    "frame_decoder",
    "header_decoder",
    "probe_version",
    "upgrade",
]

#: The format version this Manor writes.
FORMAT_VERSION = 1


class SettingRow(msgspec.Struct, frozen=True, array_like=True):
    """One effective setting of the recorded run, and the source it came from
    (``Config.rows()``). ``derived`` origins (the gate size from the platform limit)
    are kept so that a what-if replay can derive them again."""

    key: str
    value: Any
    origin: str


class WorldAtStart(msgspec.Struct, frozen=True, kw_only=True):
    """The world before the first tick: where everyone stood, and its hash."""

    tick: int
    positions: dict[str, str]
    hash: str


class HeaderV1(msgspec.Struct, frozen=True, kw_only=True, tag_field="format", tag=1):
    """The first frame of a format-1 save.

    Attributes:
        engine_version: the Manor that wrote it.
        created_at: wall-clock time the run started (ISO 8601), for people.
        scene: the scene as loaded, agents included, so that a replay never depends on
            files on disk.
        settings: every effective setting, with its origin.
        seed: the seed every draw of the run came from.
        world: the world at tick 0.
    """

    engine_version: str
    created_at: str
    scene: Scene
    settings: tuple[SettingRow, ...]
    seed: int
    world: WorldAtStart


#: Every header version, oldest first; the last is the one written.
HEADERS: tuple[type, ...] = (HeaderV1,)

#: The current header.
Header = HeaderV1

#: Upgrade steps: a header class -> the function that turns it into the next version.
_UPGRADES: dict[type, Callable[[Any], Any]] = {}


#: The settings a running loop can change (the dashboard's keys).
LIVE_KEYS = ("gate.size", "run.policy", "run.batch_size")


class SettingChange(msgspec.Struct, frozen=True, array_like=True):
    """A setting changed while the run went on.

    ``at`` is the (virtual) time of a change made while the tick ran; ``None`` means
    it was made between ticks and holds from the tick's start.
    """

    key: str
    value: Any
    at: float | None = None


class TickFrame(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="tick"):
    """One tick, written when it is applied to the world.

    Attributes:
        record: the tick's calls (in planning order, each with its response text,
            tokens and times) and the world hash after applying them.
        superseded: tries that a retry replaced (the legacy policy's rejected attempts),
            in the order they ended. They are not in ``record`` but they did happen: the
            platform rejected them.
        changes: settings changed live (``LIVE_KEYS``) since the previous tick's frame:
            before this tick started, or while it ran. Added to format 1 with a
            default: older files have none, and an older reader ignores the field.
    """

    record: TickRecord
    superseded: tuple[CallRecord, ...] = ()
    changes: tuple[SettingChange, ...] = ()


class EndFrame(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="end"):
    """The run ended (finished, failed or was interrupted) after ``ticks`` ticks. A file
    without one comes from a run that was killed."""

    ticks: int


Frame = TickFrame | EndFrame

# Decoders are built once: building one costs far more than decoding a frame.
_HEADER_DECODER = msgspec.msgpack.Decoder(Union[HEADERS])  # type: ignore[valid-type]  # noqa: UP007
#: Format version -> the decoder of its tick and end frames.
_FRAME_DECODERS = {1: msgspec.msgpack.Decoder(Frame)}

#: Every format version this Manor reads.
VERSIONS: tuple[int, ...] = tuple(sorted(_FRAME_DECODERS))


class _VersionProbe(msgspec.Struct):
    """Just the version of a header, whatever else it holds."""

    format: int


_PROBE_DECODER = msgspec.msgpack.Decoder(_VersionProbe)


def header_decoder() -> msgspec.msgpack.Decoder:
    """The decoder of every header version (a tagged union on ``format``)."""
    return _HEADER_DECODER


def frame_decoder(version: int) -> msgspec.msgpack.Decoder:
    """The decoder of the tick and end frames of format ``version``."""
    return _FRAME_DECODERS[version]


def probe_version(payload: bytes) -> int:
    """The ``format`` of a header payload, before decoding the rest.

    Raises:
        msgspec.DecodeError: the payload is not a map with an integer ``format``.
    """
    return _PROBE_DECODER.decode(payload).format


def upgrade(header: Any) -> Header:
    """Bring a header of any known version up to the current one."""
    while not isinstance(header, Header):
        header = _UPGRADES[type(header)](header)
    return header
