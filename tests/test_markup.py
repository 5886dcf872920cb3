"""Text from users, files and messages keeps its brackets: Rich markup never eats
``[bench]`` out of a hint, nor ``[bold]`` out of a file name."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from rich.console import Console
from rich.text import Text

from manor.bench.report import print_report
from manor.cli import main, output
from saves_fixture import SAVES
from test_play import drive, play_app, until

SCENES = Path(__file__).resolve().parent.parent / "scenes"

# No manor.toml from the working directory, no MANOR_* from the environment.
pytestmark = pytest.mark.usefixtures("isolated")


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wide enough that no cell wraps: a string checked is on one line."""
    monkeypatch.setenv("COLUMNS", "300")


def test_the_commands_console_prints_brackets_and_styles_with_text() -> None:
    console = output.console()
    console.record = True
    console.print("pip install 'manor[bench]'", Text("no", style="bold red"))
    assert console.export_text() == "pip install 'manor[bench]' no\n"


def test_bench_without_aiometer_says_which_extra(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aiometer", None)  # import fails
    assert main(["bench", "--suite", "overhead", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "unavailable: aiometer is not installed (pip install 'manor[bench]')" in out
    assert "(pip install 'manor')" not in out


def test_the_bench_targets_are_styled_with_text_not_markup() -> None:
    """On a console without markup, the report's colours show as colours, not as tags."""
    console = Console(record=True, markup=False, width=300)
    targets = [
        {"target": "a", "goal": "g [x]", "value": 1.0, "met": False, "note": "see [bench]"},
        {"target": "b", "goal": "g", "value": None, "met": True},
    ]
    print_report(console, {"targets": targets})
    text = console.export_text()
    assert "g [x]" in text and "no (see [bench])" in text and "yes" in text
    assert "[bold" not in text and "[green" not in text and "[/]" not in text


def test_config_shows_a_scene_path_and_a_config_path_with_brackets(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = tmp_path / "[x]"
    folder.mkdir()
    scene = folder / "tea[bold].toml"
    shutil.copy(SCENES / "tea_party.toml", scene)
    config = folder / "manor[red].toml"
    config.write_text("[gate]\ntimeout_s = 20\n", encoding="utf-8")
    assert main(["config", "--scene", str(scene), "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert str(scene) in out and "scene tea[bold].toml" in out and str(config) in out


def test_replay_title_keeps_the_save_name(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    save = tmp_path / "run[bold].msav"
    shutil.copy(SAVES / "wacky_manor_legacy.msav", save)
    assert main(["replay", save.name, "--policy", "pipeline"]) == 0  # the working directory is tmp_path
    assert "run[bold].msav — 20 ticks replayed with --policy pipeline" in capsys.readouterr().out


def test_play_notifies_a_save_path_as_it_is(tmp_path: Path) -> None:
    """The dashboard's "saved" notice takes the path as text, not as markup."""
    path = tmp_path / "run[bold].msav"
    app = play_app(save=path)

    async def scenario(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("n")
        await until(pilot, lambda: app.state.tick == 1, "tick 1")
        await pilot.press("s")
        await until(pilot, lambda: any(n.title == "saved" for n in app.notices), "the saved notice")
        await pilot.press("q")

    drive(app, scenario)
    # The start's "recording to PATH", then the save's own notice: both take it as text.
    starting, saved = app.notices
    assert starting.message.startswith(f"recording to {path}") and not starting.markup
    assert saved.message.startswith(f"{path}: 1 tick saved") and not saved.markup


def test_run_keeps_a_scene_name_with_brackets(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    scene = tmp_path / "tea.toml"
    scene.write_text((SCENES / "tea_party.toml").read_text(encoding="utf-8").replace('name = "', 'name = "[b]', 1), encoding="utf-8")
    assert main(["run", "--scene", str(scene), "--ticks", "1"]) == 0
    assert "[b]" in capsys.readouterr().out
