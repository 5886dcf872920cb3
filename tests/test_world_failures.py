"""A bug in a user's world is reported as theirs: the world, its file, the method and
the tick, and what the save holds — not ``manor: internal error: KeyError``, which says
Manor has a bug."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import pytest
import trio

from manor.cli import main
from manor.errors import ContentError, WorldError
from manor.worlds.failures import world_code
from manor.saves import read_save

SCENES = Path(__file__).resolve().parent.parent / "scenes"
_modules = itertools.count()


def _world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str, at_tick: int) -> tuple[str, str]:
    """A manor world whose ``method`` raises ``KeyError('boom')`` at ``at_tick``, in a
    module of its own, and a scene playing it; (scene path, module file name)."""
    module = f"auction_{next(_modules)}"
    body = {
        "apply": "    def apply(self, records):\n        if self.tick + 1 == AT:\n            {}['boom']\n        return super().apply(records)\n",
        "plan": "    def plan(self):\n        if self.tick + 1 == AT:\n            {}['boom']\n        return super().plan()\n",
        "from_scene": "    @classmethod\n    def from_scene(cls, scene, rng):\n        {}['boom']\n",
    }[method]
    (tmp_path / f"{module}.py").write_text(
        f"from manor.worlds.manor import ManorWorld\n\nAT = {at_tick}\n\n\nclass Auction(ManorWorld):\n    name = 'auction'\n\n{body}", encoding="utf-8"
    )
    scene = tmp_path / "auction.toml"
    shutil.copyfile(SCENES / "wacky_manor.toml", scene)
    text = scene.read_text(encoding="utf-8").replace('name = "The Wacky Manor"', f'name = "Auction"\nworld = "{module}:Auction"', 1)
    scene.write_text(text, encoding="utf-8")
    (tmp_path / "agents").symlink_to(SCENES.parent / "agents")
    monkeypatch.chdir(tmp_path)
    return str(scene), f"{module}.py"


@pytest.mark.parametrize("method", ["apply", "plan"])
def test_a_run_names_the_world_method_and_tick_and_what_the_save_holds(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    scene, file = _world(tmp_path, monkeypatch, method, at_tick=3)
    assert main(["run", "--scene", scene, "--ticks", "5", "--save", "a.msav"]) == 1
    err = capsys.readouterr().err
    assert err == f"manor: error: world 'auction' ({file}) failed in {method} at tick 3: KeyError: 'boom' — the run stopped after 2 ticks; saved to a.msav\n"
    save = read_save(Path("a.msav"))
    assert len(save.ticks) == 2 and not save.warnings  # closed with its end frame
    assert main(["replay", "a.msav", "--verify"]) == 0


def test_from_scene(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scene, file = _world(tmp_path, monkeypatch, "from_scene", at_tick=0)
    assert main(["run", "--scene", scene, "--ticks", "1"]) == 1
    assert capsys.readouterr().err == f"manor: error: world 'auction' ({file}) failed in from_scene at tick 0: KeyError: 'boom'\n"


def test_debug_shows_the_worlds_own_traceback(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scene, file = _world(tmp_path, monkeypatch, "apply", at_tick=1)
    assert main(["--debug", "run", "--scene", scene, "--ticks", "2"]) == 1
    err = capsys.readouterr().err
    assert f'{file}", line' in err and "{}['boom']" in err


class _World:
    name = "auction"


@pytest.mark.parametrize("raised", [KeyError("boom"), ExceptionGroup("two", [KeyError("a"), ValueError("b")])])
def test_whatever_else_a_world_raises_is_the_worlds(raised: Exception) -> None:
    """``world_code`` names the world, the method and the tick, the original its cause."""
    with pytest.raises(WorldError, match=r"world 'auction' \(test_world_failures.py\) failed in plan at tick 3: ") as caught:
        with world_code(_World(), "plan", 3):
            raise raised
    assert caught.value.__cause__ is raised


@pytest.mark.parametrize("raised", [ContentError("a scene's mistake"), KeyboardInterrupt(), trio.Cancelled._create()])
def test_manor_errors_and_interruptions_pass_through_world_code_as_they_are(raised: BaseException) -> None:
    """A ``ManorError`` says what it says; an interruption or a cancellation is not the
    world's bug."""
    with pytest.raises(type(raised)) as caught:
        with world_code(_World(), "apply", 1):
            raise raised
    assert caught.value is raised
    with world_code(_World(), "apply", 1):
        pass  # nothing raised: nothing said
