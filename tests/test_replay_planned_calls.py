"""A save must hold, tick by tick, exactly the calls its world planned: ``manor replay
--verify`` and ``manor story`` both refuse one with a call record taken out or added,
naming the tick and the call (a missing call would otherwise be drawn again from the
simulation and might rebuild the very same world)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from saves_fixture import SAVES, record, rewrite_payloads

from manor.cli import main

SAVE = SAVES / "wacky_manor_pipeline.msav"


def _edited(tmp_path: Path, source: Path, tick: int, change: Any) -> Path:
    """``source`` with ``change(calls)`` applied to the calls of tick ``tick``."""

    def edit(index: int, frame: Any) -> Any:
        if index == tick:  # frame 0 is the header; frame n is tick n
            change(frame["record"]["calls"])
        return frame

    path = tmp_path / "edited.msav"
    path.write_bytes(rewrite_payloads(source.read_bytes(), edit))
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("tick", [1, 2, 20])
def test_verify_names_the_tick_and_the_missing_call(capsys: pytest.CaptureFixture[str], tmp_path: Path, tick: int) -> None:
    removed: list[str] = []
    save = _edited(tmp_path, SAVE, tick, lambda calls: removed.append(f"{calls[0]['caller']} {calls[0]['agent']}") or calls.pop(0))
    code, out, _ = _run(capsys, "replay", str(save), "--verify")
    assert code == 1
    assert out.startswith(f"{save}: tick {tick} differs from the recording: the save does not hold the calls the world planned: ")
    assert f"13 calls recorded, 14 planned: no call of {removed[0]}" in out
    code, _, err = _run(capsys, "story", str(save))
    assert code == 1 and f"tick {tick} does not hold the calls its world planned (13 calls recorded, 14 planned: no call of {removed[0]})" in err


def test_verify_names_a_call_added_twice(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    save = _edited(tmp_path, SAVE, 3, lambda calls: calls.append(dict(calls[-1])))
    code, out, _ = _run(capsys, "replay", str(save), "--verify")
    assert code == 1 and "tick 3 differs" in out and "15 calls recorded, 14 planned: a call the world did not plan: " in out


def test_verify_json_reports_the_tick(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    save = _edited(tmp_path, SAVE, 5, lambda calls: calls.pop())
    code, out, _ = _run(capsys, "replay", str(save), "--verify", "--json")
    assert code == 1 and '"first_mismatch": 5' in out and '"verified": false' in out


@pytest.mark.parametrize("save", sorted(SAVES.glob("*.msav")), ids=lambda path: path.name)
def test_the_shipped_saves_still_verify_and_tell(capsys: pytest.CaptureFixture[str], save: Path) -> None:
    assert _run(capsys, "replay", str(save), "--verify")[0] == 0
    assert _run(capsys, "story", str(save))[0] == 0


@pytest.mark.parametrize("scene", ["werewolf_village", "tea_party"])
def test_every_bundled_world_verifies_and_tells(capsys: pytest.CaptureFixture[str], tmp_path: Path, scene: str) -> None:
    """Planning the ticks again (for the check) changes nothing in another world's story."""
    save = tmp_path / f"{scene}.msav"
    record(save, run__scene=scene, run__ticks=8)
    assert _run(capsys, "replay", str(save), "--verify")[0] == 0
    code, out, _ = _run(capsys, "story", str(save))
    assert code == 0 and "## Tick 8" in out
