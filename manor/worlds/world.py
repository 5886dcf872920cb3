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

- every call ``plan`` returns is of a caller kind the world declares in ``callers``
  (``undeclared_caller`` names the first that is not; the tick loop refuses it).

What a world says about its caller kinds — fallback, labels, plural, how the story tells
them — is its ``callers`` (``manor.callers.Caller``): the engine knows no kind by name.
``marks()`` has a default (no marks); a world that is not a subclass of ``World`` (the
README's example is a plain class) gets the default through ``world_marks``.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

import msgspec

from ..callers import Caller
from ..calls import Request
from ..content import Scene
from ..errors import one_line
from ..records import CallRecord, StoryEntry

__all__ = ["Caller", "GameOver", "World", "chain_hash", "start_hash", "undeclared_caller", "world_marks", "world_positions"]


class GameOver(msgspec.Struct, frozen=True, kw_only=True):
    """How a game ended, as a world's ``over`` says once it has::

        GameOver(summary="the village wins on day 3", result={"winner": "village", "day": 3})

    Attributes:
        summary: one line for people ("the village wins on day 3").
        result: the figures a program wants (``manor run --json`` prints them as
            ``world.result``): plain JSON values.
    """

    summary: str
    result: dict[str, Any] = {}


@runtime_checkable
class World(Protocol):
    """A game the tick loop runs: it plans each tick's calls, applies their records and
    chains a hash, and says when the game is over. A world is a pure function of its
    scene, the seeded ``rng`` and the records it is given (so saves replay). In short::

        class Guessing:
            name, version = "guessing", "1"
            callers = {"guesser": Caller("passes", player=True)}

            @classmethod
            def from_scene(cls, scene, rng): ...            # the world before tick 1
            def plan(self) -> list[Request]: ...            # the next tick's calls
            def apply(self, records) -> list[StoryEntry]: ...  # their outcomes; tick and hash move on
            over: GameOver | None                           # a property: None while it goes on

    (docs/worlds.md writes one whole.)

    Class attributes:
        name: the world's name, recorded in saves.
        version: recorded in saves; change it whenever the same records would give
            another story or hash, so that old saves say so instead of failing to verify.
        callers: every caller kind it plans calls for, in the order reports show them,
            each with its fallback, labels and story style (``manor.callers.Caller``).
        scene_keys (optional): the keys of a scene file it takes besides the shared
            ones, a ``manor.content.SceneKeys`` Struct; a world without one takes the
            manor's (``manor.worlds.loading.scene_keys``).

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

    def marks(self) -> Mapping[str, str]:
        """Agent id -> a short word the dashboard shows for that agent while it has no
        call ("dead"), read after every tick. The default: no marks. Optional: read
        through ``world_marks``, which gives the default to a world that does not
        subclass ``World``."""
        return {}


def start_hash(material: object) -> str:
    """A world's hash before its first tick, from what sets it up (msgpack-encodable)."""
    return hashlib.blake2b(msgspec.msgpack.encode(material), digest_size=16).hexdigest()


def chain_hash(previous: str, applied: object) -> str:
    """``previous`` chained with what a tick applied (msgpack-encodable): two runs have
    the same hash after tick N exactly when they applied the same things."""
    return hashlib.blake2b(bytes.fromhex(previous) + msgspec.msgpack.encode(applied), digest_size=16).hexdigest()


def world_marks(world: World) -> Mapping[str, str]:
    """The world's ``marks()`` (agent id -> "dead" and the like), or ``World.marks``'s
    default (none) for a world that does not subclass ``World`` and has no such method:
    what the dashboard shows for an agent while it has no call."""
    marks = getattr(world, "marks", None)
    return marks() if callable(marks) else {}


def world_positions(world: World) -> dict[str, str]:
    """Where each agent stands (agent id -> a place), for a save's header: a world's
    ``positions`` mapping if it keeps one (the manor's rooms), else none. Informative
    only: nothing replays from it."""
    positions = getattr(world, "positions", None)
    if not isinstance(positions, Mapping):
        return {}
    return {str(agent): str(place) for agent, place in positions.items()}


def undeclared_caller(world: World, requests: Sequence[Request]) -> str | None:
    """One line naming the world and the first caller kind among ``requests`` its
    ``callers`` does not declare, or ``None`` when it declares them all."""
    callers = world.callers
    for request in requests:
        if request.caller not in callers:
            declared = ", ".join(callers) or "none"
            return (f"world '{one_line(world.name)}' planned a call of caller kind '{one_line(request.caller)}', which its callers do not "
                    f"declare (declared: {declared})")  # fmt: skip
    return None
