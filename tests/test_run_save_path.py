"""``manor run --save PATH`` says where the run went (on stderr, so --json stays pure), and
git ignores a user's saves but keeps the committed examples."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from manor.cli import main
from manor.saves import read_save

ROOT = Path(__file__).resolve().parent.parent

# No manor.toml from the working directory, no MANOR_* from the environment.
pytestmark = pytest.mark.usefixtures("isolated")


@pytest.mark.parametrize("json_flag", [["--json"], []], ids=["json", "tables"])
def test_run_names_the_save_in_one_line_on_stderr(capsys: pytest.CaptureFixture[str], tmp_path: Path, json_flag: list[str]) -> None:
    path = tmp_path / "mine.msav"
    assert main(["run", "--ticks", "3", *json_flag, "--save", str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.err == f"manor: saved 3 ticks to {path}\n"
    assert str(path) not in captured.out
    if json_flag:
        assert json.loads(captured.out)["ticks"] == 3  # stdout is the JSON object alone
    assert len(read_save(path).ticks) == 3


def test_run_without_save_says_nothing_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--ticks", "1", "--json"]) == 0
    assert capsys.readouterr().err == ""


def test_git_ignores_saves_but_the_two_examples() -> None:
    git = shutil.which("git")
    assert git is not None and (ROOT / ".git").exists(), "run from a git checkout of Manor"
    paths = ["saves/mine.msav", "saves/wacky_manor-20250101-120000.msav", "saves/wacky_manor_legacy.msav", "saves/wacky_manor_pipeline.msav"]
    # --no-index: as if none were tracked; -v -n: every path, with the rule that decided it.
    done = subprocess.run([git, "check-ignore", "--no-index", "-v", "-n", *paths], cwd=ROOT, capture_output=True, text=True, timeout=60)
    rules = {line.split("\t")[1]: line.split("\t")[0] for line in done.stdout.splitlines()}
    ignored = {path for path, rule in rules.items() if rule.split(":", 2)[2] and not rule.split(":", 2)[2].startswith("!")}
    assert ignored == {"saves/mine.msav", "saves/wacky_manor-20250101-120000.msav"}
