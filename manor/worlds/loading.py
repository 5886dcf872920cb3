"""Finding a scene's world — a built-in by name, or a user's class by ``module:Class`` —
and loading a scene with the keys its world takes."""

from __future__ import annotations

import importlib
import os
import random
import sys

from ..content import Scene, SceneKeys, SceneSpec, read_scene
from ..errors import ContentError, WorldError, one_line
from .world import World
from .failures import world_code
from .manor import ManorKeys

__all__ = ["BUILT_IN", "create_world", "load_scene", "scene_keys", "scene_problem", "world_class"]

#: The worlds Manor ships, by the name a scene's ``world`` key gives.
BUILT_IN: dict[str, str] = {
    "manor": "manor.worlds.manor:ManorWorld",
    "werewolf": "manor.worlds.werewolf:WerewolfWorld",
}

#: The world a scene without a ``world`` key plays.
DEFAULT = "manor"

_REQUIRED = ("name", "version", "callers", "from_scene", "plan", "apply", "over")


def world_class(spec: str) -> type[World]:
    """The world class a scene's ``world`` key names: a built-in (``"werewolf"``), or
    ``"package.module:Class"`` imported from the working directory or ``PYTHONPATH``.

    Raises:
        ContentError: no such built-in, the module cannot be imported, it has no such
            class, or the class lacks what a world must have.
    """
    spec = spec or DEFAULT
    path = BUILT_IN.get(spec, spec)
    module_name, colon, class_name = path.partition(":")
    if not colon or not module_name or not class_name:
        known = ", ".join(BUILT_IN)
        raise ContentError(f"unknown world '{one_line(spec)}' (built-in worlds: {known}; or 'module:Class' for your own)")
    if "" not in sys.path and os.getcwd() not in sys.path:
        # ``python -m manor`` puts the working directory on the path; the ``manor``
        # script does not: a user's world next to their scene must import either way.
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # their module's own error, whatever it is, in one line
        raise ContentError(f"world '{one_line(spec)}': cannot import {module_name}: {one_line(exc) or type(exc).__name__}") from None
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        raise ContentError(f"world '{one_line(spec)}': {module_name} has no class {class_name}")
    missing = [attribute for attribute in _REQUIRED if not hasattr(cls, attribute)]
    if missing:
        raise ContentError(f"world '{one_line(spec)}': {class_name} is not a world: it has no {', '.join(missing)}")
    if not cls.callers:
        raise ContentError(f"world '{one_line(spec)}': {class_name}.callers is empty")
    return cls


def create_world(scene: Scene, seed: int) -> World:
    """The scene's world before its first tick, its generator seeded from ``seed``.

    Raises:
        ContentError: the scene's world cannot be found (``world_class``) or refuses
            the scene (a ``ValueError`` from ``from_scene``, e.g. too few players).
        WorldError: ``from_scene`` failed otherwise (a bug in the world).
    """
    cls = world_class(scene.spec.world)
    try:
        with world_code(cls, "from_scene", 0):
            return cls.from_scene(scene, random.Random(f"world:{seed}"))
    except WorldError as exc:
        if isinstance(exc.__cause__, ValueError):  # the scene refused, as the protocol says
            raise ContentError(f"{scene.path}: world '{cls.name}': {one_line(exc.__cause__)}") from None
        raise


def scene_keys(cls: type[World]) -> type[SceneKeys]:
    """The keys of a scene file that world ``cls`` takes besides the shared ones: its
    ``scene_keys``, or, for a world that declares none, the manor's (``ManorKeys``:
    ``rooms``, ``narrator``, ``summariser``, ``[beats]``), which every scene took before
    worlds had keys of their own — so such a world's scene files load as they did."""
    keys = getattr(cls, "scene_keys", ManorKeys)
    if not (isinstance(keys, type) and issubclass(keys, SceneKeys)):
        raise ContentError(f"world '{one_line(cls.name)}': {cls.__name__}.scene_keys is not a subclass of manor.content.SceneKeys")
    return keys


def load_scene(name_or_path: str, *, agents: int | None = None) -> Scene:
    """Load a scene by bundled name (``wacky_manor``) or path, with its cast and the
    other agents its world's keys name, its world's keys checked by the world's Struct.

    Args:
        agents: replace the cast with this many generated characters (stress runs).

    Raises:
        ContentError: a missing or malformed file, a key neither shared nor its world's
            (naming the key), a world that cannot be found, or an agent with no file.
    """
    return read_scene(name_or_path, _keys_of, agents=agents)


def _keys_of(spec: SceneSpec) -> type[SceneKeys]:
    return scene_keys(world_class(spec.world))


def scene_problem(scene: Scene) -> str | None:
    """What makes a scene of a built-in world unplayable, or ``None``: its keys do not
    decode as the world's, name an agent the scene does not hold, or are unplayable with
    its cast (``SceneKeys.problem``). Checked of the scene a save holds when the save is
    read, which imports no module a save names: a user's world checks its scene when a
    replay makes it (``from_scene``)."""
    if (scene.spec.world or DEFAULT) not in BUILT_IN:
        return None
    kind = scene_keys(world_class(scene.spec.world))
    try:
        keys = scene.keys(kind)
    except ValueError as exc:
        return f"its world's keys: {one_line(exc)}"
    missing = next((f"{what} '{agent}'" for what, agent in keys.agents().items() if agent not in scene.others), None)
    if missing is not None:
        return f"the {missing} it names is not in the saved scene"
    return keys.problem(scene.characters)
