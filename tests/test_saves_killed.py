"""A save whose run is killed with SIGKILL keeps its whole ticks, and they replay.

The run is a real ``python -m manor run`` subprocess on the real clock, with a scene
whose simulated calls take milliseconds and a tick interval that paces it, killed once
its save holds a few ticks.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from manor.cli import main
from manor.errors import SaveError
from manor.saves import read_save

from scenes_fixture import fixed_latency_scene

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")

def _run_until_killed(tmp_path: Path, ticks_wanted: int) -> tuple[Path, int]:
    """Start a run writing a save, SIGKILL it once the save has ``ticks_wanted`` ticks."""
    scene = fixed_latency_scene(tmp_path, 0.004, "quick")
    save = tmp_path / "killed.msav"
    env = {name: value for name, value in os.environ.items() if not name.startswith("MANOR_")}
    argv = [sys.executable, "-m", "manor", "run", "--scene", str(scene), "--clock", "real", "--ticks", "100000",
            "--tick-interval", "0.02", "--json", "--save", str(save)]  # fmt: skip
    process = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.communicate()[1].decode()
            assert time.monotonic() < deadline, "the run wrote too few ticks in 60 s"
            try:
                if len(read_save(save).ticks) >= ticks_wanted:
                    break
            except SaveError:
                pass  # not created yet, or caught inside its header
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.kill()  # no-op once it is dead
        _, err = process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL, err.decode()
    return save, len(read_save(save).ticks)


def test_a_killed_run_keeps_its_whole_ticks_and_replays_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    save_path, ticks = _run_until_killed(tmp_path, 5)
    save = read_save(save_path)
    assert ticks >= 5 and not save.finished
    assert [frame.record.tick for frame in save.ticks] == list(range(1, ticks + 1))
    assert main(["replay", str(save_path), "--verify", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report == {"ticks": ticks, "verified": True, "first_mismatch": None, "world_hash": save.ticks[-1].record.world_hash}

    # Killed in the middle of writing a frame: the torn frame is dropped with a warning.
    torn = tmp_path / "torn.msav"
    torn.write_bytes(save_path.read_bytes()[:-7])
    assert main(["replay", str(torn), "--verify", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["ticks"] == ticks - 1
    assert err.startswith(f"manor: warning: {torn}: the last frame (from byte ") and err.count("\n") == 1
