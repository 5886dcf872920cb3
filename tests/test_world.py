"""The world: planning a tick, applying its outcomes with fallbacks, the chained hash."""

from __future__ import annotations

import random

import msgspec
import pytest
from scenes_fixture import fixed_scene

from manor.content import AgentSpec
from manor.records import CallRecord
from manor.worlds import load_scene
from manor.worlds.manor import CallerKind
from manor.worlds.manor import ManorWorld as World


def _ok(request, text: str) -> CallRecord:
    return CallRecord(tick=request.tick, ticket=None, caller=request.caller, agent=request.agent,
                      queued_at=0.0, admitted_at=0.0, finished_at=1.0, outcome="ok", text=text)  # fmt: skip


def _degraded(request, reason: str = "gate_timeout") -> CallRecord:
    return CallRecord(tick=request.tick, ticket=None, caller=request.caller, agent=request.agent,
                      queued_at=0.0, admitted_at=None, finished_at=1.0, outcome="degraded", reason=reason)  # fmt: skip


def _apply_all_ok(world: World, texts: dict[str, str] | None = None) -> list:
    texts = texts or {}
    requests = world.plan()
    return world.apply([_ok(r, texts.get(f"{r.caller}:{r.agent}", f"{r.agent} speaks")) for r in requests])


class TestFromScene:
    def test_characters_start_in_their_room_or_are_spread_over_the_rooms(self) -> None:
        scene = fixed_scene((1.0, 1.0, 1.0), rooms=("hall", "cellar"))
        scene = msgspec.structs.replace(
            scene, characters={**scene.characters, "c1": msgspec.structs.replace(scene.characters["c1"], start_room="cellar"),
                               "c2": msgspec.structs.replace(scene.characters["c2"], start_room="moon")}  # fmt: skip
        )
        world = World.from_scene(scene, random.Random(0))
        assert world.positions == {"c0": "hall", "c1": "cellar", "c2": "hall"}
        assert world.tick == 0
        assert len(world.hash) == 32

    def test_the_wacky_manor_starts_everyone_somewhere(self) -> None:
        scene = load_scene("wacky_manor")
        world = World.from_scene(scene, random.Random(0))
        assert set(world.positions) == set(scene.characters)
        assert set(world.positions.values()) <= set(world.keys.rooms)


class TestPlan:
    def test_characters_then_narrator_summariser_and_beats(self) -> None:
        world = World.from_scene(fixed_scene((1.0, 1.0), beats=3, speakers=("c0", "c1")), random.Random(0))
        requests = world.plan()
        assert [(r.caller, r.agent) for r in requests] == [
            (CallerKind.CHARACTER, "c0"), (CallerKind.CHARACTER, "c1"), (CallerKind.NARRATOR, "narrator"),
            (CallerKind.SUMMARISER, "summariser"), (CallerKind.SCENE_BEAT, "c0"), (CallerKind.SCENE_BEAT, "c1"),
            (CallerKind.SCENE_BEAT, "c0"),
        ]  # fmt: skip
        assert {r.tick for r in requests} == {1}
        assert all(r.ticket is None and r.attempt == 0 for r in requests)

    def test_beat_speakers_take_turns_across_ticks(self) -> None:
        world = World.from_scene(fixed_scene((1.0, 1.0, 1.0), beats=2, speakers=("c0", "c1", "c2")), random.Random(0))
        speakers = []
        for _ in range(3):
            speakers.append([r.agent for r in world.plan() if r.caller is CallerKind.SCENE_BEAT])
            _apply_all_ok(world)
        assert speakers == [["c0", "c1"], ["c2", "c0"], ["c1", "c2"]]

    def test_prompts_carry_the_summary_narration_and_last_line(self) -> None:
        world = World.from_scene(fixed_scene((1.0,)), random.Random(0))
        _apply_all_ok(world, {"character:c0": "I walk to the library.", "narrator:narrator": "Thunder.",
                              "summariser:summariser": "So far: a walk."})  # fmt: skip
        [character, narrator, summariser] = world.plan()
        assert "You are in the library." in character.prompt
        assert "Summary: So far: a walk." in character.prompt
        assert "Last narration: Thunder." in character.prompt
        assert "Your last line: I walk to the library." in character.prompt
        assert "C0: I walk to the library." in narrator.prompt
        assert "C0: I walk to the library." in summariser.prompt
        assert character.tick == 2


class TestApply:
    def test_ok_outcomes_move_characters_and_update_the_story(self) -> None:
        world = World.from_scene(fixed_scene((1.0, 1.0), rooms=("hall", "library")), random.Random(0))
        assert world.positions == {"c0": "hall", "c1": "library"}
        story = _apply_all_ok(world, {"character:c0": "Off to the LIBRARY with me.", "character:c1": "I stay put."})
        assert world.tick == 1
        assert world.positions == {"c0": "library", "c1": "library"}
        assert world.last_lines == {"c0": "Off to the LIBRARY with me.", "c1": "I stay put."}
        assert world.narration == "narrator speaks"
        assert world.summary == "summariser speaks"
        assert [(e.speaker, e.text, e.fallback) for e in story] == [
            ("C0", "Off to the LIBRARY with me.", ""), ("C1", "I stay put.", ""),
            ("Narrator", "narrator speaks", ""), ("Summariser", "summariser speaks", ""),
        ]  # fmt: skip
        assert list(world.story) == story

    def test_each_degraded_caller_leaves_its_fallback(self) -> None:
        world = World.from_scene(fixed_scene((1.0,), beats=1, speakers=("c0",)), random.Random(0))
        _apply_all_ok(world)
        requests = world.plan()
        story = world.apply([_degraded(r, reason) for r, reason in zip(requests, ["call_timeout", "cancelled", "provider_error", "platform_rejected"], strict=True)])
        assert [(e.caller, e.fallback, e.reason, e.text) for e in story] == [
            ("character", "idle", "call_timeout", ""), ("narrator", "narration skipped", "cancelled", ""),
            ("summariser", "stale summary", "provider_error", ""), ("scene_beat", "speechless", "platform_rejected", ""),
        ]  # fmt: skip
        assert story[-1].speaker == "C0"
        # Everything the degraded calls would have changed stays as it was.
        assert world.summary == "summariser speaks"
        assert world.narration == "narrator speaks"
        assert world.last_lines == {"c0": "c0 speaks"}
        assert world.tick == 2

class TestHash:
    def test_every_tick_changes_the_hash(self) -> None:
        world = World.from_scene(fixed_scene(), random.Random(0))
        hashes = {world.hash}
        for _ in range(5):
            _apply_all_ok(world)
            hashes.add(world.hash)
        assert len(hashes) == 6

    @pytest.mark.parametrize(
        "change",
        [
            {"character:c3": "something else"},
            {"narrator:narrator": "a different narration"},
        ],
    )
    def test_a_different_outcome_gives_a_different_hash(self, change: dict[str, str]) -> None:
        a, b = World.from_scene(fixed_scene(), random.Random(0)), World.from_scene(fixed_scene(), random.Random(0))
        _apply_all_ok(a)
        _apply_all_ok(b, change)
        assert a.hash != b.hash

    def test_a_degraded_call_changes_the_hash_by_its_reason(self) -> None:
        worlds = [World.from_scene(fixed_scene((1.0,)), random.Random(0)) for _ in range(3)]
        hashes = []
        for world, reason in zip(worlds, [None, "gate_timeout", "cancelled"], strict=True):
            requests = world.plan()
            records = [_ok(r, "same") for r in requests]
            if reason:
                records[0] = _degraded(requests[0], reason)
            world.apply(records)
            hashes.append(world.hash)
        assert len(set(hashes)) == 3

    def test_the_hash_depends_on_the_scene_seed(self) -> None:
        assert World.from_scene(fixed_scene(seed=1), random.Random(0)).hash != World.from_scene(fixed_scene(seed=2), random.Random(0)).hash

def test_agent_specs_are_frozen() -> None:
    with pytest.raises(AttributeError):
        AgentSpec(name="x").name = "y"  # type: ignore[misc]
