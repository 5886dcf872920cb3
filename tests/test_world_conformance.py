"""What every world must do, checked of every world: the two Manor ships and a user's.

As ``test_gate_redis.py`` runs the gate's tests over both gates, these run the world
protocol's rules ("Writing a world") over the manor, Werewolf and ``Tally`` — a small
world written here the way the README teaches (a plain class, no base): planning
changes nothing; the same records give the same hash and story; times never enter the
hash; a degraded record leaves its kind's fallback; ``over`` ends the run; a save of it
replays and verifies.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import msgspec
import pytest
from scenes_fixture import make_engine, run_engine

from manor import (
    Caller,
    GameOver,
    Request,
    SceneKeys,
    StoryEntry,
    chain_hash,
    decode_answer,
    start_hash,
)
from manor.answers import draw_answer
from manor.cli import main
from manor.content import Scene
from manor.records import CallRecord
from manor.worlds import World, create_world, load_scene, world_marks


class Vote(msgspec.Struct):
    choice: Literal["tea", "coffee"]


class TallyKeys(SceneKeys, kw_only=True):
    """The tally's own key of a scene file: who hosts (an agent id)."""

    host: str = "narrator"

    def agents(self):
        return {"host": self.host}


class Tally:
    """The players vote tea or coffee each tick, the host sums up; over once a tick's
    votes are all alike or after five ticks. A user's world, as the README writes one."""

    name, version = "tally", "1"
    scene_keys = TallyKeys
    callers = {
        "vote": Caller(fallback="abstains", player=True, plural="voters"),
        "host": Caller(fallback="is silent", style="narration"),
    }

    def __init__(self, players, host):
        self.players, self.host = players, host
        self.tick, self.hash, self.done = 0, start_hash([players, host]), None

    @classmethod
    def from_scene(cls, scene, rng):
        return cls(list(scene.characters), scene.keys(TallyKeys).host)

    def plan(self):
        votes = [Request(caller="vote", agent=p, tick=self.tick + 1, prompt="Tea or coffee?", shape=Vote) for p in self.players]
        return [*votes, Request(caller="host", agent=self.host, tick=self.tick + 1, prompt="Sum up the votes.")]

    def apply(self, records):
        self.tick += 1
        story, votes = [], []
        for r in records:
            entry = StoryEntry(tick=self.tick, caller=r.caller, agent=r.agent, speaker=r.agent, text="")
            if r.outcome != "ok":
                story.append(msgspec.structs.replace(entry, fallback=self.callers[r.caller].fallback, reason=r.reason))
            elif r.caller == "vote":
                votes.append(decode_answer(r.text, Vote).choice)
                story.append(msgspec.structs.replace(entry, text=votes[-1]))
            else:
                story.append(msgspec.structs.replace(entry, text=r.text))
        self.hash = chain_hash(self.hash, [(e.caller, e.agent, e.text, e.fallback, e.reason) for e in story])
        if self.done is None and ((votes and len(set(votes)) == 1 and len(votes) == len(self.players)) or self.tick >= 5):
            self.done = GameOver(summary=f"over on tick {self.tick}", result={"tick": self.tick})
        return story

    @property
    def over(self):
        return self.done


_TALLY_SCENE = f"""\
name = "Tea or coffee"
world = "{__name__}:Tally"
seed = 3
cast = ["hobbes", "cook", "maid"]
"""


def _tally_scene(folder: Path) -> str:
    path = folder / "tally.toml"
    path.write_text(_TALLY_SCENE, encoding="utf-8")
    return str(path)


#: Every world, by the scene a user names to play it (a bundled name, or a file).
SCENES: dict[str, Callable[[Path], str]] = {
    "manor": lambda folder: "wacky_manor",
    "werewolf": lambda folder: "werewolf_village",
    "user": _tally_scene,
}


@pytest.fixture(params=list(SCENES))
def scene_name(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return SCENES[request.param](tmp_path)


@pytest.fixture
def scene(scene_name: str) -> Scene:
    return load_scene(scene_name)


def _answers(world: World, scene: Scene, tick_salt: str = "") -> Callable[[Request], CallRecord]:
    """Records answering every request ok, the same for the same request: a shaped one
    with valid JSON of its shape, drawn as the simulator draws."""
    words = tuple(agent.name for agent in scene.characters.values())

    def record(request: Request) -> CallRecord:
        rng = random.Random(f"{tick_salt}{request.tick}:{request.caller}:{request.agent}")
        text = draw_answer(request.shape, rng, words) if request.shape is not None else f"{tick_salt}{request.agent} on tick {request.tick}"
        return CallRecord(tick=request.tick, ticket=None, caller=request.caller, agent=request.agent, queued_at=0.0,
                          admitted_at=0.0, finished_at=1.0, outcome="ok", text=text)  # fmt: skip

    return record


def _play(world: World, records: Callable[[Request], CallRecord], ticks: int) -> list[tuple[str, list[StoryEntry]]]:
    """Apply ``ticks`` ticks (fewer if the game ends) of ``records``; the hash and story after each."""
    out = []
    for _ in range(ticks):
        if world.over is not None:
            break
        story = world.apply([records(request) for request in world.plan()])
        out.append((world.hash, list(story)))
    return out


class TestDeterminism:
    def test_planning_changes_nothing(self, scene: Scene) -> None:
        """Planning twice gives the same calls and leaves tick and hash; a world planned
        three times a tick (as the dashboard's forecast may) plays as one planned once."""
        once, thrice = create_world(scene, 1), create_world(scene, 1)
        before = (thrice.tick, thrice.hash)
        assert thrice.plan() == thrice.plan()
        assert (thrice.tick, thrice.hash) == before
        answer = _answers(once, scene)
        for _ in range(6):
            if once.over is not None:
                break
            thrice.plan(), thrice.plan()
            planned = once.plan()
            assert thrice.plan() == planned
            once.apply([answer(r) for r in planned])
            thrice.apply([answer(r) for r in planned])
            assert (once.tick, once.hash, once.over) == (thrice.tick, thrice.hash, thrice.over)

    def test_the_same_records_give_the_same_hash_and_story(self, scene: Scene) -> None:
        a, b = create_world(scene, 4), create_world(scene, 4)
        assert a.hash == b.hash
        assert _play(a, _answers(a, scene), 6) == _play(b, _answers(b, scene), 6)

    def test_other_records_give_another_hash(self, scene: Scene) -> None:
        """The hash says what was applied: another answer somewhere changes it."""
        a, b = create_world(scene, 4), create_world(scene, 4)
        plain, other = _answers(a, scene), _answers(b, scene, tick_salt="other")
        assert [h for h, _ in _play(a, plain, 3)] != [h for h, _ in _play(b, other, 3)]

    def test_times_never_enter_the_hash(self, scene: Scene) -> None:
        """The same outcomes at other times, tickets and costs (another policy, gate
        or machine) give the same world."""
        a, b = create_world(scene, 4), create_world(scene, 4)
        answer = _answers(a, scene)

        def late(request: Request) -> CallRecord:
            return msgspec.structs.replace(answer(request), ticket=7, queued_at=3.0, admitted_at=5.5, finished_at=9.25,
                                           input_tokens=11, output_tokens=13, cost=0.5)  # fmt: skip

        assert _play(a, answer, 6) == _play(b, late, 6)


class TestDegradation:
    @pytest.mark.parametrize("reason", ["gate_timeout", "provider_error", "invalid_output"])
    def test_a_degraded_record_leaves_its_kinds_fallback(self, scene: Scene, reason: str) -> None:
        """Every call degraded, tick after tick: each leaves one story entry, of its
        kind, with the fallback its world declares and the reason; every declared
        kind is met."""
        world = create_world(scene, 2)
        met: set[str] = set()
        for _ in range(9):
            if world.over is not None:
                break
            requests = world.plan()
            records = [
                CallRecord(tick=r.tick, ticket=None, caller=r.caller, agent=r.agent, queued_at=0.0, admitted_at=None,
                           finished_at=1.0, outcome="degraded", reason=reason, error="it failed")  # fmt: skip
                for r in requests
            ]
            story = world.apply(records)
            calls = [entry for entry in story if entry.caller in world.callers]  # a world may add entries of its own
            assert [(e.caller, e.agent) for e in calls] == [(r.caller, r.agent) for r in requests]
            assert all((e.fallback, e.reason, e.text) == (world.callers[e.caller].fallback, reason, "") for e in calls)
            met.update(e.caller for e in calls)
        assert met == set(world.callers)

    def test_every_kind_has_a_fallback_of_its_own(self, scene: Scene) -> None:
        callers = create_world(scene, 0).callers
        fallbacks = [caller.fallback for caller in callers.values()]
        assert all(fallbacks) and len(set(fallbacks)) == len(fallbacks)


class TestRuns:
    def test_over_ends_the_run(self, scene: Scene) -> None:
        """The run stops at the end of the tick whose records ended the game; a game that
        never ends runs every tick it is given."""
        engine = make_engine(scene, run_seed=5)
        ticks = run_engine(engine, 25)
        world = engine.loop.world
        again = create_world(scene, 5)
        overs = []
        for record in ticks:
            again.apply(record.calls)
            overs.append(again.over is not None)
        assert again.hash == world.hash
        if world.over is None:
            assert len(ticks) == 25 and not any(overs)
        else:
            assert overs == [False] * (len(ticks) - 1) + [True]

    def test_a_save_replays_and_verifies(self, scene_name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        save = tmp_path / "run.msav"
        assert main(["run", "--scene", scene_name, "--ticks", "6", "--save", str(save)]) == 0
        capsys.readouterr()
        assert main(["replay", str(save), "--verify", "--json"]) == 0
        verdict = json.loads(capsys.readouterr().out)
        assert verdict["verified"] is True and verdict["first_mismatch"] is None

    def test_marks_default_to_none(self, scene: Scene) -> None:
        """``marks()`` is optional: a world without one (Tally, the manor) marks no one."""
        world = create_world(scene, 0)
        assert all(isinstance(agent, str) and isinstance(mark, str) for agent, mark in world_marks(world).items())
        if not hasattr(world, "marks"):
            assert world_marks(world) == {}


# -- a world that breaks the protocol -----------------------------------------------------


class Stray(Tally):
    """Plans a kind of caller it never declared."""

    name = "stray"

    def plan(self) -> list[Request]:
        return [*super().plan(), Request(caller="heckler", agent=self.host, tick=self.tick + 1, prompt="Boo.")]


def test_a_call_of_a_kind_never_declared_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The world and the kind are named, once, and the run fails: its calls would be
    counted, shown and given a fallback by a kind nobody declared."""
    scene = tmp_path / "stray.toml"
    scene.write_text(_TALLY_SCENE.replace(":Tally", ":Stray"), encoding="utf-8")
    assert main(["run", "--scene", str(scene), "--ticks", "2"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "world 'stray'" in err and "'heckler'" in err and "Traceback" not in err


def test_the_marks_default_is_a_member_of_world() -> None:
    class Marked(World):  # a world that subclasses the protocol inherits its default
        pass

    assert Marked.marks(Marked()) == {}  # type: ignore[abstract]
