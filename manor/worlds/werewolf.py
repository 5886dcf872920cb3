"""Werewolf: the social-deduction game, Manor's second world.

Hidden roles — werewolves, seers, doctors, villagers — are dealt from the engine's
generator. Each day of the game is three ticks:

- **night**: every living werewolf names a victim, every living seer a player to
  inspect, every living doctor a player to protect (structured answers, all at once);
  the pack's most named victim dies unless a doctor protected them;
- **talk**: every living player says something to the village;
- **vote**: every living player votes to eliminate another; the most voted player is
  out, and a tie (or no vote at all) eliminates no one.

The narrator tells the phase before, the summariser keeps the public record. The
village wins when no werewolf is left, the werewolves when they are as many as the rest;
a game still undecided when day ``max_days`` ends is a draw.

What a player's prompt holds is what that player may know, and nothing more: their own
role, the public record (deaths — with the dead player's role when ``reveal_roles`` —
speeches, votes, the narration and the summary), the pack if they are a werewolf, what
they saw if they are a seer, whom they protected if they are a doctor. The narrator and
the summariser see only the public record, since everyone reads what they write. The
story is for the audience: it tells everything.
"""

from __future__ import annotations

import functools
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Annotated, ClassVar, Literal, final

import attrs
import msgspec
from msgspec import Meta

from ..answers import InvalidAnswer, decode_answer
from ..calls import Request
from ..content import Scene, SceneKeys
from ..limits import AgentId
from ..records import CallRecord, StoryEntry
from .world import Caller, GameOver, chain_hash, start_hash

__all__ = ["CALLERS", "MAX_PLAYERS", "MODERATOR", "Rules", "WerewolfKeys", "WerewolfWorld"]

Role = Literal["werewolf", "seer", "doctor", "villager"]
Phase = Literal["night", "talk", "vote"]
_PHASES: tuple[Phase, ...] = ("night", "talk", "vote")

#: Every caller kind, in the order of a day, with what a degraded call leaves. The
#: narrator and summariser keep the names they were recorded under (a caller kind is in
#: every record and in the hash); their styles, not their names, make the story tell
#: them as narration and a summary.
CALLERS: dict[str, Caller] = {
    "wolf": Caller("names no victim", player=True),
    "seer": Caller("sees nothing", player=True),
    "doctor": Caller("protects no one", player=True),
    "speech": Caller("says nothing", player=True),
    "vote": Caller("abstains", player=True),
    "narrator": Caller("narration skipped", plural="narrators", style="narration"),
    "summariser": Caller("stale summary", plural="summarisers", style="summary"),
}

#: The caller kind that asks a role its night question.
_NIGHT_CALLERS: dict[str, str] = {"werewolf": "wolf", "seer": "seer", "doctor": "doctor"}
#: The name of the answer's Struct, for the caller kinds whose answer names a player.
_SHAPE_NAMES: dict[str, str] = {"wolf": "Victim", "seer": "Inspect", "doctor": "Protect", "vote": "Vote"}

#: The story entries the world adds of its own (deaths, the end): not a call's.
MODERATOR = "moderator"

#: How much of a spoken line goes into the prompts (the story keeps all of it).
_LINE_CHARS = 400
#: The most players a game takes: every prompt names every living player, so a tick's
#: prompts grow with the square of the cast.
MAX_PLAYERS = 1000


class Rules(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, frozen=True):
    """The scene's ``[rules]`` table. The rest of the cast are villagers.

    Attributes:
        werewolves: how many players are werewolves (fewer than the rest of the cast).
        seers: players who inspect one player a night and learn whether it is a werewolf.
        doctors: players who protect one player (themselves included) a night.
        max_days: the game's bound: undecided when day ``max_days`` ends, it is a draw.
        reveal_roles: whether a dead player's role is announced.
    """

    werewolves: Annotated[int, Meta(ge=1)] = 2
    seers: Annotated[int, Meta(ge=0)] = 1
    doctors: Annotated[int, Meta(ge=0)] = 1
    max_days: Annotated[int, Meta(ge=1, le=1000)] = 6
    reveal_roles: bool = True


class WerewolfKeys(SceneKeys, kw_only=True):
    """Werewolf's keys of a scene file, beside the shared ones and ``[rules]``.

    Attributes:
        narrator, summariser: their agent ids (``agents/<id>.toml``).
        rooms: taken and ignored, so that a scene file written when every scene had to
            name its rooms still loads: the village has no rooms.
    """

    narrator: AgentId = "narrator"
    summariser: AgentId = "summariser"
    rooms: tuple[str, ...] = ()

    def agents(self) -> dict[str, AgentId]:
        return {"narrator": self.narrator, "summariser": self.summariser}


class _RulesTable(msgspec.Struct, frozen=True):
    """The ``[rules]`` table where it is in the scene file: msgspec's errors then name
    its keys as the scene's other errors do (``$.rules.werewolves``)."""

    rules: Rules


class Death(msgspec.Struct, frozen=True):
    """A player out of the game: on which day, and by whom (``werewolves`` or ``vote``)."""

    agent: str
    day: int
    by: Literal["werewolves", "vote"]


@functools.cache
def choice_shape(name: str, targets: tuple[str, ...]) -> type[msgspec.Struct]:
    """The answer of a call that names one of ``targets``: ``{"target": "<name>"}``.
    Cached, so that a tick's calls with the same choices share one Struct."""
    return msgspec.defstruct(name, [("target", Literal[targets])], kw_only=True)  # type: ignore[valid-type]


@final
@attrs.define(eq=False)
class WerewolfWorld:
    """Who is who, who is alive, what the village has seen and said.

    A tick is one phase: ``tick`` 1 is the first night, 2 the first day's talk, 3 its
    vote, 4 the second night, and so on.
    """

    name: ClassVar[str] = "werewolf"
    version: ClassVar[str] = "1"
    callers: ClassVar[Mapping[str, Caller]] = CALLERS
    scene_keys: ClassVar[type[SceneKeys]] = WerewolfKeys

    scene: Scene
    keys: WerewolfKeys
    rules: Rules
    #: Agent id -> role, in cast order.
    roles: dict[str, Role]
    #: Breaks a tie among the wolves' choices; drawn from only in ``apply``.
    rng: random.Random
    hash: str
    tick: int = 0
    deaths: list[Death] = attrs.field(factory=list)
    #: The last talk, in planning order: (speaker, words, or ``None`` for silence).
    talk: list[tuple[str, str | None]] = attrs.field(factory=list)
    #: The last vote: (voter, target, or ``None`` for an abstention).
    ballots: list[tuple[str, str | None]] = attrs.field(factory=list)
    #: Seer -> the players they inspected, by night.
    seen: dict[str, list[tuple[int, str]]] = attrs.field(factory=dict)
    #: Doctor -> whom they protected last.
    protected: dict[str, str] = attrs.field(factory=dict)
    #: Whom the pack went for last night (the wolves know, whatever came of it).
    pack_target: str | None = None
    narration: str = ""
    summary: str = ""
    _over: GameOver | None = None

    @classmethod
    def from_scene(cls, scene: Scene, rng: random.Random) -> WerewolfWorld:
        """Deal the roles with ``rng``.

        Raises:
            ValueError: a bad ``[rules]`` table, more players than ``MAX_PLAYERS``,
                more special roles than players, werewolves not outnumbered, or two
                players of one name.
        """
        keys = scene.keys(WerewolfKeys)
        try:
            rules = msgspec.convert({"rules": scene.spec.rules}, _RulesTable).rules
        except msgspec.ValidationError as exc:
            raise ValueError(str(exc)) from None
        cast = list(scene.characters)
        if len(cast) > MAX_PLAYERS:
            raise ValueError(f"a game takes at most {MAX_PLAYERS} players, not {len(cast)}: every prompt names every living player")
        special = rules.werewolves + rules.seers + rules.doctors
        if special > len(cast):
            raise ValueError(f"[rules] ask for {special} werewolves, seers and doctors in a cast of {len(cast)}")
        if 2 * rules.werewolves >= len(cast):
            raise ValueError(f"[rules] {rules.werewolves} werewolves in a cast of {len(cast)}: the werewolves must be fewer than the rest")
        names = [agent.name for agent in scene.characters.values()]
        twice = next((name for name in names if names.count(name) > 1 or not name), None)
        if twice is not None:
            raise ValueError(f"every player needs a name of their own ({twice!r} is not)")
        dealt = cast.copy()
        rng.shuffle(dealt)
        counts: tuple[tuple[Role, int], ...] = (("werewolf", rules.werewolves), ("seer", rules.seers), ("doctor", rules.doctors))
        deck = [role for role, count in counts for _ in range(count)]
        deck += ["villager"] * (len(cast) - len(deck))
        by_agent = dict(zip(dealt, deck, strict=True))
        roles = {agent: by_agent[agent] for agent in cast}
        material = [scene.spec.name, msgspec.to_builtins(rules), list(roles.items())]
        return cls(scene=scene, keys=keys, rules=rules, roles=roles, rng=rng, hash=start_hash(material))

    # -- state ------------------------------------------------------------------------

    @property
    def over(self) -> GameOver | None:
        return self._over

    def phase(self, tick: int) -> tuple[Phase, int]:
        """Tick ``tick``'s phase and the day it belongs to (a night opens its day)."""
        return _PHASES[(tick - 1) % 3], (tick - 1) // 3 + 1

    def marks(self) -> dict[str, str]:
        """The dead, for the dashboard (``world_marks``): each is shown as "dead"."""
        return {death.agent: "dead" for death in self.deaths}

    def alive(self) -> list[str]:
        """The living players, in cast order."""
        dead = {death.agent for death in self.deaths}
        return [agent for agent in self.roles if agent not in dead]

    def targets(self, caller: str, agent: str) -> tuple[str, ...]:
        """Whom a call of ``caller`` by ``agent`` may name, by agent id: a werewolf any
        living non-werewolf, a doctor any living player, a seer and a voter any other."""
        living = self.alive()
        if caller == "wolf":
            return tuple(other for other in living if self.roles[other] != "werewolf")
        if caller == "doctor":
            return tuple(living)
        return tuple(other for other in living if other != agent)

    def _name(self, agent: str) -> str:
        return self.scene.characters[agent].name

    def _names(self, agents: Sequence[str]) -> str:
        return ", ".join(self._name(agent) for agent in agents) or "no one"

    # -- a tick's calls ---------------------------------------------------------------

    def plan(self) -> list[Request]:
        """The next phase's calls: the players it asks (the living ones, and at night
        only those with a night role), then the narrator and, after the first tick,
        the summariser."""
        tick = self.tick + 1
        phase, day = self.phase(tick)
        public = "\n".join(self._public_record(tick))  # the same in every prompt of the tick
        requests: list[Request] = []
        for agent in self.alive():
            caller = self._player_call(agent, phase)
            if caller is None:
                continue
            shape, names = self.shape(caller, agent) if caller in _SHAPE_NAMES else (None, {})
            prompt = self._player_prompt(agent, caller, day, public, ", ".join(names))
            requests.append(self._request(caller, agent, tick, prompt, shape))
        narrator = self.keys.narrator
        requests.append(self._request("narrator", narrator, tick, (
            f"You narrate a game of Werewolf: {self.scene.spec.name}. In a short paragraph, tell what "
            f"just happened, from these facts alone (never guess anyone's role):\n{public}"
        ), None))  # fmt: skip
        if tick > 1:
            summariser = self.keys.summariser
            requests.append(self._request("summariser", summariser, tick, (
                f"Keep the public record of this game of Werewolf: who died, who was voted out, who "
                f"accused whom. The record so far: {self.summary or '(empty)'}\nWhat happened since:\n{public}"
            ), None))  # fmt: skip
        return requests

    def _player_call(self, agent: str, phase: Phase) -> str | None:
        """The caller kind that asks ``agent`` in ``phase``; ``None``: not asked."""
        if phase == "talk":
            return "speech"
        if phase == "vote":
            return "vote"
        return _NIGHT_CALLERS.get(self.roles[agent])

    def shape(self, caller: str, agent: str) -> tuple[type[msgspec.Struct], dict[str, str]]:
        """The answer of a call that names a player (``_SHAPE_NAMES``), and the agent id
        of each name it may give."""
        names = {self._name(target): target for target in self.targets(caller, agent)}
        return choice_shape(_SHAPE_NAMES[caller], tuple(names)), names

    def _request(self, caller: str, agent: str, tick: int, prompt: str, shape: type[msgspec.Struct] | None) -> Request:
        return Request(caller=caller, agent=agent, tick=tick, model=self.scene.agents[agent].model, prompt=prompt, shape=shape)

    def _player_prompt(self, agent: str, caller: str, day: int, public: str, choices: str) -> str:
        """What ``agent`` is asked: who they are, what they alone know, the public
        record, and the question (naming ``choices`` when the answer names a player)."""
        spec = self.scene.characters[agent]
        lines = [
            f"You are {spec.name}, a player in a game of Werewolf: {self.scene.spec.name}. {spec.persona} Voice: {spec.voice}.",
            f"Your secret role: {self.roles[agent]}.",
            *self._secrets(agent),
            public,
        ]
        lines.append({
            "wolf": f"It is night {day}. Choose the pack's victim among: {choices}.",
            "seer": f"It is night {day}. Choose whom to inspect among: {choices}.",
            "doctor": f"It is night {day}. Choose whom to protect tonight among: {choices}.",
            "speech": f"It is day {day}. Say one or two sentences to the village.",
            "vote": f"It is day {day}. Vote to eliminate one of: {choices}.",
        }[caller])  # fmt: skip
        return "\n".join(lines)

    def _secrets(self, agent: str) -> list[str]:
        """What ``agent`` knows that the village does not."""
        role = self.roles[agent]
        if role == "werewolf":
            pack = [other for other, other_role in self.roles.items() if other_role == "werewolf" and other != agent]
            lines = [f"The other werewolves: {self._names(pack)}."]
            if self.pack_target is not None:
                lines.append(f"Last night the pack went for {self._name(self.pack_target)}.")
            return lines
        if role == "seer":
            seen = [f"night {night}, {self._name(target)} is {'a werewolf' if self.roles[target] == 'werewolf' else 'not a werewolf'}"
                    for night, target in self.seen.get(agent, ())]  # fmt: skip
            return [f"What you have seen: {'; '.join(seen)}."] if seen else []
        if role == "doctor" and agent in self.protected:
            return [f"Last night you protected {self._name(self.protected[agent])}."]
        return []

    def _public_record(self, tick: int) -> list[str]:
        """What everyone knows before tick ``tick``: who is alive and dead, the record
        and narration so far, and what the phase before it brought."""
        rules = self.rules
        lines = [
            f"The game: {len(self.roles)} players: {_count(rules.werewolves, 'werewolf', 'werewolves')}, {_count(rules.seers, 'seer')}, "
            f"{_count(rules.doctors, 'doctor')}, the rest villagers. The village wins when no werewolf is left, the werewolves when "
            f"they are as many as the rest.",
            f"Alive: {self._names(self.alive())}.",
        ]
        if self.deaths:
            lines.append("Dead: " + "; ".join(self._death_line(death) for death in self.deaths) + ".")
        if self.summary:
            lines.append(f"The record so far: {self.summary}")
        if self.narration:
            lines.append(f"Last narration: {self.narration}")
        lines.extend(self._last_phase(tick))
        return lines

    def _death_line(self, death: Death) -> str:
        how = f"killed by the werewolves on night {death.day}" if death.by == "werewolves" else f"voted out on day {death.day}"
        role = f", a {self.roles[death.agent]}" if self.rules.reveal_roles else ""
        return f"{self._name(death.agent)} ({how}{role})"

    def _last_phase(self, tick: int) -> list[str]:
        """The public facts of the phase before tick ``tick``."""
        if tick == 1:
            return ["Night falls on the village for the first time."]
        phase, day = self.phase(tick - 1)
        if phase == "night":
            killed = [death for death in self.deaths if death.day == day and death.by == "werewolves"]
            return [f"Dawn of day {day}: " + (f"{self._death_line(killed[0])}." if killed else "nobody died in the night.")]
        if phase == "talk":
            said = [f"{self._name(agent)}: {words}" if words is not None else f"{self._name(agent)} said nothing." for agent, words in self.talk]
            return [f"What was said on day {day}:", *said]
        votes = [f"{self._name(voter)} → {self._name(target)}" if target else f"{self._name(voter)} abstained" for voter, target in self.ballots]
        out = [death for death in self.deaths if death.day == day and death.by == "vote"]
        result = f"{self._death_line(out[0])}." if out else "no one was voted out."
        return [f"The vote of day {day}: {'; '.join(votes)}. Result: {result}"]

    # -- applying a tick --------------------------------------------------------------

    def apply(self, records: Sequence[CallRecord]) -> list[StoryEntry]:
        """Apply a phase's records (a degraded one leaves its caller kind's fallback),
        then what they decided: the night's death, the vote's elimination, the end."""
        self.tick += 1
        phase, day = self.phase(self.tick)
        entries: list[StoryEntry] = []
        decisions: dict[str, list[tuple[str, str | None]]] = {kind: [] for kind in CALLERS}
        if phase == "talk":
            self.talk = []
        for record in records:
            entry, decision = self._apply_call(record)
            entries.append(entry)
            decisions[record.caller].append((record.agent, decision))
        if phase == "night":
            entries.extend(self._night(day, decisions))
        elif phase == "vote":
            entries.extend(self._vote(day, decisions["vote"]))
        if self._over is None:
            self._over = self._game_over(phase, day)
            if self._over is not None:
                entries.append(self._moderator(self._over.summary))
        self.hash = chain_hash(self.hash, [phase, [(e.caller, e.agent, e.text, e.fallback, e.reason) for e in entries]])
        return entries

    def _apply_call(self, record: CallRecord) -> tuple[StoryEntry, str | None]:
        """A call's story entry, and what it decided: the target it named (an agent
        id), the words said, or ``None``."""
        caller = CALLERS[record.caller]
        speaker = self.scene.agents[record.agent].name
        fallback = StoryEntry(tick=self.tick, caller=record.caller, agent=record.agent, speaker=speaker, text="",
                              fallback=caller.fallback, reason=record.reason)  # fmt: skip
        if not record.ok:
            if record.caller == "narrator":
                self.narration = ""  # last phase's narration would now tell the wrong phase
            if record.caller == "speech":
                self.talk.append((record.agent, None))
            return fallback, None
        said = StoryEntry(tick=self.tick, caller=record.caller, agent=record.agent, speaker=speaker, text=record.text)
        if record.caller == "narrator":
            self.narration = _flat(record.text)
            return said, None
        if record.caller == "summariser":
            self.summary = _flat(record.text)
            return said, None
        if record.caller == "speech":
            words = _flat(record.text) or None
            self.talk.append((record.agent, words))
            return said, words
        target = self._target(record)
        if target is None:
            return msgspec.structs.replace(fallback, reason="invalid_output"), None
        return msgspec.structs.replace(said, text=self._deed(record.caller, target)), target

    def _target(self, record: CallRecord) -> str | None:
        """The player a choice names, by agent id; ``None`` if it names no one it may
        (the engine validates shaped answers, so only a record made elsewhere can)."""
        shape, names = self.shape(record.caller, record.agent)
        try:
            return names[decode_answer(record.text, shape).target]  # type: ignore[attr-defined]
        except InvalidAnswer:
            return None

    def _deed(self, caller: str, target: str) -> str:
        """A choice as the story tells it (the audience knows every role)."""
        name = self._name(target)
        if caller == "wolf":
            return f"wants {name} dead"
        if caller == "seer":
            return f"inspects {name}: {'a werewolf' if self.roles[target] == 'werewolf' else 'not a werewolf'}"
        if caller == "doctor":
            return f"protects {name}"
        return f"votes against {name}"

    def _night(self, day: int, decisions: Mapping[str, list[tuple[str, str | None]]]) -> list[StoryEntry]:
        """The night's outcome: the pack's victim dies unless a doctor protected them."""
        for seer, target in decisions["seer"]:
            if target is not None:
                self.seen.setdefault(seer, []).append((day, target))
        guarded = set()
        for doctor, target in decisions["doctor"]:
            if target is not None:
                self.protected[doctor] = target
                guarded.add(target)
        picks = Counter(target for _, target in decisions["wolf"] if target is not None)
        if not picks:
            self.pack_target = None
            return [self._moderator(f"Night {day}: the werewolves choose no victim; nobody dies.")]
        top = max(picks.values())
        tied = [agent for agent in self.roles if picks[agent] == top]
        victim = tied[0] if len(tied) == 1 else self.rng.choice(tied)
        self.pack_target = victim
        if victim in guarded:
            return [self._moderator(f"Night {day}: the werewolves go for {self._name(victim)}, who was protected; nobody dies.")]
        self.deaths.append(Death(victim, day, "werewolves"))
        return [self._moderator(f"Night {day}: the werewolves kill {self._name(victim)}, a {self.roles[victim]}.")]

    def _vote(self, day: int, ballots: list[tuple[str, str | None]]) -> list[StoryEntry]:
        """The vote's outcome: the most voted player is out; a tie, or no vote, spares all."""
        self.ballots = ballots
        tally = Counter(target for _, target in ballots if target is not None)
        counts = ", ".join(f"{self._name(agent)} {tally[agent]}" for agent in self.roles if tally[agent])
        if not tally:
            return [self._moderator(f"Day {day}: nobody votes; no one is voted out.")]
        top = max(tally.values())
        tied = [agent for agent in self.roles if tally[agent] == top]
        if len(tied) > 1:
            return [self._moderator(f"Day {day}: a tie ({counts}); no one is voted out.")]
        out = tied[0]
        self.deaths.append(Death(out, day, "vote"))
        return [self._moderator(f"Day {day}: {self._name(out)} is voted out ({counts}), a {self.roles[out]}.")]

    def _game_over(self, phase: Phase, day: int) -> GameOver | None:
        """How the game ended after ``phase`` of ``day``, or ``None`` if it goes on."""
        living = self.alive()
        wolves = sum(1 for agent in living if self.roles[agent] == "werewolf")
        if wolves == 0:
            winner, summary = "village", f"The village wins on day {day}: no werewolf is left."
        elif wolves >= len(living) - wolves:
            when = f"night {day}" if phase == "night" else f"day {day}"
            winner, summary = "werewolves", f"The werewolves win on {when}: they are as many as the rest."
        elif phase == "vote" and day >= self.rules.max_days:
            winner = "draw"
            summary = f"A draw: day {day} ended, the last the rules allow, with {wolves} werewolves among {len(living)} alive."
        else:
            return None
        return GameOver(summary=summary, result={
            "winner": winner,
            "days": day,
            "alive": living,
            "roles": dict(self.roles),
            "deaths": [{"agent": d.agent, "role": self.roles[d.agent], "day": d.day, "by": d.by} for d in self.deaths],
        })  # fmt: skip

    def _moderator(self, text: str) -> StoryEntry:
        return StoryEntry(tick=self.tick, caller=MODERATOR, agent="", speaker="Moderator", text=text)


def _flat(text: str) -> str:
    """A model's text as one line of a prompt, at most ``_LINE_CHARS`` long."""
    return " ".join(text.split())[:_LINE_CHARS]


def _count(n: int, word: str, plural: str = "") -> str:
    """``n`` of ``word``, in words: "no seer", "1 seer", "2 seers"."""
    if n == 0:
        return f"no {word}"
    return f"{n} {word}" if n == 1 else f"{n} {plural or word + 's'}"
