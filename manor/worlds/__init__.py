"""Worlds: the games Manor runs. ``world`` says what a world is to the engine; the
Wacky Manor (``manor``) is the default one; ``loading`` finds a scene's world and loads
a scene with the keys its world takes."""

from .world import (
    Caller,
    GameOver,
    World,
    chain_hash,
    start_hash,
    undeclared_caller,
    world_marks,
    world_positions,
)
from .loading import BUILT_IN, create_world, load_scene, scene_keys, scene_problem, world_class
from .manor import ManorWorld

__all__ = [
    "BUILT_IN",
    "Caller",
    "GameOver",
    "ManorWorld",
    "World",
    "chain_hash",
    "create_world",
    "load_scene",
    "scene_keys",
    "scene_problem",
    "start_hash",
    "undeclared_caller",
    "world_class",
    "world_marks",
    "world_positions",
]
