"""Agents and scenes: TOML content decoded into msgspec Structs.

A scene names its cast by agent file (``agents/<id>.toml``). Content is found next to
the scene first (``<scene dir>/../agents``), then in Manor's bundled ``agents/``.
"""

from __future__ import annotations

import os
import random
import tomllib
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from .errors import ContentError, one_line
from .limits import MAX_AGENTS, MAX_BEATS_PER_TICK, AgentId, Count, Seed
from .providers.sim import SimProfile, line_problem

__all__ = [
    "AgentSpec",
    "BeatSpec",
    "Scene",
    "SceneSpec",
    "agent_folders",
    "bundled_scenes",
    "generated_cast",
    "load_scene",
    "scene_problem",
]

NonEmpty = Annotated[str, Meta(min_length=1)]


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


class BeatSpec(_Content, kw_only=True):
    """Scene beats: ``per_tick`` calls a tick, speakers and prompts taking turns."""

    per_tick: Annotated[int, Meta(ge=0, le=MAX_BEATS_PER_TICK)] = 0
    speakers: tuple[AgentId, ...] = ()
    prompts: Annotated[tuple[str, ...], Meta(min_length=1)] = ("Something happens.",)


class SceneSpec(_Content, kw_only=True):
    """A scene file.

    Attributes:
        world: the game it plays: a built-in world's name ("werewolf"), or
            "module:Class" for your own; "" is the Wacky Manor (``manor.worlds``).
        rules: the world's own settings (the ``[rules]`` table), which the world reads
            and checks itself.
        rooms: where the characters can be (a world may give them no meaning).
    """

    name: str
    description: str = ""
    world: str = ""
    seed: Seed = 0
    platform_limit: Count = 6
    rooms: Annotated[tuple[NonEmpty, ...], Meta(min_length=1)]
    cast: Annotated[tuple[AgentId, ...], Meta(max_length=MAX_AGENTS)]
    narrator: AgentId = "narrator"
    summariser: AgentId = "summariser"
    beats: BeatSpec = BeatSpec()
    rules: dict[str, Any] = {}


class Scene(msgspec.Struct, frozen=True, kw_only=True):
    """A scene with its agents loaded: what a ``World`` is made from."""

    spec: SceneSpec
    path: str
    #: Agent id -> agent, characters in cast order.
    characters: dict[AgentId, AgentSpec]
    narrator: tuple[AgentId, AgentSpec]
    summariser: tuple[AgentId, AgentSpec]

    @property
    def agents(self) -> dict[str, AgentSpec]:
        """Every agent by id: characters, narrator, summariser."""
        return {**self.characters, self.narrator[0]: self.narrator[1], self.summariser[0]: self.summariser[1]}


def content_dir(kind: str) -> Path:
    """Manor's bundled ``agents`` or ``scenes``: in the wheel, or the project tree."""
    packaged = resources.files("manor") / "_content" / kind
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / kind


def bundled_scenes() -> list[str]:
    return sorted(path.stem for path in content_dir("scenes").glob("*.toml"))


def load_scene(name_or_path: str, *, agents: int | None = None) -> Scene:
    """Load a scene by bundled name (``wacky_manor``) or path, with its cast.

    Args:
        agents: replace the cast with this many generated characters (stress runs).

    Raises:
        ContentError: a missing or malformed file, or a cast member with no agent file.
    """
    path = _scene_path(name_or_path)
    spec = _decode(path, SceneSpec)
    search = agent_folders(path)
    narrator = (spec.narrator, _load_agent(spec.narrator, search, path, "narrator"))
    summariser = (spec.summariser, _load_agent(spec.summariser, search, path, "summariser"))
    if agents is not None:
        characters = generated_cast(agents, spec)
        speakers = tuple(list(characters)[: max(1, len(spec.beats.speakers))])
        spec = msgspec.structs.replace(
            spec, cast=tuple(characters), beats=msgspec.structs.replace(spec.beats, speakers=speakers)
        )
    else:
        characters = {agent_id: _load_agent(agent_id, search, path, "cast member") for agent_id in spec.cast}
    scene = Scene(spec=spec, path=str(path), characters=characters, narrator=narrator, summariser=summariser)
    problem = scene_problem(scene)
    if problem:
        raise ContentError(f"{path}: {problem}")
    return scene


def agent_folders(scene_path: Path) -> list[Path]:
    """Where a scene's agent files are looked for, in order: ``agents/`` beside the scene
    file, ``agents/`` beside its folder (a project's ``scenes/`` and ``agents/``), then
    the bundled agents. Taken from the scene file's absolute path, so the same whether
    it is named ``auction.toml`` from its folder or by its full path."""
    folder = Path(os.path.abspath(scene_path)).parent
    candidates = [folder / "agents", folder.parent / "agents", content_dir("agents")]
    return list(dict.fromkeys(candidates))


def scene_problem(scene: Scene) -> str | None:
    """What makes a loaded scene unplayable (a beat speaker not in the cast, beats with
    no speaker), or ``None``: checked of a scene file and of the scene a save holds."""
    beats = scene.spec.beats
    for speaker in beats.speakers:
        if speaker not in scene.characters:
            return f"beat speaker '{speaker}' is not in the cast"
    if beats.per_tick and not beats.speakers:
        return f"beats.per_tick is {beats.per_tick} but beats.speakers is empty"
    return None


def generated_cast(count: int, spec: SceneSpec) -> dict[str, AgentSpec]:
    """``count`` characters with latency profiles drawn from the scene's seed."""
    rng = random.Random(f"cast:{spec.seed}:{count}")
    width = len(str(count))
    return {
        f"guest_{i:0{width}d}": AgentSpec(
            name=f"Guest {i}",
            persona="A guest of the manor, one of very many.",
            start_room=spec.rooms[i % len(spec.rooms)],
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
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ContentError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ContentError(f"{path}: malformed TOML: {one_line(exc)}") from None
    try:
        return msgspec.convert(data, kind)
    except msgspec.ValidationError as exc:
        raise ContentError(f"{path}: {one_line(exc)}") from None
