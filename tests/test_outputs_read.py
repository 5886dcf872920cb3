"""No command writes over a file it reads: ``-o`` (story, trace) and ``--plot`` (bench)
onto the save or the scene, by its own path, another spelling, a symbolic link or a hard
link, is refused in one line and leaves the file as it was."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from saves_fixture import SAVES

from manor.cli import main

SAVE = SAVES / "wacky_manor_pipeline.msav"

#: How a user may name the save again: itself, another spelling, a link to it, a hard link.
SPELLINGS: dict[str, Callable[[Path], Path]] = {
    "itself": lambda save: save,
    "another spelling": lambda save: save.parent / "." / ".." / save.parent.name / save.name,
    "a symbolic link": lambda save: _symlink(save.parent / "link.md", save),
    "a hard link": lambda save: _hardlink(save.parent / "hard.json", save),
}


def _symlink(link: Path, target: Path) -> Path:
    link.symlink_to(target)
    return link


def _hardlink(link: Path, target: Path) -> Path:
    os.link(target, link)
    return link


@pytest.fixture
def save(tmp_path: Path) -> Path:
    copy = tmp_path / "saves" / "run.msav"
    copy.parent.mkdir()
    shutil.copyfile(SAVE, copy)
    return copy


@pytest.mark.parametrize("command", ["story", "trace"])
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_o_onto_the_save_is_refused(capsys: pytest.CaptureFixture[str], save: Path, command: str, spelling: str) -> None:
    """The save keeps every byte; the one line names the file and what it is."""
    before = save.read_bytes()
    output = SPELLINGS[spelling](save)
    assert main([command, str(save), "-o", str(output)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"manor: error: {output}: is the save being ") and err.endswith("; name another file\n")
    assert err.count("\n") == 1
    assert save.read_bytes() == before


def test_story_to_stdout_appended_to_the_save_is_refused(tmp_path: Path, save: Path) -> None:
    """``manor story SAVE >> SAVE``: standard output is the save itself."""
    import subprocess
    import sys

    before = save.read_bytes()
    with open(save, "ab") as appended:
        done = subprocess.run([sys.executable, "-m", "manor", "story", str(save)], stdout=appended, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr == f"manor: error: stdout: is the save being told ({save}); name another file\n"
    assert save.read_bytes() == before


def test_bench_plot_onto_the_scene_file_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A .svg name that links to the scene file being benchmarked: refused before any suite."""
    scene = tmp_path / "scene.toml"
    shutil.copyfile(Path(__file__).resolve().parent.parent / "scenes" / "wacky_manor.toml", scene)
    before = scene.read_bytes()
    plot = _symlink(tmp_path / "figures.svg", scene)
    assert main(["bench", "--quick", "--suite", "scheduling", "--scene", str(scene), "--plot", str(plot)]) == 1
    assert capsys.readouterr().err == f"manor: error: {plot}: is the scene file ({scene}); name another file\n"
    assert scene.read_bytes() == before


@pytest.mark.parametrize("command", ["run", "play"])
def test_save_with_force_onto_the_scene_or_config_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    """--force may replace a save, never the scene file or manor.toml the run reads."""
    monkeypatch.chdir(tmp_path)
    scene = tmp_path / "scenes" / "mine.toml"
    scene.parent.mkdir()
    shutil.copyfile(Path(__file__).resolve().parent.parent / "scenes" / "wacky_manor.toml", scene)
    (tmp_path / "agents").symlink_to(Path(__file__).resolve().parent.parent / "agents")
    config = tmp_path / "manor.toml"
    config.write_text("[run]\nticks = 1\n", encoding="utf-8")
    for target, what in ((scene, "the scene file"), (config, "the config file")):
        before = target.read_bytes()
        assert main([command, "--scene", str(scene), "--save", str(target), "--force"]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"manor: error: {target}: is {what} (") and err.count("\n") == 1
        assert target.read_bytes() == before
