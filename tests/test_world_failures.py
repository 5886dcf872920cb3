"""A bug in a user's world is reported as theirs: the world, its file, the method and
the tick, and what the save holds — not ``manor: internal error: KeyError``, which says
Manor has a bug."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import pytest

from manor.cli import main
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
