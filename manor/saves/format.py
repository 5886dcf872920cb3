"""What a save file holds: a header, then one frame per tick, then an end frame.

Everything here is a msgspec Struct, encoded as MessagePack. The header is a tagged
union on ``format``: each format version has its own header class, and an older one is
upgraded, step by step, to the current one when it is read (``upgrade``). To change the
format, keep the old header class as it is, add the next one with the next ``tag`` to
``HEADERS``, and register the step between them in ``_UPGRADES``; new fields get
defaults and an existing field never changes type, so an old file still decodes into
its own version's class.

Calls and ticks are stored as the engine's own ``CallRecord`` and ``TickRecord``
(response text, tokens and times included): the same rule holds for them. What an old
version's frames mean in the current one is said by ``upgrade_frame``.

Versions:
    1: the first.
    2: every call keeps its error message (``CallRecord.error``) and, refused by the
       platform, who refused it (``CallRecord.refused_by``: Manor's limiter or the
       server); the header keeps the run's id (``run_id``). A format-1 save had no way
       to tell a server's 429 from the limiter's refusal; its refusals are read as the
       limiter's, which is what a format-1 replay took them for.
    3: the header names the world the run played and its version (``world_name``,
       ``world_version``: a scene may play any world, ``manor.worlds``). Formats 1 and 2
       only ever played the manor world, version 1. It may say the run was one world of
       a fleet (``fleet``; added with a default, ``None`` for a single run).
    4: the scene is world-neutral: the keys of its world's own (the manor's ``rooms``,
       ``narrator``, ``summariser`` and ``beats``) are its ``spec.world_keys``, plain
       data the world decodes, and the agents they name are its ``others``, by id. A
       format 1–3 scene is read with the scene schema of its time (``_SceneV1``, frozen
       here) and its four keys moved into ``world_keys`` (its ``beats`` left out when
       they were the default: no world but the manor played beats).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Union

import msgspec
from msgspec import Meta

from ..content import AgentSpec, Scene, SceneSpec
from ..limits import MAX_AGENTS, MAX_BEATS_PER_TICK, AgentId, Count, Seed
from ..records import CallRecord, TickRecord

__all__ = [
    "FORMAT_VERSION",
    "HEADERS",
    "EndFrame",
    "FleetSeat",
    "Frame",
    "Header",
    "HeaderV1",
    "HeaderV2",
    "HeaderV3",
    "HeaderV4",
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
    "upgrade_frame",
]

#: The caller kinds of the manor world, version 1: the only world formats 1 and 2 could
#: play, so what a header of theirs means by its calls' kinds. Frozen here, as the format
#: is: what the manor world declares today does not change what an old save meant.
_FORMAT_2_CALLERS: tuple[str, ...] = ("character", "narrator", "summariser", "scene_beat")

#: The format version this Manor writes.
FORMAT_VERSION = 4


class _BeatSpecV1(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """Scene beats as formats 1–3 held them (the scene schema of their time, frozen)."""

    per_tick: Annotated[int, Meta(ge=0, le=MAX_BEATS_PER_TICK)] = 0
    speakers: tuple[AgentId, ...] = ()
    prompts: Annotated[tuple[str, ...], Meta(min_length=1)] = ("Something happens.",)


class _SceneSpecV1(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """A scene file as formats 1–3 held it: every world's scene had the manor's keys."""

    name: str
    description: str = ""
    world: str = ""
    seed: Seed = 0
    platform_limit: Count = 6
    rooms: Annotated[tuple[Annotated[str, Meta(min_length=1)], ...], Meta(min_length=1)]
    cast: Annotated[tuple[AgentId, ...], Meta(max_length=MAX_AGENTS)]
    narrator: AgentId = "narrator"
    summariser: AgentId = "summariser"
    beats: _BeatSpecV1 = _BeatSpecV1()
    rules: dict[str, Any] = {}


class _SceneV1(msgspec.Struct, frozen=True, kw_only=True):
    """A loaded scene as formats 1–3 held it: the narrator and summariser apart."""

    spec: _SceneSpecV1
    path: str
    characters: dict[AgentId, AgentSpec]
    narrator: tuple[AgentId, AgentSpec]
    summariser: tuple[AgentId, AgentSpec]


def _scene_v1_to_v2(scene: _SceneV1) -> Scene:
    old = scene.spec
    keys: dict[str, Any] = {"rooms": old.rooms, "narrator": old.narrator, "summariser": old.summariser}
    if old.beats != _BeatSpecV1():
        keys["beats"] = old.beats
    spec = SceneSpec(
        name=old.name, description=old.description, world=old.world, seed=old.seed, platform_limit=old.platform_limit,
        cast=old.cast, rules=old.rules, world_keys=msgspec.msgpack.decode(msgspec.msgpack.encode(keys)),  # as format 4 holds them
    )  # fmt: skip
    others = {scene.narrator[0]: scene.narrator[1], scene.summariser[0]: scene.summariser[1]}
    return Scene(spec=spec, path=scene.path, characters=scene.characters, others=others)


class SettingRow(msgspec.Struct, frozen=True, array_like=True):
    """One effective setting of the recorded run, and the source it came from
    (``Config.rows()``). ``derived`` origins (the gate size from the platform limit)
    are kept so that a what-if replay can derive them again."""

    key: str
    value: Any
    origin: str


class WorldAtStart(msgspec.Struct, frozen=True, kw_only=True):
    """The world before the first tick: its hash, and where everyone stood
    (``manor.worlds.world_positions``: the manor's rooms; empty for a world that keeps
    no positions)."""

    tick: int
    positions: dict[str, str] = {}
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
    scene: _SceneV1
    settings: tuple[SettingRow, ...]
    seed: int
    world: WorldAtStart


class HeaderV2(msgspec.Struct, frozen=True, kw_only=True, tag_field="format", tag=2):
    """The first frame of a format-2 save: format 1's fields, and the run's id.

    Attributes:
        run_id: the run's own id (``Engine.run_id``), as the run sent it to the servers
            it called (an Agno session is per run); "" for a run upgraded from format 1.
    """

    engine_version: str
    created_at: str
    scene: _SceneV1
    settings: tuple[SettingRow, ...]
    seed: int
    world: WorldAtStart
    run_id: str = ""


class FleetSeat(msgspec.Struct, frozen=True, kw_only=True):
    """The recorded run was world ``world`` (from 0) of a fleet of ``worlds`` that shared
    one gate and one platform (``manor fleet``). Its calls were admitted by that gate
    among every world's calls, which this save does not hold: a replay takes their
    admissions from the recording (``manor.replay.admissions``)."""

    world: Annotated[int, msgspec.Meta(ge=0)]
    worlds: Annotated[int, msgspec.Meta(ge=1)]


class HeaderV3(msgspec.Struct, frozen=True, kw_only=True, tag_field="format", tag=3):
    """The first frame of a format-3 save: format 2's fields, and the world played.

    Attributes:
        world_name: the world's ``name`` (``manor.worlds.World``).
        world_version: the world's ``version``: a replay under another version of the
            world says so instead of failing to verify.
        world_callers: the world's caller kinds, in its order (what the calls' kinds
            are checked against, and the order reports show them in).
        fleet: the run was one world of a fleet; ``None`` for a single run.
    """

    engine_version: str
    created_at: str
    scene: _SceneV1
    settings: tuple[SettingRow, ...]
    seed: int
    world: WorldAtStart
    run_id: str = ""
    world_name: str = "manor"
    world_version: str = "1"
    world_callers: tuple[str, ...] = _FORMAT_2_CALLERS
    fleet: FleetSeat | None = None


class HeaderV4(msgspec.Struct, frozen=True, kw_only=True, tag_field="format", tag=4):
    """The first frame of a format-4 save: format 3's fields, the scene world-neutral
    (its world's keys in ``scene.spec.world_keys``)."""

    engine_version: str
    created_at: str
    scene: Scene
    settings: tuple[SettingRow, ...]
    seed: int
    world: WorldAtStart
    run_id: str = ""
    world_name: str = "manor"
    world_version: str = "1"
    world_callers: tuple[str, ...] = _FORMAT_2_CALLERS
    fleet: FleetSeat | None = None


#: Every header version, oldest first; the last is the one written.
HEADERS: tuple[type, ...] = (HeaderV1, HeaderV2, HeaderV3, HeaderV4)

#: The current header.
Header = HeaderV4


def _v1_to_v2(header: HeaderV1) -> HeaderV2:
    return HeaderV2(**msgspec.structs.asdict(header))


def _v2_to_v3(header: HeaderV2) -> HeaderV3:
    # Formats 1 and 2 were written by a Manor that had only the manor world, version 1.
    return HeaderV3(**msgspec.structs.asdict(header))


def _v3_to_v4(header: HeaderV3) -> HeaderV4:
    fields = msgspec.structs.asdict(header)
    return HeaderV4(**{**fields, "scene": _scene_v1_to_v2(header.scene)})


#: Upgrade steps: a header class -> the function that turns it into the next version.
_UPGRADES: dict[type, Callable[[Any], Any]] = {HeaderV1: _v1_to_v2, HeaderV2: _v2_to_v3, HeaderV3: _v3_to_v4}


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
#: Format version -> the decoder of its tick and end frames (format 2 added fields with
#: defaults to the call records, formats 3 and 4 changed only the header: one decoder
#: reads all).
_FRAME_DECODERS = dict.fromkeys((1, 2, 3, 4), msgspec.msgpack.Decoder(Frame))

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


def upgrade_frame(version: int, frame: Frame) -> Frame:
    """A frame of format ``version`` as the current format means it.

    Format 1 did not say who refused a ``platform_rejected`` call: its refusals are the
    limiter's (a format-1 replay treated every one as never having reached the backend).
    """
    if version >= 2 or not isinstance(frame, TickFrame):
        return frame
    record = frame.record
    return msgspec.structs.replace(
        frame,
        record=msgspec.structs.replace(record, calls=_limiter_refusals(record.calls)),
        superseded=_limiter_refusals(frame.superseded),
    )


def _limiter_refusals(calls: tuple[CallRecord, ...]) -> tuple[CallRecord, ...]:
    return tuple(
        msgspec.structs.replace(call, refused_by="limiter") if call.reason == "platform_rejected" else call for call in calls
    )
