"""What a world is to the engine: the protocol a game implements, and its hash.

A world is the game. Each tick the engine asks it for the tick's calls (``plan``), fires
them all through the shared gate, and gives it their records in planning order
(``apply``), which it turns into story entries. Nothing else passes between them, which
is what makes a run repeatable and a save replayable: a world is a pure function of its
scene, the generator the engine hands it and the records it is given.

The rules for world authors (docs/worlds.md):

- draw randomness only from the ``rng`` given to ``from_scene`` (never ``random.*``
  module functions, never ``time``, never a set's iteration order of strings, which
  changes from one process to the next);
- ``plan`` changes nothing: the engine may call it more than once a tick (the
  dashboard's forecast does);
- ``apply`` does no I/O and reads no clock: it is plain code over the records. Both are
  ordinary functions, not coroutines, so they cannot await anything;
- ``hash`` changes only in ``apply``, chained over what was applied (``chain_hash``):
  replay compares it tick by tick, so a world that breaks a rule is caught at the first
  tick where it matters (``manor replay --verify``).

A world may also have a ``marks()`` method, which the protocol does not require: agent
id -> a short word the dashboard shows for that agent while it has no call ("dead"),
read after every tick (``world_marks``).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

import attrs
import msgspec

from ..calls import Request
from ..content import Scene
from ..records import CallRecord, StoryEntry

__all__ = ["Caller", "GameOver", "World", "chain_hash", "start_hash", "world_marks"]


@attrs.frozen
class Caller:
    """A kind of caller a world plans calls for.

    Attributes:
        fallback: what a degraded call of this kind leaves in the story instead of its
            text ("idle", "abstains"): never silently nothing.
        player: the players' own calls. The ``batch`` and ``legacy`` policies fire
            these in barriers of k (the other kinds alongside), and ``legacy`` retries
            them when the platform refuses them.
    """

    fallback: str
    player: bool = False


class GameOver(msgspec.Struct, frozen=True, kw_only=True):
    """How a game ended.

    Attributes:
        summary: one line for people ("the village wins on day 3").
        result: the figures a program wants (``manor run --json`` prints them as
            ``world.result``): plain JSON values.
    """

    summary: str
    result: dict[str, Any] = {}


@runtime_checkable
class World(Protocol):
    """A game the tick loop runs.

    Class attributes:
        name: the world's name, recorded in saves.
        version: recorded in saves; change it whenever the same records would give
            another story or hash, so that old saves say so instead of failing to verify.
        callers: every caller kind it plans calls for, in the order reports show them.

    Attributes:
        tick: the last tick applied (0 before the first).
        hash: the hash of everything applied so far (``start_hash``, ``chain_hash``).
    """

    name: ClassVar[str]
    version: ClassVar[str]
    callers: ClassVar[Mapping[str, Caller]]

    tick: int
    hash: str

    @classmethod
    def from_scene(cls, scene: Scene, rng: random.Random) -> World:
        """The world before its first tick. ``rng`` is seeded from the run's seed: the
        only randomness the world may use, in ``from_scene`` or later."""
        ...

    def plan(self) -> list[Request]:
        """The next tick's calls (``tick`` = this tick + 1), in planning order. No call
        may depend on another call of the same tick: they all run at once."""
        ...

    def apply(self, records: Sequence[CallRecord]) -> list[StoryEntry]:
        """Apply the records of the calls ``plan`` returned, in the same order (a
        degraded record leaves its kind's fallback); advance ``tick`` and ``hash``;
        return the tick's story entries."""
        ...

    @property
    def over(self) -> GameOver | None:
        """``None`` while the game goes on; how it ended once it has. ``manor run``
        stops at the end of the tick that ended it."""
        ...


def start_hash(material: object) -> str:
    """A world's hash before its first tick, from what sets it up (msgpack-encodable)."""
    return hashlib.blake2b(msgspec.msgpack.encode(material), digest_size=16).hexdigest()


def chain_hash(previous: str, applied: object) -> str:
    """``previous`` chained with what a tick applied (msgpack-encodable): two runs have
    the same hash after tick N exactly when they applied the same things."""
    return hashlib.blake2b(bytes.fromhex(previous) + msgspec.msgpack.encode(applied), digest_size=16).hexdigest()


def world_marks(world: World) -> Mapping[str, str]:
    """The world's ``marks()`` (agent id -> "dead" and the like), or none if it has no
    such method: what the dashboard shows for an agent while it has no call."""
    marks = getattr(world, "marks", None)
    return marks() if callable(marks) else {}
