"""``manor story``: a save's story rebuilt from its calls, as Markdown, text or JSON Lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from manor.cli import main
from manor.saves import read_save
from saves_fixture import SAVES, rewrite_payloads

LEGACY = SAVES / "wacky_manor_legacy.msav"


def story(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["story", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_jsonl_has_one_entry_per_call_with_its_fallback(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = story(capsys, str(LEGACY), "--format", "jsonl")
    assert code == 0 and err == ""
    entries = [json.loads(line) for line in out.splitlines()]
    save = read_save(LEGACY)
    assert len(entries) == sum(len(frame.record.calls) for frame in save.ticks) == 280
    degraded = [e for e in entries if e["fallback"]]
    assert len(degraded) == 20 and {(e["caller"], e["fallback"], e["reason"]) for e in degraded} == {("scene_beat", "speechless", "platform_rejected")}
    first = entries[0]
    assert (first["tick"], first["caller"], first["speaker"]) == (1, "character", "Hobbes") and first["text"].startswith("Very good.")


def test_markdown_has_a_heading_per_tick_and_marks_degraded_turns(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = story(capsys, str(LEGACY))
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "# The Wacky Manor"
    assert [line for line in lines if line.startswith("## ")] == [f"## Tick {n}" for n in range(1, 21)]
    # Recorded in format 4, the save keeps what refused the call (format 1 kept only the reason).
    assert "- _beat · **The Grey Lady**: ⚠ speechless (platform_rejected: platform full: 6 of 6 sessions in use)_" in lines


def test_a_format_2_save_tells_what_failed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    save = tmp_path / "legacy.msav"
    assert main(["run", "--policy", "legacy", "--ticks", "2", "--json", "--save", str(save)]) == 0
    capsys.readouterr()
    code, out, _ = story(capsys, str(save), "--format", "txt")
    assert code == 0
    refused = [line for line in out.splitlines() if "⚠" in line]
    assert refused and all(line.endswith("⚠ speechless (platform_rejected: platform full: 6 of 6 sessions in use)") for line in refused)


def test_o_writes_the_file_in_the_format_its_suffix_names(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    output = tmp_path / "story.jsonl"
    code, out, err = story(capsys, str(LEGACY), "-o", str(output))
    assert (code, out) == (0, "")
    assert err == f"manor: wrote 280 story lines of 20 ticks to {output}\n"
    assert len(output.read_text(encoding="utf-8").splitlines()) == 280
    json.loads(output.read_text(encoding="utf-8").splitlines()[-1])


def test_an_altered_save_is_refused_in_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A call's text changed, checksums made good again: the world no longer rebuilds."""

    def alter(index: int, frame: dict) -> dict:
        if index == 3:
            frame["record"]["calls"][0]["text"] = "Something else entirely."
        return frame

    altered = tmp_path / "altered.msav"
    altered.write_bytes(rewrite_payloads(LEGACY.read_bytes(), alter))
    code, out, err = story(capsys, str(altered))
    assert (code, out) == (1, "")
    assert err == f"manor: error: {altered}: tick 3 does not rebuild the recorded world; its story cannot be told\n"


def test_a_missing_save_and_a_bad_format_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert story(capsys, str(tmp_path / "nope.msav"))[:2] == (1, "")
    with pytest.raises(SystemExit) as exit:
        main(["story", str(LEGACY), "--format", "pdf"])
    assert exit.value.code == 2
    assert "invalid choice: 'pdf'" in capsys.readouterr().err


def test_markdown_folds_mass_degradations_and_text_keeps_every_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A gate whose wait is a second idles most of the manor: Markdown says so in one line
    naming every idle character; text and JSON Lines keep a line per entry."""
    save = tmp_path / "idle.msav"
    assert main(["run", "--gate-timeout", "1", "--ticks", "1", "--json", "--save", str(save)]) == 0
    capsys.readouterr()
    idle = [call for call in read_save(save).records[0].calls if call.caller == "character" and not call.ok]
    assert len(idle) >= 5 and len({call.error for call in idle}) == 1
    code, out, _ = story(capsys, str(save))
    assert code == 0
    [folded] = [line for line in out.splitlines() if "characters: idle" in line]
    speakers = read_save(save).scene.agents
    assert folded == (
        f"- _⚠ {len(idle)} characters: idle (gate_timeout: {idle[0].error}) — "
        + ", ".join(speakers[call.agent].name for call in idle)
        + "_"
    )
    assert sum("⚠ idle" in line for line in out.splitlines()) == 0
    code, out, _ = story(capsys, str(save), "--format", "txt")
    assert sum("⚠ idle" in line for line in out.splitlines()) == len(idle)
