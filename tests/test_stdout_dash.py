"""``-`` is standard output wherever a command writes a file, and a reader that stops
early (``| head -c 10``) ends the command quietly, exit 0. ``trace -o /dev/stdout | head``
ended with "Broken pipe", exit 1; ``-o -`` made a file named ``-``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from saves_fixture import SAVES

from manor.cli import main

SAVE = SAVES / "wacky_manor_pipeline.msav"
#: The subprocesses run this tree's Manor, wherever they run.
ENVIRONMENT = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}


def test_trace_to_dash_is_the_trace_on_stdout(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["trace", str(SAVE), "-o", "-"]) == 0
    out, err = capsys.readouterr()
    assert "traceEvents" in json.loads(out)
    assert err == "stdout: 928 trace events for 20 ticks; open it at https://ui.perfetto.dev\n"
    assert list(tmp_path.iterdir()) == []  # no file named "-"


def test_story_to_dash_is_the_story_on_stdout(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["story", str(SAVE), "-o", "-", "--format", "txt"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("   1 ") and err == "manor: wrote 280 story lines of 20 ticks to stdout\n"
    assert list(tmp_path.iterdir()) == []


def test_bench_plot_to_dash_says_why_not(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--quick", "--plot", "-"]) == 1
    assert capsys.readouterr().err == "manor: error: --plot -: the tables (or --json) go to stdout; name a .svg or .png file for the figures\n"


@pytest.mark.parametrize("command", ["trace", "story"])
@pytest.mark.parametrize("output", ["-", "/dev/stdout"])
def test_a_reader_that_stops_early_is_a_quiet_exit_0(tmp_path: Path, command: str, output: str) -> None:
    script = f"{sys.executable} -m manor {command} {SAVE} -o {output} | head -c 10 >/dev/null; echo ${{PIPESTATUS[0]}}"
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=ENVIRONMENT, capture_output=True, text=True, timeout=120)
    assert done.stdout == "0\n"
    assert "Broken pipe" not in done.stderr and "error" not in done.stderr
