"""The Wacky Manor: characters in rooms, a narrator, a summariser and scene beats.

Manor's first world and the default one (a scene with no ``world`` key plays it). Its
keys of a scene file — ``rooms``, ``narrator``, ``summariser``, ``[beats]`` — are its
own (``ManorKeys``), not every scene's.
"""

from __future__ import annotations

import enum
import random
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Annotated, ClassVar, Self, final

import attrs
import msgspec
from msgspec import Meta

from ..calls import Request
from ..content import AgentSpec, Scene, SceneKeys
from ..limits import MAX_BEATS_PER_TICK, AgentId
from ..records import CallRecord, StoryEntry
from .world import Caller, GameOver, chain_hash, start_hash

__all__ = ["CALLERS", "FALLBACKS", "BeatSpec", "CallerKind", "ManorKeys", "ManorWorld"]

NonEmpty = Annotated[str, Meta(min_length=1)]


class CallerKind(enum.StrEnum):
    """The manor world's caller kinds (a record keeps the plain string)."""

    CHARACTER = "character"
    NARRATOR = "narrator"
    SUMMARISER = "summariser"
    SCENE_BEAT = "scene_beat"


_CHARACTER = CallerKind.CHARACTER
_NARRATOR = CallerKind.NARRATOR
_SUMMARISER = CallerKind.SUMMARISER
_SCENE_BEAT = CallerKind.SCENE_BEAT

#: Every caller kind, in the order reports show them, with what a degraded call of it
#: leaves in the story and how it is shown.
CALLERS: dict[str, Caller] = {
    _CHARACTER.value: Caller("idle", player=True, short="char", plural="characters"),
    _NARRATOR.value: Caller("narration skipped", short="narr", plural="narrators", style="narration"),
    _SUMMARISER.value: Caller("stale summary", short="summ", plural="summarisers", style="summary"),
    _SCENE_BEAT.value: Caller("speechless", label="beat", short="beat", plural="beat speakers", style="aside"),
}

#: What a degraded call of each caller kind leaves in the story instead of its text.
FALLBACKS: dict[str, str] = {kind: caller.fallback for kind, caller in CALLERS.items()}

class BeatSpec(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """Scene beats: ``per_tick`` calls a tick, speakers and prompts taking turns."""

    per_tick: Annotated[int, Meta(ge=0, le=MAX_BEATS_PER_TICK)] = 0
    speakers: tuple[AgentId, ...] = ()
    prompts: Annotated[tuple[str, ...], Meta(min_length=1)] = ("Something happens.",)


class ManorKeys(SceneKeys, kw_only=True):
    """The manor's keys of a scene file.

    Attributes:
        rooms: where the characters can be; a character who names one moves there.
        narrator, summariser: their agent ids (``agents/<id>.toml``).
        beats: the ``[beats]`` table.
    """

    rooms: Annotated[tuple[NonEmpty, ...], Meta(min_length=1)]
    narrator: AgentId = "narrator"
    summariser: AgentId = "summariser"
    beats: BeatSpec = BeatSpec()

    def agents(self) -> dict[str, AgentId]:
        return {"narrator": self.narrator, "summariser": self.summariser}

    def recast(self, cast: tuple[AgentId, ...]) -> Self:
        """The beats' speakers: the first of the new cast, as many as there were (one at least)."""
        speakers = cast[: max(1, len(self.beats.speakers))]
        return msgspec.structs.replace(self, beats=msgspec.structs.replace(self.beats, speakers=speakers))

    def places(self) -> tuple[str, ...]:
        return self.rooms

    def start_room(self, index: int) -> str | None:
        return self.rooms[index % len(self.rooms)]

    def problem(self, characters: Mapping[AgentId, AgentSpec]) -> str | None:
        """A beat speaker not in the cast, or beats with no speaker."""
        beats = self.beats
        for speaker in beats.speakers:
            if speaker not in characters:
                return f"beat speaker '{speaker}' is not in the cast"
        if beats.per_tick and not beats.speakers:
            return f"beats.per_tick is {beats.per_tick} but beats.speakers is empty"
        return None


#: How many recent lines the narrator and summariser see.
_PROMPT_LINES = 24
#: How much of the story stays in memory (save files keep all of it).
_STORY_KEPT = 2000


@final
@attrs.define(eq=False)
class ManorWorld:
    """Where the characters are, what was said, the story so far, the latest summary.

    A character who names a room in their line moves there. The game never ends: a run
    lasts as many ticks as it is given.
    """

    name: ClassVar[str] = "manor"
    version: ClassVar[str] = "1"
    callers: ClassVar[Mapping[str, Caller]] = CALLERS
    scene_keys: ClassVar[type[SceneKeys]] = ManorKeys

    scene: Scene
    keys: ManorKeys
    tick: int = 0
    positions: dict[str, str] = attrs.field(factory=dict)
    last_lines: dict[str, str] = attrs.field(factory=dict)
    summary: str = ""
    narration: str = ""
    story: deque[StoryEntry] = attrs.field(factory=lambda: deque(maxlen=_STORY_KEPT))
    hash: str = ""
    #: Last tick's lines, "Name: text", which the narrator and summariser work from.
    _recent: list[str] = attrs.field(factory=list)
    #: Who speaks a call's story entry, by agent id: a character's name, or one of the
    #: others' (a look-up for every call, where a method would be a frame for each).
    _names: dict[str, str] = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        scene = self.scene
        names = {agent_id: agent.name for agent_id, agent in scene.others.items()}
        names.update((agent_id, agent.name) for agent_id, agent in scene.characters.items())
        self._names = names

    @classmethod
    def from_scene(cls, scene: Scene, rng: random.Random) -> ManorWorld:
        """The characters at their start rooms (``rng`` is not drawn from: the manor's
        only chance is in its calls' answers).

        Raises:
            ValueError: the scene's keys are not the manor's (``ManorKeys``).
        """
        keys = scene.keys(ManorKeys)
        problem = keys.problem(scene.characters)
        if problem:
            raise ValueError(problem)
        rooms = keys.rooms
        positions = {
            agent_id: agent.start_room if agent.start_room in rooms else rooms[i % len(rooms)]
            for i, (agent_id, agent) in enumerate(scene.characters.items())
        }
        return cls(scene=scene, keys=keys, positions=positions, hash=start_hash([scene.spec.name, scene.spec.seed, sorted(positions.items())]))

    @property
    def over(self) -> GameOver | None:
        return None

    # -- prompts ----------------------------------------------------------------------

    def plan(self) -> list[Request]:
        """The next tick's calls, in planning order: characters, narrator, summariser,
        scene beats. No call depends on another call of the same tick."""
        tick = self.tick + 1
        scene = self.scene
        requests = [
            Request(caller=_CHARACTER, agent=agent_id, tick=tick, model=agent.model, prompt=self._character_prompt(agent_id))
            for agent_id, agent in scene.characters.items()
        ]
        recent = "\n".join(self._recent[-_PROMPT_LINES:])
        keys = self.keys
        narrator, summariser = scene.others[keys.narrator], scene.others[keys.summariser]
        requests.append(Request(caller=_NARRATOR, agent=keys.narrator, tick=tick, model=narrator.model, prompt=f"Narrate what just happened:\n{recent}"))
        requests.append(Request(caller=_SUMMARISER, agent=keys.summariser, tick=tick, model=summariser.model, prompt=f"Summarise what was observed:\n{recent}"))
        beats = keys.beats
        for i in range(beats.per_tick):
            turn = (tick - 1) * beats.per_tick + i
            speaker = beats.speakers[turn % len(beats.speakers)]
            prompt = beats.prompts[turn % len(beats.prompts)]
            name = scene.characters[speaker].name
            requests.append(Request(caller=_SCENE_BEAT, agent=speaker, tick=tick, model=scene.characters[speaker].model, prompt=f"{prompt} How does {name} react?"))
        return requests

    def _character_prompt(self, agent_id: str) -> str:
        agent = self.scene.characters[agent_id]
        return (
            f"You are {agent.name}. {agent.persona} Voice: {agent.voice}. "
            f"You are in the {self.positions[agent_id]}.\n"
            f"Summary: {self.summary}\nLast narration: {self.narration}\n"
            f"Your last line: {self.last_lines.get(agent_id, '')}\nSay or do one thing."
        )

    # -- applying a tick --------------------------------------------------------------

    def apply(self, records: Sequence[CallRecord]) -> list[StoryEntry]:
        """Apply a tick's outcomes, in planning order, with each degraded call's fallback.

        Returns the tick's story entries; updates the hash.
        """
        self.tick += 1
        entries: list[StoryEntry] = []
        moves: list[tuple[str, str]] = []
        recent: list[str] = []
        names = self._names
        for record in records:
            speaker = names[record.agent]
            if record.outcome != "ok":  # (not the ``ok`` property: a frame for every call)
                entries.append(StoryEntry(tick=self.tick, caller=record.caller, agent=record.agent, speaker=speaker,
                                          text="", fallback=FALLBACKS[record.caller], reason=record.reason))
                continue
            entries.append(StoryEntry(tick=self.tick, caller=record.caller, agent=record.agent, speaker=speaker, text=record.text))
            if record.caller == _CHARACTER:
                self.last_lines[record.agent] = record.text
                room = self._room_named(record.text)
                if room and room != self.positions[record.agent]:
                    self.positions[record.agent] = room
                    moves.append((record.agent, room))
            elif record.caller == _NARRATOR:
                self.narration = record.text
            elif record.caller == _SUMMARISER:
                self.summary = record.text
            if record.caller in (_CHARACTER, _SCENE_BEAT):
                recent.append(f"{speaker}: {record.text}")
        self._recent = recent
        self.story.extend(entries)
        self.hash = chain_hash(self.hash, [[(e.caller, e.agent, e.text, e.fallback, e.reason) for e in entries], moves])
        return entries

    def _room_named(self, text: str) -> str | None:
        lowered = text.lower()
        for room in self.keys.rooms:  # a loop, not next() over a generator: it runs for every line
            if room in lowered:
                return room
        return None
