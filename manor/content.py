"""Agents and scenes: TOML content decoded into msgspec Structs.

A scene names its cast by agent file (``agents/<id>.toml``). Content is found next to
the scene first (``<scene dir>/../agents``), then in Manor's bundled ``agents/``.

A scene file holds the keys every world shares (``SceneSpec``: its name, world, seed,
platform limit, cast and ``[rules]``) and the keys of its world's own, which the world
declares as a ``SceneKeys`` Struct (the manor's ``rooms``, ``narrator``, ``summariser``
and ``[beats]``: ``manor.worlds.manor.ManorKeys``). The world's keys are checked by its
Struct when the file is read, and kept in the scene as plain data (``world_keys``), so
that a scene, and the save that holds it, is read without the world's code.
"""

from __future__ import annotations

import os
import random
import tomllib
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, Self, TypeVar

import msgspec
from msgspec import Meta

from .errors import ContentError, one_line
from .limits import MAX_AGENTS, AgentId, Count, Seed
from .providers.sim import SimProfile, line_problem

__all__ = [
    "AgentSpec",
    "Scene",
    "SceneKeys",
    "SceneSpec",
    "agent_folders",
    "bundled_scenes",
    "generated_cast",
    "read_scene",
]

_Keys = TypeVar("_Keys", bound="SceneKeys")


class _Content(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """Base of content files: an unknown key is an error that names it."""


class AgentSpec(_Content, kw_only=True):
    """One agent file: a character, the narrator or the summariser."""

    name: str
    role: Literal["character", "narrator", "summariser"] = "character"
    persona: str = ""
    voice: str = ""
    goals: tuple[str, ...] = ()
    #: Which backend answers this agent's calls ("sim" is the embedded default).
    backend: str = "sim"
    model: str = ""
    start_room: str | None = None
    #: How the simulated backend plays this agent.
    sim: SimProfile = SimProfile()

    def __post_init__(self) -> None:
        # Checked here, not when a line is drawn mid-run: msgspec turns the ValueError
        # into the decoding error that names the file (or the save).
        for i, line in enumerate(self.sim.lines):
            problem = line_problem(line)
            if problem:
                raise ValueError(f"agent {one_line(self.name)!r}: sim.lines[{i}] {one_line(line)!r}: {problem}")


class SceneKeys(_Content, kw_only=True):
    """A world's own keys of a scene file, beside those every scene has: a world
    subclasses it with the keys it takes and names it as its ``scene_keys``.

    A key the world's Struct does not declare is an error naming the file and the key,
    as any other is::

        class ArenaKeys(SceneKeys, kw_only=True):
            referee: AgentId = "referee"

            def agents(self) -> dict[str, AgentId]:
                return {"referee": self.referee}

    ``SceneKeys`` itself takes no key: a world whose scenes need only the shared keys
    (``cast`` and the ``[rules]`` table) names it as its ``scene_keys``.
    """

    def agents(self) -> dict[str, AgentId]:
        """The agents these keys name besides the cast, by what they are to the world
        (``{"narrator": "narrator"}``): their agent files are loaded with the cast's."""
        return {}

    def recast(self, cast: tuple[AgentId, ...]) -> Self:
        """These keys for a cast of generated characters (``--agents N``): the manor
        gives its scene beats to the new cast."""
        return self

    def places(self) -> tuple[str, ...]:
        """Where the world's scenes happen (the manor's rooms), for the simulated
        backend's ``{room}``; none: it draws its own."""
        return ()

    def start_room(self, index: int) -> str | None:
        """Where generated character ``index`` (from 1) starts, or ``None``."""
        return None

    def problem(self, characters: Mapping[AgentId, AgentSpec]) -> str | None:
        """What makes these keys unplayable with this cast (a beat speaker not in the
        cast), or ``None``: checked of a scene file and of the scene a save holds."""
        return None


class SceneSpec(_Content, kw_only=True):
    """A scene file: the keys every world shares, and its world's own.

    Attributes:
        world: the game it plays: a built-in world's name ("werewolf"), or
            "module:Class" for your own; "" is the Wacky Manor (``manor.worlds``).
        rules: the world's own settings (the ``[rules]`` table), which the world reads
            and checks itself.
        world_keys: the keys of the file that are the world's own (its ``SceneKeys``),
            as plain data with the world's defaults filled in: the world decodes them
            with ``Scene.keys``. Not a key of the file: the file's other keys.
    """

    name: str
    description: str = ""
    world: str = ""
    seed: Seed = 0
    platform_limit: Count = 6
    cast: Annotated[tuple[AgentId, ...], Meta(max_length=MAX_AGENTS)]
    rules: dict[str, Any] = {}
    world_keys: dict[str, Any] = {}


#: The keys of a scene file that every world shares: the file's other keys are its world's.
_SHARED_KEYS = frozenset(field.encode_name for field in msgspec.structs.fields(SceneSpec)) - {"world_keys"}


class Scene(msgspec.Struct, frozen=True, kw_only=True):
    """A scene with its agents loaded: what a ``World`` is made from."""

    spec: SceneSpec
    path: str
    #: Agent id -> agent, characters in cast order.
    characters: dict[AgentId, AgentSpec]
    #: The other agents the world's keys name (``SceneKeys.agents``: the manor's narrator
    #: and summariser), by id, in the order the keys name them.
    others: dict[AgentId, AgentSpec] = {}

    @property
    def agents(self) -> dict[str, AgentSpec]:
        """Every agent by id: the characters, then the others."""
        return {**self.characters, **self.others}

    def keys(self, kind: type[_Keys]) -> _Keys:
        """The world's keys (``spec.world_keys``) decoded as ``kind``.

        Raises:
            ValueError: they do not fit ``kind`` (msgspec's message, naming the key).
        """
        try:
            return msgspec.convert(self.spec.world_keys, kind)
        except msgspec.ValidationError as exc:
            raise ValueError(str(exc)) from None


def content_dir(kind: str) -> Path:
    """Manor's bundled ``agents`` or ``scenes``: in the wheel, or the project tree."""
    packaged = resources.files("manor") / "_content" / kind
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / kind


def bundled_scenes() -> list[str]:
    return sorted(path.stem for path in content_dir("scenes").glob("*.toml"))


def read_scene(name_or_path: str, keys_of: Callable[[SceneSpec], type[SceneKeys]], *, agents: int | None = None) -> Scene:
    """Read a scene by bundled name (``wacky_manor``) or path, with its cast and the
    other agents its world's keys name. ``manor.worlds.load_scene`` is this with the
    keys of the scene's world.

    Args:
        keys_of: the ``SceneKeys`` Struct of the world a scene's shared keys name.
        agents: replace the cast with this many generated characters (stress runs).

    Raises:
        ContentError: a missing or malformed file, a key neither shared nor its
            world's, or an agent with no agent file.
    """
    path = _scene_path(name_or_path)
    table = _read(path)
    spec = _convert(path, {key: value for key, value in table.items() if key in _SHARED_KEYS}, SceneSpec)
    keys = _convert(path, {key: value for key, value in table.items() if key not in _SHARED_KEYS}, keys_of(spec))
    search = agent_folders(path)
    others = {agent_id: _load_agent(agent_id, search, path, what) for what, agent_id in keys.agents().items()}
    if agents is not None:
        characters = generated_cast(agents, spec.seed, keys)
        keys = keys.recast(tuple(characters))
        spec = msgspec.structs.replace(spec, cast=tuple(characters))
    else:
        characters = {agent_id: _load_agent(agent_id, search, path, "cast member") for agent_id in spec.cast}
    problem = keys.problem(characters)
    if problem:
        raise ContentError(f"{path}: {problem}")
    # As a save holds them (arrays as lists), so that a scene read again equals its save's.
    spec = msgspec.structs.replace(spec, world_keys=msgspec.msgpack.decode(msgspec.msgpack.encode(keys)))
    return Scene(spec=spec, path=str(path), characters=characters, others=others)


def agent_folders(scene_path: Path) -> list[Path]:
    """Where a scene's agent files are looked for, in order: ``agents/`` beside the scene
    file, ``agents/`` beside its folder (a project's ``scenes/`` and ``agents/``), then
    the bundled agents. Taken from the scene file's absolute path, so the same whether
    it is named ``auction.toml`` from its folder or by its full path."""
    folder = Path(os.path.abspath(scene_path)).parent
    candidates = [folder / "agents", folder.parent / "agents", content_dir("agents")]
    return list(dict.fromkeys(candidates))


def generated_cast(count: int, seed: int, keys: SceneKeys) -> dict[str, AgentSpec]:
    """``count`` characters with latency profiles drawn from the scene's seed, each
    starting where the world's keys say (``SceneKeys.start_room``)."""
    rng = random.Random(f"cast:{seed}:{count}")
    width = len(str(count))
    return {
        f"guest_{i:0{width}d}": AgentSpec(
            name=f"Guest {i}",
            persona="A guest of the manor, one of very many.",
            start_room=keys.start_room(i),
            sim=SimProfile(latency_s=round(rng.uniform(0.8, 2.4), 2), jitter=0.3),
        )
        for i in range(1, count + 1)
    }


def _scene_path(name_or_path: str) -> Path:
    if name_or_path.endswith(".toml") or "/" in name_or_path:
        path = Path(name_or_path)
        if not _is_file(path):
            raise ContentError(f"{one_line(path)}: no such scene file")
        return path
    bundled = bundled_scenes()
    if name_or_path not in bundled:
        known = ", ".join(bundled) or "none"
        raise ContentError(f"unknown scene '{one_line(name_or_path)}' (bundled scenes: {known}; or give a path to a .toml file)")
    return content_dir("scenes") / f"{name_or_path}.toml"


def _load_agent(agent_id: str, search: list[Path], scene_path: Path, what: str) -> AgentSpec:
    for folder in search:
        path = folder / f"{agent_id}.toml"
        if _is_file(path):
            return _decode(path, AgentSpec)
    looked = ", ".join(str(folder) for folder in search)
    raise ContentError(f"{scene_path}: {what} '{agent_id}' has no agent file (looked for {agent_id}.toml in {looked})")


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a file; a name the system refuses (too long) is an error.

    Raises:
        ContentError: the path cannot even be looked at.
    """
    try:
        return path.is_file()
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        raise ContentError(f"{one_line(path)}: cannot read: {one_line(getattr(exc, 'strerror', None) or exc)}") from None


def _decode(path: Path, kind: type[_Content]) -> Any:
    return _convert(path, _read(path), kind)


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ContentError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ContentError(f"{path}: malformed TOML: {one_line(exc)}") from None


def _convert(path: Path, data: Mapping[str, Any], kind: type[_Content]) -> Any:
    try:
        return msgspec.convert(data, kind)
    except msgspec.ValidationError as exc:
        raise ContentError(f"{path}: {one_line(exc)}") from None
