"""Content: agent and scene TOML files, how they are found, and what a bad one says."""

from __future__ import annotations

from pathlib import Path

import pytest
from scenes_fixture import write_agent, write_scene

from manor.content import bundled_scenes, content_dir, generated_cast
from manor.errors import ContentError
from manor.worlds import load_scene
from manor.worlds.manor import ManorKeys
from manor.worlds.werewolf import WerewolfKeys

SMALL_SCENE = """\
name = "Small"
seed = 3
platform_limit = 2
rooms = ["hall", "cellar"]
cast = ["hobbes", "alice"]

[beats]
per_tick = 1
speakers = ["alice"]
"""

ALICE = """\
name = "Alice"
persona = "A visitor."
start_room = "cellar"

[sim]
latency_s = 0.5
"""


class TestBundled:
    def test_the_bundled_scenes(self) -> None:
        assert {"wacky_manor", "tea_party"} <= set(bundled_scenes())

    def test_the_wacky_manor(self) -> None:
        """Ten characters, a narrator, a summariser and two beats a tick on six sessions."""
        scene = load_scene("wacky_manor")
        keys = scene.keys(ManorKeys)
        assert len(scene.characters) == 10
        assert {agent_id: agent.role for agent_id, agent in scene.others.items()} == {"narrator": "narrator", "summariser": "summariser"}
        assert (keys.narrator, keys.summariser) == ("narrator", "summariser")
        assert keys.beats.per_tick == 2
        assert scene.spec.platform_limit == 6
        assert all(agent.role == "character" for agent in scene.characters.values())
        assert list(scene.characters) == list(scene.spec.cast)
        assert set(keys.beats.speakers) <= set(scene.characters)

    def test_every_bundled_agent_file_loads(self) -> None:
        """Every agent file is some bundled scene's, and within a scene every name is
        its own (the narrators of two scenes may share one)."""
        scenes = [load_scene(name) for name in bundled_scenes()]
        files = {path.stem for path in content_dir("agents").glob("*.toml")}
        assert files == {agent_id for scene in scenes for agent_id in scene.agents}
        for scene in scenes:
            assert len({agent.name for agent in scene.agents.values()}) == len(scene.agents)

    def test_every_bundled_scene_loads(self) -> None:
        for name in bundled_scenes():
            scene = load_scene(name)
            assert scene.characters
            assert Path(scene.path).is_file()

    def test_a_scene_by_path(self) -> None:
        path = content_dir("scenes") / "tea_party.toml"
        assert load_scene(str(path)).spec == load_scene("tea_party").spec


class TestLookup:
    def test_agents_next_to_the_scene_come_first_then_the_bundled_ones(self, tmp_path: Path) -> None:
        path = write_scene(tmp_path, SMALL_SCENE, agents={"alice": ALICE, "hobbes": 'name = "Not Hobbes"\n'})
        scene = load_scene(str(path))
        assert scene.characters["alice"].name == "Alice"
        assert scene.characters["alice"].sim.latency_s == 0.5
        assert scene.characters["hobbes"].name == "Not Hobbes"
        assert scene.others["narrator"].name == "Narrator"  # bundled

    def test_generated_cast_replaces_the_scene_cast(self) -> None:
        scene = load_scene("wacky_manor", agents=25)
        beats = scene.keys(ManorKeys).beats
        assert len(scene.characters) == 25
        assert scene.spec.cast == tuple(scene.characters)
        assert set(beats.speakers) <= set(scene.characters)
        assert len(beats.speakers) == 6

    def test_generated_cast_is_the_same_for_the_same_seed(self) -> None:
        scene = load_scene("wacky_manor")
        keys = scene.keys(ManorKeys)
        first, second = generated_cast(12, scene.spec.seed, keys), generated_cast(12, scene.spec.seed, keys)
        assert first == second
        assert list(first) == [f"guest_{i:02d}" for i in range(1, 13)]
        assert all(0.8 <= agent.sim.latency_s <= 2.4 for agent in first.values())
        assert [agent.start_room for agent in first.values()] == [keys.rooms[i % len(keys.rooms)] for i in range(1, 13)]
        tea = load_scene("tea_party")
        other = generated_cast(12, tea.spec.seed, tea.keys(ManorKeys))
        assert [a.sim.latency_s for a in other.values()] != [a.sim.latency_s for a in first.values()]


class TestBadContent:
    """One message naming the file and what is wrong, as a ContentError."""

    def test_an_unknown_scene_name_lists_the_bundled_ones(self) -> None:
        with pytest.raises(ContentError, match=r"unknown scene 'nope' \(bundled scenes: .*wacky_manor"):
            load_scene("nope")

    def test_a_missing_scene_file(self, tmp_path: Path) -> None:
        missing = tmp_path / "missing.toml"
        with pytest.raises(ContentError, match=f"{missing}: no such scene file"):
            load_scene(str(missing))

    def test_malformed_toml_names_the_file_and_line(self, tmp_path: Path) -> None:
        path = write_scene(tmp_path, 'name = "x"\nrooms = = ["hall"]\ncast = ["hobbes"]\n')
        with pytest.raises(ContentError, match=rf"{path}: malformed TOML: .*at line 2, column 9"):
            load_scene(str(path))

    def test_an_unknown_key_in_a_scene(self, tmp_path: Path) -> None:
        path = write_scene(tmp_path, SMALL_SCENE.replace("seed = 3", "seed = 3\ncolour = 'red'"), agents={"alice": ALICE})
        with pytest.raises(ContentError, match=rf"{path}: .*unknown field `colour`"):
            load_scene(str(path))

    def test_an_unknown_key_in_a_scene_table_names_the_table(self, tmp_path: Path) -> None:
        path = write_scene(tmp_path, SMALL_SCENE + "tempo = 3\n", agents={"alice": ALICE})
        with pytest.raises(ContentError, match=r"unknown field `tempo` - at `\$.beats`"):
            load_scene(str(path))

    def test_an_unknown_key_in_an_agent_file_names_the_agent_file(self, tmp_path: Path) -> None:
        path = write_scene(tmp_path, SMALL_SCENE, agents={"alice": ALICE + "hat = 'top'\n"})
        agent = path.parent.parent / "agents" / "alice.toml"
        with pytest.raises(ContentError, match=rf"{agent}: .*unknown field `hat` - at `\$.sim`"):
            load_scene(str(path))

    def test_a_wrong_type(self, tmp_path: Path) -> None:
        path = write_scene(tmp_path, SMALL_SCENE.replace("seed = 3", "seed = 'three'"), agents={"alice": ALICE})
        with pytest.raises(ContentError, match=rf"{path}: Expected `int`, got `str` - at `\$.seed`"):
            load_scene(str(path))

    def test_a_cast_member_with_no_agent_file(self, tmp_path: Path) -> None:
        path = write_scene(tmp_path, SMALL_SCENE)
        with pytest.raises(ContentError, match=rf"{path}: cast member 'alice' has no agent file"):
            load_scene(str(path))

    def test_a_narrator_with_no_agent_file(self, tmp_path: Path) -> None:
        path = write_scene(tmp_path, SMALL_SCENE.replace("seed = 3", "seed = 3\nnarrator = 'bard'"), agents={"alice": ALICE})
        with pytest.raises(ContentError, match=rf"{path}: narrator 'bard' has no agent file"):
            load_scene(str(path))

    def test_a_beat_speaker_not_in_the_cast(self, tmp_path: Path) -> None:
        path = write_scene(tmp_path, SMALL_SCENE.replace('speakers = ["alice"]', 'speakers = ["ghost"]'), agents={"alice": ALICE})
        with pytest.raises(ContentError, match=rf"{path}: beat speaker 'ghost' is not in the cast"):
            load_scene(str(path))

    def test_beats_without_speakers(self, tmp_path: Path) -> None:
        path = write_scene(tmp_path, SMALL_SCENE.replace('speakers = ["alice"]', "speakers = []"), agents={"alice": ALICE})
        with pytest.raises(ContentError, match="beats.per_tick is 1 but beats.speakers is empty"):
            load_scene(str(path))

    @pytest.mark.parametrize(
        ("old", "new", "message"),
        [
            ('rooms = ["hall", "cellar"]', "rooms = []", "Expected `array` of length >= 1"),
            ("platform_limit = 2", "platform_limit = -1", "Expected `int` >= 0"),
            ("per_tick = 1", "per_tick = -2", "Expected `int` >= 0"),
        ],
    )
    def test_bad_values(self, tmp_path: Path, old: str, new: str, message: str) -> None:
        path = write_scene(tmp_path, SMALL_SCENE.replace(old, new), agents={"alice": ALICE})
        with pytest.raises(ContentError, match=rf"{path}: {message}"):
            load_scene(str(path))

    def test_an_unreadable_agent_file(self, tmp_path: Path) -> None:
        path = write_scene(tmp_path, SMALL_SCENE)
        write_agent(tmp_path / "agents", "alice", "")
        (tmp_path / "agents" / "alice.toml").write_bytes(b"name = '\xff'\n")
        with pytest.raises(ContentError, match=r"alice.toml: cannot read"):
            load_scene(str(path))


class TestAgentFilesOfAScene:
    """A scene's own agent files are found beside it however its path is spelled — the
    name from its folder, a relative path, the absolute path — and when one is missing,
    the error names every folder searched. (``--scene auction.toml`` from its folder
    looked in the wrong place.)"""

    @pytest.mark.parametrize("layout", ["agents beside the scene", "scenes/ and agents/"])
    @pytest.mark.parametrize("spelling", ["name from its folder", "relative from above", "absolute"])
    def test_found_however_the_path_is_spelled(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str, spelling: str) -> None:
        game = tmp_path / "game"
        folder = game if layout == "agents beside the scene" else game / "scenes"
        agents = game / "agents"
        folder.mkdir(parents=True, exist_ok=True)
        agents.mkdir(parents=True, exist_ok=True)
        (folder / "auction.toml").write_text(SMALL_SCENE, encoding="utf-8")
        (agents / "alice.toml").write_text(ALICE, encoding="utf-8")
        cwd, name = {
            "name from its folder": (folder, "auction.toml"),
            "relative from above": (tmp_path, str((folder / "auction.toml").relative_to(tmp_path))),
            "absolute": (tmp_path / "elsewhere", str(folder / "auction.toml")),
        }[spelling]
        cwd.mkdir(exist_ok=True)
        monkeypatch.chdir(cwd)
        assert "alice" in load_scene(name).characters

    def test_the_error_names_every_folder_searched(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        (tmp_path / "game").mkdir()
        (tmp_path / "game" / "auction.toml").write_text(SMALL_SCENE, encoding="utf-8")
        monkeypatch.chdir(tmp_path / "game")
        bundled = content_dir("agents")
        expected = f"auction.toml: cast member 'alice' has no agent file (looked for alice.toml in {tmp_path}/game/agents, {tmp_path}/agents, {bundled})"
        with pytest.raises(ContentError) as caught:
            load_scene("auction.toml")
        assert str(caught.value) == expected


WEREWOLF_SCENE = """\
name = "Village"
world = "werewolf"
seed = 5
cast = ["blacksmith", "miller", "innkeeper", "shepherd", "herbalist", "hunter"]
narrator = "village_narrator"

[rules]
werewolves = 1
"""


class TestWorldKeys:
    """A scene's keys are the shared ones and its world's own: each world says which."""

    def test_a_werewolf_scene_needs_no_rooms(self, tmp_path: Path) -> None:
        scene = load_scene(str(write_scene(tmp_path, WEREWOLF_SCENE)))
        assert scene.keys(WerewolfKeys) == WerewolfKeys(narrator="village_narrator")
        assert list(scene.others) == ["village_narrator", "summariser"]

    def test_a_werewolf_scene_from_before_with_rooms_still_loads(self, tmp_path: Path) -> None:
        """Every scene had to name its rooms: Werewolf takes them, and plays no room."""
        scene = load_scene(str(write_scene(tmp_path, WEREWOLF_SCENE.replace("seed = 5", 'seed = 5\nrooms = ["village"]'))))
        assert scene.keys(WerewolfKeys).rooms == ("village",)

    def test_a_manor_key_in_a_werewolf_scene_is_refused_by_name(self, tmp_path: Path) -> None:
        path = write_scene(tmp_path, WEREWOLF_SCENE + "[beats]\nper_tick = 1\n")
        with pytest.raises(ContentError, match=rf"^{path}: Object contains unknown field `beats`$"):
            load_scene(str(path))

    def test_a_manor_scene_without_rooms_is_refused(self, tmp_path: Path) -> None:
        path = write_scene(tmp_path, SMALL_SCENE.replace('rooms = ["hall", "cellar"]\n', ""), agents={"alice": ALICE})
        with pytest.raises(ContentError, match=rf"^{path}: Object missing required field `rooms`$"):
            load_scene(str(path))

    def test_a_typo_in_a_manor_key_names_the_file_and_the_key(self, tmp_path: Path) -> None:
        path = write_scene(tmp_path, SMALL_SCENE.replace("rooms =", "romos ="), agents={"alice": ALICE})
        with pytest.raises(ContentError, match=rf"^{path}: Object contains unknown field `romos`$"):
            load_scene(str(path))

    def test_world_keys_is_no_key_of_a_file(self, tmp_path: Path) -> None:
        path = write_scene(tmp_path, SMALL_SCENE.replace("seed = 3", "seed = 3\nworld_keys = {}"), agents={"alice": ALICE})
        with pytest.raises(ContentError, match="unknown field `world_keys`"):
            load_scene(str(path))

    def test_the_world_keys_are_kept_as_a_save_holds_them(self) -> None:
        """Plain data, the world's defaults filled in, arrays as lists."""
        scene = load_scene("tea_party")
        assert scene.spec.world_keys == {
            "rooms": ["conservatory", "garden"],
            "narrator": "narrator",
            "summariser": "summariser",
            "beats": {"per_tick": 1, "speakers": ["heiress"], "prompts": ["The teapot is empty again.", "A wasp lands on the scones."]},
        }
