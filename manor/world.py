"""The world a tick changes, and its stable hash."""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Sequence
from typing import final

import attrs
import msgspec

from .calls import CallerKind, Request
from .content import Scene
from .records import CallRecord, StoryEntry

__all__ = ["FALLBACKS", "World"]

#: What a degraded call of each caller kind leaves in the story instead of its text.
FALLBACKS: dict[str, str] = {
    CallerKind.CHARACTER: "idle",
    CallerKind.NARRATOR: "narration skipped",
    CallerKind.SUMMARISER: "stale summary",
    CallerKind.SCENE_BEAT: "speechless",
}

#: How many recent lines the narrator and summariser see.
_PROMPT_LINES = 24
#: How much of the story stays in memory (save files keep all of it).
_STORY_KEPT = 2000


@final
@attrs.define(eq=False)
class World:
    """Where the characters are, what was said, the story so far, the latest summary.

    ``hash`` chains every tick's applied outcomes onto the previous hash, so two runs
    have the same hash after tick N exactly when they did the same things.
    """

    scene: Scene
    tick: int = 0
    positions: dict[str, str] = attrs.field(factory=dict)
    last_lines: dict[str, str] = attrs.field(factory=dict)
    summary: str = ""
    narration: str = ""
    story: deque[StoryEntry] = attrs.field(factory=lambda: deque(maxlen=_STORY_KEPT))
    hash: str = ""
    #: Last tick's lines, "Name: text", which the narrator and summariser work from.
    _recent: list[str] = attrs.field(factory=list)

    @classmethod
    def from_scene(cls, scene: Scene) -> World:
        rooms = scene.spec.rooms
        positions = {
            agent_id: agent.start_room if agent.start_room in rooms else rooms[i % len(rooms)]
            for i, (agent_id, agent) in enumerate(scene.characters.items())
        }
        seed = msgspec.msgpack.encode([scene.spec.name, scene.spec.seed, sorted(positions.items())])
        return cls(scene=scene, positions=positions, hash=hashlib.blake2b(seed, digest_size=16).hexdigest())

    # -- prompts ----------------------------------------------------------------------

    def plan(self) -> list[Request]:
        """The next tick's calls, in planning order: characters, narrator, summariser,
        scene beats. No call depends on another call of the same tick."""
        tick = self.tick + 1
        scene = self.scene
        requests = [
            Request(caller=CallerKind.CHARACTER, agent=agent_id, tick=tick, model=agent.model, prompt=self._character_prompt(agent_id))
            for agent_id, agent in scene.characters.items()
        ]
        recent = "\n".join(self._recent[-_PROMPT_LINES:])
        narrator_id, narrator = scene.narrator
        summariser_id, summariser = scene.summariser
        requests.append(Request(caller=CallerKind.NARRATOR, agent=narrator_id, tick=tick, model=narrator.model, prompt=f"Narrate what just happened:\n{recent}"))
        requests.append(Request(caller=CallerKind.SUMMARISER, agent=summariser_id, tick=tick, model=summariser.model, prompt=f"Summarise what was observed:\n{recent}"))
        beats = scene.spec.beats
        for i in range(beats.per_tick):
            turn = (tick - 1) * beats.per_tick + i
            speaker = beats.speakers[turn % len(beats.speakers)]
            prompt = beats.prompts[turn % len(beats.prompts)]
            name = scene.characters[speaker].name
            requests.append(Request(caller=CallerKind.SCENE_BEAT, agent=speaker, tick=tick, model=scene.characters[speaker].model, prompt=f"{prompt} How does {name} react?"))
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
        for record in records:
            speaker = self._speaker(record)
            if not record.ok:
                entries.append(StoryEntry(tick=self.tick, caller=record.caller, agent=record.agent, speaker=speaker,
                                          text="", fallback=FALLBACKS[record.caller], reason=record.reason))
                continue
            entries.append(StoryEntry(tick=self.tick, caller=record.caller, agent=record.agent, speaker=speaker, text=record.text))
            if record.caller == CallerKind.CHARACTER:
                self.last_lines[record.agent] = record.text
                room = self._room_named(record.text)
                if room and room != self.positions[record.agent]:
                    self.positions[record.agent] = room
                    moves.append((record.agent, room))
            elif record.caller == CallerKind.NARRATOR:
                self.narration = record.text
            elif record.caller == CallerKind.SUMMARISER:
                self.summary = record.text
            if record.caller in (CallerKind.CHARACTER, CallerKind.SCENE_BEAT):
                recent.append(f"{speaker}: {record.text}")
        self._recent = recent
        self.story.extend(entries)
        delta = msgspec.msgpack.encode([[(e.caller, e.agent, e.text, e.fallback, e.reason) for e in entries], moves])
        self.hash = hashlib.blake2b(bytes.fromhex(self.hash) + delta, digest_size=16).hexdigest()
        return entries

    def _speaker(self, record: CallRecord) -> str:
        agent = self.scene.characters.get(record.agent)
        if agent is not None:
            return agent.name
        return self.scene.agents[record.agent].name

    def _room_named(self, text: str) -> str | None:
        lowered = text.lower()
        return next((room for room in self.scene.spec.rooms if room in lowered), None)
