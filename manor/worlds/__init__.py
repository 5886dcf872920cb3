"""Worlds: the games Manor runs. ``base`` says what a world is to the engine; the
Wacky Manor (``manor``) is the default one; ``loading`` finds a scene's world."""

from .base import (
    Caller,
    GameOver,
    World,
    chain_hash,
    start_hash,
    undeclared_caller,
    world_marks,
    world_positions,
)
from .loading import BUILT_IN, create_world, world_class
from .manor import ManorWorld

__all__ = [
    "BUILT_IN",
    "Caller",
    "GameOver",
    "ManorWorld",
    "World",
    "chain_hash",
    "create_world",
    "start_hash",
    "undeclared_caller",
    "world_class",
    "world_marks",
    "world_positions",
]
