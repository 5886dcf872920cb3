"""Werewolf: the deal, the phases, what a call's answer or fallback does, how the game
ends, what each prompt may know — and the game run by the engine, saved and replayed."""

from __future__ import annotations

import json
import random
import re
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import msgspec
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st
from saves_fixture import record
from scenes_fixture import (
    TickRecorder,
    fixed_scene,
    make_engine,
    run_engine,
    write_scene,
)

from manor.calls import Request
from manor.cli import main
from manor.content import Scene
from manor.errors import REASONS, ContentError
from manor.records import CallRecord, StoryEntry
from manor.tick.driver import TickDriver
from manor.worlds import create_world, load_scene
from manor.worlds.werewolf import CALLERS, MODERATOR
from manor.worlds.werewolf import WerewolfWorld as World

PLAYER_KINDS = {kind for kind, caller in CALLERS.items() if caller.player}
VILLAGE = load_scene("werewolf_village")


def village(players: int = 7, seed: int = 0, **rules: Any) -> Scene:
    """A werewolf scene of ``players`` characters c0.. (named C0..) with ``rules``."""
    scene = fixed_scene((1.0,) * players, seed=seed)
    keys = {"narrator": "narrator", "summariser": "summariser"}  # Werewolf's keys: no rooms, no beats
    return msgspec.structs.replace(scene, spec=msgspec.structs.replace(scene.spec, world="werewolf", rules=rules, world_keys=keys))


def dealt(roles: Mapping[str, str], **rules: Any) -> World:
    """A world with these roles (agent id c0.. -> role), not drawn; the rules count them."""
    dealing = list(roles.values())
    counts = {"werewolves": dealing.count("werewolf"), "seers": dealing.count("seer"), "doctors": dealing.count("doctor")}
    world = World.from_scene(village(len(roles), **counts, **rules), random.Random(0))
    world.roles = dict(roles)
    return world


def ok(request: Request, text: str) -> CallRecord:
    return CallRecord(tick=request.tick, ticket=None, caller=request.caller, agent=request.agent,
                      queued_at=0.0, admitted_at=0.0, finished_at=1.0, outcome="ok", text=text)  # fmt: skip


def degraded(request: Request, reason: str = "call_timeout") -> CallRecord:
    return CallRecord(tick=request.tick, ticket=None, caller=request.caller, agent=request.agent,
                      queued_at=0.0, admitted_at=None, finished_at=1.0, outcome="degraded", reason=reason)  # fmt: skip


def choices(request: Request) -> tuple[str, ...]:
    """The names a shaped request may answer."""
    assert request.shape is not None
    (field,) = msgspec.structs.fields(request.shape)
    return typing.get_args(field.type)


def play(world: World, answers: Mapping[str, str] | None = None, *, failing: Sequence[str] = ()) -> list[StoryEntry]:
    """Apply one tick: ``answers`` maps "caller:agent" to a target's name (shaped calls)
    or the words said; calls of ``failing`` ("caller:agent") degrade; other shaped
    calls name their first choice, other speakers say "hello"."""
    answers = answers or {}
    records = []
    for request in world.plan():
        key = f"{request.caller}:{request.agent}"
        if key in failing:
            records.append(degraded(request))
        elif request.shape is not None:
            records.append(ok(request, json.dumps({"target": answers.get(key, choices(request)[0])})))
        else:
            records.append(ok(request, answers.get(key, "hello")))
    return world.apply(records)


def moderator(entries: Sequence[StoryEntry]) -> list[str]:
    return [entry.text for entry in entries if entry.caller == MODERATOR]


class TestDeal:
    def test_the_counts_the_rules_ask_for_the_rest_villagers(self) -> None:
        world = World.from_scene(village(9, werewolves=2, seers=1, doctors=2), random.Random(3))
        roles = list(world.roles.values())
        assert (roles.count("werewolf"), roles.count("seer"), roles.count("doctor"), roles.count("villager")) == (2, 1, 2, 4)
        assert list(world.roles) == list(village(9).characters)

    def test_the_deal_comes_from_the_generator(self) -> None:
        deals = {tuple(World.from_scene(village(8), random.Random(seed)).roles.values()) for seed in range(20)}
        assert len(deals) > 10
        again = World.from_scene(village(8), random.Random(5))
        assert again.roles == World.from_scene(village(8), random.Random(5)).roles
        assert again.hash == World.from_scene(village(8), random.Random(5)).hash

    def test_the_engine_deals_from_the_run_seed(self) -> None:
        assert len({tuple(create_world(VILLAGE, seed).roles.values()) for seed in range(10)}) > 5
        assert (create_world(VILLAGE, 1).roles, create_world(VILLAGE, 1).hash) == (create_world(VILLAGE, 1).roles, create_world(VILLAGE, 1).hash)

    def test_the_shipped_village(self) -> None:
        """Eight players, two wolves, a seer, a doctor, six days; its own narrator."""
        world = create_world(VILLAGE, VILLAGE.spec.seed)
        assert len(VILLAGE.characters) == 8 and list(VILLAGE.others) == ["village_narrator", "summariser"]
        assert sorted(world.roles.values()).count("werewolf") == 2
        assert world.rules.max_days == 6 and world.rules.reveal_roles

    @pytest.mark.parametrize(
        ("players", "rules", "message"),
        [
            (7, {"werewolves": 0}, "Expected `int` >= 1 - at `$.rules.werewolves`"),
            (7, {"wolves": 2}, "Object contains unknown field `wolves` - at `$.rules`"),
            (7, {"max_days": "six"}, "Expected `int`, got `str` - at `$.rules.max_days`"),
            (7, {"werewolves": 4}, "[rules] 4 werewolves in a cast of 7: the werewolves must be fewer than the rest"),
            (4, {"werewolves": 1, "seers": 2, "doctors": 2}, "[rules] ask for 5 werewolves, seers and doctors in a cast of 4"),
        ],
    )
    def test_a_bad_rule_is_a_value_error(self, players: int, rules: dict[str, Any], message: str) -> None:
        with pytest.raises(ValueError, match=re.escape(message)):
            World.from_scene(village(players, **rules), random.Random(0))

    def test_the_engine_names_the_scene(self) -> None:
        with pytest.raises(ContentError, match=r"^<memory>: world 'werewolf': Expected `int` >= 1 - at `\$\.rules\.werewolves`$"):
            create_world(village(7, werewolves=0), 0)

    def test_a_cast_too_big_for_its_prompts(self) -> None:
        with pytest.raises(ValueError, match="a game takes at most 1000 players, not 1001"):
            World.from_scene(village(1001), random.Random(0))
        assert len(World.from_scene(village(1000), random.Random(0)).plan()) == 2 + 1 + 1 + 1  # two wolves, a seer, a doctor

    def test_two_players_of_one_name(self) -> None:
        scene = village(7)
        same = {**scene.characters, "c1": scene.characters["c0"]}
        with pytest.raises(ValueError, match="every player needs a name of their own"):
            World.from_scene(msgspec.structs.replace(scene, characters=same), random.Random(0))


class TestPlan:
    ROLES = {"c0": "werewolf", "c1": "werewolf", "c2": "seer", "c3": "doctor", "c4": "villager", "c5": "villager", "c6": "villager"}

    def test_the_night_asks_the_night_roles_the_narrator_tells(self) -> None:
        world = dealt(self.ROLES)
        requests = world.plan()
        assert [(r.caller, r.agent) for r in requests] == [
            ("wolf", "c0"), ("wolf", "c1"), ("seer", "c2"), ("doctor", "c3"), ("narrator", "narrator"),
        ]  # fmt: skip
        assert {r.tick for r in requests} == {1}
        assert choices(requests[0]) == ("C2", "C3", "C4", "C5", "C6")  # never a werewolf
        assert choices(requests[2]) == ("C0", "C1", "C3", "C4", "C5", "C6")  # anyone else
        assert choices(requests[3]) == ("C0", "C1", "C2", "C3", "C4", "C5", "C6")  # themselves too

    def test_the_day_asks_every_living_player_then_their_votes(self) -> None:
        world = dealt(self.ROLES)
        play(world, {"wolf:c0": "C4", "wolf:c1": "C4", "doctor:c3": "C5"})
        talk = world.plan()
        assert [(r.caller, r.agent) for r in talk] == [
            *(("speech", agent) for agent in ("c0", "c1", "c2", "c3", "c5", "c6")), ("narrator", "narrator"), ("summariser", "summariser"),
        ]  # fmt: skip
        assert all(r.shape is None for r in talk)
        play(world)
        votes = world.plan()
        assert [r.agent for r in votes if r.caller == "vote"] == ["c0", "c1", "c2", "c3", "c5", "c6"]
        assert choices(votes[0]) == ("C1", "C2", "C3", "C5", "C6")  # the living, not themselves

    def test_shapes_are_shared_by_the_same_choices(self) -> None:
        world = dealt(self.ROLES)
        wolves = [r for r in world.plan() if r.caller == "wolf"]
        assert wolves[0].shape is wolves[1].shape
        assert msgspec.json.schema(wolves[0].shape)["$defs"]["Victim"]["properties"]["target"]["enum"] == ["C2", "C3", "C4", "C5", "C6"]

class TestNight:
    ROLES = TestPlan.ROLES

    def test_the_pack_kills_its_victim(self) -> None:
        world = dealt(self.ROLES)
        entries = play(world, {"wolf:c0": "C5", "wolf:c1": "C5", "doctor:c3": "C4"})
        assert world.alive() == ["c0", "c1", "c2", "c3", "c4", "c6"]
        assert moderator(entries) == ["Night 1: the werewolves kill C5, a villager."]
        assert [e.text for e in entries if e.caller == "wolf"] == ["wants C5 dead", "wants C5 dead"]

    def test_a_doctor_saves_the_victim(self) -> None:
        world = dealt(self.ROLES)
        entries = play(world, {"wolf:c0": "C5", "wolf:c1": "C5", "doctor:c3": "C5"})
        assert len(world.alive()) == 7
        assert moderator(entries) == ["Night 1: the werewolves go for C5, who was protected; nobody dies."]

    def test_a_split_pack_is_settled_by_the_generator(self) -> None:
        victims = set()
        for seed in range(12):
            world = dealt(self.ROLES)
            world.rng = random.Random(seed)
            play(world, {"wolf:c0": "C4", "wolf:c1": "C5", "doctor:c3": "C3"})
            victims.add(world.deaths[0].agent)
        assert victims == {"c4", "c5"}

    def test_a_wolf_without_a_choice_leaves_it_to_the_pack(self) -> None:
        world = dealt(self.ROLES)
        entries = play(world, {"wolf:c1": "C6", "doctor:c3": "C3"}, failing=["wolf:c0"])
        assert [d.agent for d in world.deaths] == ["c6"]
        assert (entries[0].fallback, entries[0].reason, entries[0].text) == ("names no victim", "call_timeout", "")

    def test_no_wolf_with_a_choice_kills_no_one(self) -> None:
        world = dealt(self.ROLES)
        entries = play(world, failing=["wolf:c0", "wolf:c1"])
        assert world.deaths == []
        assert moderator(entries) == ["Night 1: the werewolves choose no victim; nobody dies."]

    def test_an_answer_that_names_no_one_it_may_is_its_fallback(self) -> None:
        """The engine validates shaped answers; a record made elsewhere may not be."""
        world = dealt(self.ROLES)
        requests = world.plan()
        records = [ok(requests[0], '{"target": "C1"}'), ok(requests[1], "C4, obviously"),
                   *(ok(r, json.dumps({"target": choices(r)[0]})) for r in requests[2:4]), ok(requests[4], "Night.")]  # fmt: skip
        entries = world.apply(records)
        assert [(e.fallback, e.reason) for e in entries[:2]] == [("names no victim", "invalid_output")] * 2
        assert world.deaths == []

    def test_the_seer_learns_and_the_doctor_remembers_privately(self) -> None:
        world = dealt(self.ROLES)
        entries = play(world, {"seer:c2": "C1", "doctor:c3": "C6", "wolf:c0": "C4", "wolf:c1": "C4"})
        assert "inspects C1: a werewolf" in [e.text for e in entries]
        prompts = {r.agent: r.prompt for r in world.plan()}
        assert "What you have seen: night 1, C1 is a werewolf." in prompts["c2"]
        assert "Last night you protected C6." in prompts["c3"]
        assert "Last night the pack went for C4." in prompts["c0"]
        assert all("C1 is a werewolf" not in prompts[agent] for agent in prompts if agent != "c2")


class TestDay:
    ROLES = TestPlan.ROLES

    def _to_the_vote(self) -> World:
        world = dealt(self.ROLES)
        play(world, {"wolf:c0": "C6", "wolf:c1": "C6", "doctor:c3": "C6"})  # nobody dies
        play(world, {"speech:c4": "It was C0!"}, failing=["speech:c5"])
        return world

    def test_the_talk_goes_into_the_vote(self) -> None:
        world = self._to_the_vote()
        prompt = next(r.prompt for r in world.plan() if r.agent == "c2")
        assert "C4: It was C0!" in prompt and "C5 said nothing." in prompt

    def test_the_most_voted_is_out_and_their_role_told(self) -> None:
        world = self._to_the_vote()
        entries = play(world, {"vote:c0": "C4", "vote:c2": "C0", "vote:c3": "C0", "vote:c4": "C0", "vote:c5": "C1", "vote:c6": "C0"},
                       failing=["vote:c1"])  # fmt: skip
        assert moderator(entries) == ["Day 1: C0 is voted out (C0 4, C1 1, C4 1), a werewolf."]
        assert [(e.agent, e.fallback) for e in entries if e.fallback] == [("c1", "abstains")]
        assert "C0 (voted out on day 1, a werewolf)" in world.plan()[0].prompt

    def test_a_tie_spares_everyone(self) -> None:
        world = self._to_the_vote()
        entries = play(world, {"vote:c0": "C4", "vote:c1": "C4", "vote:c2": "C0", "vote:c3": "C0"},
                       failing=["vote:c4", "vote:c5", "vote:c6"])  # fmt: skip
        assert moderator(entries) == ["Day 1: a tie (C0 2, C4 2); no one is voted out."]
        assert world.deaths == []

    def test_nobody_voting_spares_everyone(self) -> None:
        world = self._to_the_vote()
        entries = play(world, failing=[f"vote:c{i}" for i in range(7)])
        assert moderator(entries) == ["Day 1: nobody votes; no one is voted out."]

    def test_roles_stay_hidden_at_death_unless_the_rules_reveal_them(self) -> None:
        world = dealt(self.ROLES, reveal_roles=False)
        play(world, {"wolf:c0": "C2", "wolf:c1": "C2", "doctor:c3": "C3"})
        prompts = [r.prompt for r in world.plan()]
        assert all("C2 (killed by the werewolves on night 1)" in prompt for prompt in prompts)
        assert all("seer" not in prompt.split("Alive:")[1] for prompt in prompts)


class TestTheEnd:
    def test_the_village_wins_when_no_werewolf_is_left(self) -> None:
        world = dealt({"c0": "werewolf", "c1": "seer", "c2": "villager", "c3": "villager"})
        play(world, failing=["wolf:c0"])
        play(world)
        entries = play(world, {f"vote:c{i}": "C0" for i in range(1, 4)} | {"vote:c0": "C1"})
        over = world.over
        assert over is not None and over.summary == "The village wins on day 1: no werewolf is left."
        assert over.result["winner"] == "village" and over.result["days"] == 1
        assert over.result["alive"] == ["c1", "c2", "c3"]
        assert over.result["deaths"] == [{"agent": "c0", "role": "werewolf", "day": 1, "by": "vote"}]
        assert moderator(entries)[-1] == over.summary

    def test_the_werewolves_win_when_they_are_as_many_as_the_rest(self) -> None:
        world = dealt({"c0": "werewolf", "c1": "doctor", "c2": "villager"})
        play(world, {"wolf:c0": "C2", "doctor:c1": "C1"})
        assert world.over is not None and world.over.result["winner"] == "werewolves"
        assert world.over.summary == "The werewolves win on night 1: they are as many as the rest."

    def test_an_undecided_game_is_a_draw_when_the_last_day_ends(self) -> None:
        world = dealt({f"c{i}": role for i, role in enumerate(["werewolf", "doctor", "villager", "villager", "villager"])}, max_days=2)
        for _ in range(6):
            assert world.over is None
            play(world, {"wolf:c0": "C1", "doctor:c1": "C1"}, failing=[f"vote:c{i}" for i in range(5)])
        assert world.over is not None and world.tick == 6
        assert world.over.result["winner"] == "draw" and world.over.result["days"] == 2
        assert world.over.summary == "A draw: day 2 ended, the last the rules allow, with 1 werewolves among 5 alive."


# -- properties --------------------------------------------------------------------------


@st.composite
def games(draw: st.DrawFn) -> World:
    """A world of 3–9 players with rules it accepts, dealt from a drawn seed."""
    players = draw(st.integers(3, 9))
    werewolves = draw(st.integers(1, (players - 1) // 2))
    seers = draw(st.integers(0, min(2, players - werewolves)))
    doctors = draw(st.integers(0, min(2, players - werewolves - seers)))
    rules = {"werewolves": werewolves, "seers": seers, "doctors": doctors, "max_days": draw(st.integers(1, 4)),
             "reveal_roles": draw(st.booleans())}  # fmt: skip
    return World.from_scene(village(players, **rules), random.Random(draw(st.integers(0, 2**32))))


def answer(draw: st.DrawFn, request: Request) -> CallRecord:
    """What a call might come back with: an answer, a fallback, or (shaped) nonsense."""
    how = draw(st.sampled_from(["ok", "ok", "ok", "degraded", "nonsense"]))
    if how == "degraded":
        return degraded(request, draw(st.sampled_from(REASONS)))
    if request.shape is None or how == "nonsense":
        return ok(request, draw(st.text(max_size=20)))
    return ok(request, json.dumps({"target": draw(st.sampled_from(choices(request)))}))


def knows(world: World, agent: str | None) -> set[str]:
    """Whose role ``agent`` may know (``None``: the narrator and summariser, whom
    everyone reads): their own, the dead's when revealed, the pack's if a werewolf,
    the inspected ones' if a seer."""
    known = {death.agent for death in world.deaths} if world.rules.reveal_roles else set()
    if agent is None:
        return known
    known.add(agent)
    if world.roles[agent] == "werewolf":
        known |= {other for other, role in world.roles.items() if role == "werewolf"}
    known |= {target for _, target in world.seen.get(agent, ())} if world.roles[agent] == "seer" else set()
    return known


def reshuffled(draw: st.DrawFn, world: World, known: set[str]) -> World:
    """``world`` with the roles of everyone outside ``known`` dealt again among them."""
    unknown = [agent for agent in world.roles if agent not in known]
    roles = dict(world.roles)
    for agent, role in zip(unknown, draw(st.permutations([world.roles[agent] for agent in unknown])), strict=True):
        roles[agent] = role
    return attrs.evolve(world, roles=roles)


class TestProperties:
    @given(games(), st.data())
    def test_a_game_ends_within_its_bound_the_dead_are_silent_and_roles_hidden(self, world: World, data: st.DataObject) -> None:
        bound = 3 * world.rules.max_days
        dead: set[str] = set()
        while world.over is None:
            assert world.tick < bound
            requests = world.plan()
            for request in requests:
                assert request.caller in CALLERS
                if request.caller in PLAYER_KINDS:
                    assert request.agent not in dead, "the dead are never asked"
                # A prompt is the same whoever holds the roles its reader cannot know.
                reader = request.agent if request.caller in PLAYER_KINDS else None
                twin = reshuffled(data.draw, world, knows(world, reader))
                (twin_request,) = [r for r in twin.plan() if (r.caller, r.agent) == (request.caller, request.agent)]
                assert (twin_request.prompt, twin_request.shape) == (request.prompt, request.shape)
            entries = world.apply([answer(data.draw, request) for request in requests])
            assert not any(entry.agent in dead for entry in entries if entry.caller in PLAYER_KINDS), "the dead never speak or vote"
            dead = {death.agent for death in world.deaths}
            assert dead.isdisjoint(world.alive())
        result = world.over.result
        assert world.tick <= bound
        wolves = [agent for agent in world.alive() if world.roles[agent] == "werewolf"]
        if result["winner"] == "village":
            assert not wolves
        elif result["winner"] == "werewolves":
            assert 0 < len(wolves) >= len(world.alive()) - len(wolves)
        else:
            assert result["winner"] == "draw" and world.tick == bound
        assert result["alive"] == world.alive()


# -- run by the engine -------------------------------------------------------------------


class TestRuns:
    @pytest.mark.parametrize("policy", ["pipeline", "batch", "legacy"])
    @pytest.mark.parametrize("seed", [1, 2, 3])
    def test_games_run_to_their_end(self, policy: str, seed: int) -> None:
        engine = make_engine(VILLAGE, run_policy=policy, run_seed=seed)
        ticks = run_engine(engine, 100)
        world = engine.loop.world
        assert world.over is not None and len(ticks) == world.tick <= 18
        assert ticks[-1].world_hash == world.hash
        died = {d.agent: (d.day - 1) * 3 + (1 if d.by == "werewolves" else 3) for d in world.deaths}  # at the end of that tick
        for tick in ticks:
            assert all(died.get(c.agent, tick.tick) >= tick.tick for c in tick.calls if c.caller in PLAYER_KINDS)

    def test_failing_calls_leave_their_fallbacks_and_the_game_still_ends(self) -> None:
        recorder = TickRecorder()
        engine = make_engine(VILLAGE, sim_error_rate=0.3, instruments=[recorder])
        run_engine(engine, 100)
        assert engine.loop.world.over is not None
        story = [entry for entries in recorder.stories for entry in entries]
        fallbacks = {(entry.caller, entry.fallback) for entry in story if entry.reason == "provider_error"}
        assert {(kind, caller.fallback) for kind, caller in CALLERS.items()} >= fallbacks
        assert {kind for kind, _ in fallbacks} >= {"speech", "vote"}

    @pytest.mark.trio
    async def test_the_dashboards_driver_stops_when_the_game_ends(self, autojump_clock: trio.testing.MockClock) -> None:
        engine = make_engine(VILLAGE)
        driver = TickDriver(engine.loop)
        await driver.run()  # no tick budget: the game's end ends it
        assert engine.loop.world.over is not None
        assert (driver.statistics().state, driver.statistics().ticks) == ("finished", engine.loop.world.tick)

    def test_the_same_seed_plays_the_same_game_under_every_policy(self) -> None:
        """No call degrades on the simulator, so the policy changes only the timing."""
        hashes = set()
        for policy in ("pipeline", "batch", "legacy"):
            engine = make_engine(VILLAGE, run_policy=policy, run_seed=4)
            run_engine(engine, 100)
            hashes.add(engine.loop.world.hash)
        assert len(hashes) == 1

    def test_both_sides_win_some_games(self) -> None:
        winners = set()
        for seed in range(12):
            engine = make_engine(VILLAGE, run_seed=seed)
            run_engine(engine, 100)
            assert engine.loop.world.over is not None
            winners.add(engine.loop.world.over.result["winner"])
        assert {"village", "werewolves"} <= winners


@pytest.mark.usefixtures("isolated")
class TestCommands:
    def test_run_json_has_the_game(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["run", "--scene", "werewolf_village", "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        world = summary["world"]
        assert (world["name"], world["over"]) == ("werewolf", True)
        assert world["result"]["winner"] in ("village", "werewolves", "draw")
        assert world["result"]["days"] == (summary["ticks"] - 1) // 3 + 1
        assert list(summary["degradations"]) == list(CALLERS)

    def test_run_table_says_how_the_game_ended(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["run", "--scene", "werewolf_village"]) == 0
        out = capsys.readouterr().out
        assert "game over after " in out and "┃ wolf ┃ seer ┃ doctor ┃ speech ┃ vote ┃" in out

    def test_a_bad_rule_is_one_line(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        text = (Path(VILLAGE.path).read_text(encoding="utf-8")).replace("werewolves = 2 ", "werewolves = 0 ")
        path = write_scene(tmp_path, text, "bad_village")
        assert main(["run", "--scene", str(path)]) == 1
        out, err = capsys.readouterr()
        assert out == ""
        assert err == f"manor: error: {path}: world 'werewolf': Expected `int` >= 1 - at `$.rules.werewolves`\n"

    @pytest.mark.parametrize("policy", ["pipeline", "legacy"])
    def test_saved_replayed_verified_traced_and_told(self, policy: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        save = tmp_path / "village.msav"
        summary, engine = record(save, run__scene="werewolf_village", run__policy=policy, run__ticks=100)
        assert summary["world"]["over"]
        assert main(["replay", str(save), "--verify", "--json"]) == 0
        assert json.loads(capsys.readouterr().out) == {"ticks": summary["ticks"], "verified": True, "first_mismatch": None, "world_hash": engine.loop.world.hash}
        assert main(["replay", str(save), "--policy", "batch", "--json"]) == 0
        what_if = json.loads(capsys.readouterr().out)
        assert what_if["recorded"]["world"] == summary["world"]
        assert what_if["world"]["over"]
        assert main(["trace", str(save), "-o", str(tmp_path / "t.json")]) == 0
        trace = json.loads((tmp_path / "t.json").read_text())
        names = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
        assert names == {*(kind for kind in CALLERS), "gate"}
        assert main(["story", str(save), "--format", "txt", "-o", str(tmp_path / "s.txt")]) == 0
        story = (tmp_path / "s.txt").read_text()
        assert summary["world"]["summary"] in story and "Moderator: Night 1:" in story
