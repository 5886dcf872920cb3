"""Content: agent and scene TOML files, how they are found, and what a bad one says."""

from __future__ import annotations

from pathlib import Path

import pytest
from scenes_fixture import write_agent, write_scene

from manor.content import bundled_scenes, content_dir, generated_cast, load_scene
from manor.errors import ContentError

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
        assert len(scene.characters) == 10
        assert scene.narrator[0] == "narrator" and scene.narrator[1].role == "narrator"
        assert scene.summariser[0] == "summariser" and scene.summariser[1].role == "summariser"
        assert scene.spec.beats.per_tick == 2
        assert scene.spec.platform_limit == 6
        assert all(agent.role == "character" for agent in scene.characters.values())
        assert list(scene.characters) == list(scene.spec.cast)
        assert set(scene.spec.beats.speakers) <= set(scene.characters)

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
        assert scene.narrator[1].name == "Narrator"  # bundled

    def test_generated_cast_replaces_the_scene_cast(self) -> None:
        scene = load_scene("wacky_manor", agents=25)
        assert len(scene.characters) == 25
        assert scene.spec.cast == tuple(scene.characters)
        assert set(scene.spec.beats.speakers) <= set(scene.characters)
        assert len(scene.spec.beats.speakers) == 6

    def test_generated_cast_is_the_same_for_the_same_seed(self) -> None:
        spec = load_scene("wacky_manor").spec
        first, second = generated_cast(12, spec), generated_cast(12, spec)
        assert first == second
        assert list(first) == [f"guest_{i:02d}" for i in range(1, 13)]
        assert all(0.8 <= agent.sim.latency_s <= 2.4 for agent in first.values())
        assert all(agent.start_room in spec.rooms for agent in first.values())
        other = generated_cast(12, load_scene("tea_party").spec)
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
